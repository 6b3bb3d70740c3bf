// The gateway's own URL space. Everything at and below SIGN_IN_PATH belongs to the gateway and is
// never proxied; cookies, the callback URL registered at the provider, the router and the
// redirects the proxy sends all derive from these.

export const SIGN_IN_PATH = '/api/v1/openid'
export const CALLBACK_PATH = `${SIGN_IN_PATH}/callback`

/**
 * The redirect URI path of a provider: CALLBACK_PATH with a single provider, and one of its own
 * per provider when there are several (RFC 9700 4.4.2: distinct redirect URIs are a mix-up
 * defence). Provider names are path-safe (options/schema.ts).
 */
export function callbackPath(provider: string, several: boolean): string {
  return several ? `${CALLBACK_PATH}/${provider}` : CALLBACK_PATH
}
/** Forward-auth: asked by an ingress, a program, even when the browser's headers come along. */
export const FORWARD_AUTH_PATH = `${SIGN_IN_PATH}/auth`
/** OpenID Connect Back-Channel Logout: the URL to register at the provider (backchannel_logout_uri). */
export const BACKCHANNEL_LOGOUT_PATH = `${SIGN_IN_PATH}/backchannel-logout`

/**
 * The first segment below SIGN_IN_PATH of each endpoint the gateway serves there: another route
 * under one of them (forwardAuth.extAuthzPath) would shadow or collide with the endpoint.
 */
export const ENDPOINT_SEGMENTS: readonly string[] = ['redirect', 'callback', 'refresh', 'logout', 'sign-out', 'auth', 'backchannel-logout']

/** The public keys of identity assertions (assertions.signingKeys), where JWT verifiers look. */
export const ASSERTION_JWKS_PATH = '/.well-known/jwks.json'

/** True for SIGN_IN_PATH itself and every path below it (on a segment boundary). */
export function isGatewayPath(path: string): boolean {
  return path.startsWith(SIGN_IN_PATH) && (path.length === SIGN_IN_PATH.length || path.charCodeAt(SIGN_IN_PATH.length) === 0x2f)
}

/** The redirect endpoint that starts a sign-in and brings the user back to `target` (validated). */
export function signInPath(target?: string): string {
  const start = `${SIGN_IN_PATH}/redirect`
  return target === undefined ? start : `${start}?redirectAfter=${encodeURIComponent(target)}`
}

/** The refresh endpoint in its redirecting form: renew the access token, then back to `target`. */
export function refreshPath(target: string): string {
  return `${SIGN_IN_PATH}/refresh?redirectAfter=${encodeURIComponent(target)}`
}

/**
 * Sign-out for people: GET is a page (signed out, or a sign-out button; a good
 * `provider.postLogoutRedirectUri`), POST is its form. The contract's DELETE logout is for scripts.
 */
export const SIGN_OUT_PATH = `${SIGN_IN_PATH}/sign-out`
