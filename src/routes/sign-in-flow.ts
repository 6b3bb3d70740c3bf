import * as oidc from 'openid-client'
import type { FastifyBaseLogger } from 'fastify'
import { GatewayError } from '../contract/errors.js'
import { DEFAULT_PROVIDER } from '../options/types.js'
import type { Provider, Providers } from '../oidc/providers.js'
import { generateDpopKey } from '../oidc/dpop.js'
import type { GatewayCookies } from '../session/cookies.js'
import type { SessionLifecycle } from '../session/lifecycle.js'
import type { Session, SessionReply, SessionRequest, SessionStore } from '../session/types.js'
import type { IssuerBinding } from '../session/issuer-binding.js'
import { parseFlag, single } from './params.js'
import { PROVIDER_NOT_TOLD, SIGN_OUT_PATH, signInPath } from '../contract/endpoints.js'
import type { TrustedOriginTest } from './redirect-after.js'
import { responseModeViolation, type ResponseMode } from '../oidc/authorization-response.js'
import { stepUpShortfall, type StepUpRequirement } from '../oidc/step-up.js'
import { auditRefusal, auditSuccess, refusalReason, sessionSubject } from '../ops/audit.js'

// The sign-in flow of the contract's four sign-in endpoints (contract/endpoints.ts), and of the
// sign-out form of the gateway's pages, without the web framework: each step takes what it reads
// of the request (its target, cookies, client address and logger, and the parameters the route
// parsed) and a sink for the cookies it sets, and returns the answer the route writes (a redirect
// or a JSON `{ value }`) or throws the GatewayError the error handler renders. routes/sign-in.ts
// is the Fastify side: body limits, the rate limit, parsing, writing the answer.
//
// - start: the authorization request, OpenID Connect Core 3.1.2.1 with PKCE (RFC 7636 4.1-4.2)
//   and `state` and `nonce` kept in a transaction cookie bound to this browser (session/cookies.ts).
// - finish: the authorization response (RFC 6749 4.1.2; OAuth 2.0 Form Post Response Mode for a
//   POST), the code exchanged and the ID token validated by the provider's client
//   (oidc/client.ts), then a new session (no session fixation) or, for a step-up of the same user,
//   the same one upgraded.
// - refresh: the refresh grant (RFC 6749 6) through the session lifecycle (session/lifecycle.ts).
// - logout and the sign-out form: the session ends here first, then its refresh token is revoked
//   (RFC 7009) and the browser is sent to the provider's end-session endpoint (OpenID Connect
//   RP-Initiated Logout 1.0, 2).

/** A sign-in transaction lives at most this long (the contract's 10 minutes). */
const TRANSACTION_SECONDS = 600
/** The provider's error text echoed back to the client is cut to this length. */
const ECHO_CHARS = 256
/** The signed-out page, saying the provider could not be told. */
const SIGNED_OUT_UNTOLD = `${SIGN_OUT_PATH}?${PROVIDER_NOT_TOLD}`

/** The logger of a request: refusals and the audit trail (ops/audit.ts) are written on it. */
export type SignInLog = Pick<FastifyBaseLogger, 'info' | 'warn'>

/**
 * What the flow reads of a request: what sessions read (its target and cookies), its client
 * address and its logger. A Fastify request is one; the session lifecycle's refresh observer
 * (ops/audit.ts refreshAuditor) reads the same `ip` and `log` off it.
 */
export interface SignInRequest extends SessionRequest {
  /** The client address (Fastify derives it with server.trustedProxies): the audit line's `client`. */
  readonly ip: string
  readonly log: SignInLog
}

/**
 * The authorization response as the callback received it: in the query of a GET, or in the form
 * body of a POST (provider.responseMode: form_post). `params` is read inside the flow, so that a
 * malformed one (routes/form-post.ts refuses it with bad_request) is audited as a refused sign-in.
 */
export interface AuthorizationResponseInput {
  readonly received: ResponseMode
  readonly params: () => URLSearchParams
}

