// Validation of the redirect endpoint's `redirectAfter` (the contract's open-redirect rules).
//
// An allowlist, checked in this order, each step on the raw value before any parser sees it, so a
// lenient parser can never turn a refused shape into an accepted one:
// 1. 1 to 2048 characters, every one printable ASCII (0x21-0x7E) except `\`. This alone refuses
//    CR/LF/TAB/NUL (the WHATWG URL parser silently strips TAB/LF/CR, so `/\t/evil` would become
//    `//evil`: oauth2-proxy GHSA-j7px-6hwj-hpjg), every other whitespace or control (U+0085,
//    U+00A0, U+2028, leading/trailing spaces), backslashes (`/\evil` is `//evil` to browsers:
//    oauth2-proxy GHSA-qqxw-m5fj-f7gv, CVE-2020-5233) and non-ASCII look-alikes (`〱evil.com`).
//    Non-ASCII paths must arrive percent-encoded and hosts in punycode.
// 2. Either a relative path (first character `/`, second not `/`: `//evil` is scheme-relative,
//    bitly/oauth2_proxy#228) or a string starting with `http://` or `https://` (ASCII
//    case-insensitive, RFC 3986 3.1). Anything else is refused: `javascript:`, `data:`, other
//    schemes, and `https:evil` / `https:/evil` / `https:///evil`, which WHATWG parsing would
//    quietly turn into `https://evil/`.
// 3. Percent-encoding in the path: well-formed, never an encoded `/` or `\` (`/%2F%2Fevil`
//    becomes `//evil` after one decoding by whoever follows the redirect), never a control
//    character, and never `%25` followed by a hex digit (`%252F` is `%2F` after one decoding;
//    a lone `%25`, as in `/100%25`, is what the proxy's path normalization also keeps). In the
//    query and fragment only well-formedness and encoded controls are checked: an encoded slash
//    there is normal (`?next=%2Fhome`) and is never read as a path or host by a browser.
// 4. No `//` inside the path: harmless to a browser, but never produced by the gateway (the proxy
//    collapses slashes) and the shape of many payloads (`/https://evil//`).
// 5. Absolute URLs: the authority is non-empty, contains no `@` (userinfo:
//    `https://app.example.com@evil.com`) and no `%` (`http://evil%2ecom` is decoded by the host
//    parser), and must already be in canonical form (lowercased equal to the parsed host), which
//    refuses numeric-IPv4 tricks (`http://0x7f.1`), explicit default ports and empty ports.
// 6. Only then WHATWG parsing, and the parsed result is what is compared: relative paths must
//    resolve to the public origin, absolute ones must have the public origin or an allowed host.
// The returned string is the parsed, re-serialized form (characters WHATWG escapes escaped, dot
// segments resolved as far as the runtime's parser does: Node 20's ada 2.9.2 leaves some, see
// ada-url/ada#935, which only changes the path on the same origin), so what the browser follows
// is what was checked.
//
// allowedHosts entries:
// - `host` or `host:port`: that exact hostname; without a port only on the scheme's default port
//   (an allowed `app.example.com` does not open `app.example.com:8443`).
// - `.example.com` (or `*.example.com`, accepted as the same thing for oauth2-proxy users): any
//   subdomain of example.com on a dot boundary AND example.com itself, as oauth2-proxy's
//   `--whitelist-domain` does. `evilexample.com` never matches (oauth2-proxy GHSA-4mf2-f3wh-gvf2,
//   CVE-2021-21291). Trailing-dot hosts (`example.com.`) are different hostnames and do not match.
// An entry that is not a canonical host[:port] throws at construction: an entry written as a URL
// (`https://app.example.com`) would otherwise silently never match.

import { BACKSLASH, HASH, PERCENT, QUESTION, SLASH, hexDigitAt, pctByte } from '../lib/url-chars.js'

export interface RedirectAfterOptions {
  /** The gateway's external origin, e.g. https://app.example.com */
  publicUrl: string
  /** `redirects.allowedHosts`: `host`, `host:port`, `.domain` or `.domain:port` entries. */
  allowedHosts: readonly string[]
}

/** Returns the safe target to redirect to, or null to refuse with 400. */
export type RedirectAfterValidator = (value: string) => string | null

export const REDIRECT_AFTER_MAX_LENGTH = 2048

interface HostRule {
  hostname: string
  /** `.hostname`, for the dot-boundary subdomain check; null for exact entries. */
  suffix: string | null
  /** Canonical decimal port, or null for "the scheme's default port". */
  port: string | null
}

