import t, { type Test as Tap } from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { OutgoingHttpHeaders } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import { manualClock } from '../fixtures/clock.ts'
import { rawRequest, type RawResponse } from '../fixtures/http.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

// GET /api/v1/openid/auth, as ingress-nginx (auth-url: X-Original-Method/-URL) and Traefik
// (ForwardAuth: X-Forwarded-Method/-Host/-Uri) call it. The test client is 127.0.0.1, which is
// not in server.trustedProxies: the caller's address plays no part in the decision.
//
// `traefik()` plays Traefik by its documented rules. test/e2e/traefik-forward-auth.test.ts runs a
// real Traefik v3 and proves those rules there: the headers it sends (X-Forwarded-Method/-Host/
// -Uri/-Proto, never the client's), the 302, 401 and 403 passed to the client as they are,
// authResponseHeaders replacing the client's copies, the path normalized before the check, and a
// refreshed session's Set-Cookie passed only with addAuthCookiesToResponse. What stays here is
// what needs no real Traefik: every decision for each request Traefik can describe, and what a
// real Traefik never sends (a set without its method, host or path).

const AUTH = '/api/v1/openid/auth'
const CONFIG = { redirects: { allowedHosts: ['app.example.com'] } }
const APP = 'app.example.com'
/** A browser's top-level page load. */
const NAVIGATION = { accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate' }

function check(stack: Stack, headers: OutgoingHttpHeaders, method = 'GET'): Promise<RawResponse> {
  return rawRequest(stack.gw, AUTH, { method, headers })
}

/** What ingress-nginx sends for a request to `url` (absolute), with the client's headers. */
function nginx(url: string, extra: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  return { 'x-original-url': url, 'x-original-method': 'GET', ...extra }
}

/** What Traefik sends for a request to `uri` on `host`, with the client's headers. */
function traefik(host: string, uri: string, extra: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  return { 'x-forwarded-host': host, 'x-forwarded-uri': uri, 'x-forwarded-proto': 'https', 'x-forwarded-method': 'GET', ...extra }
}

/** The Cookie header a browser signed in as `username` sends with an application request. */
async function sessionCookie(stack: Stack, username: string): Promise<string> {
  const browser = await stack.signedIn(username)
  // Path `/`: what the browser sends to the application (the refresh cookie only with the default
  // cookies.credentialsPath). The ingress copies it onto the check.
  return browser.cookieHeader(`${stack.gw}/page`)
}

function identityHeaders(res: RawResponse): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => name.startsWith('x-auth-request-')))
}

const UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, publicPaths: ['/public/**'] },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['admins'] } },
  { name: 'tokens', match: { pathPrefix: '/tokens', hosts: [APP] }, forwardAccessToken: true },
  { name: 'cors', match: { pathPrefix: '/cors', hosts: [APP] }, allowPreflight: true },
  { name: 'maybe', match: { pathPrefix: '/maybe', hosts: [APP] }, auth: 'optional' },
  { name: 'mcp', match: { pathPrefix: '/mcp', hosts: [APP] }, tokenAudience: 'resource' },
  { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
  { name: 'other', match: { pathPrefix: '/', hosts: ['other.example.com'] } },
]

