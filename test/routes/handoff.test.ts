import { Redis } from 'ioredis'
import t from 'tap'
import { GatewayError } from '#src/contract/errors'
import { systemClock } from '#src/lib/clock'
import { JtiReplayGuard } from '#src/oidc/jti-replay'
import { Handoff, type HandoffRequestInput } from '#src/routes/handoff'
import { CookieCipher } from '#src/session/cipher'
import { CookieSessionStore } from '#src/session/cookie-store'
import { GatewayCookies } from '#src/session/cookies'
import { RedisKeys } from '#src/session/redis-keys'
import type { Session } from '#src/session/types'
import { jarReply } from '../fixtures/cookie-jar.ts'
import { startRedis } from '../fixtures/redis.ts'

// The hand-off (routes/handoff.ts) on two replicas that share Redis: a token used on one is refused
// on the other (the jti replay guard, oidc/jti-replay.ts, SET NX in Redis). The browser-level
// attacks are in test/e2e/several-domains-browser.test.ts.

const SECRET = 'cookie-secret-0123456789abcdef-0123456789'
const PUBLIC_URL = 'https://auth.example.com'
const MAX_AGE = 3600
const LOG = { info: () => undefined, warn: () => undefined }

/** One replica's hand-off: its own cipher, cookie store and Redis connection, the shared secret. */
function replica(redis: Redis): Handoff {
  const cookies = new GatewayCookies(
    { name: 'ogw', secrets: [SECRET], secure: true, sameSite: 'lax', credentialsPath: '/', domains: ['example.com', 'example.org'] },
    new CookieCipher([SECRET], systemClock),
  )
  return new Handoff({
    cookies,
    store: new CookieSessionStore(cookies, MAX_AGE, systemClock),
    bindIssuer: (session) => session,
    replay: new JtiReplayGuard({ redis, keys: new RedisKeys('handoff-test:'), clock: systemClock }),
    publicUrl: PUBLIC_URL,
    validateRedirectAfter: (value) => (value.startsWith('/') && !value.startsWith('//') ? value : null),
    sessionMaxAgeSeconds: MAX_AGE,
    nowSeconds: () => Math.floor(Date.now() / 1000),
  })
}

function at(host: string, url: string, cookies: Record<string, string>): HandoffRequestInput {
  return { url, host, cookies, ip: '127.0.0.1', log: LOG }
}

const query = (location: string): URLSearchParams => new URL(location, 'https://x').searchParams

t.test('a hand-off token used on one replica is refused on another that shares Redis', async (t) => {
  const server = await startRedis(t)
  const a = new Redis(server.url)
  const b = new Redis(server.url)
  t.teardown(() => {
    a.disconnect()
    b.disconnect()
  })
  const one = replica(a)
  const two = replica(b)

  // Signed in on the public host (the cookie store writes the session's cookies).
  const cookies = new GatewayCookies(
    { name: 'ogw', secrets: [SECRET], secure: true, sameSite: 'lax', credentialsPath: '/', domains: ['example.com', 'example.org'] },
    new CookieCipher([SECRET], systemClock),
  )
  const now = Math.floor(Date.now() / 1000)
  const session: Session = {
    id: 'session-1',
    claims: { sub: 'alice' },
    accessToken: 'at',
    expiresAt: now + 300,
    createdAt: now,
    provider: 'default',
    issuer: 'https://idp',
  }
  const publicJar = jarReply()
  await new CookieSessionStore(cookies, MAX_AGE, systemClock).create(at('auth.example.com', '/', {}), publicJar.reply, session)
  const appJar = jarReply()

  const begin = await one.step(at('shop.example.org', '/', appJar.jar), appJar.reply, query('/?redirectAfter=%2Fcart'))
  t.ok(begin.redirect?.startsWith(`${PUBLIC_URL}/api/v1/openid/handoff?request=`), 'step 1: to the public host')
  const mint = await one.step(at('auth.example.com', '/', publicJar.jar), publicJar.reply, query(begin.redirect ?? ''))
  t.ok(mint.redirect?.startsWith('https://shop.example.org/api/v1/openid/handoff?token='), 'step 2: a token for shop.example.org')
  const token = query(mint.redirect ?? '')

  const done = await one.step(at('shop.example.org', '/', appJar.jar), appJar.reply, token)
  t.same(done, { redirect: '/cart', status: 302, noStore: true }, 'step 3 on replica one: to the path')
  t.ok(appJar.jar['__Secure-ogw'], 'the session cookie is set on shop.example.org')

  await t.rejects(
    two.step(at('shop.example.org', '/', appJar.jar), jarReply().reply, token),
    new GatewayError('bad_request', 'the hand-off token was used before'),
    'the same token on replica two: refused',
  )
})
