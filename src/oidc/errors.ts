import * as oidc from 'openid-client'
import { GatewayError, type ProblemCode } from '../errors.js'

// openid-client throws three families of errors; the contract needs to tell apart "the user's
// grant is bad" (403/409: nothing to retry) from "the provider is broken" (502: the user did
// nothing wrong). Everything that is neither an HTTP error answer nor a transport failure is a
// response that failed validation.

/** Status of the provider's HTTP answer when an error carries one. */
function providerStatus(err: unknown): number | undefined {
  if (err instanceof oidc.ResponseBodyError) return err.status
  if (err instanceof oidc.ClientError && err.cause instanceof Response) return err.cause.status
  return undefined
}

/** True when the provider could not be reached, timed out, or answered with a server error. */
export function isProviderFault(err: unknown): boolean {
  const status = providerStatus(err)
  if (status !== undefined) return status >= 500
  if (!(err instanceof oidc.ClientError)) return true
  switch (err.code) {
    case 'OAUTH_TIMEOUT':
    case 'OAUTH_ABORT':
    case 'OAUTH_RESPONSE_IS_NOT_JSON':
    case 'OAUTH_PARSE_ERROR':
    case undefined: // "something went wrong": a network error from fetch
      return true
    default:
      return false
  }
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
  if (providerStatus(err) !== undefined) {
    return new GatewayError(refusal, `the OpenID provider refused the ${action}`, { cause: err })
  }
  return new GatewayError(invalidResponse, `the OpenID provider's ${action} response failed validation`, { cause: err })
}
