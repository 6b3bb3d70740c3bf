import type { IncomingHttpHeaders } from 'node:http'
import { GatewayError } from '../contract/errors.js'

// What an upgrade request must pass before its upstream sees it, besides the access rules every
// request passes: the upstream must take WebSockets at all, and the page that opens the socket
// must be the gateway's or an allowed host's (cross-site WebSocket hijacking: a browser sends the
// user's cookies with a WebSocket handshake to any site, and the same-origin policy does not
// apply to WebSockets).

/** True for an `Origin` whose pages the gateway trusts (routes/redirect-after.ts createTrustedOriginTest). */
export type TrustedOriginTest = (origin: string) => boolean

/** A request asking to switch protocols: Upgrade, and `upgrade` among the Connection options. */
export function isUpgradeRequest(headers: IncomingHttpHeaders): boolean {
  const connection = headers.connection
  if (headers.upgrade === undefined || connection === undefined) return false
  return connection.split(',').some((token) => token.trim().toLowerCase() === 'upgrade')
}

export interface UpgradePolicyOptions {
  /** The upstream's name, for the refusal's detail. */
  upstream: string
  /** `websocket: true` on the upstream. */
  websocket: boolean
  isTrustedOrigin: TrustedOriginTest
}

/**
 * The upgrade rules of one upstream, run before its access decision; throws the refusal. The
 * connection is closed with the answer: an unanswered upgrade kept the socket open for good.
 *
 * Origin: the public origin, or an allowed host over https (the same list as `redirectAfter`
 * says which sites are the application's; an http page on it is no page of the application's
 * unless the gateway itself is served over http). `Origin: null` (sandboxed frames, file: pages) is
 * refused. Without Origin the upgrade passes: browsers always send it on WebSocket handshakes,
 * so its absence means a non-browser client, which holds its own credentials and cannot be
 * tricked into lending a user's.
 */
export function createUpgradePolicy(options: UpgradePolicyOptions): (headers: IncomingHttpHeaders) => void {
  const close = { connection: 'close' }
  return function enforceUpgradePolicy(headers) {
    if (!isUpgradeRequest(headers)) return
    if (!options.websocket) {
      throw new GatewayError('bad_request', `the upstream ${options.upstream} does not accept WebSocket upgrades`, { headers: close })
    }
    const origin = headers.origin
    if (origin === undefined) return
    if (!options.isTrustedOrigin(origin)) {
      throw new GatewayError('forbidden', 'WebSocket connections from this origin are not allowed', { headers: close })
    }
  }
}
