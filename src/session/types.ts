import type { CookieSerializeOptions } from '@fastify/cookie'
import { DEFAULT_PROVIDER } from '../options/types.js'
import type { DpopKey } from '../oidc/dpop.js'
import type { SessionClaims, SubjectSelector } from '../contract/identity.js'

export interface Session {
  /** Random per sign-in; a new sign-in never reuses it (no fixation). */
  id: string
  claims: SessionClaims
  accessToken: string
  /** Epoch seconds at which the access token expires. */
  expiresAt: number
  /** Epoch seconds of the sign-in; the session ends at createdAt + session.maxAgeSeconds. */
  createdAt: number
  /** The name of the provider it was signed in with; refresh and logout go there. */
  provider: string
  /**
   * The issuer that provider had at the sign-in (OpenID Connect Core 2: `sub` is unique only
   * within it). A session whose provider now names another issuer is ended (issuer-binding.ts).
   * Absent in sessions sealed before it was recorded.
   */
  issuer?: string
  /**
   * The long-lived credentials (with idToken). `load` may leave them out: the cookie store keeps
   * them in a second cookie that only `withCredentials` opens.
   */
  refreshToken?: string
  idToken?: string
  /** The private key the tokens are bound to (provider.dpop, RFC 9449). */
  dpopKey?: DpopKey
}

/**
 * The sessions a back-channel logout ends (Back-Channel Logout 1.0, 2.4 and 2.6): those of one
 * provider session (`sid`, with `sub` also matched when the token names both), or every session of
 * `sub` when the token names no `sid`; always of the provider that sent the logout token, since
 * two providers may use the same `sub` for different people.
 *
 * Or, for a Shared Signals event whose subject is an `email` (RFC 9493 3.2.2), the sessions whose
 * `email` claim is that address, compared lowercased (RFC 9493 3.2.2 leaves canonicalization to
 * the parties; domains are case-insensitive, RFC 5321 2.4, and providers differ on the local
 * part's case, so lowercasing errs towards ending a session). Only a store that cannot
 * find sessions by email (no subjectsByEmail: the cookie store) is given one; the others are given
 * the subjects they find.
 */
export type SessionSelector = { provider: string } & ((SubjectSelector & { email?: undefined }) | EmailSelector)

/** The sessions whose `email` claim is `email` (case-insensitive): see SessionSelector. */
export interface EmailSelector {
  email: string
  sid?: undefined
  sub?: undefined
}

/** Whether `session` is one that `selector` names. */
export function selects(selector: SessionSelector, session: Pick<Session, 'claims' | 'provider'>): boolean {
  if (session.provider !== selector.provider) return false
  if (selector.email !== undefined) {
    const claim = session.claims.email
    return typeof claim === 'string' && claim.toLowerCase() === selector.email.toLowerCase()
  }
  if (selector.sid !== undefined && session.claims.sid !== selector.sid) return false
  return selector.sub === undefined || session.claims.sub === selector.sub
}

/**
 * What sessions read of a request: its cookies, and its path (which of the gateway's cookies a
 * browser sends with it, RFC 6265 5.1.4). A Fastify request is one; the gRPC ext_authz check builds
 * one for the request Envoy describes, whose path is the client's, not the check's.
 */
export interface SessionRequest {
  /** The request target (path and query) the browser sent its cookies with. */
  readonly url: string
  readonly cookies: { readonly [name: string]: string | undefined }
  /**
   * The host the browser sent it to (`host[:port]`; Fastify's request.host, X-Forwarded-Host from
   * a trusted proxy): with several cookies.domains it chooses the Domain of the cookies set
   * (session/cookies.ts). Undefined where unknown: the only domain configured, if one.
   */
  readonly host?: string | undefined
}

/** What sessions write on the answer: cookies (a Fastify reply, or the Set-Cookie lines of a gRPC check). */
export interface SessionReply {
  setCookie(name: string, value: string, options: CookieSerializeOptions): unknown
}

