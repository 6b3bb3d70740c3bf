import t, { type Test } from 'tap'
import pino from 'pino'
import type { CookieSerializeOptions } from '@fastify/cookie'
import type { FastifyBaseLogger } from 'fastify'
import { GatewayError } from '#src/contract/errors'
import { CALLBACK_PATH, PROVIDER_NOT_TOLD, SIGN_OUT_PATH, signInPath } from '#src/contract/endpoints'
import { systemClock } from '#src/lib/clock'
import { createProvider, Providers, type Provider } from '#src/oidc/providers'
import { refreshAuditor } from '#src/ops/audit'
import { SignInFlow, type SignInAnswer, type SignInFlowOptions, type SignInRequest } from '#src/routes/sign-in-flow'
import { createPortHint, createRedirectAfterValidator, createTrustedOriginTest } from '#src/routes/redirect-after'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { issuerBinding } from '#src/session/issuer-binding'
import { SessionLifecycle } from '#src/session/lifecycle'
import { MemorySessionStore } from '#src/session/memory-store'
import { LocalRefreshCoordinator } from '#src/session/refresh-coordinator'
import { providerRefreshGrant } from '#src/session/refresh-grant'
import type { Session, SessionReply } from '#src/session/types'
import { Browser } from '../fixtures/browser.ts'
import { CLIENT_SECRET, resolve, type Tree } from '../fixtures/config/base.ts'
import { startTestProvider, type DevProvider, type DevProviderOptions } from '../fixtures/provider.ts'
import { startEchoUpstream, type RecordedRequest } from '../fixtures/upstream.ts'

// The sign-in flow (routes/sign-in-flow.ts) called without Fastify: every step's answer and
// refusal, with the real client (openid-client) against the development provider, a memory
// store and the gateway's own cookies. The browser's side is test/fixtures/browser.ts at the
// provider, and an echo server on the public URL that records the callback it is sent back
// with. What only HTTP shows (the routes' rendering, headers, body limits, the rate limit of
// sign-in-hardening.ts) is tested through the gateway in test/e2e (callback*, logout*, refresh*,
// redirect, rate-limit, sign-in-refusals, sign-out-provider-down, step-up).

const silent: FastifyBaseLogger = pino({ level: 'silent' })

interface Line {
  level: 'info' | 'warn'
  fields: Record<string, unknown>
  msg: string | undefined
}

/**
 * One browser as the flow sees it: its gateway cookies (a cookie set with Max-Age 0 is removed,
 * as a browser does), each Set-Cookie in order, and the lines logged on its requests.
 */
class Visitor {
  readonly jar: Record<string, string> = {}
  readonly set: { name: string; value: string; maxAge: number | undefined }[] = []
  readonly lines: Line[] = []
  readonly browser = new Browser()
  readonly reply: SessionReply = {
    setCookie: (name: string, value: string, options: CookieSerializeOptions) => {
      this.set.push({ name, value, maxAge: options.maxAge })
      if (options.maxAge === 0) delete this.jar[name]
      else this.jar[name] = value
    },
  }
  readonly #log = {
    info: (fields: unknown, msg?: string) => void this.lines.push({ level: 'info', fields: fields as Record<string, unknown>, msg }),
    warn: (fields: unknown, msg?: string) => void this.lines.push({ level: 'warn', fields: fields as Record<string, unknown>, msg }),
  }

  request(url: string): SignInRequest {
    return { url, cookies: { ...this.jar }, ip: '192.0.2.7', log: this.#log }
  }

  /** The audit lines of its requests (ops/audit.ts). */
  audits(): Record<string, unknown>[] {
    return this.lines.filter((line) => line.msg === 'audit').map((line) => line.fields)
  }
}

interface Setup {
  flow: SignInFlow
  dev: DevProvider
  /** server.publicUrl: the echo server the provider sends the browser back to. */
  origin: string
  provider: Provider
  store: MemorySessionStore
  cookies: GatewayCookies
  /** The provider's issuer as the configuration names it now (a reload may re-point it). */
  issuers: Map<string, string>
  /** The sessions onEnded was told of. */
  ended: Session[]
  /** The browser's requests to the public URL: the callbacks. */
  callbacks: RecordedRequest[]
}

