import * as jose from 'jose'
import t from 'tap'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { rawRequest } from '../fixtures/http.ts'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

const JSON_ACCEPT = { accept: 'application/json' }

t.test('auth: required', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', publicPaths: ['/public/**', '/assets/*.css'] }] })

  t.test('a browser navigation without a session is sent to sign in with redirectAfter', async (t) => {
    for (const headers of [{ accept: 'text/html,application/xhtml+xml' }, { accept: '*/*', 'sec-fetch-mode': 'navigate' }]) {
      const res = await rawRequest(stack.gw, '/app/page?a=1&b=2', { headers })
      t.equal(res.status, 302)
      t.equal(res.headers.location, '/api/v1/openid/redirect?redirectAfter=%2Fapp%2Fpage%3Fa%3D1%26b%3D2')
    }
    const head = await rawRequest(stack.gw, '/x', { method: 'HEAD', headers: { accept: 'text/html' } })
    t.equal(head.status, 302, 'HEAD navigations too')
    t.equal(stack.upstream.requests.length, 0, 'nothing reached the upstream')
  })

  t.test('anything else gets 401 problem+json with WWW-Authenticate and signInUrl', async (t) => {
    for (const [method, headers] of [
      ['GET', JSON_ACCEPT],
      ['GET', {}],
      ['POST', { accept: 'text/html' }],
      ['DELETE', { 'sec-fetch-mode': 'navigate' }],
    ] as const) {
      const res = await rawRequest(stack.gw, '/api/items?x=1', { method, headers })
      t.equal(res.status, 401, `${method} ${JSON.stringify(headers)}`)
      // RFC 9728 5.1: on by default, the challenge names the upstream's metadata (on `/`: the bare suffix).
      t.equal(res.headers['www-authenticate'], `Bearer resource_metadata="${stack.gw}/.well-known/oauth-protected-resource"`)
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      const body = res.json<Problem>()
      t.equal(body.code, 'unauthenticated')
      t.equal(body.signInUrl, `${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fapi%2Fitems%3Fx%3D1`)
    }
    t.equal(stack.upstream.requests.length, 0)
  })

  t.test('a signed-in request is proxied, with the path and query as sent', async (t) => {
    const browser = await stack.signedIn('alice')
    const res = await browser.fetch(`${stack.gw}/app/page?a=1&b=%20x`, { headers: JSON_ACCEPT })
    t.equal(res.status, 200)
    const last = stack.upstream.requests.at(-1)
    t.equal(last?.url, '/app/page?a=1&b=%20x')
    t.equal(last?.headers['x-forwarded-user'], 'alice')
  })

  t.test('publicPaths need no session', async (t) => {
    for (const path of ['/public/', '/public/a/b.js', '/assets/site.css']) {
      const res = await rawRequest(stack.gw, path, { headers: JSON_ACCEPT })
      t.equal(res.status, 200, path)
    }
    for (const path of ['/assets/deep/site.css', '/publicity', '/assets/site.js']) {
      const res = await rawRequest(stack.gw, path, { headers: JSON_ACCEPT })
      t.equal(res.status, 401, path)
    }
    // Matching is case-sensitive and a trailing dot makes another segment, but an upstream that
    // folds case or strips dots reads these as public paths: ambiguous, so refused (ambiguity.ts).
    for (const path of ['/PUBLIC/x', '/Public/x', '/public./x', '/public%2e/x']) {
      const res = await rawRequest(stack.gw, path, { headers: JSON_ACCEPT })
      t.equal(res.status, 400, path)
    }
  })

  t.test('path tricks never reach a protected path without a session', async (t) => {
    const before = stack.upstream.requests.length
    const tricks = [
      '/public/../admin',
      '/public/./../admin',
      '/public/%2e%2e/admin',
      '/public/%2E%2E/admin',
      '/public/.%2e/admin',
      '/public/..%2fadmin',
      '/public%2f..%2fadmin',
      '/public/..%5cadmin',
      '/public/..\\admin',
      '//public/../admin',
      '/public//../admin',
      '/public/%252e%252e/admin',
      '/public/%c0%ae%c0%ae/admin',
      '/public;x=y/../admin',
      '/public/..;/admin',
      '/public/%00/../admin',
      '/public/../admin#',
    ]
    for (const target of tricks) {
      const res = await rawRequest(stack.gw, target, { headers: JSON_ACCEPT })
      t.ok(res.status === 400 || res.status === 401, `${target} -> ${res.status}`)
      t.not(res.status, 500)
    }
    t.equal(stack.upstream.requests.length, before, 'the upstream saw none of them')
  })

  t.test('the upstream sees the normalized path it was authorized for', async (t) => {
    const res = await rawRequest(stack.gw, '/public/x/../y//z/./%61?q=%2F', { headers: JSON_ACCEPT })
    t.equal(res.status, 200)
    t.equal(stack.upstream.requests.at(-1)?.url, '/public/y/z/a?q=%2F')
  })

  t.test('a tampered, truncated or foreign session cookie is no session, never a 500', async (t) => {
    const browser = await stack.signedIn('alice')
    const value = browser.cookie('ogw')?.value ?? ''
    const foreign = new CookieCipher(['another-gateway-secret-0123456789abcdef'], systemClock).seal(
      'session:ogw',
      { i: 'x', c: { sub: 'mallory' }, a: 't', x: 9e9, t: 1 },
      9e9,
    )
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1)
    for (const cookie of [flip(value, 20), flip(value, value.length - 3), value.slice(0, -10), value.slice(0, 9), foreign, '', '%%%', 'a.b.c']) {
      const res = await rawRequest(stack.gw, '/private', { headers: { ...JSON_ACCEPT, cookie: `ogw=${cookie}` } })
      t.equal(res.status, 401, cookie.slice(0, 20))
    }
  })
})