/**
 * What a route writes: a redirect, or the JSON body `{ value }` (a location, an access token, an
 * end-session URL). `noStore`: the answer carries a credential or a one-time URL, and is also
 * marked `Pragma: no-cache` for HTTP/1.0 caches beside the `Cache-Control: no-store` every sign-in
 * endpoint sends (routes/sign-in-hardening.ts).
 */
export type SignInAnswer = { readonly noStore: boolean } & (
  | { readonly redirect: string; readonly status: 302 | 303; readonly value?: undefined }
  | { readonly value: string; readonly redirect?: undefined; readonly status?: undefined }
)

export interface SignInFlowOptions {
  providers: Providers
  /**
   * The names of the providers that may sign in to the page at `target` (a validated redirectAfter,
   * or `/`): those of the upstream serving it, the first being its default; undefined when no
   * upstream serves it (then every provider may).
   */
  providersFor: (target: string) => readonly string[] | undefined
  cookies: GatewayCookies
  store: SessionStore
  lifecycle: SessionLifecycle
  /** The session as one of its provider's current issuer, or undefined: it must end (session/issuer-binding.ts). */
  bindIssuer: IssuerBinding
  /** Returns the safe redirect target or `null` to refuse (see redirect-after.ts). */
  validateRedirectAfter: (value: string) => string | null
  /** For a refused redirectAfter: the redirects.allowedHosts entry that would allow its port (redirect-after.ts createPortHint). */
  redirectPortHint?: (value: string) => string | undefined
  /** Whether the sign-out form may come from a page of this origin (redirect-after.ts createTrustedOriginTest). */
  isTrustedOrigin: TrustedOriginTest
  /** server.publicUrl: a sign-out the provider cannot be told of ends on the gateway's page there. */
  publicUrl: string
  /** Told of a session a logout ended, once it is (its open WebSockets close). */
  onEnded?: (session: Session) => void
  /**
   * Step-up (oidc/step-up.ts): what the rule covering the page at `target` asks of the
   * authentication, and the gateway's time in epoch seconds (a step-up's auth_time is judged by it).
   */
  stepUp?: { requirementFor: (target: string) => StepUpRequirement | undefined; nowSeconds: () => number }
  /** Several cookie domains: a sign-in returning to a host of another domain goes through the hand-off (routes/handoff.ts). */
  handoff?: { locationAfterSignIn: (redirectAfter: string) => string | undefined }
}

/** The sign-in flow: one per configuration, shared by its routes. */
export class SignInFlow {
  readonly #options: SignInFlowOptions

  constructor(options: SignInFlowOptions) {
    this.#options = options
  }

