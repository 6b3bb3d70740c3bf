// Which upstream a (host, path) belongs to, answered the way the proxy's router answers it. The
// forward-auth endpoint needs this: it applies the rules of the upstream a request is for without
// routing that request, and a second opinion that differed from the router's would let the ingress
// check a request against one upstream's rules while it is served under another's.
//
// What the router does (plugin.ts registers, per upstream, the Fastify routes `<prefix>`,
// `<prefix>/` and `<prefix>/*`, constrained to the upstream's hosts), as find-my-way 9 decides:
// - The longest prefix on a segment boundary wins (`/app` serves `/app`, `/app/` and `/app/x`,
//   never `/apple`): static nodes are tried before wildcards, and when the longest route has no
//   handler for the request's host the router backtracks to the next shorter wildcard.
// - At one prefix, a route constrained to the request's host wins over the unconstrained one. The
//   host constraint is a case-insensitive RegExp that accepts any port after the name, so an entry
//   `app.example.com` serves `APP.example.com:8443` and an entry `app.example.com:8443` only that
//   port. When several constrained routes at one prefix match (overlapping host lists, which the
//   configuration allows), find-my-way returns the first one registered: the first in config order.
// - Paths are compared case-sensitively after decodeURI with `%25` kept as is (find-my-way's
//   safeDecodeURI), so a prefix written `/café` serves the normalized request path `/caf%C3%A9`,
//   while reserved characters (`%2C`, `%3A`, ...) stay encoded and `/a%2Cb` is not `/a,b`.
// - A prefix is a literal string: the configuration refuses `:` and `*` (a parameter and a
//   wildcard to find-my-way) and `%` (a literal percent sign to it, which never equals a decoded
//   request path), see checkPathPrefix in config/formats.ts.
// - `/api/v1/openid` and everything below it belong to the gateway's own routes (reserved.ts),
//   never to an upstream.
//
// test/access/match.test.ts cross-checks this function against the real router.

import type { UpstreamConfig } from '../options/types.js'
import { asciiLower } from '../lib/url-chars.js'
import { isGatewayPath } from '../contract/endpoints.js'

/** `path` is a normalized path (normalizePath in path.ts) without its query. */
export type UpstreamMatcher = (host: string, path: string) => UpstreamConfig | undefined

const PORT_DIGITS = /^[0-9]*$/

/** A Host-header value: a DNS-ish name, IPv4 or bracketed IPv6, optional port. No lists. */
const HOST = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_.])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{0,5})?$/

export function isHostValue(value: string): boolean {
  return HOST.test(value)
}

/**
 * The one spelling of a Host value that every host decision uses (the router, forward-auth's
 * matcher, the cookie-reach warning, X-Forwarded-Host): ASCII-lowercased, trailing dots of the
 * name removed (`app.example.com.` is the same DNS name, and nginx and browsers treat it so), an
 * empty port removed (`app.example.com:` is RFC 3986's way of writing no port) and leading zeros
 * of the port dropped. Without it, `Host: SECURE.example.com.` skipped an upstream constrained to
 * `secure.example.com` and reached an unconstrained one with weaker rules. Anything that is not a
 * name or bracketed address with an optional numeric port is only lowercased: it matches no
 * configured host either way.
 */
export function canonicalHost(host: string): string {
  const lower = asciiLower(host)
  const colon = lower.lastIndexOf(':')
  const bracketed = lower.charCodeAt(0) === 0x5b
  let name = lower
  let port = ''
  if (colon !== -1 && (!bracketed || lower.indexOf(']') < colon)) {
    name = lower.slice(0, colon)
    port = lower.slice(colon + 1)
    // An unbracketed IPv6 address, or a port that is not digits: not a Host value to rewrite.
    if ((!bracketed && name.includes(':')) || !PORT_DIGITS.test(port)) return lower
  }
  let end = name.length
  while (end > 1 && name.charCodeAt(end - 1) === 0x2e) end--
  name = name.slice(0, end)
  if (port === '') return name
  let start = 0
  while (start < port.length - 1 && port.charCodeAt(start) === 0x30) start++
  return `${name}:${port.slice(start)}`
}

