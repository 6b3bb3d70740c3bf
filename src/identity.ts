import type { FastifyInstance } from 'fastify'
import type { SessionClaims } from './session/types.js'

// Who a request is, once the access decision (proxy guard or forward-auth) has established it.
// The identity headers towards upstreams, forward-auth's X-Auth-Request-* headers and the request
// log line all read it from here.

export interface Identity {
  claims: SessionClaims
  accessToken: string
  /** The name of the provider that signed the user in (or issued the Bearer token). */
  provider: string
  /** That provider's issuer: two providers may give the same `sub` to two different people. */
  issuer: string
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the access decision when the request is signed in; null otherwise. */
    identity: Identity | null
  }
}

/** Declares `request.identity` (null until a decision sets it). Call once, on the root instance. */
export function decorateIdentity(app: FastifyInstance): void {
  app.decorateRequest('identity', null)
}
