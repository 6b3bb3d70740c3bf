import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import type { OutgoingHttpHeaders } from 'node:http'
import { rawRequest, type RawResponse } from '../fixtures/http.js'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.js'
import type { Problem } from '../../src/errors.js'

// GET /api/v1/openid/auth, as ingress-nginx (auth-url: X-Original-URL) and Traefik (ForwardAuth:
// X-Forwarded-Host/-Uri/-Method) call it. The test client is 127.0.0.1: trusted when
// server.trustedProxies covers 127.0.0.0/8, untrusted with the default (empty) list.

const AUTH = '/api/v1/openid/auth'
const TRUSTED = { server: { trustedProxies: ['127.0.0.0/8'] }, redirects: { allowedHosts: ['app.example.com'] } }
const APP = 'app.example.com'

function check(stack: Stack, headers: OutgoingHttpHeaders, method = 'GET'): Promise<RawResponse> {
  return rawRequest(stack.gw, AUTH, { method, headers })
}

/** What an ingress sends for a request to `uri` on `host`, with the client's cookie. */
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

const TRUSTED_UPSTREAMS = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, publicPaths: ['/public/**'] },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['admins'] } },
  { name: 'tokens', match: { pathPrefix: '/tokens', hosts: [APP] }, forwardAccessToken: true },
  { name: 'cors', match: { pathPrefix: '/cors', hosts: [APP] }, allowPreflight: true },
  { name: 'maybe', match: { pathPrefix: '/maybe', hosts: [APP] }, auth: 'optional' },
  { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
  { name: 'other', match: { pathPrefix: '/', hosts: ['other.example.com'] } },
]

