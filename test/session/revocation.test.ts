import { once } from 'node:events'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { GatewayError } from '#src/contract/errors'
import { MemoryRevocationList, REFRESH_MS, RedisRevocationList, type RevocationList } from '#src/session/revocation'
import { RedisKeys } from '#src/session/redis-keys'
import { selects, type Session } from '#src/session/types'
import { manualClock, type ManualClock } from '../fixtures/clock.ts'
import { startRedis } from '../fixtures/redis.ts'

// The cookie store's revocation list, in memory and in a real Redis: the sessions a back-channel
// logout (or a Shared Signals event naming a sid, a sub or an email) ended are refused, later
// sign-ins are not, entries go after the longest session lifetime, and the list never fails open
// (full in memory, Redis unreachable or emptied).

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

function withEmail(sub: string, email: string | undefined, createdAt: number, provider = 'default'): Pick<Session, 'claims' | 'createdAt' | 'provider'> {
  return { claims: email === undefined ? { sub } : { sub, email }, createdAt, provider }
}

/** The rules of `email` entries (a Shared Signals event naming its subject by address), for every list. */
async function emailRules(t: Test, list: RevocationList): Promise<void> {
  const alice = withEmail('alice', 'Alice@Example.com', T0 - 10)
  const aliceAgain = withEmail('alice-2', 'alice@example.com', T0)
  const atOther = withEmail('alice', 'alice@example.com', T0 - 10, 'other')
  const noEmail = withEmail('alice', undefined, T0 - 10)
  const bob = withEmail('bob', 'bob@example.com', T0 - 10)
  t.notOk(await list.isRevoked(alice), 'nothing revoked yet')

  await list.revoke({ provider: 'default', email: 'ALICE@example.COM' })
  t.ok(await list.isRevoked(alice), "the provider's session with that address is refused, compared case-insensitively")
  t.ok(await list.isRevoked(aliceAgain), 'whatever its sub, and created in the very second of the event too')
  t.notOk(await list.isRevoked(atOther), "another provider's session with the same address is not")
  t.notOk(await list.isRevoked(noEmail), 'a session without an email claim is not')
  t.notOk(await list.isRevoked(withEmail('alice', 42 as unknown as string, T0 - 10)), 'nor one whose email claim is not a string')
  t.notOk(await list.isRevoked(bob), 'another address is not')
  t.notOk(await list.isRevoked(withEmail('alice', 'alice@example.com', T0 + 1)), 'a sign-in after the event is not')

  await list.revoke({ provider: 'other', email: 'alice@example.com' })
  t.ok(await list.isRevoked(atOther), "the other provider's, once it names the address")
  t.notOk(await list.isRevoked(withEmail('alice', 'alice@example.com', T0 + 1)), 'still not the later sign-in at the first provider')
}

t.test('memory: email entries', async (t) => {
  await emailRules(t, new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: clock() }))
})

t.test('memory: an email entry keeps no address, and travels in entries and snapshots (server.workers)', async (t) => {
  const c = clock()
  // The primary's list, and a worker's copy that takes the primary's entries as IPC carries them (JSON).
  const primary = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: c })
  const worker = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: c })
  const entry = primary.add({ provider: 'default', email: 'Alice@Example.com' })
  t.notMatch(entry.key, /alice|example/i, 'the entry holds a digest, not the address')
  worker.apply(JSON.parse(JSON.stringify(entry)) as typeof entry)
  t.ok(await worker.isRevoked(withEmail('alice', 'alice@example.com', T0 - 10)), 'a worker refuses once the primary broadcast the entry')
  const late = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: c })
  late.restore(JSON.parse(JSON.stringify(primary.snapshot())) as ReturnType<typeof primary.snapshot>)
  t.ok(await late.isRevoked(withEmail('alice', 'ALICE@example.com', T0 - 10)), 'a worker started later refuses too (the snapshot)')
  t.notOk(await late.isRevoked(withEmail('bob', 'bob@example.com', T0 - 10)))
  t.notMatch(JSON.stringify(primary.snapshot()), /alice|example/i, 'the snapshot names nobody')
})

