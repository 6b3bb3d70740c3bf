// The cross-key rules of a GitHub provider (provider.github, docs/providers/github.md): GitHub is
// a plain OAuth 2.0 authorization server (src/oidc/github.ts), so every key that configures what
// only an OpenID provider has is refused on it, naming the key, rather than silently ignored (a
// configuration never looks more secure than it is). Key by key:
//
// - idTokenAlgorithms, clockToleranceSeconds (other than its default): GitHub issues no ID token.
// - profile: fapi2, dpop, pushedAuthorizationRequests: required: GitHub has no PAR endpoint
//   (RFC 9126), takes no DPoP proof (RFC 9449) and is no FAPI 2.0 server.
// - responseMode: form_post: GitHub redirects with the code in the query only.
// - clientAuthMethod: private_key_jwt (and with it clientKey...): GitHub takes a client secret.
// - scopes (other than its default), offlineAccess: OpenID Connect's scopes; a GitHub sign-in
//   asks for github.scopes, and a GitHub App's expiring tokens come with a refresh token unasked.
// - audiences, bearer.algorithms (other than its default), bearer.introspection,
//   bearer.requireAtJwt: a GitHub token is opaque and GitHub has no introspection endpoint
//   (RFC 7662), so a GitHub provider accepts no Bearer token at all.
// - postLogoutRedirectUri: GitHub has no end-session endpoint (RP-Initiated Logout 1.0).
// - ssf: GitHub is no Shared Signals transmitter.
// - claimSources: UserInfo, aggregated and distributed claims and Entra ID's groups are OpenID
//   Connect's; a GitHub user's claims come from GitHub's REST API (src/oidc/github-api.ts).

import { ASYMMETRIC_ALGORITHMS } from '../../options/algorithms.js'
import { formatPath, type Issue, type Path } from '../path.js'
import { isBoolean, isNumber, isString, isStringArray, type Read, valueAt } from './read.js'

const DEFAULT_SCOPES: readonly string[] = ['openid', 'profile', 'email']
const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30

export function checkGithub(read: Read, data: unknown, at: Path): Issue[] {
  if (valueAt(data, [...at, 'github']) === undefined) return []
  const issues: Issue[] = []
  const refuse = (key: Path, why: string): void => {
    issues.push({ path: [...at, ...key], message: `is OpenID Connect's and cannot be used with ${formatPath([...at, 'github'])}: ${why}` })
  }
  const has = (key: Path): boolean => valueAt(data, [...at, ...key]) !== undefined
  if (has(['idTokenAlgorithms'])) refuse(['idTokenAlgorithms'], 'GitHub issues no ID token')
  const tolerance = read([...at, 'clockToleranceSeconds'], isNumber)
  if (tolerance !== undefined && tolerance !== DEFAULT_CLOCK_TOLERANCE_SECONDS) refuse(['clockToleranceSeconds'], 'GitHub issues no ID token or JWT to check the time of')
  if (read([...at, 'profile'], isString) === 'fapi2') refuse(['profile'], 'GitHub is no FAPI 2.0 server')
  if (read([...at, 'dpop'], isBoolean) === true) refuse(['dpop'], 'GitHub takes no DPoP proof')
  if (read([...at, 'pushedAuthorizationRequests'], isString) === 'required') refuse(['pushedAuthorizationRequests'], 'GitHub has no pushed authorization request endpoint')
  if (read([...at, 'responseMode'], isString) === 'form_post') refuse(['responseMode'], 'GitHub returns the code in the redirect query only')
  if (read([...at, 'clientAuthMethod'], isString) === 'private_key_jwt') refuse(['clientAuthMethod'], 'GitHub takes a client secret')
  const scopes = read([...at, 'scopes'], isStringArray)
  if (scopes !== undefined && !sameSet(scopes, DEFAULT_SCOPES)) refuse(['scopes'], `a GitHub sign-in asks for ${formatPath([...at, 'github', 'scopes'])}`)
  if (read([...at, 'offlineAccess'], isBoolean) === true) refuse(['offlineAccess'], "a GitHub App's expiring tokens come with a refresh token unasked")
  const opaque = 'GitHub tokens are opaque and GitHub has no introspection endpoint, so a GitHub provider accepts no Bearer token'
  const audiences = read([...at, 'audiences'], isStringArray)
  if (audiences !== undefined && audiences.length > 0) refuse(['audiences'], opaque)
  const algorithms = read([...at, 'bearer', 'algorithms'], isStringArray)
  if (algorithms !== undefined && !sameSet(algorithms, ASYMMETRIC_ALGORITHMS)) refuse(['bearer', 'algorithms'], opaque)
  if (read([...at, 'bearer', 'introspection'], isBoolean) === true) refuse(['bearer', 'introspection'], opaque)
  if (read([...at, 'bearer', 'requireAtJwt'], isBoolean) === true) refuse(['bearer', 'requireAtJwt'], opaque)
  if (has(['postLogoutRedirectUri'])) refuse(['postLogoutRedirectUri'], 'GitHub has no end-session endpoint; sign-out ends the gateway session only')
  if (has(['ssf'])) refuse(['ssf'], 'GitHub is no Shared Signals transmitter')
  if (has(['claimSources'])) refuse(['claimSources'], "a GitHub user's claims come from GitHub's REST API")
  return issues
}

/** Whether `a` lists exactly the items of `b` (a default, whatever its order). */
function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && b.every((item) => a.includes(item))
}
