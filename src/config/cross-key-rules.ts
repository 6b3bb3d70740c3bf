// Rules that relate two keys, which the schema cannot say (or cannot say readably). A rule runs
// whenever the keys it reads are themselves free of problems, whatever is wrong elsewhere, so
// one run reports as much as possible without building on a broken value.

import { isIP } from 'node:net'
import { ENDPOINT_SEGMENTS, SIGN_IN_PATH } from '../contract/endpoints.js'
import { FAPI2_ALGORITHMS } from '../oidc/profile.js'
import { canonicalHeaderName } from '../upstream/header-policy.js'
import { foldPath } from '../access/ambiguity.js'
import { createPublicPathMatcher } from '../access/public-paths.js'
import { normalizeHosts, normalizePathPrefix } from './normalize.js'
import { formatPath, type Issue, type Path, startsWith } from './path.js'
import { checkHeaderName } from './formats.js'
import { ANY_PROVIDER, DEFAULT_PROVIDER, type IdentityHeaderNames } from '../options/types.js'

/** Reads the value at `path` when it has the expected type and no known issue touches it. */
type Read = <T>(path: Path, is: (value: unknown) => value is T) => T | undefined

/** `known`: the issues found so far (environment and schema); defaults are already applied. */
export function crossCheck(data: unknown, known: readonly Issue[]): Issue[] {
  const read: Read = (path, is) => {
    if (known.some((issue) => startsWith(issue.path, path) || startsWith(path, issue.path))) return undefined
    const value = valueAt(data, path)
    return is(value) ? value : undefined
  }
  const providers = providerPaths(data)
  const upstreams = valueAt(data, ['upstreams'])
  return [
    ...checkProviderForms(data),
    ...checkProviderNames(read, providers),
    ...providers.flatMap((at) => checkProvider(read, data, at)),
    ...checkSameSite(read),
    ...checkSecureOverHttp(read),
    ...checkManagementPort(read),
    ...checkExtAuthzGrpcPort(read),
    ...checkExtAuthzPath(read),
    ...checkRedisStore(read, data),
    ...checkWorkersStore(read),
    ...checkUpstreams(read, upstreams),
    ...checkPathRules(read, upstreams),
    ...checkUpstreamProviders(read, upstreams, providers),
    ...checkDpopForwarding(read, upstreams, providers),
    ...checkTokenExchange(read, upstreams, providers),
    ...checkResourceAudiences(read, upstreams, providers),
    ...checkAssertionKeys(read, upstreams, valueAt(data, ['assertions', 'signingKeys'])),
    ...checkTransactionTokenKeys(upstreams, valueAt(data, ['assertions', 'signingKeys'])),
  ]
}

/**
 * Where the provider settings are: `provider` (the one-provider form) or each `providers[i]`. The
 * rules of one provider run at each, and name the key where it is.
 */
