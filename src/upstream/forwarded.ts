import { isIP } from 'node:net'
import type { TrustCheck } from '../ops/trusted-peers.js'

// X-Forwarded-* are only as trustworthy as the peer that sent them. From a peer listed in
// server.trustedProxies they are extended; from anyone else they are replaced with what the
// gateway itself sees, so a client cannot claim another address, scheme or host.

export interface ForwardedValues {
  'x-forwarded-for': string
  'x-forwarded-proto': string
  'x-forwarded-host': string
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

/** The X-Forwarded-Host an upstream receives for the host a request named (see createForwardedHost). */
export type ForwardedHost = (host: string) => string

/** Verdicts kept per host: the hosts of real traffic are a few; past the bound a host is judged without being kept. */
const HOST_MEMO_LIMIT = 256

/**
 * X-Forwarded-Host names a host the gateway serves, never one a client made up: an application
 * that builds absolute links from it (password-reset emails, OAuth redirect URIs, canonical
 * links) would otherwise send users to the attacker's host (Host header poisoning, the OWASP
 * testing guide's WSTG-INPV-17). The request's host is passed on when `isServed` accepts it (the
 * public URL's, a `match.hosts` entry's, a `redirects.allowedHosts` entry's); any other becomes
 * `publicHost`, the public URL's. The request itself is still served, so a sidecar reached as
 * `127.0.0.1:4180` keeps working; its application sees the public host.
 */
export function createForwardedHost(isServed: (host: string) => boolean, publicHost: string): ForwardedHost {
  const memo = new Map<string, string>()
  return (host) => {
    let forwarded = memo.get(host)
    if (forwarded === undefined) {
      forwarded = host !== '' && isServed(host) ? host : publicHost
      if (memo.size < HOST_MEMO_LIMIT) memo.set(host, forwarded)
    }
    return forwarded
  }
}

/**
 * The X-Forwarded-* values to send upstream, computed from the incoming headers (read before
 * they are scrubbed), the socket peer and whether that peer is trusted. The host, the request's
 * or a trusted peer's X-Forwarded-Host, goes through `forwardedHost`.
 */
export function forwardedValues(
  incoming: Record<string, string | string[] | undefined>,
  peer: string | undefined,
  trusted: boolean,
  ownProto: string,
  forwardedHost: ForwardedHost,
): ForwardedValues {
  const address = peer ?? ''
  const host = first(incoming.host) ?? ''
  if (!trusted) return { 'x-forwarded-for': address, 'x-forwarded-proto': ownProto, 'x-forwarded-host': forwardedHost(host) }
  const xff = first(incoming['x-forwarded-for'])
  return {
    'x-forwarded-for': xff === undefined || xff === '' ? address : `${xff}, ${address}`,
    'x-forwarded-proto': first(incoming['x-forwarded-proto']) ?? ownProto,
    'x-forwarded-host': forwardedHost(first(incoming['x-forwarded-host']) ?? host),
  }
}

/**
 * The client's address as the X-Forwarded-For decision sees it: the peer, unless it is a trusted
 * proxy; then the nearest address of its X-Forwarded-For that is not a trusted proxy itself (from
 * the right: the entries further left were written by hops nobody vouches for). Undefined when
 * the list holds something that is no address, or every hop in it is trusted.
 */
export function clientAddress(incoming: Record<string, string | string[] | undefined>, peer: string | undefined, isTrusted: TrustCheck): string | undefined {
  if (peer === undefined || !isTrusted(peer)) return peer
  const xff = first(incoming['x-forwarded-for'])
  // As forwardedValues: a trusted peer that names no one is the client itself.
  if (xff === undefined || xff === '') return peer
  const hops = xff.split(',')
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = (hops[i] ?? '').trim()
    // A hop that is no address is nobody's word for one: nothing goes into a signed statement.
    if (hop === '' || isIP(hop) === 0) return undefined
    if (!isTrusted(hop)) return hop
  }
  return undefined
}

