import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage } from 'node:http'
import cookie from '@fastify/cookie'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify'
import type { Registry } from 'prom-client'
import type { EnvoyGrpcCheck } from '../checks/envoy-grpc-check.js'
import { ConfigError } from '../config/load.js'
import type { GatewayConfig, ProviderConfig, UpstreamConfig } from '../options/types.js'
import { GatewayError, type ProblemCode } from '../contract/errors.js'
import { decorateIdentity } from '../contract/identity.js'
import type { Clock } from '../lib/clock.js'
import { BearerVerifier } from '../oidc/bearer.js'
import { OidcClient, TOKEN_EXCHANGE_GRANT } from '../oidc/client.js'
import { Providers, type Provider } from '../oidc/providers.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import { clientErrorHandler } from '../ops/client-errors.js'
import { AccessLog } from '../ops/access-log.js'
import { refreshAuditor } from '../ops/audit.js'
import { lazyRequestLogger, loggerOptions, stdoutDestination, urlRedactor } from '../ops/logging.js'
import { traceFields, traceRequests, upstreamTracing } from '../ops/request-tracing.js'
import type { Tracing } from '../ops/tracing.js'
import type { ManagementOptions, ReadinessCheck } from '../ops/management.js'
import { GATEWAY_ROUTE, GatewayMetrics, NO_ROUTE } from '../ops/metrics.js'
import { createRoutingAmbiguityCheck } from '../access/ambiguity.js'
import { createAuthenticator } from '../access/authenticate.js'
import { canonicalHost, createServedHostTest, createUpstreamMatcher, repeatsHost } from '../access/match.js'
import { createForwardedHost, createTrustCheck } from '../proxy/forwarded.js'
import { identityHeaderUnion } from '../proxy/header-policy.js'
import { socketGrant, socketVerdict } from '../proxy/websocket-access.js'
import { WebSocketRegistry, type SocketVerdict } from '../proxy/websocket-registry.js'
import { isInNormalForm, normalizePath } from '../access/path.js'
import { createErrorPage, createProblemAnswer, wantsPage, type PageDeps } from '../pages/error-page.js'
import { signOutPage } from '../pages/sign-out.js'
import { proxyPlugin } from '../proxy/plugin.js'
import { IdentityAssertions } from '../proxy/identity-assertion.js'
import { parsePrivateKey, signingKey } from '../keys/private-key.js'
import { registerCheckEndpoints } from '../checks/plugin.js'
import { createChecker, isCheckRoute } from '../access/checker.js'
import { createTokenExchanger } from '../proxy/token-exchange.js'
import { resourceMetadataRoutes } from '../access/resource-metadata.js'
import type { StepUpJudge } from '../access/decision.js'
import { createStepUpLookup } from '../access/rules.js'
import { backchannelLogoutRoute } from '../routes/backchannel-logout.js'
import { SsfReceiver, ssfEventsRoute } from '../routes/ssf-events.js'
import { SsfTransmitter } from '../oidc/ssf-transmitter.js'
import type { SsfBinding, SsfStreams } from '../oidc/ssf-streams.js'
import { createPortHint, createRedirectAfterValidator, createTrustedOriginTest } from '../routes/redirect-after.js'
import { ASSERTION_JWKS_PATH, SSF_EVENTS_PATH, callbackPath, isGatewayPath } from '../contract/endpoints.js'
import { reservedRoutes } from '../routes/reserved.js'
import type { RateLimitStore } from '../routes/sign-in-hardening.js'
import { signInRoutes } from '../routes/sign-in.js'
import { CookieCipher } from '../session/cipher.js'
import { GatewayCookies } from '../session/cookies.js'
import { CookieSessionStore } from '../session/cookie-store.js'
import { SessionLifecycle, type RefreshGrant } from '../session/lifecycle.js'
import { issuerBinding } from '../session/issuer-binding.js'
import { MemorySessions, MemorySessionStore } from '../session/memory-store.js'
import type { RevocationList } from '../session/revocation.js'
import type { RefreshCoordinator } from '../session/refresh-coordinator.js'
import { pingRedis, type RedisClient } from '../session/redis-client.js'
import type { RedisKeys } from '../session/redis-keys.js'
import { RedisRefreshCoordinator } from '../session/redis-refresh-coordinator.js'
import { RedisSessionStore } from '../session/redis-store.js'
import type { SessionStore } from '../session/types.js'

