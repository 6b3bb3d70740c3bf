import { BlockList, isIPv4, isIPv6 } from 'node:net'

// X-Forwarded-* are only as trustworthy as the peer that sent them. From a peer listed in
// server.trustedProxies they are extended; from anyone else they are replaced with what the
// gateway itself sees, so a client cannot claim another address, scheme or host.

export type TrustCheck = (address: string | undefined) => boolean

export function createTrustCheck(entries: readonly string[]): TrustCheck {
  if (entries.length === 0) return () => false
  const list = new BlockList()
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/')
    const type = isIPv6(address) ? 'ipv6' : 'ipv4'
    if (bits === undefined) list.addAddress(address, type)
    else list.addSubnet(address, Number(bits), type)
  }
  return (address) => {
    if (address === undefined) return false
    // Dual-stack sockets report IPv4 peers as IPv4-mapped IPv6 addresses.
    const v4 = address.startsWith('::ffff:') ? address.slice(7) : undefined
    if (v4 !== undefined && isIPv4(v4)) return list.check(v4, 'ipv4')
    return list.check(address, isIPv6(address) ? 'ipv6' : 'ipv4')
  }
}

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
