import type { Clock } from '../lib/clock.js'
import type { GatewayCookies } from './cookies.js'
import { SEALED_REFERENCE } from './sealed.js'
import {
  selects,
  userSessionsToEvict,
  type EvictionCounts,
  type Session,
  type SessionBounds,
  type SessionReply,
  type SessionRequest,
  type SessionSelector,
  type SessionStore,
} from './types.js'

// Sessions in this process's memory; the browser holds only a sealed reference. For a single
// replica whose tokens are too large for cookies, or that wants no token in the browser at all.
// Sessions are lost on restart; use the redis store for several replicas. The store is bounded
// twice, since sign-ins are what clients create: per user (session.maxSessionsPerUser), the
// user's own oldest sign-in goes first, so that one account signing in over and over (a script,
// a stolen password) churns through its own sessions only; and in all
// (session.memory.maxSessions), so that their number never decides the gateway's memory. When
// full, the oldest sign-in is evicted; it ends soonest anyway. Each eviction is counted by reason.

const SWEEP_INTERVAL_MS = 60_000

/** Whose session: its provider and subject (two providers may use the same `sub` for different people). */
function userOf(session: Session): string {
  return JSON.stringify([session.provider, session.claims.sub])
}

/**
 * The memory store's sign-ins by id in sign-in order (a Map iterates in insertion order, and an
 * update keeps the key's place), with the ids of each user's, so a sign-in finds its user's
 * without walking every session. What outlives a reload: the store built in its place keeps them.
 */
export class MemorySessions extends Map<string, Session> {
  readonly #byUser = new Map<string, Set<string>>()

  constructor(entries: Iterable<readonly [string, Session]> = []) {
    super()
    for (const [id, session] of entries) this.set(id, session)
  }

  override set(id: string, session: Session): this {
    const previous = super.get(id)
    if (previous !== undefined && userOf(previous) !== userOf(session)) this.#unindex(id, previous)
    super.set(id, session)
    const user = userOf(session)
    let ids = this.#byUser.get(user)
    if (ids === undefined) {
      ids = new Set()
      this.#byUser.set(user, ids)
    }
    // A Set keeps an existing member's place: an update does not make a session younger.
    ids.add(id)
    return this
  }

  override delete(id: string): boolean {
    const session = super.get(id)
    if (session === undefined) return false
    this.#unindex(id, session)
    return super.delete(id)
  }

  override clear(): void {
    this.#byUser.clear()
    super.clear()
  }

  /** The ids of the sessions of `session`'s user, oldest sign-in first. */
  idsOfUser(session: Session): string[] {
    return [...(this.#byUser.get(userOf(session)) ?? [])]
  }

  #unindex(id: string, session: Session): void {
    const user = userOf(session)
    const ids = this.#byUser.get(user)
    ids?.delete(id)
    if (ids?.size === 0) this.#byUser.delete(user)
  }
}

export class MemorySessionStore implements SessionStore {
  readonly #cookies: GatewayCookies
  readonly #maxAgeSeconds: number
  readonly #bounds: SessionBounds
  readonly #sessions: MemorySessions
  readonly #sweeper: NodeJS.Timeout
  readonly #clock: Clock
  readonly #evictions: EvictionCounts = { store_full: 0, user_limit: 0 }

  /** `sessions`: those of the store this one replaces (a configuration reload), whose sign-ins it keeps. */
  constructor(cookies: GatewayCookies, maxAgeSeconds: number, bounds: SessionBounds, clock: Clock, sessions = new MemorySessions()) {
    this.#cookies = cookies
    this.#clock = clock
    this.#sessions = sessions
    this.#maxAgeSeconds = maxAgeSeconds
    this.#bounds = bounds
    this.#sweeper = setInterval(() => this.#sweep(), SWEEP_INTERVAL_MS).unref()
  }

  /** Live sessions evicted since start, by reason (counters for metrics). */
  get evictions(): Readonly<EvictionCounts> {
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
    this.#makeRoomFor(session)
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

  /** Room for `session`: first its user's oldest sign-ins beyond their bound, then the store's oldest. */
  #makeRoomFor(session: Session): void {
    // An ended session would have gone at the next sweep: it goes silently, and counts for nothing.
    const live = this.#sessions.idsOfUser(session).filter((id) => {
      const theirs = this.#sessions.get(id)
      if (theirs === undefined || !this.#ended(theirs)) return true
      this.#sessions.delete(id)
      return false
    })
    for (const id of live.slice(0, userSessionsToEvict(live.length, this.#bounds.maxSessionsPerUser))) {
      this.#sessions.delete(id)
      this.#evictions.user_limit++
    }
    for (const [id, oldest] of this.#sessions) {
      if (this.#sessions.size < this.#bounds.maxSessions) return
      this.#sessions.delete(id)
      if (!this.#ended(oldest)) this.#evictions.store_full++
    }
  }

  #sweep(): void {
    for (const [id, session] of this.#sessions) if (this.#ended(session)) this.#sessions.delete(id)
  }
}