t.test('auth: optional passes anonymous requests, with identity when signed in', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'optional' }] })
  const anon = await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, 'x-forwarded-user': 'mallory' } })
  t.equal(anon.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], undefined, 'spoofed identity removed')
  const browser = await stack.signedIn('bob')
  t.equal((await browser.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'bob')
})

t.test('auth: none proxies everything without identity', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }] })
  const res = await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, 'X-Forwarded-Email': 'ceo@example.com' } })
  t.equal(res.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-email'], undefined)
})

t.test('allow rules: signed in but not allowed is 403 forbidden', async (t) => {
  const stack = await startStack(t, {
    upstreams: [
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
      { name: 'mail', match: { pathPrefix: '/mail' }, allow: { emails: ['bob@example.com'] } },
      { name: 'domain', match: { pathPrefix: '/corp' }, allow: { emailDomains: ['example.org'] } },
      { name: 'claims', match: { pathPrefix: '/claims' }, allow: { claims: { preferred_username: ['alice'] } } },
      { name: 'both', match: { pathPrefix: '/both' }, allow: { groups: ['staff'], emails: ['alice@example.com'] } },
      { name: 'app' },
    ],
  })
  const alice = await stack.signedIn('alice')
  const bob = await stack.signedIn('bob')
  const status = async (b: typeof alice, path: string) => (await b.fetch(stack.gw + path, { headers: JSON_ACCEPT })).status
  t.equal(await status(alice, '/admin/x'), 200)
  t.equal(await status(bob, '/admin/x'), 403)
  t.equal(await status(bob, '/mail'), 200)
  t.equal(await status(alice, '/mail'), 403)
  t.equal(await status(alice, '/corp'), 403, 'example.com is not example.org')
  t.equal(await status(alice, '/claims/1'), 200)
  t.equal(await status(bob, '/claims/1'), 403)
  t.equal(await status(alice, '/both'), 200)
  t.equal(await status(bob, '/both'), 403, 'every kind of rule must pass')
  const res = await bob.fetch(`${stack.gw}/admin`, { headers: JSON_ACCEPT })
  t.match(res.headers.get('content-type'), /^application\/problem\+json/)
  t.equal(((await res.json()) as Problem).code, 'forbidden')
  const nav = await bob.fetch(`${stack.gw}/admin`, { navigate: true })
  t.equal(nav.status, 403, 'a forbidden navigation is not sent to sign in again')
})

t.test("Bearer JWT access tokens signed ES256 with the provider's P-256 key", async (t) => {
  const stack = await startStack(t, { provider: { idTokenSigningAlg: 'ES256' }, upstreams: [{ name: 'app' }] })
  const token = await stack.provider!.signJwt({ sub: 'service-ec', aud: CLIENT_ID, scope: 'api' }, { alg: 'ES256', typ: 'at+jwt' })
  t.equal(jose.decodeProtectedHeader(token).alg, 'ES256')
  const call = (bearer: string) => rawRequest(stack.gw, '/api', { headers: { ...JSON_ACCEPT, authorization: `Bearer ${bearer}` } })
  t.equal((await call(token)).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'service-ec')
  t.equal((await call(token.slice(0, -4) + (token.endsWith('AAAA') ? 'BBBB' : 'AAAA'))).status, 401, 'a tampered ES256 signature is refused')
})

t.test('a session too large for one cookie (dana, in 150 groups) is chunked and passes whole', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app' }] })
  const browser = await stack.signedIn('dana')
  const cookies = browser.cookieHeader(stack.gw)
  t.match(cookies, /(^|; )ogw_1=/, 'the session cookie is split in chunks')
  const res = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie: cookies } })
  t.equal(res.status, 200)
  t.equal(String(stack.upstream.requests.at(-1)?.headers['x-forwarded-groups']).split(',').length, 150, 'every group reaches the upstream')
})

t.test('CORS preflights are refused unless allowPreflight', async (t) => {
  const stack = await startStack(t, {
    upstreams: [{ name: 'open', match: { pathPrefix: '/open' }, allowPreflight: true }, { name: 'app' }],
  })
  const preflight = { origin: 'https://spa.example.com', 'access-control-request-method': 'POST' }
  t.equal((await rawRequest(stack.gw, '/api', { method: 'OPTIONS', headers: preflight })).status, 401)
  t.equal((await rawRequest(stack.gw, '/open/api', { method: 'OPTIONS', headers: preflight })).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.method, 'OPTIONS')
  t.equal((await rawRequest(stack.gw, '/open/api', { method: 'OPTIONS' })).status, 401, 'a plain OPTIONS is not a preflight')
})

