import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import cookie from '@fastify/cookie'
import { normalizeIP } from '@fastify/rate-limit'
import Fastify, { LogController, type FastifyInstance } from 'fastify'
import type { Registry } from 'prom-client'
import type { EnvoyGrpcCheck } from '../checks/envoy-grpc-check.js'
import { ConfigError } from '../config/load.js'
import type { GatewayConfig } from '../options/types.js'
import { decorateIdentity } from '../contract/identity.js'
import type { Clock } from '../lib/clock.js'
import { createProvider, Providers, warnUnadvertisedExchange } from '../oidc/providers.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import { clientErrorHandler, closeIfBodyUnread } from '../ops/client-errors.js'
import { AccessLog } from '../ops/access-log.js'
import { refreshAuditor } from '../ops/audit.js'
import { lazyRequestLogger, loggerOptions, stdoutDestination, urlRedactor } from '../ops/logging.js'
import { traceRequests, upstreamTracing } from '../ops/request-tracing.js'
import { decorateOutcome, recordOutcome } from '../ops/request-outcome.js'
import type { Tracing } from '../ops/tracing.js'
import type { ReadinessCheck } from '../ops/management.js'
import { readinessChecks } from '../ops/readiness.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import { Authentication } from '../access/authenticate.js'
import { canonicalHost, createServedHostTest, createUpstreamMatcher } from '../access/match.js'
import { beforeRouting, rewriteRequestTarget } from '../proxy/before-routing.js'
import { createForwardedHost, createTrustCheck } from '../proxy/forwarded.js'
import { identityHeaderUnion } from '../proxy/header-policy.js'
import { mappedClaimNames } from '../contract/claim-path.js'
import { SocketAccess } from '../proxy/websocket-access.js'
import type { WebSocketRegistry, SocketVerdict } from '../proxy/websocket-registry.js'
import { normalizePath } from '../access/path.js'
import { answerErrors, createErrorPage, createProblemAnswer, noUpstreamServes, type PageDeps } from '../pages/error-page.js'
import { signOutPage } from '../pages/sign-out.js'
import { proxyPlugin } from '../proxy/plugin.js'
import { IdentityAssertions } from '../proxy/identity-assertion.js'
import { TXN_TOKEN_HEADER, TransactionTokens, subjectQualified, transactionTokenPolicy, type TransactionTokenMinting } from '../proxy/transaction-token.js'
import { parsePrivateKey, signingKey } from '../keys/private-key.js'
import { registerCheckEndpoints } from '../checks/plugin.js'
import { Checker } from '../access/checker.js'
import { createTokenExchanger } from '../proxy/token-exchange.js'
import { resourceMetadataRoutes } from '../proxy/resource-metadata-route.js'
import { AccessDecisions, type StepUpJudge } from '../access/decision.js'
import { createStepUpLookup } from '../access/rules.js'
import { backchannelLogoutRoute } from '../routes/backchannel-logout.js'
import { SsfReceiver, ssfEventsRoute } from '../routes/ssf-events.js'
import { createTransmitters } from '../oidc/ssf-transmitter.js'
import type { SsfBinding, SsfStreams } from '../oidc/ssf-streams.js'
import { createPortHint, createRedirectAfterValidator, createTrustedOriginTest } from '../routes/redirect-after.js'
import { ASSERTION_JWKS_PATH } from '../contract/endpoints.js'
import { reservedRoutes } from '../routes/reserved.js'
import type { RateLimitStore } from '../routes/sign-in-hardening.js'
import { signInRoutes } from '../routes/sign-in.js'
import { CookieCipher } from '../session/cipher.js'
import { GatewayCookies } from '../session/cookies.js'
import { CookieSessionStore } from '../session/cookie-store.js'
import { SessionLifecycle } from '../session/lifecycle.js'
import { issuerBinding } from '../session/issuer-binding.js'
import { type MemorySessions, MemorySessionStore } from '../session/memory-store.js'
import { providerRefreshGrant } from '../session/refresh-grant.js'
import type { RevocationList } from '../session/revocation.js'
import type { RefreshCoordinator } from '../session/refresh-coordinator.js'
import type { RedisClient } from '../session/redis-client.js'
import type { RedisKeys } from '../session/redis-keys.js'
import { RedisRefreshCoordinator } from '../session/redis-refresh-coordinator.js'
import { RedisSessionStore } from '../session/redis-store.js'
import type { SessionStore } from '../session/types.js'

