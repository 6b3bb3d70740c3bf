import t from 'tap'
import YAML from 'yaml'
import { manualClock } from '../fixtures/clock.ts'
import { ALIASED, FORGED, identityAtApp } from '../fixtures/forged-headers.ts'
import { rawRequest } from '../fixtures/http.ts'
import { recipe } from '../fixtures/markdown.ts'
import { COOKIE_SECRET, startStack, type Stack } from '../fixtures/stack.ts'
import { sessionCookieNames, startTraefik, traefikBinary, type Traefik } from '../fixtures/traefik.ts'
import type { CookiesConfig } from '#src/options/types'
import { sessionCookieName } from '#src/session/cookies'

// docs/deploy/traefik.md's forwardAuth middleware and entry point setting, read out of the page,
// run by a real Traefik v3 (.ci/peers, built from the Go module proxy) in front of the gateway and
// the oidc-provider stack. Traefik's rules (traefik/traefik pkg/middlewares/auth/forward.go, and
// docs/content/reference/routing-configuration/http/middlewares/forwardauth.md): the check gets the
// client's headers with X-Forwarded-Method/-Host/-Uri/-Proto set by Traefik (trustForwardHeader
// false); an answer outside 2xx goes to the client with its headers and body; on a 2xx each header
// of authResponseHeaders is deleted from the request, then set from the answer when the answer has
// it; the answer's Set-Cookie reaches the client only for the names of addAuthCookiesToResponse.
// The sign-ins ask for no `email` scope, so an allow answer lacks X-Auth-Request-Email, and an
// anonymous one every identity header.

const PAGE = 'docs/deploy/traefik.md'
/** The page's cookies are those of `cookies.secure` with `cookies.domain`; the stacks run plain http, without either. */
const PREFIX = '__Secure-'

const MIDDLEWARE = (YAML.parse(recipe(PAGE, 'yaml')) as { spec: { forwardAuth: Record<string, unknown> } }).spec.forwardAuth
/** The page's entry point options, `--entryPoints.<name>.http.<option>=<value>`, as the static configuration's `http`. */
const ENTRY_POINT_HTTP = Object.fromEntries(
  recipe(PAGE, 'text')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const m = /^--entryPoints\.\w+\.http\.(\w+)=(\S+)$/.exec(line.trim())
      if (m === null) throw new Error(`${PAGE}: not an entry point option: ${line}`)
      return [m[1], m[2]]
    }),
)

/** The page's middleware, pointed at this stack's gateway, with the stack's cookie names. */
function forwardAuth(stack: Stack, middleware: Record<string, unknown> = MIDDLEWARE): Record<string, unknown> {
  const address = new URL(String(middleware.address))
  const cookies = middleware.addAuthCookiesToResponse as string[] | undefined
  return {
    ...middleware,
    address: `${stack.gw}${address.pathname}`,
    ...(cookies === undefined ? {} : { addAuthCookiesToResponse: cookies.map((name) => name.replace(PREFIX, '')) }),
  }
}

const traefikVersion = traefikBinary().version
const stack = await startStack(t, {
  upstreams: [
    { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['nobody'] } },
    { name: 'app', publicPaths: ['/public/**'] },
  ],
  config: { provider: { scopes: ['openid', 'profile', 'groups'] } },
})
const traefik: Traefik = await startTraefik(t, { forwardAuth: forwardAuth(stack), app: stack.upstream.url, entryPointHttp: ENTRY_POINT_HTTP })
// The sign-in may return to Traefik's host, known only now.
stack.replicas[0]?.rewrite((c) => ({ ...c, redirects: { allowedHosts: [`127.0.0.1:${traefik.port}`] } }))
if (!(await stack.live.reload('SIGHUP'))) throw new Error('the gateway did not reload')

