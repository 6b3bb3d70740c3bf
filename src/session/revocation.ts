import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import { SingleFlight } from '../lib/single-flight.js'
import { durableWrite, type RedisClient } from './redis-client.js'
import { emailDigest, type RedisKeys, type RedisWithKeys } from './redis-keys.js'
import { runScript } from './redis-scripts.js'
import { providerScope, type Session, type SessionSelector } from './types.js'

// The sessions a back-channel logout ended, for the cookie store: it cannot delete the cookies
// browsers hold, so it refuses them on every request instead. An entry names a provider session
// (`sid`), a subject (`sub`) or, for a Shared Signals event whose subject is an address (RFC 9493
// 3.2.2), an `email`, and the time of the logout; it is kept for session.maxAgeSeconds, after
// which every session it could refuse has ended anyway.
//
// - A `sid` entry refuses every session carrying that sid, whenever it was created: a provider
//   session that has ended never comes back (a new sign-in gets a new sid), and comparing times
//   would let replicas' clock skew matter.
// - A `sub` entry refuses the subject's sessions created at or before the logout (in whole
//   seconds, as createdAt is: a sign-in in the very second of the logout is refused too, and
//   the next works).
// - An `email` entry refuses, as a `sub` entry does, the sessions created at or before it whose
//   `email` claim is that address, compared lowercased. The entry holds a digest of the provider
//   and the lowercased address (redis-keys.ts emailDigest), never the address: the list (in
//   Redis, in a worker's snapshot) names nobody. A session's address is digested only while the
//   list holds an email entry, so requests pay nothing for this otherwise.
// - The list never fails open. Memory: when full, the oldest entry is folded into a floor, and
//   every session created at or before the floor is refused (those users sign in again). Redis:
//   the list is shared by every replica, each of which rereads it when it has changed, checked
//   at most once per REFRESH_MS; a Redis that cannot be reached makes the check fail
//   (503 session_store_unavailable) once that interval has passed, never pass. A Redis that lost
//   its data (restarted without persistence) cannot tell what was revoked: every session created
//   before the list was started again is refused.

export interface RevocationList {
  /** Refuses from now on the sessions `selector` names. */
  revoke(selector: SessionSelector): Promise<void>
  /** Whether `session` was ended by a back-channel logout; throws GatewayError 503 when it cannot tell. */
  isRevoked(session: Pick<Session, 'claims' | 'createdAt' | 'provider'>): Promise<boolean>
  /** Entries in the list (for the metrics). */
  size(): Promise<number>
}

/** One logout: a `sid:`, `sub:` or `email:` key and the epoch second it was recorded. */
export interface RevocationEntry {
  key: string
  at: number
}

export interface RevocationSnapshot {
  entries: RevocationEntry[]
  /** null: no floor (JSON, which carries it between processes, has no -Infinity). */
  floor: number | null
}

/** Entries of the memory list; beyond it the oldest is folded into the floor. */
export const MEMORY_REVOCATIONS = 100_000
/** How long a replica of a Redis-backed list trusts its copy before asking whether it changed. */
export const REFRESH_MS = 1000

const EMAIL_PREFIX = 'email:'

function keyOf(selector: SessionSelector): string {
  // The digest carries the provider's scope itself.
  if (selector.email !== undefined) return `${EMAIL_PREFIX}${emailDigest(selector.provider, selector.email)}`
  const scope = providerScope(selector.provider)
  return selector.sid !== undefined ? `sid:${scope}${selector.sid}` : `sub:${scope}${selector.sub}`
}

/** 1 for an `email:` entry, else 0: what the lists count to skip the digest when they hold none. */
function emailWeight(key: string): number {
  return key.startsWith(EMAIL_PREFIX) ? 1 : 0
}

function nowSeconds(clock: Clock): number {
  return Math.floor(clock.now() / 1000)
}

/**
 * The rules at the top of this file, over entries (key -> epoch seconds of the logout), how many
 * of them are `email:` entries, and a floor.
 */
function revokedBy(entries: ReadonlyMap<string, number>, emails: number, floor: number, session: Pick<Session, 'claims' | 'createdAt' | 'provider'>): boolean {
  if (session.createdAt <= floor) return true
  // The common case on every request: nothing revoked, so no key strings are built.
  if (entries.size === 0) return false
  const scope = providerScope(session.provider)
  const sid = session.claims.sid
  if (typeof sid === 'string' && entries.has(`sid:${scope}${sid}`)) return true
  const subRevokedAt = entries.get(`sub:${scope}${session.claims.sub}`)
  if (subRevokedAt !== undefined && subRevokedAt >= session.createdAt) return true
  // A digest per request only while some address is revoked.
  const email = session.claims.email
  if (emails === 0 || typeof email !== 'string') return false
  const emailRevokedAt = entries.get(`${EMAIL_PREFIX}${emailDigest(session.provider, email)}`)
  return emailRevokedAt !== undefined && emailRevokedAt >= session.createdAt
}

