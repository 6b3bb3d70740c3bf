import type { FastifyRequest } from 'fastify'
import type { WebSocketConfig } from '../options/types.js'
import type { Identity } from '../contract/identity.js'
import { bearerRevoked, issuedAt, type RevocationList } from '../session/revocation.js'
import type { SessionStore } from '../session/types.js'
import type { AccessDecisions } from '../access/decision.js'
import { canonicalHost, type UpstreamMatcher } from '../access/match.js'

// The two decisions the WebSocket registry needs from one configuration: the grant an upgrade
// is opened under (when its socket must close at the latest, which session it belongs to), and
// whether a grant still holds (the same access decision as any request: the upstream that serves
// its path and host, `auth`, `publicPaths`, the upstream's providers and `allow` rules), asked
// again after a reload and by the registry's sweep (SocketAccess.holds, which asks access/'s
// UpstreamAccess.decideFor with the grant's identity: nothing is refreshed or written).

/** What an upgrade was allowed under: the request (its cookies, host and path) and who it was. */
export interface SocketGrant {
  req: FastifyRequest
  identity: Identity | null
  /** The gateway session it was opened with; undefined for a Bearer token or no sign-in. */
  sessionId: string | undefined
  /**
   * When what it was opened with began (epoch seconds): the session's sign-in, or the Bearer
   * token's `iat`; undefined when unknown (a token without `iat`, or no sign-in).
   */
  issuedAt?: number | undefined
  /** Epoch milliseconds at which the socket is closed whatever happens. */
  endsAt: number
}

export interface SocketAccessDeps {
  store: SessionStore
  matchUpstream: UpstreamMatcher
  websocket: WebSocketConfig
  /** session.maxAgeSeconds: a session ends this long after its sign-in. */
  sessionMaxAgeSeconds: number
  /** The configuration's access decisions (access/decision.ts). */
  access: AccessDecisions
  /** The revocation list: a socket opened with a Bearer token that was ended since is refused. */
  revocations?: RevocationList
  /** The running configuration's issuer of a provider (undefined: no longer configured). */
  issuerOf(provider: string): string | undefined
}

function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

/** The WebSocket access of one configuration: the grant an upgrade opens under, and whether a grant still holds. */
export class SocketAccess {
  readonly #deps: SocketAccessDeps

  constructor(deps: SocketAccessDeps) {
    this.#deps = deps
  }

  /** The grant of an upgrade whose access decision passed (`req.identity` set by the guard). */
  async grant(req: FastifyRequest): Promise<SocketGrant> {
    const deps = this.#deps
    const identity = req.identity
    let endsAt = Date.now() + deps.websocket.maxLifetimeSeconds * 1000
    let sessionId: string | undefined
    let began: number | undefined
    if (identity !== null) {
      // The session the guard signed it in with (its access token is the identity's), else a Bearer token.
      const session = await deps.store.load(req)
      if (session !== undefined && session.accessToken === identity.accessToken && session.provider === identity.provider) {
        sessionId = session.id
        began = session.createdAt
        endsAt = Math.min(endsAt, (session.createdAt + deps.sessionMaxAgeSeconds) * 1000)
      } else {
        began = issuedAt(identity.claims)
        if (typeof identity.claims.exp === 'number') endsAt = Math.min(endsAt, identity.claims.exp * 1000)
      }
    }
    return { req, identity, sessionId, endsAt, issuedAt: began }
  }

  /** Whether `grant` still holds: its session still there, and this configuration's decision for it a pass. */
  async holds({ req, identity, sessionId }: SocketGrant): Promise<boolean> {
    const deps = this.#deps
    const path = pathOf(req.url)
    const upstream = deps.matchUpstream(canonicalHost(req.headers.host ?? ''), path)
    if (upstream === undefined || !upstream.websocket) return false
    let current: Identity | undefined = identity ?? undefined
    if (sessionId !== undefined) {
      // Ended here or elsewhere (logout, back-channel logout through Redis or another worker).
      const session = await deps.store.load(req)
      if (session?.id !== sessionId) current = undefined
    } else if (current !== undefined && deps.revocations !== undefined && (await bearerRevoked(deps.revocations, current.provider, current.claims))) {
      // A Bearer token ended since by a logout or an event received here or by another replica.
      current = undefined
    }
    // Opened as a user of another issuer than its provider's now (a reload re-pointed it): the
    // upstream was told an identity that no longer holds (session/issuer-binding.ts).
    if (current !== undefined && current.issuer !== deps.issuerOf(current.provider)) current = undefined
    // A socket opened signed in whose identity ended closes, even where anyone may pass: the
    // upstream holds it as that user's.
    if (identity !== null && current === undefined) return false
    // Decided for this grant's identity: nothing is refreshed or written here.
    const decision = deps.access.of(upstream).decideFor(current, req, { path, method: 'GET' /* an upgrade is a GET, RFC 6455 4.1 */, preflight: false })
    return decision.outcome === 'pass'
  }
}
