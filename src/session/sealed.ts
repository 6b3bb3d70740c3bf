import { DEFAULT_PROVIDER } from '../options/types.js'
import { isDpopKey, type DpopKey } from '../oidc/dpop.js'
import type { SessionClaims } from '../contract/identity.js'
import type { Session } from './types.js'

// The shape of a session once sealed, in a cookie or in Redis: one-letter names, because the
// cookie travels with every request. The cookie store keeps the credentials (r, d) in a cookie of
// their own; the Redis store keeps them in the same value.

export interface SealedSession {
  i: string
  c: SessionClaims
  a: string
  x: number
  t: number
  /** The provider's name; absent in sessions sealed before several providers existed (DEFAULT_PROVIDER). */
  p?: string
  r?: string
  d?: string
  /** DPoP key: with the identity, because every refresh needs it (wherever the credentials are). */
  k?: DpopKey
}

/** `session` in its sealed shape; its refresh and ID tokens only when `withCredentials`. */
export function toSealed(session: Session, withCredentials: boolean): SealedSession {
  const sealed: SealedSession = { i: session.id, c: session.claims, a: session.accessToken, x: session.expiresAt, t: session.createdAt, p: session.provider }
  if (session.dpopKey !== undefined) sealed.k = session.dpopKey
  if (withCredentials && session.refreshToken !== undefined) sealed.r = session.refreshToken
  if (withCredentials && session.idToken !== undefined) sealed.d = session.idToken
  return sealed
}

/** The session an opened seal holds, or undefined for anything that does not have the shape. */
export function fromSealed(v: unknown): Session | undefined {
  if (typeof v !== 'object' || v === null) return undefined
  const s = v as Partial<SealedSession>
  const valid =
    typeof s.i === 'string' &&
    typeof s.a === 'string' &&
    typeof s.x === 'number' &&
    typeof s.t === 'number' &&
    typeof s.c === 'object' &&
    s.c !== null &&
    typeof s.c.sub === 'string' &&
    (s.p === undefined || typeof s.p === 'string') &&
    (s.r === undefined || typeof s.r === 'string') &&
    (s.d === undefined || typeof s.d === 'string') &&
    (s.k === undefined || isDpopKey(s.k))
  if (!valid) return undefined
  const session: Session = { id: s.i!, claims: s.c!, accessToken: s.a!, expiresAt: s.x!, createdAt: s.t!, provider: s.p ?? DEFAULT_PROVIDER }
  if (s.r !== undefined) session.refreshToken = s.r
  if (s.d !== undefined) session.idToken = s.d
  if (s.k !== undefined) session.dpopKey = s.k
  return session
}