function providerPaths(data: unknown): Path[] {
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

function checkSameSite(read: Read): Issue[] {
  if (read(['cookies', 'sameSite'], isString) !== 'none' || read(['cookies', 'secure'], isBoolean) !== false) return []
  return [{ path: ['cookies', 'sameSite'], message: 'none requires cookies.secure: true' }]
}

// Browsers drop Secure cookies set over plain http (localhost excepted): every sign-in would end
// in a loop back to the provider.
function checkSecureOverHttp(read: Read): Issue[] {
  const publicUrl = read(['server', 'publicUrl'], isString)
  if (read(['cookies', 'secure'], isBoolean) !== true || publicUrl === undefined || !isPlainHttpRemote(publicUrl)) return []
  const message = 'must be false when server.publicUrl is plain http (browsers drop Secure cookies there)'
  return [{ path: ['cookies', 'secure'], message }]
}

function isPlainHttpRemote(publicUrl: string): boolean {
  const url = new URL(publicUrl)
  if (url.protocol !== 'http:') return false
  const host = url.hostname
  // The URL parser writes every IPv4 spelling as dotted decimal, so 127/8 is read off the
  // address itself; a name such as 127.example.com is no loopback.
  const loopbackV4 = isIP(host) === 4 && host.startsWith('127.')
  return !(host === 'localhost' || host.endsWith('.localhost') || loopbackV4 || host === '[::1]')
}

// The probes and metrics must not share the public listener: a second bind of the same port
// would fail at start, after `check` passed.
function checkManagementPort(read: Read): Issue[] {
  const port = read(['server', 'port'], isNumber)
  const management = read(['server', 'managementPort'], isNumber)
  if (port === undefined || management === undefined || management === 0 || management !== port) return []
  return [{ path: ['server', 'managementPort'], message: 'must differ from server.port (0 turns the management listener off)' }]
}

// The ext_authz gRPC service is a listener of its own: it must not take another's port, and it
// runs in a single process (the workers of server.workers share the HTTP port through the
// primary; the gRPC service has not been made to, so it is refused rather than left unbound).
function checkExtAuthzGrpcPort(read: Read): Issue[] {
  const grpc = read(['server', 'extAuthzGrpcPort'], isNumber)
  if (grpc === undefined || grpc === 0) return []
  const path = ['server', 'extAuthzGrpcPort']
  if (grpc === read(['server', 'port'], isNumber)) return [{ path, message: 'must differ from server.port' }]
  if (grpc === read(['server', 'managementPort'], isNumber)) return [{ path, message: 'must differ from server.managementPort' }]
  const workers = read(['server', 'workers'], (v): v is number | string => typeof v === 'number' || typeof v === 'string')
  if (workers !== undefined && workers !== 1) return [{ path, message: 'is served by a single process: use server.workers: 1 (several replicas behind a Service instead)' }]
  return []
}

// The ext_authz prefix is a route of its own below /api/v1/openid: under an endpoint's segment it
// would collide with it (the router refuses a second /callback/*, which would stop the start).
function checkExtAuthzPath(read: Read): Issue[] {
  const path = read(['forwardAuth', 'extAuthzPath'], isString)
  const segment = path?.slice(SIGN_IN_PATH.length + 1).split('/')[0]
  if (segment === undefined || !ENDPOINT_SEGMENTS.includes(segment)) return []
  return [{ path: ['forwardAuth', 'extAuthzPath'], message: `must not be below the gateway's endpoint ${SIGN_IN_PATH}/${segment}` }]
}

// Workers are separate processes: sessions in one worker's memory are unknown to the others.
function checkWorkersStore(read: Read): Issue[] {
  const workers = read(['server', 'workers'], (v): v is number | string => typeof v === 'number' || typeof v === 'string')
  if (workers === undefined || workers === 1 || read(['session', 'store'], isString) !== 'memory') return []
  return [{ path: ['session', 'store'], message: 'memory cannot be shared by server.workers processes: use cookie or redis, or server.workers: 1' }]
}

// Where Redis is: one node (redisUrl), Sentinel or Cluster, never two of them (which would the
// gateway use?). A topology with its own problem is reported where it is; these rules are about a
// missing one, a second one, and keys that mean nothing with the one given.
function checkRedisStore(read: Read, data: unknown): Issue[] {
  const given = (['redisUrl', 'redis.sentinels', 'redis.cluster'] as const).filter((key) => valueAt(data, ['session', ...key.split('.')]) !== undefined)
  const issues: Issue[] = []
  if (read(['session', 'store'], isString) === 'redis' && given.length === 0) {
    issues.push({ path: ['session', 'store'], message: 'redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster' })
  }
  if (given.length > 1) {
    const [, second = 'redis.cluster'] = given
    issues.push({ path: ['session', ...second.split('.')], message: `must not be given with session.${given[0]}: give one of session.redisUrl, session.redis.sentinels and session.redis.cluster` })
  }
  if (given[0] === 'redisUrl') {
    for (const key of ['username', 'password', 'tls'] as const) {
      const value = valueAt(data, ['session', 'redis', key])
      // tls has a default (false): only a `true` was written.
      if (value !== undefined && value !== false) {
        issues.push({ path: ['session', 'redis', key], message: `applies to sentinels and cluster only; with session.redisUrl, ${key === 'tls' ? 'write rediss://' : 'write it in the URL'}` })
      }
    }
  }
  if (given.length === 0 && valueAt(data, ['session', 'redis', 'waitReplicas']) !== undefined) {
    issues.push({ path: ['session', 'redis', 'waitReplicas'], message: 'needs a Redis: session.redisUrl, session.redis.sentinels or session.redis.cluster' })
  }
  return issues
}

interface Match {
  pathPrefix: string
  hosts?: string[]
}

function checkUpstreams(read: Read, upstreams: unknown): Issue[] {
  const indexes = Array.isArray(upstreams) ? upstreams.map((_, index) => index) : []
  const keyed = (key: (index: number) => string | undefined): Keyed[] =>
    indexes.flatMap((index): Keyed[] => {
      const value = key(index)
      return value === undefined ? [] : [[index, value]]
    })
  const names = duplicates(keyed((i) => read(['upstreams', i, 'name'], isString)?.toLowerCase()))
  const matches = duplicates(keyed((i) => matchKey(read(['upstreams', i, 'match'], isMatch))))
  return [
    ...names.map(([index, first]): Issue => ({
      path: ['upstreams', index, 'name'],
      message: `duplicate of ${formatPath(['upstreams', first, 'name'])}`,
    })),
    ...matches.map(([index, first]): Issue => ({
      path: ['upstreams', index, 'match'],
      message: `same hosts and pathPrefix as ${formatPath(['upstreams', first])}`,
    })),
    ...indexes.flatMap((index) => checkIdentityHeaders(index, read(['upstreams', index, 'identityHeaders'], isIdentityHeaders))),
    ...indexes.flatMap((index) => checkClaimHeaders(read, index)),
  ]
}

function ruleIndexes(read: Read, upstream: number): number[] {
  const rules = read(['upstreams', upstream, 'rules'], Array.isArray)
  return rules === undefined ? [] : rules.map((_, index) => index)
}

// Per-path rules (access/rules.ts): each must be able to decide some request, and which one decides
// a path must never depend on the order they are written in or on how a case-insensitive upstream
// spells the path. Refused, naming the rule's path:
// - a path outside the upstream's prefix, which no request of the upstream reaches, or equal to
//   it, which is the upstream's own `allow` written twice;
// - a path another rule has, exactly or once folded (`/Admin` and `/admin`: ambiguity.ts refuses
//   every request under them, since the folded path selects another rule);
// - a path a publicPaths glob makes public: public paths are decided first, so its allow would
//   never apply (a public tree inside it, `/admin/assets/**`, is fine: that part is public);
// - any rule with `auth: none`, which reads no identity.
function checkPathRules(read: Read, upstreams: unknown): Issue[] {
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index) => {
    const rules = ruleIndexes(read, index)
    if (rules.length === 0) return []
    const at = (rule: number): Path => ['upstreams', index, 'rules', rule, 'path']
    if (read(['upstreams', index, 'auth'], isString) === 'none') {
      return [{ path: ['upstreams', index, 'rules'], message: `never apply with ${formatPath(['upstreams', index, 'auth'])}: none (no request is signed in there); remove them or require a sign-in` }]
    }
    const match = read(['upstreams', index, 'match'], isMatch)
    const prefix = match === undefined ? undefined : normalizePathPrefix(match.pathPrefix)
    const globs = read(['upstreams', index, 'publicPaths'], isStringArray) ?? []
    const issues: Issue[] = []
    const seen = new Map<string, number>()
    for (const rule of rules) {
      const raw = read(at(rule), isString)
      if (raw === undefined) continue
      const path = normalizePathPrefix(raw)
      if (prefix !== undefined && path === prefix) {
        issues.push({ path: at(rule), message: `is the whole upstream (${formatPath(['upstreams', index, 'match', 'pathPrefix'])}): write its allow as ${formatPath(['upstreams', index, 'allow'])}` })
        continue
      }
      if (prefix !== undefined && prefix !== '/' && !path.startsWith(`${prefix}/`)) {
        issues.push({ path: at(rule), message: `is not below ${formatPath(['upstreams', index, 'match', 'pathPrefix'])} (${prefix}): the rule would never apply` })
        continue
      }
      const folded = foldPath(path)
      const first = seen.get(folded)
      if (first !== undefined) {
        const same = normalizePathPrefix(read(at(first), isString) ?? '') === path
        issues.push({ path: at(rule), message: `${same ? 'same path as' : 'same path, ignoring case and trailing dots, as'} ${formatPath(at(first))}: which rule decides would be ambiguous` })
        continue
      }
      seen.set(folded, rule)
      const publicGlob = globs.findIndex((glob) => {
        try {
          return createPublicPathMatcher([glob])(path)
        } catch {
          return false // a glob with a problem of its own is reported where it is
        }
      })
      if (publicGlob !== -1) {
        issues.push({ path: at(rule), message: `is public (${formatPath(['upstreams', index, 'publicPaths', publicGlob])} matches it): its allow would never apply` })
      }
    }
    return issues
  })
}