// Wiring only: buildApp builds one configuration's services from their owners and registers them
// on a Fastify app in the order a request meets them. Every hook, handler and route it registers
// lives in the folder that owns its concern; what outlives the configuration comes in as the
// process state (runtime/process-state.ts), and the caller runs what the app hands back.

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
}

/**
 * What outlives one configuration: built once per process from the first configuration (the
 * keys that decide it take a restart, runtime/live.ts RESTART_KEYS), handed to every app a
 * reload builds, closed when the process stops. Where each piece lives (Redis, the primary of
 * server.workers, or this process) is decided where it is built, not here.
 */
export interface ProcessState {
  /** What every expiry and cache of the process's apps is judged by (lib/clock.ts). */
  readonly clock: Clock
  /** The process's one Redis connection (session.redisUrl, sentinels or cluster), whatever the number of reloads. */
  readonly redis: RedisClient | undefined
  /** Every key the gateway writes in that Redis, under session.redis.keyPrefix. */
  readonly keys: RedisKeys
  readonly metrics: GatewayMetrics
  /**
   * The revocation list: the sessions of the cookie store, and with every store the Bearer tokens,
   * that a back-channel logout or a Shared Signals event ended.
   */
  readonly revocations: RevocationList
  readonly replay: JtiReplay
  /** The refresh coordinator of the cookie and memory stores (the Redis store's is in Redis). */
  readonly coordinator: RefreshCoordinator
  /** The memory store's sign-ins. */
  readonly memorySessions: MemorySessions
  /** On a worker of server.workers: the sign-in rate-limit counts the primary keeps. */
  readonly rateLimitStore: RateLimitStore | undefined
  /** Every cookies.name this process has run with: browsers may still send those cookies. */
  readonly cookieNames: Set<string>
  /** Open proxied WebSockets, whichever configuration opened them. */
  readonly websockets: WebSocketRegistry
  /** The process's tracer (telemetry.tracing); undefined when tracing is off. */
  readonly tracing: Tracing | undefined
  /** The Shared Signals streams' loops (provider ssf): each configuration hands it its transmitters. */
  readonly ssf: SsfStreams
  /**
   * Each provider's issuer when the process started: the issuer of its sessions sealed before
   * sessions recorded theirs (session/issuer-binding.ts).
   */
  readonly startIssuers: ReadonlyMap<string, string>
}

/**
 * One configuration's gateway, as buildApp returns it: its HTTP app and the services the process
 * that runs it asks for by name (the management listener, the gRPC service, the process's
 * WebSocket registry and Shared Signals loops). Built from one file; a reload builds another.
 */
