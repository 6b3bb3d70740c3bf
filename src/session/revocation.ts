import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import { SingleFlight } from '../lib/single-flight.js'
import { durableWrite, type RedisClient } from './redis-client.js'
import { emailDigest, type RedisKeys, type RedisWithKeys } from './redis-keys.js'
import { runScript } from './redis-scripts.js'
import { DEFAULT_PROVIDER } from '../options/types.js'
import type { Session, SessionSelector, SessionStore } from './types.js'

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
// - A `session` entry refuses exactly one sign-in: the session whose random id it names (a
//   logout of the gateway's own, the cookie store's destroy: the browser's cookies are cleared, a
//   copy of them is refused). The user's other sessions are untouched, unlike a `sid` entry (the
//   provider's session may span several of the gateway's, two tabs of one browser, another
//   device). Its time is the session's creation, so it leaves the list when the session's seal
//   expires anyway (createdAt + session.maxAgeSeconds), never later.
// - An `email` entry refuses, as a `sub` entry does, the sessions created at or before it whose
//   `email` claim is that address, compared lowercased. The entry holds a digest of the provider
//   and the lowercased address (redis-keys.ts emailDigest), never the address: the list (in
//   Redis, in a worker's snapshot) names nobody. A session's address is digested only while the
//   list holds an email entry, so requests pay nothing for this otherwise.
// - Every entry is of one provider, and so is every floor: what one provider's logouts or events
//   do never reaches another provider's users (OpenID Connect Core 2: a `sub` is unique only within
//   its issuer; SSF 1.0 4.1.2 and Back-Channel Logout 1.0 2.6: a transmitter or OP speaks for its
//   own users). A `sid` or `sub` key names its provider before a `/` that no provider name holds
//   (options/schema.ts), so no subject of one provider reads as another's.
// - An entry's time is when the sessions were ended: the logout's, or a Shared Signals event's own
//   time (CAEP 1.0 2 `event_timestamp`, else the SET's `iat`), never later than now: an event
//   received late ends only the sessions signed in before it happened.
// - The same entries refuse Bearer access tokens (access/authenticate.ts), whatever the session
//   store: a token is judged as a session created at its `iat` (RFC 9068 2.2).
// - The list never fails open. Memory: when one provider's entries are full, its oldest entry is
//   folded into that provider's floor, and every session of that provider created at or before the
//   floor is refused (those users sign in again); other providers keep their own share. A
//   provider's `session` entries (logouts) have a share and a floor of their own beside it: a
//   storm of sign-ins and logouts, which any user of the provider can make, never folds away a
//   back-channel or Shared Signals entry; when it fills its own share, its oldest entry becomes
//   the floor of that share (that provider's sessions signed in by then are refused). Redis:
//   the list is shared by every replica, each of which rereads it when it has changed, checked
//   at most once per REFRESH_MS; a Redis that cannot be reached makes the check fail
//   (503 session_store_unavailable) once that interval has passed, never pass. A Redis that lost
//   its data (restarted without persistence) cannot tell what was revoked: every session created
//   before the list was started again is refused.
// - The list's start (`since` in Redis) is never later than a session a replica created: the
//   cookie store writes it, if it is missing, with the session's own creation time before the
//   session's cookie is set (startBy), and fails the sign-in (503) when it cannot, rather than hand
//   out a session the next check would refuse. A replica also starts it as soon as its client is
//   connected (a command sent before would fail at once: no offline queue), so that Bearer tokens
//   issued after the gateway started are not refused either. Each start is an NX write of the time
//   it is made, never of an earlier time: a Redis that lost its data meanwhile lost entries that
//   an earlier start would claim it still holds.

