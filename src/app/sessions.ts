import { normalizeIP } from '@fastify/rate-limit'
import type { FastifyBaseLogger } from 'fastify'
import { mappedClaimNames } from '../contract/claim-path.js'
import type { GatewayConfig } from '../options/types.js'
import { createProvider, Providers } from '../oidc/providers.js'
import { refreshAuditor } from '../ops/audit.js'
import { Authentication } from '../access/authenticate.js'
import { CookieCipher } from '../session/cipher.js'
import { GatewayCookies } from '../session/cookies.js'
import { SessionEvents } from '../session/events.js'
import { createSessionStore } from '../session/stores.js'
import { issuerBinding, type IssuerBinding } from '../session/issuer-binding.js'
import { SessionLifecycle } from '../session/lifecycle.js'
import { MemorySessionStore } from '../session/memory-store.js'
import { providerRefreshGrant } from '../session/refresh-grant.js'
import { RedisSessionStore } from '../session/redis-store.js'
import type { SessionStore } from '../session/types.js'
import type { ProcessState } from './state.js'

// The sessions feature of one configuration: the providers sessions are signed in with, the
// cookies and the store that keep them, their refresh, the authentication every exit asks, and
// the events told when sessions end (session/events.ts). Built from the configuration and the
// process state; opens no connection of its own (the Redis client is the process's).

export interface SessionsFeature {
  readonly cookies: GatewayCookies
  readonly store: SessionStore
  readonly providers: Providers
  readonly bindIssuer: IssuerBinding
  readonly lifecycle: SessionLifecycle
  /** The one authentication: the proxy guard and every check decide alike. */
  readonly authentication: Authentication
  /** Told when sessions end or their claims change; the caches and sockets derived from them subscribe. */
  readonly events: SessionEvents
  /** Resolves once every provider's metadata is loaded (discovery is retried until then). */
  readonly providersReady: Promise<void>
  /** Stops the providers' timers and closes the store (the process's Redis connection stays open). */
  close(): Promise<void>
}

export function buildSessions(config: GatewayConfig, state: ProcessState, log: FastifyBaseLogger): SessionsFeature {
  const { metrics, tracing } = state
  const cipher = new CookieCipher(config.cookies.secrets, state.clock)
  const cookies = new GatewayCookies(config.cookies, cipher, state.cookieNames)
  state.cookieNames.add(config.cookies.name)
  const { clock, redis, keys, coordinator: processCoordinator, memorySessions, revocations } = state
  const { store, coordinator } = createSessionStore(config.session, config.providers, {
    cookies,
    cipher,
    clock,
    redis,
    keys,
    coordinator: processCoordinator,
    memorySessions,
    revocations,
  })
  metrics.bindStore({
    ...(store instanceof RedisSessionStore ? { storeErrors: () => store.errors, evictions: () => store.evictions } : {}),
    ...(store instanceof MemorySessionStore ? { evictions: () => store.evictions } : {}),
  })
  const providers = new Providers(
    config.providers.map((provider) =>
      createProvider(provider, {
        publicUrl: config.server.publicUrl,
        several: config.providers.length > 1,
        log,
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
    refreshAuditor(log),
  )
  const authentication = new Authentication({ store, lifecycle, providers, clock: state.clock, revocations, bindIssuer, clientKey: normalizeIP })
  return {
    cookies,
    store,
    providers,
    bindIssuer,
    lifecycle,
    authentication,
    events: new SessionEvents(),
    providersReady: Promise.all(providers.all.map((p) => p.client.start())).then(() => undefined),
    async close() {
      for (const provider of providers.all) provider.client.stop()
      await store.close()
    },
  }
}
