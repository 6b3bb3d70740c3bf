import type { FastifyReply, FastifyRequest } from 'fastify'

/** The identity claims kept from the ID token: only what identity headers and `allow` rules read. */
export type SessionClaims = { sub: string } & Record<string, unknown>

export interface Session {
  /** Random per sign-in; a new sign-in never reuses it (no fixation). */
  id: string
  claims: SessionClaims
  accessToken: string
  /** Epoch seconds at which the access token expires. */
  expiresAt: number
  /** Epoch seconds of the sign-in; the session ends at createdAt + session.maxAgeSeconds. */
  createdAt: number
  /**
   * Present only where the store can see it: server-side stores always, the cookie store only on
   * the sign-in endpoints, because its cookie is scoped to /api/v1/openid.
   */
  refreshToken?: string
  idToken?: string
}

/** Where sessions live. Implementations never throw for a bad or foreign cookie: that is "no session". */
export interface SessionStore {
  load(req: FastifyRequest): Promise<Session | undefined>
  save(req: FastifyRequest, reply: FastifyReply, session: Session): Promise<void>
  /** Deletes the session (server side, if any) and every session cookie. */
  destroy(req: FastifyRequest, reply: FastifyReply): Promise<void>
  close(): Promise<void>
}
