// Every error the gateway answers with itself is an RFC 9457 problem with a stable `code`.
// Modules throw these; the error handler in app.ts is the only place that renders them.

export type ProblemCode =
  | 'bad_request'
  | 'code_missing'
  | 'state_mismatch'
  | 'code_invalid'
  | 'id_token_invalid'
  | 'authorization_response_invalid'
  | 'refresh_token_missing'
  | 'refresh_token_invalid'
  | 'unauthenticated'
  | 'forbidden'
  | 'token_exchange_refused'
  | 'insufficient_user_authentication'
  | 'step_up_failed'
  | 'not_found'
  | 'method_not_allowed'
  | 'rate_limited'
  | 'session_too_large'
  | 'provider_unavailable'
  | 'provider_rejected_client'
  | 'provider_rejected_redirect_uri'
  | 'upstream_unavailable'
  | 'not_ready'
  | 'provider_misconfigured'
  | 'session_store_unavailable'
  | 'decision_unavailable'
  | 'upstream_timeout'
  | 'internal_error'

const TITLES: Record<ProblemCode, [status: number, title: string]> = {
  bad_request: [400, 'Bad request'],
  code_missing: [400, 'Authorization code missing'],
  state_mismatch: [403, 'Sign-in state mismatch'],
  code_invalid: [403, 'Authorization code rejected'],
  id_token_invalid: [403, 'ID token invalid'],
  authorization_response_invalid: [403, 'Authorization response invalid'],
  refresh_token_missing: [400, 'No refresh token'],
  refresh_token_invalid: [409, 'Refresh token rejected'],
  unauthenticated: [401, 'Not signed in'],
  forbidden: [403, 'Forbidden'],
  // RFC 8693 2.2.2: the provider refused to exchange the user's token for the upstream's (an
  // error response such as invalid_target); the user is signed in, the upstream is out of reach.
  token_exchange_refused: [403, 'Token exchange refused'],
  insufficient_user_authentication: [401, 'Stronger authentication required'],
  step_up_failed: [403, 'Step-up authentication failed'],
  not_found: [404, 'Not found'],
  method_not_allowed: [405, 'Method not allowed'],
  rate_limited: [429, 'Too many requests'],
  session_too_large: [502, 'Session too large for cookies'],
  provider_unavailable: [502, 'OpenID provider unavailable'],
  provider_rejected_client: [502, "OpenID provider rejected the gateway's client"],
  // RFC 9126 2.3: a pushed authorization request refused for its redirect_uri (invalid_request
  // about it, or RFC 7591's invalid_redirect_uri): the URI is not registered for the client.
  provider_rejected_redirect_uri: [502, "OpenID provider rejected the gateway's redirect URI"],
  upstream_unavailable: [502, 'Upstream unavailable'],
  not_ready: [503, 'Not ready'],
  // Discovery answered, and its answer rules the provider out (oidc/client.ts #require): the
  // gateway is not ready, and waiting will not make it so.
  provider_misconfigured: [503, 'Gateway misconfigured for its OpenID provider'],
  session_store_unavailable: [503, 'Session store unavailable'],
  decision_unavailable: [503, 'Decision unavailable'],
  upstream_timeout: [504, 'Upstream timeout'],
  internal_error: [500, 'Internal error'],
}

/**
 * The `reason` extension of a `not_ready` problem once the provider's discovery has failed for
 * provider.notReadyPageAfterMs: the provider is unreachable, the gateway is not merely starting.
 */
export const NOT_READY_PROVIDER_UNREACHABLE = 'provider_unreachable'

/**
 * The `reason` extension of a `provider_misconfigured` problem: the provider's discovery document
 * names another issuer than the configured one (OpenID Connect Discovery 1.0 section 4.3), or
 * its metadata rules out working with it (oidc/errors.ts ProviderMetadataError).
 */
export const MISCONFIGURED_ISSUER = 'issuer_mismatch'
export const MISCONFIGURED_METADATA = 'provider_metadata'

/**
 * The `reason` extension of an `id_token_invalid` problem whose ID token failed on `iat`, `exp`
 * or `nbf`: the provider's clock and the gateway's disagree (oidc/clock-skew.ts).
 */
export const ID_TOKEN_CLOCK_SKEW = 'clock_skew'

export interface Problem {
  type: string
  title: string
  status: number
  detail: string
  code: ProblemCode
  [extension: string]: unknown
}

export class GatewayError extends Error {
  readonly code: ProblemCode
  readonly status: number
  readonly title: string
  /** Extra members of the problem body (RFC 9457 extensions), e.g. `signInUrl`. */
  readonly extensions: Record<string, unknown>
  /** Response headers that belong to this error, e.g. `Allow` or `WWW-Authenticate`. */
  readonly headers: Record<string, string>
  /**
   * Its cause is already in the log, in the one line that names it (a provider's refusal, logged
   * where the call failed): the error handler adds no second line.
   */
  readonly logged: boolean

  constructor(
    code: ProblemCode,
    detail: string,
    options: { cause?: unknown; extensions?: Record<string, unknown>; headers?: Record<string, string>; logged?: boolean } = {},
  ) {
    // A GatewayError is an answer, not a fault: its stack is never logged or shown (the error
    // handler logs the code, message and cause), and capturing one was a fifth of the CPU of an
    // unauthenticated 401.
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      super(detail, { cause: options.cause })
    } finally {
      Error.stackTraceLimit = stackTraceLimit
    }
    const [status, title] = TITLES[code]
    this.name = 'GatewayError'
    this.code = code
    this.status = status
    this.title = title
    this.extensions = options.extensions ?? {}
    this.headers = options.headers ?? {}
    this.logged = options.logged ?? false
  }

  toProblem(): Problem {
    return {
      ...this.extensions,
      type: `urn:openid-gateway:problem:${this.code}`,
      title: this.title,
      status: this.status,
      detail: this.message,
      code: this.code,
    }
  }
}
