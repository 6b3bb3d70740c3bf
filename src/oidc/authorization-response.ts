// Checks of the authorization response (the callback's query) made before its code is sent
// anywhere: the OAuth mix-up defences of RFC 9700 (OAuth 2.0 Security BCP) section 4.4.
//
// A mix-up: the user starts a sign-in with provider B (hostile, or compromised); B sends the
// browser on to the honest provider A, which returns A's code to the gateway. A client that trusts
// its transaction alone redeems A's code at B's token endpoint, and B then owns the code (and can
// redeem it in a sign-in of its own, as the victim). Two defences, both applied:
//
// - Distinct redirect URIs (RFC 9700 4.4.2, "per-AS redirect URIs"): each provider has its own
//   callback path when several are configured, and a response is accepted only on the path of
//   the provider its transaction was started with. A's response to B's transaction arrives on A's
//   path (A only redirects to URIs registered with it) and is refused.
// - Issuer identification (RFC 9207 section 2.4): an `iss` parameter present in the response must
//   equal the transaction's provider's issuer (simple string comparison); one that is absent is
//   refused when the provider advertises `authorization_response_iss_parameter_supported`, or the
//   FAPI 2.0 profile requires it (FAPI 2.0 Security Profile 5.3.2.2).
//
// - The response mode (OAuth 2.0 Multiple Response Type Encoding Practices section 2.1, OAuth 2.0
//   Form Post Response Mode section 2): a response must arrive the way the sign-in asked for it, a
//   redirect's query or a form POST. A form_post provider never puts the code in a URL, so one that
//   arrives there was not sent by it in answer to this request (a link crafted to replay a leaked
//   code, or a provider that ignored response_mode); a query-mode sign-in never receives a POST.
//
// A refusal here is `authorization_response_invalid`: no code has been exchanged, so neither
// code_invalid nor id_token_invalid would tell the operator what happened.

/** The rule a refused authorization response broke, as the log names it. */
export type AuthorizationResponseRule = 'rfc9700-redirect-uri-mismatch' | 'rfc9207-iss-mismatch' | 'rfc9207-iss-missing' | 'response-mode-mismatch'

export interface AuthorizationResponseViolation {
  rule: AuthorizationResponseRule
  message: string
}

export interface ExpectedResponse {
  /** The path the transaction's provider registered as its redirect URI. */
  callbackPath: string
  /** The transaction's provider's issuer, as discovered. */
  issuer: string
  /** RFC 9207 2.4: the provider advertises the `iss` parameter, or the profile requires it. */
  issRequired: boolean
}

/**
 * The first mix-up rule the callback at `path` with the query `params` breaks, or undefined.
 * The redirect URI comes first: a response on another provider's path is refused whatever it says.
 */
export function authorizationResponseViolation(path: string, params: URLSearchParams, expected: ExpectedResponse): AuthorizationResponseViolation | undefined {
  if (path !== expected.callbackPath) {
    return {
      rule: 'rfc9700-redirect-uri-mismatch',
      message: 'the authorization response arrived at the callback of another provider than the one the sign-in was started with',
    }
  }
  const iss = params.getAll('iss')
  if (iss.length > 1) return { rule: 'rfc9207-iss-mismatch', message: 'the authorization response carries iss more than once' }
  const value = iss[0]
  if (value === undefined) {
    return expected.issRequired
      ? { rule: 'rfc9207-iss-missing', message: 'the authorization response carries no iss, which this provider always sends' }
      : undefined
  }
  if (value !== expected.issuer)
    return { rule: 'rfc9207-iss-mismatch', message: "the authorization response's iss is not the issuer the sign-in was started with" }
  return undefined
}

/** How an authorization response travels: a redirect's query (GET), or a form POST. */
export type ResponseMode = 'query' | 'form_post'

/** The response-mode rule: `received` (the callback's method) must be the mode the sign-in asked for. */
export function responseModeViolation(received: ResponseMode, expected: ResponseMode): AuthorizationResponseViolation | undefined {
  if (received === expected) return undefined
  return {
    rule: 'response-mode-mismatch',
    message:
      expected === 'form_post'
        ? 'the sign-in asked for a form post response, but the response arrived in the URL'
        : 'the sign-in asked for the response in the URL, but it arrived as a form post',
  }
}
