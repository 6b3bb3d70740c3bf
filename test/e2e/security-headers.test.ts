import t, { type Test } from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { freePort, startStack } from '../fixtures/stack.ts'

// Responses the gateway writes itself (sign-in endpoints, every problem+json error) carry the
// security headers of ops/response-headers.ts and Cache-Control: no-store; upstream responses are passed
// through exactly as the upstream sent them.

const EXPECTED: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
}

type HeaderSource = { get(name: string): string | null } | Record<string, string | string[] | undefined>

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof headers.get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined
  const value = (headers as Record<string, string | string[] | undefined>)[name]
  return Array.isArray(value) ? value.join(', ') : value
}

function hasSecurityHeaders(t: Test, headers: HeaderSource, label: string): void {
  for (const [name, value] of Object.entries(EXPECTED)) t.equal(header(headers, name), value, `${label}: ${name}`)
}

function hasNone(t: Test, headers: HeaderSource, label: string): void {
  for (const name of Object.keys(EXPECTED)) t.equal(header(headers, name), undefined, `${label}: no ${name}`)
}

t.test('security headers', async (t) => {
  const closedPort = await freePort()
  const stack = await startStack(t, {
    // The echo upstream answers /status/N and /slow at its root, so each upstream is told apart
    // by host (prefixes are forwarded as they are).
    upstreams: [
      { name: 'open', match: { pathPrefix: '/', hosts: ['127.0.0.1'] }, auth: 'none', timeoutMs: 300 },
      { name: 'app', match: { pathPrefix: '/', hosts: ['app.test'] } },
      { name: 'admin', match: { pathPrefix: '/admin', hosts: ['127.0.0.1'] }, allow: { emails: ['nobody@example.com'] } },
      { name: 'down', match: { pathPrefix: '/down', hosts: ['127.0.0.1'] }, auth: 'none', target: `http://127.0.0.1:${closedPort}` },
    ],
  })
  const json = { accept: 'application/json' }
  const app = (cookie?: string): Record<string, string> => ({ ...json, host: 'app.test', ...(cookie === undefined ? {} : { cookie }) })

  t.test('every problem+json error of the gateway carries them', async (t) => {
    const browser = await stack.signedIn('alice')
    const cases: Array<[label: string, status: number, send: () => Promise<{ status: number; headers: HeaderSource }>]> = [
      ['no upstream (404)', 404, () => rawRequest(stack.gw, '/nowhere', { headers: { ...json, host: 'other.test' } })],
      ['wrong method (405)', 405, () => rawRequest(stack.gw, '/api/v1/openid/redirect', { method: 'POST' })],
      ['unknown sign-in endpoint (404)', 404, () => rawRequest(stack.gw, '/api/v1/openid/nope')],
      ['not signed in (401)', 401, () => rawRequest(stack.gw, '/page', { headers: app() })],
      ['not allowed (403)', 403, () => browser.fetch(`${stack.gw}/admin/page`, { headers: json })],
      ['upstream unreachable (502)', 502, () => rawRequest(stack.gw, '/down/page', { headers: json })],
      ['upstream timeout (504)', 504, () => rawRequest(stack.gw, '/slow?ms=2000', { headers: json })],
      ['malformed path (400)', 400, () => rawRequest(stack.gw, '/a%2Fb', { headers: json })],
      ['bad parameter (400)', 400, () => rawRequest(stack.gw, '/api/v1/openid/redirect?performRedirect=maybe')],
      ['callback without code (400)', 400, () => rawRequest(stack.gw, '/api/v1/openid/callback')],
      ['callback with a foreign state (403)', 403, () => rawRequest(stack.gw, '/api/v1/openid/callback?code=c&state=s')],
      ['refresh without session (400)', 400, () => rawRequest(stack.gw, '/api/v1/openid/refresh')],
      ['logout without session (401)', 401, () => rawRequest(stack.gw, '/api/v1/openid/logout', { method: 'DELETE' })],
    ]
    for (const [label, status, send] of cases) {
      const res = await send()
      t.equal(res.status, status, label)
      t.match(header(res.headers, 'content-type'), /^application\/problem\+json/, `${label}: problem+json`)
      hasSecurityHeaders(t, res.headers, label)
    }
    t.equal(
      header((await rawRequest(stack.gw, '/page', { headers: app() })).headers, 'www-authenticate'),
      'Bearer resource_metadata="http://app.test/.well-known/oauth-protected-resource"',
      'error headers are kept',
    )
    t.equal(header((await rawRequest(stack.gw, '/api/v1/openid/logout')).headers, 'allow'), 'DELETE')
  })

  t.test('every sign-in endpoint answer carries them', async (t) => {
    hasSecurityHeaders(t, (await rawRequest(stack.gw, '/api/v1/openid/redirect')).headers, 'redirect 302')
    hasSecurityHeaders(t, (await rawRequest(stack.gw, '/api/v1/openid/redirect?performRedirect=0')).headers, 'redirect 200')
    const browser = stack.browser()
    const callback = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
    t.equal(callback.status, 200)
    hasSecurityHeaders(t, callback.headers, 'callback 200')
    const back = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fapp%2Fx`, 'alice')
    t.equal(back.status, 302)
    hasSecurityHeaders(t, back.headers, 'callback 302')
    const refresh = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
    t.equal(refresh.status, 200)
    hasSecurityHeaders(t, refresh.headers, 'refresh 200')
    const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
    t.equal(logout.status, 200)
    hasSecurityHeaders(t, logout.headers, 'logout 200')
  })

  t.test("the guard's redirect to sign in and forward-auth answers carry them", async (t) => {
    const nav = await rawRequest(stack.gw, '/page', { headers: { host: 'app.test', accept: 'text/html' } })
    t.equal(nav.status, 302)
    hasSecurityHeaders(t, nav.headers, 'sign-in redirect')
    const target = { 'x-forwarded-method': 'GET', 'x-forwarded-host': '127.0.0.1', 'x-forwarded-uri': '/' }
    const check = await rawRequest(stack.gw, '/api/v1/openid/auth', { headers: { ...json, ...target } })
    t.equal(check.status, 200, 'the check for / of 127.0.0.1 (auth: none)')
    hasSecurityHeaders(t, check.headers, 'forward-auth 200')
  })

  t.test('upstream responses are passed through unmodified', async (t) => {
    const cookie = (await stack.signedIn('alice')).cookieHeader(`${stack.gw}/`)
    const cases: Array<[label: string, status: number, send: () => Promise<{ status: number; headers: HeaderSource }>]> = [
      ['public 200', 200, () => rawRequest(stack.gw, '/page', { headers: json })],
      ['public 500', 500, () => rawRequest(stack.gw, '/status/500', { headers: json })],
      ['public 404', 404, () => rawRequest(stack.gw, '/status/404', { headers: json })],
      ['signed-in 200', 200, () => rawRequest(stack.gw, '/page', { headers: app(cookie) })],
      ['signed-in 500', 500, () => rawRequest(stack.gw, '/status/500', { headers: app(cookie) })],
      ['signed-in 401', 401, () => rawRequest(stack.gw, '/status/401', { headers: app(cookie) })],
    ]
    for (const [label, status, send] of cases) {
      const res = await send()
      t.equal(res.status, status, label)
      t.match(header(res.headers, 'content-type'), /^application\/json/, `${label}: the upstream's own body`)
      hasNone(t, res.headers, label)
    }
  })
})