export interface BuildOptions {
  /** Where the JSON log lines go (default stdout); redaction applies whatever the destination. */
  logStream?: { write(line: string): void }
  /** What the process's apps share, built once per process (runtime/process-state.ts). */
  state: ProcessState
  /**
   * Under a LiveGateway (runtime/live.ts): the app gets a server of its own that never listens;
   * the live gateway's server hands it requests (`routing`) and upgrades, and applies its
   * WebSocket verdict once it serves.
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

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The upstream a proxied route serves (the metrics' route label). */
    upstream?: string
  }
  interface FastifyReply {
    /** The problem code the gateway answered with, if any (metrics). */
    problemCode: ProblemCode | undefined
    /** Fields a route adds to the request's one log line (forward-auth: the request it checked). */
    logFields: Record<string, unknown> | undefined
  }
  interface FastifyInstance {
    /** What the management listener serves: metrics and readiness checks. */
    management: { metrics: Registry; checks: ManagementOptions['checks'] }
    /** Resolves once the provider's metadata is loaded (discovery is retried until then). */
    providerReady: Promise<void>
    /** The revocation list (session/revocation.ts; with the cookie store its size() is a metric). */
    revocations: RevocationList
    /** This configuration's verdict on open WebSockets; a live gateway applies it once it serves. */
    websocketVerdict: SocketVerdict
    /** Envoy's gRPC ext_authz check, on the HTTP ext_authz route's pipeline (checks/pipeline.ts). */
    extAuthzCheck: EnvoyGrpcCheck
    /** This configuration's Shared Signals transmitters; a live gateway hands them to the process's loops once it serves. */
    ssf: SsfBinding
  }
}

/** Marks a raw request whose path was refused before routing, with the reason (answered 400 in onRequest). */
const kBadPath = Symbol('openid-gateway.badPath')

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
    // checks.ts makes a Redis required with store: redis, so the client exists.
    if (redis === undefined) throw new ConfigError(['session.store: redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster'])
    // A refresh calls the token endpoint and may fetch the provider's keys: two provider timeouts.
    const lockMs = 2 * Math.max(...config.providers.map((p) => p.timeoutMs)) + config.session.redis.timeoutMs
    return {
      // The email link only with a Shared Signals receiver, which is its one reader.
      store: new RedisSessionStore({ redis, keys, cookies, cipher, maxAgeSeconds, maxSessionsPerUser: config.session.maxSessionsPerUser, clock: state.clock, indexEmail: config.providers.some((p) => p.ssf !== undefined) }),
      coordinator: new RedisRefreshCoordinator({ redis, keys, cipher, lockMs, waitMs: 2 * lockMs, clock: state.clock }),
    }
  }
  const { coordinator } = state
  if (store === 'memory') {
    return { store: new MemorySessionStore(cookies, maxAgeSeconds, { maxSessions: config.session.memory.maxSessions, maxSessionsPerUser: config.session.maxSessionsPerUser }, state.clock, state.memorySessions), coordinator }
  }
  return { store: new CookieSessionStore(cookies, maxAgeSeconds, state.clock, state.revocations), coordinator }
}

