import type { IncomingHttpHeaders } from 'node:http'
import type { BaseLogger } from 'pino'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import type { Provider, Providers } from '../oidc/providers.js'
import type { SessionLifecycle } from '../session/lifecycle.js'
import { bearerRevoked, type RevocationList } from '../session/revocation.js'
import type { Identity } from '../contract/identity.js'
import type { ClaimMapping } from '../contract/claim-path.js'
import type { Session, SessionReply, SessionRequest, SessionStore } from '../session/types.js'
import type { IssuerBinding } from '../session/issuer-binding.js'

// Who is making this request? A gateway session whose access token is still valid (refreshed
// transparently when it has expired), else an Authorization: Bearer token that verifies, in both
// cases from one of the providers the upstream accepts (upstreams[].providers). Shared by the
// proxy guard and the forward-auth endpoint, so both decide the same way. A Bearer token of a
// subject that a back-channel logout or a Shared Signals event ended is refused as its sessions
// are (the revocation list), whatever the session store.
//
// This file owns authentication: `Authentication` (one per configuration: the session store,
// the providers, the revocation list) and `UpstreamAuthentication` (one per upstream: only the
// providers it accepts). Rules it enforces: RFC 6750 2.1 (the Bearer header's b64token, never a
// token from a body or query) and 3.1 (`invalid_token` for a refused or revoked token); OpenID
// Connect Core 2 (a session of another issuer than its provider's now signs nobody in).
//
// An upstream with `tokenAudience: resource` (an MCP server) signs in Bearer tokens only, and only
// those whose audience is exactly its resource identifier (RFC 8707 2; the MCP authorization
// specification 2025-06-18 and 2025-11-25, "Token Audience Binding and Validation"): the
// session's access token was issued to the gateway (its `aud` is the client id), not to that
// resource, and an MCP client has no session cookie anyway (the specification's clients send
// `Authorization: Bearer` on every request, section "Token Requirements").

/**
 * `expired`: a session exists but its access token has expired and cannot be refreshed (no
 * refresh token, or the provider refused it and the session has ended). `refreshable`: expired,
 * and its refresh token is kept where this request does not reach (cookies.credentialsPath), so
 * only the refresh endpoint can renew it. `invalid_token`: a Bearer token came and was refused
 * (RFC 6750 3.1: expired, revoked, malformed, bound to a key, or invalid for another reason).
 */
export type AuthenticationResult = Identity | 'expired' | 'refreshable' | 'invalid_token' | undefined

/** What authentication reads of a request: its cookies and path (the session), and its Authorization header; and where it logs. */
export interface AuthRequest extends SessionRequest {
  readonly headers: IncomingHttpHeaders
  readonly log: Pick<BaseLogger, 'info'>
  /**
   * The client's address as Fastify derives it (server.trustedProxies: X-Forwarded-For from a
   * trusted peer): the introspection budget's key. Only for a request the gateway proxies; a check
   * dialect's caller is the proxy in front, whose every client would share one budget, so checks
   * pass none and only the global bound applies there.
   */
  readonly ip?: string
}

export interface AuthenticationDeps {
  store: SessionStore
  lifecycle: SessionLifecycle
  providers: Providers
  /** What an access token's expiry is judged by. */
  clock: Clock
  /**
   * The subjects a back-channel logout or a Shared Signals event ended: their Bearer tokens issued
   * before it are refused too (session/revocation.ts bearerRevoked).
   */
  revocations?: RevocationList
  /** The session as one of its provider's current issuer, or undefined: it must end (issuer-binding.ts). */
  bindIssuer: IssuerBinding
  /**
   * The client as the sign-in rate limit counts it (@fastify/rate-limit's normalizeIP of req.ip:
   * IPv6 per /64): the introspection budget's key, so that both count a client alike.
   */
  clientKey: (ip: string) => string
}

const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i

/** The token of an `Authorization: Bearer` header (RFC 6750 2.1: b64token), or undefined. */
export function bearerTokenOf(authorization: string | undefined): string | undefined {
  return authorization === undefined ? undefined : BEARER.exec(authorization)?.[1]
}

/**
 * The gateway's authentication, built once per configuration (app.ts) and shared, so that the
 * proxy guard, the check endpoints and WebSockets authenticate alike.
 */
export class Authentication {
  readonly #deps: AuthenticationDeps

  constructor(deps: AuthenticationDeps) {
    this.#deps = deps
  }

  /**
   * The authentication of an upstream that accepts the providers `names` lists (its
   * upstreams[].providers), worked out once per upstream.
   */
  forProviders(names: readonly string[], resource?: ResourceAudience, withIdToken = false): Pick<UpstreamAuthentication, 'authenticate'> {
    return new UpstreamAuthentication(this.#deps, names, resource, withIdToken)
  }
}

/** The audience a Bearer token must name at an upstream, from the request's host (resource-metadata.ts resourceAudience). */
export type ResourceAudience = (host: string | undefined) => string

/** The authentication of one upstream: a session or a Bearer token of a provider it accepts. */
export class UpstreamAuthentication {
  readonly #deps: AuthenticationDeps
  readonly #accepted: Provider[]
  readonly #accepts: ReadonlySet<string>
  /** Each accepted provider's claim mapping (its Provider's), by name: a session names its provider. */
  readonly #mappings: ReadonlyMap<string, ClaimMapping>
  readonly #resource: ResourceAudience | undefined
  /** The upstream forwards the ID token (upstreams[].forwardIdToken): a session's identity carries it. */
  readonly #withIdToken: boolean