async function setup(
  t: Test,
  options: { dev?: Partial<DevProviderOptions>; provider?: Tree; config?: Tree; flow?: Partial<SignInFlowOptions> } = {},
): Promise<Setup> {
  const echo = await startEchoUpstream()
  t.teardown(() => echo.close())
  const origin = echo.url
  const dev = await startTestProvider(t, {
    ...options.dev,
    clients: [{ clientId: 'gateway', clientSecret: CLIENT_SECRET, redirectUris: [origin + CALLBACK_PATH], postLogoutRedirectUris: [`${origin}/`] }],
  })
  const config = resolve({
    server: { publicUrl: origin },
    provider: {
      issuer: dev.issuer,
      allowInsecureHttp: true,
      scopes: ['openid', 'profile', 'email'],
      offlineAccess: true,
      timeoutMs: 2000,
      postLogoutRedirectUri: `${origin}/`,
      ...options.provider,
    },
    cookies: { secure: false },
    redirects: { allowedHosts: ['apps.example.com'] },
    ...options.config,
  })
  const providerConfig = config.providers[0]!
  const provider = createProvider(
    providerConfig,
    { publicUrl: origin, several: false },
    { log: silent, clock: systemClock, observeCall: () => undefined, tracer: undefined },
  )
  t.teardown(() => provider.client.stop())
  await provider.client.start()
  const providers = new Providers([provider])
  const cookies = new GatewayCookies(config.cookies, new CookieCipher(config.cookies.secrets, systemClock))
  const store = new MemorySessionStore(cookies, config.session.maxAgeSeconds, { maxSessions: 100, maxSessionsPerUser: 10 }, systemClock)
  t.teardown(() => store.close())
  const issuers = new Map([[provider.name, providerConfig.issuer]])
  const bindIssuer = issuerBinding(
    (name) => issuers.get(name),
    () => providerConfig.issuer,
  )
  const lifecycle = new SessionLifecycle(
    providerRefreshGrant(providers, bindIssuer, () => undefined),
    store,
    new LocalRefreshCoordinator(systemClock),
    { providers: [], upstreams: [] },
    config.session.maxAgeSeconds,
    systemClock,
    refreshAuditor(silent),
  )
  const redirects = { publicUrl: origin, allowedHosts: config.redirects.allowedHosts }
  const ended: Session[] = []
  const flow = new SignInFlow({
    providers,
    providersFor: () => undefined,
    cookies,
    store,
    lifecycle,
    bindIssuer,
    validateRedirectAfter: createRedirectAfterValidator(redirects),
    redirectPortHint: createPortHint(redirects),
    isTrustedOrigin: createTrustedOriginTest(redirects),
    publicUrl: origin,
    onEnded: (session) => void ended.push(session),
    ...options.flow,
  })
  return { flow, dev, origin, provider, store, cookies, issuers, ended, callbacks: echo.requests }
}

/** The provider's answer to the authorization request at `location`, as the browser brings it back. */
async function authorize(s: Setup, visitor: Visitor, location: string, username = 'alice'): Promise<RecordedRequest> {
  const before = s.callbacks.length
  await visitor.browser.signIn(location, username, { gatewayOrigin: s.origin })
  const callback = s.callbacks[before]
  if (callback === undefined) throw new Error(`the provider sent the browser nowhere: ${visitor.browser.history.join(' -> ')}`)
  return callback
}

/** The callback step for what the browser brought back. */
function finish(s: Setup, visitor: Visitor, callback: Pick<RecordedRequest, 'method' | 'url' | 'body'>): Promise<SignInAnswer> {
  const query = callback.url.indexOf('?')
  return s.flow.finish(
    visitor.request(callback.url),
    visitor.reply,
    callback.method === 'POST'
      ? { received: 'form_post', params: () => new URLSearchParams(callback.body) }
      : { received: 'query', params: () => new URLSearchParams(query === -1 ? '' : callback.url.slice(query + 1)) },
  )
}