const ABSOLUTE_PREFIX = /^https?:\/\//i
const HOST_RULE = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::([0-9]{1,5}))?$/

function parseHostRule(entry: string): HostRule {
  const invalid = (): TypeError => new TypeError(`redirects.allowedHosts: ${JSON.stringify(entry)} is not a host, host:port or .domain entry`)
  let rest = entry.toLowerCase()
  let subdomains = false
  if (rest.startsWith('*.')) {
    subdomains = true
    rest = rest.slice(2)
  } else if (rest.startsWith('.')) {
    subdomains = true
    rest = rest.slice(1)
  }
  const m = HOST_RULE.exec(rest)
  if (m === null) throw invalid()
  const host = m[1] ?? ''
  let port: string | null = null
  if (m[2] !== undefined) {
    const n = Number(m[2])
    if (n < 1 || n > 65535) throw invalid()
    port = String(n)
  }
  let parsed: URL
  try {
    parsed = new URL(`http://${host}/`)
  } catch {
    throw invalid()
  }
  // Canonical form only: `0x7f.1`, IDN in Unicode, or anything the host parser rewrites would
  // make the entry match something other than what the operator wrote.
  if (parsed.hostname !== host || parsed.username !== '' || parsed.password !== '') throw invalid()
  return { hostname: host, suffix: subdomains ? `.${host}` : null, port }
}

/** Whether `rule` names `hostname`: the host itself, or for a `.domain` entry a subdomain of it (at a dot boundary). */
function namesHost(rule: HostRule, hostname: string): boolean {
  return hostname === rule.hostname || (rule.suffix !== null && hostname.length > rule.suffix.length && hostname.endsWith(rule.suffix))
}

function defaultPort(protocol: string): string {
  return protocol === 'https:' ? '443' : '80'
}

/**
 * Checks the percent-encodings of value[from, to). In the path (strict) an encoded `/`, `\` or a
 * `%25` followed by a hex digit is refused as well as controls.
 */
function percentOk(value: string, from: number, to: number, strict: boolean): boolean {
  let i = value.indexOf('%', from)
  while (i !== -1 && i < to) {
    const b = pctByte(value, i)
    if (b < 0) return false
    if (b < 0x20 || b === 0x7f) return false
    // C1 controls (U+0080-U+009F, NEL among them) in their UTF-8 form %C2%80-%C2%9F.
    if (b === 0xc2 && value.charCodeAt(i + 3) === PERCENT) {
      const next = pctByte(value, i + 3)
      if (next >= 0x80 && next <= 0x9f) return false
    }
    if (strict) {
      if (b === SLASH || b === BACKSLASH) return false
      if (b === PERCENT && hexDigitAt(value, i + 3)) return false
    }
    i = value.indexOf('%', i + 3)
  }
  return true
}

function hasDoubleSlash(value: string, from: number, to: number): boolean {
  const i = value.indexOf('//', from)
  return i !== -1 && i + 1 < to
}

/** End of the path part: the first `?` or `#` at or after from, or the length. */
function pathEnd(value: string, from: number): number {
  for (let i = from; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c === QUESTION || c === HASH) return i
  }
  return value.length
}

/**
 * For a refused absolute `redirectAfter` whose host an entry names, but on another port: the
 * entry that would allow it (`.example.com:8443`, `app.example.com:8443`), or undefined. A port is
 * part of the origin (RFC 6454 4) and another port of an allowed host is often another program
 * (a development server, anything a local user may bind above 1024), and the same entries decide
 * which pages may open WebSockets and send the sign-out form: an entry never covers other ports,
 * as oauth2-proxy's `--whitelist-domain` without a port covers only the scheme's default one.
 * The refusal says which entry to add instead, which is what an operator otherwise guesses.
 */
export function createPortHint(options: RedirectAfterOptions): (value: string) => string | undefined {
  const rules = options.allowedHosts.map(parseHostRule)
  return (value) => {
    if (!ABSOLUTE_PREFIX.test(value)) return undefined
    let url: URL
    try {
      url = new URL(value)
    } catch {
      return undefined
    }
    const port = url.port === '' ? defaultPort(url.protocol) : url.port
    for (const rule of rules) {
      if (namesHost(rule, url.hostname) && (rule.port ?? defaultPort(url.protocol)) !== port)
        return `${rule.suffix === null ? '' : '.'}${rule.hostname}:${port}`
    }
    return undefined
  }
}

