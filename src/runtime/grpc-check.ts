import type { GatewayApp } from '../app/app.js'
import { startExtAuthzGrpc, type ExtAuthzGrpc } from '../checks/envoy-grpc/server.js'
import type { ReadinessCheck } from '../ops/management.js'

// The gRPC ext_authz service in front of the running app: each Check is the running app's
// envoyGrpcCheck (checks/envoy-http.ts), the decision and rendering of the HTTP ext_authz route,
// asked without an HTTP request. The running app is looked up per check, so a reload applies to
// gRPC checks at once.

export interface ServeOptions {
  host: string
  port: number
  /** The app serving now, looked up per check (a reload swaps it). */
  running: () => GatewayApp
  /** The gateway's readiness checks (those of /readyz). */
  checks: () => readonly ReadinessCheck[]
  /** True while the process drains: the health service then says NOT_SERVING. */
  draining?: () => boolean
}

/**
 * The ext_authz gRPC service in front of the running app. Its health service reports the
 * gateway's readiness, looked at once a second (the checks are asynchronous, a health answer is
 * not).
 */
export async function serveExtAuthzGrpc(options: ServeOptions): Promise<ExtAuthzGrpc> {
  const draining = options.draining ?? (() => false)
  let ready = false
  const look = async (): Promise<void> => {
    ready = !draining() && (await Promise.all(options.checks().map((check) => check.ready()))).every(Boolean)
  }
  await look()
  setInterval(() => void look(), 1000).unref()
  return startExtAuthzGrpc({
    host: options.host,
    port: options.port,
    check: (input) => options.running().envoyGrpcCheck(input),
    ready: () => ready && !draining(),
    log: options.running().http.log,
  })
}
