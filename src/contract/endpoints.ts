// The gateway's own URL space. Everything at and below SIGN_IN_PATH belongs to the gateway and is
// never proxied; cookies, the callback URL registered at the provider, the router and the
// redirects the proxy sends all derive from these. ENDPOINTS is the one table of the endpoints:
// the routes register its paths, and the metrics, the sign-in rate limit, the reserved paths'
// 405s and the configuration's envoy.pathPrefix check read it, so none keeps a list of its own.

export const SIGN_IN_PATH = '/api/v1/openid'
export const CALLBACK_PATH = `${SIGN_IN_PATH}/callback`

export type EndpointMethod = 'GET' | 'POST' | 'DELETE'

export interface Endpoint {
  /** The route as registered (a router pattern). */
  readonly path: string
  /** The methods its routes accept; HEAD comes with GET (the router adds it). */
  readonly methods: readonly EndpointMethod[]
  /** Its `endpoint` label in openid_gateway_endpoint_outcomes_total; undefined: not counted. */
  readonly metric: string | undefined
  /** Counted against rateLimit.signIn: it costs something per request (a transaction, a token request). */
  readonly signInRateLimit: boolean
  /**
   * At or below SIGN_IN_PATH: never proxied, and another method there is a 405 naming `methods`
   * (routes/reserved.ts). Otherwise the path is an upstream's when the gateway does not serve it.
   */
  readonly reserved: boolean
}

export const ENDPOINTS = {
  redirect: { path: `${SIGN_IN_PATH}/redirect`, methods: ['GET'], metric: 'redirect', signInRateLimit: true, reserved: true },
  // POST: the form post response mode (provider.responseMode: form_post, routes/form-post.ts).
  callback: { path: CALLBACK_PATH, methods: ['GET', 'POST'], metric: 'callback', signInRateLimit: true, reserved: true },
  // Each provider's own callback (several providers) is the same step of a sign-in: in the budget.
  providerCallback: { path: `${CALLBACK_PATH}/:provider`, methods: ['GET', 'POST'], metric: 'callback', signInRateLimit: true, reserved: true },
  refresh: { path: `${SIGN_IN_PATH}/refresh`, methods: ['GET'], metric: 'refresh', signInRateLimit: true, reserved: true },
  // Never limited: signing out must always work.
  logout: { path: `${SIGN_IN_PATH}/logout`, methods: ['DELETE'], metric: 'logout', signInRateLimit: false, reserved: true },
  /**
   * Sign-out for people: GET is a page (signed out, or a sign-out button; a good
   * `provider.postLogoutRedirectUri`), POST is its form. The contract's DELETE logout is for scripts.
   */
  signOut: { path: `${SIGN_IN_PATH}/sign-out`, methods: ['POST', 'GET'], metric: 'sign_out', signInRateLimit: false, reserved: true },
  /** OpenID Connect Back-Channel Logout: the URL to register at the provider (backchannel_logout_uri). */
  backchannelLogout: { path: `${SIGN_IN_PATH}/backchannel-logout`, methods: ['POST'], metric: 'backchannel_logout', signInRateLimit: false, reserved: true },
  /** Shared Signals push delivery (RFC 8935): the endpoint_url the gateway registers in its streams (provider ssf). */
  ssfEvents: { path: `${SIGN_IN_PATH}/ssf/events`, methods: ['POST'], metric: 'ssf_events', signInRateLimit: false, reserved: true },
  /** Forward-auth: asked by an ingress, a program, even when the browser's headers come along. */
  forwardAuth: { path: `${SIGN_IN_PATH}/auth`, methods: ['GET'], metric: 'forward_auth', signInRateLimit: false, reserved: true },
  /**
   * Several cookie domains (cookies.domains): one sign-in handed to a host of another domain, in
   * three steps on one path (routes/handoff.ts). Not one of the contract's four sign-in endpoints;
   * counted against the sign-in budget, each step costing a seal or a redirect.
   */
  handoff: { path: `${SIGN_IN_PATH}/handoff`, methods: ['GET'], metric: 'handoff', signInRateLimit: true, reserved: true },
  /** Who the request is signed in as, as JSON (oauth2-proxy's /oauth2/userinfo); 401 without a session or Bearer token. */
  userinfo: { path: `${SIGN_IN_PATH}/userinfo`, methods: ['GET'], metric: 'userinfo', signInRateLimit: false, reserved: true },
  /**
   * The public keys of identity assertions (assertions.signingKeys), where JWT verifiers look;
   * served only with signing keys, so the path is an upstream's otherwise.
   */
  assertionJwks: { path: '/.well-known/jwks.json', methods: ['GET'], metric: undefined, signInRateLimit: false, reserved: false },
} as const satisfies Record<string, Endpoint>

