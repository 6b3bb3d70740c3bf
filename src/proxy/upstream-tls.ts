import { createRequire } from 'node:module'
import { isIP } from 'node:net'
import type { FastifyHttpProxyOptions } from '@fastify/http-proxy'

// The TLS name an https upstream is verified against is its `target`'s host, whatever Host the
// request carries. undici derives a request's TLS server name (SNI, RFC 6066 section 3) from its
// Host header (lib/core/request.js getServerName), and Node checks the certificate against that
// name (RFC 9110 4.3.4, RFC 6125): with passHostHeader the Host is the public one, so an upstream
// whose certificate names only itself (the usual internal certificate) became unreachable, and
// the certificate that counted was one for a name the operator never configured as the target.
// As nginx (proxy_ssl_name defaults to the proxied host) and Traefik (serversTransport) do, the
// connection's identity is the target's; the Host header is the application's business. An IP
// target sends no SNI and is verified against its address, as before.

type PoolOptions = Exclude<NonNullable<FastifyHttpProxyOptions['undici']>, { request: unknown }>
/** undici's connector: `(options, callback)`, the `connect` function its Agent accepts. */
type Connector = Extract<NonNullable<PoolOptions['connect']>, (...args: never[]) => unknown>

/**
 * The undici that @fastify/reply-from dispatches with (resolved through @fastify/http-proxy, this
 * project's dependency), so the connector is that copy's, with its errors and session cache.
 */
const undici = createRequire(createRequire(createRequire(import.meta.url).resolve('@fastify/http-proxy')).resolve('@fastify/reply-from'))('undici') as {
  buildConnector(options: Record<string, unknown>): Connector
}

/** The TLS server name for a target URL: its host name, or '' (no SNI) for an IP address. */
export function targetServerName(target: string): string {
  const host = new URL(target).hostname
  return isIP(host.startsWith('[') ? host.slice(1, -1) : host) === 0 ? host : ''
}

/**
 * The connector of an upstream's pool: undici's own, with the certificate verified (against
 * Node's CA store) for the target's host name, and `timeoutMs` to open a connection.
 */
export function upstreamConnector(target: string, timeoutMs: number): Connector {
  const connect = undici.buildConnector({ timeout: timeoutMs, rejectUnauthorized: true })
  const servername = targetServerName(target)
  return (options, callback) => connect({ ...options, servername }, callback)
}