export interface RevocationList {
  /**
   * Refuses from now on the sessions `selector` names that were created at or before `at` (epoch
   * seconds, default now; a later `at` is taken as now).
   */
  revoke(selector: RevocationSelector, at?: number): Promise<void>
  /** Whether `session` (or a Bearer token) was ended by a back-channel logout or an event; throws GatewayError 503 when it cannot tell. */
  isRevoked(session: Revocable): Promise<boolean>
  /** Entries in the list (for the metrics). */
  size(): Promise<number>
  /**
   * Before a session created at `createdAt` (epoch seconds) is handed out: the list has started
   * by then, so that it never refuses that session for being older than the list. Throws
   * GatewayError 503 when it cannot tell.
   */
  startBy(createdAt: number): Promise<void>
}

/**
 * What an entry names: the sessions of a SessionSelector (back-channel logout, Shared Signals), or
 * one session by its random id (a logout of the gateway's own), of `provider`.
 */
export type RevocationSelector = SessionSelector | SessionIdSelector

function isSessionIdSelector(selector: RevocationSelector): selector is SessionIdSelector {
  return typeof (selector as Partial<SessionIdSelector>).session === 'string'
}

export interface SessionIdSelector {
  provider: string
  /** Session.id: random per sign-in. */
  session: string
  sid?: undefined
  sub?: undefined
  email?: undefined
}

/** One logout: a `sid@`, `sub@`, `session@` or `email:` key of `provider`, and the epoch second of the logout (a `session@` key's: its creation). */
export interface RevocationEntry {
  key: string
  at: number
  provider: string
}

export interface RevocationSnapshot {
  entries: RevocationEntry[]
  /** Each share's floor, when it has one, by provider (or `<provider>/sessions`); JSON, which carries it between processes, has no -Infinity. */
  floors: Record<string, number>
}

/** Entries of one provider in the memory list; beyond it its oldest is folded into its floor. */
export const MEMORY_REVOCATIONS = 100_000
/** How long a replica of a Redis-backed list trusts its copy before asking whether it changed. */
export const REFRESH_MS = 1000

const EMAIL_PREFIX = 'email:'

/**
 * The key of a provider's `sid` or `sub`: `sid@<provider>/<sid>`. A provider's name holds no `/`
 * (options/schema.ts), so the first `/` ends it and no subject of one provider reads as another's.
 * (Releases before wrote `sid:<sid>` for the default provider and `sid:<provider>/<sid>` for the
 * others, where the default provider's `partners/alice` was provider partners' `alice`: see
 * legacyReadings.)
 */
export function subjectKey(kind: 'sid' | 'sub' | 'session', provider: string, value: string): string {
  return `${kind}@${provider}/${value}`
}

function keyOf(selector: RevocationSelector): string {
  if (isSessionIdSelector(selector)) return subjectKey('session', selector.provider, selector.session)
  // The digest carries the provider's scope itself.
  if (selector.email !== undefined) return `${EMAIL_PREFIX}${emailDigest(selector.provider, selector.email)}`
  return selector.sid !== undefined ? subjectKey('sid', selector.provider, selector.sid) : subjectKey('sub', selector.provider, selector.sub)
}

/**
 * What an entry written by an earlier release may mean, in today's keys. `sid:` and `sub:` keys
 * did not say where the provider's name ended: `sub:partners/alice` was the default provider's
 * `partners/alice` or provider partners' `alice`. Such an entry is read both ways (it refuses
 * both), never one way that might let an ended session through; it leaves the list with the
 * session lifetime. Any other key is today's.
 */
export function legacyReadings(key: string): string[] {
  const kind = key.startsWith('sid:') ? 'sid' : key.startsWith('sub:') ? 'sub' : undefined
  if (kind === undefined) return [key]
  const rest = key.slice(4)
  const readings = [subjectKey(kind, DEFAULT_PROVIDER, rest)]
  // A prefix that names no configured provider makes a reading no session matches: harmless.
  const slash = rest.indexOf('/')
  if (slash > 0) readings.push(subjectKey(kind, rest.slice(0, slash), rest.slice(slash + 1)))
  return readings
}

/** The epoch second an entry is recorded at: `at` when given, never later than now. */
function entryTime(clock: Clock, at: number | undefined): number {
  const now = nowSeconds(clock)
  return at === undefined || !Number.isFinite(at) ? now : Math.min(Math.floor(at), now)
}

