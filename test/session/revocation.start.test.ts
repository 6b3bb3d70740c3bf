import type { FastifyRequest } from 'fastify'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { GatewayError } from '#src/contract/errors'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { CookieSessionStore } from '#src/session/cookie-store'
import { GatewayCookies } from '#src/session/cookies'
import { RedisKeys } from '#src/session/redis-keys'
import { REFRESH_MS, RedisRevocationList } from '#src/session/revocation'
import type { Session } from '#src/session/types'
import { manualClock, type ManualClock } from '../fixtures/clock.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { jarReply } from '../fixtures/cookie-jar.ts'

// The cookie store's revocation list in Redis refuses every session created before the list
// started (it cannot tell which of them a lost entry ended). So its start must never come after
// a session a replica handed out: not when the start written as the gateway came up was lost
// (its client not connected yet, as the gateway makes it), nor when Redis lost its data between
// the start and a sign-in. Before, the list then started at its first check, and a session
// signed in a second before that check was refused (401), or a sign-in went through while the
// list could not be written, to be refused at its first request.

const KEYS = new RedisKeys('test:')
const MAX_AGE = 3600
const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
// Real time: the cookies' lifetimes are counted from it.
const T0 = Math.floor(Date.now() / 1000)

/** A client as the gateway opens one (redis-client.ts): no offline queue, connecting in the background. */
function gatewayClient(t: Test, url: string): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1000, retryStrategy: () => 50 })
  redis.on('error', () => undefined)
  t.teardown(() => redis.disconnect())
  return redis
}

function cookieStore(clock: ManualClock, list: RedisRevocationList): CookieSessionStore {
  const cookies = new GatewayCookies(
    { name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' },
    new CookieCipher([SECRET], systemClock),
  )
  return new CookieSessionStore(cookies, MAX_AGE, clock, list)
}

/** Signs alice in at the clock's time; resolves the request that carries her cookies. */
async function signIn(store: CookieSessionStore, clock: ManualClock): Promise<FastifyRequest> {
  const { jar, reply } = jarReply()
  const createdAt = Math.floor(clock.now() / 1000)
  const session: Session = {
    id: 'id-1',
    claims: { sub: 'alice', sid: 'sid-1' },
    accessToken: 'access',
    expiresAt: createdAt + 300,
    createdAt,
    provider: 'default',
  }
  await store.create({ cookies: {}, url: '/' } as unknown as FastifyRequest, reply, session)
  return { cookies: jar, url: '/app' } as unknown as FastifyRequest
}

t.test('a list made before its client was connected starts once it is, not at its first check', async (t) => {
  const server = await startRedis(t)
  const clock = manualClock((T0 - 100) * 1000)
  const redis = gatewayClient(t, server.url)
  t.equal(redis.status === 'ready', false, 'not connected yet, as the gateway makes the list')
  const list = new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock, keys: KEYS })
  await once(redis, 'ready')
  // The list's own 'ready' listener came first: its start is ahead of this GET on the connection.
  t.equal(await redis.get(KEYS.revocationsSince()), String(T0 - 100), 'started as soon as connected, without a check')
  clock.advance(90_000)
  t.notOk(await list.isRevoked({ provider: 'default', claims: { sub: 'bob' }, createdAt: T0 - 20 }), 'a Bearer token issued before the first check passes')
})

t.test('a session signed in before the first check is not refused when the start written at startup was lost', async (t) => {
  const server = await startRedis(t)
  const clock = manualClock((T0 - 100) * 1000)
  const redis = gatewayClient(t, server.url)
  const list = new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock, keys: KEYS })
  const store = cookieStore(clock, list)
  clock.advance(90_000)
  await once(redis, 'ready')
  const alice = await signIn(store, clock)
  clock.advance(1000)
  t.equal((await store.load(alice))?.claims.sub, 'alice', 'her first request, a second later, is served')
})

t.test('a session signed in after Redis lost its data is not refused by the list started again after it', async (t) => {
  const server = await startRedis(t)
  const clock = manualClock((T0 - 100) * 1000)
  const redis = gatewayClient(t, server.url)
  await once(redis, 'ready')
  const list = new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock, keys: KEYS })
  const store = cookieStore(clock, list)
  clock.advance(10_000)
  t.notOk(await list.isRevoked({ provider: 'default', claims: { sub: 'bob' }, createdAt: T0 - 95 }), 'the list was read')
  // Restarted without persistence: the start is gone with the entries.
  await redis.flushall()
  clock.advance(80_000)
  const alice = await signIn(store, clock)
  clock.advance(REFRESH_MS)
  t.equal((await store.load(alice))?.claims.sub, 'alice', 'her next request is served')
  t.ok(await list.isRevoked({ provider: 'default', claims: { sub: 'bob' }, createdAt: T0 - 95 }), 'a session from before the loss is still refused')
})

t.test('a sign-in while the list cannot be reached fails with 503 instead of handing out a session it may refuse', async (t) => {
  const server = await startRedis(t)
  const clock = manualClock(T0 * 1000)
  const redis = gatewayClient(t, server.url)
  await once(redis, 'ready')
  const store = cookieStore(clock, new RedisRevocationList(redis, { maxAgeSeconds: MAX_AGE, clock, keys: KEYS }))
  await server.stop()
  const err = await signIn(store, clock).catch((e: unknown) => e)
  t.type(err, GatewayError)
  t.equal((err as GatewayError).code, 'session_store_unavailable')
})

t.test("a list made before its client was connected carries over an earlier release's list once connected", async (t) => {
  const server = await startRedis(t)
  const legacy = KEYS.legacyRevocations()
  const admin = new Redis(server.url)
  t.teardown(() => admin.disconnect())
  await admin.set(legacy.since, String(T0 - 5000))
  await admin.zadd(legacy.list, T0 - 200, 'sub:carol')
  const clock = manualClock(T0 * 1000)
  const list = new RedisRevocationList(gatewayClient(t, server.url), { maxAgeSeconds: MAX_AGE, clock, keys: KEYS })
  await eventually('the earlier list is carried over', async () => (await admin.exists(legacy.since)) === 0, 5000)
  t.equal(await admin.get(KEYS.revocationsSince()), String(T0 - 5000), 'with its earlier start')
  t.ok(await list.isRevoked({ provider: 'default', claims: { sub: 'carol' }, createdAt: T0 - 300 }), 'and its entries')
  t.notOk(await list.isRevoked({ provider: 'default', claims: { sub: 'dave' }, createdAt: T0 - 300 }), 'a session signed in before the upgrade is not refused')
})
