// Where a provider keeps the user and the groups in its claims, and the path syntax that names a
// claim: the mapping of providers[].userClaim and groupsClaim, and of upstreams[].claimHeaders.
//
// Security rationale:
// - `sub` stays the session's subject whatever is mapped: refresh (OpenID Connect Core 12.2),
//   back-channel logout (Back-Channel Logout 1.0 2.4) and revocation key on it. The mapping only
//   says what the identity headers, forward-auth's answer, `allow.groups`, the assertion and the
//   request log read as "the user" and "the groups".
// - One spelling, one claim. A name that contains a dot (Auth0's namespaced claims are URLs such as
//   `https://example.com/roles`, RFC 7519 4.2/4.3 collision-resistant names) must be quoted
//   (`["https://example.com/roles"]`); an unquoted segment is only letters, digits, `_`, `-`, `$`
//   and `:` (AWS Cognito's `cognito:groups`). oauth2-proxy tries the whole string as a top-level claim first and then as a dotted path
//   (pkg/providers/util/claim_extractor.go getClaimFrom), so which claim is read depends on the
//   token; here the configuration alone decides, and a URL left unquoted is refused at load.
// - Only a claims object's own properties are walked (never Object.prototype: a path through
//   `constructor` or `__proto__` resolves to nothing), never into an array (no indexes).
// - Paths are parsed once per configuration; resolving one is a few property reads.

/** A parsed claim path: the property names from the claims object down, never empty. */
export type ClaimPath = readonly string[]

/** Which claim is the user and which holds the groups, for one provider's claims. */
export interface ClaimMapping {
  readonly user: ClaimPath
  readonly groups: ClaimPath
  /** True when both are the defaults (`sub`, `groups`): the identity reads the claims as it always has. */
  readonly isDefault: boolean
}

const USER: ClaimPath = Object.freeze(['sub'])
const GROUPS: ClaimPath = Object.freeze(['groups'])

/** `sub` is the user, `groups` the groups: a provider that maps nothing. */
export const DEFAULT_CLAIM_MAPPING: ClaimMapping = Object.freeze({ user: USER, groups: GROUPS, isDefault: true })

const BARE_SEGMENT = /^[A-Za-z0-9_$:-]+$/

/**
 * Parses a claim path: segments joined by `.`, each bare (`[A-Za-z0-9_$:-]+`) or a JSON string in
 * brackets (`["https://example.com/roles"]`, `resource_access["my.app"].roles`). Throws a
 * TypeError saying what is wrong (never repeating the value).
 */
export function parseClaimPath(text: string): ClaimPath {
  const segments: string[] = []
  let i = 0
  const len = text.length
  if (len === 0) throw new TypeError('a claim path must not be empty')
  while (i < len) {
    if (text.charCodeAt(i) === 0x5b /* [ */) {
      const end = quotedEnd(text, i + 1)
      if (end === -1 || text.charCodeAt(end + 1) !== 0x5d /* ] */)
        throw new TypeError('a bracketed segment must be a JSON string in [ ], e.g. ["https://example.com/roles"]')
      const segment = JSON.parse(text.slice(i + 1, end + 1)) as string
      if (segment === '') throw new TypeError('a claim path segment must not be empty')
      segments.push(segment)
      i = end + 2
    } else {
      let end = i
      while (end < len && text.charCodeAt(end) !== 0x2e /* . */ && text.charCodeAt(end) !== 0x5b) end++
      const segment = text.slice(i, end)
      if (!BARE_SEGMENT.test(segment)) {
        throw new TypeError('an unquoted segment may hold only letters, digits, `_`, `-`, `$` and `:`: quote a claim name with other characters as ["name"]')
      }
      segments.push(segment)
      i = end
    }
    if (i === len) break
    // Segments follow one another as `.name` or `["name"]`.
    if (text.charCodeAt(i) === 0x2e) {
      i++
      if (i === len) throw new TypeError('a claim path must not end with `.`')
      // `.` is followed by a bare name; a quoted one follows without it (`a["b"]`, one spelling).
      if (text.charCodeAt(i) === 0x5b) throw new TypeError('a quoted segment follows without `.`, e.g. a["b.c"]')
    } else if (text.charCodeAt(i) !== 0x5b) {
      throw new TypeError('segments are joined by `.` or follow as ["name"]')
    }
  }
  return Object.freeze(segments)
}