/** 1 for an `email:` entry, else 0: what the lists count to skip the digest when they hold none. */
function emailWeight(key: string): number {
  return key.startsWith(EMAIL_PREFIX) ? 1 : 0
}

function nowSeconds(clock: Clock): number {
  return Math.floor(clock.now() / 1000)
}

/** What the list judges: a session, or a Bearer token (createdAt: its `iat`, undefined when it has none; no id). */
export interface Revocable {
  claims: Session['claims']
  provider: string
  createdAt: number | undefined
  id?: string
}

/** Whether a key is a `session@` entry: those have a share and a floor of their own (a logout storm). */
function isSessionKey(key: string): boolean {
  return key.startsWith('session@')
}

/**
 * The rules at the top of this file, over entries (key -> epoch seconds of the logout), how many
 * of them are `email:` entries, and the floor of the session's provider. Something without a
 * creation time (a Bearer token without `iat`) cannot show it came after an entry: any entry that
 * names it refuses it; the floors, which name no one, do not.
 */
function revokedBy(entries: ReadonlyMap<string, number>, emails: number, floor: number, session: Revocable): boolean {
  const createdAt = session.createdAt ?? Number.NEGATIVE_INFINITY
  if (session.createdAt !== undefined && createdAt <= floor) return true
  // The common case on every request: nothing revoked, so no key strings are built.
  if (entries.size === 0) return false
  if (session.id !== undefined && entries.has(subjectKey('session', session.provider, session.id))) return true
  const sid = session.claims.sid
  if (typeof sid === 'string' && entries.has(subjectKey('sid', session.provider, sid))) return true
  const subRevokedAt = entries.get(subjectKey('sub', session.provider, session.claims.sub))
  if (subRevokedAt !== undefined && subRevokedAt >= createdAt) return true
  // A digest per request only while some address is revoked.
  const email = session.claims.email
  if (emails === 0 || typeof email !== 'string') return false
  const emailRevokedAt = entries.get(`${EMAIL_PREFIX}${emailDigest(session.provider, email)}`)
  return emailRevokedAt !== undefined && emailRevokedAt >= createdAt
}

export interface RevocationOptions {
  /** session.maxAgeSeconds: how long an entry is kept. */
  maxAgeSeconds: number
  clock: Clock
}

/** One provider's share of the memory list (or of its `session@` entries). */
interface Share {
  /** In logout order: a re-revoked key moves to the end. */
  entries: Map<string, number>
  /** How many of the entries are `email:` entries. */
  emails: number
  floor: number
}

const EMPTY_SHARE: Share = { entries: new Map(), emails: 0, floor: Number.NEGATIVE_INFINITY }

/** The suffix of the share holding a provider's `session@` entries (a provider's name holds no `/`). */
const SESSIONS_SHARE = '/sessions'

/** The share an entry of `provider` goes to: its `session@` entries (logouts) apart from the others. */
function shareId(provider: string, key: string): string {
  return isSessionKey(key) ? provider + SESSIONS_SHARE : provider
}

/** The provider a share belongs to. */
function providerOfShare(id: string): string {
  return id.endsWith(SESSIONS_SHARE) ? id.slice(0, -SESSIONS_SHARE.length) : id
}

export class MemoryRevocationList implements RevocationList {
  readonly #maxAgeSeconds: number
  readonly #maxEntries: number
  readonly #clock: Clock
  /** Each share's entries and floor: one provider (or its logouts) filling its share never folds another's. */
  readonly #shares = new Map<string, Share>()

  constructor(options: RevocationOptions & { maxEntries?: number }) {
    this.#maxAgeSeconds = options.maxAgeSeconds
    this.#maxEntries = options.maxEntries ?? MEMORY_REVOCATIONS
    this.#clock = options.clock
  }

  async revoke(selector: RevocationSelector, at?: number): Promise<void> {
    this.add(selector, at)
  }

