import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import cookie from '@fastify/cookie'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import type { Registry } from 'prom-client'
import type { GatewayConfig } from '../options/types.js'
import { decorateIdentity } from '../contract/identity.js'
import { createProviders, warnUnadvertisedExchange } from '../oidc/providers.js'
import type { SsfBinding } from '../oidc/ssf-streams.js'
import { clientErrorHandler, closeIfBodyUnread } from '../ops/client-errors.js'
import { AccessLog } from '../ops/access-log.js'
import { lazyRequestLogger, loggerOptions, stdoutDestination, urlRedactor } from '../ops/logging.js'
import { traceRequests } from '../ops/request-tracing.js'
import { decorateOutcome, recordOutcome } from '../ops/request-outcome.js'
import type { ReadinessProbe } from '../ops/management.js'
import { readinessProbes } from '../ops/readiness.js'
import { answerErrors, createErrorPage, createProblemAnswer, noUpstreamServes } from '../pages/error-page.js'
import { requestTarget } from '../proxy/before-routing.js'
import type { SocketVerdict } from '../proxy/websocket-registry.js'
import type { EnvoyGrpcCheck } from '../checks/envoy-grpc-check.js'
import type { CheckDialect } from '../checks/dialect.js'
import { CHECK_DIALECTS } from '../checks/dialects.js'
import { registerCheckEndpoints, routedDialects } from '../checks/plugin.js'
import type { RevocationList } from '../session/revocation.js'
import { buildAccess } from './access.js'
import { registerProxy } from './proxy.js'
import { buildSessions } from './sessions.js'
import { registerSignIn } from './sign-in.js'
import type { ProcessState } from './state.js'

// buildApp composes one configuration's gateway from its features, each built from the
// configuration and what it depends on, in the order a request meets them: the HTTP app and its
// hooks, the identity providers (oidc/providers.ts createProviders), the sessions (sessions.ts:
// cookies, store, refresh, authentication, session events), access (access.ts: decisions, answers, credentials, the Checker, the WebSocket verdict), the
// sign-in endpoints (sign-in.ts), the check dialects (checks/plugin.ts), the proxy (proxy.ts), and
// what the management listener serves. What outlives the configuration comes in as the process
// state (state.ts, built by runtime/process-state.ts), and the caller runs what the app hands back.

export type { ProcessState } from './state.js'

export interface BuildOptions {
  /** Where the JSON log lines go (default stdout); redaction applies whatever the destination. */
  logStream?: { write(line: string): void }
  /** What the process's apps share, built once per process (runtime/process-state.ts). */
  state: ProcessState
  /**
   * Under a LiveGateway (runtime/live.ts): the app gets a server of its own that never listens;
   * the live gateway's server hands it requests (`routing`) and upgrades.
   */
  live?: boolean
  /** The check dialects spoken (checks/dialects.ts CHECK_DIALECTS); a test adds its own beside them. */
  checkDialects?: readonly CheckDialect[]
}

/**
 * One configuration's gateway, as buildApp returns it: its HTTP app and the services the process
 * that runs it asks for by name (the management listener, the gRPC service, the process's
 * WebSocket registry and Shared Signals loops). Built from one file; a reload builds another.
 */
export interface GatewayApp {
  /** The Fastify app that serves the gateway's HTTP (routes, proxy and their hooks); it does not listen. */
  readonly http: FastifyInstance
  /** What the management listener serves: metrics and readiness probes (ops/readiness.ts). */
  readonly management: { readonly metrics: Registry; readonly probes: readonly ReadinessProbe[] }
  /** Resolves once every provider's metadata is loaded (discovery is retried until then). */
  readonly providersReady: Promise<void>
  /** The revocation list (session/revocation.ts; with the cookie store its size() is a metric). */
  readonly revocations: RevocationList
  /** This configuration's verdict on open WebSockets; the process's registry applies it once the configuration serves. */
  readonly websocketVerdict: SocketVerdict
  /** Envoy's gRPC ext_authz check, on the HTTP ext_authz route's pipeline (checks/pipeline.ts). */
  readonly envoyGrpcCheck: EnvoyGrpcCheck
  /** This configuration's Shared Signals transmitters; the process's loops run them once it serves. */
  readonly sharedSignals: SsfBinding
  /** Closes the HTTP app: the providers' timers stop and the session store closes (the process state stays open). */
  close(): Promise<void>
}

/** Headers total, cookies included: chunked session cookies need more than Node's 16 KiB default. */
export const MAX_HEADER_BYTES = 32 * 1024

