import { once } from 'node:events'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { GatewayError } from '../../src/contract/errors.js'
import { MemoryRevocationList, REFRESH_MS, RedisRevocationList, type RevocationList } from '../../src/session/revocation.js'
import { RedisKeys } from '../../src/session/redis-keys.js'
import type { Session } from '../../src/session/types.js'
import { manualClock, type ManualClock } from '../fixtures/clock.js'
import { startRedis } from '../fixtures/redis.js'

// The cookie store's revocation list, in memory and in a real Redis: the sessions a back-channel
// logout ended are refused, later sign-ins are not, entries go after the longest session
// lifetime, and the list never fails open (full in memory, Redis unreachable or emptied).

const MAX_AGE = 3600
const KEYS = new RedisKeys('test:')
const T0 = 1_800_000_000

const clock = (start = T0 * 1000): ManualClock => manualClock(start)

function session(sub: string, createdAt: number, sid?: string): Pick<Session, 'claims' | 'createdAt' | 'provider'> {
  return { claims: sid === undefined ? { sub } : { sub, sid }, createdAt, provider: 'default' }
}

/** The rules every list keeps; `c` is the list's clock. */
async function sharedRules(t: Test, list: RevocationList, c: ManualClock): Promise<void> {
  const before = session('alice', T0 - 10, 'sid-a')
  const otherSid = session('alice', T0 - 10, 'sid-b')
  const bob = session('bob', T0 - 10, 'sid-c')
  const noSid = session('carol', T0 - 10)
  t.notOk(await list.isRevoked(before), 'nothing revoked yet')

  await list.revoke({ provider: 'default', sid: 'sid-a', sub: 'alice' })
  t.ok(await list.isRevoked(before), 'the session of that sid is refused')
  t.notOk(await list.isRevoked(otherSid), "the same user's other provider session is not")
  t.notOk(await list.isRevoked(bob))
  // A provider session never comes back: even a "later" session with that sid is refused.
  t.ok(await list.isRevoked(session('alice', T0 + 100, 'sid-a')))

  await list.revoke({ provider: 'default', sub: 'carol' })
  t.ok(await list.isRevoked(noSid), 'every session of that sub created before the logout is refused')
  t.ok(await list.isRevoked(session('carol', T0, 'sid-x')), 'one created in the very second of the logout too')
  t.notOk(await list.isRevoked(session('carol', T0 + 1)), 'a sign-in after the logout is not')
  t.equal(await list.size(), 2)

  // Entries are kept for the longest session lifetime, then dropped.
  c.advance((MAX_AGE - 1) * 1000)
  t.ok(await list.isRevoked(before), 'still refused just before the session lifetime has passed')
  await list.revoke({ provider: 'default', sub: 'dave' })
  t.equal(await list.size(), 3)
  c.advance(2000)
  t.equal(await list.size(), 1, 'entries older than session.maxAgeSeconds are dropped')
  t.notOk(await list.isRevoked(session('alice', T0 + MAX_AGE + 1, 'sid-a')), 'no entry outlives the sessions it could refuse')
}

t.test('memory: sid, sub, session lifetime', async (t) => {
  const c = clock()
  await sharedRules(t, new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: c }), c)
})

t.test('memory: a re-revoked sub moves its time forward', async (t) => {
  const c = clock()
  const list = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: c })
  await list.revoke({ provider: 'default', sub: 'alice' })
  c.advance(60_000)
  t.notOk(await list.isRevoked(session('alice', T0 + 30)), 'signed in after the first logout')
  await list.revoke({ provider: 'default', sub: 'alice' })
  t.ok(await list.isRevoked(session('alice', T0 + 30)), 'and ended by the second')
  t.equal(await list.size(), 1)
})