/** The index of the closing quote of a JSON string whose opening quote is at `from`, or -1. */
function quotedEnd(text: string, from: number): number {
  if (text.charCodeAt(from) !== 0x22) return -1
  for (let i = from + 1; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x5c /* \ */) i++
    else if (c === 0x22) {
      try {
        JSON.parse(text.slice(from, i + 1))
      } catch {
        return -1
      }
      return i
    }
  }
  return -1
}

/** The path written back in the syntax parseClaimPath reads (for messages and docs). */
export function formatClaimPath(path: ClaimPath): string {
  let out = ''
  for (const segment of path) {
    if (BARE_SEGMENT.test(segment)) out = out === '' ? segment : `${out}.${segment}`
    else out = `${out}[${JSON.stringify(segment)}]`
  }
  return out
}

/** The value at `path` in `claims`, through own properties of plain objects only; undefined when absent. */
export function claimAt(claims: Readonly<Record<string, unknown>>, path: ClaimPath): unknown {
  let node: unknown = claims
  for (const segment of path) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, segment)) return undefined
    node = (node as Record<string, unknown>)[segment]
  }
  return node
}

/** The mapping of a provider's `userClaim` and `groupsClaim` (unset: `sub` and `groups`), parsed once. */
export function claimMappingOf(config: { readonly userClaim?: string | undefined; readonly groupsClaim?: string | undefined }): ClaimMapping {
  const user = config.userClaim === undefined ? USER : parseClaimPath(config.userClaim)
  const groups = config.groupsClaim === undefined ? GROUPS : parseClaimPath(config.groupsClaim)
  const isDefault = samePath(user, USER) && samePath(groups, GROUPS)
  return isDefault ? DEFAULT_CLAIM_MAPPING : Object.freeze({ user, groups, isDefault })
}

function samePath(a: ClaimPath, b: ClaimPath): boolean {
  return a.length === b.length && a.every((segment, i) => segment === b[i])
}

/**
 * The user as a string: the mapped claim when it is a non-empty string or a finite number (a
 * numeric id), else undefined. Never anything else: an object or a list is no user.
 */
export function mappedUser(claims: Readonly<Record<string, unknown>>, mapping: ClaimMapping): string | undefined {
  const value = claimAt(claims, mapping.user)
  if (typeof value === 'string') return value === '' ? undefined : value
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  return undefined
}

/** The mapped groups claim as it is (a list, a string, or anything else the provider sent), or undefined. */
export function mappedGroups(claims: Readonly<Record<string, unknown>>, mapping: ClaimMapping): unknown {
  return claimAt(claims, mapping.groups)
}

/** The top-level claim a path starts at: what a session must keep for the path to resolve. */
export function topClaim(path: ClaimPath): string {
  return path[0] as string
}

/** An allow rule as far as the claims it reads go (options/types.ts AllowRule). */
interface ClaimAllow {
  readonly claims?: Readonly<Record<string, unknown>> | undefined
}

/** What reads a session's claims besides the identity: the providers' mappings and the upstreams' rules and headers. */
export interface ClaimReaders {
  readonly providers: ReadonlyArray<{
    readonly userClaim?: string | undefined
    readonly groupsClaim?: string | undefined
    readonly additionalClaims?: readonly string[] | undefined
  }>
  readonly upstreams: ReadonlyArray<{
    readonly claimHeaders?: Readonly<Record<string, string>> | undefined
    readonly allow?: ClaimAllow | undefined
    readonly rules?: ReadonlyArray<{ readonly allow: ClaimAllow }> | undefined
  }>
}

/**
 * The top-level claims something reads besides the identity claims: the providers' mappings and
 * the claims the userinfo endpoint names (additionalClaims), the upstreams' allow rules and their extra identity headers. A session keeps these and no other
 * (session/lifecycle.ts picks only named claims).
 */
export function keptClaimNames({ providers, upstreams }: ClaimReaders): string[] {
  const names = new Set<string>()
  for (const provider of providers) {
    const mapping = claimMappingOf(provider)
    names.add(topClaim(mapping.user)).add(topClaim(mapping.groups))
    // What the userinfo endpoint answers with (routes/userinfo.ts).
    for (const name of provider.additionalClaims ?? []) names.add(name)
  }
  for (const upstream of upstreams) {
    for (const allow of [upstream.allow, ...(upstream.rules ?? []).map((rule) => rule.allow)]) {
      for (const name of Object.keys(allow?.claims ?? {})) names.add(name)
    }
    for (const path of Object.values(upstream.claimHeaders ?? {})) names.add(topClaim(parseClaimPath(path)))
  }
  return [...names]
}