export interface RevocationOptions {
  /** session.maxAgeSeconds: how long an entry is kept. */
  maxAgeSeconds: number
  clock: Clock
}

export class MemoryRevocationList implements RevocationList {
  readonly #maxAgeSeconds: number
  readonly #maxEntries: number
  readonly #clock: Clock
  /** In logout order: a re-revoked key moves to the end. */
  readonly #entries = new Map<string, number>()
  /** How many of the entries are `email:` entries. */
  #emails = 0
  #floor = Number.NEGATIVE_INFINITY

  constructor(options: RevocationOptions & { maxEntries?: number }) {
    this.#maxAgeSeconds = options.maxAgeSeconds
    this.#maxEntries = options.maxEntries ?? MEMORY_REVOCATIONS
    this.#clock = options.clock
  }

  async revoke(selector: SessionSelector): Promise<void> {
    this.add(selector)
  }

  /** Revokes, and returns the entry made: what other copies of the list apply (server.workers). */
  add(selector: SessionSelector): RevocationEntry {
    const entry: RevocationEntry = { key: keyOf(selector), at: nowSeconds(this.#clock) }
    this.apply(entry)
    return entry
  }

  /** Records an entry made by the list this one copies. */
  apply(entry: RevocationEntry): void {
    this.#purge(nowSeconds(this.#clock))
    this.#delete(entry.key)
    if (this.#entries.size >= this.#maxEntries) {
      // Full: the oldest entry goes, and with it every session it could refuse, and more
      // (all sessions created at or before its logout), rather than any of them coming back.
      const [oldest, revokedAt] = this.#entries.entries().next().value as [string, number]
      this.#delete(oldest)
      this.#floor = Math.max(this.#floor, revokedAt)
    }
    this.#entries.set(entry.key, entry.at)
    this.#emails += emailWeight(entry.key)
  }

  /** Every entry and the floor, for a new copy of the list (a worker that starts). */
  snapshot(): RevocationSnapshot {
    this.#purge(nowSeconds(this.#clock))
    return { entries: [...this.#entries].map(([key, at]) => ({ key, at })), floor: Number.isFinite(this.#floor) ? this.#floor : null }
  }

  /** Takes the state of the list this one copies: its entries and its floor. */
  restore(snapshot: RevocationSnapshot): void {
    for (const entry of snapshot.entries) this.apply(entry)
    if (snapshot.floor !== null) this.#floor = Math.max(this.#floor, snapshot.floor)
  }

  async isRevoked(session: Pick<Session, 'claims' | 'createdAt' | 'provider'>): Promise<boolean> {
    return revokedBy(this.#entries, this.#emails, this.#floor, session)
  }

  async size(): Promise<number> {
    this.#purge(nowSeconds(this.#clock))
    return this.#entries.size
  }

  #purge(now: number): void {
    for (const [key, revokedAt] of this.#entries) {
      if (revokedAt + this.#maxAgeSeconds > now) return
      this.#delete(key)
    }
  }

  /** Every removal goes through here, so that the email count stays that of the entries. */
  #delete(key: string): void {
    if (this.#entries.delete(key)) this.#emails -= emailWeight(key)
  }
}

interface Snapshot {
  version: string | null
  entries: Map<string, number>
  /** How many of the entries are `email:` entries. */
  emails: number
  floor: number
  /** Milliseconds since the epoch. */
  checkedAt: number
}

export class RedisRevocationList implements RevocationList {
  readonly #redis: RedisClient
  readonly #maxAgeSeconds: number
  readonly #clock: Clock
  readonly #key: string
  readonly #versionKey: string
  readonly #sinceKey: string
  readonly #refreshes = new SingleFlight<Snapshot>()
  #snapshot: Snapshot | undefined

  constructor(redis: RedisClient, options: RevocationOptions & { keys: RedisKeys }) {
    this.#redis = redis
    this.#maxAgeSeconds = options.maxAgeSeconds
    this.#clock = options.clock
    this.#key = options.keys.revocations()
    this.#versionKey = options.keys.revocationsVersion()
    this.#sinceKey = options.keys.revocationsSince()
    // Started now, before this replica creates sessions, rather than at the first check (which
    // would refuse the sessions created in between). Redis down: the first check starts it.
    this.#redis.set(this.#sinceKey, String(nowSeconds(this.#clock)), 'NX').catch(() => undefined)
    this.#carryOver(options.keys.legacyRevocations()).catch(() => undefined)
  }

  /**
   * Releases before hash tags kept the list under other names: its entries are carried over once
   * (one key at a time, as Cluster requires), then its earlier start, or every session signed in
   * before the upgrade would fall below the new start and be refused. Until then the new start is
   * the later one: stricter, never looser.
   */
  async #carryOver(legacy: { list: string; since: string }): Promise<void> {
    const [since, entries] = await Promise.all([this.#redis.get(legacy.since), this.#redis.zrangebyscore(legacy.list, '-inf', '+inf', 'WITHSCORES')])
    if (since === null) return
    if (entries.length > 0) {
      const members: Array<string | number> = []
      for (let i = 0; i + 1 < entries.length; i += 2) members.push(Number(entries[i + 1]), entries[i] as string)
      await this.#redis.zadd(this.#key, 'GT', ...members)
      await this.#redis.incr(this.#versionKey)
    }
    const current = await this.#redis.get(this.#sinceKey)
    if (current === null || Number(since) < Number(current)) await this.#redis.set(this.#sinceKey, since)
    await Promise.all([this.#redis.del(legacy.list), this.#redis.del(legacy.since)])
  }

  async revoke(selector: SessionSelector): Promise<void> {
    const now = nowSeconds(this.#clock)
    try {
      await durableWrite(this.#redis, this.#key, (r) => runScript(r, 'ogwRevoke', [this.#key, this.#versionKey], [keyOf(selector), now, this.#maxAgeSeconds]))
    } catch (cause) {
      throw new GatewayError('session_store_unavailable', 'the revocation list in Redis cannot be reached', { cause })
    }
    // This replica refuses the ended sessions from its very next request.
    if (this.#snapshot !== undefined) this.#snapshot.checkedAt = Number.NEGATIVE_INFINITY
  }

  async isRevoked(session: Pick<Session, 'claims' | 'createdAt' | 'provider'>): Promise<boolean> {
    const snapshot = await this.#current()
    return revokedBy(snapshot.entries, snapshot.emails, snapshot.floor, session)
  }

  async size(): Promise<number> {
    try {
      return await this.#redis.zcount(this.#key, nowSeconds(this.#clock) - this.#maxAgeSeconds + 1, '+inf')
    } catch (cause) {
      throw new GatewayError('session_store_unavailable', 'the revocation list in Redis cannot be reached', { cause })
    }
  }

  async #current(): Promise<Snapshot> {
    const snapshot = this.#snapshot
    if (snapshot !== undefined && this.#clock.now() - snapshot.checkedAt < REFRESH_MS) return snapshot
    return this.#refreshes.run('', async () => {
      try {
        this.#snapshot = await this.#read(snapshot)
        return this.#snapshot
      } catch (cause) {
        throw new GatewayError('session_store_unavailable', 'the revocation list in Redis cannot be reached', { cause })
      }
    })
  }

  /** The list as Redis has it: one GET when it has not changed since `known`. */
  async #read(known: Snapshot | undefined): Promise<Snapshot> {
    const checkedAt = this.#clock.now()
    const version = await this.#redis.get(this.#versionKey)
    if (known !== undefined && version === known.version && version !== null) return { ...known, checkedAt }
    // The first read, a change, or a list that is gone (Redis restarted empty): the whole list.
    // `since` is when the list started; every session created before it is refused, since the
    // list cannot tell which of them a lost entry ended (on a first deployment, those signed in
    // before it).
    await this.#redis.set(this.#sinceKey, String(nowSeconds(this.#clock)), 'NX')
    const [entries, since] = await Promise.all([
      this.#redis.zrangebyscore(this.#key, nowSeconds(this.#clock) - this.#maxAgeSeconds + 1, '+inf', 'WITHSCORES'),
      this.#redis.get(this.#sinceKey),
    ])
    const map = new Map<string, number>()
    let emails = 0
    for (let i = 0; i + 1 < entries.length; i += 2) {
      const key = entries[i] as string
      map.set(key, Number(entries[i + 1]))
      emails += emailWeight(key)
    }
    return { version, entries: map, emails, floor: since === null ? nowSeconds(this.#clock) : Number(since) - 1, checkedAt }
  }
}

/** The list for the cookie store: in Redis when the gateway has a Redis client, else in memory. */
export function createRevocationList(options: RevocationOptions & RedisWithKeys): RevocationList {
  return options.redis === undefined ? new MemoryRevocationList(options) : new RedisRevocationList(options.redis, options)
}
