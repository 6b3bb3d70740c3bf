import t from 'tap'
import type { Problem } from '#src/contract/errors'
import { manualClock } from '../fixtures/clock.ts'
import { rawRequest } from '../fixtures/http.ts'
import { revokeAtProvider, startStack, type Stack } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }
/**
 * Access tokens live this long at the provider; tests move the gateway's clock past it (the
 * provider keeps real time: the refresh token stays valid, and the refreshed access token's
 * expires_in is counted from the gateway's clock).
 */
const TTL_SECONDS = 2
const EXPIRED_MS = TTL_SECONDS * 1000 + 300

/** Counts refresh grants at the provider, succeeded and refused. */
function countRefreshes(stack: Stack): { succeeded: number; refused: number } {
  const counts = { succeeded: 0, refused: 0 }
  const isRefresh = (ctx: { oidc?: { params?: unknown } }): boolean => (ctx.oidc?.params as Record<string, unknown> | undefined)?.grant_type === 'refresh_token'
  stack.provider?.provider.on('grant.success', (ctx) => {
    if (isRefresh(ctx)) counts.succeeded++
  })
  stack.provider?.provider.on('grant.error', (ctx) => {
    if (isRefresh(ctx)) counts.refused++
  })
  return counts
}

t.test('memory store: an expired access token is refreshed transparently, once per session', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    provider: { accessTokenTtlSeconds: 3 },
    config: { session: { store: 'memory' } },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  const refreshes = countRefreshes(stack)
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value}`
  await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie } })
  const firstToken = stack.upstream.requests.at(-1)?.headers.authorization
  clock.advance(3300)
  const results = await Promise.all(Array.from({ length: 8 }, () => rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie } })))
  t.same(
    results.map((r) => r.status),
    Array(8).fill(200),
    'every parallel request passes',
  )
  t.equal(refreshes.succeeded, 1, 'one refresh for eight parallel requests')
  const tokens = new Set(stack.upstream.requests.slice(-8).map((r) => r.headers.authorization))
  t.equal(tokens.size, 1, 'they all carry the refreshed token')
  t.not([...tokens][0], firstToken, 'which is a new one')
})

t.test('cookie store (default): a script request after expiry is refreshed transparently', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    provider: { accessTokenTtlSeconds: TTL_SECONDS },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  const refreshes = countRefreshes(stack)
  const browser = await stack.signedIn('alice')
  const before = browser.cookie('ogw')?.value
  t.equal(browser.cookies().find((c) => c.name === 'ogw_cred')?.path, '/', 'the credentials cookie travels on every path')
  browser.setCookie('app_pref', 'dark')
  t.equal((await browser.fetch(`${stack.gw}/data`)).status, 200)
  const firstToken = stack.upstream.requests.at(-1)?.headers.authorization
  clock.advance(EXPIRED_MS)

  // A page script's fetch(): Accept */*, Sec-Fetch-Mode cors, no text/html.
  const res = await browser.fetch(`${stack.gw}/data`)
  t.equal(res.status, 200, 'passes without any redirect')
  t.equal(refreshes.succeeded, 1, 'one refresh at the provider')
  const upstreamSaw = stack.upstream.requests.at(-1)?.headers
  t.match(upstreamSaw?.authorization, /^Bearer /)
  t.not(upstreamSaw?.authorization, firstToken, 'the upstream sees the new access token')
  t.match(upstreamSaw?.cookie, /app_pref=dark/, "the application's own cookie passes")
  t.notMatch(upstreamSaw?.cookie, /ogw/, 'neither session nor credentials cookie reaches the upstream')
  t.not(browser.cookie('ogw')?.value, before, 'the refreshed session is stored in the browser')

  // The refreshed cookies carry the new token: no further refresh until it expires.
  t.equal((await browser.fetch(`${stack.gw}/data`)).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers.authorization, upstreamSaw?.authorization)
  t.equal(refreshes.succeeded, 1)

  // Forward-auth reads the same cookies and refreshes the same way.
  clock.advance(EXPIRED_MS)
  const check = await rawRequest(stack.gw, '/api/v1/openid/auth', {
    headers: {
      cookie: browser.cookieHeader(`${stack.gw}/data`),
      'x-forwarded-method': 'GET',
      'x-forwarded-host': new URL(stack.gw).host,
      'x-forwarded-uri': '/data',
    },
  })
  t.equal(check.status, 200, 'a forward-auth check after expiry passes')
  t.equal(refreshes.succeeded, 2)
  t.match(String(check.headers['set-cookie']), /ogw=/, 'with the refreshed cookies')
})

t.test('cookie store: concurrent requests of one session cause one refresh, and all succeed', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    provider: { accessTokenTtlSeconds: TTL_SECONDS, rotateRefreshTokens: true },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  const refreshes = countRefreshes(stack)
  const browser = await stack.signedIn('bob')
  clock.advance(EXPIRED_MS)
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => browser.fetch(`${stack.gw}/api/${i}`)))
  t.same(
    results.map((r) => r.status),
    Array(8).fill(200),
    'every parallel request passes',
  )
  t.equal(refreshes.succeeded, 1, 'one refresh for eight parallel requests')
  t.equal(refreshes.refused, 0)
  t.ok(
    results.every((r) => r.headers.getSetCookie().some((c) => c.startsWith('ogw='))),
    'each response stores the refreshed session',
  )
  const tokens = new Set(stack.upstream.requests.slice(-8).map((r) => r.headers.authorization))
  t.equal(tokens.size, 1, 'they all carry the same refreshed token')
  // Whichever response the browser applied last, its cookies hold the rotated refresh token.
  t.equal((await browser.fetch(`${stack.gw}/after`)).status, 200)
  clock.advance(EXPIRED_MS)
  t.equal((await browser.fetch(`${stack.gw}/later`)).status, 200, 'the next refresh uses the rotated token')
  t.equal(refreshes.succeeded, 2)
  t.equal(refreshes.refused, 0)
})

t.test('cookie store: a request still carrying the spent refresh token shares the refresh result', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    provider: { accessTokenTtlSeconds: TTL_SECONDS, rotateRefreshTokens: true },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  const refreshes = countRefreshes(stack)
  const browser = await stack.signedIn('alice')
  clock.advance(EXPIRED_MS)
  // Sent by the browser before the refreshed cookies arrived: the old cookies, after the refresh.
  const oldCookies = browser.cookieHeader(`${stack.gw}/x`)
  t.equal((await browser.fetch(`${stack.gw}/x`)).status, 200)
  const refreshed = stack.upstream.requests.at(-1)?.headers.authorization
  const late = await rawRequest(stack.gw, '/y', { headers: { cookie: oldCookies } })
  t.equal(late.status, 200, 'the late request passes')
  t.equal(stack.upstream.requests.at(-1)?.headers.authorization, refreshed, 'with the token of that refresh')
  t.equal(refreshes.succeeded, 1, 'the spent refresh token is not sent to the provider again')
  t.equal(refreshes.refused, 0)
  t.equal((await browser.fetch(`${stack.gw}/z`)).status, 200, 'the session is intact')
})

t.test('cookie store: a refused refresh token ends the session; the request is then unauthenticated', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, { clock, provider: { accessTokenTtlSeconds: TTL_SECONDS } })
  const browser = await stack.signedIn('alice')
  const copied = browser.cookieHeader(`${stack.gw}/x`)
  // The provider revokes the refresh token (a logout elsewhere, an administrator); the cookies are sent after expiry.
  await revokeAtProvider(stack, copied)
  clock.advance(EXPIRED_MS)
  const api = await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie: copied } })
  t.equal(api.status, 401)
  t.equal(api.json<Problem>().code, 'unauthenticated')
  t.equal(api.headers['www-authenticate'], `Bearer error="invalid_token", resource_metadata="${stack.gw}/.well-known/oauth-protected-resource"`)
  const cleared = ([] as string[]).concat(api.headers['set-cookie'] ?? [])
  t.ok(
    cleared.some((c) => /^ogw=;/.test(c) && /Max-Age=0/.test(c)),
    'the session cookie is cleared',
  )
  t.ok(
    cleared.some((c) => /^ogw_cred=;/.test(c) && /Max-Age=0/.test(c)),
    'the credentials cookie is cleared',
  )
  const nav = await rawRequest(stack.gw, '/page', {
    headers: { accept: 'text/html', 'sec-fetch-mode': 'navigate', cookie: copied },
  })
  t.equal(nav.status, 302)
  t.equal(nav.headers.location, '/api/v1/openid/redirect?redirectAfter=%2Fpage', 'a navigation goes straight to sign-in')
})

t.test('cookie store: a provider outage keeps the session (502 provider_unavailable)', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, { clock, provider: { accessTokenTtlSeconds: TTL_SECONDS } })
  const browser = await stack.signedIn('alice')
  await stack.provider?.close()
  clock.advance(EXPIRED_MS)
  const res = await browser.fetch(`${stack.gw}/x`)
  t.equal(res.status, 502)
  t.equal(((await res.json()) as Problem).code, 'provider_unavailable')
  t.same(res.headers.getSetCookie(), [], 'no cookie is touched')
  t.ok(browser.cookie('ogw_cred'), 'the browser keeps its credentials')
})

t.test('cookies.credentialsPath: /api/v1/openid restores the path-scoped credentials', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    provider: { accessTokenTtlSeconds: TTL_SECONDS },
    config: { cookies: { credentialsPath: '/api/v1/openid' } },
  })
  const refreshes = countRefreshes(stack)
  const browser = await stack.signedIn('bob')
  t.equal(browser.cookies().find((c) => c.name === 'ogw_cred')?.path, '/api/v1/openid')
  clock.advance(EXPIRED_MS)
  const api = await browser.fetch(`${stack.gw}/data`, { headers: JSON_ACCEPT })
  t.equal(api.status, 401, 'a script request gets 401')
  t.equal(api.headers.get('www-authenticate'), `Bearer error="invalid_token", resource_metadata="${stack.gw}/.well-known/oauth-protected-resource"`)
  t.equal(refreshes.succeeded, 0, 'nothing is refreshed on a proxied path')
  // Even a credentials cookie sent on a proxied path (e.g. left from the default setting) is not used.
  const forced = await rawRequest(stack.gw, '/data', {
    headers: { ...JSON_ACCEPT, cookie: browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`) },
  })
  t.equal(forced.status, 401)
  t.equal(refreshes.succeeded, 0)
  const nav = await browser.fetch(`${stack.gw}/page?a=1`, { navigate: true })
  t.equal(nav.status, 302)
  t.equal(nav.headers.get('location'), '/api/v1/openid/refresh?redirectAfter=%2Fpage%3Fa%3D1')
  // Following it refreshes (the refresh cookie is sent there) and lands back on the page.
  const done = await browser.follow(`${stack.gw}/page?a=1`)
  t.equal(done.response.status, 200)
  t.equal(done.response.url, `${stack.gw}/page?a=1`)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'bob')
  t.equal(refreshes.succeeded, 1)
})

t.test('a refresh token the provider did not rotate is redeemed again, not answered from memory', async (t) => {
  const stack = await startStack(t, { provider: { rotateRefreshTokens: false } })
  const refreshes = countRefreshes(stack)
  const browser = await stack.signedIn('alice')
  const refresh = `${stack.gw}/api/v1/openid/refresh`
  const first = (await (await browser.fetch(refresh)).json()) as { value: string }
  const second = (await (await browser.fetch(refresh)).json()) as { value: string }
  t.equal(refreshes.succeeded, 2, 'each explicit refresh reaches the provider')
  t.not(second.value, first.value, 'and returns a new access token')
})