/** A whole sign-in: start with `query`, the provider, the callback. */
async function signIn(s: Setup, visitor: Visitor, query = '', username = 'alice'): Promise<SignInAnswer> {
  const started = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams(query))
  if (started.redirect === undefined) throw new Error('start answered no redirect')
  return finish(s, visitor, await authorize(s, visitor, started.redirect, username))
}

/** The session the visitor's cookies carry. */
async function sessionOf(s: Setup, visitor: Visitor): Promise<Session | undefined> {
  const loaded = await s.store.load(visitor.request('/'))
  return loaded === undefined ? undefined : s.store.withCredentials(visitor.request('/api/v1/openid/refresh'), loaded)
}

/** The names of the sign-in transaction cookies (and their binding) the visitor holds (session/cookies.ts). */
function transactions(visitor: Visitor): string[] {
  return Object.keys(visitor.jar).filter((name) => name.includes('_tx'))
}

t.test('start: a 302 to the authorization endpoint with PKCE, state and nonce, and a transaction of this browser', async (t) => {
  const s = await setup(t)
  const visitor = new Visitor()
  const answer = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/orders?id=7'))
  t.equal(answer.status, 302)
  t.equal(answer.noStore, true)
  const location = new URL(answer.redirect ?? '')
  t.equal(location.origin, s.dev.issuer, 'to the provider')
  t.equal(location.searchParams.get('redirect_uri'), s.origin + CALLBACK_PATH)
  t.equal(location.searchParams.get('code_challenge_method'), 'S256')
  t.equal(location.searchParams.get('prompt'), 'consent', 'offline_access asks for consent')
  const state = location.searchParams.get('state') ?? ''
  t.ok(state.length >= 43, 'state: 256 random bits')
  t.ok((location.searchParams.get('nonce') ?? '').length >= 43, 'nonce: 256 random bits')
  const transaction = s.cookies.readTransaction(visitor.request(CALLBACK_PATH), state)
  t.match(transaction, { provider: 'default', redirectAfter: '/orders?id=7', nonce: location.searchParams.get('nonce') })
  t.equal(s.cookies.readTransaction(new Visitor().request(CALLBACK_PATH), state), undefined, "another browser's cookies hold no transaction of that state")

  const asked = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('performRedirect=false'))
  t.equal(asked.redirect, undefined, 'performRedirect=false: no redirect')
  t.match(asked, { value: new RegExp(`^${s.dev.issuer}/`), noStore: true }, 'the location as { value }')
  t.equal(visitor.audits().length, 0, 'starting is no audited event')
})

t.test('start: the refusals, all 400 bad_request before anything is set', async (t) => {
  const s = await setup(t, {
    // The page /elsewhere is served only by an upstream signing in with another provider.
    flow: { providersFor: (target) => (target === '/elsewhere' ? ['other'] : target === '/both' ? ['other', 'default'] : undefined) },
  })
  const cases: { query: string; message: string | RegExp; logged?: Record<string, unknown> }[] = [
    { query: 'redirectAfter=https://evil.example/', message: 'redirectAfter must be a path on this site or a URL on an allowed host' },
    { query: 'redirectAfter=//evil.example/', message: 'redirectAfter must be a path on this site or a URL on an allowed host' },
    {
      query: 'redirectAfter=https://apps.example.com:8443/x',
      message:
        "redirectAfter's host is allowed on another port only: redirects.allowedHosts needs apps.example.com:8443 (an entry without a port covers the scheme's default port only)",
      logged: { entry: 'apps.example.com:8443' },
    },
    { query: 'redirectAfter=/a&redirectAfter=/b', message: 'the parameter redirectAfter is given more than once' },
    { query: 'performRedirect=maybe', message: 'performRedirect must be 1, true, 0 or false' },
    { query: 'performRedirect=1&performRedirect=1', message: 'the parameter performRedirect is given more than once' },
    { query: 'provider=nobody', message: 'provider names no configured provider' },
    { query: 'provider=default&provider=default', message: 'the parameter provider is given more than once' },
    { query: 'redirectAfter=/elsewhere', message: 'provider names no configured provider' },
    { query: 'redirectAfter=/elsewhere&provider=default', message: 'this provider may not sign in to the page redirectAfter names' },
  ]
  for (const { query, message, logged } of cases) {
    const visitor = new Visitor()
    await t.rejects(
      s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams(query)),
      { code: 'bad_request', status: 400, message },
      query,
    )
    t.same(visitor.set, [], `${query}: no cookie set`)
    t.same(
      visitor.lines.map((line) => line.fields),
      logged === undefined ? [] : [logged],
      `${query}: ${logged === undefined ? 'nothing' : 'the entry to add'} logged`,
    )
  }
  const visitor = new Visitor()
  const allowed = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/both&provider=default'))
  t.equal(allowed.status, 302, 'a provider the page accepts, though not its default')
})

