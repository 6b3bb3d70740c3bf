import * as oidc from 'openid-client'
import type { FastifyBaseLogger } from 'fastify'
import * as jose from 'jose'
import { DEFAULT_PROVIDER, type ProviderConfig, type TokenExchangeConfig } from '../options/types.js'
import { GatewayError, ID_TOKEN_CLOCK_SKEW, MISCONFIGURED_ISSUER, MISCONFIGURED_METADATA, NOT_READY_PROVIDER_UNREACHABLE } from '../contract/errors.js'
import { redirectUri } from '../contract/endpoints.js'
import type { Clock } from '../lib/clock.js'
import { ASYMMETRIC_ALGORITHMS, type AsymmetricAlgorithm } from '../options/algorithms.js'
import { idTokenSigningAlgs } from './algorithms.js'
import { basicEncodingChanges, clientAuthentication } from './client-auth.js'
import { profileAlgorithms } from './profile.js'
import { DPOP_ALGORITHM, dpopThumbprint, generateDpopKey, DpopNonces, type DpopKey } from './dpop.js'
import { describe, grantProblem, isValidationFailure, ProviderMetadataError } from './errors.js'
import { observedFetch, ProviderFaultError, ProviderUnreachableError, type ProviderCallObserver } from './fetch.js'
import type { Tracer } from '@opentelemetry/api'
import { failedIdTokenCheck, IdTokenRuleError, idTokenViolation } from './id-token-rules.js'
import { ProviderKeys } from './provider-keys.js'
import { authorizationResponseViolation } from './authorization-response.js'
import { stepUpParameters, type StepUpRequirement } from './step-up.js'
import { clockClaimOf, clockSkewWords, providerClockOffsetSeconds } from './clock-skew.js'
import { githubScopes, githubServerMetadata, githubTokenErrors } from './github.js'

export interface Tokens {
  accessToken: string
  /** Epoch seconds; `undefined` when the provider said nothing about the lifetime. */
  expiresAt: number | undefined
  refreshToken: string | undefined
  idToken: string | undefined
  /** Validated ID token claims, when an ID token came with the response. */
  claims: oidc.IDToken | undefined
  /** The DPoP key the tokens are bound to (provider.dpop). */
  dpopKey?: DpopKey
}

/** RFC 8693 2.1: the grant type of a token exchange. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange'
/** RFC 8693 3: the token type identifier of an OAuth access token. */
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token'
/** RFC 8693 3: a JWT, which a provider may say it issued instead (still a Bearer access token). */
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt'

/** The token a token exchange issued for an upstream. */
export interface ExchangedToken {
  accessToken: string
  /** Epoch seconds; `undefined` when the provider said nothing about the lifetime. */
  expiresAt: number | undefined
}

export interface AuthorizationChecks {
  state: string
  nonce: string
  codeVerifier: string
  /** The sign-in's DPoP key, with provider.dpop (RFC 9449). */
  dpopKey?: DpopKey
}

/** The provider endpoints, by a fixed name (metrics label them so, never by URL). */
export type ProviderCall = 'discovery' | 'jwks' | 'token' | 'par' | 'introspection' | 'revocation' | 'userinfo' | 'other'

/** The longest a sign-out waits to learn whether the provider's end-session endpoint answers. */
const END_SESSION_PROBE_MS = 2000
const RETRY_MIN_MS = 500
const RETRY_MAX_MS = 30_000

/** What a grant's token response said besides its body: the provider's clock, by its Date header. */
interface TokenAnswer {
  clockOffsetSeconds?: number | undefined
}

interface Discovered {
  server: oidc.ServerMetadata
  /** How the client authenticates, agreed with the metadata (private_key_jwt's algorithm). */
  auth: oidc.ClientAuth
  /** Authorization URL, revocation, end-session, introspection. Grants get their own (#forGrant). */
  configuration: oidc.Configuration
  idTokenAlgs: AsymmetricAlgorithm[]
  tokenEndpoint: string
  /** Authorization requests are pushed (RFC 9126). */
  par: boolean
}

/**
 * One OpenID provider, as seen by the gateway: discovery (retried in the background until it
 * succeeds), its signing keys, authorization URL, code and refresh grants, introspection,
 * revocation and end-session URL. An instance per provider, passed to whoever needs it.
 */
export class OidcClient {
  /** The provider's signing keys, shared with the Bearer verifier. */
  readonly keys: ProviderKeys
  readonly #config: ProviderConfig
  readonly #redirectUri: string
  readonly #callbackPath: string
  readonly #log: FastifyBaseLogger
  #discovered: Discovered | undefined
  /** When discovery started failing (clock time), until it succeeds: for the not-ready page. */
  #failingSince: number | undefined
  /** The last failed discovery's transport failure in words (fetch.ts transportWords), for the not_ready page. */
  #failingBecause: string | undefined
  /** The last failed discovery's cause when it is not transient (#misconfiguration): what the refusals say. */
  #misconfigured: Misconfiguration | undefined
  /** provider.scopes, and offline_access with provider.offlineAccess. */
  readonly #scopes: readonly string[]
  #stopped = false
  #retryTimer: NodeJS.Timeout | undefined

  readonly #fetch: oidc.CustomFetch
  readonly #dpopNonces: DpopNonces
  /** What a token response's expires_in counts from. */
  readonly #clock: Clock