t.test(`Traefik ${traefikVersion}`, async (t) => {
  t.test('not signed in: a page load gets the 302 to sign in and comes back; a program gets the 401', async (t) => {
    const browser = stack.browser()
    const res = await browser.fetch(`${traefik.url}/x?a=1&b=2`, { navigate: true })
    t.equal(res.status, 302)
    const location = res.headers.get('location') ?? ''
    t.equal(new URL(location).searchParams.get('redirectAfter'), `${traefik.url}/x?a=1&b=2`)
    const callback = await browser.signIn(location, 'bob')
    t.equal(callback.headers.get('location'), `${traefik.url}/x?a=1&b=2`)
    const { response } = await browser.follow(`${traefik.url}/x?a=1&b=2`)
    t.equal(response.status, 200)
    t.equal(stack.upstream.requests.at(-1)?.url, '/x?a=1&b=2')
    t.equal(identityAtApp(stack.upstream)['x-auth-request-user'], 'bob')

    const before = stack.upstream.requests.length
    const api = await rawRequest(traefik.url, '/api/items', { headers: { accept: 'application/json' } })
    t.equal(api.status, 401)
    t.match(api.headers['content-type'], /^application\/problem\+json/)
    t.match(api.headers['www-authenticate'], /^Bearer/)
    t.match(api.json(), { code: 'unauthenticated', signInUrl: /redirectAfter=/ })
    t.equal(stack.upstream.requests.length, before, 'nothing reached the application')
  })

  t.test('signed in: authResponseHeaders reach the application, and only the answer sets them', async (t) => {
    const browser = await stack.signedIn('alice')
    t.equal((await browser.fetch(`${traefik.url}/page`, { headers: { ...FORGED, ...ALIASED } })).status, 200)
    const headers = identityAtApp(stack.upstream)
    t.equal(headers['x-auth-request-user'], 'alice')
    t.equal(headers['x-auth-request-groups'], 'admins,staff')
    t.equal(headers['x-auth-request-preferred-username'], 'alice')
    t.equal(headers['x-auth-request-email'], undefined, 'no email in the answer: the forged one is removed')
    for (const [name, value] of Object.entries(headers)) t.notMatch(String(value), /mallory|DELETE/, `${name}: ${String(value)}`)
  })

  t.test('anonymous on a public path: no identity header reaches the application, forged or not', async (t) => {
    t.equal((await rawRequest(traefik.url, '/public/logo.png', { headers: { ...FORGED, ...ALIASED } })).status, 200)
    t.same(identityAtApp(stack.upstream), {})
  })

  t.test("a refusal is the gateway's own answer", async (t) => {
    const browser = await stack.signedIn('alice')
    const before = stack.upstream.requests.length
    const res = await browser.fetch(`${traefik.url}/admin/x`, { headers: { accept: 'application/json' } })
    t.equal(res.status, 403)
    t.match(res.headers.get('content-type'), /^application\/problem\+json/)
    t.match(await res.json(), { code: 'forbidden' })
    t.equal(stack.upstream.requests.length, before, 'nothing reached the application')
  })

  t.test('Traefik describes the request itself: a client cannot name another one', async (t) => {
    const before = stack.upstream.requests.length
    const spoofed = await rawRequest(traefik.url, '/page', {
      headers: { accept: 'application/json', 'x-forwarded-uri': '/public/logo.png', 'x-forwarded-host': 'elsewhere.example', 'x-forwarded-method': 'OPTIONS' },
    })
    t.equal(spoofed.status, 401, "the client's X-Forwarded-* are replaced (trustForwardHeader: false)")
    const named = await rawRequest(traefik.url, '/public/logo.png', { headers: { 'x-original-method': 'GET', 'x-original-url': `${traefik.url}/admin` } })
    t.equal(named.status, 400, "a client's X-Original-URL that disagrees is refused")
    t.equal(stack.upstream.requests.length, before, 'nothing reached the application')
  })

  t.test('Traefik normalizes the path before the check, and the application gets the path checked', async (t) => {
    const before = stack.upstream.requests.length
    const up = await rawRequest(traefik.url, '/public/../admin/x', { headers: { accept: 'application/json' } })
    t.equal(up.status, 401, 'checked as /admin/x, not refused as out of normal form')
    t.equal(stack.upstream.requests.length, before)
    t.equal((await rawRequest(traefik.url, '/x/..//public/./logo.png')).status, 200)
    t.equal(stack.upstream.requests.at(-1)?.url, '/public/logo.png')
  })

  t.test('without the entry point setting, a header spelled with underscores or dots passes as the client sent it', async (t) => {
    const bare = await startTraefik(t, { forwardAuth: forwardAuth(stack), app: stack.upstream.url })
    t.equal((await rawRequest(bare.url, '/public/logo.png', { headers: ALIASED })).status, 200)
    t.equal(identityAtApp(stack.upstream).x_auth_request_user, 'mallory')
    t.equal(identityAtApp(stack.upstream)['x.auth.request.user'], 'mallory')
  })
})