t.test('finish: the callback refusals, each audited with its reason', async (t) => {
  const s = await setup(t)
  const visitor = new Visitor()
  const started = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/x'))
  const state = new URL(started.redirect ?? '').searchParams.get('state') ?? ''
  // A transaction of a provider that is gone from the configuration (a reload removed it).
  s.cookies.writeTransaction(visitor.request('/'), visitor.reply, 'gone-state', { provider: 'gone', nonce: 'n', codeVerifier: 'v' }, 600)
  const cases: {
    name: string
    url: string
    method?: 'POST'
    body?: string
    code: string
    status: number
    message?: string | RegExp
    extensions?: Record<string, string>
    /** Whether this browser's transaction of `state` is ended by the refusal. */
    ends?: boolean
  }[] = [
    { name: 'no code, no state', url: CALLBACK_PATH, code: 'code_missing', status: 400, extensions: {} },
    { name: 'an empty code', url: `${CALLBACK_PATH}?code=&state=${state}`, code: 'code_missing', status: 400, extensions: {} },
    {
      name: "the provider's refusal with this browser's live state: its words echoed",
      url: `${CALLBACK_PATH}?error=access_denied&error_description=${'d'.repeat(300)}&state=${state}`,
      code: 'code_missing',
      status: 400,
      extensions: { error: 'access_denied', error_description: 'd'.repeat(256) },
    },
    {
      name: 'a refusal with a state that is no live transaction: nothing echoed',
      url: `${CALLBACK_PATH}?error=access_denied&error_description=call+us&state=forged`,
      code: 'code_missing',
      status: 400,
      extensions: {},
    },
    {
      name: 'a refusal with the live state twice: no live one, nothing echoed',
      url: `${CALLBACK_PATH}?error=access_denied&state=${state}&state=${state}`,
      code: 'code_missing',
      status: 400,
      extensions: {},
    },
    { name: 'a code without state', url: `${CALLBACK_PATH}?code=abc`, code: 'state_mismatch', status: 403 },
    { name: 'a code with an empty state', url: `${CALLBACK_PATH}?code=abc&state=`, code: 'state_mismatch', status: 403 },
    { name: 'a code with a state of no transaction', url: `${CALLBACK_PATH}?code=abc&state=forged`, code: 'state_mismatch', status: 403 },
    {
      name: 'a state repeated',
      url: `${CALLBACK_PATH}?code=abc&state=${state}&state=${state}`,
      code: 'bad_request',
      status: 400,
      message: 'the parameter state is given more than once',
    },
    {
      name: 'a transaction of a provider no longer configured',
      url: `${CALLBACK_PATH}?code=abc&state=gone-state`,
      code: 'state_mismatch',
      status: 403,
      message: 'the sign-in was started with a provider that is no longer configured',
    },
  ]
  for (const c of cases) {
    const before = visitor.audits().length
    await t.rejects(
      finish(s, visitor, { method: c.method ?? 'GET', url: c.url, body: c.body ?? '' }),
      { code: c.code, status: c.status, ...(c.message === undefined ? {} : { message: c.message }) },
      c.name,
    )
    if (c.extensions !== undefined) {
      const err = await finish(s, visitor, { method: 'GET', url: c.url, body: '' }).catch((e: unknown) => e)
      t.same((err as GatewayError).extensions, c.extensions, `${c.name}: extensions`)
    }
    t.match(visitor.audits().at(before), { audit: 'sign-in', outcome: 'refused', reason: c.code, client: '192.0.2.7' }, `${c.name}: audited`)
    t.ok(s.cookies.readTransaction(visitor.request(CALLBACK_PATH), state), `${c.name}: the transaction is left for the real answer`)
  }
  t.match(
    visitor.lines.find((line) => line.level === 'warn' && line.fields.error === 'access_denied' && line.fields.transaction === true),
    { msg: 'sign-in refused by the OpenID provider' },
    "the provider's refusal is logged at warn",
  )

  // A malformed form post (routes/form-post.ts throws while the flow reads it) is a refused sign-in too.
  const before = visitor.audits().length
  const malformed = new GatewayError('bad_request', 'a form post callback must be sent as application/x-www-form-urlencoded')
  await t.rejects(
    s.flow.finish(visitor.request(CALLBACK_PATH), visitor.reply, {
      received: 'form_post',
      params: () => {
        throw malformed
      },
    }),
    malformed,
  )
  t.match(visitor.audits().at(before), { audit: 'sign-in', outcome: 'refused', reason: 'bad_request' }, 'the malformed form post is audited')

  // The real code, posted where the provider answers in the query: refused, and the transaction ends.
  const callback = await authorize(s, visitor, started.redirect ?? '')
  const query = new URL(callback.url, s.origin).searchParams
  await t.rejects(
    finish(s, visitor, { method: 'POST', url: CALLBACK_PATH, body: query.toString() }),
    { code: 'authorization_response_invalid', status: 403 },
    'a form post to a provider of responseMode query',
  )
  t.equal(s.cookies.readTransaction(visitor.request(CALLBACK_PATH), state), undefined, 'the refused response ended the transaction')
  await t.rejects(finish(s, visitor, callback), { code: 'state_mismatch' }, 'the same code by GET then finds no transaction')
  t.equal(await sessionOf(s, visitor), undefined, 'no session')
})