/** Where sessions live. Implementations never throw for a bad or foreign cookie: that is "no session". */
export interface SessionStore {
  /** The request's session, read as cheaply as possible: this runs on every proxied request. */
  load(req: SessionRequest): Promise<Session | undefined>
  /**
   * `session` with its refresh and ID tokens, read only when they are needed (a refresh, a
   * logout); `undefined` when they are kept where this request does not reach (the cookie store
   * with `cookies.credentialsPath: /api/v1/openid` on any other path).
   */
  withCredentials(req: SessionRequest, session: Session): Promise<Session | undefined>
  /** Stores the session of a completed sign-in (with its credentials), and sets its cookies. */
  create(req: SessionRequest, reply: SessionReply, session: Session): Promise<void>
  /**
   * Stores `session` (a refresh's result, with its credentials) only while it still exists: one
   * ended meanwhile (logout, back-channel logout, eviction) is not brought back, and the reply
   * clears its cookies instead. Resolves whether it was stored.
   */
  update(req: SessionRequest, reply: SessionReply, session: Session): Promise<boolean>
  /** Deletes the session (server side, if any) and every session cookie. */
  destroy(req: SessionRequest, reply: SessionReply): Promise<void>
  /**
   * Ends every session `selector` names, on every replica (back-channel logout). Server-side stores
   * delete them; the cookie store, which cannot reach the browsers, refuses them from then on. An
   * `email` selector is for a store without subjectsByEmail (the cookie store); the Redis store,
   * which finds sessions only through its sub and sid indexes, ends nothing for one. With
   * `before` (epoch seconds: a Shared Signals event's time), only the sessions signed in at or
   * before it: a sign-in after the event is not ended by it.
   */
  end(selector: SessionSelector, before?: number): Promise<void>
  /**
   * Makes the sessions `selector` names take fresh tokens and claims at their next request (a
   * Shared Signals token-claims-change): their access tokens count as expired, so the refresh
   * grant runs. Absent where the store cannot change a session in place (the cookie store).
   */
  expireTokens?(selector: SessionSelector): Promise<void>
  /**
   * The `sub` of every session of `provider` whose `email` claim is `email` (case-insensitive),
   * for a Shared Signals event naming its subject by email. Absent where sessions cannot be found
   * by email (the cookie store holds them in browsers): such a store's `end` is given an email
   * selector instead. The Redis store finds them through an email link it keeps only when a
   * provider has `ssf`.
   */
  subjectsByEmail?(provider: string, email: string): Promise<string[]>
  /** Whether the store can be reached now (readiness); never throws. */
  ping(): Promise<boolean>
  close(): Promise<void>
}

/**
 * The prefix that scopes a `sid` or `sub` to its provider in the keys that index sessions (the
 * revocation list, Redis). None for the one-provider form's provider, whose keys were written
 * before several providers existed and must keep matching.
 */
export function providerScope(provider: string): string {
  return provider === DEFAULT_PROVIDER ? '' : `${provider}/`
}

/** What bounds a server-side store (session.memory.maxSessions, session.maxSessionsPerUser). */
export interface SessionBounds {
  /** Sessions a memory store keeps at most (the Redis store has its memory bounded by expiry and per user). */
  maxSessions: number
  /** Sessions one user (provider and `sub`) keeps at most; their oldest sign-in goes first. */
  maxSessionsPerUser: number
}

/** Why a live session was evicted: the store was full, or its user had signed in too often. */
export type EvictionReason = 'store_full' | 'user_limit'

/** Live sessions evicted, by reason. */
export type EvictionCounts = Record<EvictionReason, number>

/**
 * How many of a user's `live` sessions go before one more is created, the oldest first: the new
 * sign-in always gets in (refusing it would let anyone who knows a password lock its owner out).
 */
export function userSessionsToEvict(live: number, maxSessionsPerUser: number): number {
  return Math.max(0, live - maxSessionsPerUser + 1)
}
