import { BlockList, isIPv4, isIPv6 } from 'node:net'

// Which peers the server believes: server.trustedProxies, a list of addresses and subnets, is the
// one test of the peers whose X-Forwarded-* and client address (upstream/forwarded.ts) and whose
// traceparent (request-tracing.ts) the gateway takes; from any other peer they are replaced or
// ignored. Node's BlockList matches the subnets.

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