t.test('finish: a code the token endpoint refuses ends the transaction; the real one signs in', async (t) => {
  const s = await setup(t)
  const visitor = new Visitor()
  const started = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/x'))
  const callback = await authorize(s, visitor, started.redirect ?? '')
  const url = new URL(callback.url, s.origin)
  const state = url.searchParams.get('state') ?? ''
  url.searchParams.set('code', 'forged-code')
  const refused = await finish(s, visitor, { method: 'GET', url: url.pathname + url.search, body: '' }).catch((e: unknown) => e)
  t.ok(refused instanceof GatewayError && refused.status < 500, `a refused code is a client error (${String(refused)})`)
  t.match(visitor.audits().at(-1), { audit: 'sign-in', outcome: 'refused', provider: 'default', reason: (refused as GatewayError).code })
  t.equal(s.cookies.readTransaction(visitor.request(CALLBACK_PATH), state), undefined, 'the refused code ended the transaction')

  // Signed in: the session replaces whatever this browser had (no session fixation).
  const first = await signIn(s, visitor, 'redirectAfter=/orders')
  t.same(first, { redirect: '/orders', status: 302, noStore: true }, 'back to the page the sign-in was for, with Pragma: no-cache')
  const session = await sessionOf(s, visitor)
  t.match(session, { provider: 'default', issuer: s.dev.issuer, claims: { sub: 'alice' } })
  t.ok(session?.refreshToken, 'with its refresh token')
  t.same(transactions(visitor), [], 'no transaction cookie is left')
  t.match(visitor.audits().at(-1), { audit: 'sign-in', outcome: 'success', provider: 'default', sub: 'alice', client: '192.0.2.7' })
  const before = { url: '/', cookies: { ...visitor.jar } }
  const second = await signIn(s, visitor)
  t.same(second, { value: (await sessionOf(s, visitor))?.accessToken, noStore: true }, 'without redirectAfter: the access token as { value }')
  const replaced = await sessionOf(s, visitor)
  t.not(replaced?.id, session?.id, 'a new session id: signing in again never extends the old session')
  t.equal(await s.store.load(before), undefined, 'and the old session is ended, not left beside it')
})

