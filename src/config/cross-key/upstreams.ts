// The cross-key rules of `upstreams[]`: names and matches that select one upstream, identity
// headers that each carry one claim, per-path rules that can decide, the providers an upstream
// names, and what forwarding a token, exchanging it and an upstream's resource audience need.

import { canonicalHeaderName } from '../../upstream/header-policy.js'
import { coversMethods, patternCoversPrefix, samePatternAs, type PatternEntry } from '../../access/ambiguity.js'
import { createPublicPathMatcher } from '../../access/public-paths.js'
import { ANY_PROVIDER, DEFAULT_PROVIDER, type IdentityHeaderNames } from '../../options/types.js'
import { checkHeaderName } from '../formats.js'
import { normalizeHosts, normalizePathPrefix } from '../normalize.js'
import { formatPath, type Issue, type Path } from '../path.js'
import { legacyCredentialRules } from './legacy-credentials.js'
import { providerPaths } from './providers.js'
import { duplicates, isBoolean, isRecord, isString, isStringArray, isStringRecord, type Keyed, type Read, upstreamsWith, valueAt } from './read.js'

export function upstreamRules(read: Read, data: unknown): Issue[] {
  const providers = providerPaths(data)
  const upstreams = valueAt(data, ['upstreams'])
  return [
    ...checkUpstreams(read, upstreams),
    ...checkPublicPaths(read, upstreams),
    ...checkPathRules(read, upstreams),
    ...checkUpstreamProviders(read, upstreams, providers),
    ...checkDpopForwarding(read, upstreams, providers),
    ...checkTokenExchange(read, upstreams, providers),
    ...checkResourceAudiences(read, upstreams, providers),
    ...legacyCredentialRules(read, data),
  ]
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
    ...indexes.flatMap((index) => checkIdentityHeaders(read, index)),
    ...indexes.flatMap((index) => checkClaimHeaders(read, index)),
  ]
}

function ruleIndexes(read: Read, upstream: number): number[] {
  const rules = read(['upstreams', upstream, 'rules'], Array.isArray)
  return rules === undefined ? [] : rules.map((_, index) => index)
}

/** A publicPaths or rules entry as the load-time verdicts read it; undefined when it has no single glob, path or regex. */
function patternEntry(read: Read, at: Path, pathKey: 'glob' | 'path'): PatternEntry | undefined {
  const methods = read([...at, 'methods'], isStringArray)
  const withMethods = methods === undefined ? {} : { methods }
  if (pathKey === 'glob') {
    const glob = read(at, isString)
    if (glob !== undefined) return { glob }
  }
  const path = read([...at, pathKey], isString)
  const regex = read([...at, 'regex'], isString)
  if ((path === undefined) === (regex === undefined)) return undefined
  if (regex !== undefined) return { regex, ...withMethods }
  return pathKey === 'glob' ? { glob: path, ...withMethods } : { path: normalizePathPrefix(path as string), ...withMethods }
}

/** An object entry that gives both or neither of its two keys. */
function oneOf(read: Read, at: Path, keys: readonly [string, string]): Issue[] {
  const entry = read(at, isRecord)
  if (entry === undefined) return []
  const given = keys.filter((key) => entry[key] !== undefined)
  if (given.length === 1) return []
  return [{ path: at, message: given.length === 0 ? `needs ${keys[0]} or ${keys[1]}` : `gives both ${keys[0]} and ${keys[1]}: write two entries` }]
}

function upstreamPrefix(read: Read, index: number): string | undefined {
  const match = read(['upstreams', index, 'match'], isMatch)
  return match === undefined ? undefined : normalizePathPrefix(match.pathPrefix)
}

// publicPaths (access/public-paths.ts): an object entry gives a glob or a regex, exactly one; the
// same glob or regex twice for a method in common is refused (ambiguity.ts samePatternAs: one of
// the two says nothing, and removing it would not do what its author meant); and a regex for
// every method that matches all of the upstream's paths makes it public, which is `auth: none`
// said in a way that a reader of the upstream does not see (ambiguity.ts patternCoversPrefix).
function checkPublicPaths(read: Read, upstreams: unknown): Issue[] {
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index) => {
    const list = read(['upstreams', index, 'publicPaths'], Array.isArray)
    if (list === undefined) return []
    const at = (entry: number): Path => ['upstreams', index, 'publicPaths', entry]
    const prefix = upstreamPrefix(read, index)
    const entries = list.map((_entry, i) => patternEntry(read, at(i), 'glob'))
    const issues: Issue[] = list.flatMap((_entry, i) => oneOf(read, at(i), ['glob', 'regex']))
    entries.forEach((entry, i) => {
      if (entry === undefined) return
      const key = entry.regex === undefined ? at(i) : [...at(i), 'regex']
      const first = samePatternAs(entries.map((e) => e ?? {}), i)
      if (first !== -1) {
        issues.push({ path: key, message: `same ${entry.regex === undefined ? 'glob' : 'regex'} as ${formatPath(at(first))} for a method in common: one of them says nothing` })
        return
      }
      if (entry.regex !== undefined && entry.methods === undefined && prefix !== undefined && patternCoversPrefix(entry.regex, prefix)) {
        issues.push({
          path: key,
          message: `${JSON.stringify(entry.regex)} makes all of ${formatPath(['upstreams', index, 'match', 'pathPrefix'])} (${prefix}) public: write ${formatPath(['upstreams', index, 'auth'])}: none, or name the paths`,
        })
      }
    })
    return issues
  })
}

