import type { Clock } from '../lib/clock.js'
import type { GatewayCookies } from './cookies.js'
import { SEALED_REFERENCE } from './sealed.js'
import { selects, type Session, type SessionReply, type SessionRequest, type SessionSelector, type SessionStore } from './types.js'

// Sessions in this process's memory; the browser holds only a sealed reference. For a single
// replica whose tokens are too large for cookies, or that wants no token in the browser at all.
// Sessions are lost on restart; use the redis store for several replicas. The store is bounded
// (session.memory.maxSessions): sign-ins are what clients create, so their number must not
// decide the gateway's memory. When full, the oldest sign-in is evicted; it ends soonest anyway.

const SWEEP_INTERVAL_MS = 60_000

export class MemorySessionStore implements SessionStore {
  readonly #cookies: GatewayCookies
  readonly #maxAgeSeconds: number
  readonly #maxSessions: number
  /** In sign-in order: a Map iterates in insertion order, and an update keeps the key's place. */
  readonly #sessions: Map<string, Session>
  readonly #sweeper: NodeJS.Timeout
  readonly #clock: Clock
  #evictions = 0

  /** `sessions`: the map of the store this one replaces (a configuration reload), whose sign-ins it keeps. */
  constructor(cookies: GatewayCookies, maxAgeSeconds: number, maxSessions: number, clock: Clock, sessions = new Map<string, Session>()) {
    this.#cookies = cookies
    this.#clock = clock
    this.#sessions = sessions
    this.#maxAgeSeconds = maxAgeSeconds
    this.#maxSessions = maxSessions
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS).unref()
  }

  /** Sessions evicted because the store was full, since start (a counter for metrics). */
  get evictions(): number {
    return this.#evictions
  }

  async load(req: SessionRequest): Promise<Session | undefined> {
    const ref = SEALED_REFERENCE.decode(this.#cookies.read(req, 'session'))
    if (ref === undefined) return undefined
    const session = this.#sessions.get(ref.id)
    if (session === undefined || this.#ended(session)) return undefined
    return session
  }

  async withCredentials(_req: SessionRequest, session: Session): Promise<Session> {
    return session
  }

  async create(req: SessionRequest, reply: SessionReply, session: Session): Promise<void> {
    this.#makeRoom()
    this.#sessions.set(session.id, session)
    this.#cookies.write(req, reply, 'session', SEALED_REFERENCE.encode({ id: session.id }), session.createdAt + this.#maxAgeSeconds)
  }

  async update(_req: SessionRequest, reply: SessionReply, session: Session): Promise<boolean> {
    // A refresh that finishes after the session was logged out, ended by a back-channel logout or
    // evicted must not bring it back (the Redis store's SET XX).
    const current = this.#sessions.get(session.id)
    if (current === undefined || this.#ended(current)) {
      this.#clearCookies(reply)
      return false
    }
    this.#sessions.set(session.id, session)
    return true
  }

  #clearCookies(reply: SessionReply): void {
    this.#cookies.clear(reply, 'session')
    this.#cookies.clear(reply, 'credentials')
  }

  async destroy(req: SessionRequest, reply: SessionReply): Promise<void> {
    const ref = SEALED_REFERENCE.decode(this.#cookies.read(req, 'session'))
    if (ref !== undefined) this.#sessions.delete(ref.id)
    this.#clearCookies(reply)
  }

  async end(selector: SessionSelector, before = Number.POSITIVE_INFINITY): Promise<void> {
    for (const [id, session] of this.#sessions) if (selects(selector, session) && session.createdAt <= before) this.#sessions.delete(id)
  }

  async expireTokens(selector: SessionSelector): Promise<void> {
    for (const [id, session] of this.#sessions) if (selects(selector, session)) this.#sessions.set(id, { ...session, expiresAt: 0 })
  }

  async subjectsByEmail(provider: string, email: string): Promise<string[]> {
    const wanted = email.toLowerCase()
    const subs = new Set<string>()
    for (const session of this.#sessions.values()) {
      const claim = session.claims.email
      if (session.provider === provider && typeof claim === 'string' && claim.toLowerCase() === wanted) subs.add(session.claims.sub)
    }
    return [...subs]
  }

  async ping(): Promise<boolean> {
    return true
  }

  /** Stops sweeping; the sessions stay, for the store a reload builds in its place. */
  async close(): Promise<void> {
    clearInterval(this.#sweeper)
  }

  #ended(session: Session): boolean {
    return session.createdAt + this.#maxAgeSeconds <= this.#clock.now() / 1000
  }

  #makeRoom(): void {
    for (const [id, session] of this.#sessions) {
      if (this.#sessions.size < this.#maxSessions) return
      this.#sessions.delete(id)
      // An ended session would have gone at the next sweep: only live ones count as evicted.
      if (!this.#ended(session)) this.#evictions++
    }
  }

  #sweep(): void {
    for (const [id, session] of this.#sessions) if (this.#ended(session)) this.#sessions.delete(id)
  }
}
