import type { FastifyInstance } from 'fastify'
import { mappedUser, type ClaimMapping } from './claim-path.js'

// Who a request is, once the access decision (proxy guard or forward-auth) has established it.
// The identity headers towards upstreams, forward-auth's X-Auth-Request-* headers and the request
// log line all read it from here.

/**
 * The identity claims kept from an ID token or a Bearer token's claims: only what identity headers
 * and `allow` rules read. Sessions keep them; the Bearer path produces them without a session.
 */
export type SessionClaims = { sub: string } & Record<string, unknown>

/** What a logout token names: a `sid` (and maybe its `sub`), or a `sub` (Back-Channel Logout 1.0, 2.4). */
export type SubjectSelector = { sid: string; sub?: string } | { sid?: undefined; sub: string }

export interface Identity {
  claims: SessionClaims
  accessToken: string
  /**
   * The session's ID token, only where the upstream forwards it (upstreams[].forwardIdToken) and
   * the session holds it; a Bearer token's identity has none.
   */
  idToken?: string
  /** The name of the provider that signed the user in (or issued the Bearer token). */
  provider: string
  /** That provider's issuer: two providers may give the same `sub` to two different people. */
  issuer: string
  /** Which of that provider's claims are the user and the groups (providers[].userClaim, groupsClaim). */
  mapping: ClaimMapping
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

/**
 * The user the request line names beside `sub`: the mapped user when the provider maps it to
 * another claim (providers[].userClaim), else undefined (`sub` says it already).
 */
export function loggedUser(identity: Identity | null | undefined): string | undefined {
  return identity == null || identity.mapping.isDefault ? undefined : mappedUser(identity.claims, identity.mapping)
}
