import * as oidc from 'openid-client'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { RateLimitConfig } from '../options/types.js'
import { GatewayError } from '../contract/errors.js'
import { DEFAULT_PROVIDER } from '../options/types.js'
import type { Provider, Providers } from '../oidc/providers.js'
import { generateDpopKey } from '../oidc/dpop.js'
import type { GatewayCookies } from '../session/cookies.js'
import type { SessionLifecycle } from '../session/lifecycle.js'
import type { Session, SessionStore } from '../session/types.js'
import type { IssuerBinding } from '../session/issuer-binding.js'
import { parseFlag, queryOf, single } from './params.js'
import { ENDPOINTS, PROVIDER_NOT_TOLD, SIGN_OUT_PATH, signInPath } from '../contract/endpoints.js'
import { hardenSignIn, type RateLimitStore } from './sign-in-hardening.js'
import type { TrustedOriginTest } from './redirect-after.js'
import { acceptFormBodies, FORM_POST_BODY_LIMIT, formPostParams } from './form-post.js'
import { responseModeViolation, type ResponseMode } from '../oidc/authorization-response.js'
import { stepUpShortfall, type StepUpRequirement } from '../oidc/step-up.js'
import { auditRefusal, auditSuccess, refusalReason, sessionSubject } from '../ops/audit.js'

// The four sign-in endpoints of the contract (contract/endpoints.ts), and the sign-out form of
// the gateway's pages.

/** A sign-in transaction lives at most this long (the contract's 10 minutes). */
const TRANSACTION_SECONDS = 600
/**
 * The largest body these endpoints read (none needs one; a DELETE or POST may still carry one):
 * beyond it 413, where Fastify's default would read a megabyte.
 */
const BODY_LIMIT_BYTES = 16 * 1024
/** The provider's error text echoed back to the client is cut to this length. */
const ECHO_CHARS = 256

export interface SignInOptions {
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
  /** Per-client budget of the redirect, callback and refresh endpoints. */
  rateLimit: RateLimitConfig['signIn']
  /** A @fastify/rate-limit store class shared by processes (server.workers); per process otherwise. */
  rateLimitStore?: RateLimitStore
  /** server.publicUrl: a sign-out the provider cannot be told of ends on the gateway's page there. */
  publicUrl: string
  /** Told of a session a logout ended, once it is (its open WebSockets close). */
  onEnded?: (session: Session) => void
  /**
   * Step-up (oidc/step-up.ts): what the rule covering the page at `target` asks of the
   * authentication, and the gateway's time in epoch seconds (a step-up's auth_time is judged by it).
   */
  stepUp?: { requirementFor: (target: string) => StepUpRequirement | undefined; nowSeconds: () => number }
}

