// Request-target normalization. Every auth decision (upstream match, public paths) and the request
// forwarded to the upstream use the same normalized path, so the gateway and the upstream can never
// disagree about which resource was asked for (the parser-differential class behind most path-based
// auth bypasses: `/public/../admin`, `/admin;x=y`, `/%2e%2e/`, `//admin`, `/a%2Fb`).
//
// What is refused (null, the caller answers 400) rather than rewritten:
// - anything that is not origin-form (RFC 9112 3.2.1): `*`, absolute-form `http://h/p` (the gateway
//   is not a forward proxy; an absolute-form host could disagree with the Host header);
// - `#` anywhere: RFC 9112 3.2 has no fragment in a request-target;
// - raw bytes outside printable ASCII (controls, space, DEL, and 0x80-0xFF, which Node exposes as
//   latin1 characters): RFC 3986 2.1 requires them percent-encoded, and upstreams decode raw octets
//   differently (latin1, UTF-8, overlong forms);
// - raw `\` and `%5C`: Windows/IIS and some frameworks treat it as a separator;
// - `%2F`: an encoded slash is one segment to us but two to an upstream that decodes before routing;
// - `;` and `%3B`: Tomcat/Spring/Jetty strip path parameters, so `/admin;x=y` is `/admin` to them
//   (and Spring Security's StrictHttpFirewall refuses both forms for the same reason);
// - encoded control characters (C0, DEL, and C1 U+0080-U+009F when UTF-8 encoded);
// - `%25` directly followed by a hex digit: a second decoding pass upstream would turn `%252e` into
//   `%2e` and then into `.`; a lone `%25` (as in `/100%25`) is kept;
// - malformed percent-encoding and invalid UTF-8 (RFC 3629: overlong forms such as `%C0%AE`,
//   surrogates, code points above U+10FFFF): lenient decoders turn `%C0%AE` into `.`.
//
// What is rewritten:
// - percent-encoded unreserved characters (RFC 3986 2.3) are decoded (RFC 3986 6.2.2.2), so
//   `/%61dmin` is `/admin` and `%2e%2e` becomes a dot segment that is then resolved;
// - every other percent-encoding keeps its bytes with uppercase hex (RFC 3986 6.2.2.1);
// - runs of `/` collapse into one (as nginx merge_slashes), before dot segments are resolved;
// - `.` and `..` segments are removed per RFC 3986 5.2.4; `..` above the root stays at the root.
//
// A segment with a trailing dot (`/admin.`) is a different path and is kept as is: the matchers are
// default-deny with public exceptions, so an upstream that strips the dot (Windows) only sees a
// request the gateway already treated as the unknown, protected path `/admin.`.

import { BACKSLASH, DOT, HASH, PERCENT, QUESTION, SEMICOLON, SLASH, hexDigitAt, pctByte } from '../lib/url-chars.js'

export interface NormalizedPath {
  /** The normalized path, always starting with `/`. */
  path: string
  /** The query exactly as received, with its leading `?`, or ''. */
  search: string
}

const HEX_DIGITS = '0123456789ABCDEF'

// RFC 3986 2.3 unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"
const UNRESERVED = new Uint8Array(128)
for (let c = 0x30; c <= 0x39; c++) UNRESERVED[c] = 1
for (let c = 0x41; c <= 0x5a; c++) UNRESERVED[c] = 1
for (let c = 0x61; c <= 0x7a; c++) UNRESERVED[c] = 1
UNRESERVED[0x2d] = 1
UNRESERVED[0x2e] = 1
UNRESERVED[0x5f] = 1
UNRESERVED[0x7e] = 1

/**
 * Validates the UTF-8 sequence whose percent-encoded lead byte sits at i (RFC 3629 section 4
 * table; every byte of the sequence must itself be percent-encoded). Returns the number of
 * characters of input it spans, or -1 when invalid or a C1 control character.
 */
function utf8SequenceSpan(s: string, i: number, lead: number): number {
  let count: number
  let lo = 0x80
  let hi = 0xbf
  if (lead >= 0xc2 && lead <= 0xdf) {
    count = 1
    // U+0080-U+009F are the C1 control characters (NEL U+0085 among them).
    if (lead === 0xc2) lo = 0xa0
  } else if (lead >= 0xe0 && lead <= 0xef) {
    count = 2
    if (lead === 0xe0)
      lo = 0xa0 // overlong
    else if (lead === 0xed) hi = 0x9f // UTF-16 surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    count = 3
    if (lead === 0xf0)
      lo = 0x90 // overlong
    else if (lead === 0xf4) hi = 0x8f // above U+10FFFF
  } else {
    // 0x80-0xC1 (continuation byte or overlong 2-byte lead) and 0xF5-0xFF never start a sequence.
    return -1
  }
  let j = i + 3
  for (let k = 0; k < count; k++, j += 3) {
    if (s.charCodeAt(j) !== PERCENT) return -1
    const b = pctByte(s, j)
    if (b < lo || b > hi) return -1
    lo = 0x80
    hi = 0xbf
  }
  return j - i
}

