import * as oidc from 'openid-client'
import { GatewayError, type ProblemCode } from '../contract/errors.js'
import { ProviderFaultError } from './fetch.js'

// openid-client throws several families of errors; the contract needs to tell apart "the
// user's grant is bad" (403/409: nothing to retry) from "the provider is broken" (502: the user
// did nothing wrong). providerFetch has already turned every redirect, server error and non-JSON
// success into a ProviderFaultError, so what remains is: a 4xx refusal, a transport failure, or
// a response (in practice: an ID token) that failed validation.

/** The provider's metadata rules out working with it; discovery is retried, the log says why. */
export class ProviderMetadataError extends Error {
  override readonly name = 'ProviderMetadataError'
}

/** Status of the provider's HTTP answer when an error carries one. */
function providerStatus(err: unknown): number | undefined {
  if (err instanceof oidc.ResponseBodyError || err instanceof oidc.WWWAuthenticateChallengeError) return err.status
  if (err instanceof oidc.ClientError && err.cause instanceof Response) return err.cause.status
  return undefined
}

/** True when the provider could not be reached, timed out, or did not answer like a provider. */
export function isProviderFault(err: unknown): boolean {
  const status = providerStatus(err)
  if (status !== undefined) return !(status >= 400 && status < 500)
  // fetch failures surface as TypeError ("fetch failed"), rethrown as they are by openid-client.
  if (err instanceof TypeError) return true
  if (!(err instanceof oidc.ClientError)) return false
  if (err.cause instanceof ProviderFaultError) return true
  return err.code === 'OAUTH_TIMEOUT' || err.code === 'OAUTH_ABORT' || err.code === undefined
}

/** An error of a grant that is neither the provider's refusal nor its fault: its response failed validation. */
export function isValidationFailure(err: unknown): boolean {
  return !(err instanceof GatewayError) && !isProviderFault(err) && providerStatus(err) === undefined
}

/** Maps an error of a grant to the contract's problem, given what a refusal means for this grant. */
export function grantProblem(
  err: unknown,
  refusal: ProblemCode,
  invalidResponse: ProblemCode,
  action: string,
): GatewayError {
  if (err instanceof GatewayError) return err
  if (isProviderFault(err)) {
    return new GatewayError('provider_unavailable', `the OpenID provider failed during ${action}`, { cause: err })
  }
  if (!isValidationFailure(err)) {
    return new GatewayError(refusal, `the OpenID provider refused the ${action}`, { cause: err })
  }
  return new GatewayError(invalidResponse, `the OpenID provider's ${action} response failed validation`, { cause: err })
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
