// The header policy towards upstreams: what a client may not send, what the gateway asserts, and
// which cookies stay behind.

import type { IdentityHeaderNames } from '../options/types.js'
import { claimAt, DEFAULT_CLAIM_MAPPING, mappedGroups, mappedUser, parseClaimPath, type ClaimMapping, type ClaimPath } from '../contract/claim-path.js'
import { plausibleAuthTime } from '../oidc/step-up.js'
import { MAX_CLOCK_TOLERANCE_SECONDS } from '../options/schema.js'

export type HeaderBag = Record<string, string | string[] | undefined>
export type HeaderScrubber = (headers: HeaderBag) => HeaderBag

/**
 * Client-address headers: who the client is, as some proxy or CDN in front would assert it. From a
 * client they are forged, and the gateway's own answer is X-Forwarded-For.
 */
const CLIENT_ADDRESS_HEADERS = [
  'forwarded',
  'x-forwarded',
  'x-real-ip',
  'true-client-ip',
  'x-client-ip',
  'client-ip',
  'cf-connecting-ip',
  'cf-connecting-ipv6',
  'x-cluster-client-ip',
  'fastly-client-ip',
  'akamai-client-ip',
  'fly-client-ip',
  'x-azure-clientip',
  'x-azure-socketip',
  'x-originating-ip',
  'x-remote-ip',
  'x-remote-addr',
  'x-proxyuser-ip',
  'wl-proxy-client-ip',
  'proxy-client-ip',
  'x-host',
]

/**
 * Request-target and method overrides, by name: headers that frameworks read instead of the
 * request line (IIS URL Rewrite, Symfony, Zend and Drupal X-Original-URL/X-Rewrite-URL, nginx's
 * X-Original-URI, Envoy's X-Envoy-Original-Path, the X-HTTP-Method-Override family), so an
 * upstream would serve another path or method than the one the gateway authorized: a preflight
 * passed anonymously by `allowPreflight` must not become a DELETE at the upstream. The proxy
 * strips them (with their whole X-Original-* and X-Envoy-* families); a check endpoint cannot
 * strip anything itself, so every allow it answers names these for the ingress to remove
 * (upstream/credentials.ts; the forward-auth overlays list them among the answer's headers). Names only,
 * lower case: Envoy removes exact names, never a prefix.
 */
export const REQUEST_OVERRIDE_HEADER_NAMES: readonly string[] = [
  'x-original-url',
  'x-original-uri',
  'x-original-method',
  'x-original-host',
  'x-rewrite-url',
  'x-override-url',
  'x-envoy-original-path',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
]

const REQUEST_OVERRIDE_HEADERS = [...REQUEST_OVERRIDE_HEADER_NAMES, 'x-original-*', 'x-envoy-*']

/**
 * Headers that only the gateway may set, beyond the configured identity header names. Every
 * X-Forwarded-* goes: the default identity headers are X-Forwarded-*, the values of a trusted
 * peer are read before scrubbing (the proxy extends them) and from anyone else they are forged.
 * X-Forwarded-Uri/-Method/X-Original-Url are what forward-auth setups use to decide the path
 * (oauth2-proxy GHSA-7x63-xv5r-3p2x: a spoofed X-Forwarded-Uri made skip-auth rules apply to the
 * wrong path).
 */
export const GATEWAY_ONLY_HEADERS: readonly string[] = ['x-forwarded-*', 'x-auth-request-*', ...CLIENT_ADDRESS_HEADERS, ...REQUEST_OVERRIDE_HEADERS]

/**
 * Hop-by-hop headers (RFC 9110 7.6.1): they describe one connection and are never forwarded, in
 * either direction. Expect is answered by the gateway itself (Node sends the 100 Continue), so it
 * does not travel on either. undici refuses Keep-Alive, Upgrade and Expect outright, which made
 * them a 502.
 */
const HOP_BY_HOP_HEADERS: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'http2-settings',
  'expect',
]

/** What HTTP or the gateway itself manages in a request (a claim may not overwrite these). */
const MANAGED_HEADERS = [
  'authorization',
  'cookie',
  'set-cookie',
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-port',
  'x-forwarded-method',
  'x-forwarded-uri',
  'x-forwarded-prefix',
  'x-forwarded-path',
  'x-forwarded-server',
  'x-forwarded-ssl',
  'x-forwarded-scheme',
  'x-forwarded-access-token',
  'x-forwarded-client-cert',
]