t.test('from a trusted proxy', async (t) => {
  const stack = await startStack(t, { config: TRUSTED, upstreams: TRUSTED_UPSTREAMS })
  const alice = await sessionCookie(stack, 'alice')
  const bob = await sessionCookie(stack, 'bob')

  t.test('signed in and allowed: 200, empty body, X-Auth-Request-* identity, no-store', async (t) => {
    for (const method of ['GET', 'HEAD']) {
      const res = await check(stack, traefik(APP, '/page?x=1', { cookie: alice }), method)
      t.equal(res.status, 200, method)
      t.equal(res.body, '')
      t.equal(res.headers['cache-control'], 'no-store')
      t.strictSame(identityHeaders(res), {
        'x-auth-request-user': 'alice',
        'x-auth-request-email': 'alice@example.com',
        'x-auth-request-groups': 'admins,staff',
        'x-auth-request-preferred-username': 'alice',
      }, 'no access token: the upstream does not forward it')
    }
    t.equal(stack.upstream.requests.length, 0, 'a check never reaches an upstream')
  })

  t.test('a Bearer JWT counts as signed in, as on the proxy', async (t) => {
    const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, email: 'svc@example.com' })
    const res = await check(stack, traefik(APP, '/api', { authorization: `Bearer ${token}` }))
    t.equal(res.status, 200)
    t.equal(res.headers['x-auth-request-user'], 'service-a')
    t.equal(res.headers['x-auth-request-email'], 'svc@example.com')
  })

  t.test('not signed in: 401 problem+json with WWW-Authenticate and signInUrl back to the original URL', async (t) => {
    const navigation = { accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate' }
    for (const extra of [{}, navigation, { accept: 'application/json' }]) {
      const res = await check(stack, traefik(APP, '/page?x=1', extra))
      t.equal(res.status, 401, 'never a redirect: the ingress sends users to sign in')
      t.equal(res.headers.location, undefined)
      t.equal(res.headers['www-authenticate'], 'Bearer')
      t.equal(res.headers['cache-control'], 'no-store')
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      const body = res.json<Problem>()
      t.equal(body.code, 'unauthenticated')
      t.equal(body.signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('https://app.example.com/page?x=1')}`)
    }
    const res = await check(stack, traefik(APP, '/page', { cookie: 'ogw=forged; other=1' }))
    t.equal(res.status, 401, 'a forged session cookie is no session')
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
    const cases: Array<[string, string]> = [[APP, '/public/x'], [APP, '/public/'], ['open.example.com', '/anything'], ['OPEN.example.com:8443', '/']]
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
    const jwt = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID })
    const bearer = await check(stack, traefik(APP, '/tokens', { authorization: `Bearer ${jwt}` }))
    t.equal(bearer.headers['x-auth-request-access-token'], jwt, 'a Bearer caller gets its own token back')
    const anon = await check(stack, traefik(APP, '/tokens', { 'x-auth-request-access-token': 'forged' }))
    t.equal(anon.status, 401)
    t.equal(anon.headers['x-auth-request-access-token'], undefined)
  })

  t.test('CORS preflights pass only on an allowPreflight upstream, and only when recognizable', async (t) => {
    const acrm = { 'access-control-request-method': 'POST', origin: 'https://spa.example.com' }
    t.equal((await check(stack, traefik(APP, '/cors/api', { ...acrm, 'x-forwarded-method': 'OPTIONS' }))).status, 200)
    const nginx = { 'x-original-url': 'https://app.example.com/cors/api', 'x-original-method': 'OPTIONS', ...acrm }
    t.equal((await check(stack, nginx)).status, 200, 'X-Original-Method (ingress-nginx) too')
    t.equal((await check(stack, traefik(APP, '/cors/api', { 'x-forwarded-method': 'OPTIONS' }))).status, 401, 'a plain OPTIONS is not a preflight')
    t.equal((await check(stack, traefik(APP, '/cors/api', acrm))).status, 401, 'a GET with Access-Control-Request-Method is not one')
    t.equal((await check(stack, traefik(APP, '/page', { ...acrm, 'x-forwarded-method': 'OPTIONS' }))).status, 401, 'not on other upstreams')
  })

  t.test('ingress-nginx: X-Original-URL', async (t) => {
    const ok = await check(stack, { 'x-original-url': 'https://app.example.com/admin/x?y=1', 'x-original-method': 'GET', cookie: alice })
    t.equal(ok.status, 200)
    t.equal(ok.headers['x-auth-request-user'], 'alice')
    t.equal((await check(stack, { 'x-original-url': 'https://app.example.com/admin/x', cookie: bob })).status, 403)
    t.equal((await check(stack, { 'x-original-url': 'http://app.example.com/public/a' })).status, 200)
    t.equal((await check(stack, { 'x-original-url': 'HTTPS://APP.example.com:443?q' })).status, 401, 'an empty path is /')
    const anon = await check(stack, { 'x-original-url': 'http://app.example.com/page?a=1&b=2' })
    t.equal(anon.status, 401)
    t.equal(anon.json<Problem>().signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('http://app.example.com/page?a=1&b=2')}`)
    // The same request described twice (as some nginx configurations do) is fine.
    const both = { 'x-original-url': 'https://app.example.com/public/x', 'x-forwarded-host': 'APP.example.com', 'x-forwarded-uri': '/public/./x' }
    t.equal((await check(stack, both)).status, 200)
  })

  t.test('the two descriptions must agree, so a client cannot add the set its ingress does not set', async (t) => {
    // Behind ingress-nginx a client adds X-Forwarded-Uri; behind Traefik, X-Original-URL.
    const cases: OutgoingHttpHeaders[] = [
      { 'x-original-url': 'https://app.example.com/page', 'x-forwarded-uri': '/public/x' },
      { 'x-original-url': 'https://app.example.com/page', 'x-forwarded-host': 'open.example.com' },
      traefik(APP, '/page', { 'x-original-url': 'https://app.example.com/public/x' }),
      traefik(APP, '/page', { 'x-original-url': 'https://open.example.com/page' }),
    ]
    for (const headers of cases) {
      const res = await check(stack, headers)
      t.equal(res.status, 400, JSON.stringify(headers))
      t.equal(res.json<Problem>().code, 'bad_request')
      t.equal(res.headers['cache-control'], 'no-store')
    }
  })

  t.test('a refused or ambiguous description is 400; a path trick is decided for the path it resolves to', async (t) => {
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
      { 'x-forwarded-host': APP, 'x-forwarded-uri': ['/public/x', '/admin'] },
      { 'x-original-url': 'ftp://app.example.com/x' },
      { 'x-original-url': 'https://user@app.example.com/public/x' },
      { 'x-original-url': '/public/x' },
      { 'x-original-url': 'https://app.example.com/public/../x y' },
      { 'x-forwarded-host': APP },
      {},
    ]
    for (const headers of refused) {
      const res = await check(stack, headers)
      t.equal(res.status, 400, JSON.stringify(headers))
      t.equal(res.json<Problem>().code, 'bad_request')
    }
    for (const uri of ['/public/../admin', '/public/%2e%2e/admin', '//public/../admin', '/public/./../admin']) {
      const res = await check(stack, traefik(APP, uri, { cookie: bob }))
      t.equal(res.status, 403, `${uri} is /admin`)
    }
    const normalized = await check(stack, traefik(APP, '/%70ublic//x/./y'))
    t.equal(normalized.status, 200, 'an encoded unreserved character and duplicate slashes normalize to a public path')
  })

  t.test('no upstream: 404 not_found', async (t) => {
    const cases: Array<[string, string]> = [['nowhere.example.com', '/'], ['app.example.com.evil', '/public/x'], [APP, '/api/v1/openid/redirect']]
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
      'X_Auth_Request_User': 'mallory',
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

t.test('from an untrusted peer the forwarded description is ignored: the check is for its Host and /', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => lines.push(line) },
    upstreams: [
      { name: 'app', publicPaths: ['/public/**'] },
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
      { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
    ],
  })
  const own = new URL(stack.gw).host

  // oauth2-proxy GHSA-7x63-xv5r-3p2x: a client-chosen X-Forwarded-Uri made a public-path rule apply.
  const spoofs: OutgoingHttpHeaders[] = [
    { 'x-forwarded-uri': '/public/x' },
    { 'x-forwarded-uri': '/public/x', 'x-forwarded-host': own },
    { 'x-forwarded-uri': '/x', 'x-forwarded-host': 'open.example.com' },
    { 'x-original-url': `${stack.gw}/public/x` },
    { 'x-original-url': 'https://open.example.com/' },
    { 'x-forwarded-uri': '/cors', 'x-forwarded-method': 'OPTIONS', 'access-control-request-method': 'GET' },
    { 'x-forwarded-uri': 'not a path' },
    {},
  ]
  for (const headers of spoofs) {
    const res = await check(stack, headers)
    t.equal(res.status, 401, JSON.stringify(headers))
    t.equal(res.json<Problem>().code, 'unauthenticated')
    t.equal(res.json<Problem>().signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent(`${stack.gw}/`)}`)
  }

  const bob = await sessionCookie(stack, 'bob')
  const res = await check(stack, { 'x-forwarded-uri': '/admin', cookie: bob })
  t.equal(res.status, 200, 'nor can it pick a stricter rule: bob is checked for /, not /admin')
  t.equal(res.headers['x-auth-request-user'], 'bob')

  const ownHost = await check(stack, { host: 'open.example.com', 'x-forwarded-host': own, 'x-forwarded-uri': '/admin' })
  t.equal(ownHost.status, 200, "the request's own Host is what counts")

  const warnings = lines.filter((line) => line.includes('forward-auth'))
  t.equal(warnings.length, 1, 'the ignored headers are logged once')
})

t.test('expired sign-ins', async (t) => {
  t.test('cookie store: refreshed transparently, the refreshed cookies in the answer', async (t) => {
    const stack = await startStack(t, { provider: { accessTokenTtlSeconds: 3 }, config: TRUSTED, upstreams: TRUSTED_UPSTREAMS })
    const cookie = await sessionCookie(stack, 'alice')
    const first = await check(stack, traefik(APP, '/tokens', { cookie }))
    await sleep(3300)
    const res = await check(stack, traefik(APP, '/tokens', { cookie }))
    t.equal(res.status, 200)
    t.equal(res.headers['x-auth-request-user'], 'alice')
    t.not(res.headers['x-auth-request-access-token'], first.headers['x-auth-request-access-token'], 'a new access token')
    t.match(String(res.headers['set-cookie']), /ogw=/)
  })

  t.test('cookies.credentialsPath /api/v1/openid: 401 invalid_token (the refresh token is not sent to applications)', async (t) => {
    const stack = await startStack(t, {
      provider: { accessTokenTtlSeconds: 3 },
      config: { ...TRUSTED, cookies: { credentialsPath: '/api/v1/openid' } },
      upstreams: TRUSTED_UPSTREAMS,
    })
    const cookie = await sessionCookie(stack, 'alice')
    t.equal((await check(stack, traefik(APP, '/page', { cookie }))).status, 200)
    await sleep(3300)
    const res = await check(stack, traefik(APP, '/page', { cookie, accept: 'text/html' }))
    t.equal(res.status, 401)
    t.equal(res.headers['www-authenticate'], 'Bearer error="invalid_token"')
    t.equal(res.headers.location, undefined)
  })

  t.test('memory store: refreshed transparently, as on the proxy', async (t) => {
    const stack = await startStack(t, {
      provider: { accessTokenTtlSeconds: 3 },
      config: { ...TRUSTED, session: { store: 'memory' } },
      upstreams: TRUSTED_UPSTREAMS,
    })
    const cookie = await sessionCookie(stack, 'alice')
    const first = await check(stack, traefik(APP, '/tokens', { cookie }))
    await sleep(3300)
    const res = await check(stack, traefik(APP, '/tokens', { cookie }))
    t.equal(res.status, 200)
    t.equal(res.headers['x-auth-request-user'], 'alice')
    t.not(res.headers['x-auth-request-access-token'], first.headers['x-auth-request-access-token'], 'a new access token')
  })
})