/** The names of the providers at `at`; the one-provider form's is DEFAULT_PROVIDER. */
function providerNames(read: Read, at: readonly Path[]): Array<string | undefined> {
  return at.map((path) => (path.length === 1 ? DEFAULT_PROVIDER : read([...path, 'name'], isString)))
}

// The names an upstream gives must be providers' names (with provider:, that is `default`), and
// those of its allow.providers the upstream's own; `*` (every one) stands alone.
function checkUpstreamProviders(read: Read, upstreams: unknown, at: readonly Path[]): Issue[] {
  if (!Array.isArray(upstreams)) return []
  const names = providerNames(read, at)
  if (names.includes(undefined)) return []
  const check = (key: Path, accepted: readonly (string | undefined)[], which: string): Issue[] => {
    const listed = read(key, isStringArray) ?? []
    if (listed.includes(ANY_PROVIDER) && listed.length > 1) return [{ path: key, message: `'${ANY_PROVIDER}' means every provider and stands alone` }]
    return listed.flatMap((name, position): Issue[] =>
      name === ANY_PROVIDER || accepted.includes(name) ? [] : [{ path: [...key, position], message: `names no provider (${which}: ${accepted.join(', ')})` }],
    )
  }
  return upstreams.flatMap((_, index) => [
    ...check(['upstreams', index, 'providers'], names, 'configured'),
    ...check(['upstreams', index, 'allow', 'providers'], acceptedBy(read, index, names), 'the upstream accepts'),
    ...ruleIndexes(read, index).flatMap((rule) => check(['upstreams', index, 'rules', rule, 'allow', 'providers'], acceptedBy(read, index, names), 'the upstream accepts')),
  ])
}