export async function signInRoutes(app: FastifyInstance, options: SignInOptions): Promise<void> {
  const { providers, cookies, store, lifecycle } = options
  app.addHook('onRoute', (route) => {
    route.bodyLimit ??= BODY_LIMIT_BYTES
  })
  await hardenSignIn(app, options.rateLimit, options.rateLimitStore)
  // The form-post callback and the sign-out form (routes/form-post.ts).
  acceptFormBodies(app)

  function redirectAfterOf(req: FastifyRequest, params: URLSearchParams): string | undefined {
    const raw = single(params, 'redirectAfter')
    if (raw === undefined) return undefined
    const target = options.validateRedirectAfter(raw)
    if (target === null) {
      const entry = options.redirectPortHint?.(raw)
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
  function providerOf(params: URLSearchParams, redirectAfter: string | undefined): Provider {
    const requested = single(params, 'provider')
    const names = options.providersFor(redirectAfter ?? '/') ?? providers.all.map((p) => p.name)
    const name = requested ?? names[0] ?? providers.first.name
    const provider = providers.get(name)
    if (provider === undefined) throw new GatewayError('bad_request', 'provider names no configured provider')
    if (!names.includes(name)) throw new GatewayError('bad_request', 'this provider may not sign in to the page redirectAfter names')
    return provider
  }

  /** The request's session with its refresh and ID tokens, which these endpoints always reach. */
  /**
   * The request's session with its refresh and ID tokens, which these endpoints always reach;
   * `bound: false` when it was signed in at another issuer than its provider's now, or its
   * provider is gone (session/issuer-binding.ts): it ends, and its tokens are never sent to a
   * provider (a refresh, a revocation or an end-session at the new issuer would hand them over).
   */
  async function loadWithCredentials(req: FastifyRequest): Promise<{ session: Session; bound: boolean } | undefined> {
    const loaded = await store.load(req)
    if (loaded === undefined) return undefined
    const bound = options.bindIssuer(loaded)
    if (bound === undefined)
      req.log.info(
        { provider: loaded.provider, sub: loaded.claims.sub },
        "session ended: signed in at another issuer than its provider's, or its provider is gone",
      )
    const session = await store.withCredentials(req, bound ?? loaded)
    return session === undefined ? undefined : { session, bound: bound !== undefined }
  }

  function noStore(reply: FastifyReply): void {
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache')
  }

  app.get(ENDPOINTS.redirect.path, async (req, reply) => {
    const params = queryOf(req)
    const redirectAfter = redirectAfterOf(req, params)
    const performRedirect = parseFlag('performRedirect', single(params, 'performRedirect'), true)
    const { client, name } = providerOf(params, redirectAfter)
    const state = oidc.randomState()
    const nonce = oidc.randomNonce()
    const codeVerifier = oidc.randomPKCECodeVerifier()
    const codeChallenge = await oidc.calculatePKCECodeChallenge(codeVerifier)
    const dpopKey = client.dpop ? await generateDpopKey() : undefined
    // The page's step-up rule asks the provider for it from the first sign-in on, and again when a
    // session falls short of it (the proxy sends the browser back here).
    const stepUp = redirectAfter === undefined ? undefined : options.stepUp?.requirementFor(redirectAfter)
    const location = await client.authorizationUrl({
      state,
      nonce,
      codeVerifier,
      codeChallenge,
      ...(dpopKey === undefined ? {} : { dpopKey }),
      ...(stepUp === undefined ? {} : { stepUp }),
    })
    cookies.writeTransaction(
      req,
      reply,
      state,
      { provider: name, nonce, codeVerifier, dpopKey, redirectAfter, stepUp },
      TRANSACTION_SECONDS,
      client.responseMode === 'form_post',
    )
    noStore(reply)
    if (performRedirect) return reply.redirect(location, 302)
    return { value: location }
  })

  // One handler for the single provider's path and for each provider's own (contract/endpoints.ts
  // callbackPath); the client checks that the response came back on its transaction's path. GET
  // carries the response in the query, POST in a form body (provider.responseMode: form_post).
  const completeSignIn = async (req: FastifyRequest, reply: FastifyReply, attempt: { provider?: string }): Promise<unknown> => {
    const received: ResponseMode = req.method === 'POST' ? 'form_post' : 'query'
    const params = received === 'form_post' ? formPostParams(req) : queryOf(req)
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
      cookies.clearTransaction(req, reply, state, crossSite)
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
      if (transaction.stepUp !== undefined) refuseUnmetStepUp(req, tokens.claims ?? {}, transaction.stepUp, provider)
      session = lifecycle.create(tokens, provider.name, provider.config.issuer)
    } catch (err) {
      // A refused code or token ends this transaction; a provider outage leaves it for a retry.
      if (!(err instanceof GatewayError) || err.status < 500) cookies.clearTransaction(req, reply, state, crossSite)
      throw err
    }
    const upgraded = transaction.stepUp === undefined ? undefined : await upgradeInPlace(req, reply, session)
    if (upgraded !== undefined) {
      session = upgraded
    } else {
      // Whatever session this browser had is replaced, never extended (no session fixation).
      await store.destroy(req, reply)
      await store.create(req, reply, session)
    }
    cookies.clearTransaction(req, reply, state, crossSite)
    auditSuccess(req.log, 'sign-in', sessionSubject(session), req.ip)
    noStore(reply)
    if (transaction.redirectAfter !== undefined) return reply.redirect(transaction.redirectAfter, 302)
    return { value: session.accessToken }
  }
  /** The callback, with its audit line when it is refused (ops/audit.ts; the success's is above). */
  const callback = async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const attempt: { provider?: string } = {}
    try {
      return await completeSignIn(req, reply, attempt)
    } catch (err) {
      auditRefusal(req.log, 'sign-in', attempt, req.ip, refusalReason(err))
      throw err
    }
  }
  /**
   * OpenID Connect Core 3.1.3.7 items 11 and 12 for a step-up sign-in: the ID token must carry an
   * accepted `acr` and an `auth_time` within `max_age`. A provider that ignored the request is
   * refused here (403 step_up_failed): a session created anyway would be sent back to sign in by
   * the same rule, round and round.
   */
  function refuseUnmetStepUp(req: FastifyRequest, claims: Readonly<Record<string, unknown>>, requirement: StepUpRequirement, provider: Provider): void {
    const now = options.stepUp?.nowSeconds() ?? Math.floor(Date.now() / 1000)
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
  async function upgradeInPlace(req: FastifyRequest, reply: FastifyReply, signedIn: Session): Promise<Session | undefined> {
    const loaded = await store.load(req)
    const current = loaded === undefined ? undefined : options.bindIssuer(loaded)
    if (current === undefined || current.provider !== signedIn.provider || current.issuer !== signedIn.issuer || current.claims.sub !== signedIn.claims.sub)
      return undefined
    const upgraded: Session = { ...signedIn, id: current.id, createdAt: current.createdAt }
    // Refresh tokens of the old sign-in are left to expire: the provider may keep both valid, and
    // the session holds only the new one.
    return (await store.update(req, reply, upgraded)) ? upgraded : undefined
  }

  app.get(ENDPOINTS.callback.path, callback)
  app.get(ENDPOINTS.providerCallback.path, callback)
  app.post(ENDPOINTS.callback.path, { bodyLimit: FORM_POST_BODY_LIMIT }, callback)
  app.post(ENDPOINTS.providerCallback.path, { bodyLimit: FORM_POST_BODY_LIMIT }, callback)

  app.get(ENDPOINTS.refresh.path, async (req, reply) => {
    // With `redirectAfter` (an extension used by the proxy for browser navigations) the answer is
    // a redirect: back to the page when the refresh worked, through sign-in when it cannot.
    const redirectAfter = redirectAfterOf(req, queryOf(req))
    const loaded = await loadWithCredentials(req)
    if (loaded?.bound === false) {
      auditRefusal(req.log, 'refresh', sessionSubject(loaded.session), req.ip, 'refresh_token_invalid')
      await store.destroy(req, reply)
      if (redirectAfter !== undefined) return reply.redirect(signInPath(redirectAfter), 302)
      throw new GatewayError('refresh_token_invalid', "the session was signed in at another issuer than its provider's, or its provider is gone")
    }
    const session = loaded?.session
    if (session?.refreshToken === undefined) {
      auditRefusal(req.log, 'refresh', session === undefined ? {} : sessionSubject(session), req.ip, 'refresh_token_missing')
      if (redirectAfter !== undefined) return reply.redirect(signInPath(redirectAfter), 302)
      throw new GatewayError('refresh_token_missing', 'there is no refresh token in this session')
    }
    let updated
    try {
      updated = await lifecycle.refresh(req, reply, session)
    } catch (err) {
      if (redirectAfter !== undefined && err instanceof GatewayError && err.code === 'refresh_token_invalid') {
        return reply.redirect(signInPath(redirectAfter), 302)
      }
      throw err
    }
    noStore(reply)
    if (redirectAfter !== undefined) return reply.redirect(redirectAfter, 302)
    return { value: updated.accessToken }
  })

  /**
   * Ends the session here and at its provider's token endpoint; then where the browser goes: the
   * end-session URL, '' (no end-session endpoint, or a provider no longer configured or no longer
   * at the session's issuer), or the
   * gateway's signed-out page saying the provider could not be told (OidcClient.endSession). The
   * session here is ended first, whatever the provider does: a provider that is down never keeps
   * anyone signed in to the gateway.
   */
  async function endSession(req: FastifyRequest, reply: FastifyReply, { session, bound }: { session: Session; bound: boolean }): Promise<string | undefined> {
    await store.destroy(req, reply)
    cookies.clearBinding(reply)
    auditSuccess(req.log, 'logout', sessionSubject(session), req.ip)
    options.onEnded?.(session)
    const client = bound ? providers.get(session.provider)?.client : undefined
    noStore(reply)
    if (client === undefined) return ''
    // Offline refresh tokens outlive the provider's browser session, so they are revoked
    // explicitly; a failure is logged and does not fail the logout.
    if (session.refreshToken !== undefined) await client.revoke(session.refreshToken)
    return client.endSession(session.idToken)
  }
  /** The signed-out page, saying the provider could not be told. */
  const signedOutUntold = `${SIGN_OUT_PATH}?${PROVIDER_NOT_TOLD}`

  app.delete(ENDPOINTS.logout.path, async (req: FastifyRequest, reply) => {
    const session = await loadWithCredentials(req)
    if (session === undefined) auditRefusal(req.log, 'logout', {}, req.ip, 'unauthenticated')
    if (session === undefined) throw new GatewayError('unauthenticated', 'there is no session to log out of')
    return { value: (await endSession(req, reply, session)) ?? options.publicUrl + signedOutUntold }
  })

  // POST /api/v1/openid/sign-out: the sign-out form of the gateway's pages (a page without script
  // cannot send DELETE; the page itself is pages/sign-out.ts). It ends in a redirect, to the
  // provider's end-session or back to the sign-out page, and is idempotent: no session means
  // already signed out. Sign-out CSRF: a form post from another site is refused by
  // its Origin (browsers always send one with a POST), which must be this site or an allowed
  // host over https (an http page there is anyone's on the network path).
  // The form has no fields; whatever body comes is ignored (and a large one refused).
  app.post(ENDPOINTS.signOut.path, { bodyLimit: 1024 }, async (req: FastifyRequest, reply) => {
    const origin = req.headers.origin
    if (origin === undefined || !options.isTrustedOrigin(origin)) {
      auditRefusal(req.log, 'logout', {}, req.ip, 'bad_request')
      throw new GatewayError('bad_request', 'the sign-out form must be sent from this site')
    }
    const session = await loadWithCredentials(req)
    const next = session === undefined ? '' : await endSession(req, reply, session)
    noStore(reply)
    return reply.redirect(next === undefined ? signedOutUntold : next === '' ? SIGN_OUT_PATH : next, 303)
  })
}
