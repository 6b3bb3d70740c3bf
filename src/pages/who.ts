import type { Identity } from '../contract/identity.js'
import type { SessionClaims } from '../contract/identity.js'
import type { SessionRequest, SessionStore } from '../session/types.js'

// Who a page says is signed in. Read only when a page is written (error path, signed-out page),
// so ordinary requests never pay for it.

export interface SignedIn {
  /** preferred_username, else email, else sub. */
  name: string
  email: string | undefined
}

function text(claims: SessionClaims, name: string): string | undefined {
  const value = claims[name]
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** A request a page is written for: its session, and the identity a decision set, if any. */
export interface WhoRequest extends SessionRequest {
  readonly identity?: Identity | null
}

/** The request's identity if a decision set one, else its session's; undefined when neither. */
export async function signedInAs(req: WhoRequest, store: SessionStore): Promise<SignedIn | undefined> {
  let claims = req.identity?.claims
  if (claims === undefined) {
    // A page must still render when the session cannot be read; it then shows nobody.
    const session = await store.load(req).catch(() => undefined)
    claims = session?.claims
  }
  if (claims === undefined) return undefined
  const email = text(claims, 'email')
  return { name: text(claims, 'preferred_username') ?? email ?? claims.sub, email }
}