t.test('finish: a form_post provider takes the response from the POST body only', async (t) => {
  const s = await setup(t, { provider: { responseMode: 'form_post' } })
  const visitor = new Visitor()
  const started = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/x'))
  t.equal(new URL(started.redirect ?? '').searchParams.get('response_mode'), 'form_post')
  const posted = await authorize(s, visitor, started.redirect ?? '')
  t.equal(posted.method, 'POST', 'the provider posts the response')
  await t.rejects(
    finish(s, visitor, { method: 'GET', url: `${CALLBACK_PATH}?${posted.body}`, body: '' }),
    { code: 'authorization_response_invalid' },
    'the same response in a query is refused',
  )
  t.same(transactions(visitor), [], 'and ends the transaction')
  const again = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/x'))
  t.same(await finish(s, visitor, await authorize(s, visitor, again.redirect ?? '')), { redirect: '/x', status: 302, noStore: true })
  t.ok(await sessionOf(s, visitor))
})

t.test('finish: step-up, refused when the ID token falls short, else the same session upgraded', async (t) => {
  let now = (): number => Math.floor(Date.now() / 1000)
  const s = await setup(t, {
    flow: {
      stepUp: { requirementFor: (target) => (target.startsWith('/payroll') ? { maxAge: 60 } : undefined), nowSeconds: () => now() },
    },
  })
  const visitor = new Visitor()
  t.same(await signIn(s, visitor, 'redirectAfter=/home'), { redirect: '/home', status: 302, noStore: true })
  const plain = await sessionOf(s, visitor)

  const started = await s.flow.start(visitor.request('/api/v1/openid/redirect'), visitor.reply, new URLSearchParams('redirectAfter=/payroll'))
  t.equal(new URL(started.redirect ?? '').searchParams.get('max_age'), '60', 'the page asks for a recent authentication')
  const callback = await authorize(s, visitor, started.redirect ?? '')
  now = () => Math.floor(Date.now() / 1000) + 3600
  await t.rejects(finish(s, visitor, callback), {
    code: 'step_up_failed',
    status: 403,
    message: 'the identity provider did not authenticate you again recently enough',
  })
  t.match(visitor.audits().at(-1), { audit: 'sign-in', outcome: 'refused', reason: 'step_up_failed' })
  t.match(visitor.lines.at(-2), { level: 'warn', fields: { shortfall: 'auth_time', problem: 'step_up_failed' } })
  t.same(transactions(visitor), [], 'the refused sign-in ended its transaction')
  t.equal((await sessionOf(s, visitor))?.id, plain?.id, 'the session from before is untouched')

  now = () => Math.floor(Date.now() / 1000)
  t.same(await signIn(s, visitor, 'redirectAfter=/payroll'), { redirect: '/payroll', status: 302, noStore: true })
  const upgraded = await sessionOf(s, visitor)
  t.equal(upgraded?.id, plain?.id, 'the same user stepping up keeps the session')
  t.equal(upgraded?.createdAt, plain?.createdAt, 'and its lifetime')
  t.not(upgraded?.accessToken, plain?.accessToken, 'with the new tokens')

  // Another user signing in on this browser (another provider session) gets a session of its own.
  const bob = new Visitor()
  Object.assign(bob.jar, visitor.jar)
  await signIn(s, bob, 'redirectAfter=/payroll', 'bob')
  const bobs = await sessionOf(s, bob)
  t.equal(bobs?.claims.sub, 'bob')
  t.not(bobs?.id, plain?.id, 'two users are never merged')
})