// Node accepts `_` in header names, and CGI (RFC 3875 4.1.18) and everything built on its
// conventions (PHP, Rack, WSGI) expose headers as HTTP_* variables with `-` turned into `_`, so a
// client's `X_Forwarded_User` reaches them as HTTP_X_FORWARDED_USER: the gateway's own header.
export function canonicalHeaderName(name: string): string {
  const lower = name.toLowerCase()
  return lower.includes('_') ? lower.replaceAll('_', '-') : lower
}

/** A name's membership in a list of header names (case-insensitive, `_` equal to `-`). */
export type HeaderNameTest = (name: string) => boolean

/**
 * Verdicts kept per header-name test: the names of real traffic are a few dozen, and each is
 * canonicalized and matched once instead of on every request. The names are the client's, so the
 * memo is bounded; past the bound, a name is judged without being kept.
 */
const NAME_MEMO_LIMIT = 512

/**
 * Builds a membership test for the given header names. An entry ending in `*` matches every
 * header starting with the part before it.
 */
export function createHeaderNameTest(names: readonly string[]): HeaderNameTest {
  const exact = new Set<string>()
  const prefixes: string[] = []
  for (const name of names) {
    const canonical = canonicalHeaderName(name)
    if (canonical.endsWith('*')) {
      const prefix = canonical.slice(0, -1)
      // `*` alone would strip every header, Host and Content-Length included.
      if (prefix === '') throw new TypeError(`header scrub entry ${JSON.stringify(name)} matches every header`)
      prefixes.push(prefix)
    } else if (canonical !== '') {
      exact.add(canonical)
    }
  }
  const judge = (name: string): boolean => {
    const canonical = canonicalHeaderName(name)
    if (exact.has(canonical)) return true
    for (const prefix of prefixes) {
      if (canonical.startsWith(prefix)) return true
    }
    return false
  }
  const memo = new Map<string, boolean>()
  return (name) => {
    let verdict = memo.get(name)
    if (verdict === undefined) {
      verdict = judge(name)
      if (memo.size < NAME_MEMO_LIMIT) memo.set(name, verdict)
    }
    return verdict
  }
}

/**
 * Hop-by-hop headers (RFC 9110 7.6.1): besides the fixed list, every header the Connection header
 * names. Most messages name nothing there but `keep-alive` (itself in the list): the names are
 * collected only when something else is named.
 */
function connectionNames(value: string | string[], into: Set<string> | undefined): Set<string> | undefined {
  if (value === 'keep-alive') return into
  for (const part of Array.isArray(value) ? value : [value]) {
    for (const token of part.split(',')) {
      const name = canonicalHeaderName(token.trim())
      if (name !== '' && name !== 'keep-alive') (into ??= new Set()).add(name)
    }
  }
  return into
}

/**
 * Builds the request policy: one pass over the headers that copies all but the hop-by-hop
 * headers and the headers `names` lists (see createHeaderNameTest) into a new object, the
 * headers the upstream gets. The gateway adds its own headers after, so naming one of those in
 * Connection removes only the client's copy. A new object rather than deletions: an object that
 * properties were deleted from is slower to copy and to add to, and @fastify/reply-from copies it
 * once more.
 */
export function createHeaderScrubber(names: readonly string[]): HeaderScrubber {
  const drops = createHeaderNameTest([...HOP_BY_HOP_HEADERS, ...names])
  return (headers) => {
    const out: HeaderBag = {}
    let named: Set<string> | undefined
    for (const key in headers) {
      const value = headers[key]
      if (!drops(key)) {
        out[key] = value
      } else if (value !== undefined && isConnection(key)) {
        named = connectionNames(value, named)
      }
    }
    if (named !== undefined) dropNamed(out, named)
    return out
  }
}

const isHopByHop = createHeaderNameTest(HOP_BY_HOP_HEADERS)
const isConnection = createHeaderNameTest(['connection'])

