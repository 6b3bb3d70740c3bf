import type { FastifyReply, FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import t, { type Test } from 'tap'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { MemorySessionStore } from '#src/session/memory-store'
import { connectRedis, firstConnection, type RedisClient } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisSessionStore } from '#src/session/redis-store'
import type { Session, SessionStore } from '#src/session/types'
import { manualClock, type ManualClock } from '../fixtures/clock.ts'
import { startCluster } from '../fixtures/redis-cluster.ts'
import { startRedis } from '../fixtures/redis.ts'
import { jarReply } from '../fixtures/cookie-jar.ts'

// session.maxSessionsPerUser in every server-side store: one account signing in over and over
// churns through its own sessions only, its oldest first; nobody else's session goes, and the
// memory store's global bound is not what stops it. The Redis store enforces it in its store
// script, on one node and on Cluster (the user's keys share a hash tag), and every key it writes
// expires.

const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
const MAX_AGE = 3600
const PER_USER = 3
const PREFIX = 'per-user:'

interface Kind {
  name: string
  store(t: Test, clock: ManualClock, cookies: GatewayCookies): Promise<{ store: SessionStore & { evictions: Readonly<Record<string, number>> }; raw?: Redis }>
}

async function redisClient(t: Test, client: RedisClient): Promise<RedisClient> {
  t.teardown(() => client.disconnect())
  await firstConnection(client, 5000)
  return client
}

const KINDS: Kind[] = [
  {
    name: 'memory',
    async store(t, clock, cookies) {
      const store = new MemorySessionStore(cookies, MAX_AGE, { maxSessions: 1000, maxSessionsPerUser: PER_USER }, clock)
      t.teardown(() => store.close())
      return { store }
    },
  },
  {
    name: 'redis (one node)',
    async store(t, clock, cookies) {
      const server = await startRedis(t)
      const redis = await redisClient(t, await connectRedis({ url: server.url, timeoutMs: 2000 }, pino({ level: 'silent' })))
      const raw = new Redis(server.url, { maxRetriesPerRequest: 0 })
      t.teardown(() => raw.disconnect())
      const cipher = new CookieCipher([SECRET], clock)
      return {
        store: new RedisSessionStore({ redis, keys: new RedisKeys(PREFIX), cookies, cipher, maxAgeSeconds: MAX_AGE, maxSessionsPerUser: PER_USER, clock }),
        raw,
      }
    },
  },
  {
    name: 'redis (cluster)',
    async store(t, clock, cookies) {
      const cluster = await startCluster(t)
      const redis = await redisClient(
        t,
        await connectRedis(
          { topology: { kind: 'cluster', nodes: cluster.nodes, passthroughDns: false, tls: false }, timeoutMs: 2000 },
          pino({ level: 'silent' }),
        ),
      )
      const cipher = new CookieCipher([SECRET], clock)
      return {
        store: new RedisSessionStore({ redis, keys: new RedisKeys(PREFIX), cookies, cipher, maxAgeSeconds: MAX_AGE, maxSessionsPerUser: PER_USER, clock }),
      }
    },
  },
]

function request(jar: Record<string, string>): FastifyRequest {
  return { cookies: { ...jar }, url: '/x' } as unknown as FastifyRequest
}

for (const kind of KINDS) {
  t.test(`${kind.name}: a user beyond session.maxSessionsPerUser loses their oldest sessions only`, async (t) => {
    // Real time: Redis expires keys by its own clock.
    const clock = manualClock(Date.now())
    const cipher = new CookieCipher([SECRET], clock)
    const cookies = new GatewayCookies({ name: 'ogw', secrets: [SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)
    const { store, raw } = await kind.store(t, clock, cookies)
    let n = 0
    async function signIn(sub: string): Promise<Record<string, string>> {
      const { jar, reply } = jarReply()
      const createdAt = Math.floor(clock.now() / 1000)
      const session: Session = {
        id: `${sub}-${++n}-0123456789abcdef`,
        claims: { sub, sid: `sid-${n}` },
        accessToken: `at-${n}`,
        expiresAt: createdAt + 300,
        createdAt,
        provider: 'default',
      }
      await store.create(request(jar), reply, session)
      clock.advance(1000)
      return jar
    }
    const bob = await signIn('bob')
    const alice: Array<Record<string, string>> = []
    for (let i = 0; i < PER_USER + 2; i++) alice.push(await signIn('alice'))
    const live = await Promise.all(alice.map(async (jar) => (await store.load(request(jar))) !== undefined))
    t.same(live, [false, false, true, true, true], "alice's two oldest sign-ins are gone, her last three kept")
    t.ok(await store.load(request(bob)), "bob's session survives alice's sign-ins")
    t.equal(store.evictions.user_limit, 2, 'two evictions counted, reason user_limit')
    t.equal(store.evictions.store_full, 0)

    // An update (a refresh) neither counts nor evicts.
    const kept = alice[4] ?? {}
    const session = await store.load(request(kept))
    if (session === undefined) throw new Error('no session')
    const noCookies = { setCookie: () => noCookies } as unknown as FastifyReply
    t.equal(await store.update(request(kept), noCookies, { ...session, accessToken: 'refreshed' }), true)
    t.equal(store.evictions.user_limit, 2)
    t.same(await Promise.all(alice.map(async (jar) => (await store.load(request(jar))) !== undefined)), [false, false, true, true, true])

    // A sign-out leaves a place that the next sign-in takes before anything is evicted.
    await store.destroy(request(alice[2] ?? {}), noCookies)
    alice.push(await signIn('alice'))
    t.same(await Promise.all(alice.map(async (jar) => (await store.load(request(jar))) !== undefined)), [false, false, false, true, true, true])
    t.equal(store.evictions.user_limit, 2, 'the signed-out session is no eviction')

    if (raw !== undefined) {
      const keys = await raw.keys(`${PREFIX}*`)
      t.equal(keys.filter((k) => k.includes(':session:')).length, 4, 'Redis holds alice three sessions and bob one')
      for (const key of keys) t.ok((await raw.ttl(key)) > 0, `${key.replace(/\{.*\}/, '{user}')} expires`)
    }
  })
}
