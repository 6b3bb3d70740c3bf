import t from 'tap'
import { Redis } from 'ioredis'
import { stringify } from 'yaml'
import { buildStandaloneApp } from '#src/runtime/process-state'
import { parseConfig } from '#src/config/load'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { COOKIE_SECRET } from '../fixtures/stack.ts'

// The gateway's start with session.store: redis, without a provider (none is needed to read a
// session): it waits briefly for Redis, and starts anyway when Redis is down.

const TIMEOUT_MS = 500

function config(redisUrl: string) {
  return parseConfig(
    stringify({
      server: { publicUrl: 'http://127.0.0.1:1' },
      // Nothing listens there: discovery keeps failing in the background, which reading sessions does not need.
      provider: { issuer: 'http://127.0.0.1:1', clientId: 'c', clientSecret: 's', allowInsecureHttp: true },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      session: { store: 'redis', redisUrl, redis: { timeoutMs: TIMEOUT_MS } },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:1' }],
      log: { level: 'silent' },
    }),
    {},
  )
}

/** A well-sealed reference to a session that does not exist: reading it needs Redis. */
const cookie = `ogw=${new CookieCipher([COOKIE_SECRET], systemClock).seal('session:ogw', { i: 'no-such-session', u: 'user-tag' }, Date.now() / 1000 + 60)}`
const request = { url: '/x', headers: { accept: 'application/json', cookie } }

t.test('at a normal start, the first request finds Redis connected', async (t) => {
  const redis = await startRedis(t)
  const app = await buildStandaloneApp(config(redis.url))
  t.teardown(() => app.close())
  const res = await app.http.inject(request)
  t.equal(res.statusCode, 401, 'the session is looked up (and not found), not 503')
})

t.test('Redis down at start: the gateway starts anyway, answers 503, and serves once Redis is up', async (t) => {
  const redis = await startRedis(t)
  await redis.stop()
  const started = Date.now()
  const app = await buildStandaloneApp(config(redis.url))
  t.teardown(() => app.close())
  t.ok(Date.now() - started < TIMEOUT_MS + 1000, 'the start waited at most about session.redis.timeoutMs')
  const down = await app.http.inject(request)
  t.equal(down.statusCode, 503)
  t.equal(down.json().code, 'session_store_unavailable')
  await redis.start()
  // The client reconnects in the background, with a backoff.
  const back = await eventually('an answer other than 503 once Redis is back', async () => {
    const status = (await app.http.inject(request)).statusCode
    return status === 503 ? undefined : status
  })
  t.equal(back, 401, 'Redis is used as soon as it is back, without a restart')
})

t.test('closing the app closes its Redis connection; it does not hang while Redis is down', async (t) => {
  const redis = await startRedis(t)
  const observer = new Redis(redis.url)
  t.teardown(() => observer.disconnect())
  const gatewayClients = async (): Promise<number> =>
    String(await observer.client('LIST'))
      .split('\n')
      .filter((line) => line.includes('name=openid-gateway')).length
  const app = await buildStandaloneApp(config(redis.url))
  t.equal(await gatewayClients(), 1, 'one connection per gateway process')
  await app.close()
  // QUIT is answered before the server has dropped the client from its list.
  t.equal(await eventually('the connection leaves the client list', async () => (await gatewayClients()) === 0), true, 'closed with the app')

  const second = await buildStandaloneApp(config(redis.url))
  await redis.stop()
  const started = Date.now()
  await second.close()
  t.ok(Date.now() - started < TIMEOUT_MS * 3, 'close does not hang on an unreachable Redis')
})

t.test('a session cookie from a release before hash tags (no user tag) is no session: 401, and the user signs in again', async (t) => {
  const redis = await startRedis(t)
  const app = await buildStandaloneApp(config(redis.url))
  t.teardown(() => app.close())
  const legacy = `ogw=${new CookieCipher([COOKIE_SECRET], systemClock).seal('session:ogw', { i: 'an-old-session' }, Date.now() / 1000 + 60)}`
  const res = await app.http.inject({ ...request, headers: { ...request.headers, cookie: legacy } })
  t.equal(res.statusCode, 401)
  t.equal(res.json().code, 'unauthenticated')
})