// Per-path rules (access/rules.ts): each must be able to decide some request, and which one decides
// a request must never depend on how a case-insensitive upstream spells the path, nor on an order
// the reader cannot see. Refused, naming the rule's key:
// - a rule with both or neither of `path` and `regex`;
// - a path outside the upstream's prefix, which no request of the upstream reaches, or equal to
//   it, which is the upstream's own `allow` written twice (and, alike, a regex for every method
//   that matches all of the upstream's paths);
// - a path another rule has, exactly or once folded (`/Admin` and `/admin`: ambiguity.ts refuses
//   every request under them, since the folded path selects another rule), or a regex another
//   rule has, for a method in common (ambiguity.ts samePatternAs);
// - a path rule that a regex rule for all of its methods covers (regex rules are tried first, so
//   the path rule would never decide; ambiguity.ts patternCoversPrefix);
// - a path a publicPaths entry for all of the rule's methods makes public: public paths are
//   decided first, so its allow would never apply (a public tree inside it, `/admin/assets/**`,
//   is fine: that part is public);
// - any rule with `auth: none`, which reads no identity.
function checkPathRules(read: Read, upstreams: unknown): Issue[] {
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index) => {
    const rules = ruleIndexes(read, index)
    if (rules.length === 0) return []
    const at = (rule: number): Path => ['upstreams', index, 'rules', rule]
    if (read(['upstreams', index, 'auth'], isString) === 'none') {
      return [{ path: ['upstreams', index, 'rules'], message: `never apply with ${formatPath(['upstreams', index, 'auth'])}: none (no request is signed in there); remove them or require a sign-in` }]
    }
    const prefix = upstreamPrefix(read, index)
    const publicList = read(['upstreams', index, 'publicPaths'], Array.isArray) ?? []
    const publicEntries = publicList.map((_entry, i) => patternEntry(read, ['upstreams', index, 'publicPaths', i], 'glob'))
    const issues: Issue[] = rules.flatMap((rule) => oneOf(read, at(rule), ['path', 'regex']))
    const entries = rules.map((rule) => patternEntry(read, at(rule), 'path'))
    const prefixKey = formatPath(['upstreams', index, 'match', 'pathPrefix'])
    for (const rule of rules) {
      const entry = entries[rule]
      if (entry === undefined) continue
      if (entry.regex !== undefined) {
        const key = [...at(rule), 'regex']
        // Regex rules are tried in order: an earlier one with the same pattern for all of this
        // one's methods always decides first.
        const first = entries.findIndex((other, i) => i < rule && other !== undefined && other.regex === entry.regex && coversMethods(other.methods, entry.methods))
        if (first !== -1) {
          issues.push({ path: key, message: `never decides: ${formatPath([...at(first), 'regex'])} has the same pattern, is tried first, and applies to all of its methods` })
        } else if (entry.methods === undefined && prefix !== undefined && patternCoversPrefix(entry.regex, prefix)) {
          issues.push({ path: key, message: `${JSON.stringify(entry.regex)} matches all of ${prefixKey} (${prefix}): write its allow as ${formatPath(['upstreams', index, 'allow'])}` })
        }
        continue
      }
      const path = entry.path as string
      const key = [...at(rule), 'path']
      if (prefix !== undefined && path === prefix) {
        issues.push({ path: key, message: `is the whole upstream (${prefixKey}): write its allow as ${formatPath(['upstreams', index, 'allow'])}` })
        continue
      }
      if (prefix !== undefined && prefix !== '/' && !path.startsWith(`${prefix}/`)) {
        issues.push({ path: key, message: `is not below ${prefixKey} (${prefix}): the rule would never apply` })
        continue
      }
      const first = samePatternAs(entries.map((e) => e ?? {}), rule, true)
      if (first !== -1) {
        const same = entries[first]?.path === path
        issues.push({ path: key, message: `${same ? 'same path as' : 'same path, ignoring case and trailing dots, as'} ${formatPath([...at(first), 'path'])}: which rule decides would be ambiguous` })
        continue
      }
      const covering = entries.findIndex((other) => other?.regex !== undefined && coversMethods(other.methods, entry.methods) && patternCoversPrefix(other.regex, path))
      if (covering !== -1) {
        issues.push({ path: key, message: `never decides: ${formatPath([...at(covering), 'regex'])} (regex rules are tried first) matches all of it` })
        continue
      }
      const publicEntry = publicEntries.findIndex((candidate) => {
        if (candidate === undefined || !coversMethods(candidate.methods, entry.methods)) return false
        try {
          return createPublicPathMatcher([candidate.regex === undefined ? (candidate.glob as string) : { regex: candidate.regex }])(path)
        } catch {
          return false // an entry with a problem of its own is reported where it is
        }
      })
      if (publicEntry !== -1) {
        issues.push({ path: key, message: `is public (${formatPath(['upstreams', index, 'publicPaths', publicEntry])} matches it): its allow would never apply` })
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
  return (['forwardAccessToken', 'forwardAccessTokenHeader'] as const).flatMap((key) =>
    upstreamsWith(read, upstreams, key).flatMap((index) => {
      const accepted = acceptedBy(read, index, names)
      const provider = bound.find((p) => p.name !== undefined && accepted.includes(p.name))
      if (provider === undefined) return []
      const message = `cannot be true with ${formatPath([...provider.path, 'dpop'])}: DPoP-bound access tokens are not forwarded`
      return [{ path: ['upstreams', index, key], message }]
    }),
  )
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


function matchKey(match: Match | undefined): string | undefined {
  if (match === undefined) return undefined
  const hosts = match.hosts === undefined ? [] : normalizeHosts(match.hosts).sort()
  return JSON.stringify([hosts, normalizePathPrefix(match.pathPrefix)])
}

// In the documented order, whatever order the file (and the defaults after it) gave the keys.
const IDENTITY_KEYS: ReadonlyArray<keyof IdentityHeaderNames> = ['user', 'email', 'groups', 'preferredUsername', 'issuer', 'acr', 'amr', 'authTime']

/**
 * Each identity header of an upstream carries one claim: never the name of another of its
 * identity headers, nor the assertion header (assertions.header), whose signed assertion the
 * claim would then replace or follow (case, `_` and `-` folded, as the header policy compares
 * them). The names the gateway manages otherwise are refused by their format (formats.ts
 * checkHeaderName). Each refusal names the header, and the key that has it first.
 */
function checkIdentityHeaders(read: Read, index: number): Issue[] {
  const headers = read(['upstreams', index, 'identityHeaders'], isIdentityHeaders)
  if (headers === undefined) return []
  const taken = new Map<string, Taken>()
  const assertion = read(['assertions', 'header'], isString)
  if (assertion !== undefined) taken.set(canonicalHeaderName(assertion), { key: 'assertions.header', name: assertion })
  const issues: Issue[] = []
  for (const key of IDENTITY_KEYS) {
    const name = headers[key]
    const canonical = canonicalHeaderName(name)
    const first = taken.get(canonical)
    if (first !== undefined) issues.push({ path: ['upstreams', index, 'identityHeaders', key], message: sameHeader(name, first) })
    else taken.set(canonical, { key: `identityHeaders.${key}`, name })
  }
  return issues
}

/** The key that names a header first, and the header as it writes it. */
interface Taken {
  key: string
  name: string
}

function sameHeader(name: string, first: Taken): string {
  return `${name} is the same header as ${first.key} (${first.name})`
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
  const taken = new Map<string, Taken>()
  const identity = read(['upstreams', index, 'identityHeaders'], isIdentityHeaders)
  for (const key of IDENTITY_KEYS) if (identity !== undefined) taken.set(canonicalHeaderName(identity[key]), { key: `identityHeaders.${key}`, name: identity[key] })
  const assertion = read(['assertions', 'header'], isString)
  if (assertion !== undefined) taken.set(canonicalHeaderName(assertion), { key: 'assertions.header', name: assertion })
  const issues: Issue[] = []
  for (const name of Object.keys(extra)) {
    const invalid = checkHeaderName(name)
    if (invalid !== undefined) {
      issues.push({ path: ['upstreams', index, 'claimHeaders', name], message: invalid })
      continue
    }
    const canonical = canonicalHeaderName(name)
    const first = taken.get(canonical)
    if (first !== undefined) issues.push({ path: ['upstreams', index, 'claimHeaders', name], message: sameHeader(name, first) })
    else taken.set(canonical, { key: `claimHeaders.${name}`, name })
  }
  return issues
}

function isMatch(value: unknown): value is Match {
  return isRecord(value) && isString(value.pathPrefix) && (value.hosts === undefined || isStringArray(value.hosts))
}

function isIdentityHeaders(value: unknown): value is IdentityHeaderNames {
  return isRecord(value) && IDENTITY_KEYS.every((key) => isString(value[key]))
}