export interface GatewayApp {
  /** The Fastify app that serves the gateway's HTTP (routes, proxy and their hooks); it does not listen. */
  readonly http: FastifyInstance
  /** What the management listener serves: metrics and readiness checks (ops/readiness.ts). */
  readonly management: { readonly metrics: Registry; readonly checks: readonly ReadinessCheck[] }
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

interface Sessions {
  store: SessionStore
  coordinator: RefreshCoordinator
}

function createSessions(config: GatewayConfig, cookies: GatewayCookies, cipher: CookieCipher, state: ProcessState): Sessions {
  const { store, maxAgeSeconds } = config.session
  const { redis, keys } = state
  if (store === 'redis') {
    // config/cross-key-rules.ts makes a Redis required with store: redis, so the client exists.
    if (redis === undefined) throw new ConfigError(['session.store: redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster'])
    // A refresh calls the token endpoint and may fetch the provider's keys: two provider timeouts.
    const lockMs = 2 * Math.max(...config.providers.map((p) => p.timeoutMs)) + config.session.redis.timeoutMs
    return {
      // The email link only with a Shared Signals receiver, which is its one reader.
      store: new RedisSessionStore({
        redis,
        keys,
        cookies,
        cipher,
        maxAgeSeconds,
        maxSessionsPerUser: config.session.maxSessionsPerUser,
        clock: state.clock,
        indexEmail: config.providers.some((p) => p.ssf !== undefined),
      }),
      coordinator: new RedisRefreshCoordinator({ redis, keys, cipher, lockMs, waitMs: 2 * lockMs, clock: state.clock }),
    }
  }
  const { coordinator } = state
  if (store === 'memory') {
    return {
      store: new MemorySessionStore(
        cookies,
        maxAgeSeconds,
        { maxSessions: config.session.memory.maxSessions, maxSessionsPerUser: config.session.maxSessionsPerUser },
        state.clock,
        state.memorySessions,
      ),
      coordinator,
    }
  }
  return { store: new CookieSessionStore(cookies, maxAgeSeconds, state.clock, state.revocations), coordinator }
}

/** Builds the gateway from a validated configuration. Does not listen. */
export async function buildApp(config: GatewayConfig, options: BuildOptions): Promise<GatewayApp> {
  const { state } = options
  const { metrics, tracing, redis, revocations, websockets } = state
  const { publicUrl } = config.server
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
    rewriteUrl: rewriteRequestTarget(config.envoy.pathPrefix),
  })

  // This configuration's services.
  const cipher = new CookieCipher(config.cookies.secrets, state.clock)
  const cookies = new GatewayCookies(config.cookies, cipher, state.cookieNames)
  state.cookieNames.add(config.cookies.name)
  const { store, coordinator } = createSessions(config, cookies, cipher, state)
  metrics.bindStore({
    ...(store instanceof RedisSessionStore ? { storeErrors: () => store.errors, evictions: () => store.evictions } : {}),
    ...(store instanceof MemorySessionStore ? { evictions: () => store.evictions } : {}),
  })
  const providers = new Providers(
    config.providers.map((provider) =>
      createProvider(provider, {
        publicUrl,
        several: config.providers.length > 1,
        log: app.log,
        clock: state.clock,
        observeCall: (call, seconds, failed) => metrics.observeProviderCall(call, seconds, failed),
        tracer: tracing?.tracer,
      }),
    ),
  )
  const bindIssuer = issuerBinding(
    (name) => providers.get(name)?.config.issuer,
    (name) => state.startIssuers.get(name),
  )
  const allowClaims = config.upstreams.flatMap((u) => [u.allow, ...u.rules.map((rule) => rule.allow)].flatMap((allow) => Object.keys(allow.claims ?? {})))
  // The claims the mapping and the extra identity headers read (their top-level names) are kept too.
  const mappedClaims = mappedClaimNames(config.providers, config.upstreams)
  const refreshGrant = providerRefreshGrant(providers, bindIssuer, (code) => metrics.observeRefresh(code))
  const lifecycle = new SessionLifecycle(
    refreshGrant,
    store,
    coordinator,
    [...allowClaims, ...mappedClaims],
    config.session.maxAgeSeconds,
    state.clock,
    refreshAuditor(app.log),
  )
  const validateRedirectAfter = createRedirectAfterValidator({ publicUrl, allowedHosts: config.redirects.allowedHosts })
  const isTrustedOrigin = createTrustedOriginTest({ publicUrl, allowedHosts: config.redirects.allowedHosts })
  const pages: PageDeps = {
    publicUrl,
    store,
    validateRedirectAfter,
    endSessionUrls: () => providers.all.map((p) => p.client.endSessionUrl(undefined)),
  }
  const answerProblem = createProblemAnswer(createErrorPage(pages))

  // Every request, in the order it meets them: errors answered as a page or problem+json, its
  // server span, the refusal of a target that cannot be read and the gateway's cookies (before
  // routing), the connection closed after an answer that left the body unread, and once answered
  // its metrics and line.
  app.setErrorHandler(answerErrors(answerProblem))
  app.setNotFoundHandler(noUpstreamServes)
  // First, so that every request's work runs under its server span.
  if (tracing !== undefined) traceRequests(app, { tracing, isTrustedProxy: createTrustCheck(config.server.trustedProxies) })
  await app.register(cookie, { hook: false })
  app.addHook('onRequest', beforeRouting(config.upstreams, cookies))
  app.addHook('onSend', closeIfBodyUnread)
  decorateIdentity(app)
  decorateOutcome(app)
  app.addHook('onResponse', recordOutcome(metrics, accessLog))

  const transmitters = createTransmitters(config.providers, publicUrl, app.log)
  const checks = readinessChecks({ providers, store, transmitters, redis })
  const providersReady = Promise.all(providers.all.map((p) => p.client.start())).then(() => undefined)
  warnUnadvertisedExchange(providersReady, config.upstreams, providers, app.log)
  app.addHook('onClose', async () => {
    for (const provider of providers.all) provider.client.stop()
    // The Redis connection is the process's: it outlives this configuration.
    await store.close()
  })

  // One of each, shared: the proxy guard and forward-auth must decide alike.
  const authentication = new Authentication({ store, lifecycle, providers, clock: state.clock, revocations, bindIssuer, clientKey: normalizeIP })
  // Step-up rules' auth_time is judged by the gateway's clock and each provider's tolerance.
  const stepUp: StepUpJudge = {
    nowSeconds: () => Math.floor(state.clock.now() / 1000),
    toleranceSeconds: (name) => providers.get(name)?.config.clockToleranceSeconds ?? 0,
  }
  // Each upstream's access decision, built once: the proxy guard, the Checker and the WebSocket verdict ask it.
  const access = new AccessDecisions(config.upstreams, authentication, stepUp, publicUrl)
  const publicOrigin = new URL(publicUrl)
  // The check endpoints' one decision (access/checker.ts), with its cache.
  const checker = new Checker({
    upstreams: config.upstreams,
    access,
    publicUrl,
    cookieDomain: config.cookies.domain,
    validateRedirectAfter,
    cache: config.forwardAuth.cache,
    isGatewayCookieName: cookies.isGatewayCookieName,
    clock: state.clock,
    redactUrl,
  })
  // RFC 8693 exchanges for upstreams with tokenExchange, shared by the proxy and the checks.
  const exchanger = createTokenExchanger({ providers, clock: state.clock, upstreams: config.upstreams })
  await app.register(reservedRoutes)
  const matchUpstream = createUpstreamMatcher(config.upstreams)
  // Open WebSockets outlive a reload: the registry is the process's; each configuration gives it
  // its verdict, applied once that configuration serves (by the caller: runtime/live.ts, process-state.ts).
  const socketAccess = new SocketAccess({
    store,
    matchUpstream,
    websocket: config.websocket,
    sessionMaxAgeSeconds: config.session.maxAgeSeconds,
    access,
    issuerOf: (name: string) => providers.get(name)?.config.issuer,
    revocations,
  })
  const stepUpOf = createStepUpLookup(config.upstreams)
  await app.register(signInRoutes, {
    providers,
    bindIssuer,
    publicUrl,
    providersFor(target) {
      const url = new URL(target, publicUrl)
      const path = normalizePath(url.pathname)
      return path === null ? undefined : matchUpstream(canonicalHost(url.host), path.path)?.providers
    },
    stepUp: {
      requirementFor(target) {
        const url = new URL(target, publicUrl)
        const path = normalizePath(url.pathname)
        const upstream = path === null ? undefined : matchUpstream(canonicalHost(url.host), path.path)
        return upstream === undefined || path === null ? undefined : stepUpOf(upstream, path.path)
      },
      nowSeconds: () => stepUp.nowSeconds(),
    },
    cookies,
    store,
    lifecycle,
    validateRedirectAfter,
    redirectPortHint: createPortHint({ publicUrl, allowedHosts: config.redirects.allowedHosts }),
    isTrustedOrigin,
    rateLimit: config.rateLimit.signIn,
    onEnded: (session) => {
      checker.forget()
      exchanger.forgetToken(session.provider, session.accessToken)
      websockets.endSession(session.id)
    },
    // Counted by the primary even with Redis: the per-process count would give each worker a budget.
    ...(state.rateLimitStore === undefined ? {} : { rateLimitStore: state.rateLimitStore }),
  })
  await app.register(signOutPage, pages)
  // The cookie store's ends are entries in the list already; the others delete sessions, and the
  // list is told too, for the subjects' Bearer tokens.
  const bearerRevocations = store instanceof CookieSessionStore ? undefined : revocations
  await app.register(backchannelLogoutRoute, {
    providers,
    store,
    revocations: bearerRevocations,
    replay: state.replay,
    onEnded: (selector) => {
      checker.forget()
      exchanger.forget()
      websockets.endSelected(selector)
    },
  })
  // Registered whatever the configuration (the endpoints table lists it): without a stream, every push is 401.
  const receiver = new SsfReceiver({
    providers,
    store,
    revocations: bearerRevocations,
    replay: state.replay,
    log: app.log,
    clock: state.clock,
    onEnded: (selector, at) => {
      checker.forget()
      exchanger.forget()
      websockets.endSelected(selector, at)
    },
    // Exchanged tokens carry the claims of their time: a claims change drops them too.
    onChanged: () => {
      checker.forget()
      exchanger.forget()
    },
  })
  await app.register(ssfEventsRoute, { receiver, transmitters })
  const signer = await identityAssertions(config)
  const transactionTokens = transactionTokenMinting(config, signer)
  // Every identity header name of this configuration, once: the proxy strips them all on every
  // upstream and every check's allow names them for removal.
  const identityHeaders = identityHeaderUnion(
    config.upstreams.map((upstream) => upstream.identityHeaders),
    config.assertions.header,
    config.upstreams.flatMap((upstream) => Object.keys(upstream.claimHeaders ?? {})),
    transactionTokens === undefined ? [] : [TXN_TOKEN_HEADER],
  )
  // The check endpoints (checks/plugin.ts): forward-auth and Envoy over HTTP registered here, Envoy over gRPC returned for the process's listener.
  const envoyGrpcCheck = await registerCheckEndpoints(app, {
    checker,
    exchanger,
    cookies,
    assertions: { header: config.assertions.header, signer },
    identityHeaders,
    transactionTokens,
    isTrustedProxy: createTrustCheck(config.server.trustedProxies),
    extAuthzPath: config.envoy.pathPrefix,
    publicUrl: config.server.publicUrl,
    answerProblem,
    metrics,
    accessLog,
  })
  if (signer !== undefined) {
    // Outside the gateway's reserved paths, where verifiers look for it: it shadows an upstream's own file there.
    app.get(ASSERTION_JWKS_PATH, (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300').send(signer.jwks)
    })
  }
  await app.register(resourceMetadataRoutes, { upstreams: config.upstreams, providers: config.providers, publicUrl })
  await app.register(proxyPlugin, {
    assertions: { header: config.assertions.header, signer },
    identityHeaders,
    transactionTokens,
    upstreams: config.upstreams,
    trustedProxies: config.server.trustedProxies,
    forwardedHost: createForwardedHost(
      createServedHostTest(config.upstreams, (host) => validateRedirectAfter(`${publicOrigin.protocol}//${host}/`) !== null),
      publicOrigin.host,
    ),
    isGatewayCookie: cookies.isGatewayCookie,
    isGatewayCookieName: cookies.isGatewayCookieName,
    // The pages that may open WebSockets: the public origin, the allowed hosts over https.
    isTrustedOrigin,
    access,
    publicUrl,
    validateRedirectAfter,
    websockets,
    exchanger,
    grantWebSocket: async (req) => websockets.grant(await socketAccess.grant(req)),
    ...(tracing === undefined ? {} : { tracing: upstreamTracing(tracing) }),
  })
  return {
    http: app,
    management: { metrics: metrics.registry, checks },
    providersReady,
    revocations,
    websocketVerdict: socketAccess,
    envoyGrpcCheck,
    sharedSignals: { transmitters, judge: (transmitter, token) => receiver.judge(transmitter, token) },
    close: () => app.close(),
  }
}