t.test('checks', async (t) => {
  const stack = await startStack(t, { config: CONFIG, upstreams: UPSTREAMS })
  const alice = await sessionCookie(stack, 'alice')
  const bob = await sessionCookie(stack, 'bob')

  t.test('signed in and allowed: 200, empty body, X-Auth-Request-* identity, no-store', async (t) => {
    for (const method of ['GET', 'HEAD']) {
      const res = await check(stack, traefik(APP, '/page?x=1', { cookie: alice }), method)
      t.equal(res.status, 200, method)
      t.equal(res.body, '')
      t.equal(res.headers['cache-control'], 'no-store')
      t.strictSame(
        identityHeaders(res),
        {
          'x-auth-request-user': 'alice',
          'x-auth-request-email': 'alice@example.com',
          'x-auth-request-groups': 'admins,staff',
          'x-auth-request-preferred-username': 'alice',
          'x-auth-request-issuer': stack.provider?.issuer,
        },
        'no access token: the upstream does not forward it',
      )
    }
    t.equal(stack.upstream.requests.length, 0, 'a check never reaches an upstream')
  })

  t.test('a Bearer JWT counts as signed in, as on the proxy', async (t) => {
    const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api', email: 'svc@example.com' })
    const res = await check(stack, traefik(APP, '/api', { authorization: `Bearer ${token}` }))
    t.equal(res.status, 200)
    t.equal(res.headers['x-auth-request-user'], 'service-a')
    t.equal(res.headers['x-auth-request-email'], 'svc@example.com')
  })

  t.test('not signed in: 401 problem+json with WWW-Authenticate and signInUrl back to the original URL', async (t) => {
    const signInUrl = `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('https://app.example.com/page?x=1')}`
    const asked = [traefik(APP, '/page?x=1'), traefik(APP, '/page?x=1', { accept: 'application/json' }), nginx('https://app.example.com/page?x=1', NAVIGATION)]
    for (const headers of asked) {
      const res = await check(stack, headers)
      t.equal(res.status, 401, 'a program, or any request ingress-nginx asks about (it takes only 2xx, 401 and 403)')
      t.equal(res.headers.location, undefined)
      // RFC 9728 5.1: the upstream's metadata, on the host asked (the upstream names hosts) with the public URL's scheme.
      t.equal(res.headers['www-authenticate'], 'Bearer resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"')
      t.equal(res.headers['cache-control'], 'no-store')
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      const body = res.json<Problem>()
      t.equal(body.code, 'unauthenticated')
      t.equal(body.signInUrl, signInUrl)
    }
    const res = await check(stack, traefik(APP, '/page', { cookie: 'ogw=forged; other=1' }))
    t.equal(res.status, 401, 'a forged session cookie is no session')
  })

  t.test('Traefik, a browser navigation without a session: 302 to sign in (Traefik passes the answer to the browser)', async (t) => {
    for (const navigation of [NAVIGATION, { accept: 'text/html' }]) {
      const res = await check(stack, traefik(APP, '/page?x=1', navigation))
      t.equal(res.status, 302)
      t.equal(res.headers.location, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('https://app.example.com/page?x=1')}`)
      t.equal(res.headers['cache-control'], 'no-store')
    }
    const post = await check(stack, traefik(APP, '/page', { ...NAVIGATION, 'x-forwarded-method': 'POST' }), 'GET')
    t.equal(post.status, 401, 'a form POST is no navigation to send to sign in (its body would be lost)')
  })

  t.test('tokenAudience: resource (an MCP server): a token for its resource on the checked host only, no session, no sign-in redirect', async (t) => {
    const provider = stack.provider!
    const token = (aud: string): Promise<string> => provider.signJwt({ sub: 'agent', aud, scope: 'mcp:tools' }, { typ: 'at+jwt' })
    const resource = 'http://app.example.com/mcp'
    const ok = await check(stack, traefik(APP, '/mcp', { authorization: `Bearer ${await token(resource)}` }))
    t.equal(ok.status, 200, "the resource on the checked host (the metadata's `resource` there)")
    t.equal(ok.headers['x-auth-request-user'], 'agent')
    const other = await check(stack, traefik(APP, '/mcp', { authorization: `Bearer ${await token(CLIENT_ID)}` }))
    t.equal(other.status, 401, "the gateway's client id: refused")
    t.match(
      other.headers['www-authenticate'],
      /^Bearer error="invalid_token", resource_metadata="http:\/\/app\.example\.com\/\.well-known\/oauth-protected-resource\/mcp"$/,
    )
    t.equal(
      (await check(stack, traefik(APP, '/page', { authorization: `Bearer ${await token(resource)}` }))).status,
      401,
      'the resource token at another upstream: refused',
    )
    t.equal((await check(stack, traefik(APP, '/mcp', { cookie: alice }))).status, 401, 'a session signs nobody in there')
    t.equal((await check(stack, traefik(APP, '/mcp', { cookie: alice, ...NAVIGATION }))).status, 401, 'and a navigation is not sent to sign in')
  })

  t.test('signInUrl falls back to the path when the original host is not an allowed redirect target', async (t) => {
    const res = await check(stack, traefik('other.example.com', '/deep/page?x=1'))
    t.equal(res.status, 401)
    t.equal(res.json<Problem>().signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('/deep/page?x=1')}`)
  })

  t.test('allow rules: signed in but not allowed is 403 forbidden', async (t) => {
    const refused = await check(stack, traefik(APP, '/admin/users', { cookie: bob }))
    t.equal(refused.status, 403)
    t.equal(refused.json<Problem>().code, 'forbidden')
    t.equal(refused.headers['cache-control'], 'no-store')
    t.strictSame(identityHeaders(refused), {}, 'no identity on a refusal')
    const allowed = await check(stack, traefik(APP, '/admin/users', { cookie: alice }))
    t.equal(allowed.status, 200)
    t.equal(allowed.headers['x-auth-request-user'], 'alice')
    const elsewhere = await check(stack, traefik(APP, '/administrator', { cookie: bob }))
    t.equal(elsewhere.status, 200, '/administrator is not under /admin')
  })

  t.test('public paths and auth: none pass without identity, even with a session', async (t) => {
    const cases: Array<[string, string]> = [
      [APP, '/public/x'],
      [APP, '/public/'],
      ['open.example.com', '/anything'],
      ['OPEN.example.com:8443', '/'],
    ]
    for (const [host, uri] of cases) {
      for (const cookie of [undefined, alice]) {
        const res = await check(stack, traefik(host, uri, cookie === undefined ? {} : { cookie }))
        t.equal(res.status, 200, `${host} ${uri}`)
        t.strictSame(identityHeaders(res), {})
      }
    }
    t.equal((await check(stack, traefik(APP, '/publicity'))).status, 401, 'prefix of a public glob is not public')
  })

  t.test('auth: optional passes anonymous checks, with identity when signed in', async (t) => {
    const anon = await check(stack, traefik(APP, '/maybe/x'))
    t.equal(anon.status, 200)
    t.strictSame(identityHeaders(anon), {})
    const signed = await check(stack, traefik(APP, '/maybe/x', { cookie: bob }))
    t.equal(signed.status, 200)
    t.equal(signed.headers['x-auth-request-user'], 'bob')
  })

  t.test('X-Auth-Request-Access-Token only for an upstream with forwardAccessToken', async (t) => {
    const browser = stack.browser()
    const callback = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
    const accessToken = ((await callback.json()) as { value: string }).value
    const cookie = browser.cookieHeader(`${stack.gw}/page`)
    const withToken = await check(stack, traefik(APP, '/tokens/x', { cookie }))
    t.equal(withToken.status, 200)
    t.equal(withToken.headers['x-auth-request-access-token'], accessToken)
    const without = await check(stack, traefik(APP, '/page', { cookie }))
    t.equal(without.status, 200)
    t.equal(without.headers['x-auth-request-access-token'], undefined)
    const jwt = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api' })
    const bearer = await check(stack, traefik(APP, '/tokens', { authorization: `Bearer ${jwt}` }))
    t.equal(bearer.headers['x-auth-request-access-token'], jwt, 'a Bearer caller gets its own token back')
    const anon = await check(stack, traefik(APP, '/tokens', { 'x-auth-request-access-token': 'forged' }))
    t.equal(anon.status, 401)
    t.equal(anon.headers['x-auth-request-access-token'], undefined)
  })

  t.test('CORS preflights pass only on an allowPreflight upstream, and only when recognizable', async (t) => {
    const acrm = { 'access-control-request-method': 'POST', origin: 'https://spa.example.com' }
    t.equal((await check(stack, traefik(APP, '/cors/api', { ...acrm, 'x-forwarded-method': 'OPTIONS' }))).status, 200)
    const preflight = nginx('https://app.example.com/cors/api', { 'x-original-method': 'OPTIONS', ...acrm })
    t.equal((await check(stack, preflight)).status, 200, 'X-Original-Method (ingress-nginx) too')
    t.equal((await check(stack, traefik(APP, '/cors/api', { 'x-forwarded-method': 'OPTIONS' }))).status, 401, 'a plain OPTIONS is not a preflight')
    t.equal((await check(stack, traefik(APP, '/cors/api', acrm))).status, 401, 'a GET with Access-Control-Request-Method is not one')
    t.equal((await check(stack, traefik(APP, '/page', { ...acrm, 'x-forwarded-method': 'OPTIONS' }))).status, 401, 'not on other upstreams')
  })

  t.test('ingress-nginx: X-Original-URL', async (t) => {
    const ok = await check(stack, nginx('https://app.example.com/admin/x?y=1', { cookie: alice }))
    t.equal(ok.status, 200)
    t.equal(ok.headers['x-auth-request-user'], 'alice')
    t.equal((await check(stack, nginx('https://app.example.com/admin/x', { cookie: bob }))).status, 403)
    t.equal((await check(stack, nginx('http://app.example.com/public/a'))).status, 200)
    t.equal((await check(stack, nginx('HTTPS://APP.example.com:443?q'))).status, 401, 'an empty path is /')
    const anon = await check(stack, nginx('http://app.example.com/page?a=1&b=2'))
    t.equal(anon.status, 401)
    t.equal(anon.json<Problem>().signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('http://app.example.com/page?a=1&b=2')}`)
    // The same request described twice (as some nginx configurations do) is fine.
    const both = nginx('https://app.example.com/public/x', {
      'x-forwarded-host': 'APP.example.com.',
      'x-forwarded-uri': '/public/x',
      'x-forwarded-method': 'GET',
    })
    t.equal((await check(stack, both)).status, 200)
  })

  t.test('the two descriptions must agree, so a client cannot add the set its ingress does not set', async (t) => {
    // Behind ingress-nginx a client adds X-Forwarded-Uri; behind Traefik, X-Original-URL.
    const acrm = { 'access-control-request-method': 'GET' }
    const cases: OutgoingHttpHeaders[] = [
      nginx('https://app.example.com/page', { 'x-forwarded-uri': '/public/x' }),
      nginx('https://app.example.com/page', { 'x-forwarded-host': 'open.example.com' }),
      traefik(APP, '/page', { 'x-original-url': 'https://app.example.com/public/x' }),
      traefik(APP, '/page', { 'x-original-url': 'https://open.example.com/page' }),
      // The method is a part like the others: a preflight claimed by the set the ingress does not set.
      nginx('https://app.example.com/cors/api', { 'x-forwarded-method': 'OPTIONS', ...acrm }),
      traefik(APP, '/cors/api', { 'x-original-method': 'OPTIONS', ...acrm }),
      nginx('https://app.example.com/cors/api', { 'x-original-method': 'OPTIONS', 'x-forwarded-method': 'GET', ...acrm }),
    ]
    for (const headers of cases) {
      const res = await check(stack, headers)
      t.equal(res.status, 400, JSON.stringify(headers))
      t.equal(res.json<Problem>().code, 'bad_request')
      t.equal(res.headers['cache-control'], 'no-store')
    }
  })

  t.test('a refused or ambiguous description is 400; so is a path out of normal form, never decided for the path it resolves to', async (t) => {
    const refused: OutgoingHttpHeaders[] = [
      traefik(APP, '/public/..%2fadmin'),
      traefik(APP, '/public/..%5cadmin'),
      traefik(APP, '/public;x=y/../admin'),
      traefik(APP, '/public/%c0%ae%c0%ae/admin'),
      traefik(APP, '/public/%252e%252e/admin'),
      traefik(APP, 'public/x'),
      traefik(APP, '/public/x#frag'),
      traefik(APP, '*'),
      traefik(APP, 'http://app.example.com/public/x'),
      traefik('app.example.com, open.example.com', '/x'),
      traefik('app.example.com/evil', '/x'),
      traefik(APP, '/public/x', { 'x-forwarded-uri': ['/public/x', '/admin'] }),
      traefik(APP, '/public/x', { 'x-forwarded-method': ['OPTIONS', 'GET'] }),
      traefik(APP, '/public/x', { 'x-forwarded-method': 'GET /' }),
      traefik(APP, '/public/x', { 'x-forwarded-method': '' }),
      nginx('ftp://app.example.com/x'),
      nginx('https://user@app.example.com/public/x'),
      nginx('/public/x'),
      nginx('https://app.example.com/public/../x y'),
      nginx('https://app.example.com/public/x', { 'x-original-method': 'GET\tx' }),
    ]
    for (const headers of refused) {
      const res = await check(stack, headers)
      t.equal(res.status, 400, JSON.stringify(headers))
      t.equal(res.json<Problem>().code, 'bad_request')
    }
    for (const uri of ['/public/../admin', '/public/%2e%2e/admin', '//public/../admin', '/public/./../admin', '/%70ublic//x/./y']) {
      const res = await check(stack, traefik(APP, uri, { cookie: bob }))
      t.equal(res.status, 400, uri)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
  })

  t.test('no upstream: 404 not_found', async (t) => {
    const cases: Array<[string, string]> = [
      ['nowhere.example.com', '/'],
      ['app.example.com.evil', '/public/x'],
      [APP, '/api/v1/openid/redirect'],
    ]
    for (const [host, uri] of cases) {
      const res = await check(stack, traefik(host, uri))
      t.equal(res.status, 404, `${host} ${uri}`)
      t.equal(res.json<Problem>().code, 'not_found')
      t.equal(res.headers['cache-control'], 'no-store')
    }
  })

  t.test('other methods: 405 with Allow', async (t) => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const res = await check(stack, traefik(APP, '/public/x', { cookie: alice }), method)
      t.equal(res.status, 405, method)
      t.equal(res.headers.allow, 'GET, HEAD')
      t.equal(res.json<Problem>().code, 'method_not_allowed')
      t.equal(res.headers['x-auth-request-user'], undefined)
    }
  })

  t.test('identity headers sent by the client never come back', async (t) => {
    const forged = {
      'x-auth-request-user': 'mallory',
      'x-auth-request-email': 'ceo@example.com',
      'x-auth-request-groups': 'admins',
      X_Auth_Request_User: 'mallory',
      'x-forwarded-user': 'mallory',
    }
    const anon = await check(stack, traefik(APP, '/page', forged))
    t.equal(anon.status, 401)
    t.strictSame(identityHeaders(anon), {})
    const publicPath = await check(stack, traefik(APP, '/public/x', forged))
    t.equal(publicPath.status, 200)
    t.strictSame(identityHeaders(publicPath), {})
    const signed = await check(stack, traefik(APP, '/page', { ...forged, cookie: bob }))
    t.equal(signed.status, 200)
    t.equal(signed.headers['x-auth-request-user'], 'bob')
    t.equal(signed.headers['x-auth-request-email'], 'bob@example.com')
    t.equal(signed.headers['x-auth-request-groups'], 'staff')
    const admin = await check(stack, traefik(APP, '/admin', forged))
    t.equal(admin.status, 401, 'forged groups do not open an allow rule')
  })

  t.test('no decision keys on User-Agent', async (t) => {
    const agents = [
      undefined,
      'curl/8.5.0',
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
      'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
      'kube-probe/1.30',
      'Traefik',
    ]
    const shapes: Array<[string, OutgoingHttpHeaders, number]> = [
      ['anonymous, protected', traefik(APP, '/page'), 401],
      ['anonymous, public', traefik(APP, '/public/x'), 200],
      ['alice', traefik(APP, '/page', { cookie: alice }), 200],
      ['bob on /admin', traefik(APP, '/admin', { cookie: bob }), 403],
      ['nowhere', traefik('nowhere.example.com', '/'), 404],
    ]
    for (const [name, headers, expected] of shapes) {
      for (const agent of agents) {
        const res = await check(stack, agent === undefined ? headers : { ...headers, 'user-agent': agent })
        t.equal(res.status, expected, `${name}, ${agent ?? 'no User-Agent'}`)
        t.equal(res.headers['x-auth-request-user'], expected === 200 && headers.cookie !== undefined ? name : undefined)
      }
    }
  })
})

t.test('the check is for the request its caller names, never for another', async (t) => {
  const stack = await startStack(t, {
    upstreams: [
      { name: 'app', publicPaths: ['/public/**'] },
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
      { name: 'cors', match: { pathPrefix: '/cors' }, allowPreflight: true },
      { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
    ],
  })
  const own = new URL(stack.gw).host
  const bob = await sessionCookie(stack, 'bob')

  // Before: a caller outside server.trustedProxies was decided for `/` of its own Host, so an
  // ingress missing from that list got `/`'s answer (200 for bob) for /admin.
  t.equal((await check(stack, traefik(own, '/admin', { cookie: bob }))).status, 403, 'Traefik: /admin, not /')
  t.equal((await check(stack, nginx(`http://${own}/admin/x`, { cookie: bob }))).status, 403, 'ingress-nginx: /admin, not /')
  t.equal((await check(stack, traefik('open.example.com', '/x'))).status, 200, 'the named host, not the Host header')

  // Neither ingress ever sends a set without its method, so a set missing a part names no request.
  const incomplete: OutgoingHttpHeaders[] = [
    {},
    { 'x-original-url': `http://${own}/public/x` },
    { 'x-original-method': 'GET' },
    { 'x-forwarded-uri': '/public/x', 'x-forwarded-host': own },
    { 'x-forwarded-uri': '/public/x', 'x-forwarded-method': 'GET' },
    { 'x-forwarded-host': own, 'x-forwarded-method': 'GET' },
    { 'x-original-url': `http://${own}/public/x`, 'x-forwarded-method': 'GET' },
    { 'x-forwarded-uri': '/cors', 'x-forwarded-method': 'OPTIONS', 'access-control-request-method': 'GET' },
  ]
  for (const headers of incomplete) {
    const res = await check(stack, { ...headers, cookie: bob })
    t.equal(res.status, 400, JSON.stringify(headers))
    t.equal(res.json<Problem>().code, 'bad_request')
    t.equal(res.headers['x-auth-request-user'], undefined)
  }
})

t.test("the caller's address does not change the decision", async (t) => {
  const upstreams = [
    { name: 'app', publicPaths: ['/public/**'] },
    { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
  ]
  const trusting = await startStack(t, { config: { server: { trustedProxies: ['127.0.0.0/8'] } }, upstreams })
  const untrusting = await startStack(t, { upstreams })
  const answers = async (stack: Stack): Promise<number[]> => {
    const own = new URL(stack.gw).host
    const bob = await sessionCookie(stack, 'bob')
    const cases = [
      traefik(own, '/admin', { cookie: bob }),
      traefik(own, '/page', { cookie: bob }),
      traefik(own, '/public/x'),
      traefik(own, '/page'),
      nginx(`http://${own}/admin`, { cookie: bob }),
      nginx(`http://${own}/public/x`),
      { 'x-forwarded-uri': '/public/x' },
    ]
    const out: number[] = []
    for (const headers of cases) out.push((await check(stack, headers)).status)
    return out
  }
  const expected = [403, 200, 200, 401, 403, 200, 400]
  t.strictSame(await answers(trusting), expected, 'from a peer in server.trustedProxies')
  t.strictSame(await answers(untrusting), expected, 'from any other peer')
})

t.test('routing is canonical: host and path variants of a stricter rule', async (t) => {
  const stack = await startStack(t, {
    config: CONFIG,
    upstreams: [
      { name: 'site', publicPaths: ['/public/**'] },
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
      { name: 'secure', match: { pathPrefix: '/', hosts: ['secure.example.com'] }, allow: { groups: ['admins'] } },
    ],
  })
  const own = new URL(stack.gw).host
  const bob = await sessionCookie(stack, 'bob')
  for (const path of ['/ADMIN/x', '/%41dmin/x', '/admin./x', '/admin%20/x', '/Admin%2E%20/x', '/admin../x', '/PUBLIC/x']) {
    for (const headers of [traefik(own, path, { cookie: bob }), nginx(`http://${own}${path}`, { cookie: bob })]) {
      const res = await check(stack, headers)
      t.equal(res.status, 400, `${path} (${headers['x-original-url'] === undefined ? 'Traefik' : 'ingress-nginx'})`)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
  }
  t.equal((await check(stack, traefik(own, '/admin/x', { cookie: bob }))).status, 403, 'the exact form is refused as before')
  t.equal((await check(stack, traefik(own, '/admin/X', { cookie: bob }))).status, 403, "case below the prefix is the upstream's own business")
  t.equal((await check(stack, traefik(own, '/administrator', { cookie: bob }))).status, 200)
  for (const host of ['secure.example.com.', 'secure.example.com:', 'SECURE.Example.COM.:0443', 'secure.example.com..']) {
    t.equal((await check(stack, traefik(host, '/x', { cookie: bob }))).status, 403, `Traefik ${host}`)
    t.equal((await check(stack, nginx(`https://${host}/x`, { cookie: bob }))).status, 403, `ingress-nginx ${host}`)
  }
})

t.test('log lines name the request checked (redacted) and the outcome', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { ...CONFIG, log: { level: 'info' } },
    logStream: { write: (line) => lines.push(line) },
    upstreams: UPSTREAMS,
  })
  const bob = await sessionCookie(stack, 'bob')
  const logged = (): Array<Record<string, unknown>> =>
    lines.map((l) => JSON.parse(l) as { forwardAuth?: Record<string, unknown> }).flatMap((l) => (l.forwardAuth === undefined ? [] : [l.forwardAuth]))
  await check(stack, traefik(APP, '/page?code=SECRETCODE&x=1'))
  await check(stack, nginx('https://app.example.com/admin/x?access_token=SECRETTOKEN', { cookie: bob, 'x-original-method': 'HEAD' }))
  await check(stack, traefik(APP, '/admin/y', { cookie: bob, 'x-original-method': 'POST' }))
  await check(stack, traefik('nowhere.example.com', '/'))
  const [first, second, third, fourth] = logged()
  t.match(first, { method: 'GET', upstream: 'app', outcome: 'unauthenticated' })
  t.match(String(first?.url), /^https:\/\/app\.example\.com\/page\?code=.*redacted.*&x=1$/)
  t.match(second, { method: 'HEAD', upstream: 'admin', outcome: 'forbidden' })
  t.match(String(second?.url), /^https:\/\/app\.example\.com\/admin\/x\?access_token=.*redacted/)
  t.match(third, { outcome: 'bad_request', reason: /different methods/ })
  t.match(fourth, { method: 'GET', url: 'https://nowhere.example.com/', outcome: 'not_found' })
  const checks = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.forwardAuth !== undefined)
  t.same(
    checks.map((l) => [l.msg, l.status]),
    [
      ['request', 401],
      ['request', 403],
      ['request', 400],
      ['request', 404],
    ],
    'one line per check: the request line, with its status',
  )
  t.notOk(
    lines.some((l) => l.includes('SECRETCODE') || l.includes('SECRETTOKEN')),
    'no secret query value in any line',
  )
  const refusal = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'access refused by the allow rules')
  t.match(refusal, { sub: 'bob', upstream: 'admin', rule: 'groups', method: 'HEAD' }, 'the 403 names who, where, which rule and the request checked')
})

