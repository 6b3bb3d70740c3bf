// The cross-key rules of `provider` and `providers[]`: exactly one of the two forms, names and
// issuers that each select one provider, and what one provider's keys must agree on (the issuer
// and allowInsecureHttp, the client authentication and its credential, the FAPI 2.0 profile, the
// form post and the public URL, the Shared Signals receiver, the claim sources).

import { isAtOrBelow } from '../../contract/endpoints.js'
import { FAPI2_ALGORITHMS } from '../../oidc/profile.js'
import { formatPath, type Issue, type Path } from '../path.js'
import { checkGithub } from './github.js'
import { duplicates, isBoolean, isPlainHttpRemote, isRecord, isString, isStringArray, type Keyed, type Read, valueAt } from './read.js'

export function providerRules(read: Read, data: unknown): Issue[] {
  const providers = providerPaths(data)
  return [
    ...checkProviderForms(data),
    ...checkProviderNames(read, providers),
    ...checkRedirectPaths(read, data, providers),
    ...providers.flatMap((at) => checkProvider(read, data, at)),
  ]
}

// A provider's redirectPath (a cutover that keeps oauth2-proxy's registered redirect URI): each
// selects one provider's sign-ins (distinct redirect URIs are RFC 9700 4.4.2's mix-up defence),
// and the gateway owns it and everything below it, so no upstream may be routed there.
function checkRedirectPaths(read: Read, data: unknown, at: readonly Path[]): Issue[] {
  const keyed = at.flatMap((path, index): Keyed[] => {
    const value = read([...path, 'redirectPath'], isString)
    return value === undefined ? [] : [[index, value]]
  })
  const issues = duplicates(keyed).map(([index, first]): Issue => ({
    path: [...(at[index] ?? []), 'redirectPath'],
    message: `duplicate of ${formatPath([...(at[first] ?? []), 'redirectPath'])}: each provider needs a redirect URI of its own`,
  }))
  const upstreams = valueAt(data, ['upstreams'])
  if (!Array.isArray(upstreams)) return issues
  upstreams.forEach((_, u) => {
    const prefix = read(['upstreams', u, 'match', 'pathPrefix'], isString)
    if (prefix === undefined) return
    const own = keyed.find(([, path]) => isAtOrBelow(prefix, path))
    if (own === undefined) return
    issues.push({
      path: ['upstreams', u, 'match', 'pathPrefix'],
      message: `is at or below ${formatPath([...(at[own[0]] ?? []), 'redirectPath'])} (${own[1]}), which the gateway serves: this upstream would never receive a request`,
    })
  })
  return issues
}

/**
 * Where the provider settings are: `provider` (the one-provider form) or each `providers[i]`. The
 * rules of one provider run at each, and name the key where it is.
 */
export function providerPaths(data: unknown): Path[] {
  const list = valueAt(data, ['providers'])
  if (Array.isArray(list)) return list.map((_, index) => ['providers', index])
  return valueAt(data, ['provider']) === undefined ? [] : [['provider']]
}

// Exactly one form: two would leave it unclear which provider the one-provider form's sessions
// (named `default`) belong to.
function checkProviderForms(data: unknown): Issue[] {
  if (!isRecord(data)) return []
  const one = valueAt(data, ['provider']) !== undefined
  const several = valueAt(data, ['providers']) !== undefined
  if (one && several) return [{ path: ['providers'], message: 'cannot be given with provider: use providers alone (name the former provider in it)' }]
  if (!one && !several) return [{ path: ['provider'], message: 'is required (or providers, a list, for several providers)' }]
  return []
}

// A name selects the provider at sign-in and in the session; an issuer selects it for a Bearer
// token and a logout token: each must select one.
function checkProviderNames(read: Read, at: readonly Path[]): Issue[] {
  const keyed = (key: string, lower: boolean): Keyed[] =>
    at.flatMap((path, index): Keyed[] => {
      const value = read([...path, key], isString)
      return value === undefined ? [] : [[index, lower ? value.toLowerCase() : value]]
    })
  return [
    ...duplicates(keyed('name', true)).map(([index, first]): Issue => ({
      path: [...(at[index] ?? []), 'name'],
      message: `duplicate of ${formatPath([...(at[first] ?? []), 'name'])}`,
    })),
    ...duplicates(keyed('issuer', false)).map(([index, first]): Issue => ({
      path: [...(at[index] ?? []), 'issuer'],
      message: `same issuer as ${formatPath(at[first] ?? [])}: a token's iss must select one provider`,
    })),
  ]
}

