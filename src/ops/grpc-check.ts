import type { FastifyInstance } from 'fastify'
import { startExtAuthzGrpc, type ExtAuthzGrpc } from '../ext-authz/grpc-server.js'
import type { CheckAnswer, CheckInput } from '../ext-authz/types.js'
import type { ReadinessCheck } from './management.js'
import { GRPC_CHECK_HEADER, GRPC_CHECK_TOKEN, GRPC_UPSTREAM_HEADER, type ExtAuthzAllow } from '../proxy/ext-authz.js'

// The gRPC ext_authz service's `check`: the request Envoy describes, asked of the running app's
// HTTP ext_authz route through app.inject. One decision and one rendering for both protocols: the
// route reads the same credentials (Cookie, Authorization), applies the same rules and sets the
// same cookies; only the allow comes back as JSON, for the service to encode as an OkHttpResponse.
// The running app is looked up per check, so a reload applies to gRPC checks at once.

/** Headers of Envoy's description that the check must not take from the client. */
const NOT_FORWARDED = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'expect', GRPC_CHECK_HEADER, GRPC_UPSTREAM_HEADER])
/** Headers of the route's answer that describe the HTTP exchange, not the decision. */
const NOT_ANSWERED = new Set(['content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding'])

export interface RunningApp {
  app: FastifyInstance
  /** forwardAuth.extAuthzPath of that app's configuration. */
  extAuthzPath: string
}

export function injectedCheck(running: () => RunningApp): (input: CheckInput) => Promise<CheckAnswer> {
  return async (input) => {
    const { app, extAuthzPath } = running()
    // A path that does not start with `/` makes a URL no route of the gateway's serves: 404, denied.
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(input.headers)) {
      if (name.charCodeAt(0) !== 0x3a && !NOT_FORWARDED.has(name)) headers[name] = value
    }
    headers.host = input.host
    if (input.scheme === 'http' || input.scheme === 'https') headers['x-forwarded-proto'] = input.scheme
    headers[GRPC_CHECK_HEADER] = GRPC_CHECK_TOKEN
    if (input.upstream !== undefined) headers[GRPC_UPSTREAM_HEADER] = input.upstream
    const res = await app.inject({ method: input.method as 'GET', url: extAuthzPath + input.path, headers })
    const setCookies = res.headers['set-cookie']
    const cookies = setCookies === undefined ? [] : Array.isArray(setCookies) ? setCookies : [String(setCookies)]
    if (res.statusCode === 200) {
      const allow = res.json<ExtAuthzAllow>()
      return { allow: true, upstreamHeaders: allow.set, removeHeaders: allow.remove, responseHeaders: cookies.map((c): [string, string] => ['set-cookie', c]) }
    }
    const answered: Array<[string, string]> = []
    for (const [name, value] of Object.entries(res.headers)) {
      if (NOT_ANSWERED.has(name) || value === undefined) continue
      for (const one of Array.isArray(value) ? value : [String(value)]) answered.push([name, one])
    }
    return { allow: false, status: res.statusCode, headers: answered, body: res.payload }
  }
}

export interface ServeOptions {
  host: string
  port: number
  /** The app serving now, looked up per check (a reload swaps it). */
  running: () => RunningApp
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
    check: injectedCheck(options.running),
    ready: () => ready && !draining(),
    log: options.running().app.log,
  })
}