/**
 * Transaction Tokens, when an upstream asks for them: signed with the assertions' keys
 * (config/cross-key-rules.ts requires them then), each upstream's policy decided here, once.
 * Undefined otherwise, and nothing on the hot path asks about them.
 */
function transactionTokenMinting(config: GatewayConfig, signer: IdentityAssertions | undefined): TransactionTokenMinting | undefined {
  if (signer === undefined || !config.upstreams.some((upstream) => upstream.transactionTokens !== undefined)) return undefined
  const qualified = subjectQualified(config.upstreams)
  const policies = new Map(
    config.upstreams.flatMap((upstream) => {
      const policy = transactionTokenPolicy(upstream, qualified)
      return policy === undefined ? [] : [[upstream.name, policy] as const]
    }),
  )
  return { minter: new TransactionTokens({ keys: signer.keys, issuer: config.server.publicUrl }), policyOf: (name) => policies.get(name) }
}

/** The signer of identity assertions, when keys are configured (config/cross-key-rules.ts requires them when used). */
async function identityAssertions(config: GatewayConfig): Promise<IdentityAssertions | undefined> {
  const sources = config.assertions.signingKeys
  if (sources === undefined) return undefined
  const keys = await Promise.all(sources.map((source) => signingKey(parsePrivateKey(source))))
  return new IdentityAssertions({ keys, issuer: config.server.publicUrl, ttlSeconds: config.assertions.ttlSeconds })
}