/** The providers upstream `index` accepts: unset is the first configured, `*` every one. */
function acceptedBy(read: Read, index: number, names: readonly (string | undefined)[]): ReadonlyArray<string | undefined> {
  const listed = read(['upstreams', index, 'providers'], isStringArray)
  return listed === undefined ? names.slice(0, 1) : listed.includes(ANY_PROVIDER) ? names : listed
}

// A DPoP-bound token is useless without a proof of the session's key, which never leaves the
// gateway; forwarding it as Bearer would promise upstreams a token they cannot use.
function checkDpopForwarding(read: Read, upstreams: unknown, at: readonly Path[]): Issue[] {
  const names = providerNames(read, at)
  const bound = at.flatMap((path, index) =>
    read([...path, 'dpop'], isBoolean) === true || read([...path, 'profile'], isString) === 'fapi2' ? [{ path, name: names[index] }] : [],
  )
  if (bound.length === 0) return []
  return upstreamsWith(read, upstreams, 'forwardAccessToken').flatMap((index) => {
    const accepted = acceptedBy(read, index, names)
    const provider = bound.find((p) => p.name !== undefined && accepted.includes(p.name))
    if (provider === undefined) return []
    const message = `cannot be true with ${formatPath([...provider.path, 'dpop'])}: DPoP-bound access tokens are not forwarded`
    return [{ path: ['upstreams', index, 'forwardAccessToken'], message }]
  })
}