t.test('memory: email entries leave with the session lifetime and when full, as the others do', async (t) => {
  const c = clock()
  const list = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 2, clock: c })
  await list.revoke({ provider: 'default', email: 'alice@example.com' })
  c.advance(10_000)
  await list.revoke({ provider: 'default', email: 'bob@example.com' })
  c.advance(10_000)
  // Full: alice's entry is folded into the floor, which still refuses her session.
  await list.revoke({ provider: 'default', sid: 'sid-1' })
  t.equal(await list.size(), 2)
  t.ok(await list.isRevoked(withEmail('alice', 'alice@example.com', T0 - 5)), 'the folded email entry is still refused (by the floor)')
  t.notOk(await list.isRevoked(withEmail('alice', 'alice@example.com', T0 + 1)), 'its later sign-in is not: the entry is gone')
  t.ok(await list.isRevoked(withEmail('bob', 'bob@example.com', T0 + 5)), 'the email entry kept still refuses')
  c.advance(MAX_AGE * 1000)
  t.equal(await list.size(), 0, 'email entries expire with session.maxAgeSeconds')
  t.notOk(await list.isRevoked(withEmail('bob', 'bob@example.com', T0 + 5)))
})

t.test('selects: an email selector names the sessions of that provider carrying the address (the WebSockets an event closes)', async (t) => {
  const selector = { provider: 'default', email: 'ALICE@example.com' }
  t.ok(selects(selector, withEmail('alice', 'alice@Example.COM', T0)), 'case-insensitive, whatever the sub')
  t.notOk(selects(selector, withEmail('alice', 'alice@example.com', T0, 'other')), 'not at another provider')
  t.notOk(selects(selector, withEmail('alice', undefined, T0)), 'not a session without an email claim')
  t.notOk(selects(selector, withEmail('bob', 'bob@example.com', T0)))
})

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

/**
 * Two replicas' lists on one redis-server, started before the sessions of the test are created
 * (see the data-loss test), their clock then moved past that start.
 */
async function twoReplicas(t: Test) {
  const server = await startRedis(t)
  const c = clock((T0 - 100) * 1000)
  const a = new Redis(server.url)
  const b = new Redis(server.url)
  t.teardown(() => {
    a.disconnect()
    b.disconnect()
  })
  // A list starts once its client is connected: at the clock's time then.
  await Promise.all([once(a, 'ready'), once(b, 'ready')])
  const listA = new RedisRevocationList(a, { maxAgeSeconds: MAX_AGE, clock: c, keys: KEYS })
  const listB = new RedisRevocationList(b, { maxAgeSeconds: MAX_AGE, clock: c, keys: KEYS })
  c.advance(100_000)
  return { server, c, a, b, listA, listB }
}

t.test('redis: the same rules, and shared by every replica', async (t) => {
  const { c, listA, listB } = await twoReplicas(t)
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

t.test('redis: email entries, shared by every replica, and no address in Redis', async (t) => {
  const { c, a, listA, listB } = await twoReplicas(t)
  const carol = withEmail('carol', 'Carol@Example.com', T0 - 10)
  t.notOk(await listB.isRevoked(carol), 'replica B has read the (empty) list')

  await emailRules(t, listA)

  await listA.revoke({ provider: 'default', email: 'carol@example.com' })
  t.notOk(await listB.isRevoked(carol), 'another replica within REFRESH_MS may not know yet')
  c.advance(REFRESH_MS)
  t.ok(await listB.isRevoked(carol), 'and refuses once it has read the list again, case-insensitively')
  t.ok(await listB.isRevoked(withEmail('alice', 'alice@example.com', T0 - 10)), "the entries replica A wrote are replica B's too")
  t.notOk(await listB.isRevoked(withEmail('alice', 'alice@example.com', T0 + 1)), 'not a later sign-in')
  t.notOk(await listB.isRevoked(withEmail('dave', 'dave@example.com', T0 - 10)))
  const members = await a.zrange(KEYS.revocations(), '0', '-1')
  t.equal(members.length, 3)
  t.notMatch(members.join('\n'), /alice|carol|example/i, 'Redis holds digests, never an address')
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
  await once(redis, 'ready')
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
