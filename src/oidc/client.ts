import * as oidc from 'openid-client'
import type { FastifyBaseLogger } from 'fastify'
import type { ProviderConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { grantProblem } from './errors.js'
import { providerFetch } from './fetch.js'
import { idTokenViolation } from './id-token-rules.js'

export interface Tokens {
  accessToken: string
  /** Epoch seconds; `undefined` when the provider said nothing about the lifetime. */
  expiresAt: number | undefined
  refreshToken: string | undefined
  idToken: string | undefined
  /** Validated ID token claims, when an ID token came with the response. */
  claims: oidc.IDToken | undefined
}

export interface AuthorizationChecks {
  state: string
  nonce: string
  codeVerifier: string
}

const RETRY_MIN_MS = 500
const RETRY_MAX_MS = 30_000

/**
 * One OpenID provider, as seen by the gateway: discovery (retried in the background until it
 * succeeds), authorization URL, code and refresh grants, revocation and end-session URL.
 * An instance per provider, passed to whoever needs it.
 */
export class OidcClient {
  readonly #config: ProviderConfig
  readonly #redirectUri: string
  readonly #log: FastifyBaseLogger
  #configuration: oidc.Configuration | undefined
  #stopped = false
  #retryTimer: NodeJS.Timeout | undefined

  constructor(config: ProviderConfig, publicUrl: string, log: FastifyBaseLogger) {
    this.#config = config
    this.#redirectUri = `${publicUrl}/api/v1/openid/callback`
    this.#log = log
  }

  get redirectUri(): string {
    return this.#redirectUri
  }

  get ready(): boolean {
    return this.#configuration !== undefined
  }

  /** Server metadata after discovery, e.g. for the Bearer verifier's JWKS URI. */
  get metadata(): oidc.ServerMetadata | undefined {
    return this.#configuration?.serverMetadata()
  }

  /** Discovers the provider once; throws when it cannot. */
  async discover(): Promise<void> {
    const { issuer, clientId, clientSecret, clientAuthMethod, timeoutMs, allowInsecureHttp } = this.#config
    const auth = clientAuthMethod === 'client_secret_post' ? oidc.ClientSecretPost(clientSecret) : oidc.ClientSecretBasic(clientSecret)
    const metadata: Partial<oidc.ClientMetadata> = { [oidc.clockTolerance]: this.#config.clockToleranceSeconds }
    const configuration = await oidc.discovery(new URL(issuer), clientId, metadata, auth, {
      timeout: timeoutMs / 1000,
      [oidc.customFetch]: providerFetch,
      ...(allowInsecureHttp ? { execute: [oidc.allowInsecureRequests] } : {}),
    })
    configuration.timeout = timeoutMs / 1000
    configuration[oidc.customFetch] = providerFetch
    // OpenID Connect Core 3.1.3.7 step 6 lets a client skip the ID token signature when it came
    // over TLS; a gateway that other services trust does not take that shortcut.
    oidc.enableNonRepudiationChecks(configuration)
    this.#configuration = configuration
  }

  /** Keeps discovering with capped exponential backoff until it succeeds or `stop()` is called. */
  start(): Promise<void> {
    return new Promise((resolve) => {
      const attempt = (delay: number): void => {
        this.discover().then(
          () => {
            this.#log.info({ issuer: this.#config.issuer }, 'provider metadata loaded')
            resolve()
          },
          (err: unknown) => {
            if (this.#stopped) return resolve()
            this.#log.warn({ issuer: this.#config.issuer, err: describe(err), retryInMs: delay }, 'provider discovery failed')
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

  authorizationUrl(checks: AuthorizationChecks & { codeChallenge: string }): string {
    const scope = this.#config.scopes.join(' ')
    const params: Record<string, string> = {
      redirect_uri: this.#redirectUri,
      scope,
      state: checks.state,
      nonce: checks.nonce,
      code_challenge: checks.codeChallenge,
      code_challenge_method: 'S256',
    }
    // OpenID Connect Core 11: a request for offline_access must carry prompt=consent.
    if (this.#config.scopes.includes('offline_access')) params.prompt = 'consent'
    return oidc.buildAuthorizationUrl(this.#require(), params).href
  }

  /** Authorization code grant; `callbackUrl` must carry the public origin, never the Host header. */
  async exchangeCode(callbackUrl: URL, checks: AuthorizationChecks): Promise<Tokens> {
    try {
      const response = await oidc.authorizationCodeGrant(this.#require(), callbackUrl, {
        pkceCodeVerifier: checks.codeVerifier,
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        idTokenExpected: true,
      })
      return this.#checked(response, 'id_token_invalid')
    } catch (err) {
      if (err instanceof oidc.AuthorizationResponseError) {
        // The provider answered the authorization request with an error instead of a code.
        throw new GatewayError('code_invalid', 'the OpenID provider returned an error instead of a code', { cause: err })
      }
      throw grantProblem(err, 'code_invalid', 'id_token_invalid', 'code exchange')
    }
  }

  /** Refresh grant; a refreshed ID token must be about `subject`, the session's user. */
  async refresh(refreshToken: string, subject: string): Promise<Tokens> {
    try {
      // A provider that breaks ID token rules on refresh is broken, not the user's grant: 502.
      return this.#checked(await oidc.refreshTokenGrant(this.#require(), refreshToken), 'provider_unavailable', subject)
    } catch (err) {
      throw grantProblem(err, 'refresh_token_invalid', 'provider_unavailable', 'refresh')
    }
  }

  /** RFC 7009 revocation, best effort: returns false instead of throwing. */
  async revoke(refreshToken: string): Promise<boolean> {
    const configuration = this.#configuration
    if (configuration?.serverMetadata().revocation_endpoint === undefined) return false
    try {
      await oidc.tokenRevocation(configuration, refreshToken, { token_type_hint: 'refresh_token' })
      return true
    } catch (err) {
      this.#log.warn({ err: describe(err) }, 'refresh token revocation failed')
      return false
    }
  }

  /** RP-initiated logout URL, or '' when the provider has no end-session endpoint. */
  endSessionUrl(idToken: string | undefined): string {
    const configuration = this.#configuration
    if (configuration?.serverMetadata().end_session_endpoint === undefined) return ''
    const params: Record<string, string> = {}
    if (idToken !== undefined) params.id_token_hint = idToken
    if (this.#config.postLogoutRedirectUri !== undefined) params.post_logout_redirect_uri = this.#config.postLogoutRedirectUri
    return oidc.buildEndSessionUrl(configuration, params).href
  }

  #checked(
    response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers,
    code: 'id_token_invalid' | 'provider_unavailable',
    subject?: string,
  ): Tokens {
    const tokens = toTokens(response)
    if (tokens.idToken !== undefined && tokens.claims !== undefined) {
      const violation = idTokenViolation(tokens.idToken, tokens.claims, {
        clientId: this.#config.clientId,
        accessToken: tokens.accessToken,
        clockToleranceSeconds: this.#config.clockToleranceSeconds,
        ...(subject === undefined ? {} : { subject }),
      })
      if (violation !== undefined) throw new GatewayError(code, `the ID token is invalid: ${violation}`)
    }
    return tokens
  }

  #require(): oidc.Configuration {
    if (this.#configuration === undefined) {
      throw new GatewayError('not_ready', 'the OpenID provider metadata is not loaded yet; retry shortly', {
        headers: { 'retry-after': '1' },
      })
    }
    return this.#configuration
  }
}

function toTokens(response: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers): Tokens {
  const expiresIn = response.expiresIn()
  return {
    accessToken: response.access_token,
    expiresAt: expiresIn === undefined ? undefined : Math.floor(Date.now() / 1000) + expiresIn,
    refreshToken: response.refresh_token,
    idToken: response.id_token,
    claims: response.claims(),
  }
}

/** A log-safe description of a provider error: names and codes, never response bodies or tokens. */
export function describe(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) }
  const out: Record<string, unknown> = { name: err.name, message: err.message }
  if (err instanceof oidc.ClientError && err.code !== undefined) out.code = err.code
  if (err instanceof oidc.ResponseBodyError) {
    out.error = err.error
    out.status = err.status
  }
  if (err.cause instanceof Error) out.cause = `${err.cause.name}: ${err.cause.message}`
  return out
}