// Token exchange (upstream/token-exchange.ts) and protected resource metadata need a signed-in user:
// with `auth: none` no token is ever read, so the exchange would never run and the upstream
// would receive nothing, which a configuration must not pretend otherwise. The exchanged token
// is the upstream's only Authorization, so forwardAccessToken (the user's own) contradicts it;
// and a DPoP-bound token (provider.dpop, FAPI 2.0) is refused like forwardAccessToken's: the
// exchange would send the provider a token without the proof its binding needs (RFC 9449 7).
function checkTokenExchange(read: Read, upstreams: unknown, at: readonly Path[]): Issue[] {
  if (!Array.isArray(upstreams)) return []
  const names = providerNames(read, at)
  const bound = at.flatMap((path, index) =>
    read([...path, 'dpop'], isBoolean) === true || read([...path, 'profile'], isString) === 'fapi2' ? [{ path, name: names[index] }] : [],
  )
  return upstreams.flatMap((_, index): Issue[] => {
    const issues: Issue[] = []
    const auth = read(['upstreams', index, 'auth'], isString)
    const has = (key: string): boolean => read(['upstreams', index, key], isRecord) !== undefined
    // resourceMetadata: `true` or an object asks for a document that auth: none never serves;
    // `false` says what auth: none implies, and is accepted.
    const metadata = read(['upstreams', index, 'resourceMetadata'], isRecord) !== undefined || read(['upstreams', index, 'resourceMetadata'], isBoolean) === true
    for (const [key, given] of [['tokenExchange', has('tokenExchange')], ['resourceMetadata', metadata]] as const) {
      if (given && auth === 'none') {
        issues.push({ path: ['upstreams', index, key], message: `needs a signed-in user: it does nothing with ${formatPath(['upstreams', index, 'auth'])}: none` })
      }
    }
    // tokenAudience: resource is the audience of the document's `resource` (RFC 9728 1.2, RFC 8707):
    // without the document a client cannot learn it, and with auth: none no token is read.
    if (read(['upstreams', index, 'tokenAudience'], isString) === 'resource') {
      if (auth === 'none') issues.push({ path: ['upstreams', index, 'tokenAudience'], message: `needs a signed-in user: it does nothing with ${formatPath(['upstreams', index, 'auth'])}: none` })
      else if (read(['upstreams', index, 'resourceMetadata'], isBoolean) === false) {
        issues.push({
          path: ['upstreams', index, 'tokenAudience'],
          message: `resource needs the protected resource metadata that names the resource (RFC 9728): it cannot be given with ${formatPath(['upstreams', index, 'resourceMetadata'])}: false`,
        })
      }
    }
    if (!has('tokenExchange')) return issues
    if (read(['upstreams', index, 'forwardAccessToken'], isBoolean) === true) {
      issues.push({ path: ['upstreams', index, 'tokenExchange'], message: `cannot be given with ${formatPath(['upstreams', index, 'forwardAccessToken'])}: true (the exchanged token is the upstream's only Authorization)` })
    }
    const accepted = acceptedBy(read, index, names)
    const provider = bound.find((p) => p.name !== undefined && accepted.includes(p.name))
    if (provider !== undefined) {
      issues.push({ path: ['upstreams', index, 'tokenExchange'], message: `cannot be used with ${formatPath([...provider.path, 'dpop'])} (or profile: fapi2): DPoP-bound access tokens are not exchanged` })
    }
    return issues
  })
}