t.test('Bearer JWT access tokens', async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const stack = await startStack(t, {
    config: { log: { level: 'debug' } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    upstreams: [{ name: 'admin', match: { pathPrefix: '/admin' } }, { name: 'app' }],
  })
  const provider = stack.provider!
  const call = (token: string, path = '/api') => rawRequest(stack.gw, path, { headers: { ...JSON_ACCEPT, authorization: `Bearer ${token}` } })
  // aud = the client id alone is an ID token's shape: an access token for the gateway itself
  // says what it is (here with `scope`; see accessTokenViolation).
  const at = (claims: Record<string, unknown>) => ({ aud: CLIENT_ID, scope: 'api', ...claims })
  const good = await provider.signJwt(at({ sub: 'service-a', email: 'svc@example.com' }))
  const ok = await call(good)
  t.equal(ok.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'service-a')
  t.equal((await call(good)).status, 200, 'cached verification')

  const bad: Array<[string, string]> = [
    ['tampered', good.slice(0, -4) + (good.endsWith('AAAA') ? 'BBBB' : 'AAAA')],
    ['expired', await provider.signJwt(at({ sub: 's' }), { expiresIn: -600 })],
    ['wrong audience', await provider.signJwt(at({ sub: 's', aud: 'someone-else' }))],
    ['wrong issuer', await provider.signJwt(at({ sub: 's', iss: 'https://evil.example.com' }))],
    ['alg none', await provider.signJwt(at({ sub: 's' }), { alg: 'none' })],
    ['HS256 keyed with the public key', await provider.signJwt(at({ sub: 's' }), { alg: 'HS256' })],
    ['unknown kid', await provider.signJwt(at({ sub: 's' }), { kid: 'unknown' })],
    ['not a JWT', 'opaque-token-value'],
    ['a token with a nonce (an ID token)', await provider.signJwt({ sub: 's', aud: CLIENT_ID, nonce: 'n' })],
    ['aud the client id alone, nothing marking an access token', await provider.signJwt({ sub: 's', aud: CLIENT_ID })],
    ['sub empty', await provider.signJwt(at({ sub: '' }))],
    ['sub a number', await provider.signJwt(at({ sub: 123 }))],
    ['sub missing', await provider.signJwt(at({ sub: undefined }))],
    // RFC 9449 7: a DPoP-bound token needs its proof; presented as Bearer it has none.
    ['DPoP-bound (cnf.jkt), no proof', await provider.signJwt(at({ sub: 'service-a', cnf: { jkt: 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs' } }))],
    ['mTLS-bound (cnf x5t#S256)', await provider.signJwt(at({ sub: 'service-a', cnf: { 'x5t#S256': 'bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2' } }))],
  ]
  for (const [name, token] of bad) {
    for (const path of ['/api', '/admin/x']) {
      const res = await call(token, path)
      t.equal(res.status, 401, `${name} ${path}`)
      t.equal(res.json<Problem>().code, 'unauthenticated')
      // RFC 6750 3.1: a token that came and was refused is invalid_token.
      const metadata = `${stack.gw}/.well-known/oauth-protected-resource${path === '/api' ? '' : '/admin'}`
      t.equal(res.headers['www-authenticate'], `Bearer error="invalid_token", resource_metadata="${metadata}"`, `${name} ${path}: invalid_token`)
    }
  }
  t.equal(stack.upstream.requests.length, 2, 'only the good token reached an upstream')
  t.ok(
    lines.some((l) => l.msg === 'Bearer JWT refused' && /sender-constrained \(cnf\)/.test(String(l.reason))),
    'the log says a bound token was refused',
  )
  t.ok(
    lines.some((l) => l.msg === 'Bearer JWT refused' && l.reason === 'sub is not a non-empty string'),
    'the log says why',
  )

  // The real ID token of a sign-in, as the browser sees it in the logout's end-session URL.
  const browser = await stack.signedIn('alice')
  const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  const idToken = new URL(((await logout.json()) as { value: string }).value).searchParams.get('id_token_hint') ?? ''
  t.ok(idToken.split('.').length === 3, 'an ID token was obtained')
  t.equal((await call(idToken)).status, 401, 'an ID token is not an access token')
  // The same ID token without the claims that gave it away so far (nonce, at_hash), re-signed by
  // the provider's key: still an ID token's shape, still refused.
  const claims = jose.decodeJwt(idToken)
  t.equal(claims.aud, CLIENT_ID, "the dev provider's ID token has aud = the client id")
  const bare = await provider.signJwt({ ...claims, nonce: undefined, at_hash: undefined, exp: undefined }, { expiresIn: 300 })
  t.equal((await call(bare)).status, 401, 'an ID token without nonce or at_hash is not an access token either')
  t.match(lines.filter((l) => l.msg === 'Bearer JWT refused').at(-1), { reason: /shaped like an ID token/ })
  t.equal(stack.upstream.requests.length, 2)
})