  /**
   * `resource`: the audience Bearer tokens must name here instead of the providers' (and no session
   * signs in). `withIdToken`: a session's identity carries its ID token, opened with its credentials.
   */
  constructor(deps: AuthenticationDeps, names: readonly string[], resource?: ResourceAudience, withIdToken = false) {
    this.#withIdToken = withIdToken
    this.#deps = deps
    this.#accepted = deps.providers.named(names)
    this.#accepts = new Set(names)
    this.#mappings = new Map(this.#accepted.map((provider) => [provider.name, provider.mapping]))
    this.#resource = resource
  }

  #mappingOf(provider: string): ClaimMapping {
    const mapping = this.#mappings.get(provider)
    // Only accepted providers authenticate here, and each has its mapping.
    if (mapping === undefined) throw new GatewayError('unauthenticated', 'the provider is not accepted here')
    return mapping
  }

  /**
   * Who `req` is: its session, else its Bearer token (see AuthenticationResult for the refusals).
   * `host`: the host the client asked, which an upstream's resource identifier may be on.
   */
  async authenticate(req: AuthRequest, reply: SessionReply, host?: string): Promise<AuthenticationResult> {
    const { store, providers, revocations, clientKey } = this.#deps
    const resource = this.#resource?.(host)
    if (resource === undefined) {
      const session = await store.load(req)
      // A session of a provider this upstream does not accept (or no longer configured) does not sign in here.
      if (session !== undefined && this.#accepts.has(session.provider)) return this.#fromSession(req, reply, session)
    }
    const token = bearerTokenOf(req.headers.authorization)
    if (token === undefined) return undefined
    // A token is never sent to a provider this upstream does not accept; one that names no
    // issuer (an opaque token) goes to the first accepted provider that introspects.
    const accepted = this.#accepted
    const provider = providers.verifierOf(token, accepted)
    const verifier = provider === null ? accepted.find((p) => p.config.bearer.introspection) : provider
    if (verifier === undefined) return 'invalid_token'
    // The client as the sign-in rate limit counts it (AuthenticationDeps.clientKey).
    const claims = await verifier.bearer.verify(token, req.ip === undefined ? undefined : clientKey(req.ip), resource)
    if (claims === undefined) return 'invalid_token'
    // RFC 6750 3.1 invalid_token covers a revoked token. A list that cannot be read throws (503).
    if (revocations !== undefined && (await bearerRevoked(revocations, verifier.name, claims))) return 'invalid_token'
    return { claims, accessToken: token, provider: verifier.name, issuer: verifier.config.issuer, mapping: verifier.mapping }
  }

  async #fromSession(req: AuthRequest, reply: SessionReply, loaded: Session): Promise<Exclude<AuthenticationResult, undefined>> {
    const { store, lifecycle, clock, bindIssuer } = this.#deps
    const session = bindIssuer(loaded)
    if (session?.issuer === undefined) {
      // Signed in at another issuer than its provider's now: ended, never asserted as a user of
      // the new one (the same `sub` there is someone else, OpenID Connect Core 2).
      await store.destroy(req, reply)
      req.log.info({ provider: loaded.provider, sub: loaded.claims.sub }, "session ended: signed in at another issuer than its provider's")
      return 'expired'
    }
    const of = { provider: session.provider, issuer: session.issuer, mapping: this.#mappingOf(session.provider) }
    if (session.expiresAt > clock.now() / 1000) {
      if (!this.#withIdToken) return { claims: session.claims, accessToken: session.accessToken, ...of }
      // The ID token is kept with the long-lived credentials (a second cookie, or Redis's record).
      const idToken = (await store.withCredentials(req, session))?.idToken
      return { claims: session.claims, accessToken: session.accessToken, ...of, ...(idToken === undefined ? {} : { idToken }) }
    }
    // Only now are the long-lived credentials opened: the hot path reads the session alone.
    const full = await store.withCredentials(req, session)
    if (full === undefined) return 'refreshable'
    if (full.refreshToken === undefined) return 'expired'
    try {
      const updated = await lifecycle.refresh(req, reply, full)
      const idToken = this.#withIdToken ? (updated.idToken ?? full.idToken) : undefined
      return { claims: updated.claims, accessToken: updated.accessToken, ...of, ...(idToken === undefined ? {} : { idToken }) }
    } catch (err) {
      // Refused, or ended while it was being refreshed (SessionStore.update): signed out.
      if (err instanceof GatewayError && (err.code === 'refresh_token_invalid' || err.code === 'unauthenticated')) return 'expired'
      throw err
    }
  }
}