function upperPct(s: string, i: number, span: number): string {
  let out = ''
  for (let j = i; j < i + span; j += 3) {
    const b = pctByte(s, j)
    out += '%' + HEX_DIGITS.charAt(b >> 4) + HEX_DIGITS.charAt(b & 15)
  }
  return out
}

/** Decodes, collapses and resolves a path already scanned for forbidden raw characters. */
function normalizeSlow(p: string): string | null {
  const segments: string[] = []
  let trailingSlash = false
  const len = p.length
  let i = 1 // p[0] is '/'
  for (;;) {
    let segment = ''
    let runStart = i
    let j = i
    while (j < len) {
      const c = p.charCodeAt(j)
      if (c === SLASH) break
      if (c !== PERCENT) {
        j++
        continue
      }
      const b = pctByte(p, j)
      if (b < 0) return null
      segment += p.slice(runStart, j)
      if (b < 0x80) {
        if (b < 0x20 || b === 0x7f || b === SLASH || b === BACKSLASH || b === SEMICOLON) return null
        if (UNRESERVED[b] === 1) {
          segment += String.fromCharCode(b)
        } else {
          if (b === PERCENT && hexDigitAt(p, j + 3)) return null
          segment += upperPct(p, j, 3)
        }
        j += 3
      } else {
        const span = utf8SequenceSpan(p, j, b)
        if (span < 0) return null
        segment += upperPct(p, j, span)
        j += span
      }
      runStart = j
    }
    segment += p.slice(runStart, j)
    const last = j >= len
    if (segment === '' || segment === '.') {
      // Empty segments are the runs of '/' we collapse; a final one is a trailing slash.
      if (last) trailingSlash = true
    } else if (segment === '..') {
      segments.pop()
      if (last) trailingSlash = true
    } else {
      segments.push(segment)
    }
    if (last) break
    i = j + 1
  }
  if (segments.length === 0) return '/'
  return '/' + segments.join('/') + (trailingSlash ? '/' : '')
}

/**
 * Normalizes an origin-form request-target. Returns the path every auth decision uses and the
 * upstream receives, plus the untouched query; null when the target must be refused with 400.
 */
export function normalizePath(rawUrl: string): NormalizedPath | null {
  const len = rawUrl.length
  if (len === 0 || rawUrl.charCodeAt(0) !== SLASH) return null
  let query = -1
  let slow = false
  for (let i = 0; i < len; i++) {
    const c = rawUrl.charCodeAt(i)
    if (c === QUESTION) {
      query = i
      break
    }
    if (c <= 0x20 || c >= 0x7f || c === HASH || c === BACKSLASH || c === SEMICOLON) return null
    if (c === PERCENT) {
      slow = true
    } else if (c === SLASH) {
      const next = rawUrl.charCodeAt(i + 1)
      if (next === SLASH || next === DOT) slow = true
    }
  }
  let search = ''
  if (query !== -1) {
    // The query is the upstream's business and is forwarded as is, but it may not smuggle a
    // fragment or raw control characters (RFC 3986 3.4).
    for (let i = query + 1; i < len; i++) {
      const c = rawUrl.charCodeAt(i)
      if (c <= 0x20 || c === 0x7f || c === HASH) return null
    }
    search = rawUrl.slice(query)
  }
  const rawPath = query === -1 ? rawUrl : rawUrl.slice(0, query)
  if (!slow) return { path: rawPath, search }
  const path = normalizeSlow(rawPath)
  return path === null ? null : { path, search }
}

/**
 * Whether `rawUrl` is already in the normal form normalizePath gave (`normalized`): its path, byte
 * for byte. A check endpoint decides only on such a target. It describes a request the gateway
 * does not forward: the ingress forwards the client's own spelling, and the upstream resolves it
 * its own way (RFC 3986 5.2.4 keeps the empty segment of `/admin//../users` for the `..` to remove,
 * so the upstream reads `/admin/users` where a normalizer that merges slashes first reads
 * `/users`; a prefix router that resolves nothing routes `/admin/../users` to `/admin`). A verdict
 * for any rewritten spelling would be a verdict for another path.
 */
export function isInNormalForm(rawUrl: string, normalized: NormalizedPath): boolean {
  const query = rawUrl.indexOf('?')
  const pathLength = query === -1 ? rawUrl.length : query
  return pathLength === normalized.path.length && rawUrl.startsWith(normalized.path)
}
