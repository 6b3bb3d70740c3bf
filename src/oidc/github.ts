import type * as oidc from 'openid-client'
import type { GithubConfig } from '../options/types.js'

// GitHub as a provider (provider.github): a plain OAuth 2.0 authorization server (RFC 6749), not
// an OpenID provider. It publishes no discovery document, no JWKS and no ID token, so the
// gateway supplies its server metadata itself and openid-client speaks OAuth 2.0 to it (a
// Configuration built from that metadata, RFC 8414's member names), with state and PKCE S256
// (RFC 7636) as for every provider; nonce and the ID token checks do not apply. Who the user is
// comes from GitHub's REST API afterwards (github-api.ts).
//
// GitHub's documented rules this module keeps:
// - The web application flow (https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps
//   and, for GitHub Apps, https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app):
//   GET <base>/login/oauth/authorize with client_id, redirect_uri, scope, state, code_challenge
//   and code_challenge_method=S256; POST <base>/login/oauth/access_token with client_id,
//   client_secret, code, redirect_uri and code_verifier in the form body; with
//   `Accept: application/json` the answer is JSON. github.com and GitHub Enterprise Server have
//   the same paths under their own base URL.
// - The token endpoint answers its errors with HTTP 200 and an `error` member in the body
//   ("Troubleshooting OAuth app access token request errors",
//   https://docs.github.com/en/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors:
//   incorrect_client_credentials, redirect_uri_mismatch, bad_verification_code,
//   unverified_user_email; and bad_refresh_token for a refresh,
//   https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens).
//   RFC 6749 5.2 answers errors with 400 (401 for client authentication), so githubTokenErrors
//   turns such an answer into the RFC's before openid-client reads it, with RFC 6749's code for
//   GitHub's: the code or refresh token refused is invalid_grant (a refused refresh then ends the
//   session, as with any provider), refused credentials invalid_client (the operator's to fix).
//   GitHub's own code stays in error_description, which the log line names.
// - GitHub App user tokens that expire come with expires_in, refresh_token and
//   refresh_token_expires_in; the refresh is RFC 6749 6's grant on the same endpoint
//   (grant_type=refresh_token), which the gateway's refresh path sends as for any provider. OAuth
//   app tokens carry no expires_in: they live as long as the session may.

/** github.com's base URL; its REST API alone is on another host. */
export const GITHUB_COM = 'https://github.com'
const GITHUB_COM_API = 'https://api.github.com'

/** The base URL `issuer` names, without a trailing slash. */
function baseOf(issuer: string): string {
  return issuer.replace(/\/+$/, '')
}

/** Where a GitHub provider's REST API is: api.github.com for github.com, `<base>/api/v3` for GitHub Enterprise Server. */
export function githubApiUrl(issuer: string): string {
  const base = baseOf(issuer)
  return base.toLowerCase() === GITHUB_COM ? GITHUB_COM_API : `${base}/api/v3`
}

/** The OAuth 2.0 server metadata (RFC 8414 member names) of the GitHub at `issuer`: what discovery gives an OpenID provider. */
export function githubServerMetadata(issuer: string): oidc.ServerMetadata {
  const base = baseOf(issuer)
  return {
    issuer,
    authorization_endpoint: `${base}/login/oauth/authorize`,
    token_endpoint: `${base}/login/oauth/access_token`,
    // GitHub takes the secret in the form body, as its documentation shows it.
    token_endpoint_auth_methods_supported: ['client_secret_post'],
    code_challenge_methods_supported: ['S256'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    response_types_supported: ['code'],
  }
}

/** The scopes a GitHub sign-in asks for (github.scopes). */
export function githubScopes(config: GithubConfig): readonly string[] {
  return config.scopes
}

/** RFC 6749 5.2's code for each of GitHub's token endpoint errors; any other keeps GitHub's code. */
const RFC_ERRORS: Readonly<Record<string, string>> = {
  bad_verification_code: 'invalid_grant',
  bad_refresh_token: 'invalid_grant',
  redirect_uri_mismatch: 'invalid_grant',
  incorrect_client_credentials: 'invalid_client',
}

/**
 * `fetch` with GitHub's token endpoint errors (HTTP 200 with `error` in the body) answered as
 * RFC 6749 5.2 answers them: 400 (401 for invalid_client) and the RFC's error code.
 */
export function githubTokenErrors(fetch: oidc.CustomFetch, tokenEndpoint: string): oidc.CustomFetch {
  return async (url, options) => {
    const res = await fetch(url, options)
    if (url !== tokenEndpoint || res.status !== 200) return res
    let body: unknown
    try {
      body = await res.clone().json()
    } catch {
      return res
    }
    if (typeof body !== 'object' || body === null || !('error' in body) || typeof body.error !== 'string') return res
    const said = body.error
    const error = RFC_ERRORS[said] ?? said
    const description = 'error_description' in body && typeof body.error_description === 'string' ? `${said}: ${body.error_description}` : said
    const answer = new Response(JSON.stringify({ error, error_description: description }), {
      status: error === 'invalid_client' ? 401 : 400,
      headers: { 'content-type': 'application/json' },
    })
    Object.defineProperty(answer, 'url', { value: url })
    return answer
  }
}