/** The provider rules below, at one provider's path. */
function checkProvider(read: Read, data: unknown, at: Path): Issue[] {
  return [
    ...checkIssuer(read, at),
    ...checkClientAuthentication(read, at, (key) => valueAt(data, [...at, key]) !== undefined),
    ...checkFapi2(read, at),
    ...checkFormPost(read, at),
    ...checkSsf(read, data, at),
    ...checkClaimSources(read, at),
    ...checkGithub(read, data, at),
  ]
}

// The Shared Signals receiver (docs/features/shared-signals.md): push needs the Authorization it
// registers (without it anyone could push events), and a plain-http transmitter only where the
// provider itself may be plain http.
function checkSsf(read: Read, data: unknown, at: Path): Issue[] {
  const ssf = [...at, 'ssf']
  if (valueAt(data, ssf) === undefined) return []
  const issues: Issue[] = []
  const delivery = read([...ssf, 'delivery'], isString)
  if (delivery === 'push' && read([...ssf, 'authorization'], isString) === undefined) {
    issues.push({ path: [...ssf, 'authorization'], message: 'is required with delivery: push' })
  }
  if (delivery === 'poll' && read([...ssf, 'authorization'], isString) !== undefined) {
    issues.push({ path: [...ssf, 'authorization'], message: 'is only used with delivery: push; remove it' })
  }
  const url = read([...ssf, 'configurationUrl'], isString)
  if (url !== undefined && /^http:/i.test(url) && read([...at, 'allowInsecureHttp'], isBoolean) !== true) {
    issues.push({ path: [...ssf, 'configurationUrl'], message: `must be an https URL (http only with ${formatPath([...at, 'allowInsecureHttp'])}: true)` })
  }
  return issues
}

// provider.claimSources (docs/features/claim-sources.md): the URLs the gateway sends a user's
// access token to are https, as the issuer is; hundreds of Graph group ids need a server-side
// store (a cookie session that large is refused at every sign-in, session_too_large).
function checkClaimSources(read: Read, at: Path): Issue[] {
  const sources = [...at, 'claimSources']
  const issues: Issue[] = []
  const insecureAllowed = read([...at, 'allowInsecureHttp'], isBoolean) === true
  const graph = read([...sources, 'graphBaseUrl'], isString)
  const overage = read([...sources, 'entraGroupOverage'], isBoolean) === true
  if (overage && graph !== undefined && /^http:/i.test(graph) && !insecureAllowed) {
    issues.push({ path: [...sources, 'graphBaseUrl'], message: `must be an https URL (http only with ${formatPath([...at, 'allowInsecureHttp'])}: true)` })
  }
  const endpoints = read([...sources, 'trustedEndpoints'], (v): v is unknown[] => Array.isArray(v)) ?? []
  endpoints.forEach((endpoint, index) => {
    if (typeof endpoint === 'string' && /^http:/i.test(endpoint) && !insecureAllowed) {
      issues.push({ path: [...sources, 'trustedEndpoints', index], message: `must be an https URL (http only with ${formatPath([...at, 'allowInsecureHttp'])}: true)` })
    }
  })
  if (overage && read(['session', 'store'], isString) === 'cookie') {
    issues.push({
      path: [...sources, 'entraGroupOverage'],
      message: 'needs session.store memory or redis: the hundreds of group ids of an overage do not fit in cookie sessions',
    })
  }
  return issues
}

function checkIssuer(read: Read, at: Path): Issue[] {
  const issuer = read([...at, 'issuer'], isString)
  const allowInsecureHttp = read([...at, 'allowInsecureHttp'], isBoolean)
  if (issuer === undefined || allowInsecureHttp !== false || !/^http:/i.test(issuer)) return []
  return [{ path: [...at, 'issuer'], message: `must be an https URL (http only with ${formatPath([...at, 'allowInsecureHttp'])}: true)` }]
}