  /**
   * `callbackPath` is this provider's redirect URI path (contract/endpoints.ts callbackPath); `observe` is
   * told of every call to the provider (metrics); with `tracer`, each call is a span.
   */
  constructor(
    config: ProviderConfig,
    publicUrl: string,
    callbackPath: string,
    log: FastifyBaseLogger,
    clock: Clock,
    observe?: ProviderCallObserver,
    tracer?: Tracer,
  ) {
    this.#config = config
    this.#clock = clock
    this.#dpopNonces = new DpopNonces(clock)
    this.#callbackPath = callbackPath
    this.#redirectUri = redirectUri(publicUrl, callbackPath)
    this.#log = log
    this.#scopes = config.github === undefined ? requestedScopes(config) : githubScopes(config.github)
    const traced = observedFetch(observe, tracer && { tracer, provider: config.name, callOf: (url) => this.callOf(url) })
    // GitHub answers token errors with HTTP 200 (github.ts).
    const observed = config.github === undefined ? traced : githubTokenErrors(traced, githubServerMetadata(config.issuer).token_endpoint ?? '')
    this.#fetch = !config.dpop
      ? observed
      : async (url, options) => {
          const res = await observed(url, options)
          this.#dpopNonces.observe(url, res)
          return res
        }
    this.keys = new ProviderKeys({ timeoutMs: config.timeoutMs, log, fetch: this.#fetch })
  }

  get redirectUri(): string {
    return this.#redirectUri
  }

  /** The path of redirectUri: the only callback path this provider's sign-ins finish on. */
  get callbackPath(): string {
    return this.#callbackPath
  }

  /** How this provider returns authorization responses (provider.responseMode). */
  get responseMode(): 'query' | 'form_post' {
    return this.#config.responseMode
  }

  /** Whether the gateway's tokens are DPoP-bound (provider.dpop). */
  get dpop(): boolean {
    return this.#config.dpop
  }

  get ready(): boolean {
    return this.#discovered !== undefined
  }

  /** The algorithms ID tokens (and logout tokens, signed alike) are accepted with; `undefined` before discovery. */
  get idTokenAlgorithms(): readonly AsymmetricAlgorithm[] | undefined {
    return this.#discovered?.idTokenAlgs
  }

  /** Which of the provider's endpoints `url` is. */
  callOf(url: string): ProviderCall {
    const endpoint = url.split('?')[0] ?? url
    const server = this.#discovered?.server
    if (endpoint === server?.token_endpoint) return 'token'
    // During discovery the keys are fetched before the metadata is kept: ask the key set.
    if (endpoint === (server?.jwks_uri ?? this.keys.uri)) return 'jwks'
    if (endpoint === server?.pushed_authorization_request_endpoint) return 'par'
    if (endpoint === server?.introspection_endpoint) return 'introspection'
    if (endpoint === server?.revocation_endpoint) return 'revocation'
    if (endpoint === server?.userinfo_endpoint) return 'userinfo'
    return endpoint.endsWith('/.well-known/openid-configuration') ? 'discovery' : 'other'
  }

  /** The provider's metadata as it advertised it (before the gateway narrows its algorithms); `undefined` before discovery. */
  get advertised(): oidc.ServerMetadata | undefined {
    return this.#discovered?.server
  }

  /** Server metadata after discovery. */
  get metadata(): oidc.ServerMetadata | undefined {
    return this.#discovered?.configuration.serverMetadata()
  }

  /** The openid-client Configuration sign-ins authenticate with (client-probe.ts, `check --online`); `undefined` before discovery. */
  get configuration(): oidc.Configuration | undefined {
    return this.#discovered?.configuration
  }

  /** Discovers the provider and loads its keys once; throws when it cannot. */
  async discover(): Promise<void> {
    if (this.#config.github !== undefined) {
      this.#githubMetadata()
      return
    }
    const { issuer, clientId, timeoutMs, allowInsecureHttp } = this.#config
    const discovered = await oidc.discovery(new URL(issuer), clientId, undefined, undefined, {
      timeout: timeoutMs / 1000,
      [oidc.customFetch]: this.#fetch,
      ...(allowInsecureHttp ? { execute: [oidc.allowInsecureRequests] } : {}),
    })
    const server = discovered.serverMetadata()
    const advertised = server.id_token_signing_alg_values_supported
    const pinned = this.#config.idTokenAlgorithms
    const allowed = profileAlgorithms(this.#config)
    const idTokenAlgs = idTokenSigningAlgs(advertised, pinned).filter((alg) => allowed === undefined || allowed.includes(alg))
    if (idTokenAlgs.length === 0) {
      throw new ProviderMetadataError(
        `the provider signs ID tokens only with algorithms the gateway refuses (id_token_signing_alg_values_supported: ${JSON.stringify(advertised)}); it needs one of ${(allowed ?? ASYMMETRIC_ALGORITHMS).join(', ')}${allowed === undefined ? '' : ' (provider.profile: fapi2)'}`,
      )
    }
    if (pinned !== undefined && Array.isArray(advertised) && !pinned.some((alg) => advertised.includes(alg))) {
      this.#log.warn(
        { idTokenAlgorithms: pinned, advertised },
        'provider.idTokenAlgorithms names none of the algorithms the provider advertises: sign-ins fail unless it signs with one of them anyway',
      )
    }
    if (server.jwks_uri === undefined) throw new ProviderMetadataError('the provider metadata has no jwks_uri')
    const jwksUri = new URL(server.jwks_uri)
    if (jwksUri.protocol !== 'https:' && !(allowInsecureHttp && jwksUri.protocol === 'http:')) {
      throw new ProviderMetadataError(`the provider's jwks_uri must be https (http only with provider.allowInsecureHttp: true)`)
    }
    if (server.token_endpoint === undefined) throw new ProviderMetadataError('the provider metadata has no token_endpoint')
    await this.keys.load(jwksUri)
    if (this.#config.bearer.introspection && server.introspection_endpoint === undefined) {
      this.#log.warn({ issuer }, 'provider.bearer.introspection is on, but the provider advertises no introspection_endpoint: opaque Bearer tokens are refused')
    }
    if (this.#config.dpop) checkDpopSupport(server)
    const auth = await clientAuthentication(this.#config, server, allowed)
    this.#discovered = {
      server,
      auth,
      par: usesPar(this.#config.pushedAuthorizationRequests, server),
      configuration: this.#configure(server, auth, idTokenAlgs, this.#fetch),
      idTokenAlgs,
      tokenEndpoint: new URL(server.token_endpoint).href,
    }
  }

  /** GitHub (github.ts): no discovery and no keys; the metadata is GitHub's documented endpoints, the secret goes in the form body. */
  #githubMetadata(): void {
    const server = githubServerMetadata(this.#config.issuer)
    const auth = oidc.ClientSecretPost(this.#config.clientSecret)
    this.#discovered = {
      server,
      auth,
      par: false,
      configuration: this.#configure(server, auth, [], this.#fetch),
      idTokenAlgs: [],
      tokenEndpoint: new URL(server.token_endpoint ?? '').href,
    }
  }

  /**
   * An openid-client Configuration for `server`. Rebuilt from the server metadata because client
   * metadata is fixed at construction, and the ID token algorithms are only known after discovery.
   */
  #configure(server: oidc.ServerMetadata, auth: oidc.ClientAuth, idTokenAlgs: AsymmetricAlgorithm[], fetch: oidc.CustomFetch): oidc.Configuration {
    const { clientId, timeoutMs, allowInsecureHttp, clockToleranceSeconds } = this.#config
    const metadata: Partial<oidc.ClientMetadata> = { [oidc.clockTolerance]: clockToleranceSeconds }
    // Without a client id_token_signed_response_alg, openid-client accepts exactly the algorithms
    // of the server's id_token_signing_alg_values_supported: here the vetted list (asymmetric,
    // advertised or pinned), so neither none, HS* nor a forged header can pick the algorithm
    // (RFC 8725 3.1), and a key of another type never verifies.
    const vetted: oidc.ServerMetadata = {
      ...server,
      id_token_signing_alg_values_supported: idTokenAlgs,
      // FAPI 2.0 5.3.2.2: the authorization response must carry `iss` (RFC 9207), whatever the
      // provider advertises; openid-client then refuses a response without it or with another.
      ...(this.#config.profile === 'fapi2' ? { authorization_response_iss_parameter_supported: true } : {}),
    }
    const configuration = new oidc.Configuration(vetted, clientId, metadata, auth)
    configuration.timeout = timeoutMs / 1000
    configuration[oidc.customFetch] = fetch
    if (allowInsecureHttp) oidc.allowInsecureRequests(configuration)
    // OpenID Connect Core 3.1.3.7 step 6 lets a client skip the ID token signature when it came
    // over TLS; a gateway that other services trust does not take that shortcut.
    oidc.enableNonRepudiationChecks(configuration)
    return configuration
  }

  /**
   * A Configuration for one grant, whose ID token openid-client checks against the gateway's
   * key set (ProviderKeys) instead of a copy of its own: when the token response arrives, the key
   * its ID token names is looked up first (refetching the JWKS once for a new kid, rate-limited),
   * then the set is handed to this Configuration, which has not fetched keys yet and so takes it.
   */
  #forGrant(seen?: TokenAnswer): oidc.Configuration {
    const { server, auth, idTokenAlgs, tokenEndpoint } = this.#require()
    const configuration = this.#configure(server, auth, idTokenAlgs, async (url, options) => {
      const res = await this.#fetch(url, options)
      if (url === tokenEndpoint && seen !== undefined) seen.clockOffsetSeconds = providerClockOffsetSeconds(res.headers.get('date'))
      if (url === tokenEndpoint && res.status === 200) await this.#prepareKeys(configuration, idTokenAlgs, res)
      return res
    })
    return configuration
  }

  /** The configuration path of one of this provider's keys, as an operator finds it in the file. */
  #keyPath(key: keyof ProviderConfig): string {
    return providerKeyPath(this.#config, key)
  }

  /**
   * The log fields of the gateway's client refused (provider_rejected_client) while it sends
   * client_secret_basic with an id or secret that the Basic encoding changes (client-auth.ts
   * basicEncodingChanges): which of them (never their value) and the way out. Only then can the
   * encoding be the cause: a secret of unreserved characters is sent as it is, so its refusal
   * gets no hint (it is simply not the secret the provider has). The problem a browser sees does
   * not say it: it would tell anyone a property of the secret.
   */
  #basicEncodingHint(problem: GatewayError): Record<string, unknown> {
    if (problem.code !== 'provider_rejected_client' || this.#config.clientAuthMethod !== 'client_secret_basic') return {}
    const changed = basicEncodingChanges(this.#config)
    if (changed.length === 0) return {}
    const names = changed.join(' and ')
    const key = this.#keyPath('clientAuthMethod')
    return {
      basicEncoded: changed,
      hint: `client_secret_basic form-urlencodes the ${names} inside Basic (RFC 6749 2.3.1: every character but letters, digits and "-._~", e.g. "+" as "%2B", "/" as "%2F"); a provider that does not decode them compares another text and refuses the client. Set ${key}: client_secret_post (and allow that method at the provider)`,
    }
  }

  /**
   * An ID token refused on iat, exp or nbf (clock-skew.ts): the log fields and words that name
   * the clocks, their measured offset and the tolerance's key; undefined for any other refusal.
   */
  #clockSkew(err: unknown, seen: TokenAnswer): { fields: Record<string, unknown>; words: string } | undefined {
    const claim = clockClaimOf(err)
    if (claim === undefined) return undefined
    const { clockToleranceSeconds } = this.#config
    const words = clockSkewWords(claim, seen.clockOffsetSeconds, clockToleranceSeconds, this.#keyPath('clockToleranceSeconds'))
    return { words, fields: { providerClockOffsetSeconds: seen.clockOffsetSeconds, clockToleranceSeconds, hint: words } }
  }

  async #prepareKeys(configuration: oidc.Configuration, idTokenAlgs: readonly string[], res: Response): Promise<void> {
    let header: jose.ProtectedHeaderParameters | undefined
    try {
      const body: unknown = await res.clone().json()
      const idToken = typeof body === 'object' && body !== null && 'id_token' in body ? body.id_token : undefined
      if (typeof idToken === 'string') header = jose.decodeProtectedHeader(idToken)
    } catch {
      // Not an ID token openid-client can use either: it refuses the response itself.
    }
    if (header === undefined) return
    // A token in any other alg is refused by openid-client before it looks for a key.
    if (header.alg !== undefined && idTokenAlgs.includes(header.alg)) await this.keys.prepare(header)
    const keys = this.keys.exported()
    if (keys !== undefined) oidc.setJwksCache(configuration, keys)
  }

  /** Keeps discovering with capped exponential backoff until it succeeds or `stop()` is called. */
  start(): Promise<void> {
    return new Promise((resolve) => {
      const attempt = (delay: number): void => {
        const started = this.#clock.now()
        this.discover().then(
          () => {
            this.#failingSince = undefined
            this.#failingBecause = undefined
            this.#misconfigured = undefined
            this.#log.info({ issuer: this.#config.issuer }, 'provider metadata loaded')
            resolve()
          },
          (err: unknown) => {
            if (this.#stopped) return resolve()
            this.#failingSince ??= started
            const described = describe(err)
            this.#failingBecause = typeof described.meaning === 'string' ? described.meaning : undefined
            this.#misconfigured = this.#misconfiguration(err, described)
            // The discovery document, or the key set it names (fetched before the metadata is kept).
            const call = typeof described.url === 'string' ? this.callOf(described.url) : 'discovery'
            this.#log.warn(
              {
                issuer: this.#config.issuer,
                call: call === 'other' ? 'discovery' : call,
                ...described,
                failingForMs: this.#clock.now() - this.#failingSince,
                retryInMs: delay,
              },
              'provider discovery failed',
            )
            this.#retryTimer = setTimeout(() => attempt(Math.min(delay * 2, RETRY_MAX_MS)), delay)
          },
        )
      }
      attempt(RETRY_MIN_MS)
    })
  }

  stop(): void {
    this.#stopped = true
    clearTimeout(this.#retryTimer)
  }

  /**
   * Where the browser goes to sign in. With PAR (RFC 9126) the parameters are first pushed to the
   * provider, authenticated like a grant, and the URL carries only client_id and request_uri.
   */
  async authorizationUrl(checks: AuthorizationChecks & { codeChallenge: string; stepUp?: StepUpRequirement }): Promise<string> {
    const { configuration, par } = this.#require()
    const scope = this.#scopes.join(' ')
    const params: Record<string, string> = {
      redirect_uri: this.#redirectUri,
      scope,
      state: checks.state,
      // OpenID Connect Core 3.1.2.1's nonce is the ID token's; GitHub issues none.
      ...(this.#config.github === undefined ? { nonce: checks.nonce } : {}),
      code_challenge: checks.codeChallenge,
      code_challenge_method: 'S256',
    }
    // OpenID Connect Core 1.0 section 11: a provider ignores offline_access unless the request
    // carries prompt=consent (or has other means of permitting offline access, which the gateway
    // cannot know of). So only a sign-in that asks for a refresh token asks for consent.
    if (this.#scopes.includes('offline_access')) params.prompt = 'consent'
    // OAuth 2.0 Form Post Response Mode section 2: the response comes back as a form POST.
    if (this.#config.responseMode === 'form_post') params.response_mode = 'form_post'
    // Step-up (oidc/step-up.ts): acr_values and max_age, OpenID Connect Core 3.1.2.1.
    if (checks.stepUp !== undefined) Object.assign(params, stepUpParameters(checks.stepUp))
    // RFC 9449 10: the code is bound to the sign-in's DPoP key, by the pushed request's proof or
    // by the key's thumbprint.
    const dpopKey = checks.dpopKey
    if (!par) {
      if (dpopKey !== undefined) params.dpop_jkt = await dpopThumbprint(dpopKey)
      return oidc.buildAuthorizationUrl(configuration, params).href
    }
    try {
      const options = dpopKey === undefined ? undefined : { DPoP: await this.#dpopNonces.handle(configuration, dpopKey) }
      return (await oidc.buildAuthorizationUrlWithPAR(configuration, params, options)).href
    } catch (err) {
      // Whether the provider failed or refused the push, the user can do nothing about it; a
      // refused client authentication or redirect URI is the operator's to fix.
      const described = describe(err)
      const problem = grantProblem(err, 'provider_unavailable', 'provider_unavailable', 'pushed authorization request', true)
      if (problem.code !== 'provider_rejected_client' && refusesRedirectUri(described)) {
        this.#log.warn(
          { call: 'par', problem: 'provider_rejected_redirect_uri', redirectUri: this.#redirectUri, ...described },
          'pushed authorization request failed: the provider refused the redirect URI',
        )
        throw new GatewayError(
          'provider_rejected_redirect_uri',
          `the OpenID provider refused the gateway's redirect URI ${this.#redirectUri} (${String(described.error)}): it must be registered at the provider as a redirect URI of client ${JSON.stringify(this.#config.clientId)}, exactly`,
          { cause: err, logged: true, extensions: { redirectUri: this.#redirectUri } },
        )
      }
      const code = problem.code === 'provider_rejected_client' ? problem.code : 'provider_unavailable'
      this.#log.warn({ call: 'par', problem: code, ...described, ...this.#basicEncodingHint(problem) }, 'pushed authorization request failed')
      throw new GatewayError(
        code,
        problem.code === 'provider_rejected_client' ? problem.message : 'the OpenID provider did not accept the pushed authorization request',
        { cause: err, logged: true },
      )
    }
  }

  /**
   * Authorization code grant for the callback that arrived at `path` with the query `search`.
   * The response's mix-up checks (authorization-response.ts) run first: a refused response never
   * reaches a token endpoint. A refused response or ID token is logged on `log` (the request's)
   * with the rule or check it failed.
   */
  async exchangeCode(path: string, search: string, checks: AuthorizationChecks, log: Pick<FastifyBaseLogger, 'warn'>): Promise<Tokens> {
    const callbackUrl = new URL(this.#redirectUri + search)
    const { server } = this.#require()
    const violation = authorizationResponseViolation(path, callbackUrl.searchParams, {
      callbackPath: this.#callbackPath,
      issuer: server.issuer,
      issRequired: this.#config.profile === 'fapi2' || server.authorization_response_iss_parameter_supported === true,
    })
    if (violation !== undefined) {
      log.warn({ rule: violation.rule, issuer: this.#config.issuer }, 'authorization response refused')
      throw new GatewayError('authorization_response_invalid', violation.message, { logged: true })
    }
    const seen: TokenAnswer = {}
    try {
      const configuration = this.#forGrant(seen)
      const dpop = await this.#dpopOptions(configuration, checks.dpopKey)
      const response = await oidc.authorizationCodeGrant(
        configuration,
        callbackUrl,
        this.#config.github === undefined
          ? { pkceCodeVerifier: checks.codeVerifier, expectedState: checks.state, expectedNonce: checks.nonce, idTokenExpected: true }
          : { pkceCodeVerifier: checks.codeVerifier, expectedState: checks.state },
        undefined,
        dpop,
      )
      return this.#checked(response, 'id_token_invalid', undefined, checks.dpopKey)
    } catch (err) {
      if (err instanceof oidc.AuthorizationResponseError) {
        // The provider answered the authorization request with an error instead of a code.
        log.warn({ call: 'authorization', problem: 'code_invalid', ...describe(err) }, 'sign-in refused by the OpenID provider')
        throw new GatewayError('code_invalid', 'the OpenID provider returned an error instead of a code', { cause: err, logged: true })
      }
      if (err instanceof GatewayError && err.code !== 'id_token_invalid') throw err
      const problem = grantProblem(err, 'code_invalid', 'id_token_invalid', 'code exchange', true)
      if (problem.code !== 'id_token_invalid') {
        log.warn({ call: 'token', problem: problem.code, ...describe(err), ...this.#basicEncodingHint(problem) }, 'code exchange failed')
        throw problem
      }
      const clock = this.#clockSkew(err, seen)
      logIdTokenRefusal(log, err, 'sign-in', clock?.fields)
      if (clock === undefined) throw problem
      throw new GatewayError('id_token_invalid', `the ID token is invalid: ${clock.words}`, {
        cause: err,
        logged: true,
        extensions: { reason: ID_TOKEN_CLOCK_SKEW },
      })
    }
  }

  /**
   * Refresh grant; a refreshed ID token must be about `subject`, the session's user. With DPoP,
   * the proof is signed with the session's key `dpopKey`; a session signed in before DPoP was
   * turned on gets a key now (a confidential client's refresh token is not bound, RFC 9449 5).
   */
  async refresh(refreshToken: string, subject: string, dpopKey?: DpopKey): Promise<Tokens> {
    const seen: TokenAnswer = {}
    try {
      const configuration = this.#forGrant(seen)
      const key = this.#config.dpop ? (dpopKey ?? (await generateDpopKey())) : undefined
      const dpop = await this.#dpopOptions(configuration, key)
      const response = await oidc.refreshTokenGrant(configuration, refreshToken, undefined, dpop)
      // A provider that breaks ID token rules on refresh is broken, not the user's grant: 502.
      return this.#checked(response, 'provider_unavailable', subject, key)
    } catch (err) {
      // No request here (refreshes are shared between requests): the gateway's logger.
      if (isValidationFailure(err) || (err instanceof GatewayError && err.cause instanceof IdTokenRuleError)) {
        logIdTokenRefusal(this.#log, err, 'refresh', this.#clockSkew(err, seen)?.fields)
        throw grantProblem(err, 'refresh_token_invalid', 'provider_unavailable', 'refresh', true)
      }
      if (err instanceof GatewayError) throw err
      const problem = grantProblem(err, 'refresh_token_invalid', 'provider_unavailable', 'refresh', true)
      this.#log.warn({ call: 'refresh', problem: problem.code, ...describe(err), ...this.#basicEncodingHint(problem) }, 'refresh failed')
      throw problem
    }
  }

  /**
   * RFC 8693 token exchange of the user's access token `subjectToken` for a token of the upstream
   * `upstream` (its tokenExchange: audience, scope, resource of RFC 8693 2.1 and RFC 8707),
   * authenticated like every grant. Throws GatewayError: token_exchange_refused (the provider
   * answered with an OAuth error, RFC 8693 2.2.2, other than invalid_client), provider_rejected_client
   * (invalid_client), provider_unavailable (unreachable, 5xx, or an answer that is not a Bearer
   * access token), each logged here at warn with the provider's error; never a token.
   */
  async exchangeToken(subjectToken: string, upstream: string, request: TokenExchangeConfig): Promise<ExchangedToken> {
    const params: Record<string, string> = {
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      requested_token_type: ACCESS_TOKEN_TYPE,
    }
    if (request.audience !== undefined) params.audience = request.audience
    if (request.scope !== undefined) params.scope = request.scope.join(' ')
    if (request.resource !== undefined) params.resource = request.resource
    let response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers
    try {
      // No DPoP proof: config/cross-key-rules.ts refuses token exchange with DPoP-bound tokens, and the token
      // goes to the upstream as Bearer. No ID token is expected, so the plain configuration.
      response = await oidc.genericGrantRequest(this.#require().configuration, TOKEN_EXCHANGE_GRANT, params)
    } catch (err) {
      if (err instanceof GatewayError) throw err
      const described = describe(err)
      let problem = grantProblem(err, 'token_exchange_refused', 'provider_unavailable', 'token exchange', true)
      // RFC 6749 5.2 unauthorized_client: the provider's policy does not let the gateway exchange
      // for this upstream (how several providers refuse an exchange): the upstream's refusal,
      // not broken credentials, which invalid_client alone says.
      if (problem.code === 'provider_rejected_client' && described.error === 'unauthorized_client') {
        problem = new GatewayError('token_exchange_refused', 'the OpenID provider refused the token exchange for this upstream', { cause: err, logged: true })
      }
      this.#log.warn({ call: 'token_exchange', upstream, problem: problem.code, ...described, ...this.#basicEncodingHint(problem) }, 'token exchange failed')
      throw problem
    }
    const issued = response.issued_token_type
    // RFC 8693 2.2.1: token_type Bearer is what an upstream can use as it is; N_A (not an access
    // token) or DPoP (bound to a key the upstream lacks) cannot be forwarded.
    if (response.token_type !== 'bearer' || (issued !== undefined && issued !== ACCESS_TOKEN_TYPE && issued !== JWT_TOKEN_TYPE)) {
      const problem = new GatewayError('provider_unavailable', 'the OpenID provider did not issue a Bearer access token in the token exchange', {
        logged: true,
      })
      this.#log.warn(
        {
          call: 'token_exchange',
          upstream,
          problem: problem.code,
          tokenType: response.token_type,
          issuedTokenType: typeof issued === 'string' ? issued : undefined,
        },
        'token exchange failed',
      )
      throw problem
    }
    const expiresIn = response.expiresIn()
    return { accessToken: response.access_token, expiresAt: expiresIn === undefined ? undefined : Math.floor(this.#clock.now() / 1000) + expiresIn }
  }

  /** Whether the provider's metadata lists `grantType` in grant_types_supported (`undefined`: it lists none, or is not loaded). */
  advertisesGrant(grantType: string): boolean | undefined {
    const listed = this.#discovered?.server.grant_types_supported
    return Array.isArray(listed) ? listed.includes(grantType) : undefined
  }

  /** RFC 7009 revocation, best effort: returns false instead of throwing. */
  async revoke(refreshToken: string): Promise<boolean> {
    const discovered = this.#discovered
    if (discovered?.server.revocation_endpoint === undefined) return false
    try {
      await oidc.tokenRevocation(discovered.configuration, refreshToken, { token_type_hint: 'refresh_token' })
      return true
    } catch (err) {
      this.#log.warn({ call: 'revocation', ...describe(err) }, 'refresh token revocation failed')
      return false
    }
  }

  /**
   * Where a sign-out sends the browser: the RP-initiated logout URL, '' when the provider has no
   * end-session endpoint, or `undefined` when the provider cannot be told: its metadata is not
   * loaded, or its end-session endpoint does not answer the gateway (END_SESSION_PROBE_MS). A
   * browser sent there would meet a connection error instead of a signed-out page.
   */
  async endSession(idToken: string | undefined): Promise<string | undefined> {
    const endpoint = this.#discovered?.server.end_session_endpoint
    if (this.#discovered === undefined) {
      this.#log.warn({ call: 'end_session', issuer: this.#config.issuer }, 'signed out at the gateway only: the provider metadata is not loaded')
      return undefined
    }
    if (endpoint === undefined) return ''
    return (await this.#answers(endpoint)) ? this.endSessionUrl(idToken) : undefined
  }

  /**
   * Whether `endpoint` answers at all: any HTTP answer below 500, a redirect or a page included.
   * Sent bare (no hint, no cookie of the user's): an end-session request without either ends no
   * session.
   */
  async #answers(endpoint: string): Promise<boolean> {
    const timeoutMs = Math.min(this.#config.timeoutMs, END_SESSION_PROBE_MS)
    let failure: Error
    try {
      const res = await fetch(endpoint, { method: 'GET', redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) })
      await res.body?.cancel()
      if (res.status < 500) return true
      failure = new ProviderFaultError(`the end-session endpoint answered HTTP ${res.status}`, { url: endpoint, status: res.status })
    } catch (err) {
      failure = new ProviderUnreachableError(endpoint, err)
    }
    this.#log.warn(
      { call: 'end_session', timeoutMs, ...describe(failure) },
      "signed out at the gateway only: the provider's end-session endpoint does not answer",
    )
    return false
  }

  /** RP-initiated logout URL, or '' when the provider has no end-session endpoint (or none is known yet). */
  endSessionUrl(idToken: string | undefined): string {
    const discovered = this.#discovered
    if (discovered?.server.end_session_endpoint === undefined) return ''
    const params: Record<string, string> = {}
    if (idToken !== undefined) params.id_token_hint = idToken
    if (this.#config.postLogoutRedirectUri !== undefined) {
      params.post_logout_redirect_uri = this.#config.postLogoutRedirectUri
      // RP-Initiated Logout 1.0 section 2: `state` is passed back on the post-logout redirect.
      // Fresh and unguessable, but kept nowhere: the gateway's landing there (the sign-out page)
      // only tells a browser whose session already ended that it is signed out, whatever state
      // comes back, or none (docs/decisions.md).
      params.state = oidc.randomState()
    }
    return oidc.buildEndSessionUrl(discovered.configuration, params).href
  }

  /**
   * RFC 7662 introspection of a Bearer token, authenticated like the grants; `undefined` when the
   * provider advertises no introspection endpoint. Throws what openid-client throws.
   */
  async introspect(token: string): Promise<oidc.IntrospectionResponse | undefined> {
    const discovered = this.#require()
    if (discovered.server.introspection_endpoint === undefined) return undefined
    return oidc.tokenIntrospection(discovered.configuration, token, { token_type_hint: 'access_token' })
  }

  /**
   * The UserInfo response for `accessToken` (OpenID Connect Core 5.3), DPoP-bound with `dpopKey`
   * when the session is. openid-client refuses an answer whose `sub` is not `subject` (Core 5.3.2:
   * it "MUST be verified to exactly match"); fetch.ts refuses one that is not JSON, so a signed or
   * encrypted UserInfo response, which this client did not register for, is a fault too. `undefined`
   * when the provider advertises no userinfo_endpoint. Throws what openid-client throws.
   */
  async userInfo(accessToken: string, subject: string, dpopKey?: DpopKey): Promise<oidc.UserInfoResponse | undefined> {
    const { configuration, server } = this.#require()
    if (server.userinfo_endpoint === undefined) return undefined
    return oidc.fetchUserInfo(configuration, accessToken, subject, await this.#dpopOptions(configuration, dpopKey))
  }

  async #dpopOptions(configuration: oidc.Configuration, key: DpopKey | undefined): Promise<oidc.DPoPOptions | undefined> {
    return key === undefined ? undefined : { DPoP: await this.#dpopNonces.handle(configuration, key) }
  }

  #checked(
    response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
    code: 'id_token_invalid' | 'provider_unavailable',
    subject: string | undefined,
    dpopKey: DpopKey | undefined,
  ): Tokens {
    // RFC 9449 5: a token requested with a proof comes back as token_type DPoP. A Bearer token
    // would work for anyone who holds it, which is what DPoP was asked to prevent.
    if (dpopKey !== undefined && response.token_type !== 'dpop') {
      throw new GatewayError('provider_unavailable', 'the OpenID provider issued an access token not bound to the DPoP key (token_type is not DPoP)')
    }
    const tokens = toTokens(response, this.#clock)
    if (dpopKey !== undefined) tokens.dpopKey = dpopKey
    if (tokens.idToken !== undefined && tokens.claims !== undefined) {
      const violation = idTokenViolation(tokens.idToken, tokens.claims, {
        clientId: this.#config.clientId,
        accessToken: tokens.accessToken,
        clockToleranceSeconds: this.#config.clockToleranceSeconds,
        ...(subject === undefined ? {} : { subject }),
      })
      if (violation !== undefined) throw new GatewayError(code, `the ID token is invalid: ${violation.message}`, { cause: violation })
    }
    return tokens
  }

  /**
   * How long discovery has been failing, once that is at least provider.notReadyPageAfterMs:
   * the provider is then said to be unreachable rather than the gateway to be starting.
   */
  get unreachableForMs(): number | undefined {
    if (this.#discovered !== undefined || this.#failingSince === undefined) return undefined
    const failing = this.#clock.now() - this.#failingSince
    return failing >= this.#config.notReadyPageAfterMs ? failing : undefined
  }

  /**
   * A discovery failure that waiting will not cure, in the words sign-ins are refused with: the
   * provider answered, and its answer rules it out. Its discovery document names another issuer
   * than provider.issuer (OpenID Connect Discovery 1.0 section 4.3: the `issuer` returned "MUST be
   * identical" to the URL discovery was made from, and openid-client refuses any other), or its
   * metadata cannot work with the gateway's settings (ProviderMetadataError: no common ID token
   * algorithm, PAR or DPoP required on one side only, no jwks_uri…). Anything else (unreachable,
   * a timeout, a 404 or 5xx, a body that is not metadata) may be a provider still starting:
   * `undefined`, and the not_ready answers of #require.
   */
  #misconfiguration(err: unknown, described: Record<string, unknown>): Misconfiguration | undefined {
    if (described.check === 'issuer') {
      const advertised = typeof described.advertisedIssuer === 'string' ? JSON.stringify(described.advertisedIssuer.slice(0, 256)) : 'none'
      return {
        reason: MISCONFIGURED_ISSUER,
        detail: `the gateway is misconfigured: the provider names another issuer, ${advertised}, than ${this.#keyPath('issuer')} ${JSON.stringify(this.#config.issuer)}; the two must be identical (OpenID Connect Discovery 1.0 section 4.3)`,
      }
    }
    if (err instanceof ProviderMetadataError) return { reason: MISCONFIGURED_METADATA, detail: `the gateway is misconfigured: ${err.message}` }
    return undefined
  }

  #require(): Discovered {
    if (this.#discovered === undefined) {
      // Not "starting" from the first attempt on: the provider's answer is what is wrong. The
      // answer repeats while discovery keeps retrying (the provider or the file may be fixed);
      // readiness stays not-ready. No Retry-After: waiting will not help.
      const misconfigured = this.#misconfigured
      if (misconfigured !== undefined) {
        throw new GatewayError('provider_misconfigured', misconfigured.detail, { extensions: { reason: misconfigured.reason } })
      }
      const unreachable = this.unreachableForMs
      // The transport failure in words (no host, port or URL): what an operator looking at the
      // page acts on before reading the log.
      const because = this.#failingBecause === undefined ? '' : `; the last attempt failed: ${this.#failingBecause}`
      if (unreachable !== undefined) {
        throw new GatewayError(
          'not_ready',
          `the OpenID provider has been unreachable for ${Math.round(unreachable / 1000)} s (its discovery keeps failing; the gateway's log names the cause)${because}`,
          { headers: { 'retry-after': '5' }, extensions: { reason: NOT_READY_PROVIDER_UNREACHABLE } },
        )
      }
      throw new GatewayError('not_ready', `the OpenID provider metadata is not loaded yet; retry shortly${because}`, {
        headers: { 'retry-after': '1' },
      })
    }
    return this.#discovered
  }
}

/** A discovery failure that is the configuration's, not the network's (OidcClient #misconfiguration). */
interface Misconfiguration {
  reason: typeof MISCONFIGURED_ISSUER | typeof MISCONFIGURED_METADATA
  /** The problem's detail: what is wrong, with no secret (issuers and metadata are public). */
  detail: string
}

/** The scopes a sign-in asks for: provider.scopes, and offline_access with provider.offlineAccess. */
export function requestedScopes(config: Pick<ProviderConfig, 'scopes' | 'offlineAccess'>): readonly string[] {
  return config.offlineAccess && !config.scopes.includes('offline_access') ? [...config.scopes, 'offline_access'] : config.scopes
}

/** provider.dpop needs a provider that accepts ES256 proofs (RFC 9449 5.1). */
function checkDpopSupport(server: oidc.ServerMetadata): void {
  const algs = server.dpop_signing_alg_values_supported
  if (!Array.isArray(algs) || !algs.includes(DPOP_ALGORITHM)) {
    throw new ProviderMetadataError(
      `provider.dpop is on, but the provider does not accept ${DPOP_ALGORITHM} DPoP proofs (dpop_signing_alg_values_supported: ${JSON.stringify(algs)})`,
    )
  }
}

/**
 * Whether authorization requests are pushed (RFC 9126), by provider.pushedAuthorizationRequests
 * and the provider's metadata; throws when the two cannot work together.
 */
export function usesPar(setting: ProviderConfig['pushedAuthorizationRequests'], server: oidc.ServerMetadata): boolean {
  const offered = server.pushed_authorization_request_endpoint !== undefined
  // RFC 9126 5: a provider that requires PAR refuses every other authorization request.
  const required = server.require_pushed_authorization_requests === true
  if (setting === 'off' && required) {
    throw new ProviderMetadataError(
      'the provider requires pushed authorization requests (require_pushed_authorization_requests), but provider.pushedAuthorizationRequests is off',
    )
  }
  if ((setting === 'required' || required) && !offered) {
    throw new ProviderMetadataError('pushed authorization requests are required, but the provider metadata has no pushed_authorization_request_endpoint')
  }
  return setting === 'required' || (setting === 'auto' && required)
}

/**
 * Whether a refused pushed authorization request (`described`: errors.ts describe) was refused for
 * its redirect_uri. RFC 9126 2.3 answers with the token endpoint's error format (RFC 6749 5.2)
 * and the codes of RFC 6749 5.2 and 4.1.2.1, or an extension's such as RFC 7591's
 * `invalid_redirect_uri`; a provider says `invalid_request` and names the redirect URI in its
 * description: RFC 9126 2.3's own example ("The redirect_uri is not valid for the given client"),
 * oidc-provider 9 ("redirect_uri did not match any of the client's registered redirect_uris"),
 * Keycloak 26 ("Invalid parameter: redirect_uri", its ParEndpoint). The description is the
 * provider's free text: only the parameter's name is looked for.
 */
export function refusesRedirectUri(described: Readonly<Record<string, unknown>>): boolean {
  if (described.error === 'invalid_redirect_uri') return true
  return described.error === 'invalid_request' && typeof described.error_description === 'string' && namesRedirectUri(described.error_description)
}

/** A key of `config`'s provider as an operator finds it in the file. */
export function providerKeyPath(config: Pick<ProviderConfig, 'name'>, key: keyof ProviderConfig): string {
  return config.name === DEFAULT_PROVIDER ? `provider.${key}` : `providers[${config.name}].${key}`
}

/** Whether a provider's words name the redirect URI (redirect_uri, redirect URI, redirect_uri_mismatch, AADSTS50011's "redirect URI"). */
export function namesRedirectUri(text: string): boolean {
  return /redirect[\s_-]?ur[il]/i.test(text)
}

/**
 * Names the check a refused ID token failed (signature, alg, iss, aud, azp, exp, iat, nonce, sub,
 * at_hash…) and openid-client's words for it; never the token or its claims.
 */
function logIdTokenRefusal(log: Pick<FastifyBaseLogger, 'warn'>, err: unknown, grant: 'sign-in' | 'refresh', fields: Record<string, unknown> = {}): void {
  const reasons: string[] = []
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    // JSON.parse's messages quote the input they choke on: a piece of the token.
    if (e instanceof SyntaxError) break
    if (!reasons.some((r) => r.endsWith(e.message))) reasons.push(e.message)
  }
  log.warn(
    { call: grant === 'sign-in' ? 'token' : 'refresh', check: failedIdTokenCheck(err) ?? 'other', reason: reasons.join(': '), grant, ...fields },
    'ID token refused',
  )
}

function toTokens(response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers, clock: Clock): Tokens {
  const expiresIn = response.expiresIn()
  return {
    accessToken: response.access_token,
    expiresAt: expiresIn === undefined ? undefined : Math.floor(clock.now() / 1000) + expiresIn,
    refreshToken: response.refresh_token,
    idToken: response.id_token,
    claims: response.claims(),
  }
}
