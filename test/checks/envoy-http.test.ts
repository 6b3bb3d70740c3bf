import t from 'tap'
import { randomUUID } from 'node:crypto'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import type { Problem } from '#src/contract/errors'
import { manualClock } from '../fixtures/clock.ts'
import { type CheckAnswer, checkRequestFor, DEFAULT_IDENTITY_HEADERS, sendCheck } from '../fixtures/envoy.ts'
import { CLIENT_ID, gatewayCookies, startStack, type Stack } from '../fixtures/stack.ts'
import { AUTH_REQUEST_ACCESS_TOKEN, AUTH_REQUEST_HEADERS, REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'

// The Envoy ext_authz HTTP check (ANY /api/v1/openid/ext-authz/<path>), driven exactly as Envoy
// sends it (test/fixtures/envoy.ts, each rule cited there), against a real oidc-provider.

const APP = 'app.example.com'
const NAVIGATION = { accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate' }
/** The configuration's other identity names, removed by every allow: forward-auth's and the assertion header. */
const OTHER_IDENTITY = [...Object.values(AUTH_REQUEST_HEADERS).map((name) => name.toLowerCase()), AUTH_REQUEST_ACCESS_TOKEN, 'x-identity-assertion']

const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, publicPaths: ['/public/**'] },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['admins'] } },
  { name: 'tokens', match: { pathPrefix: '/tokens', hosts: [APP] }, forwardAccessToken: true },
  { name: 'cors', match: { pathPrefix: '/cors', hosts: [APP] }, allowPreflight: true },
  { name: 'mcp', match: { pathPrefix: '/mcp', hosts: [APP] }, tokenAudience: 'resource' },
  { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
]
const CONFIG = { redirects: { allowedHosts: [APP] } }

/** Envoy's check for the client request `method path` on `host` with the client's `headers`. */
function check(stack: Stack, path: string, headers: Record<string, string> = {}, method = 'GET', host = APP): Promise<CheckAnswer> {
  return sendCheck(stack.gw, checkRequestFor({ method, path, headers: { host, ...headers } }))
}

function problem(answer: CheckAnswer): Problem {
  return JSON.parse(answer.body) as Problem
}