function dropNamed(headers: HeaderBag, named: Set<string>): void {
  for (const key in headers) {
    if (named.has(canonicalHeaderName(key))) delete headers[key]
  }
}

const isReserved = createHeaderNameTest([
  ...MANAGED_HEADERS,
  ...HOP_BY_HOP_HEADERS,
  // X-Forwarded-* as a whole is stripped, but the default identity headers live there too; the
  // names with a meaning of their own are in MANAGED_HEADERS.
  ...GATEWAY_ONLY_HEADERS.filter((name) => name !== 'x-forwarded-*'),
])

/**
 * True for a header name an identity header may not have: one that HTTP, a proxy or the gateway
 * itself manages or that this policy strips for another reason (a claim would end up in
 * True-Client-IP or X-Original-URL). Configuration validation asks here.
 */
export function isReservedHeaderName(name: string): boolean {
  return isReserved(name)
}

/** oauth2-proxy's names for the identity headers, which forward-auth answers with and ingress setups copy upstream. */
export const AUTH_REQUEST_HEADERS: IdentityHeaderNames = {
  user: 'X-Auth-Request-User',
  email: 'X-Auth-Request-Email',
  groups: 'X-Auth-Request-Groups',
  preferredUsername: 'X-Auth-Request-Preferred-Username',
  issuer: 'X-Auth-Request-Issuer',
  acr: 'X-Auth-Request-Acr',
  amr: 'X-Auth-Request-Amr',
  authTime: 'X-Auth-Request-Auth-Time',
}
/** The user's access token in a forward-auth answer. */
export const AUTH_REQUEST_ACCESS_TOKEN = 'x-auth-request-access-token'
/**
 * The user's access token on the request to the upstream, as oauth2-proxy's `--pass-access-token`
 * names it (its legacy options' X-Forwarded-Access-Token request header).
 */
export const FORWARDED_ACCESS_TOKEN = 'x-forwarded-access-token'

/**
 * Every header name that carries an identity anywhere in one configuration: an application
 * behind two upstreams (a public part and a protected one) reads its names on every route, so a
 * name one upstream sets is an identity header on all of them. Built once per configuration and
 * shared by the proxy and every check dialect, so that what one strips the others remove.
 */
export interface IdentityHeaderUnion {
  /** The names, canonical (lowercase, `-`) and each once: what a check's allow names for removal. */
  readonly names: readonly string[]
  /** Whether a header name is one of them, case and `_`/`-` folded (CGI, RFC 3875 4.1.18). */
  readonly has: HeaderNameTest
}

/**
 * The union of the identity header names of every upstream (their `claimHeaders` included), of
 * forward-auth's X-Auth-Request-* (with its access-token header), of the identity assertion header
 * and of `gatewaySet`.
 */
export function identityHeaderUnion(
  perUpstream: readonly IdentityHeaderNames[],
  assertionHeader: string,
  claimHeaders: readonly string[] = [],
  gatewaySet: readonly string[] = [],
): IdentityHeaderUnion {
  const names = new Set<string>()
  for (const set of [...perUpstream, AUTH_REQUEST_HEADERS]) {
    for (const name of Object.values(set) as string[]) names.add(canonicalHeaderName(name))
  }
  for (const name of claimHeaders) names.add(canonicalHeaderName(name))
  names.add(AUTH_REQUEST_ACCESS_TOKEN)
  names.add(canonicalHeaderName(assertionHeader))
  // Other headers only the gateway sets in this configuration (`Txn-Token` when an upstream mints Transaction Tokens).
  for (const name of gatewaySet) names.add(canonicalHeaderName(name))
  const list = Object.freeze([...names])
  return { names: list, has: createHeaderNameTest(list) }
}

/** An extra identity header of an upstream (upstreams[].claimHeaders): its lowercased name and the claim path of its value. */
export interface ClaimHeader {
  readonly name: string
  readonly path: ClaimPath
}

const NO_CLAIM_HEADERS: readonly ClaimHeader[] = Object.freeze([])
const claimHeadersCache = new WeakMap<Readonly<Record<string, string>>, readonly ClaimHeader[]>()

