import { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import type { GatewayConfig } from '../options/types.js'
import type { Providers } from '../oidc/providers.js'
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

// The sessions feature of one configuration: the cookies and the store that keep sessions, their
// refresh with the providers they are signed in with, the authentication every exit asks, and the
// events told when sessions end (session/events.ts). Built from the configuration, the process
// state and the configuration's providers; opens no connection of its own (the Redis client is
// the process's).

export interface SessionsFeature {
  readonly cookies: GatewayCookies
  readonly store: SessionStore
  /** The providers sessions are signed in with, as buildApp made them (oidc/providers.ts createProviders). */
  readonly providers: Providers
  readonly bindIssuer: IssuerBinding
  readonly lifecycle: SessionLifecycle
  /** The one authentication: the proxy guard and every check decide alike. */
  readonly authentication: Authentication
  /** Told when sessions end or their claims change; the caches and sockets derived from them subscribe. */
  readonly events: SessionEvents
  /** Closes the store (the process's Redis connection stays open). */
  close(): Promise<void>
}

export function buildSessions(config: GatewayConfig, state: ProcessState, app: FastifyInstance, providers: Providers): SessionsFeature {
  const { metrics } = state
  const { log } = app
  const cipher = new CookieCipher(config.cookies.secrets, state.clock)
  const cookies = new GatewayCookies(config.cookies, cipher, state.cookieNames)
  state.cookieNames.add(config.cookies.name)
  // Every request reads the gateway's cookies before routing, after its target is read.
  app.addHook('onRequest', cookies.readRequestCookies)
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
  const bindIssuer = issuerBinding(
    (name) => providers.get(name)?.config.issuer,
    (name) => state.startIssuers.get(name),
  )
  const refreshGrant = providerRefreshGrant(providers, bindIssuer, (code) => metrics.observeRefresh(code))
  const lifecycle = new SessionLifecycle(
    refreshGrant,
    store,
    coordinator,
    { providers: config.providers, upstreams: config.upstreams },
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
    close: () => store.close(),
  }
}
