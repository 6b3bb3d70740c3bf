// The conformance runner: one sign-in through the gateway against a provider that behaves as one
// OpenID Foundation conformance-suite module does, and the gateway's observable verdict. The
// suite itself cannot run here (docs/conformance.md); each module is mirrored by a test that
// starts a provider misbehaving exactly as the module does (test/fixtures/adversarial-provider.ts)
// or the real oidc-provider for the well-behaved ones, then asks this runner what the gateway did.
//
// The browser goes where a real one would: the gateway's redirect endpoint, the provider (its
// login and consent forms filled in), then back to the callback, either by redirect (response_mode
// query, OpenID Connect Core 3.1.2.5) or by submitting the auto-posting form of OAuth 2.0 Form
// Post Response Mode (section 2), cross-site. `responseMode` states which one the test expects:
// a provider that answered the other way fails the test instead of passing it by accident.

import type { Test } from 'tap'
import { cookiesCleared, sessionCookiesSet } from '../fixtures/adversarial-provider.ts'
import { parseForms, type Browser, type BrowserRequestInit } from '../fixtures/browser.ts'
import { problemCode } from '../fixtures/http.ts'
import type { Stack } from '../fixtures/stack.ts'

const REDIRECTS = new Set([301, 302, 303, 307, 308])

export type ResponseMode = 'query' | 'form_post'

export interface SignInOptions {
  /** The account at the real provider's login form (the adversarial provider asks for none). Default alice. */
  username?: string
  /** How the provider must return to the callback; default query. */
  responseMode?: ResponseMode
  /** Where the sign-in starts; default the gateway's redirect endpoint. */
  start?: string
  /** A browser of the test's own (e.g. one already signed in); default a fresh one. */
  browser?: Browser
}

export interface Verdict {
  /** The gateway's last answer: the callback's, or the redirect endpoint's when it refused to start. */
  status: number
  /** Its problem code (problem+json, or the error page of a navigation); undefined when not an error. */
  code: string | undefined
  body: string
  headers: Headers
  /** Session cookies the answer set to a value. */
  sessionCookies: string[]
  /** Whether the answer expired the sign-in's transaction cookie. */
  transactionCleared: boolean
  /** The callback request, if the browser got back to the gateway: GET (query) or POST (form_post). */
  callback: { method: string; url: string; body: URLSearchParams | undefined } | undefined
  /** The authorization request the gateway sent the browser to, if it did. */
  authorizationRequest: URL | undefined
  browser: Browser
}

/** Runs one sign-in and returns what the gateway answered at the end of it. */
export async function signIn(stack: Stack, options: SignInOptions = {}): Promise<Verdict> {
  const browser = options.browser ?? stack.browser()
  const gateway = new URL(stack.gw).origin
  let url = options.start ?? `${stack.gw}/api/v1/openid/redirect`
  let init: BrowserRequestInit = { navigate: true }
  let leftGateway = false
  let authorizationRequest: URL | undefined
  for (let step = 0; step < 30; step++) {
    const onGateway = new URL(url).origin === gateway
    const res = await browser.fetch(url, init)
    if (onGateway && (leftGateway || !REDIRECTS.has(res.status))) {
      const callback = leftGateway
        ? { method: (init.method ?? 'GET').toUpperCase(), url, body: init.body instanceof URLSearchParams ? init.body : undefined }
        : undefined
      const mode = options.responseMode ?? 'query'
      if (callback !== undefined && callback.method !== (mode === 'query' ? 'GET' : 'POST')) {
        throw new Error(`conformance runner: expected a ${mode} callback, the provider returned with ${callback.method} ${url}`)
      }
      return verdict(res, browser, callback, authorizationRequest)
    }
    const location = res.headers.get('location')
    if (REDIRECTS.has(res.status) && location !== null) {
      await res.arrayBuffer()
      url = new URL(location, url).href
      init = { navigate: true }
      if (new URL(url).origin !== gateway && !leftGateway) {
        leftGateway = true
        authorizationRequest = new URL(url)
      }
      continue
    }
    const html = await res.text()
    const forms = parseForms(html, url)
    // Form Post Response Mode: the provider's page posts the response to the callback, cross-site.
    const post = forms.find((f) => new URL(f.action).origin === gateway)
    if (post !== undefined) {
      init = {
        navigate: true,
        method: post.method.toUpperCase() === 'POST' ? 'POST' : 'GET',
        body: new URLSearchParams(post.fields),
        headers: { origin: new URL(url).origin, 'sec-fetch-site': 'cross-site' },
      }
      url = post.action
      continue
    }
    const prompt = forms.find((f) => f.fields.prompt === 'login' || f.fields.prompt === 'consent')
    if (res.status !== 200 || prompt === undefined) {
      throw new Error(`conformance runner: unexpected provider page ${res.status} at ${url}: ${html.slice(0, 300)}`)
    }
    const fields = { ...prompt.fields }
    if (fields.prompt === 'login') {
      fields.login = options.username ?? 'alice'
      fields.password = 'x'
    }
    url = prompt.action
    init = { navigate: true, method: prompt.method, body: new URLSearchParams(fields) }
  }
  throw new Error(`conformance runner: gave up after 30 steps: ${browser.history.slice(-10).join(' -> ')}`)
}

async function verdict(res: Response, browser: Browser, callback: Verdict['callback'], authorizationRequest: URL | undefined): Promise<Verdict> {
  const code = res.status >= 400 ? await problemCode(res.clone()) : undefined
  return {
    status: res.status,
    code,
    body: await res.text(),
    headers: res.headers,
    sessionCookies: sessionCookiesSet(res),
    transactionCleared: cookiesCleared(res, 'ogw_tx_').length > 0,
    callback,
    authorizationRequest,
    browser,
  }
}

/** The identity a proxied request of `browser` carried to the upstream, or its refusal's status. */
export async function proxiedIdentity(stack: Stack, browser: Browser): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const before = stack.upstream.requests.length
  const res = await browser.fetch(`${stack.gw}/conformance`, { headers: { accept: 'application/json' } })
  await res.arrayBuffer()
  const reached = stack.upstream.requests.length > before ? stack.upstream.requests.at(-1) : undefined
  return { status: res.status, headers: reached?.headers ?? {} }
}

/** The gateway refused the sign-in: `status` and `code`, no session cookie set or held. */
export function assertRefused(t: Test, verdict: Verdict, status: number, code: string): void {
  t.equal(verdict.status, status, 'status')
  t.equal(verdict.code, code, 'problem code')
  t.same(verdict.sessionCookies, [], 'no session cookie is set')
  t.notOk(
    verdict.browser.cookies().some((c) => c.name === 'ogw' || c.name.startsWith('ogw_cred') || /^ogw_\d+$/.test(c.name)),
    'the browser holds no session cookie',
  )
}

/** The gateway signed the user in: 200, a session cookie, and a proxied request carries `user`. */
export async function assertSignedIn(t: Test, stack: Stack, verdict: Verdict, user: string): Promise<Record<string, string | string[] | undefined>> {
  t.equal(verdict.status, 200, `signed in${verdict.status === 200 ? '' : `: ${verdict.body.slice(0, 300)}`}`)
  t.ok(verdict.sessionCookies.includes('ogw'), 'a session cookie is set')
  const proxied = await proxiedIdentity(stack, verdict.browser)
  t.equal(proxied.status, 200, 'a proxied request is signed in')
  t.equal(proxied.headers['x-forwarded-user'], user, 'as the ID token says')
  return proxied.headers
}
