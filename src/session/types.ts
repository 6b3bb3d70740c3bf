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
   * The long-lived credentials (with idToken). `load` may leave them out: the cookie store keeps
   * them in a second cookie that only `withCredentials` opens.
   */
  refreshToken?: string
  idToken?: string
}

/** Where sessions live. Implementations never throw for a bad or foreign cookie: that is "no session". */
export interface SessionStore {
  /** The request's session, read as cheaply as possible: this runs on every proxied request. */
  load(req: FastifyRequest): Promise<Session | undefined>
  /**
   * `session` with its refresh and ID tokens, read only when they are needed (a refresh, a
   * logout); `undefined` when they are kept where this request does not reach (the cookie store
   * with `cookies.credentialsPath: /api/v1/openid` on any other path).
   */
  withCredentials(req: FastifyRequest, session: Session): Promise<Session | undefined>
  /** Stores `session`, which carries its credentials (from `withCredentials` or a sign-in). */
  save(req: FastifyRequest, reply: FastifyReply, session: Session): Promise<void>
  /** Deletes the session (server side, if any) and every session cookie. */
  destroy(req: FastifyRequest, reply: FastifyReply): Promise<void>
  close(): Promise<void>
}