/**
 * What the application behind each mode receives in Host, X-Forwarded-For, -Proto, -Host and
 * Forwarded, and who sets each: docs/proxying.md shows this table (test/docs/forwarded-table.test.ts
 * keeps the two equal; test/e2e/host-header.test.ts measures the proxy and WebSocket rows).
 *
 * Forwarded (RFC 7239) is never sent by the gateway, and a client's or a trusted peer's is removed
 * (header-policy.ts): section 8.1 says it "cannot be relied upon to be correct" since any node,
 * the client included, may write it, and section 7.4 warns that a proxy carrying it beside
 * X-Forwarded-* may hand on two contradicting accounts. The application has one: X-Forwarded-*.
 * X-Forwarded-Port, -Prefix and the rest of the family are removed and not set: the port is part
 * of X-Forwarded-Host, and the upstream sees the path the gateway matched, prefix included.
 * In the check modes the edge forwards the request itself; the gateway's answer sets or removes
 * none of these headers. Envoy's cells follow its header_sanitizing.rst (it sanitizes
 * x-forwarded-for and x-forwarded-proto of external requests, never x-forwarded-host or
 * forwarded) and headers.rst (x-forwarded-host appended only when the route rewrites the host).
 */
export const APPLICATION_RECEIVES: readonly (readonly [mode: string, host: string, xff: string, xfp: string, xfh: string, forwarded: string])[] = [
  [
    'Proxy, `passHostHeader: true` (the default)',
    'gateway: the same value as `X-Forwarded-Host`',
    "gateway: the peer's address; from a peer in `server.trustedProxies`, that peer's list followed by its address",
    "gateway: its listener's scheme; from a trusted peer, that peer's value",
    "gateway: the request's `Host` (from a trusted peer, its `X-Forwarded-Host`) when the gateway serves it, else `server.publicUrl`'s host",
    "none: the gateway removes the client's (and a trusted peer's) and sets none",
  ],
  ['Proxy, `passHostHeader: false`', "gateway: the host of the upstream's `target`", 'as above', 'as above', 'as above', 'as above'],
  [
    'WebSocket upgrade (`websocket: true`)',
    'as for the proxy, by `passHostHeader`',
    'as for the proxy',
    'as for the proxy',
    'as for the proxy',
    'as for the proxy',
  ],
  [
    'Forward-auth, ingress-nginx (`auth-url`)',
    "ingress-nginx: the client's `Host`",
    "ingress-nginx: the client's address (after the incoming list only with `use-forwarded-headers` and `compute-full-forwarded-for`)",
    'ingress-nginx: the scheme the client used (the incoming value with `use-forwarded-headers`)',
    "ingress-nginx: the client's `Host` (the incoming value with `use-forwarded-headers`)",
    "the client's, passed on: ingress-nginx neither sets nor removes it",
  ],
  [
    'Forward-auth, Traefik (ForwardAuth)',
    "Traefik: the client's `Host` (its `passHostHeader`, default true)",
    "Traefik: the client's address, after the client's list only from `forwardedHeaders.trustedIPs`",
    "Traefik: the entry point's scheme (a trusted IP's value)",
    "Traefik: the client's `Host` (a trusted IP's value)",
    "the client's, passed on: Traefik neither sets nor removes it",
  ],
  [
    'Envoy ext_authz, HTTP and gRPC',
    "Envoy: the client's `:authority`, unless the route rewrites the host",
    "Envoy: the client's address appended when it is the edge (`use_remote_address: true`)",
    "Envoy: the scheme of the client's connection; a trusted downstream's value kept",
    "the client's, passed on: Envoy sets it only when a route rewrites the host (`append_x_forwarded_host`)",
    "the client's, passed on: Envoy neither sets nor removes it",
  ],
]

/** APPLICATION_RECEIVES as the Markdown table of docs/proxying.md. */
export function applicationReceivesTable(): string {
  const lines = ['| Mode | `Host` | `X-Forwarded-For` | `X-Forwarded-Proto` | `X-Forwarded-Host` | `Forwarded` |', '| --- | --- | --- | --- | --- | --- |']
  for (const row of APPLICATION_RECEIVES) lines.push(`| ${row.join(' | ')} |`)
  return lines.join('\n')
}