/** An upstream's `claimHeaders`, parsed once per configuration (the same array every time). */
export function claimHeadersOf(config: Readonly<Record<string, string>> | undefined): readonly ClaimHeader[] {
  if (config === undefined) return NO_CLAIM_HEADERS
  let parsed = claimHeadersCache.get(config)
  if (parsed === undefined) {
    parsed = Object.freeze(Object.entries(config).map(([name, path]) => Object.freeze({ name: name.toLowerCase(), path: parseClaimPath(path) })))
    claimHeadersCache.set(config, parsed)
  }
  return parsed
}

/**
 * The identity headers a check's allow names for removal: every name of the union the answer does
 * not set, and every header the check received (Envoy's gRPC CheckRequest carries the client's
 * headers; its HTTP check those allow-listed) whose folded name is one of them but spelled
 * otherwise (`x_forwarded_user`). Envoy removes exact names, case-insensitively
 * (HeaderMap::remove on a LowerCaseString; external_auth.proto OkHttpResponse.headers_to_remove),
 * and `_` is not `-` to it: a spelling nobody names reaches the upstream, which a CGI-style
 * framework reads as the gateway's header. Spellings the check never sees are dropped at the
 * edge (docs/features/forward-auth.md: headers_with_underscores_action).
 */
export function identityHeadersToRemove(union: IdentityHeaderUnion, received: Readonly<Record<string, unknown>>, set: ReadonlySet<string>): string[] {
  const remove = set.size === 0 ? [...union.names] : union.names.filter((name) => !set.has(name))
  for (const key in received) {
    if (!union.has(key)) continue
    const lower = key.toLowerCase()
    // The canonical spelling is named above already; a name the answer sets overwrites the client's.
    if (lower.includes('_') && !set.has(lower)) remove.push(lower)
  }
  return remove
}

const lowerNamesCache = new WeakMap<IdentityHeaderNames, IdentityHeaderNames>()

/** The configured identity header names, lowercased (as Node and Envoy compare them), computed once per configuration. */
export function lowerNames(names: IdentityHeaderNames): IdentityHeaderNames {
  let lower = lowerNamesCache.get(names)
  if (lower === undefined) {
    lower = {
      user: names.user.toLowerCase(),
      email: names.email.toLowerCase(),
      groups: names.groups.toLowerCase(),
      preferredUsername: names.preferredUsername.toLowerCase(),
      issuer: names.issuer.toLowerCase(),
      acr: names.acr.toLowerCase(),
      amr: names.amr.toLowerCase(),
      authTime: names.authTime.toLowerCase(),
    }
    lowerNamesCache.set(names, lower)
  }
  return lower
}

/**
 * The value as it goes on the wire, or null to omit it. Refused: empty strings, any control
 * character (C0 incl. TAB/CR/LF/NUL, DEL, C1 incl. NEL U+0085) and U+2028/U+2029 (header injection
 * and log forging), leading or trailing spaces (HTTP strips them, RFC 9110 5.5, so `" admin"`
 * would arrive as `admin`), lone surrogates, and for group names a `,` (it would split one group
 * into two at the upstream).
 *
 * Node writes header strings as latin1 and throws on code points above U+00FF, so non-ASCII values
 * are returned as their UTF-8 bytes, one latin1 character per byte: the upstream receives UTF-8,
 * byte for byte what oauth2-proxy sends.
 */
function headerValue(v: unknown, isGroup: boolean): string | null {
  if (typeof v !== 'string' || v === '') return null
  const len = v.length
  if (v.charCodeAt(0) === 0x20 || v.charCodeAt(len - 1) === 0x20) return null
  let ascii = true
  for (let i = 0; i < len; i++) {
    const c = v.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return null
    if (isGroup && c === 0x2c) return null
    if (c < 0x80) continue
    ascii = false
    if (c <= 0x9f || c === 0x2028 || c === 0x2029) return null
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = v.charCodeAt(i + 1)
      if (!(next >= 0xdc00 && next <= 0xdfff)) return null
      i++
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return null
    }
  }
  return ascii ? v : Buffer.from(v, 'utf8').toString('latin1')
}