  /** Revokes, and returns the entry made: what other copies of the list apply (server.workers). */
  add(selector: RevocationSelector, at?: number): RevocationEntry {
    const entry: RevocationEntry = { key: keyOf(selector), at: entryTime(this.#clock, at), provider: selector.provider }
    this.apply(entry)
    return entry
  }

  /** Records an entry made by the list this one copies. */
  apply(entry: RevocationEntry): void {
    const share = this.#share(shareId(entry.provider, entry.key))
    this.#purge(share, nowSeconds(this.#clock))
    const previous = share.entries.get(entry.key)
    this.#delete(share, entry.key)
    if (share.entries.size >= this.#maxEntries) {
      // Full: the share's oldest entry goes, and with it every session it could refuse, and
      // more (all of that provider's sessions created at or before its time), rather than any of
      // them coming back. Another provider's sessions are never touched.
      const [oldest, revokedAt] = share.entries.entries().next().value as [string, number]
      this.#delete(share, oldest)
      share.floor = Math.max(share.floor, revokedAt)
    }
    // A re-revoked key keeps the later time (an event received late never moves a logout back).
    share.entries.set(entry.key, Math.max(entry.at, previous ?? Number.NEGATIVE_INFINITY))
    share.emails += emailWeight(entry.key)
  }

  /** Every entry and the floors (by share), for a new copy of the list (a worker that starts). */
  snapshot(): RevocationSnapshot {
    const now = nowSeconds(this.#clock)
    const entries: RevocationEntry[] = []
    const floors: Record<string, number> = {}
    for (const [id, share] of this.#shares) {
      this.#purge(share, now)
      const provider = providerOfShare(id)
      for (const [key, at] of share.entries) entries.push({ key, at, provider })
      if (Number.isFinite(share.floor)) floors[id] = share.floor
    }
    return { entries, floors }
  }

  /** Takes the state of the list this one copies: its entries and its floors. */
  restore(snapshot: RevocationSnapshot): void {
    for (const entry of snapshot.entries) this.apply(entry)
    for (const [id, floor] of Object.entries(snapshot.floors)) {
      const share = this.#share(id)
      share.floor = Math.max(share.floor, floor)
    }
  }

  async isRevoked(session: Revocable): Promise<boolean> {
    const share = this.#shares.get(session.provider) ?? EMPTY_SHARE
    if (revokedBy(share.entries, share.emails, share.floor, session)) return true
    // Bearer tokens name no session: only the floor of the logouts' share can refuse them.
    const logouts = this.#shares.get(session.provider + SESSIONS_SHARE) ?? EMPTY_SHARE
    return revokedBy(logouts.entries, 0, logouts.floor, session)
  }

  /** A list in memory starts with the process, before any session it judges. */
  async startBy(): Promise<void> {}

  async size(): Promise<number> {
    const now = nowSeconds(this.#clock)
    let size = 0
    for (const share of this.#shares.values()) {
      this.#purge(share, now)
      size += share.entries.size
    }
    return size
  }

  #share(id: string): Share {
    let share = this.#shares.get(id)
    if (share === undefined) {
      share = { entries: new Map(), emails: 0, floor: Number.NEGATIVE_INFINITY }
      this.#shares.set(id, share)
    }
    return share
  }

  #purge(share: Share, now: number): void {
    // In logout order; a `session@` entry's time is its session's creation, so one may wait
    // behind a later-created one: it is kept a little longer, never dropped early.
    for (const [key, revokedAt] of share.entries) {
      if (revokedAt + this.#maxAgeSeconds > now) return
      this.#delete(share, key)
    }
  }

  /** Every removal goes through here, so that the email count stays that of the entries. */
  #delete(share: Share, key: string): void {
    if (share.entries.delete(key)) share.emails -= emailWeight(key)
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
    // Started once connected rather than at the first check, which would refuse the Bearer
    // tokens issued in between (sessions are covered by startBy). A start that fails is tried
    // again at the next connection; meanwhile the first check starts the list.
    this.#whenConnected(async () => {
      await this.#redis.set(this.#sinceKey, String(nowSeconds(this.#clock)), 'NX')
      await this.#carryOver(options.keys.legacyRevocations())
    })
  }