/** The indexes of the upstreams whose `<flag>` is true. */
// RFC 8707 and the MCP authorization specification ("Access Token Privilege Restriction"): a
// token for an upstream with `tokenAudience: resource` must be accepted there only. A provider
// whose `audiences` names that resource identifier would have every upstream that takes the
// provider's audiences accept it too (token passthrough), so the two together are refused.
// Compared without case: refusing a spelling the verifier would tell apart is the safe side.
function checkResourceAudiences(read: Read, upstreams: unknown, at: readonly Path[]): Issue[] {
  if (!Array.isArray(upstreams)) return []
  const publicUrl = read(['server', 'publicUrl'], isString)
  if (publicUrl === undefined || !URL.canParse(publicUrl)) return []
  const url = new URL(publicUrl)
  const identifiers = new Map<string, number>()
  upstreams.forEach((_, index) => {
    if (read(['upstreams', index, 'tokenAudience'], isString) !== 'resource') return
    const match = read(['upstreams', index, 'match'], isMatch)
    const prefix = match?.pathPrefix === undefined || match.pathPrefix === '/' ? '' : match.pathPrefix
    const origins = match?.hosts === undefined ? [url.origin] : match.hosts.map((host) => `${url.protocol}//${host}`)
    for (const origin of origins) identifiers.set((origin + prefix).toLowerCase(), index)
  })
  if (identifiers.size === 0) return []
  return at.flatMap((path): Issue[] => {
    const named = (read([...path, 'audiences'], isStringArray) ?? []).find((audience) => identifiers.has(audience.toLowerCase()))
    if (named === undefined) return []
    const index = identifiers.get(named.toLowerCase()) as number
    return [
      {
        path: [...path, 'audiences'],
        message: `names ${named}, the resource of ${formatPath(['upstreams', index, 'tokenAudience'])}: resource, whose tokens would then be accepted at every upstream of this provider`,
      },
    ]
  })
}

function upstreamsWith(read: Read, upstreams: unknown, flag: string): number[] {
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index) => (read(['upstreams', index, flag], isBoolean) === true ? [index] : []))
}

// Assertions signed with a key made up at startup would differ on every replica and restart, and
// an upstream could not verify them against another replica's JWKS: the keys are configured.
function checkAssertionKeys(read: Read, upstreams: unknown, signingKeys: unknown): Issue[] {
  if (signingKeys !== undefined) return []
  return upstreamsWith(read, upstreams, 'identityAssertion').map((index) => ({ path: ['upstreams', index, 'identityAssertion'], message: 'requires assertions.signingKeys' }))
}

// Transaction Tokens are signed with the assertions' key, the one the JWKS publishes: verifiers
// (draft-ietf-oauth-transaction-tokens-10 section 12.2) need the same keys on every replica.
function checkTransactionTokenKeys(upstreams: unknown, signingKeys: unknown): Issue[] {
  if (signingKeys !== undefined || !Array.isArray(upstreams)) return []
  return upstreams.flatMap((upstream: unknown, index) =>
    typeof upstream === 'object' && upstream !== null && 'transactionTokens' in upstream && upstream.transactionTokens !== undefined
      ? [{ path: ['upstreams', index, 'transactionTokens'], message: 'requires assertions.signingKeys' }]
      : [],
  )
}

function matchKey(match: Match | undefined): string | undefined {
  if (match === undefined) return undefined
  const hosts = match.hosts === undefined ? [] : normalizeHosts(match.hosts).sort()
  return JSON.stringify([hosts, normalizePathPrefix(match.pathPrefix)])
}