/**
 * The identity headers for the verified claims of a user of the provider `issuer`, keyed by the
 * lowercased configured names: user = the mapped user claim (`sub` unless the provider's
 * `userClaim` says another), email = `email`, groups = the mapped groups claim (`groups` unless
 * `groupsClaim` says another) joined with `,`, preferredUsername = `preferred_username`, issuer =
 * the provider's issuer (a `sub` is unique only within its issuer, OpenID Connect Core 2), then
 * the upstream's `claimHeaders` (claimHeaderValue). Absent, non-string or unsafe values are
 * omitted (see headerValue).
 */
export function identityHeaderValues(
  claims: Record<string, unknown>,
  names: IdentityHeaderNames,
  issuer: string,
  mapping: ClaimMapping = DEFAULT_CLAIM_MAPPING,
  extra: readonly ClaimHeader[] = NO_CLAIM_HEADERS,
): Readonly<Record<string, string>> {
  // A session's or a Bearer token's claims are frozen and shared by its requests (the cipher and
  // the Bearer verifier keep what they opened or verified), so their header values are computed
  // once; claims that may still change are not kept. A claims object belongs to one provider, so
  // its issuer and mapping are the same every time within one configuration.
  if (!Object.isFrozen(claims)) return computeIdentityHeaders(claims, names, issuer, mapping, extra)
  let perClaims = identityHeaderCache.get(names)
  if (perClaims === undefined) identityHeaderCache.set(names, (perClaims = new WeakMap()))
  // A configuration that maps nothing keeps the one cache it always had; a mapping or extra
  // headers (objects of one configuration) key a cache of their own.
  if (!mapping.isDefault || extra.length > 0) perClaims = mappedCache(perClaims, mapping, extra)
  let values = perClaims.get(claims)
  if (values === undefined) perClaims.set(claims, (values = Object.freeze(computeIdentityHeaders(claims, names, issuer, mapping, extra))))
  return values
}

type ValuesCache = WeakMap<object, Readonly<Record<string, string>>>

const identityHeaderCache = new WeakMap<IdentityHeaderNames, ValuesCache>()
const mappedCaches = new WeakMap<ValuesCache, WeakMap<ClaimMapping, WeakMap<readonly ClaimHeader[], ValuesCache>>>()

function mappedCache(base: ValuesCache, mapping: ClaimMapping, extra: readonly ClaimHeader[]): ValuesCache {
  let byMapping = mappedCaches.get(base)
  if (byMapping === undefined) mappedCaches.set(base, (byMapping = new WeakMap()))
  let byExtra = byMapping.get(mapping)
  if (byExtra === undefined) byMapping.set(mapping, (byExtra = new WeakMap()))
  let cache = byExtra.get(extra)
  if (cache === undefined) byExtra.set(extra, (cache = new WeakMap()))
  return cache
}

/**
 * The value of an extra identity header: a string as headerValue takes it, a finite number or a
 * boolean as its text, a list as its string, number and boolean elements (each without `,`, which
 * would split one into two at the upstream) comma-joined as groups are; null (the header left
 * out) for an object, null, nested lists and anything headerValue refuses.
 */
export function claimHeaderValue(v: unknown): string | null {
  if (Array.isArray(v)) {
    let joined = ''
    for (const element of v) {
      const value = headerValue(scalarText(element), true)
      if (value !== null) joined = joined === '' ? value : `${joined},${value}`
    }
    return joined === '' ? null : joined
  }
  return headerValue(scalarText(v), false)
}

function scalarText(v: unknown): unknown {
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : undefined
  if (typeof v === 'boolean') return String(v)
  return v
}