t.test('ext_authz over HTTP', async (t) => {
  const stack = await startStack(t, { config: CONFIG, upstreams: UPSTREAMS })
  const alice = await gatewayCookies(stack, 'alice')
  const bob = await gatewayCookies(stack, 'bob')

  t.test('signed in and allowed: exactly 200, identity headers, the others named for removal, the gateway cookies stripped', async (t) => {
    for (const method of ['GET', 'POST', 'DELETE', 'PATCH']) {
      const res = await check(stack, '/page?x=1', { cookie: `${alice}; app=1` }, method)
      t.equal(res.status, 200, method)
      t.equal(res.body, '')
      t.equal(res.headers['x-forwarded-user'], 'alice')
      t.equal(res.headers['x-forwarded-email'], 'alice@example.com')
      t.equal(res.headers['x-forwarded-groups'], 'admins,staff')
      t.equal(res.headers['x-forwarded-issuer'], stack.provider?.issuer)
      t.equal(res.headers.cookie, 'app=1', "the application's cookies, without the gateway's")
      t.notMatch(String(res.headers['x-envoy-auth-headers-to-remove']), /cookie/)
      t.equal(res.headers.authorization, undefined, 'no access token: the upstream does not forward it')
      t.equal(res.headers['cache-control'], 'no-store')
    }
    const onlyGateway = await check(stack, '/page', { cookie: alice })
    t.equal(onlyGateway.status, 200)
    t.equal(onlyGateway.headers.cookie, undefined)
    t.match(onlyGateway.headers['x-envoy-auth-headers-to-remove'], /(^|,)cookie(,|$)/, 'nothing left of Cookie: removed')
    t.equal(stack.upstream.requests.length, 0, 'a check never reaches an upstream')
  })

  t.test('a Bearer token counts, and forwardAccessToken sets Authorization', async (t) => {
    const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api' })
    const res = await check(stack, '/tokens/x', { authorization: `Bearer ${token}` })
    t.equal(res.status, 200)
    t.equal(res.headers['x-forwarded-user'], 'service-a')
    t.equal(res.headers.authorization, `Bearer ${token}`)
    const removed = String(res.headers['x-envoy-auth-headers-to-remove']).split(',')
    t.ok(
      removed.includes('x-forwarded-email') && removed.includes('x-forwarded-groups'),
      'identity headers the token does not fill are removed: a forged copy never reaches the upstream',
    )
    t.notOk(removed.includes('x-forwarded-user'))
    t.notOk(removed.includes('authorization'), 'the verified token is set, not removed')
    const anonymous = await check(stack, '/tokens/x', { authorization: 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.' })
    t.equal(anonymous.status, 401, 'a refused token is no sign-in')
  })

  t.test("a forwardAccessToken upstream never receives the client's own Authorization", async (t) => {
    const stack = await startStack(t, {
      config: CONFIG,
      upstreams: [{ name: 'tokens', match: { pathPrefix: '/', hosts: [APP] }, forwardAccessToken: true, publicPaths: ['/public/**'] }],
    })
    const res = await check(stack, '/public/x', { authorization: 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.' })
    t.equal(res.status, 200, 'a public path passes anonymously')
    t.equal(res.headers.authorization, undefined)
    t.ok(String(res.headers['x-envoy-auth-headers-to-remove']).split(',').includes('authorization'), "the client's header is removed, as the proxy removes it")
  })

  t.test('not signed in: a program gets 401 with WWW-Authenticate and problem+json', async (t) => {
    for (const headers of [{}, { accept: 'application/json' }, { cookie: 'ogw=forged' }] as Array<Record<string, string>>) {
      const res = await check(stack, '/page?x=1', headers)
      t.equal(res.status, 401)
      // RFC 9728 5.1: the upstream's metadata on the host asked, with the public URL's scheme.
      t.equal(res.headers['www-authenticate'], 'Bearer resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"')
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      t.equal(problem(res).code, 'unauthenticated')
      t.equal(problem(res).signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('http://app.example.com/page?x=1')}`)
    }
    const post = await check(stack, '/form', NAVIGATION, 'POST')
    t.equal(post.status, 401, 'a POST is no navigation')
  })

  t.test('not signed in: a browser navigation gets 302 to sign in, back to the original URL on its host', async (t) => {
    const res = await check(stack, '/page?x=1', { ...NAVIGATION, 'x-forwarded-proto': 'https' })
    t.equal(res.status, 302)
    t.equal(res.headers.location, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('https://app.example.com/page?x=1')}`)
    const elsewhere = await check(stack, '/deep?y=2', NAVIGATION, 'GET', 'unlisted.example.com')
    t.equal(elsewhere.status, 404, 'no upstream serves that host')
  })

  t.test('tokenAudience: resource (an MCP server): its own token only; a navigation gets the 401, not a sign-in redirect', async (t) => {
    const provider = stack.provider!
    const token = (aud: string): Promise<string> => provider.signJwt({ sub: 'agent', aud, scope: 'mcp:tools' }, { typ: 'at+jwt' })
    const ok = await check(stack, '/mcp', { authorization: `Bearer ${await token('http://app.example.com/mcp')}` }, 'POST')
    t.equal(ok.status, 200)
    t.equal(ok.headers['x-forwarded-user'], 'agent')
    t.equal((await check(stack, '/mcp', { authorization: `Bearer ${await token(CLIENT_ID)}` }, 'POST')).status, 401, "the gateway's client id: refused")
    const navigation = await check(stack, '/mcp', { ...NAVIGATION, cookie: alice })
    t.equal(navigation.status, 401, 'a session signs nobody in there, and a navigation is not sent to sign in')
    t.equal(navigation.headers['www-authenticate'], 'Bearer resource_metadata="http://app.example.com/.well-known/oauth-protected-resource/mcp"')
  })

  t.test('signed in but refused by the allow rules: 403', async (t) => {
    const res = await check(stack, '/admin/users', { cookie: bob })
    t.equal(res.status, 403)
    t.equal(problem(res).code, 'forbidden')
    t.equal(res.headers['x-forwarded-user'], undefined)
    t.equal((await check(stack, '/admin/users', { cookie: alice })).status, 200)
  })

  t.test("a browser's refusal is the error page with the page's own headers, never cacheable", async (t) => {
    // The page's CSP allows its stylesheet and its sign-out form, and its Referrer-Policy keeps
    // the Origin the sign-out endpoint checks: a check's never-cacheable headers must not replace them.
    const res = await check(stack, '/admin/users', { cookie: bob, accept: 'text/html', 'sec-fetch-mode': 'navigate' })
    t.equal(res.status, 403)
    t.match(res.headers['content-type'], /^text\/html/)
    t.match(res.headers['content-security-policy'], /style-src 'sha256-[^']+'; form-action /)
    t.equal(res.headers['referrer-policy'], 'strict-origin')
    t.equal(res.headers['cache-control'], 'no-store')
    t.match(res.body, /Signed in as <strong>bob<\/strong>/)
  })

  t.test('public paths, auth: none and an allowed preflight pass anonymously, with every identity header removed', async (t) => {
    // A preflight can only be told when Origin and Access-Control-Request-Method are allow-listed towards the check.
    const withPreflight = ['cookie', 'accept', 'origin', 'access-control-request-method']
    const origin = 'https://spa.example.com'
    for (const [path, headers, method, host] of [
      ['/public/logo.png', {}, 'GET', APP],
      ['/anything', {}, 'GET', 'open.example.com'],
      ['/cors/api', { origin, 'access-control-request-method': 'PUT' }, 'OPTIONS', APP],
    ] as const) {
      const res = await sendCheck(stack.gw, checkRequestFor({ method, path, headers: { host, ...headers, 'x-forwarded-user': 'forged' } }, withPreflight))
      t.equal(res.status, 200, path)
      t.equal(res.headers['x-forwarded-user'], undefined)
      t.same(
        String(res.headers['x-envoy-auth-headers-to-remove']).split(',').sort(),
        [...DEFAULT_IDENTITY_HEADERS, ...OTHER_IDENTITY, ...REQUEST_OVERRIDE_HEADER_NAMES].sort(),
      )
    }
    const notAllowListed = await check(stack, '/cors/api', { origin, 'access-control-request-method': 'PUT' }, 'OPTIONS')
    t.equal(notAllowListed.status, 401, 'without the headers allow-listed, an OPTIONS is no preflight')
    const withoutOrigin = await sendCheck(
      stack.gw,
      checkRequestFor({ method: 'OPTIONS', path: '/cors/api', headers: { host: APP, origin, 'access-control-request-method': 'PUT' } }, [
        'cookie',
        'accept',
        'access-control-request-method',
      ]),
    )
    t.equal(
      withoutOrigin.status,
      401,
      'with Access-Control-Request-Method but not Origin allow-listed, an OPTIONS is no preflight (Fetch: a CORS request has an Origin)',
    )
    const elsewhere = await sendCheck(
      stack.gw,
      checkRequestFor({ method: 'OPTIONS', path: '/page', headers: { host: APP, origin, 'access-control-request-method': 'PUT' } }, withPreflight),
    )
    t.equal(elsewhere.status, 401, 'a preflight where the upstream does not allow them')
  })

  t.test('the request checked comes from the request line and Host alone: X-Forwarded-* and X-Original-* change nothing', async (t) => {
    const spoofs = {
      'x-forwarded-uri': '/public/x',
      'x-forwarded-host': 'open.example.com',
      'x-forwarded-method': 'OPTIONS',
      'x-original-url': 'http://open.example.com/public/x',
      'x-original-method': 'GET',
    }
    // Envoy passes these only when allow-listed; the operator who does so must still be safe.
    const allowed = [...Object.keys(spoofs), 'cookie', 'accept']
    const res = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/admin/users', headers: { host: APP, cookie: bob, ...spoofs } }, allowed))
    t.equal(res.status, 403, 'decided for /admin/users on app.example.com')
    const anonymous = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/page', headers: { host: APP, ...spoofs } }, allowed))
    t.equal(anonymous.status, 401, 'not for the public path or open host the headers name')
    // The headers the gRPC service once asked the HTTP route with (app.inject), without its per-process token.
    const internal = { 'x-openid-gateway-grpc-check': 'guess', 'x-openid-gateway-grpc-upstream': 'open' }
    const guessed = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/page', headers: { host: APP, ...internal } }, Object.keys(internal)))
    t.equal(guessed.status, 401, 'the upstream named by a client is not read')
  })

  t.test("the gateway's own paths are never answered 200, whatever the upstream's rules", async (t) => {
    for (const path of ['/api/v1/openid/callback?code=x', '/api/v1/openid/ext-authz/page', '/api/v1/openid', '/.well-known/jwks.json']) {
      for (const host of [APP, 'open.example.com']) {
        for (const headers of [{ cookie: alice }, {}, NAVIGATION] as Array<Record<string, string>>) {
          const res = await check(stack, path, headers, 'GET', host)
          t.ok(res.status >= 300 && res.status !== 200, `${host}${path}: ${res.status}`)
        }
        t.equal((await check(stack, path, { cookie: alice }, 'GET', host)).status, path.startsWith('/api/') ? 404 : 403, 'signed in: refused')
      }
    }
  })

  t.test('a malformed check is 400 or 404, never a decision about another path', async (t) => {
    t.equal((await sendCheck(stack.gw, { method: 'GET', path: '/api/v1/openid/ext-authz', headers: { host: APP } })).status, 404, 'no path after the prefix')
    t.equal((await sendCheck(stack.gw, { method: 'GET', path: '/api/v1/openid/ext-authz/page', headers: {} })).status, 400, 'no Host')
    const climbed = await sendCheck(stack.gw, { method: 'GET', path: '/api/v1/openid/ext-authz/public/../admin/users', headers: { host: APP, cookie: bob } })
    t.equal(climbed.status, 400, 'a path out of normal form is decided for no path')
    const ambiguous = await check(stack, '/ADMIN/users', { cookie: bob })
    t.equal(ambiguous.status, 400, 'a spelling that another upstream would serve in another case')
  })
})

t.test('ext_authz: a refreshed session comes with Set-Cookie on the allow', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, { clock, config: CONFIG, upstreams: UPSTREAMS, provider: { accessTokenTtlSeconds: 2 } })
  const cookie = await gatewayCookies(stack, 'alice')
  t.equal((await check(stack, '/page', { cookie })).status, 200)
  // Past the access token's expiry, on the gateway's clock.
  clock.advance(2300)
  const res = await check(stack, '/page', { cookie })
  t.equal(res.status, 200)
  const setCookie = res.headers['set-cookie'] ?? []
  t.ok(
    setCookie.some((c) => c.startsWith('ogw=')),
    'the refreshed session cookie, for Envoy to pass to the client',
  )
})

t.test('ext_authz: a provider that fails a needed refresh is 503 (Envoy fails closed on 5xx)', async (t) => {
  const clock = manualClock()
  const stack = await startStack(t, { clock, config: CONFIG, upstreams: UPSTREAMS, provider: { accessTokenTtlSeconds: 2 } })
  const cookie = await gatewayCookies(stack, 'alice')
  await stack.provider!.close()
  clock.advance(2300)
  const res = await check(stack, '/page', { cookie })
  t.equal(res.status, 503)
  t.equal(problem(res).code, 'decision_unavailable')
  t.equal(problem(res).cause, 'provider_unavailable')
})

t.test('ext_authz: with cookies.credentialsPath /api/v1/openid an expired session is renewed at the refresh endpoint', async (t) => {
  // The check's own path is below /api/v1/openid, but the cookies Envoy passes on are those the
  // browser sent with its request, without the credentials cookie: a page load goes to the
  // refresh endpoint, which reads it, as on the proxy.
  const clock = manualClock()
  const stack = await startStack(t, {
    clock,
    config: { ...CONFIG, cookies: { credentialsPath: '/api/v1/openid' } },
    upstreams: UPSTREAMS,
    provider: { accessTokenTtlSeconds: 2 },
  })
  const cookie = await gatewayCookies(stack, 'alice')
  t.equal((await check(stack, '/page', { cookie })).status, 200)
  // Past the access token's expiry, on the gateway's clock.
  clock.advance(2300)
  const page = await check(stack, '/page', { cookie, accept: 'text/html', 'x-forwarded-proto': 'https' })
  t.equal(page.status, 302)
  t.equal(page.headers.location, `${stack.gw}/api/v1/openid/refresh?redirectAfter=${encodeURIComponent('https://app.example.com/page')}`)
  const program = await check(stack, '/page', { cookie, accept: 'application/json' })
  t.equal(program.status, 401)
  t.equal(program.headers['www-authenticate'], 'Bearer error="invalid_token", resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"')
})

t.test('ext_authz: forwardAuth.extAuthzPath moves the check', async (t) => {
  const stack = await startStack(t, { config: { ...CONFIG, forwardAuth: { extAuthzPath: '/api/v1/openid/envoy' } }, upstreams: UPSTREAMS })
  const cookie = await gatewayCookies(stack, 'alice')
  const res = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/page', headers: { host: APP, cookie } }, undefined, '/api/v1/openid/envoy'))
  t.equal(res.status, 200)
  t.equal((await check(stack, '/page', { cookie })).status, 404, 'not at the default prefix')
})

t.test('forwardAuth.cache', async (t) => {
  t.test('a decision is reused for ttlSeconds: an expired Bearer token still passes from the cache, and not without it', async (t) => {
    for (const enabled of [true, false]) {
      const clock = manualClock()
      const config = { ...CONFIG, provider: { clockToleranceSeconds: 0 }, forwardAuth: { cache: { enabled, ttlSeconds: 60 } } }
      const stack = await startStack(t, { clock, config, upstreams: UPSTREAMS })
      const token = await stack.provider!.signJwt({
        sub: 'service-a',
        aud: CLIENT_ID,
        scope: 'api',
        iat: Math.floor(clock.now() / 1000),
        exp: Math.floor(clock.now() / 1000) + 2,
      })
      t.equal((await check(stack, '/page', { authorization: `Bearer ${token}` })).status, 200)
      // Past the token's exp, on the gateway's clock.
      clock.advance(3000)
      const again = await check(stack, '/page', { authorization: `Bearer ${token}` })
      t.equal(again.status, enabled ? 200 : 401, enabled ? 'the same credentials and request: from the cache' : 'decided afresh: expired')
      t.equal((await check(stack, '/other', { authorization: `Bearer ${token}` })).status, 401, 'another request is decided afresh')
      if (enabled) {
        clock.advance(57_000)
        t.equal((await check(stack, '/page', { authorization: `Bearer ${token}` })).status, 401, 'ttlSeconds after the decision: decided afresh')
      }
    }
  })

  t.test('a logout empties it: the ended session is refused at once', async (t) => {
    const stack = await startStack(t, {
      config: { ...CONFIG, session: { store: 'memory' }, forwardAuth: { cache: { enabled: true, ttlSeconds: 60 } } },
      upstreams: UPSTREAMS,
    })
    const browser = await stack.signedIn('alice')
    const cookie = browser.cookieHeader(`${stack.gw}/page`)
    t.equal((await check(stack, '/page', { cookie })).status, 200)
    t.equal((await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })).status, 200)
    t.equal((await check(stack, '/page', { cookie })).status, 401)
  })

  t.test('a back-channel logout empties it: the ended session is refused at once', async (t) => {
    const stack = await startStack(t, {
      config: { ...CONFIG, forwardAuth: { cache: { enabled: true, ttlSeconds: 60 } } },
      upstreams: UPSTREAMS,
      backchannelLogout: true,
    })
    const cookie = await gatewayCookies(stack, 'alice')
    t.equal((await check(stack, '/page', { cookie })).status, 200)
    const token = await stack.provider!.signJwt(
      { aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
      { typ: 'logout+jwt' },
    )
    const logout = await fetch(`${stack.gw}/api/v1/openid/backchannel-logout`, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
    t.equal(logout.status, 200)
    t.equal((await check(stack, '/page', { cookie })).status, 401)
  })
})
