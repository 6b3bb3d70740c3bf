import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { mappedGroups, mappedUser } from '../contract/claim-path.js'
import { ENDPOINTS, signInPath } from '../contract/endpoints.js'
import type { Identity } from '../contract/identity.js'
import { bearerChallenge } from '../contract/bearer-challenge.js'
import { GatewayError } from '../contract/errors.js'

// GET /api/v1/openid/userinfo: who the request is signed in as, as JSON, for a page's scripts and
// for tools that ask oauth2-proxy's `/oauth2/userinfo`. Its answer has the same members as
// oauth2-proxy's (oauthproxy.go `UserInfo`: `user`, `email`, `groups` left out when empty,
// `preferredUsername` left out when empty; pull request oauth2-proxy#850 added `user` and
// `groups`), plus the claims the operator names per provider (`additionalClaims`, the name of
// oauth2-proxy v7.15's provider option for arbitrary ID token claims, oauth2-proxy#2685).
//
// The request is authenticated by the one Authentication every exit asks (access/authenticate.ts):
// a session, refreshed when its access token has expired, else an `Authorization: Bearer` token
// of a configured provider. Not signed in is the contract's 401 `unauthenticated` with
// `WWW-Authenticate: Bearer` (RFC 6750 3.1: `error="invalid_token"` for an expired session or a
// refused token). It is not an access verdict about an upstream (access/answer.ts writes those,
// with an upstream's `resource_metadata` and step-up), so it is built here from the shared
// challenge (contract/bearer-challenge.ts). No token is ever in the answer, and no answer is cached (`no-store`: it is one
// user's, RFC 9111 5.2.2.5).

/**
 * What the route asks of the one authentication (access/authenticate.ts UpstreamAuthentication
 * for every configured provider): who the request is, a string saying why nobody is (an expired
 * session, a refused token), or nobody.
 */
export interface UserinfoAuthentication {
  authenticate(req: FastifyRequest, reply: FastifyReply): Promise<Identity | string | undefined>
}

export interface UserinfoOptions {
  /** Every configured provider's authentication: a session or Bearer token of any of them. */
  authentication: UserinfoAuthentication
  /** The gateway's public origin: the 401's signInUrl. */
  publicUrl: string
  /** The claims each provider's answers add (providers[].additionalClaims), by provider name. */
  additionalClaims: ReadonlyMap<string, readonly string[]>
}

/** The members of the answer that are the gateway's own: a named claim never replaces one. */
const FIXED = new Set(['user', 'email', 'groups', 'preferredUsername'])

/** The 401 of a request that is not signed in (`refused`: a session expired, or a Bearer token refused). */
function notSignedIn(refused: boolean, signInUrl: string): GatewayError {
  return new GatewayError('unauthenticated', refused ? 'the sign-in has expired, or the Bearer token was refused' : 'sign in first', {
    headers: { 'www-authenticate': bearerChallenge(refused ? { error: 'invalid_token' } : {}) },
    extensions: { signInUrl },
  })
}

/** The answer for `identity`: oauth2-proxy's members, then the provider's named claims that the session has. */
export function userinfoOf(identity: Identity, named: readonly string[]): Record<string, unknown> {
  const { claims, mapping } = identity
  const answer: Record<string, unknown> = { user: mappedUser(claims, mapping) ?? claims.sub }
  answer.email = typeof claims.email === 'string' ? claims.email : ''
  const raw = mappedGroups(claims, mapping)
  const groups = (Array.isArray(raw) ? raw : [raw]).filter((g): g is string => typeof g === 'string')
  if (groups.length > 0) answer.groups = groups
  if (typeof claims.preferred_username === 'string' && claims.preferred_username !== '') answer.preferredUsername = claims.preferred_username
  for (const name of named) {
    if (!FIXED.has(name) && claims[name] !== undefined) answer[name] = claims[name]
  }
  return answer
}

export async function userinfoRoute(app: FastifyInstance, options: UserinfoOptions): Promise<void> {
  const { authentication, publicUrl, additionalClaims } = options
  app.get(ENDPOINTS.userinfo.path, async (req, reply) => {
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache')
    const result = await authentication.authenticate(req, reply)
    if (result === undefined || typeof result === 'string') throw notSignedIn(result !== undefined, publicUrl + signInPath())
    return userinfoOf(result, additionalClaims.get(result.provider) ?? [])
  })
}