/** The table's rows, for those that read every endpoint. */
export const ENDPOINT_LIST: readonly Endpoint[] = Object.values(ENDPOINTS)

/**
 * The redirect URI path of a provider: CALLBACK_PATH with a single provider, and one of its own
 * per provider when there are several (RFC 9700 4.4.2: distinct redirect URIs are a mix-up
 * defence). Provider names are path-safe (options/schema.ts).
 */
export function callbackPath(provider: string, several: boolean, redirectPath?: string): string {
  if (redirectPath !== undefined) return redirectPath
  return several ? `${CALLBACK_PATH}/${provider}` : CALLBACK_PATH
}

/** True for `base` itself and every path below it (on a segment boundary). */
export function isAtOrBelow(path: string, base: string): boolean {
  return path.startsWith(base) && (path.length === base.length || path.charCodeAt(base.length) === 0x2f)
}

/**
 * The redirect_uri the gateway sends for a provider whose callback is `callback` (callbackPath):
 * what the operator registers there, exactly (OAuth 2.0 RFC 6749 3.1.2, compared as a string).
 */
export function redirectUri(publicUrl: string, callback: string): string {
  return publicUrl + callback
}
export const FORWARD_AUTH_PATH = ENDPOINTS.forwardAuth.path

/**
 * Where a check dialect is asked (checks/dialects.ts): an endpoint of the table, with nothing, `/`
 * or `?` after its path, or a configured prefix followed by `/` and the path checked. A request
 * to one is routed on its raw target (access/checker.ts isCheckRoute).
 */
export interface CheckRoute {
  readonly path: string
  readonly match: 'endpoint' | 'prefix'
}
export const BACKCHANNEL_LOGOUT_PATH = ENDPOINTS.backchannelLogout.path
export const HANDOFF_PATH = ENDPOINTS.handoff.path
export const SIGN_OUT_PATH = ENDPOINTS.signOut.path
export const SSF_EVENTS_PATH = ENDPOINTS.ssfEvents.path
/**
 * The sign-out page's query when the session ended at the gateway only: the provider could not be
 * told (it is down), so the page says its own sign-in there may still be active.
 */
export const PROVIDER_NOT_TOLD = 'provider=unreachable'
export const ASSERTION_JWKS_PATH = ENDPOINTS.assertionJwks.path

/**
 * The first segment below SIGN_IN_PATH of each endpoint the gateway serves there: another route
 * under one of them (envoy.pathPrefix) would shadow or collide with the endpoint.
 */
export const ENDPOINT_SEGMENTS: readonly string[] = [
  ...new Set(ENDPOINT_LIST.filter((e) => e.reserved).map((e) => e.path.slice(SIGN_IN_PATH.length + 1).split('/')[0] ?? '')),
]

/** True for SIGN_IN_PATH itself and every path below it (on a segment boundary). */
export function isGatewayPath(path: string): boolean {
  return path.startsWith(SIGN_IN_PATH) && (path.length === SIGN_IN_PATH.length || path.charCodeAt(SIGN_IN_PATH.length) === 0x2f)
}

/** The redirect endpoint that starts a sign-in and brings the user back to `target` (validated). */
export function signInPath(target?: string): string {
  const start = ENDPOINTS.redirect.path
  return target === undefined ? start : `${start}?redirectAfter=${encodeURIComponent(target)}`
}

/** The refresh endpoint in its redirecting form: renew the access token, then back to `target`. */
export function refreshPath(target: string): string {
  return `${ENDPOINTS.refresh.path}?redirectAfter=${encodeURIComponent(target)}`
}
