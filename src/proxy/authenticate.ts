import type { FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors.js'
import { unverifiedIssuer, type Provider, type Providers } from '../oidc/providers.js'
import type { SessionLifecycle } from '../session/lifecycle.js'
import type { Identity } from '../identity.js'
import type { Session, SessionStore } from '../session/types.js'

// Who is making this request? A gateway session whose access token is still valid (refreshed
// transparently when it has expired), else an Authorization: Bearer token that verifies, in both
// cases from one of the providers the upstream accepts (upstreams[].providers). Shared by the
// proxy guard and the forward-auth endpoint, so both decide the same way.

/**
 * `expired`: a session exists but its access token has expired and cannot be refreshed (no
 * refresh token, or the provider refused it and the session has ended). `refreshable`: expired,
 * and its refresh token is kept where this request does not reach (cookies.credentialsPath), so
 * only the refresh endpoint can renew it.
 */
export type Authentication = Identity | 'expired' | 'refreshable' | undefined

export type Authenticate = (req: FastifyRequest, reply: FastifyReply) => Promise<Authentication>

/** The authentication of an upstream that accepts the providers `names` lists. */
export type Authenticator = (names: readonly string[]) => Authenticate

export interface AuthenticateDeps {
  store: SessionStore
  lifecycle: SessionLifecycle
  providers: Providers
}

const BEARER = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i

export function createAuthenticator(deps: AuthenticateDeps): Authenticator {
  const { store, lifecycle, providers } = deps

  async function fromSession(req: FastifyRequest, reply: FastifyReply, session: Session): Promise<Exclude<Authentication, undefined>> {
    const { provider } = session
    if (session.expiresAt > Date.now() / 1000) return { claims: session.claims, accessToken: session.accessToken, provider }
    // Only now are the long-lived credentials opened: the hot path reads the session alone.
    const full = await store.withCredentials(req, session)
    if (full === undefined) return 'refreshable'
    if (full.refreshToken === undefined) return 'expired'
    try {
      const updated = await lifecycle.refresh(req, reply, full)
      return { claims: updated.claims, accessToken: updated.accessToken, provider }
    } catch (err) {
      if (err instanceof GatewayError && err.code === 'refresh_token_invalid') return 'expired'
      throw err
    }
  }

  /**
   * The provider whose verifier checks `token`: the only one accepted, else the one its `iss`
   * names (if accepted), else, for a token that names none (an opaque token), the first accepted
   * one that introspects. A token is never sent to a provider the upstream does not accept.
   */
  function verifierOf(token: string, accepted: readonly Provider[]): Provider | undefined {
    if (accepted.length === 1) return accepted[0]
    const issuer = unverifiedIssuer(token)
    if (issuer === undefined) return accepted.find((p) => p.config.bearer.introspection)
    const provider = providers.byIssuer(issuer)
    return provider !== undefined && accepted.includes(provider) ? provider : undefined
  }

  return (names) => {
    const accepted = providers.named(names)
    const accepts = new Set(names)
    return async function authenticate(req, reply) {
      const session = await store.load(req)
      // A session of a provider this upstream does not accept (or no longer configured) does not sign in here.
      if (session !== undefined && accepts.has(session.provider)) return fromSession(req, reply, session)
      const authorization = req.headers.authorization
      if (authorization === undefined) return undefined
      const token = BEARER.exec(authorization)?.[1]
      if (token === undefined) return undefined
      const provider = verifierOf(token, accepted)
      if (provider === undefined) return undefined
      const claims = await provider.bearer.verify(token)
      return claims === undefined ? undefined : { claims, accessToken: token, provider: provider.name }
    }
  }
}
