import type { Clock } from '../lib/clock.js'
import type { GatewayCookies } from './cookies.js'
import { MemoryRevocationList, type RevocationList } from './revocation.js'
import { fromSealed, SEALED_CREDENTIALS, toSealed } from './sealed.js'
import type { Session, SessionReply, SessionRequest, SessionSelector, SessionStore } from './types.js'

// The whole session lives in the browser, sealed, in two cookies: the identity and the access
// token, opened on every request, and the long-lived credentials (refresh token, ID token),
// opened only when the access token has expired or at logout. The credentials cookie travels with
// every request by default, or only to /api/v1/openid (cookies.credentialsPath). A back-channel
// logout cannot reach the browsers' cookies: the sessions it ends go on a revocation list,
// checked on every load. Neither can a logout reach a copy of the cookies (a stolen or kept one,
// OWASP ASVS V3.3.1): every session this store destroys goes on the list by its id, for what is
// left of its lifetime, and no other session of the user's with it.

export class CookieSessionStore implements SessionStore {
  readonly #cookies: GatewayCookies
  readonly #maxAgeSeconds: number
  readonly #revocations: RevocationList

  constructor(cookies: GatewayCookies, maxAgeSeconds: number, clock: Clock, revocations?: RevocationList) {
    this.#cookies = cookies
    this.#maxAgeSeconds = maxAgeSeconds
    this.#revocations = revocations ?? new MemoryRevocationList({ maxAgeSeconds, clock })
  }

  async load(req: SessionRequest): Promise<Session | undefined> {
    const sealed = this.#cookies.read(req, 'session')
    const session = fromSealed(sealed)
    if (session === undefined) return undefined
    // A revocation list that cannot be read throws (503): an ended session never passes unchecked.
    return (await this.#revocations.isRevoked(session)) ? undefined : session
  }

  async withCredentials(req: SessionRequest, session: Session): Promise<Session | undefined> {
    if (!this.#cookies.reaches(req, 'credentials')) return undefined
    const credentials = SEALED_CREDENTIALS.decode(this.#cookies.read(req, 'credentials'))
    const full: Session = { ...session }
    // Credentials of another sign-in (e.g. a stale cookie) are never combined with this one.
    if (credentials !== undefined && credentials.id === session.id) {
      if (credentials.refreshToken !== undefined) full.refreshToken = credentials.refreshToken
      if (credentials.idToken !== undefined) full.idToken = credentials.idToken
    }
    return full
  }

  async create(req: SessionRequest, reply: SessionReply, session: Session): Promise<void> {
    // Else a list that starts after this session (its start was lost, or Redis lost its data)
    // would refuse it at its first request.
    await this.#revocations.startBy(session.createdAt)
    this.#write(req, reply, session)
  }

  /**
   * The session lives in the browser, so "still exists" is: not ended by a back-channel logout
   * (the revocation list). A logout in the same browser clears the cookies; a refresh answered
   * after it sets them again only in the browser that asked, and its refresh token was revoked at
   * the provider by that logout (see docs/features/sessions.md).
   */
  async update(req: SessionRequest, reply: SessionReply, session: Session): Promise<boolean> {
    if (await this.#revocations.isRevoked(session)) {
      this.#clear(reply)
      return false
    }
    this.#write(req, reply, session)
    return true
  }

  #write(req: SessionRequest, reply: SessionReply, session: Session): void {
    const endsAt = session.createdAt + this.#maxAgeSeconds
    const main = toSealed(session, false)
    this.#cookies.write(req, reply, 'session', main, endsAt)
    if (session.refreshToken === undefined && session.idToken === undefined) {
      this.#cookies.clear(reply, 'credentials')
      return
    }
    const credentials = SEALED_CREDENTIALS.encode({ id: session.id, refreshToken: session.refreshToken, idToken: session.idToken })
    this.#cookies.write(req, reply, 'credentials', credentials, endsAt)
  }

  /**
   * Ends the request's session: listed first (by its id, with its creation as the entry's time, so
   * it leaves the list when the seal expires), then its cookies cleared. A list that cannot be
   * written throws (503): the browser keeps its cookies, and no copy of them outlives a logout
   * that answered 200.
   */
  async destroy(req: SessionRequest, reply: SessionReply): Promise<void> {
    const session = fromSealed(this.#cookies.read(req, 'session'))
    if (session !== undefined) await this.#revocations.revoke({ provider: session.provider, session: session.id }, session.createdAt)
    this.#clear(reply)
  }

  #clear(reply: SessionReply): void {
    this.#cookies.clear(reply, 'session')
    this.#cookies.clear(reply, 'credentials')
  }

  async end(selector: SessionSelector, before?: number): Promise<void> {
    await this.#revocations.revoke(selector, before)
  }

  async ping(): Promise<boolean> {
    return true
  }

  async close(): Promise<void> {}
}