  /**
   * GET /api/v1/openid/redirect: where the browser goes to sign in (302, or `{ value }` with
   * performRedirect=false), with a new transaction cookie.
   */
  async start(req: SignInRequest, reply: SessionReply, query: URLSearchParams): Promise<SignInAnswer> {
    const redirectAfter = this.#redirectAfterOf(req, query)
    const performRedirect = parseFlag('performRedirect', single(query, 'performRedirect'), true)
    const { client, name } = this.#providerOf(query, redirectAfter)
    const state = oidc.randomState()
    const nonce = oidc.randomNonce()
    const codeVerifier = oidc.randomPKCECodeVerifier()
    const codeChallenge = await oidc.calculatePKCECodeChallenge(codeVerifier)
    const dpopKey = client.dpop ? await generateDpopKey() : undefined
    // The page's step-up rule asks the provider for it from the first sign-in on, and again when a
    // session falls short of it (the proxy sends the browser back here).
    const stepUp = redirectAfter === undefined ? undefined : this.#options.stepUp?.requirementFor(redirectAfter)
    const location = await client.authorizationUrl({
      state,
      nonce,
      codeVerifier,
      codeChallenge,
      ...(dpopKey === undefined ? {} : { dpopKey }),
      ...(stepUp === undefined ? {} : { stepUp }),
    })
    this.#options.cookies.writeTransaction(
      req,
      reply,
      state,
      { provider: name, nonce, codeVerifier, dpopKey, redirectAfter, stepUp },
      TRANSACTION_SECONDS,
      client.responseMode === 'form_post',
      client.callbackPath,
    )
    return performRedirect ? { redirect: location, status: 302, noStore: true } : { value: location, noStore: true }
  }

  /**
   * The callback (the single provider's path and each provider's own, contract/endpoints.ts
   * callbackPath; the client checks that the response came back on its transaction's path): a
   * session, then a redirect to the transaction's redirectAfter or `{ value: <access token> }`.
   * A refusal is written to the audit trail (ops/audit.ts) before it is thrown.
   */
  async finish(req: SignInRequest, reply: SessionReply, response: AuthorizationResponseInput): Promise<SignInAnswer> {
    const attempt: { provider?: string } = {}
    try {
      return await this.#finish(req, reply, response, attempt)
    } catch (err) {
      auditRefusal(req.log, 'sign-in', attempt, req.ip, refusalReason(err))
      throw err
    }
  }

  async #finish(req: SignInRequest, reply: SessionReply, response: AuthorizationResponseInput, attempt: { provider?: string }): Promise<SignInAnswer> {
    const { cookies, store, lifecycle, providers } = this.#options
    const { received } = response
    const params = response.params()
    const code = single(params, 'code')
    if (code === undefined || code === '') {
      const said: Record<string, string> = {}
      for (const name of ['error', 'error_description']) {
        const value = params.get(name)
        if (value !== null) said[name] = value.slice(0, ECHO_CHARS)
      }
      // The provider refused the authorization request (RFC 6749 4.1.2.1): a cancelled sign-in
      // (access_denied), or a request it does not accept (invalid_scope, unauthorized_client...),
      // which only the operator can fix. A callback without either is no refusal of the provider's.
      // Its words are the provider's only when the response carries the state of this browser's
      // live transaction (RFC 6749 4.1.2.1: `state` is returned with the error): anyone can link
      // to the callback with a text of their choosing, which the gateway's origin must not speak.
      // code_missing is answered first (the contract): a repeated state is no live one, not a 400.
      const states = params.getAll('state')
      const answered = states.length === 1 ? states[0] : undefined
      const transactionBound = answered !== undefined && answered !== '' && cookies.readTransaction(req, answered) !== undefined
      const logged = said.error !== undefined
      if (logged)
        req.log.warn(
          { call: 'authorization', problem: 'code_missing', ...said, transaction: transactionBound },
          transactionBound ? 'sign-in refused by the OpenID provider' : 'callback without a code or a live sign-in transaction',
        )
      throw new GatewayError('code_missing', 'the callback carries no authorization code', { extensions: transactionBound ? said : {}, logged })
    }
    const state = single(params, 'state')
    const transaction = state === undefined || state === '' ? undefined : cookies.readTransaction(req, state)
    if (state === undefined || transaction === undefined) {
      throw new GatewayError('state_mismatch', 'the sign-in state is missing, expired or was started in another browser')
    }
    const provider = providers.get(transaction.provider ?? DEFAULT_PROVIDER)
    if (provider === undefined) throw new GatewayError('state_mismatch', 'the sign-in was started with a provider that is no longer configured')
    attempt.provider = provider.name
    const { client } = provider
    const crossSite = client.responseMode === 'form_post'
    const mode = responseModeViolation(received, client.responseMode)
    if (mode !== undefined) {
      req.log.warn({ rule: mode.rule, provider: provider.name }, 'authorization response refused')
      cookies.clearTransaction(req, reply, state, crossSite, client.callbackPath)
      throw new GatewayError('authorization_response_invalid', mode.message, { logged: true })
    }
    const query = req.url.indexOf('?')
    const path = query === -1 ? req.url : req.url.slice(0, query)
    // A form post's parameters are handed on as the query the client reads them from (the body's
    // form encoding is a query's); formPostParams refused a POST with a query of its own.
    const search = received === 'form_post' ? `?${params.toString()}` : query === -1 ? '' : req.url.slice(query)
    let session
    try {
      const exchanged = await client.exchangeCode(
        path,
        search,
        {
          state,
          nonce: transaction.nonce,
          codeVerifier: transaction.codeVerifier,
          ...(transaction.dpopKey === undefined ? {} : { dpopKey: transaction.dpopKey }),
        },
        req.log,
      )
      // UserInfo, aggregated and distributed claims, Graph groups (oidc/claim-sources.ts), when configured.
      const tokens = provider.claimSources === undefined ? exchanged : await provider.claimSources.resolve(exchanged)
      if (transaction.stepUp !== undefined) this.#refuseUnmetStepUp(req, tokens.claims ?? {}, transaction.stepUp, provider)
      session = lifecycle.create(tokens, provider.name, provider.config.issuer)
    } catch (err) {
      // A refused code or token ends this transaction; a provider outage leaves it for a retry.
      if (!(err instanceof GatewayError) || err.status < 500) cookies.clearTransaction(req, reply, state, crossSite, client.callbackPath)
      throw err
    }
    const upgraded = transaction.stepUp === undefined ? undefined : await this.#upgradeInPlace(req, reply, session)
    if (upgraded !== undefined) {
      session = upgraded
    } else {
      // Whatever session this browser had is replaced, never extended (no session fixation).
      await store.destroy(req, reply)
      await store.create(req, reply, session)
    }
    cookies.clearTransaction(req, reply, state, crossSite, client.callbackPath)
    auditSuccess(req.log, 'sign-in', sessionSubject(session), req.ip)
    if (transaction.redirectAfter !== undefined) {
      // The new cookie covers the public host's domain only: another configured domain's host gets the session handed over.
      const handoff = this.#options.handoff?.locationAfterSignIn(transaction.redirectAfter)
      return { redirect: handoff ?? transaction.redirectAfter, status: 302, noStore: true }
    }
    return { value: session.accessToken, noStore: true }
  }

  /**
   * GET /api/v1/openid/refresh: `{ value: <access token> }`. With `redirectAfter` (an extension
   * used by the proxy for browser navigations) the answer is a redirect: back to the page when
   * the refresh worked, through sign-in when it cannot.
   */
  async refresh(req: SignInRequest, reply: SessionReply, query: URLSearchParams): Promise<SignInAnswer> {
    const { store, lifecycle } = this.#options
    const redirectAfter = this.#redirectAfterOf(req, query)
    const throughSignIn = (target: string): SignInAnswer => ({ redirect: signInPath(target), status: 302, noStore: false })
    const loaded = await this.#loadWithCredentials(req)
    if (loaded?.bound === false) {
      auditRefusal(req.log, 'refresh', sessionSubject(loaded.session), req.ip, 'refresh_token_invalid')
      await store.destroy(req, reply)
      if (redirectAfter !== undefined) return throughSignIn(redirectAfter)
      throw new GatewayError('refresh_token_invalid', "the session was signed in at another issuer than its provider's, or its provider is gone")
    }
    const session = loaded?.session
    if (session?.refreshToken === undefined) {
      auditRefusal(req.log, 'refresh', session === undefined ? {} : sessionSubject(session), req.ip, 'refresh_token_missing')
      if (redirectAfter !== undefined) return throughSignIn(redirectAfter)
      throw new GatewayError('refresh_token_missing', 'there is no refresh token in this session')
    }
    let updated
    try {
      updated = await lifecycle.refresh(req, reply, session)
    } catch (err) {
      if (redirectAfter !== undefined && err instanceof GatewayError && err.code === 'refresh_token_invalid') return throughSignIn(redirectAfter)
      throw err
    }
    if (redirectAfter !== undefined) return { redirect: redirectAfter, status: 302, noStore: true }
    return { value: updated.accessToken, noStore: true }
  }

  /**
   * DELETE /api/v1/openid/logout: `{ value }` is where the browser goes next (see #endSession),
   * the gateway's signed-out page when the provider could not be told.
   */
  async logout(req: SignInRequest, reply: SessionReply): Promise<SignInAnswer> {
    const session = await this.#loadWithCredentials(req)
    if (session === undefined) {
      auditRefusal(req.log, 'logout', {}, req.ip, 'unauthenticated')
      throw new GatewayError('unauthenticated', 'there is no session to log out of')
    }
    return { value: (await this.#endSession(req, reply, session)) ?? this.#options.publicUrl + SIGNED_OUT_UNTOLD, noStore: true }
  }

  /**
   * POST /api/v1/openid/sign-out: the sign-out form of the gateway's pages (a page without script
   * cannot send DELETE; the page itself is pages/sign-out.ts). It ends in a 303, to the provider's
   * end-session or back to the sign-out page, and is idempotent: no session means already signed
   * out. Sign-out CSRF: a form post from another site is refused by its `origin` (browsers always
   * send one with a POST), which must be this site or an allowed host over https (an http page
   * there is anyone's on the network path).
   */
  async signOut(req: SignInRequest, reply: SessionReply, origin: string | undefined): Promise<SignInAnswer> {
    if (origin === undefined || !this.#options.isTrustedOrigin(origin)) {
      auditRefusal(req.log, 'logout', {}, req.ip, 'bad_request')
      throw new GatewayError('bad_request', 'the sign-out form must be sent from this site')
    }
    const session = await this.#loadWithCredentials(req)
    const next = session === undefined ? '' : await this.#endSession(req, reply, session)
    return { redirect: next === undefined ? SIGNED_OUT_UNTOLD : next === '' ? SIGN_OUT_PATH : next, status: 303, noStore: true }
  }

  #redirectAfterOf(req: SignInRequest, params: URLSearchParams): string | undefined {
    const raw = single(params, 'redirectAfter')
    if (raw === undefined) return undefined
    const target = this.#options.validateRedirectAfter(raw)
    if (target === null) {
      const entry = this.#options.redirectPortHint?.(raw)
      if (entry === undefined) throw new GatewayError('bad_request', 'redirectAfter must be a path on this site or a URL on an allowed host')
      req.log.info({ entry }, 'redirectAfter refused: redirects.allowedHosts names its host on another port only')
      throw new GatewayError(
        'bad_request',
        `redirectAfter's host is allowed on another port only: redirects.allowedHosts needs ${entry} (an entry without a port covers the scheme's default port only)`,
      )
    }
    return target
  }

  /**
   * The provider of a sign-in: the one `provider=<name>` asks for, else the default of the page
   * the sign-in returns to. A provider that may not sign in to that page is refused: the session
   * would not be accepted there.
   */
  #providerOf(params: URLSearchParams, redirectAfter: string | undefined): Provider {
    const { providers } = this.#options
    const requested = single(params, 'provider')
    const names = this.#options.providersFor(redirectAfter ?? '/') ?? providers.all.map((p) => p.name)
    const name = requested ?? names[0] ?? providers.first.name
    const provider = providers.get(name)
    if (provider === undefined) throw new GatewayError('bad_request', 'provider names no configured provider')
    if (!names.includes(name)) throw new GatewayError('bad_request', 'this provider may not sign in to the page redirectAfter names')
    return provider
  }

  /**
   * The request's session with its refresh and ID tokens, which these endpoints always reach;
   * `bound: false` when it was signed in at another issuer than its provider's now, or its
   * provider is gone (session/issuer-binding.ts): it ends, and its tokens are never sent to a
   * provider (a refresh, a revocation or an end-session at the new issuer would hand them over).
   */
  async #loadWithCredentials(req: SignInRequest): Promise<{ session: Session; bound: boolean } | undefined> {
    const { store } = this.#options
    const loaded = await store.load(req)
    if (loaded === undefined) return undefined
    const bound = this.#options.bindIssuer(loaded)
    if (bound === undefined)
      req.log.info(
        { provider: loaded.provider, sub: loaded.claims.sub },
        "session ended: signed in at another issuer than its provider's, or its provider is gone",
      )
    const session = await store.withCredentials(req, bound ?? loaded)
    return session === undefined ? undefined : { session, bound: bound !== undefined }
  }

  /**
   * OpenID Connect Core 3.1.3.7 items 11 and 12 for a step-up sign-in: the ID token must carry an
   * accepted `acr` and an `auth_time` within `max_age`. A provider that ignored the request is
   * refused here (403 step_up_failed): a session created anyway would be sent back to sign in by
   * the same rule, round and round.
   */
  #refuseUnmetStepUp(req: SignInRequest, claims: Readonly<Record<string, unknown>>, requirement: StepUpRequirement, provider: Provider): void {
    const now = this.#options.stepUp?.nowSeconds() ?? Math.floor(Date.now() / 1000)
    const shortfall = stepUpShortfall(claims, requirement, now, provider.config.clockToleranceSeconds)
    if (shortfall === undefined) return
    req.log.warn(
      { provider: provider.name, shortfall, problem: 'step_up_failed' },
      shortfall === 'acr'
        ? 'step-up sign-in refused: the ID token carries none of the requested acr values'
        : 'step-up sign-in refused: the ID token has no auth_time within max_age',
    )
    throw new GatewayError(
      'step_up_failed',
      shortfall === 'acr'
        ? 'the identity provider did not authenticate you as this page requires'
        : 'the identity provider did not authenticate you again recently enough',
      { logged: true },
    )
  }

  /**
   * A step-up sign-in of the user this browser is signed in as keeps its session: the same id
   * (and store key and lifetime), with the new tokens and the new acr, amr and auth_time. Anyone
   * else (another `sub`, or another provider) gets a new session as any sign-in does, so two
   * users are never merged. Undefined when there is nothing to upgrade (or it ended meanwhile).
   */
  async #upgradeInPlace(req: SignInRequest, reply: SessionReply, signedIn: Session): Promise<Session | undefined> {
    const { store } = this.#options
    const loaded = await store.load(req)
    const current = loaded === undefined ? undefined : this.#options.bindIssuer(loaded)
    if (current === undefined || current.provider !== signedIn.provider || current.issuer !== signedIn.issuer || current.claims.sub !== signedIn.claims.sub)
      return undefined
    const upgraded: Session = { ...signedIn, id: current.id, createdAt: current.createdAt }
    // Refresh tokens of the old sign-in are left to expire: the provider may keep both valid, and
    // the session holds only the new one.
    return (await store.update(req, reply, upgraded)) ? upgraded : undefined
  }

  /**
   * Ends the session here and at its provider's token endpoint; then where the browser goes: the
   * end-session URL, '' (no end-session endpoint, or a provider no longer configured or no longer
   * at the session's issuer), or undefined: the provider could not be told, and the browser goes
   * to the gateway's signed-out page saying so (OidcClient.endSession). The session here is ended
   * first, whatever the provider does: a provider that is down never keeps anyone signed in to
   * the gateway.
   */
  async #endSession(req: SignInRequest, reply: SessionReply, { session, bound }: { session: Session; bound: boolean }): Promise<string | undefined> {
    const { store, cookies, providers } = this.#options
    await store.destroy(req, reply)
    cookies.clearBinding(reply)
    auditSuccess(req.log, 'logout', sessionSubject(session), req.ip)
    this.#options.onEnded?.(session)
    const client = bound ? providers.get(session.provider)?.client : undefined
    if (client === undefined) return ''
    // Offline refresh tokens outlive the provider's browser session, so they are revoked
    // explicitly; a failure is logged and does not fail the logout.
    if (session.refreshToken !== undefined) await client.revoke(session.refreshToken)
    return client.endSession(session.idToken)
  }
}
