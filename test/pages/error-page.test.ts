import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { rawRequest, type RawResponse } from '../fixtures/http.ts'
import type { Browser } from '../fixtures/browser.ts'
import { freePort, startStack } from '../fixtures/stack.ts'
import { eventually } from '../fixtures/poll.ts'
import { startAdversarialProvider } from '../fixtures/adversarial-provider.ts'

// Pages for people, JSON for programs: every error class the gateway answers itself is an HTML
// page for a browser navigation (same status and code, plain words, who is signed in, the way
// on) and stays problem+json for everything else.

const NAVIGATE = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'sec-fetch-mode': 'navigate' }
const API = { accept: 'application/json' }

function header(res: RawResponse, name: string): string {
  const value = res.headers[name]
  return Array.isArray(value) ? value.join(', ') : (value ?? '')
}

/** Starts a sign-in in `browser` (its transaction cookie set) and returns its state. */
async function startedSignIn(browser: Browser, gw: string): Promise<string> {
  const started = await browser.fetch(`${gw}/api/v1/openid/redirect?performRedirect=false`)
  const { value } = (await started.json()) as { value: string }
  return new URL(value).searchParams.get('state') ?? ''
}

/** The page's headers: strict CSP whose only allowance is the inline style, by hash. */
function isPage(t: Test, res: RawResponse, status: number, code: string, label: string): void {
  t.equal(res.status, status, `${label}: status`)
  t.match(header(res, 'content-type'), /^text\/html; charset=utf-8/, `${label}: HTML`)
  t.match(res.body, `Error ${status} · ${code}`, `${label}: status and code on the page`)
  const csp = header(res, 'content-security-policy')
  t.match(csp, /^default-src 'none'; /, `${label}: default-src 'none'`)
  t.notMatch(csp, /script-src|unsafe-inline|unsafe-eval|font-src|img-src/, `${label}: no script, no inline allowance, no fonts`)
  const style = /<style>([\s\S]*?)<\/style>/.exec(res.body)?.[1] ?? ''
  t.match(csp, `style-src 'sha256-${createHash('sha256').update(style).digest('base64')}'`, `${label}: the inline style is pinned by hash`)
  t.match(csp, "frame-ancestors 'none'", `${label}: not framed`)
  t.notMatch(res.body, /<script|<link|@import|url\(/i, `${label}: nothing loaded from anywhere`)
  t.equal(header(res, 'x-content-type-options'), 'nosniff')
  t.equal(header(res, 'cache-control'), 'no-store')
}

function isProblem(t: Test, res: RawResponse, status: number, code: string, label: string): void {
  t.equal(res.status, status, `${label} (API): status`)
  t.match(header(res, 'content-type'), /^application\/problem\+json/, `${label} (API): problem+json`)
  t.equal(res.json().code, code, `${label} (API): code`)
}

t.test('each error class: a page for a navigation, problem+json for a program', async (t) => {
  const closedPort = await freePort()
  const stack = await startStack(t, {
    upstreams: [
      { name: 'app', match: { pathPrefix: '/', hosts: ['127.0.0.1'] }, timeoutMs: 300 },
      { name: 'admin', match: { pathPrefix: '/admin', hosts: ['127.0.0.1'] }, allow: { groups: ['admins'] } },
      { name: 'down', match: { pathPrefix: '/down', hosts: ['127.0.0.1'] }, target: `http://127.0.0.1:${closedPort}` },
      { name: 'ops', match: { pathPrefix: '/ops', hosts: ['127.0.0.1'] }, rules: [{ path: '/ops/secrets', allow: { groups: ['admins'] } }] },
    ],
  })
  const bob = await stack.signedIn('bob')
  const cookie = bob.cookieHeader(`${stack.gw}/admin/`)
  const signedIn = (h: Record<string, string>) => ({ ...h, cookie })
  const cases: Array<[label: string, status: number, code: string, target: string, extra: Record<string, string>]> = [
    ['not allowed', 403, 'forbidden', '/admin/reports?y=2026', {}],
    ['cancelled at the provider', 400, 'code_missing', '/api/v1/openid/callback?error=access_denied&state=s', {}],
    ['an old callback URL', 403, 'state_mismatch', '/api/v1/openid/callback?code=c&state=s', {}],
    ['upstream unreachable', 502, 'upstream_unavailable', '/down/x', {}],
    ['upstream timeout', 504, 'upstream_timeout', '/slow?ms=2000', {}],
    ['no upstream', 404, 'not_found', '/x', { host: 'elsewhere.test' }],
    ['malformed path', 400, 'bad_request', '/a%2Fb', {}],
    ['bad parameter', 400, 'bad_request', '/api/v1/openid/redirect?performRedirect=maybe', {}],
    ['unknown sign-in endpoint', 404, 'not_found', '/api/v1/openid/nope', {}],
  ]
  for (const [label, status, code, target, extra] of cases) {
    isPage(t, await rawRequest(stack.gw, target, { headers: signedIn({ ...NAVIGATE, ...extra }) }), status, code, label)
    isPage(t, await rawRequest(stack.gw, target, { headers: signedIn({ accept: 'text/html', ...extra }) }), status, code, `${label} (Accept only)`)
    isProblem(t, await rawRequest(stack.gw, target, { headers: signedIn({ ...API, ...extra }) }), status, code, label)
    // A page script's fetch() says cors, whatever it accepts.
    isProblem(
      t,
      await rawRequest(stack.gw, target, { headers: signedIn({ accept: '*/*', 'sec-fetch-mode': 'cors', ...extra }) }),
      status,
      code,
      `${label} fetch`,
    )
  }
  // HEAD: the same status and headers, no body.
  const head = await rawRequest(stack.gw, '/admin/x', { method: 'HEAD', headers: signedIn(NAVIGATE) })
  t.equal(head.status, 403)
  t.match(header(head, 'content-type'), /^text\/html/)
  t.equal(head.body, '')
  // Other methods are never navigations.
  isProblem(t, await rawRequest(stack.gw, '/admin/x', { method: 'POST', headers: signedIn(NAVIGATE) }), 403, 'forbidden', 'POST')

  t.test('the 403 page says who is signed in and offers sign-in again and sign-out', async (t) => {
    const res = await rawRequest(stack.gw, '/admin/reports?y=2026', { headers: signedIn(NAVIGATE) })
    t.match(res.body, 'Your account may not use this application')
    t.match(res.body, 'Signed in as <strong>bob</strong> (bob@example.com)')
    t.match(res.body, `href="${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fadmin%2Freports%3Fy%3D2026"`, 'sign in again, back to this page')
    t.match(res.body, `<form method="post" action="${stack.gw}/api/v1/openid/sign-out"><button type="submit">Sign out / switch account</button></form>`)
    const csp = header(res, 'content-security-policy')
    t.match(csp, `form-action ${stack.gw} ${stack.provider?.issuer}`, 'the form may go to the gateway and on to the provider end-session')
  })

  t.test('a 403 of a per-path rule names the part refused, page, problem+json and forward-auth', async (t) => {
    const res = await rawRequest(stack.gw, '/ops/secrets/keys?x=1', { headers: signedIn(NAVIGATE) })
    isPage(t, res, 403, 'forbidden', 'per-path rule')
    t.match(res.body, '<h1>Your account may not use this part of the application</h1>')
    t.match(res.body, 'You are signed in, but /ops/secrets (and every page under it) admits only some accounts')
    t.notMatch(res.body, 'Your account may not use this application')
    t.match(res.body, 'your account is not allowed to use /ops/secrets of this application')
    const problem = (await rawRequest(stack.gw, '/ops/secrets/keys', { headers: signedIn(API) })).json()
    t.match(problem, { code: 'forbidden', refusedPath: '/ops/secrets' })
    const checked = await rawRequest(stack.gw, '/api/v1/openid/auth', {
      headers: signedIn({ ...API, 'x-original-method': 'GET', 'x-original-url': 'http://127.0.0.1/ops/secrets/keys' }),
    })
    t.equal(checked.status, 403)
    t.match(checked.json(), { code: 'forbidden', refusedPath: '/ops/secrets' }, 'forward-auth names it too')
    const whole = (await rawRequest(stack.gw, '/admin/x', { headers: signedIn(API) })).json()
    t.notOk('refusedPath' in whole, "the upstream's own allow: the whole application, as before")
    t.equal((await rawRequest(stack.gw, '/ops/open', { headers: signedIn(API) })).status, 200, 'the rest of it is open')
  })

  t.test('a cancelled sign-in says so, and leads back to sign-in for the site', async (t) => {
    // The provider's words are shown for the browser's own sign-in only (its live transaction).
    const browser = stack.browser()
    const state = await startedSignIn(browser, stack.gw)
    const res = await browser.fetch(`${stack.gw}/api/v1/openid/callback?error=access_denied&error_description=End-User+aborted&state=${state}`, {
      headers: NAVIGATE,
    })
    const body = await res.text()
    t.match(body, 'The sign-in was cancelled at the identity provider')
    t.match(body, 'You are not signed in.')
    t.match(body, `href="${stack.gw}/api/v1/openid/redirect?redirectAfter=%2F">Sign in</a>`)
    t.notMatch(body, '<form', 'no sign-out without a sign-in')
  })

  t.test('every text from the request or the provider is escaped', async (t) => {
    const evil = '<script>alert(1)</script>"\''
    const browser = stack.browser()
    const state = await startedSignIn(browser, stack.gw)
    const res = await browser.fetch(
      `${stack.gw}/api/v1/openid/callback?error=${encodeURIComponent(evil)}&error_description=${encodeURIComponent(`<img src=x onerror=alert(2)>`)}&state=${state}`,
      { headers: NAVIGATE },
    )
    const cb = { status: res.status, body: await res.text() }
    t.equal(cb.status, 400)
    t.notMatch(cb.body, /<script>|<img/)
    t.match(cb.body, 'The identity provider answered <code>&#60;script&#62;alert(1)&#60;/script&#62;&#34;&#39;</code>: &#60;img src=x onerror=alert(2)&#62;.')
    const page = await rawRequest(stack.gw, '/x?q="><script>alert(3)</script>', { headers: { ...NAVIGATE, host: 'elsewhere.test' } })
    t.equal(page.status, 404)
    t.notMatch(page.body, /<script>|"><script/)
  })

  t.test("forward-auth answers ingress-nginx in problem+json whatever the browser's headers; a page load Traefik asks about is sent to sign in", async (t) => {
    const nginx = { 'x-original-method': 'GET', 'x-original-url': 'http://127.0.0.1/admin/x' }
    const res = await rawRequest(stack.gw, '/api/v1/openid/auth', { headers: { ...NAVIGATE, ...nginx } })
    t.equal(res.status, 401)
    t.match(header(res, 'content-type'), /^application\/problem\+json/)
    const traefik = { 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'http', 'x-forwarded-host': '127.0.0.1', 'x-forwarded-uri': '/admin/x' }
    const page = await rawRequest(stack.gw, '/api/v1/openid/auth', { headers: { ...NAVIGATE, ...traefik } })
    t.equal(page.status, 302, 'Traefik passes the answer to the browser')
    t.notMatch(page.body, /<html/i, 'a redirect, not an error page')
  })

  t.test('error headers are kept on the page', async (t) => {
    const res = await rawRequest(stack.gw, '/api/v1/openid/logout', { headers: NAVIGATE })
    isPage(t, res, 405, 'method_not_allowed', 'GET logout')
    t.match(header(res, 'allow'), 'DELETE')
  })
})

t.test('503 while the provider is not ready: a page for people too', async (t) => {
  const closedPort = await freePort()
  const stack = await startStack(t, { issuer: `http://127.0.0.1:${closedPort}` })
  const target = '/api/v1/openid/redirect?redirectAfter=%2F'
  const page = await rawRequest(stack.gw, target, { headers: NAVIGATE })
  isPage(t, page, 503, 'not_ready', 'not ready')
  t.ok(header(page, 'retry-after'), 'Retry-After kept')
  t.match(page.body, 'The gateway is starting')
  t.match(page.body, `<meta http-equiv="refresh" content="${header(page, 'retry-after')}">`, 'the starting page reloads itself after Retry-After')
  isProblem(t, await rawRequest(stack.gw, target, { headers: API }), 503, 'not_ready', 'not ready')
})

t.test('metadata the gateway cannot work with: a misconfigured page at once, never "starting", and it does not reload', async (t) => {
  const provider = await startAdversarialProvider({ advertisedAlgs: ['HS256'] })
  t.teardown(() => provider.close())
  const lines: Array<Record<string, unknown>> = []
  const stack = await startStack(t, {
    issuer: provider.issuer,
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  await eventually('a failed discovery logged', () => lines.find((l) => l.msg === 'provider discovery failed'))
  const target = '/api/v1/openid/redirect?redirectAfter=%2F'
  const page = await rawRequest(stack.gw, target, { headers: NAVIGATE })
  isPage(t, page, 503, 'provider_misconfigured', 'refused metadata')
  t.equal(header(page, 'retry-after'), '', 'no Retry-After')
  t.match(page.body, '<h1>The gateway is misconfigured</h1>')
  t.match(page.body, 'its settings do not match the gateway&#39;s')
  t.match(page.body, 'the gateway is misconfigured: the provider signs ID tokens only with algorithms the gateway refuses')
  t.notMatch(page.body, /The gateway is starting|http-equiv="refresh"/)
  const problem = await rawRequest(stack.gw, target, { headers: API })
  isProblem(t, problem, 503, 'provider_misconfigured', 'refused metadata')
  t.match(problem.json(), { reason: 'provider_metadata' })
})

t.test('an https issuer on a plain http server: the log and the page say so in words', async (t) => {
  const plain = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('plain http'))
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => plain.close(() => resolve())))
  const { port } = plain.address() as AddressInfo
  const lines: Array<Record<string, unknown>> = []
  const stack = await startStack(t, {
    issuer: `https://127.0.0.1:${port}`,
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  const failed = await eventually('a failed discovery logged', () => lines.find((l) => l.msg === 'provider discovery failed'))
  t.match(failed.meaning, /does not speak TLS on that port/, `the log says it in words (${String(failed.cause)})`)
  const page = await rawRequest(stack.gw, '/api/v1/openid/redirect?redirectAfter=%2F', { headers: NAVIGATE })
  isPage(t, page, 503, 'not_ready', 'https on http')
  t.match(page.body, 'The gateway is starting')
  t.match(page.body, 'the provider does not speak TLS on that port', 'the page says it in words')
  t.match(page.body, /<meta http-equiv="refresh" content="\d+">/, 'and reloads itself')

  // A certificate the gateway does not trust, said in words too.
  const tls = createHttpsServer(
    {
      cert: readFileSync(new URL('../fixtures/tls/self-signed.crt', import.meta.url)),
      key: readFileSync(new URL('../fixtures/tls/self-signed.key', import.meta.url)),
    },
    (_req, res) => res.end(),
  )
  await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => tls.close(() => resolve())))
  const certLines: Array<Record<string, unknown>> = []
  await startStack(t, {
    issuer: `https://127.0.0.1:${(tls.address() as AddressInfo).port}`,
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void certLines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  const untrusted = await eventually('a failed discovery logged', () => certLines.find((l) => l.msg === 'provider discovery failed'))
  t.match(untrusted.meaning, /the provider's TLS certificate/, `a certificate fault in words (${String(untrusted.cause)})`)
})