/**
 * RFC 9112 3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1
 * request message that lacks a Host header field and to any request message that contains more
 * than one Host header field line". Node keeps the first Host and drops the others from
 * `headers`, while a proxy in front may have read another one (request routing or cache
 * poisoning): the raw lines are counted. Node's own requireHostHeader answers the missing one.
 */
export function repeatsHost(rawHeaders: readonly string[]): boolean {
  let seen = false
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string
    // `host` in any ASCII case, compared by code unit: this runs on every request.
    if (
      name.length === 4 &&
      (name.charCodeAt(0) | 0x20) === 0x68 &&
      (name.charCodeAt(1) | 0x20) === 0x6f &&
      (name.charCodeAt(2) | 0x20) === 0x73 &&
      (name.charCodeAt(3) | 0x20) === 0x74
    ) {
      if (seen) return true
      seen = true
    }
  }
  return false
}

/**
 * Whether the gateway serves a (canonical) Host value: one of the upstreams' `match.hosts`,
 * with any port as the router reads them, or one `isOwnHost` accepts (the public URL's host and
 * `redirects.allowedHosts`). A value that is not a host (a list, a path, userinfo) is not served.
 */
export function createServedHostTest(upstreams: readonly UpstreamConfig[], isOwnHost: (host: string) => boolean): (host: string) => boolean {
  const hosts = upstreams.flatMap((upstream) => upstream.match.hosts ?? [])
  const matched = hosts.length === 0 ? undefined : hostPattern(hosts)
  return (host) => isHostValue(host) && (matched?.test(host) === true || isOwnHost(host))
}

/**
 * The host constraint of an upstream's routes: one of the names, any port or none, any case. The
 * request's Host is canonical by then (canonicalHost, applied in app.ts before routing).
 */
export function hostPattern(hosts: readonly string[]): RegExp {
  const names = hosts.map((h) => h.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')
  return new RegExp(`^(?:${names})(?::\\d+)?$`, 'i')
}

/**
 * The path as find-my-way compares it, or undefined where it would refuse it (a bad URL). The
 * per-path rules of an upstream (rules.ts) compare their prefixes with the same spelling.
 */
export function routerPath(path: string): string | undefined {
  if (!path.includes('%')) return path
  try {
    // find-my-way re-encodes `%25` before decodeURI so that it stays `%25`.
    return path.split('%25').map(decodeURI).join('%25')
  } catch {
    return undefined
  }
}

/** `path` is `prefix` or below it, on a segment boundary (`/app` covers `/app/x`, never `/apple`). */
export function underPrefix(prefix: string, path: string): boolean {
  if (prefix === '/') return true
  return path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 0x2f)
}

interface Entry {
  upstream: UpstreamConfig
  prefix: string
  hosts: RegExp | undefined
  index: number
}

export function createUpstreamMatcher(upstreams: readonly UpstreamConfig[]): UpstreamMatcher {
  // Longest prefix first; at one prefix the host-constrained routes (in config order) before the
  // unconstrained one. The first entry that serves the path and the host is the router's answer.
  const entries: Entry[] = upstreams
    .map((upstream, index) => ({
      upstream,
      prefix: upstream.match.pathPrefix,
      hosts: upstream.match.hosts === undefined ? undefined : hostPattern(upstream.match.hosts),
      index,
    }))
    .sort((a, b) => b.prefix.length - a.prefix.length || Number(a.hosts === undefined) - Number(b.hosts === undefined) || a.index - b.index)
  return (host, path) => {
    const routed = routerPath(path)
    if (routed === undefined || isGatewayPath(routed)) return undefined
    for (const entry of entries) {
      if (!underPrefix(entry.prefix, routed)) continue
      if (entry.hosts === undefined || entry.hosts.test(host)) return entry.upstream
    }
    return undefined
  }
}