t.test('a warning, once per host, when the session cookie cannot reach the host checked', async (t) => {
  const run = async (t: Tap, cookies: Record<string, unknown>): Promise<string[]> => {
    const lines: string[] = []
    const stack = await startStack(t, {
      config: { cookies, log: { level: 'warn' } },
      logStream: { write: (line) => lines.push(line) },
      upstreams: [{ name: 'app' }, { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' }],
    })
    const own = new URL(stack.gw).host
    for (const host of [APP, 'APP.example.com.:443', 'other.example.com', APP, own, 'open.example.com']) {
      t.equal((await check(stack, traefik(host, '/x'))).status, host === 'open.example.com' ? 200 : 401, host)
    }
    for (let i = 0; i < 80; i++) await check(stack, traefik(`h${i}.test`, '/'))
    return lines.filter((l) => l.includes('cookies.domain')).map((l) => String((JSON.parse(l) as { host: unknown }).host))
  }
  const hostOnly = await run(t, {})
  t.strictSame(hostOnly.slice(0, 2), ['app.example.com', 'other.example.com'], 'once per host; not for the public host nor an auth: none upstream')
  t.equal(hostOnly.length, 64, 'the hosts remembered are capped')
  t.strictSame(
    await run(t, { domain: 'example.com' }),
    Array.from({ length: 64 }, (_, i) => `h${i}.test`),
    'cookies.domain covers example.com',
  )
})

t.test('expired sign-ins', async (t) => {
  for (const store of ['cookie', 'memory']) {
    t.test(`${store} store: refreshed transparently, as on the proxy`, async (t) => {
      const clock = manualClock()
      const stack = await startStack(t, { clock, provider: { accessTokenTtlSeconds: 3 }, config: { ...CONFIG, session: { store } }, upstreams: UPSTREAMS })
      const cookie = await sessionCookie(stack, 'alice')
      const first = await check(stack, traefik(APP, '/tokens', { cookie }))
      clock.advance(3300)
      const res = await check(stack, traefik(APP, '/tokens', { cookie }))
      t.equal(res.status, 200)
      t.equal(res.headers['x-auth-request-user'], 'alice')
      t.not(res.headers['x-auth-request-access-token'], first.headers['x-auth-request-access-token'], 'a new access token')
      // The cookie store's refreshed session travels back in the check's answer.
      if (store === 'cookie') t.match(String(res.headers['set-cookie']), /ogw=/)
    })
  }

  t.test(
    'cookies.credentialsPath /api/v1/openid: 401 invalid_token, a page load to the refresh endpoint (the refresh token is not sent to applications)',
    async (t) => {
      const clock = manualClock()
      const stack = await startStack(t, {
        clock,
        provider: { accessTokenTtlSeconds: 3 },
        config: { ...CONFIG, cookies: { credentialsPath: '/api/v1/openid' } },
        upstreams: UPSTREAMS,
      })
      const cookie = await sessionCookie(stack, 'alice')
      t.equal((await check(stack, traefik(APP, '/page', { cookie }))).status, 200)
      clock.advance(3300)
      const res = await check(stack, traefik(APP, '/page', { cookie, accept: 'application/json' }))
      t.equal(res.status, 401)
      t.equal(res.headers['www-authenticate'], 'Bearer error="invalid_token", resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"')
      t.equal(res.headers.location, undefined)
      const page = await check(stack, traefik(APP, '/page', { cookie, accept: 'text/html' }))
      // As on the proxy: the refresh endpoint, which the credentials cookie reaches, renews it.
      t.equal(page.status, 302, "a browser's page load behind Traefik is sent to renew its sign-in")
      t.equal(page.headers.location, `${stack.gw}/api/v1/openid/refresh?redirectAfter=${encodeURIComponent('https://app.example.com/page')}`)
    },
  )
})

t.test('identityAssertion: the 200 carries the assertion for the ingress to copy, signed as on the proxy', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ogw-fa-assert-'))
  const keyFile = join(dir, 'assertion.pem')
  writeFileSync(keyFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))
  const stack = await startStack(t, {
    config: { ...CONFIG, assertions: { signingKeys: [keyFile], header: 'X-Signed-Identity' } },
    upstreams: [
      { name: 'billing', match: { pathPrefix: '/billing', hosts: [APP] }, identityAssertion: true, publicPaths: ['/billing/public/**'] },
      { name: 'app', match: { pathPrefix: '/', hosts: [APP] } },
    ],
  })
  const cookie = await sessionCookie(stack, 'alice')
  const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
  const FORGED = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.'
  const asked = {
    'ingress-nginx': nginx('https://app.example.com/billing/invoices?page=2', { cookie, 'x-signed-identity': FORGED }),
    traefik: traefik(APP, '/billing/invoices?page=2', { cookie, 'x-signed-identity': FORGED }),
  }
  for (const [ingress, headers] of Object.entries(asked)) {
    const res = await check(stack, headers)
    t.equal(res.status, 200, ingress)
    t.equal(res.headers['x-auth-request-user'], 'alice')
    const assertion = res.headers['x-signed-identity']
    if (typeof assertion !== 'string') throw new Error(`${ingress}: no assertion under assertions.header`)
    t.not(assertion, FORGED, "never the client's own")
    // What the application does (docs/features/identity-assertions.md).
    const { payload } = await jose.jwtVerify(assertion, jwks, { issuer: stack.gw, audience: 'billing' })
    t.equal(payload.sub, 'alice')
    t.equal(payload.email, 'alice@example.com')
    t.strictSame(payload.groups, ['admins', 'staff'])
    t.equal(payload.idp, stack.provider?.issuer)
    t.equal(res.headers['x-identity-assertion'], undefined, 'under the configured name only')
  }
  const other = await check(stack, traefik(APP, '/page', { cookie, 'x-signed-identity': FORGED }))
  t.equal(other.status, 200)
  t.equal(other.headers['x-signed-identity'], undefined, 'an upstream without identityAssertion: none')
  const anonymous = await check(stack, traefik(APP, '/billing/public/logo.png', { 'x-signed-identity': FORGED }))
  t.equal(anonymous.status, 200)
  t.equal(anonymous.headers['x-signed-identity'], undefined, 'no identity, no assertion')
  const refused = await check(stack, traefik(APP, '/billing/invoices', { 'x-signed-identity': FORGED }))
  t.equal(refused.status, 401)
  t.equal(refused.headers['x-signed-identity'], undefined, 'nor with a refusal')
})