// Each method has its credential; a credential the method does not use is refused rather than
// ignored, so that a configuration never looks more secure than it is.
function checkClientAuthentication(read: Read, at: Path, has: (key: string) => boolean): Issue[] {
  const method = read([...at, 'clientAuthMethod'], isString)
  if (method === undefined) return []
  const issues: Issue[] = []
  if (method === 'private_key_jwt') {
    if (!has('clientKey')) issues.push({ path: [...at, 'clientKey'], message: 'is required by clientAuthMethod: private_key_jwt' })
    if (has('clientSecret')) issues.push({ path: [...at, 'clientSecret'], message: 'is not used with clientAuthMethod: private_key_jwt; remove it' })
  } else {
    if (!has('clientSecret')) issues.push({ path: [...at, 'clientSecret'], message: 'is required' })
    for (const key of ['clientKey', 'clientKeyId', 'clientAssertionAudience']) {
      if (has(key)) issues.push({ path: [...at, key], message: `is only used with clientAuthMethod: private_key_jwt` })
    }
  }
  return issues
}

// FAPI 2.0 Security Profile 5.3.2: what the profile requires of a client and a key can contradict.
function checkFapi2(read: Read, at: Path): Issue[] {
  if (read([...at, 'profile'], isString) !== 'fapi2') return []
  const profile = `${formatPath([...at, 'profile'])}: fapi2`
  const issues: Issue[] = []
  const method = read([...at, 'clientAuthMethod'], isString)
  if (method !== undefined && method !== 'private_key_jwt') {
    issues.push({ path: [...at, 'clientAuthMethod'], message: `must be private_key_jwt with ${profile}` })
  }
  // FAPI 2.0 5.3.2.1: the authorization server accepts only its issuer identifier as `aud`.
  if (read([...at, 'clientAssertionAudience'], isString) === 'token_endpoint') {
    issues.push({ path: [...at, 'clientAssertionAudience'], message: `must be issuer with ${profile}` })
  }
  if (read([...at, 'pushedAuthorizationRequests'], isString) === 'off') {
    issues.push({ path: [...at, 'pushedAuthorizationRequests'], message: `cannot be off with ${profile}, which requires PAR` })
  }
  const pinned = read([...at, 'idTokenAlgorithms'], isStringArray)
  const refused = pinned?.filter((alg) => !FAPI2_ALGORITHMS.includes(alg)) ?? []
  if (refused.length > 0) {
    issues.push({ path: [...at, 'idTokenAlgorithms'], message: `names ${refused.join(', ')}; ${profile} allows only ${FAPI2_ALGORITHMS.join(', ')}` })
  }
  // bearer.algorithms defaults to every algorithm: normalize narrows it to the profile's.
  const bearer = read([...at, 'bearer', 'algorithms'], isStringArray)
  if (bearer !== undefined && !bearer.some((alg) => FAPI2_ALGORITHMS.includes(alg))) {
    issues.push({ path: [...at, 'bearer', 'algorithms'], message: `names none of ${FAPI2_ALGORITHMS.join(', ')}, the only algorithms ${profile} allows` })
  }
  return issues
}

// Form post (docs/features/form-post.md): the provider's page posts the response to the callback
// from its own site, and a browser sends the sign-in's transaction cookie with that cross-site
// POST only when it is SameSite=None, which RFC 6265bis 4.1.2.7 allows only with Secure. Browsers
// keep Secure cookies from https origins and from loopback ones (a secure context), so a plain
// http public URL elsewhere could never finish a sign-in: refused rather than failing at run time.
function checkFormPost(read: Read, at: Path): Issue[] {
  if (read([...at, 'responseMode'], isString) !== 'form_post') return []
  const publicUrl = read(['server', 'publicUrl'], isString)
  if (publicUrl === undefined || !isPlainHttpRemote(publicUrl)) return []
  const message = 'form_post needs server.publicUrl on https (or a loopback host): its transaction cookie must be SameSite=None; Secure, which browsers drop over plain http'
  return [{ path: [...at, 'responseMode'], message }]
}