/** Builds the gateway from a validated configuration. Does not listen. */
export async function buildApp(config: GatewayConfig, options: BuildOptions): Promise<FastifyInstance> {
  const { state } = options
  const logStream = options.logStream ?? stdoutDestination()
  const redactUrl = urlRedactor(config.log)
  const { extAuthzPath } = config.forwardAuth
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
    // Every decision (routing, public paths, the path the upstream sees) uses one normalized
    // path, so `/public/../admin` or `/%61dmin` cannot reach a protected route unchecked.
    rewriteUrl(raw: IncomingMessage) {
      // One spelling of the host too: the router's host constraints, the guard and the
      // X-Forwarded-Host the gateway sets all read this header.
      const host = raw.headers.host
      if (host !== undefined) raw.headers.host = canonicalHost(host)
      const url = raw.url ?? '/'
      const normalized = normalizePath(url)
      // A check endpoint is recognized on the raw target and never rewritten: normalized first,
      // `<extAuthzPath>/../redirect` would route to the sign-in endpoint, whose 200 Envoy takes
      // for an allow of `/../redirect`.
      const refused = repeatsHost(raw.rawHeaders)
        ? 'the request has more than one Host header'
        : normalized === null
          ? 'the request path is malformed'
          : isCheckRoute(url, extAuthzPath) && !isInNormalForm(url, normalized)
            ? "a check's request path must be in normal form"
            : undefined
      if (normalized === null || refused !== undefined) {
        ;(raw as IncomingMessage & { [kBadPath]?: string })[kBadPath] = refused
        return '/'
      }
      return normalized.path + normalized.search
    },
  })

  app.setErrorHandler((err: FastifyError | GatewayError, req, reply) => {
    let problem: GatewayError
    if (err instanceof GatewayError) {
      problem = err
    } else if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      problem = new GatewayError('bad_request', 'the request is malformed')
    } else {
      req.log.error({ err: { name: err.name, message: err.message, code: err.code } }, 'unexpected error')
      problem = new GatewayError('internal_error', 'the gateway failed unexpectedly; the log has details')
    }
    const status = err instanceof GatewayError ? problem.status : (err.statusCode ?? problem.status)
    reply.problemCode = problem.code
    // Pages for people, JSON for programs: a browser navigation gets the same error as a page.
    return answerProblem(req, req.log, problem, status, wantsPage(req)).then((answer) => reply.code(answer.status).headers(answer.headers).send(answer.body))
  })
  app.setNotFoundHandler(() => {
    throw new GatewayError('not_found', 'no upstream serves this path')
  })

  const { tracing } = state
  // First, so that every request's work runs under its server span.
  if (tracing !== undefined) traceRequests(app, { tracing, isTrustedProxy: createTrustCheck(config.server.trustedProxies) })
  const isAmbiguous = createRoutingAmbiguityCheck(config.upstreams)
  await app.register(cookie, { hook: false })
  const cipher = new CookieCipher(config.cookies.secrets, state.clock)
  const formerCookieNames = state.cookieNames
  const cookies = new GatewayCookies(config.cookies, cipher, formerCookieNames)
  formerCookieNames.add(config.cookies.name)
  // What every request goes through before routing, in one hook. It takes a callback: an async
  // hook costs a promise and a microtask per request for work that never waits.
  app.addHook('onRequest', (req, reply, done) => {
    const refused = (req.raw as IncomingMessage & { [kBadPath]?: string })[kBadPath]
    if (refused !== undefined) return done(new GatewayError('bad_request', refused))
    const q = req.url.indexOf('?')
    if (isAmbiguous(req.headers.host ?? '', q === -1 ? req.url : req.url.slice(0, q))) {
      return done(new GatewayError('bad_request', 'the request path reads as another route in another case or without trailing dots or spaces'))
    }
    // Only the gateway's cookies are read (session/cookies.ts jar), not every cookie of the
    // header as @fastify/cookie's parsing hook would (it stays for setting cookies).
    req.cookies = cookies.jar(req.headers.cookie)
    cookies.expireFormer(req, reply)
    done()
  })
  // An answer given before the request's body has arrived (a 401 on a protected path, a 413, a
  // refusal of the gateway's own endpoints) closes the connection: Node would otherwise keep
  // reading the rest of the body to reuse the connection, which lets a client that trickles a body
  // hold it (and a worker's socket) for as long as it likes.
  app.addHook('onSend', (req, reply, payload, done) => {
    if (!req.raw.complete) reply.header('connection', 'close')
    done(null, payload)
  })
  decorateIdentity(app)
  app.decorateReply('problemCode', undefined)
  app.decorateReply('logFields', undefined)
  const { redis, revocations } = state
  app.decorate('revocations', revocations)
  const { store, coordinator } = createSessions(config, cookies, cipher, state)
  const { metrics } = state
  metrics.bindStore({
    ...(store instanceof RedisSessionStore ? { storeErrors: () => store.errors, evictions: () => store.evictions } : {}),
    ...(store instanceof MemorySessionStore ? { evictions: () => store.evictions } : {}),
  })
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.config.upstream ?? (isGatewayPath(req.url) ? GATEWAY_ROUTE : NO_ROUTE)
    metrics.observeRequest({
      route,
      method: req.method,
      status: reply.statusCode,
      seconds: reply.elapsedTime / 1000,
      routeUrl: req.routeOptions.url,
      code: reply.problemCode,
    })
    accessLog.write({
      reqId: req.id,
      method: req.method,
      url: req.url,
      status: reply.statusCode,
      ms: reply.elapsedTime,
      ip: req.ip,
      sub: req.identity?.claims.sub,
      fields: reply.logFields,
      trace: traceFields(req),
    })
    done()
  })
  const providers = new Providers(config.providers.map((provider) => createProvider(provider, config, app.log, metrics, state.clock, tracing)))
  const allowClaims = config.upstreams.flatMap((u) => [u.allow, ...u.rules.map((rule) => rule.allow)].flatMap((allow) => Object.keys(allow.claims ?? {})))
  const bindIssuer = issuerBinding((name) => providers.get(name)?.config.issuer, (name) => state.startIssuers.get(name))
  const refreshGrant: RefreshGrant = async (token, session) => {
    try {
      const provider = providers.get(session.provider)
      if (provider === undefined) throw new GatewayError('refresh_token_invalid', 'the provider of this session is no longer configured')
      // Another issuer's refresh token is never sent to this one: the session ends instead.
      if (bindIssuer(session) === undefined) throw new GatewayError('refresh_token_invalid', "the session was signed in at another issuer than its provider's")
      const tokens = await provider.client.refresh(token, session.claims.sub, session.dpopKey)
      metrics.observeRefresh('ok')
      return tokens
    } catch (err) {
      metrics.observeRefresh(err instanceof GatewayError ? err.code : 'internal_error')
      throw err
    }
  }
  const lifecycle = new SessionLifecycle(refreshGrant, store, coordinator, allowClaims, config.session.maxAgeSeconds, state.clock, refreshAuditor(app.log))
  const checks: ReadinessCheck[] = [
    { name: 'provider_metadata', ready: () => providers.all.every((p) => p.client.ready) },
    { name: 'provider_keys', ready: () => providers.all.every((p) => p.client.keys.loaded) },
    { name: 'session_store', ready: () => store.ping() },
  ]
  const transmitters = config.providers.flatMap((p) =>
    p.ssf === undefined
      ? []
      : [
          new SsfTransmitter({
            provider: p.name,
            providerIssuer: p.issuer,
            clientId: p.clientId,
            ssf: p.ssf,
            pushUrl: new URL(SSF_EVENTS_PATH, config.server.publicUrl).href,
            timeoutMs: p.timeoutMs,
            clockToleranceSeconds: p.clockToleranceSeconds,
            log: app.log,
          }),
        ],
  )
  // Always present (the live gateway's probe names are fixed at start); passes unless a required stream is not enabled.
  checks.push({
    name: 'shared_signals',
    ready: () => transmitters.every((t) => !t.config.required || t.healthy),
    detail: () => (transmitters.length === 0 ? undefined : Object.fromEntries(transmitters.map((t) => [t.provider, { ...t.status }]))),
  })
  // The revocation list and the logout-token replay guard live there too; with Sentinel or
  // Cluster, `redis` is what names a failover in progress (no primary, or a shard without one).
  if (redis !== undefined) checks.push({ name: 'redis', ready: () => pingRedis(redis) })
  app.decorate('management', { metrics: metrics.registry, checks })

  app.decorate('providerReady', Promise.all(providers.all.map((p) => p.client.start())).then(() => undefined))
  warnUnadvertisedExchange(app.providerReady, config.upstreams, providers, app.log)
  app.addHook('onClose', async () => {
    for (const provider of providers.all) provider.client.stop()
    // The Redis connection is the process's: it outlives this configuration.
    await store.close()
  })

  // One of each, shared: the proxy guard and forward-auth must decide alike.
  const authenticate = createAuthenticator({ store, lifecycle, providers, clock: state.clock, revocations, bindIssuer })
  // Step-up rules' auth_time is judged by the gateway's clock and each provider's tolerance.
  const stepUp: StepUpJudge = {
    nowSeconds: () => Math.floor(state.clock.now() / 1000),
    toleranceSeconds: (name) => providers.get(name)?.config.clockToleranceSeconds ?? 0,
  }
  const publicOrigin = new URL(config.server.publicUrl)
  const validateRedirectAfter = createRedirectAfterValidator({
    publicUrl: config.server.publicUrl,
    allowedHosts: config.redirects.allowedHosts,
  })
  const isTrustedOrigin = createTrustedOriginTest({ publicUrl: config.server.publicUrl, allowedHosts: config.redirects.allowedHosts })
  const pages: PageDeps = {
    publicUrl: config.server.publicUrl,
    store,
    validateRedirectAfter,
    endSessionUrls: () => providers.all.map((p) => p.client.endSessionUrl(undefined)),
  }
  const answerProblem = createProblemAnswer(createErrorPage(pages))

  // The check endpoints' one decision (access/checker.ts), with its cache.
  const checker = createChecker({
    upstreams: config.upstreams,
    authenticate,
    publicUrl: config.server.publicUrl,
    cookieDomain: config.cookies.domain,
    validateRedirectAfter,
    cache: config.forwardAuth.cache,
    isGatewayCookieName: cookies.isGatewayCookieName,
    clock: state.clock,
    redactUrl,
    stepUp,
  })
  // RFC 8693 exchanges for upstreams with tokenExchange, shared by the proxy and the checks.
  const exchanger = createTokenExchanger({ providers, clock: state.clock, upstreams: config.upstreams })
  await app.register(reservedRoutes)
  const matchUpstream = createUpstreamMatcher(config.upstreams)
  // Open WebSockets outlive a reload: the registry is the process's; each configuration gives it
  // its verdict, applied once that configuration serves (runtime/live.ts; here without a live gateway).
  const { websockets } = state
  const socketAccess = {
    store,
    matchUpstream,
    websocket: config.websocket,
    sessionMaxAgeSeconds: config.session.maxAgeSeconds,
    stepUp,
    issuerOf: (name: string) => providers.get(name)?.config.issuer,
    revocations,
  }
  const stepUpOf = createStepUpLookup(config.upstreams)
  app.decorate('websocketVerdict', socketVerdict(socketAccess))
  if (options.live !== true) websockets.use(app.websocketVerdict)
  await app.register(signInRoutes, {
    providers,
    bindIssuer,
    publicUrl: config.server.publicUrl,
    providersFor(target) {
      const url = new URL(target, config.server.publicUrl)
      const path = normalizePath(url.pathname)
      return path === null ? undefined : matchUpstream(canonicalHost(url.host), path.path)?.providers
    },
    stepUp: {
      requirementFor(target) {
        const url = new URL(target, config.server.publicUrl)
        const path = normalizePath(url.pathname)
        const upstream = path === null ? undefined : matchUpstream(canonicalHost(url.host), path.path)
        return upstream === undefined || path === null ? undefined : stepUpOf(upstream, path.path)
      },
      nowSeconds: stepUp.nowSeconds,
    },
    cookies,
    store,
    lifecycle,
    validateRedirectAfter,
    redirectPortHint: createPortHint({ publicUrl: config.server.publicUrl, allowedHosts: config.redirects.allowedHosts }),
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
  app.decorate('ssf', { transmitters, judge: (transmitter, token) => receiver.judge(transmitter, token) } satisfies SsfBinding)
  await app.register(ssfEventsRoute, { receiver, transmitters })
  if (options.live !== true) void state.ssf.use(app.ssf)
  const signer = await identityAssertions(config)
  // Every identity header name of this configuration, once: the proxy strips them all on every
  // upstream and every check's allow names them for removal.
  const identityHeaders = identityHeaderUnion(config.upstreams.map((upstream) => upstream.identityHeaders), config.assertions.header)
  // The check endpoints (checks/plugin.ts): forward-auth and Envoy over HTTP registered here, Envoy over gRPC returned for the process's listener.
  const envoyGrpcCheck = await registerCheckEndpoints(app, {
    checker,
    exchanger,
    cookies,
    assertions: { header: config.assertions.header, signer },
    identityHeaders,
    extAuthzPath,
    publicUrl: config.server.publicUrl,
    answerProblem,
    metrics,
    accessLog,
  })
  app.decorate('extAuthzCheck', envoyGrpcCheck)
  if (signer !== undefined) {
    // Outside the gateway's reserved paths, where verifiers look for it: it shadows an upstream's own file there.
    app.get(ASSERTION_JWKS_PATH, (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300').send(signer.jwks)
    })
  }
  await app.register(resourceMetadataRoutes, { upstreams: config.upstreams, providers: config.providers, publicUrl: config.server.publicUrl })
  await app.register(proxyPlugin, {
    assertions: { header: config.assertions.header, signer },
    identityHeaders,
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
    authenticate,
    publicUrl: config.server.publicUrl,
    validateRedirectAfter,
    stepUp,
    websockets,
    exchanger,
    grantWebSocket: async (req) => websockets.grant(await socketGrant(socketAccess, req)),
    ...(tracing === undefined ? {} : { tracing: upstreamTracing(tracing) }),
  })
  return app
}

/**
 * A provider whose grant_types_supported lacks the token exchange grant may still accept it (the
 * list is RECOMMENDED, RFC 8414 2, and several providers leave extension grants out): said once,
 * at warn, naming the upstreams; the exchange itself decides, and its refusal is a 403.
 */
function warnUnadvertisedExchange(ready: Promise<void>, upstreams: readonly UpstreamConfig[], providers: Providers, log: FastifyBaseLogger): void {
  const exchanging = upstreams.filter((u) => u.tokenExchange !== undefined)
  if (exchanging.length === 0) return
  void ready.then(() => {
    for (const provider of providers.all) {
      const names = exchanging.filter((u) => u.providers.includes(provider.name)).map((u) => u.name)
      if (names.length > 0 && provider.client.advertisesGrant(TOKEN_EXCHANGE_GRANT) === false) {
        log.warn({ provider: provider.name, upstreams: names }, 'the provider does not list the token exchange grant in grant_types_supported: its exchanges for these upstreams may be refused (403 token_exchange_refused)')
      }
    }
  })
}

/** The signer of identity assertions, when keys are configured (checks.ts requires them when used). */
async function identityAssertions(config: GatewayConfig): Promise<IdentityAssertions | undefined> {
  const sources = config.assertions.signingKeys
  if (sources === undefined) return undefined
  const keys = await Promise.all(sources.map((source) => signingKey(parsePrivateKey(source))))
  return new IdentityAssertions({ keys, issuer: config.server.publicUrl, ttlSeconds: config.assertions.ttlSeconds })
}

/** A provider's client and Bearer verifier; with several providers their log lines name it. */
function createProvider(provider: ProviderConfig, config: GatewayConfig, appLog: FastifyBaseLogger, metrics: GatewayMetrics, clock: Clock, tracing: Tracing | undefined): Provider {
  const log = config.providers.length === 1 ? appLog : appLog.child({ provider: provider.name })
  const callback = callbackPath(provider.name, config.providers.length > 1)
  const client: OidcClient = new OidcClient(provider, config.server.publicUrl, callback, log, clock, (url, seconds, failed) =>
    metrics.observeProviderCall(client.callOf(url), seconds, failed),
    tracing?.tracer,
  )
  const bearer = new BearerVerifier({
    issuer: provider.issuer,
    clientId: provider.clientId,
    audiences: provider.audiences,
    algorithms: provider.bearer.algorithms,
    clockToleranceSeconds: provider.clockToleranceSeconds,
    getKey: client.keys.getKey,
    keyGeneration: () => client.keys.generation(),
    requireAtJwt: provider.bearer.requireAtJwt,
    ...(provider.bearer.introspection ? { introspect: (token: string) => client.introspect(token) } : {}),
    log,
    clock,
  })
  return { name: provider.name, config: provider, client, bearer }
}