/** The extra identity headers of `claims`, by lowercased name (the assertion's `headers`). */
export function claimHeaderValues(claims: Readonly<Record<string, unknown>>, extra: readonly ClaimHeader[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (const header of extra) {
    const value = claimHeaderValue(claimAt(claims, header.path))
    if (value !== null) out[header.name] = value
  }
  return out
}

function computeIdentityHeaders(
  claims: Record<string, unknown>,
  names: IdentityHeaderNames,
  issuer: string,
  mapping: ClaimMapping,
  extra: readonly ClaimHeader[],
): Record<string, string> {
  const lower = lowerNames(names)
  const out: Record<string, string> = {}
  const get = (name: string): unknown => (Object.hasOwn(claims, name) ? claims[name] : undefined)
  const sub = headerValue(mapping.isDefault ? get('sub') : mappedUser(claims, mapping), false)
  if (sub !== null) out[lower.user] = sub
  const email = headerValue(get('email'), false)
  if (email !== null) out[lower.email] = email
  const rawGroups = mapping.isDefault ? get('groups') : mappedGroups(claims, mapping)
  const list = Array.isArray(rawGroups) ? rawGroups : typeof rawGroups === 'string' ? [rawGroups] : []
  let groups = ''
  for (const g of list) {
    const value = headerValue(g, true)
    if (value !== null) groups = groups === '' ? value : `${groups},${value}`
  }
  if (groups !== '') out[lower.groups] = groups
  const preferred = headerValue(get('preferred_username'), false)
  if (preferred !== null) out[lower.preferredUsername] = preferred
  const iss = headerValue(issuer, false)
  if (iss !== null) out[lower.issuer] = iss
  // How and when the user authenticated (step-up), when the provider said (OpenID Connect Core 2).
  const acr = headerValue(get('acr'), false)
  if (acr !== null) out[lower.acr] = acr
  const rawAmr = get('amr')
  let amr = ''
  if (Array.isArray(rawAmr)) {
    for (const m of rawAmr) {
      const value = headerValue(m, true)
      if (value !== null) amr = amr === '' ? value : `${amr},${value}`
    }
  }
  if (amr !== '') out[lower.amr] = amr
  // An implausible auth_time (0, before 2000, in the future) is no time of a sign-in: an
  // application would read 0 as a sign-in in 1970. Not knowing the provider, the future is judged
  // with the largest tolerance.
  const authTime = plausibleAuthTime(get('auth_time'), Math.floor(Date.now() / 1000), MAX_CLOCK_TOLERANCE_SECONDS)
  if (authTime !== undefined) out[lower.authTime] = String(authTime)
  if (extra.length > 0) Object.assign(out, claimHeaderValues(claims, extra))
  return out
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09
}

/**
 * Removes the gateway's cookies from a Cookie header (RFC 6265 5.4 `name=value; name=value`).
 * A pair is the gateway's when isGatewayCookie accepts its name (SP/HTAB trimmed, the way the
 * `cookie` parser behind @fastify/cookie reads it) and value; every occurrence is removed, and so
 * are the chunks (`<name>_1`…) of a removed cookie. Pairs without `=` are not cookies to that
 * parser and are kept. Returns the header unchanged when nothing was removed, the remaining pairs
 * byte for byte (only the SP/HTAB around each pair dropped) joined with `; ` otherwise, and
 * undefined when nothing remains.
 */
export function stripCookies(cookieHeader: string, isGatewayCookie: (name: string, value: string) => boolean): string | undefined {
  const len = cookieHeader.length
  // [from, to) of each kept pair; sliced only when something was removed.
  const kept: number[] = []
  /** [from, to) of each kept pair's name, for the chunk pass. */
  const keptNames: number[] = []
  let removed: Set<string> | undefined
  let start = 0
  while (start <= len) {
    let end = cookieHeader.indexOf(';', start)
    if (end === -1) end = len
    let from = start
    let to = end
    while (from < to && isOws(cookieHeader.charCodeAt(from))) from++
    while (to > from && isOws(cookieHeader.charCodeAt(to - 1))) to--
    if (from < to) {
      const eq = cookieHeader.indexOf('=', from)
      let nameTo = from
      let gateway = false
      if (eq !== -1 && eq < to) {
        nameTo = eq
        while (nameTo > from && isOws(cookieHeader.charCodeAt(nameTo - 1))) nameTo--
        let valueFrom = eq + 1
        while (valueFrom < to && isOws(cookieHeader.charCodeAt(valueFrom))) valueFrom++
        gateway = isGatewayCookie(cookieHeader.slice(from, nameTo), cookieHeader.slice(valueFrom, to))
      }
      if (gateway) (removed ??= new Set()).add(cookieHeader.slice(from, nameTo))
      else {
        kept.push(from, to)
        keptNames.push(from, nameTo)
      }
    }
    start = end + 1
  }
  if (removed === undefined) return kept.length === 0 ? undefined : cookieHeader
  let out: string | undefined
  for (let i = 0; i < kept.length; i += 2) {
    // The chunks of a removed cookie: its name, `_`, one digit.
    const name = cookieHeader.slice(keptNames[i], keptNames[i + 1])
    const chunkOf = name.length > 2 && name.charCodeAt(name.length - 2) === 0x5f && /[1-9]/.test(name.charAt(name.length - 1)) ? name.slice(0, -2) : undefined
    if (chunkOf !== undefined && removed.has(chunkOf)) continue
    const pair = cookieHeader.slice(kept[i], kept[i + 1])
    out = out === undefined ? pair : `${out}; ${pair}`
  }
  return out
}

/**
 * The name of the cookie a Set-Cookie value sets, as a browser stores it (RFC 6265bis 5.6): the
 * part before the first `=` of the name-value pair, SP/HTAB trimmed. A nameless cookie
 * (`=ogw=x`, or no `=` at all) is sent back as its bare value, which a server reads as
 * `ogw=x`: its name is then the part of the value before `=`.
 */
function setCookieName(setCookie: string): string {
  const semi = setCookie.indexOf(';')
  const pair = semi === -1 ? setCookie : setCookie.slice(0, semi)
  const eq = pair.indexOf('=')
  const name = (eq === -1 ? '' : pair.slice(0, eq)).replace(/^[ \t]+|[ \t]+$/g, '')
  if (name !== '') return name
  const value = eq === -1 ? pair : pair.slice(eq + 1)
  const valueEq = value.indexOf('=')
  return (valueEq === -1 ? '' : value.slice(0, valueEq)).replace(/^[ \t]+|[ \t]+$/g, '')
}

/**
 * The policy for an upstream's response headers: hop-by-hop headers stay behind (an upstream's
 * `Connection: keep-alive` would otherwise overrule the client's `Connection: close`), and no
 * Set-Cookie may set, overwrite or clear one of the gateway's cookies (session fixation through
 * an upstream, or a sign-out behind the gateway's back). Returns the headers that stay, in a new object.
 */
export function scrubResponseHeaders(headers: HeaderBag, isGatewayCookieName: (name: string) => boolean): HeaderBag {
  // Copied into a new object in one pass, as the request's (createHeaderScrubber).
  const out: HeaderBag = {}
  let named: Set<string> | undefined
  for (const key in headers) {
    const value = headers[key]
    if (isHopByHop(key)) {
      if (value !== undefined && isConnection(key)) named = connectionNames(value, named)
    } else if (isSetCookie(key)) {
      const list = (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter((c) => !isGatewayCookieName(setCookieName(c)))
      if (list.length > 0) out[key] = list
    } else {
      out[key] = value
    }
  }
  if (named !== undefined) dropNamed(out, named)
  return out
}

const isSetCookie = createHeaderNameTest(['set-cookie'])

/** RFC 6749 A.12: an access token is VSCHAR; anything else is not put in a header. */
export function isHeaderSafeToken(token: string): boolean {
  return VSCHAR.test(token)
}

const VSCHAR = /^[\x20-\x7e]+$/

/**
 * The `Authorization` value of HTTP Basic credentials (RFC 7617 2): `Basic` and the base64 of
 * `user-id:password` in UTF-8 (2.1, the charset a server asks for and every current one reads).
 * Undefined when the user-id cannot be sent: absent or empty, containing `:` (2: "a user-id
 * containing a colon character is invalid", the server would split it there), a control
 * character (2: neither part may contain one) or a lone surrogate (no UTF-8 for it). The password
 * is checked by the configuration (no control characters; `:` is allowed in it).
 */
export function basicCredentials(userId: unknown, password: string): string | undefined {
  if (typeof userId !== 'string' || userId === '') return undefined
  for (let i = 0; i < userId.length; i++) {
    const c = userId.charCodeAt(i)
    if (c < 0x20 || c === 0x7f || (c >= 0x80 && c <= 0x9f) || c === 0x3a) return undefined
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = userId.charCodeAt(i + 1)
      if (!(next >= 0xdc00 && next <= 0xdfff)) return undefined
      i++
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return undefined
    }
  }
  return `Basic ${Buffer.from(`${userId}:${password}`, 'utf8').toString('base64')}`
}