t.test('refresh: each answer, with and without redirectAfter', async (t) => {
  const s = await setup(t)
  const refresh = (visitor: Visitor, query = ''): Promise<SignInAnswer> =>
    s.flow.refresh(visitor.request('/api/v1/openid/refresh'), visitor.reply, new URLSearchParams(query))
  const throughSignIn = { redirect: signInPath('/x'), status: 302, noStore: false }

  const stranger = new Visitor()
  await t.rejects(refresh(stranger), { code: 'refresh_token_missing', status: 400 }, 'no session')
  t.same(await refresh(stranger, 'redirectAfter=/x'), throughSignIn, 'no session, a page: through sign-in')
  t.match(stranger.audits(), [{ audit: 'refresh', outcome: 'refused', reason: 'refresh_token_missing' }, { reason: 'refresh_token_missing' }])
  await t.rejects(refresh(stranger, 'redirectAfter=https://evil.example/'), { code: 'bad_request' }, 'a refused redirectAfter, first')

  const visitor = new Visitor()
  await signIn(s, visitor)
  const before = await sessionOf(s, visitor)
  const refreshed = await refresh(visitor)
  const after = await sessionOf(s, visitor)
  t.same(refreshed, { value: after?.accessToken, noStore: true }, 'the new access token')
  t.not(after?.accessToken, before?.accessToken)
  t.equal(after?.id, before?.id, 'the same session')
  t.match(visitor.audits().at(-1), { audit: 'refresh', outcome: 'success', sub: 'alice', client: '192.0.2.7' }, 'audited on the request (refreshAuditor)')
  t.same(await refresh(visitor, 'redirectAfter=/x'), { redirect: '/x', status: 302, noStore: true }, 'a page: back to it')

  // The provider revokes the refresh token: the session ends.
  await s.provider.client.revoke((await sessionOf(s, visitor))?.refreshToken ?? '')
  await t.rejects(refresh(visitor), { code: 'refresh_token_invalid', status: 409 }, 'a refused refresh token')
  t.equal(await sessionOf(s, visitor), undefined, 'ends the session')
  const revoked = new Visitor()
  await signIn(s, revoked)
  await s.provider.client.revoke((await sessionOf(s, revoked))?.refreshToken ?? '')
  t.same(await refresh(revoked, 'redirectAfter=/x'), throughSignIn, 'a refused refresh token, a page: through sign-in')
  t.equal(await sessionOf(s, revoked), undefined)

  // The provider is re-pointed at another issuer: the session ends, nothing goes to the provider.
  const moved = new Visitor()
  await signIn(s, moved)
  const movedPage = new Visitor()
  await signIn(s, movedPage)
  s.issuers.set('default', 'https://another-tenant.example')
  await t.rejects(refresh(moved), {
    code: 'refresh_token_invalid',
    message: "the session was signed in at another issuer than its provider's, or its provider is gone",
  })
  t.match(moved.audits().at(-1), { audit: 'refresh', outcome: 'refused', reason: 'refresh_token_invalid', sub: 'alice' })
  t.match(moved.lines.at(-2), { level: 'info', msg: "session ended: signed in at another issuer than its provider's, or its provider is gone" })
  t.equal(await s.store.load(moved.request('/')), undefined, 'its session ended')
  t.same(await refresh(movedPage, 'redirectAfter=/x'), throughSignIn, 'through sign-in for a page')
})