t.test('memory: when full, the oldest entry becomes a floor, never a session that passes again', async (t) => {
  const c = clock()
  const list = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 2, clock: c })
  await list.revoke({ provider: 'default', sid: 'sid-1' })
  c.advance(10_000)
  await list.revoke({ provider: 'default', sid: 'sid-2' })
  c.advance(10_000)
  await list.revoke({ provider: 'default', sid: 'sid-3' })
  t.equal(await list.size(), 2, 'bounded')
  t.ok(await list.isRevoked(session('alice', T0 - 5, 'sid-1')), 'the evicted sid is still refused (by the floor)')
  t.ok(await list.isRevoked(session('bob', T0, 'other')), 'so is everyone signed in at or before its logout')
  t.notOk(await list.isRevoked(session('bob', T0 + 1, 'other')), 'later sign-ins are not')
  t.ok(await list.isRevoked(session('carol', T0 + 15, 'sid-2')), 'the entries kept still refuse')
})

t.test('redis: the same rules, and shared by every replica', async (t) => {
  const server = await startRedis(t)
  // The lists start before the sessions of the test are created (see the data-loss test).
  const c = clock((T0 - 100) * 1000)
  const a = new Redis(server.url)
  const b = new Redis(server.url)
  t.teardown(() => {
    a.disconnect()
    b.disconnect()
  })
  const listA = new RedisRevocationList(a, { maxAgeSeconds: MAX_AGE, clock: c, keys: KEYS })
  const listB = new RedisRevocationList(b, { maxAgeSeconds: MAX_AGE, clock: c, keys: KEYS })
  c.advance(100_000)
  const s = session('zed', T0 - 10, 'sid-z')
  t.notOk(await listB.isRevoked(s), 'replica B has read the (empty) list')

  await sharedRules(t, listA, c)

  t.notOk(await listB.isRevoked(s), 'replica B has just checked the list')
  await listA.revoke({ provider: 'default', sid: 'sid-z' })
  t.ok(await listA.isRevoked(s), 'the replica that received the logout refuses at once')
  c.advance(REFRESH_MS - 1)
  // Replica B trusts its copy for REFRESH_MS at most: the bounded delay across replicas.
  t.notOk(await listB.isRevoked(s), 'another replica within REFRESH_MS may not know yet')
  c.advance(1)
  t.ok(await listB.isRevoked(s), 'and refuses once it has checked again')
  t.equal(await listB.size(), 2)
})

t.test('redis: unreachable, the check fails with 503 instead of passing', async (t) => {
  const server = await startRedis(t)
  const c = clock((T0 - 100) * 1000)
  const redis = new Redis(server.url, { commandTimeout: 300, maxRetriesPerRequest: 0, enableOfflineQueue: false })
  t.teardown(() => redis.disconnect())
  await once(redis, 'ready')
  const list = new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock: c, keys: KEYS })
  c.advance(100_000)
  const s = session('alice', T0 - 10, 'sid-a')
  t.notOk(await list.isRevoked(s))
  await server.stop()
  c.advance(REFRESH_MS)
  const err = await list.isRevoked(s).catch((e: unknown) => e)
  t.type(err, GatewayError)
  t.equal((err as GatewayError).code, 'session_store_unavailable')
  t.equal((err as GatewayError).status, 503)
  const revokeErr = await list.revoke({ provider: 'default', sid: 'x' }).catch((e: unknown) => e)
  t.equal((revokeErr as GatewayError).code, 'session_store_unavailable', 'a logout that cannot be recorded fails')
  const sizeErr = await list.size().catch((e: unknown) => e)
  t.equal((sizeErr as GatewayError).code, 'session_store_unavailable')
})

t.test('redis: a list that lost its data refuses every session created before it started again', async (t) => {
  const server = await startRedis(t)
  const c = clock((T0 - 100) * 1000)
  const redis = new Redis(server.url)
  t.teardown(() => redis.disconnect())
  const list = new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock: c, keys: KEYS })
  c.advance(100_000)
  await list.revoke({ provider: 'default', sid: 'sid-a' })
  const ended = session('alice', T0 - 10, 'sid-a')
  const kept = session('bob', T0 - 10, 'sid-b')
  t.ok(await list.isRevoked(ended))
  t.notOk(await list.isRevoked(kept))
  await redis.flushall()
  c.advance(60_000)
  t.ok(await list.isRevoked(ended), 'the lost entry does not let its session back in')
  t.ok(await list.isRevoked(kept), 'nor can the list tell the others apart: they sign in again')
  t.notOk(await list.isRevoked(session('bob', T0 + 60, 'sid-new')), 'a sign-in after the restart works')
})
