import { once } from 'node:events'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { DEFAULT_PROVIDER } from '#src/options/types'
import { legacyReadings, MemoryRevocationList, RedisRevocationList, type RevocationList } from '#src/session/revocation'
import { RedisKeys } from '#src/session/redis-keys'
import { manualClock } from '../fixtures/clock.ts'
import { startRedis } from '../fixtures/redis.ts'

// A revocation names a subject of one provider: the default provider's `sub` "partners/alice" is
// not provider partners' "alice", nor the other way round, in memory and in Redis. Entries an
// earlier release wrote in Redis (`sub:partners/alice`, which could mean either) are read both
// ways until they expire: never the reading that would let an ended session through.

const T0 = 1_800_000_000
const MAX_AGE = 3600
const KEYS = new RedisKeys('test:')

async function noCollision(t: Test, list: RevocationList): Promise<void> {
  const defaultsAlice = { provider: DEFAULT_PROVIDER, claims: { sub: 'partners/alice', sid: 'partners/s1' }, createdAt: T0 - 10 }
  const partnersAlice = { provider: 'partners', claims: { sub: 'alice', sid: 's1' }, createdAt: T0 - 10 }
  await list.revoke({ provider: DEFAULT_PROVIDER, sub: 'partners/alice' })
  t.ok(await list.isRevoked(defaultsAlice), "the default provider's partners/alice is refused")
  t.notOk(await list.isRevoked(partnersAlice), "provider partners' alice is not")
  await list.revoke({ provider: 'partners', sid: 's1' })
  t.notOk(
    await list.isRevoked({ ...defaultsAlice, claims: { sub: 'bob', sid: 'partners/s1' } }),
    "provider partners' sid s1 is not the default provider's sid partners/s1",
  )
  t.ok(await list.isRevoked(partnersAlice), "partners' own session of sid s1 is")
}

t.test("memory: no key of one provider reads as another provider's", async (t) => {
  await noCollision(t, new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock: manualClock(T0 * 1000) }))
})

t.test('redis: the same, shared by replicas; entries of earlier releases are read both ways', async (t) => {
  const server = await startRedis(t)
  const clock = manualClock((T0 - 100) * 1000)
  const redis = new Redis(server.url)
  t.teardown(() => redis.disconnect())
  // A list starts once its client is connected: at the clock's time then.
  await once(redis, 'ready')
  const list = new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock, keys: KEYS })
  clock.advance(100_000)
  await noCollision(t, list)

  // As an earlier release wrote them: no separator after the default provider.
  await redis.zadd(KEYS.revocations(), T0, 'sub:partners/carol', T0, 'sub:dave')
  await redis.incr(KEYS.revocationsVersion())
  clock.advance(1000)
  t.ok(
    await list.isRevoked({ provider: DEFAULT_PROVIDER, claims: { sub: 'partners/carol' }, createdAt: T0 - 10 }),
    "an old entry refuses the default provider's partners/carol",
  )
  t.ok(
    await list.isRevoked({ provider: 'partners', claims: { sub: 'carol' }, createdAt: T0 - 10 }),
    "and provider partners' carol (it could have meant either)",
  )
  t.ok(
    await list.isRevoked({ provider: DEFAULT_PROVIDER, claims: { sub: 'dave' }, createdAt: T0 - 10 }),
    "an old entry without a slash is the default provider's",
  )
  t.notOk(await list.isRevoked({ provider: 'partners', claims: { sub: 'dave' }, createdAt: T0 - 10 }), "and no one else's")
})

t.test("legacyReadings: both readings of an old key, today's keys unchanged", async (t) => {
  t.same(legacyReadings('sub:partners/alice'), ['sub@default/partners/alice', 'sub@partners/alice'])
  t.same(legacyReadings('sid:abc'), ['sid@default/abc'])
  t.same(legacyReadings('sub:/x'), ['sub@default//x'], 'no provider has an empty name')
  t.same(legacyReadings('sub@partners/alice'), ['sub@partners/alice'])
  t.same(legacyReadings('email:digest'), ['email:digest'])
})