t.test('logout and the sign-out form', async (t) => {
  const s = await setup(t)
  const endSession = new RegExp(`^${s.dev.issuer}/session/end\\?`)

  const stranger = new Visitor()
  await t.rejects(s.flow.logout(stranger.request('/api/v1/openid/logout'), stranger.reply), { code: 'unauthenticated', status: 401 })
  t.match(stranger.audits(), [{ audit: 'logout', outcome: 'refused', reason: 'unauthenticated' }])

  const visitor = new Visitor()
  await signIn(s, visitor)
  const session = await sessionOf(s, visitor)
  const answer = await s.flow.logout(visitor.request('/api/v1/openid/logout'), visitor.reply)
  t.match(answer, { value: endSession, noStore: true }, "the provider's end-session URL")
  const url = new URL(answer.value ?? '')
  t.equal(url.searchParams.get('id_token_hint'), session?.idToken ?? null)
  t.equal(url.searchParams.get('post_logout_redirect_uri'), `${s.origin}/`)
  t.equal(await s.store.load(visitor.request('/')), undefined, 'the session ended here')
  t.same(
    s.ended.map((e) => e.id),
    [session?.id],
    'onEnded told once',
  )
  t.match(visitor.audits().at(-1), { audit: 'logout', outcome: 'success', sub: 'alice' })
  const grant = providerRefreshGrant(
    new Providers([s.provider]),
    (x) => x,
    () => undefined,
  )
  await t.rejects(grant(session?.refreshToken ?? '', session as Session), { code: 'refresh_token_invalid' }, 'the refresh token was revoked')

  // A session of another issuer: ended here, its tokens never sent to the provider.
  const moved = new Visitor()
  await signIn(s, moved)
  const movedSession = await sessionOf(s, moved)
  s.issuers.set('default', 'https://another-tenant.example')
  t.same(await s.flow.logout(moved.request('/api/v1/openid/logout'), moved.reply), { value: '', noStore: true }, "'': nowhere to go")
  t.equal(s.ended.at(-1)?.id, movedSession?.id)
  t.ok(await grant(movedSession?.refreshToken ?? '', movedSession as Session), 'its refresh token was not revoked at the re-pointed issuer')
  s.issuers.set('default', s.dev.issuer)

  // The sign-out form: its Origin first, then as logout, idempotent.
  const form = (v: Visitor, origin: string | undefined): Promise<SignInAnswer> => s.flow.signOut(v.request(SIGN_OUT_PATH), v.reply, origin)
  for (const origin of [undefined, 'null', 'https://evil.example', 'https://apps.example.com:8443', `${s.origin}.evil.example`]) {
    const v = new Visitor()
    await signIn(s, v)
    await t.rejects(form(v, origin), { code: 'bad_request', message: 'the sign-out form must be sent from this site' }, `Origin ${String(origin)}`)
    t.match(v.audits().at(-1), { audit: 'logout', outcome: 'refused', reason: 'bad_request' })
    t.ok(await s.store.load(v.request('/')), `Origin ${String(origin)}: still signed in`)
  }
  t.same(await form(new Visitor(), s.origin), { redirect: SIGN_OUT_PATH, status: 303, noStore: true }, 'no session: already signed out')
  const signedIn = new Visitor()
  await signIn(s, signedIn)
  t.match(await form(signedIn, 'https://apps.example.com'), { redirect: endSession, status: 303, noStore: true }, 'an allowed host over https')
  t.equal(await s.store.load(signedIn.request('/')), undefined)
})

t.test('with the provider down: a callback keeps its transaction for a retry; a sign-out says the provider was not told', async (t) => {
  const s = await setup(t)
  const visitor = new Visitor()
  await signIn(s, visitor)
  const form = new Visitor()
  await signIn(s, form)
  const midway = new Visitor()
  const started = await s.flow.start(midway.request('/api/v1/openid/redirect'), midway.reply, new URLSearchParams('redirectAfter=/x'))
  const callback = await authorize(s, midway, started.redirect ?? '')
  await s.dev.close()

  const fault = await finish(s, midway, callback).catch((e: unknown) => e)
  t.ok(fault instanceof GatewayError && fault.status >= 500, `the code cannot be exchanged: a provider fault (${String(fault)})`)
  t.match(midway.audits().at(-1), { audit: 'sign-in', outcome: 'refused', reason: (fault as GatewayError).code })
  t.ok(
    s.cookies.readTransaction(midway.request(CALLBACK_PATH), new URL(callback.url, s.origin).searchParams.get('state') ?? ''),
    'the transaction is left for a retry',
  )

  t.same(await s.flow.logout(visitor.request('/api/v1/openid/logout'), visitor.reply), {
    value: `${s.origin}${SIGN_OUT_PATH}?${PROVIDER_NOT_TOLD}`,
    noStore: true,
  })
  t.equal(await s.store.load(visitor.request('/')), undefined, 'signed out here all the same')
  t.same(await s.flow.signOut(form.request(SIGN_OUT_PATH), form.reply, s.origin), {
    redirect: `${SIGN_OUT_PATH}?${PROVIDER_NOT_TOLD}`,
    status: 303,
    noStore: true,
  })
  t.equal(await s.store.load(form.request('/')), undefined)
  t.equal(s.ended.length, 2)
})
