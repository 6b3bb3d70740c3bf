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

/**
 * The X-Forwarded-* values to send upstream, computed from the incoming headers (read before
 * they are scrubbed), the socket peer and whether that peer is trusted.
 */
export function forwardedValues(
  incoming: Record<string, string | string[] | undefined>,
  peer: string | undefined,
  trusted: boolean,
  ownProto: string,
): ForwardedValues {
  const address = peer ?? ''
  const host = first(incoming.host) ?? ''
  if (!trusted) return { 'x-forwarded-for': address, 'x-forwarded-proto': ownProto, 'x-forwarded-host': host }
  const xff = first(incoming['x-forwarded-for'])
  return {
    'x-forwarded-for': xff === undefined || xff === '' ? address : `${xff}, ${address}`,
    'x-forwarded-proto': first(incoming['x-forwarded-proto']) ?? ownProto,
    'x-forwarded-host': first(incoming['x-forwarded-host']) ?? host,
  }
}