export function createRedirectAfterValidator(options: RedirectAfterOptions): RedirectAfterValidator {
  const base = new URL(options.publicUrl)
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new TypeError('server.publicUrl must be an http(s) URL')
  }
  const publicOrigin = base.origin
  const rules = options.allowedHosts.map(parseHostRule)

  function hostAllowed(url: URL): boolean {
    const hostname = url.hostname
    const explicitPort = url.port
    for (const rule of rules) {
      if (rule.port === null) {
        if (explicitPort !== '') continue
      } else if ((explicitPort === '' ? defaultPort(url.protocol) : explicitPort) !== rule.port) {
        continue
      }
      if (namesHost(rule, hostname)) return true
    }
    return false
  }

  function relative(value: string): string | null {
    if (value.charCodeAt(1) === SLASH) return null
    const end = pathEnd(value, 1)
    if (!percentOk(value, 0, end, true) || !percentOk(value, end, value.length, false)) return null
    if (hasDoubleSlash(value, 0, end)) return null
    let url: URL
    try {
      url = new URL(value, publicOrigin)
    } catch {
      return null
    }
    if (url.origin !== publicOrigin) return null
    const out = url.pathname + url.search + url.hash
    // Defence in depth: whatever the serializer did, the result is still a single-slash path.
    const second = out.charCodeAt(1)
    if (out.charCodeAt(0) !== SLASH || second === SLASH || second === BACKSLASH) return null
    return out === value ? value : out
  }

  function absolute(value: string): string | null {
    if (!ABSOLUTE_PREFIX.test(value)) return null
    const authorityStart = value.indexOf('//') + 2
    let authorityEnd = value.length
    for (let i = authorityStart; i < value.length; i++) {
      const c = value.charCodeAt(i)
      if (c === SLASH || c === QUESTION || c === HASH) {
        authorityEnd = i
        break
      }
    }
    const authority = value.slice(authorityStart, authorityEnd)
    if (authority === '' || authority.includes('@') || authority.includes('%')) return null
    const end = pathEnd(value, authorityEnd)
    if (!percentOk(value, authorityEnd, end, true) || !percentOk(value, end, value.length, false)) {
      return null
    }
    if (hasDoubleSlash(value, authorityEnd, end)) return null
    let url: URL
    try {
      url = new URL(value)
    } catch {
      return null
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null
    if (url.username !== '' || url.password !== '') return null
    if (url.host !== authority.toLowerCase()) return null
    if (url.origin !== publicOrigin && !hostAllowed(url)) return null
    return url.href
  }

  return function validateRedirectAfter(value: string): string | null {
    if (typeof value !== 'string') return null
    const len = value.length
    if (len === 0 || len > REDIRECT_AFTER_MAX_LENGTH) return null
    for (let i = 0; i < len; i++) {
      const c = value.charCodeAt(i)
      if (c <= 0x20 || c >= 0x7f || c === BACKSLASH) return null
    }
    return value.charCodeAt(0) === SLASH ? relative(value) : absolute(value)
  }
}

/** Whether an `Origin` header names a page of the application (the sign-out form, WebSockets). */
export type TrustedOriginTest = (origin: string) => boolean

/** A serialized origin as browsers send it (RFC 6454 6.1): scheme, host and optional port, nothing else. */
const SERIALIZED_ORIGIN = /^https?:\/\/[^/?#@\\\s]+$/i

/**
 * The origins whose pages may send the sign-out form and open WebSockets with the user's
 * cookies: the public origin, and an allowed host (redirects.allowedHosts, the application's
 * sites) over https only, unless the gateway itself is served over http (a development setup).
 * An http page of an allowed host can be written by anyone on the network path (RFC 6454 3:
 * the scheme is part of the origin for that reason), so it may be a place a sign-in returns to,
 * never a page trusted to act with the user's session. `null` (opaque origins) and anything that
 * is not a serialized origin are refused.
 */
export function createTrustedOriginTest(options: RedirectAfterOptions): TrustedOriginTest {
  const validate = createRedirectAfterValidator(options)
  const publicUrl = new URL(options.publicUrl)
  const httpServed = publicUrl.protocol === 'http:'
  return function isTrustedOrigin(origin) {
    if (!SERIALIZED_ORIGIN.test(origin)) return false
    if (origin === publicUrl.origin) return true
    if (!httpServed && !origin.toLowerCase().startsWith('https://')) return false
    return validate(`${origin}/`) !== null
  }
}