  /** Runs `task` once the client is connected (at once if it is), again at each connection until it succeeds. */
  #whenConnected(task: () => Promise<void>): void {
    const attempt = (): void => {
      task().catch(() => this.#redis.once('ready', attempt))
    }
    if (this.#redis.status === 'ready') attempt()
    else this.#redis.once('ready', attempt)
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

  async revoke(selector: RevocationSelector, at?: number): Promise<void> {
    const time = entryTime(this.#clock, at)
    try {
      await durableWrite(this.#redis, this.#key, (r) => runScript(r, 'ogwRevoke', [this.#key, this.#versionKey], [keyOf(selector), time, this.#maxAgeSeconds]))
    } catch (cause) {
      throw new GatewayError('session_store_unavailable', 'the revocation list in Redis cannot be reached', { cause })
    }
    // This replica refuses the ended sessions from its very next request.
    if (this.#snapshot !== undefined) this.#snapshot.checkedAt = Number.NEGATIVE_INFINITY
  }

  async startBy(createdAt: number): Promise<void> {
    // NX: a list that has started keeps its start (a later one would refuse more, an earlier
    // one would vouch for entries a Redis that lost its data no longer holds). Durable: a start
    // lost in a failover would be written again later, by the first check after it.
    try {
      await durableWrite(this.#redis, this.#sinceKey, (r) => r.set(this.#sinceKey, String(Math.floor(createdAt)), 'NX'))
    } catch (cause) {
      throw new GatewayError('session_store_unavailable', 'the revocation list in Redis cannot be reached', { cause })
    }
  }

  async isRevoked(session: Revocable): Promise<boolean> {
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
      const at = Number(entries[i + 1])
      for (const key of legacyReadings(entries[i] as string)) {
        const known = map.get(key)
        if (known === undefined) emails += emailWeight(key)
        map.set(key, Math.max(at, known ?? at))
      }
    }
    return { version, entries: map, emails, floor: since === null ? nowSeconds(this.#clock) : Number(since) - 1, checkedAt }
  }
}

/** The list for the cookie store: in Redis when the gateway has a Redis client, else in memory. */
export function createRevocationList(options: RevocationOptions & RedisWithKeys): RevocationList {
  return options.redis === undefined ? new MemoryRevocationList(options) : new RedisRevocationList(options.redis, options)
}

/**
 * Ends what `selector` names as of `at` (epoch seconds, default now): the store's sessions signed
 * in by then and, through `bearer`, the Bearer tokens issued by then. `bearer` is the list of a
 * store that keeps none itself (memory, Redis: they delete sessions); the cookie store's `end` is
 * already an entry in the list. Recorded first: a store that fails after it has refused more, not less.
 */
export async function endSelected(store: SessionStore, bearer: RevocationList | undefined, selector: SessionSelector, at?: number): Promise<void> {
  await bearer?.revoke(selector, at)
  await store.end(selector, at)
}

/**
 * When a Bearer token was issued, for the list: its `iat` (RFC 9068 2.2 requires it of JWT access
 * tokens; RFC 7662 2.2 makes it optional in an introspection response), undefined without one.
 */
export function issuedAt(claims: Session['claims']): number | undefined {
  return typeof claims.iat === 'number' && Number.isFinite(claims.iat) ? claims.iat : undefined
}

/**
 * Whether a Bearer token of `provider` with these claims was issued before a logout or event that
 * names its subject, sid or address: refused as a session created at its `iat` would be. A token
 * without `iat` is refused by any entry that names it (revokedBy).
 */
export function bearerRevoked(list: RevocationList, provider: string, claims: Session['claims']): Promise<boolean> {
  return list.isRevoked({ claims, provider, createdAt: issuedAt(claims) })
}
