import * as oidc from 'openid-client'
import { GatewayError, type ProblemCode } from '../contract/errors.js'
import { loggableUrl, oauthErrorOf, ProviderFaultError, ProviderUnreachableError } from './fetch.js'

// openid-client throws several families of errors; the contract needs to tell apart "the
// user's grant is bad" (403/409: nothing to retry) from "the provider is broken" (502: the user
// did nothing wrong) and from "the gateway's own client registration is wrong" (502
// provider_rejected_client: only the operator can fix it). providerFetch has already turned every
// redirect, server error and non-JSON success into a ProviderFaultError and every transport
// failure into a ProviderUnreachableError, so what remains is: a 4xx refusal, or a response (in
// practice: an ID token) that failed validation.
//
// RFC 6749 5.2: `invalid_client` is a failed client authentication (wrong secret or key, unknown
// client), `unauthorized_client` a client that may not use this grant type: both are about the
// gateway's registration at the provider, never about the user's code or refresh token.

/** The provider's metadata rules out working with it; discovery is retried, the log says why. */
export class ProviderMetadataError extends Error {
  override readonly name = 'ProviderMetadataError'
}

/** The provider's errors that mean its registration of the gateway is wrong (RFC 6749 5.2). */
const CLIENT_ERRORS: ReadonlySet<string> = new Set(['invalid_client', 'unauthorized_client'])

/** The provider's description is its own text: kept, but cut to this length in a log line. */
const DESCRIPTION_CHARS = 256

/** Status of the provider's HTTP answer when an error carries one. */
function providerStatus(err: unknown): number | undefined {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.WWWAuthenticateChallengeError) return err.status
  if (err instanceof oidc.ClientError && err.cause instanceof Response) return err.cause.status
  return undefined
}

/** The provider's OAuth `error` code, from the body or from a WWW-Authenticate challenge. */
function providerErrorCode(err: unknown): { error: string; description: string | undefined } | undefined {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.AuthorizationResponseError) {
    return { error: err.error, description: err.error_description }
  }
  if (err instanceof oidc.WWWAuthenticateChallengeError) {
    const parameters = err.cause[0]?.parameters
    if (parameters?.error !== undefined) return { error: parameters.error, description: parameters.error_description }
    return oauthErrorOf(err.response)
  }
  return undefined
}

/** True when the provider could not be reached, timed out, or did not answer like a provider. */
export function isProviderFault(err: unknown): boolean {
  const status = providerStatus(err)
  if (status !== undefined) return !(status >= 400 && status < 500)
  // fetch failures surface as TypeError (ProviderUnreachableError, or fetch's own), rethrown as
  // they are by openid-client.
  if (err instanceof TypeError) return true
  if (!(err instanceof oidc.ClientError)) return false
  if (err.cause instanceof ProviderFaultError) return true
  return err.code === 'OAUTH_TIMEOUT' || err.code === 'OAUTH_ABORT' || err.code === undefined
}

/** An error of a grant that is neither the provider's refusal nor its fault: its response failed validation. */
export function isValidationFailure(err: unknown): boolean {
  return !(err instanceof GatewayError) && !isProviderFault(err) && providerStatus(err) === undefined
}

/**
 * Maps an error of a grant to the contract's problem, given what a refusal means for this grant.
 * `logged`: the caller has logged the cause (describe), so the error handler adds no line.
 */
export function grantProblem(err: unknown, refusal: ProblemCode, invalidResponse: ProblemCode, action: string, logged = false): GatewayError {
  if (err instanceof GatewayError) return err
  if (isProviderFault(err)) {
    return new GatewayError('provider_unavailable', `the OpenID provider failed during ${action}`, { cause: err, logged })
  }
  if (!isValidationFailure(err)) {
    const code = providerErrorCode(err)?.error
    if (code !== undefined && CLIENT_ERRORS.has(code)) {
      return new GatewayError(
        'provider_rejected_client',
        `the OpenID provider refused the gateway's client during ${action} (${code}): its provider settings are wrong`,
        { cause: err, logged },
      )
    }
    return new GatewayError(refusal, `the OpenID provider refused the ${action}`, { cause: err, logged })
  }
  return new GatewayError(invalidResponse, `the OpenID provider's ${action} response failed validation`, { cause: err, logged })
}

/** The URL of a provider call an error is about, without query string or userinfo. */
function urlOf(err: Error): string | undefined {
  if (err instanceof ProviderUnreachableError || err instanceof ProviderFaultError) return err.url
  const response =
    err instanceof oidc.ResponseBodyError || err instanceof oidc.WWWAuthenticateChallengeError
      ? err.response
      : err.cause instanceof Response
        ? err.cause
        : undefined
  return response === undefined || response.url === '' ? undefined : loggableUrl(response.url)
}

/**
 * What a log line says of a failed provider call, flat so it can be queried: `err` (name and
 * message), and when known the call's `url` (no query string, no userinfo), the HTTP `status`,
 * the provider's `error` and `error_description`, the `check` that failed (openid-client's code,
 * or the attribute it compared), the transport `cause` (ECONNREFUSED, timeout, a TLS code) and
 * its `meaning` in words, and
 * for an issuer mismatch both issuers. Never a response body, token, code or secret.
 */
export function describe(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { err: { message: String(err) } }
  const out: Record<string, unknown> = { err: { name: err.name, message: err.message } }
  // The outermost answer wins: a GatewayError wraps openid-client's, which wraps ours.
  const set = (key: string, value: unknown): void => {
    if (value !== undefined && out[key] === undefined) out[key] = value
  }
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    set('url', urlOf(e))
    set('status', e instanceof ProviderFaultError ? e.status : providerStatus(e))
    const said = providerErrorCode(e)
    set('error', said?.error)
    set('error_description', said?.description?.slice(0, DESCRIPTION_CHARS))
    if (e instanceof ProviderUnreachableError) {
      set('cause', e.reason)
      set('meaning', e.words)
    }
    if (e instanceof oidc.ClientError && e.code !== undefined) {
      const compared = comparison(e.cause)
      set('check', compared?.attribute ?? e.code)
      if (compared?.attribute === 'issuer') {
        set('expectedIssuer', compared.expected)
        set('advertisedIssuer', compared.advertised)
      }
    }
  }
  if (out.cause === undefined && err.cause instanceof Error && !(err.cause instanceof Response)) out.cause = `${err.cause.name}: ${err.cause.message}`
  return out
}

/** The attribute an openid-client comparison failed on (its `cause`), and the values compared. */
function comparison(cause: unknown): { attribute: string; expected: unknown; advertised: unknown } | undefined {
  if (typeof cause !== 'object' || cause === null || !('attribute' in cause) || typeof cause.attribute !== 'string') return undefined
  const body = 'body' in cause && typeof cause.body === 'object' && cause.body !== null ? (cause.body as Record<string, unknown>) : {}
  return { attribute: cause.attribute, expected: 'expected' in cause ? cause.expected : undefined, advertised: body[cause.attribute] }
}