/** Builds the gateway from a validated configuration. Does not listen. */
export async function buildApp(config: GatewayConfig, options: BuildOptions): Promise<GatewayApp> {
  const { state } = options
  // The check routes first: the router must never normalize a check's target (proxy/before-routing.ts).
  const dialects = routedDialects(config, options.checkDialects ?? CHECK_DIALECTS)
  const target = requestTarget(
    dialects.map(({ route }) => route),
    config.upstreams,
  )
  const logStream = options.logStream ?? stdoutDestination()
  const redactUrl = urlRedactor(config.log)
  const accessLog = new AccessLog(logStream, config.log.level, redactUrl)
  const app = Fastify({
    logger: { ...loggerOptions(config.log), stream: logStream },
    // One line per request, written in onResponse with the gateway's own fields.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyRequestLogger,
    genReqId: () => randomUUID(),
    trustProxy: config.server.trustedProxies.length === 0 ? false : config.server.trustedProxies,
    http: { maxHeaderSize: MAX_HEADER_BYTES },
    // Under a live gateway, a server that never listens: the live gateway's hands requests over.
    ...(options.live === true ? { serverFactory: () => createServer() } : {}),
    // What Node's parser refuses (431 oversized headers, 400 malformed) is problem+json too.
    clientErrorHandler,
    rewriteUrl: target.rewriteUrl,
  })
  // Every request, in the order it meets them: its server span (first, so that all its work runs
  // under it), the refusal of a target that cannot be read, and the gateway's cookies (the sessions
  // feature's); errors answered as a page or problem+json; the connection closed after an answer
  // that left the body unread; and once answered its metrics and line.
  if (state.tracing !== undefined) traceRequests(app, { tracing: state.tracing, trustedProxies: config.server.trustedProxies })
  await app.register(cookie, { hook: false })
  app.addHook('onRequest', target.refuseUnreadable)

  // The identity providers: sessions, access, sign-in and readiness ask them. Their discovery
  // starts once every feature is built.
  const providers = createProviders(config.providers, config.server.publicUrl, {
    log: app.log,
    clock: state.clock,
    observeCall: (call, seconds, failed) => state.metrics.observeProviderCall(call, seconds, failed),
    tracer: state.tracing?.tracer,
  })
  const sessions = buildSessions(config, state, app, providers)
  const access = await buildAccess(config, state, sessions, redactUrl)
  const pages = {
    publicUrl: config.server.publicUrl,
    store: sessions.store,
    validateRedirectAfter: access.validateRedirectAfter,
    endSessionUrls: () => providers.all.map((p) => p.client.endSessionUrl(undefined)),
  }
  const answerProblem = createProblemAnswer(createErrorPage(pages))

  app.setErrorHandler(answerErrors(answerProblem))
  app.setNotFoundHandler(noUpstreamServes)
  app.addHook('onSend', closeIfBodyUnread)
  decorateIdentity(app)
  decorateOutcome(app)
  app.addHook('onResponse', recordOutcome(state.metrics, accessLog))
  // The Redis connection is the process's: it outlives this configuration.
  app.addHook('onClose', async () => {
    providers.stop()
    await sessions.close()
  })

  const signIn = await registerSignIn(app, config, state, sessions, access, pages)
  // Every dialect's route registered here, Envoy over gRPC returned for the process's listener.
  const envoyGrpcCheck = await registerCheckEndpoints(app, {
    checker: access.checker,
    cookies: sessions.cookies,
    isTrustedProxy: access.isTrustedProxy,
    publicUrl: config.server.publicUrl,
    answerProblem,
    metrics: state.metrics,
    accessLog,
    dialects,
  })
  const { receiver, transmitters } = signIn
  // What the management listener serves: the process's metrics and this configuration's readiness.
  const management = {
    metrics: state.metrics.registry,
    probes: readinessProbes({ providers, store: sessions.store, transmitters, redis: state.redis }),
  }
  await registerProxy(app, config, state, sessions, access)
  const providersReady = providers.start()
  warnUnadvertisedExchange(providersReady, config.upstreams, providers, app.log)
  return {
    http: app,
    management,
    providersReady,
    revocations: state.revocations,
    websocketVerdict: access.socketAccess,
    envoyGrpcCheck,
    sharedSignals: { transmitters, judge: (transmitter, token) => receiver.judge(transmitter, token) },
    close: () => app.close(),
  }
}