// In the documented order, whatever order the file (and the defaults after it) gave the keys.
const IDENTITY_KEYS: ReadonlyArray<keyof IdentityHeaderNames> = ['user', 'email', 'groups', 'preferredUsername', 'issuer', 'acr', 'amr', 'authTime']

function checkIdentityHeaders(index: number, headers: IdentityHeaderNames | undefined): Issue[] {
  if (headers === undefined) return []
  const names = IDENTITY_KEYS.map((key, position): Keyed => [position, canonicalHeaderName(headers[key])])
  return duplicates(names).map(([position, first]) => ({
    path: ['upstreams', index, 'identityHeaders', IDENTITY_KEYS[position] ?? ''],
    message: `same header as identityHeaders.${IDENTITY_KEYS[first] ?? ''}`,
  }))
}

/**
 * An upstream's extra identity headers (claimHeaders) are identity headers like the others: each
 * its own, never the name of one of the upstream's identityHeaders, the assertion header or
 * another extra header (case, `_` and `-` folded, as the header policy compares them), or one
 * header would carry two claims and which one arrives would depend on the order they are set in.
 * Each name is an `identity-header` as formats.ts has it: a valid header name, never one HTTP or
 * the gateway manages.
 */
function checkClaimHeaders(read: Read, index: number): Issue[] {
  const extra = read(['upstreams', index, 'claimHeaders'], isStringRecord)
  if (extra === undefined) return []
  const taken = new Map<string, string>()
  const identity = read(['upstreams', index, 'identityHeaders'], isIdentityHeaders)
  for (const key of IDENTITY_KEYS) if (identity !== undefined) taken.set(canonicalHeaderName(identity[key]), `identityHeaders.${key}`)
  const assertion = read(['assertions', 'header'], isString)
  if (assertion !== undefined) taken.set(canonicalHeaderName(assertion), 'assertions.header')
  const issues: Issue[] = []
  for (const name of Object.keys(extra)) {
    const invalid = checkHeaderName(name)
    if (invalid !== undefined) {
      issues.push({ path: ['upstreams', index, 'claimHeaders', name], message: invalid })
      continue
    }
    const canonical = canonicalHeaderName(name)
    const first = taken.get(canonical)
    if (first !== undefined) issues.push({ path: ['upstreams', index, 'claimHeaders', name], message: `same header as ${first}` })
    else taken.set(canonical, `claimHeaders.${name}`)
  }
  return issues
}

type Keyed = readonly [index: number, key: string]

/** Each item whose key an earlier item already has, with the index of that earlier item. */
function duplicates(items: readonly Keyed[]): Array<[index: number, first: number]> {
  const seen = new Map<string, number>()
  return items.flatMap(([index, key]): Array<[number, number]> => {
    const first = seen.get(key)
    if (first !== undefined) return [[index, first]]
    seen.set(key, index)
    return []
  })
}

function valueAt(data: unknown, path: Path): unknown {
  let node = data
  for (const segment of path) {
    if (Array.isArray(node) && typeof segment === 'number') node = node[segment]
    else if (isRecord(node) && typeof segment === 'string' && Object.hasOwn(node, segment)) node = node[segment]
    else return undefined
  }
  return node
}

// The type guards only give the values a type: a key without issues already passed the schema.
function isNumber(value: unknown): value is number {
  return typeof value === 'number'
}

function isString(value: unknown): value is string {
  return typeof value === 'string'
}

function isBoolean(value: unknown): value is boolean {
  return typeof value === 'boolean'
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every(isString)
}

function isMatch(value: unknown): value is Match {
  return isRecord(value) && isString(value.pathPrefix) && (value.hosts === undefined || isStringArray(value.hosts))
}

function isIdentityHeaders(value: unknown): value is IdentityHeaderNames {
  return isRecord(value) && IDENTITY_KEYS.every((key) => isString(value[key]))
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every(isString)
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