t.test("a refreshed session's Set-Cookie reaches the browser through addAuthCookiesToResponse", async (t) => {
  // The check refreshes an expired access token and answers 200 with the cookie store's new
  // session in Set-Cookie (test/checks/forward-auth.test.ts, "expired sign-ins"). The provider
  // rotates refresh tokens, so the session lives on only if the browser gets the new one.
  const clock = manualClock()
  const refreshing = await startStack(t, { clock, provider: { accessTokenTtlSeconds: 3, rotateRefreshTokens: true }, upstreams: [{ name: 'app' }] })
  const { addAuthCookiesToResponse: _, ...withoutCookies } = MIDDLEWARE
  for (const [what, middleware] of [
    ['as the page gives it', MIDDLEWARE],
    ['without addAuthCookiesToResponse', withoutCookies],
  ] as const) {
    const edge = await startTraefik(t, { forwardAuth: forwardAuth(refreshing, middleware), app: refreshing.upstream.url })
    const browser = await refreshing.signedIn('alice')
    const session = browser.cookie('ogw')?.value
    const credentials = browser.cookie('ogw_cred')?.value
    t.equal((await browser.fetch(`${edge.url}/page`)).status, 200)
    clock.advance(3300)
    const res = await browser.fetch(`${edge.url}/page`)
    t.equal(res.status, 200, `${what}: refreshed by the check`)
    t.equal(refreshing.upstream.requests.at(-1)?.headers['x-auth-request-user'], 'alice')
    const names = res.headers.getSetCookie().map((line) => line.slice(0, line.indexOf('=')))
    const kept = { session: browser.cookie('ogw')?.value, credentials: browser.cookie('ogw_cred')?.value }
    // A check refreshes once per session in 30 seconds (docs/features/sessions.md); past that, the
    // browser's cookie is all the next check has.
    clock.advance(31_000)
    const later = await browser.fetch(`${edge.url}/page`, { headers: { accept: 'application/json' } })
    if (what === 'as the page gives it') {
      t.same(names.toSorted(), ['ogw', 'ogw_cred'], `${what}: the refreshed session's cookies reach the browser`)
      t.not(kept.session, session)
      t.not(kept.credentials, credentials)
      t.equal(later.status, 200, `${what}: the session lives on`)
    } else {
      t.same(names, [], `${what}: no Set-Cookie reaches the browser`)
      t.same(kept, { session, credentials }, 'the browser keeps the cookies from before the refresh')
      t.equal(later.status, 401, `${what}: the spent refresh token ends the session`)
    }
  }
})

t.test("addAuthCookiesToResponse names every cookie a session's refresh can set", async (t) => {
  // cookies.secure with cookies.domain and the default name, as the page says.
  const cookies: CookiesConfig = { name: 'ogw', secrets: [COOKIE_SECRET], secure: true, sameSite: 'lax', domain: 'example.com', credentialsPath: '/' }
  t.equal(sessionCookieName(cookies), `${PREFIX}ogw`)
  t.same(MIDDLEWARE.addAuthCookiesToResponse, sessionCookieNames(cookies))
})
