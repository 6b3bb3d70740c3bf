import type { FastifyInstance } from 'fastify'
import type { GatewayConfig } from '../options/types.js'
import { canonicalHost } from '../access/match.js'
import { normalizePath } from '../access/path.js'
import { createStepUpLookup } from '../access/rules.js'
import { createTransmitters, type SsfTransmitter } from '../oidc/ssf-transmitter.js'
import type { PageDeps } from '../pages/error-page.js'
import { signOutPage } from '../pages/sign-out.js'
import { backchannelLogoutRoute } from '../routes/backchannel-logout.js'
import { createPortHint } from '../routes/redirect-after.js'
import { reservedRoutes } from '../routes/reserved.js'
import { signInRoutes } from '../routes/sign-in.js'
import { SsfReceiver, ssfEventsRoute } from '../routes/ssf-events.js'
import { userinfoRoute } from '../routes/userinfo.js'
import { CookieSessionStore } from '../session/cookie-store.js'
import type { AccessFeature } from './access.js'
import type { SessionsFeature } from './sessions.js'
import type { ProcessState } from './state.js'

// The sign-in feature of one configuration: the endpoints under /api/v1/openid (redirect,
// callback, refresh, logout, the sign-out page, userinfo, back-channel logout, the Shared Signals push
// endpoint) and its reserved paths. Each ending of a session it hears is told once to the
// sessions feature's events, which the access feature's caches and the open WebSockets follow.

export interface SignInFeature {
  /** This configuration's Shared Signals transmitters, and the receiver's verdict on a pushed token. */
  readonly transmitters: readonly SsfTransmitter[]
  readonly receiver: SsfReceiver
}

export async function registerSignIn(
  app: FastifyInstance,
  config: GatewayConfig,
  state: ProcessState,
  sessions: SessionsFeature,
  access: AccessFeature,
  pages: PageDeps,
): Promise<SignInFeature> {
  const { publicUrl } = config.server
  const { providers, store, events } = sessions
  const { matchUpstream } = access
  const stepUpOf = createStepUpLookup(config.upstreams)
  /** The upstream a sign-in's target is on, and its normalized path. */
  const targetOf = (target: string) => {
    const url = new URL(target, publicUrl)
    const path = normalizePath(url.pathname)
    if (path === null) return undefined
    const upstream = matchUpstream(canonicalHost(url.host), path.path)
    return upstream === undefined ? undefined : { upstream, path: path.path }
  }
  const ownCallbacks = providers.ownCallbackPaths
  await app.register(reservedRoutes, { ownCallbackPaths: ownCallbacks })
  await app.register(signInRoutes, {
    ownCallbackPaths: ownCallbacks,
    providers,
    bindIssuer: sessions.bindIssuer,
    publicUrl,
    providersFor: (target) => targetOf(target)?.upstream.providers,
    stepUp: {
      requirementFor(target) {
        const found = targetOf(target)
        return found === undefined ? undefined : stepUpOf(found.upstream, found.path)
      },
      nowSeconds: () => access.judge.nowSeconds(),
    },
    cookies: sessions.cookies,
    store,
    lifecycle: sessions.lifecycle,
    validateRedirectAfter: access.validateRedirectAfter,
    redirectPortHint: createPortHint({ publicUrl, allowedHosts: config.redirects.allowedHosts }),
    isTrustedOrigin: access.isTrustedOrigin,
    rateLimit: config.rateLimit.signIn,
    replay: state.replay,
    sessionMaxAgeSeconds: config.session.maxAgeSeconds,
    nowSeconds: () => access.judge.nowSeconds(),
    onEnded: (session) => events.sessionEnded(session),
    // Counted by the primary even with Redis: the per-process count would give each worker a budget.
    ...(state.rateLimitStore === undefined ? {} : { rateLimitStore: state.rateLimitStore }),
  })
  await app.register(signOutPage, pages)
  // A session or Bearer token of any provider, authenticated as at every exit.
  await app.register(userinfoRoute, {
    authentication: sessions.authentication.forProviders(config.providers.map((p) => p.name)),
    publicUrl,
    additionalClaims: new Map(config.providers.map((p) => [p.name, p.additionalClaims ?? []])),
  })
  // The cookie store's ends are entries in the list already; the others delete sessions, and the
  // list is told too, for the subjects' Bearer tokens.
  const revocations = store instanceof CookieSessionStore ? undefined : state.revocations
  await app.register(backchannelLogoutRoute, {
    providers,
    store,
    revocations,
    replay: state.replay,
    onEnded: (selector) => events.sessionsEnded(selector),
  })
  const transmitters = createTransmitters(config.providers, publicUrl, app.log)
  // Registered whatever the configuration (the endpoints table lists it): without a stream, every push is 401.
  const receiver = new SsfReceiver({
    providers,
    store,
    revocations,
    replay: state.replay,
    log: app.log,
    clock: state.clock,
    onEnded: (selector, at) => events.sessionsEnded(selector, at),
    onChanged: () => events.claimsChanged(),
  })
  await app.register(ssfEventsRoute, { receiver, transmitters })
  return { transmitters, receiver }
}
