import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import type { CookieCipher } from './cipher.js'
import type { GatewayCookies } from './cookies.js'
import { durableWrite, pingRedis, type RedisClient } from './redis-client.js'
import type { RedisKeys } from './redis-keys.js'
import { runScript } from './redis-scripts.js'
import { fromSealed, SEALED_REFERENCE, toSealed } from './sealed.js'
import { selects, type EvictionCounts, type Session, type SessionReply, type SessionRequest, type SessionSelector, type SessionStore } from './types.js'

// Sessions in Redis, shared by every replica. The browser holds only a sealed reference to a random
// session id (the memory store's cookie). Redis knows a session by a digest of that id, and its
// value is sealed with the cookie secret, bound to its key: a Redis dump (or a Redis operator)
// gets neither tokens nor anything a browser could present, and cannot move a value to another key.
// Every entry expires with the session (session.maxAgeSeconds), and a user keeps at most
// session.maxSessionsPerUser sessions (the oldest deleted first, in the store script: one user
// signing in over and over fills neither Redis nor anyone else's place); back-channel logout finds the
// sessions of a sid or sub through two index sets, never by scanning the keyspace, and a logout
// token naming only a sid finds the user through one small link key.
//
// Every topology (one node, Sentinel, Cluster): a session, its indexes and its refresh keys carry
// the user's hash tag, and the session cookie carries the tag, so each operation is one command or
// script on one slot (redis-keys.ts). Writes wait for a replica (durableWrite in redis-client.ts).
//
// Fail closed: when Redis cannot be reached, every operation that needs it throws GatewayError
// session_store_unavailable (503). A session that cannot be read is not "no session": that would
// send a signed-in user to the provider in a loop, or let an ended session look merely absent.

export interface RedisStoreOptions {
  redis: RedisClient
  keys: RedisKeys
  cookies: GatewayCookies
  cipher: CookieCipher
  maxAgeSeconds: number
  /** session.maxSessionsPerUser: a sign-in beyond it deletes the user's oldest sessions (the gateway always sets it; absent, unbounded). */
  maxSessionsPerUser?: number
  clock: Clock
  /**
   * Keep the email -> users link, for Shared Signals events naming their subject by email
   * (subjectsByEmail). Set only when a provider has `ssf`: otherwise a sign-in writes nothing more.
   */
  indexEmail?: boolean
}

/**
 * Users read per SSCAN step of an email link (a hint to Redis, not a limit): every user is read,
 * however many share the address, since a revocation that stopped at some of them would leave the
 * others signed in (fail open).
 */
const EMAIL_USERS_PER_STEP = 100

/** Reads of a user's sign-in order a sign-in makes at most while other sign-ins of the user change it. */
const STORE_ATTEMPTS = 5

/** The store's Redis operations that failed in a row (a success ends the run): how many, and when the first and last did (monotonic ms). */
export interface FailureRun {
  count: number
  firstAt: number
  lastAt: number
}

/**
 * What "keeps failing" means for /readyz: at least `failures` operations in a row failed, over at
 * least `forMs` (one slow command, or the first seconds of a failover that PING already reports,
 * is not it), and the last within `forgetAfterMs` (a replica taken out of service gets no request
 * that could succeed: after that long it is offered traffic again, and one more failure takes it out).
 */
export const KEEPS_FAILING = { failures: 5, forMs: 5000, forgetAfterMs: 30_000 } as const

/** Whether a store whose operations failed as `run` says keeps failing at `now` (monotonic ms). */
export function keepsFailing(run: FailureRun | undefined, now: number): boolean {
  return run !== undefined && run.count >= KEEPS_FAILING.failures && now - run.firstAt >= KEEPS_FAILING.forMs && now - run.lastAt < KEEPS_FAILING.forgetAfterMs
}

/**
 * The run of failed operations on each Redis connection, shared by the store and the refresh
 * coordinator (and by the stores of successive configurations, which share the connection).
 */
const failureRuns = new WeakMap<RedisClient, FailureRun>()

/** Counts an operation's outcome on `redis`: a success ends the run of failures, a failure extends it. */
export function recordOutcome(redis: RedisClient, succeeded: boolean): void {
  if (succeeded) {
    failureRuns.delete(redis)
    return
  }
  const now = performance.now()
  const run = failureRuns.get(redis)
  if (run === undefined) failureRuns.set(redis, { count: 1, firstAt: now, lastAt: now })
  else Object.assign(run, { count: run.count + 1, lastAt: now })
}

/** What the session cookie refers to: the session id, and the hash tag of its user's keys. */
interface Reference {
  id: string
  user: string
}

export class RedisSessionStore implements SessionStore {
  readonly #redis: RedisClient
  readonly #keys: RedisKeys
  readonly #cookies: GatewayCookies
  readonly #cipher: CookieCipher
  readonly #maxAgeSeconds: number
  readonly #clock: Clock
  readonly #indexEmail: boolean
  readonly #maxSessionsPerUser: number
  readonly #evictions: EvictionCounts = { store_full: 0, user_limit: 0 }
  #errors = 0

  constructor(options: RedisStoreOptions) {
    this.#redis = options.redis
    this.#keys = options.keys
    this.#cookies = options.cookies
    this.#cipher = options.cipher
    this.#maxAgeSeconds = options.maxAgeSeconds
    this.#clock = options.clock
    this.#indexEmail = options.indexEmail === true
    this.#maxSessionsPerUser = options.maxSessionsPerUser ?? Number.MAX_SAFE_INTEGER
  }

  /** Live sessions this replica's sign-ins evicted, by reason (user_limit only: Redis has no global bound of ours). */
  get evictions(): Readonly<EvictionCounts> {
    return this.#evictions
  }

  /** Redis operations that failed (unreachable, timed out), since start: a counter for metrics. */
  get errors(): number {
    return this.#errors
  }

  async load(req: SessionRequest): Promise<Session | undefined> {
    const reference = this.#referenceOf(req)
    if (reference === undefined) return undefined
    const ref = this.#keys.ref(reference.id)
    const sealed = await this.#call(() => this.#redis.get(this.#keys.session(reference.user, ref)))
    if (sealed === null) return undefined
    const session = this.#open(ref, sealed)
    if (session === undefined || session.id !== reference.id || session.createdAt + this.#maxAgeSeconds <= this.#clock.now() / 1000) return undefined
    return session
  }

  async withCredentials(_req: SessionRequest, session: Session): Promise<Session> {
    return session
  }

  async create(req: SessionRequest, reply: SessionReply, session: Session): Promise<void> {
    await this.#store(req, reply, session, false)
  }

  async update(req: SessionRequest, reply: SessionReply, session: Session): Promise<boolean> {
    return this.#store(req, reply, session, true)
  }

  async #store(req: SessionRequest, reply: SessionReply, session: Session, update: boolean): Promise<boolean> {
    const user = this.#keys.userTag({ provider: session.provider, sub: session.claims.sub })
    const ref = this.#keys.ref(session.id)
    const endsAt = session.createdAt + this.#maxAgeSeconds
    const sealed = this.#cipher.seal(purpose(ref), toSealed(session, true), endsAt)
    const sid = typeof session.claims.sid === 'string' ? session.claims.sid : undefined
    const key = this.#keys.session(user, ref)
    const order = this.#keys.signInOrder(user)
    const keys = [key, order, this.#keys.bySub(user)]
    if (sid !== undefined) keys.push(this.#keys.bySid(user, sid))
    const args = [sealed, endsAt, update ? '1' : '0', ref, this.#maxSessionsPerUser, Math.floor(this.#clock.now() / 1000), sid === undefined ? 0 : 1]
    const stored = await this.#call(async () => {
      // The sid's link to its user first: a logout token that arrives right after the sign-in
      // finds the user. It is a key of its own slot, so a command of its own.
      // Sent first, both awaited: either failing fails the write.
      const link: Array<Promise<unknown>> = []
      if (sid !== undefined) {
        const sidUser = this.#keys.sidUser(session.provider, sid)
        link.push(durableWrite(this.#redis, sidUser, (r) => r.set(sidUser, user, 'EXAT', endsAt)))
      }
      const email = this.#indexEmail && typeof session.claims.email === 'string' ? session.claims.email : undefined
      if (email !== undefined) {
        const emailUsers = this.#keys.emailUsers(session.provider, email)
        link.push(durableWrite(this.#redis, emailUsers, (r) => runScript(r, 'ogwLink', [emailUsers], [user, endsAt])))
      }
      // An update stores only while the session exists: a refresh that finishes after a logout
      // or back-channel logout deleted it must not bring it back.
      const store = durableWrite(this.#redis, key, (r) => this.#storeSession(r, user, keys, args, update))
      const [result] = await Promise.all([store, ...link])
      return result
    })
    if (!stored) {
      // Ended meanwhile: this request finishes with what it has, the browser is signed out.
      this.#clearCookies(reply)
      return false
    }
    if (!update) {
      this.#cookies.write(req, reply, 'session', SEALED_REFERENCE.encode({ id: session.id, user }), endsAt)
    }
    return true
  }

  /**
   * Runs ogwStoreSession; a sign-in first reads the user's sign-in order, whose refs' keys the
   * script must be given, and reads again if another sign-in of the user changed it meanwhile.
   */
  async #storeSession(redis: RedisClient, user: string, keys: string[], args: Array<string | number>, update: boolean): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const refs = update ? [] : await redis.zrange(this.#keys.signInOrder(user), '0', '-1')
      const reply = await runScript(redis, 'ogwStoreSession', [...keys, ...refs.map((r) => this.#keys.session(user, r))], [...args, ...refs])
      const [stored, evicted] = Array.isArray(reply) ? reply.map(Number) : [Number.NaN, 0]
      if (stored === 1 || stored === 0) {
        this.#evictions.user_limit += evicted ?? 0
        return stored === 1
      }
      // The order changed between the read and the script: a burst of sign-ins of one user. It
      // settles in a few reads; past them the sign-in fails closed (503) rather than unbounded.
      if (stored !== -1 || attempt === STORE_ATTEMPTS) throw new Error("the user's sign-in order kept changing while a session was stored")
    }
  }

  async destroy(req: SessionRequest, reply: SessionReply): Promise<void> {
    const reference = this.#referenceOf(req)
    if (reference !== undefined) {
      const key = this.#keys.session(reference.user, this.#keys.ref(reference.id))
      await this.#call(() => durableWrite(this.#redis, key, (r) => r.del(key)))
    }
    this.#clearCookies(reply)
  }

  async end(selector: SessionSelector, before = Number.POSITIVE_INFINITY): Promise<void> {
    const found = await this.#selected(selector)
    // A value no configured secret opens has no time to keep it: it goes.
    const selected = found?.selected.filter(({ session }) => session === undefined || session.createdAt <= before) ?? []
    if (found === undefined || selected.length + found.gone.length === 0) return
    const { user, index, gone } = found
    const keys = [index, ...selected.map(({ ref }) => this.#keys.session(user, ref))]
    await this.#call(() => durableWrite(this.#redis, index, (r) => runScript(r, 'ogwEndSessions', keys, [...selected.map(({ ref }) => ref), ...gone])))
  }

  /**
   * A Shared Signals token-claims-change: the selected sessions are sealed again with their access
   * token counted as expired (expiresAt 0), so their next request runs the refresh grant and takes
   * the provider's new claims, on every replica. The values are sealed with the cookie secret, so
   * the change is made here and written back by compare-and-set (ogwReplaceSessions): nothing is
   * added to the per-request path.
   */
  async expireTokens(selector: SessionSelector): Promise<void> {
    const found = await this.#selected(selector)
    if (found === undefined) return
    const keys: string[] = []
    const args: Array<string | number> = []
    for (const { ref, sealed, session } of found.selected) {
      // A value no configured secret opens is left to end() and to its expiry.
      if (session === undefined || session.expiresAt === 0) continue
      const endsAt = session.createdAt + this.#maxAgeSeconds
      keys.push(this.#keys.session(found.user, ref))
      args.push(sealed, this.#cipher.seal(purpose(ref), toSealed({ ...session, expiresAt: 0 }, true), endsAt), endsAt)
    }
    if (keys.length === 0) return
    await this.#call(() => durableWrite(this.#redis, found.index, (r) => runScript(r, 'ogwReplaceSessions', keys, args)))
  }

  /**
   * The sessions `selector` names, through the user's sub or sid index (one slot: the user's
   * sessions and indexes share its tag): those selected (with a value no configured secret opens,
   * of no use to anyone), and the index entries whose session is already gone.
   */
  async #selected(
    selector: SessionSelector,
  ): Promise<{ user: string; index: string; selected: Array<{ ref: string; sealed: string; session: Session | undefined }>; gone: string[] } | undefined> {
    const user = await this.#userOf(selector)
    if (user === undefined) return undefined
    const index = selector.sid === undefined ? this.#keys.bySub(user) : this.#keys.bySid(user, selector.sid)
    const refs = await this.#call(() => this.#redis.smembers(index))
    if (refs.length === 0) return undefined
    const values = await this.#call(() => this.#redis.mget(refs.map((ref) => this.#keys.session(user, ref))))
    const selected: Array<{ ref: string; sealed: string; session: Session | undefined }> = []
    const gone: string[] = []
    refs.forEach((ref, i) => {
      const sealed = values[i]
      if (sealed === null || sealed === undefined) {
        gone.push(ref)
        return
      }
      const session = this.#open(ref, sealed)
      if (session === undefined || selects(selector, session)) selected.push({ ref, sealed, session })
    })
    return { user, index, selected, gone }
  }

  /**
   * The `sub` of the sessions of `provider` whose email claim is `email` (case-insensitive): the
   * users the email link names, each kept only if one of its sessions still carries that email
   * (a link outlives a changed claim until it expires). Empty without indexEmail.
   */
  async subjectsByEmail(provider: string, email: string): Promise<string[]> {
    if (!this.#indexEmail) return []
    const wanted = email.toLowerCase()
    const link = this.#keys.emailUsers(provider, email)
    const subs = new Set<string>()
    // SSCAN to cursor 0 reads every member present from start to end (SCAN documentation,
    // "Scan guarantees"), in steps, so that a large set is neither one huge reply nor cut short.
    let cursor = '0'
    do {
      const [next, users] = await this.#call(() => this.#redis.sscan(link, cursor, 'COUNT', EMAIL_USERS_PER_STEP))
      cursor = next
      await Promise.all(
        users.map(async (user) => {
          for (const sub of await this.#subjectsWithEmail(user, provider, wanted)) subs.add(sub)
        }),
      )
    } while (cursor !== '0')
    return [...subs]
  }

  /** The `sub` of the user's sessions (`user`: their tag) at `provider` whose email claim is `wanted` (lowercased). */
  async #subjectsWithEmail(user: string, provider: string, wanted: string): Promise<string[]> {
    const refs = await this.#call(() => this.#redis.smembers(this.#keys.bySub(user)))
    if (refs.length === 0) return []
    const values = await this.#call(() => this.#redis.mget(refs.map((ref) => this.#keys.session(user, ref))))
    const subs: string[] = []
    refs.forEach((ref, i) => {
      const sealed = values[i]
      const session = sealed === null || sealed === undefined ? undefined : this.#open(ref, sealed)
      const claim = session?.claims.email
      if (session !== undefined && session.provider === provider && typeof claim === 'string' && claim.toLowerCase() === wanted) subs.push(session.claims.sub)
    })
    return subs
  }

  /** The user's tag for a logout token: from its `sub`, or through the sid's link. */
  async #userOf(selector: SessionSelector): Promise<string | undefined> {
    if (selector.sub !== undefined) return this.#keys.userTag({ provider: selector.provider, sub: selector.sub })
    if (selector.sid === undefined) return undefined
    const sid = selector.sid
    return (await this.#call(() => this.#redis.get(this.#keys.sidUser(selector.provider, sid)))) ?? undefined
  }

  /**
   * Ready: Redis answers (every primary, with Cluster) and the store's operations do not keep
   * failing. PING alone passed while every write to one shard failed: a client whose slot map
   * was stale answered PING from the nodes it knew.
   */
  async ping(): Promise<boolean> {
    if (keepsFailing(failureRuns.get(this.#redis), performance.now())) return false
    return pingRedis(this.#redis)
  }

  /** The Redis connection belongs to the app, which closes it after the store. */
  async close(): Promise<void> {}

  #referenceOf(req: SessionRequest): Reference | undefined {
    const reference = SEALED_REFERENCE.decode(this.#cookies.read(req, 'session'))
    // A reference without a user tag was written by a release before hash tags: its session
    // lives under a key this release does not read, so it is no session (the user signs in again).
    return reference?.user === undefined ? undefined : { id: reference.id, user: reference.user }
  }

  #open(ref: string, sealed: string): Session | undefined {
    return fromSealed(this.#cipher.open(purpose(ref), sealed))
  }

  #clearCookies(reply: SessionReply): void {
    this.#cookies.clear(reply, 'session')
    this.#cookies.clear(reply, 'credentials')
  }

  async #call<T>(operation: () => Promise<T>): Promise<T> {
    let result: T
    try {
      result = await operation()
    } catch (err) {
      this.#errors++
      recordOutcome(this.#redis, false)
      throw storeUnavailable(err)
    }
    recordOutcome(this.#redis, true)
    return result
  }
}

/** The seal's authenticated data: a value opens only under the key it was written to. */
function purpose(ref: string): string {
  return `redis-session:${ref}`
}

export function storeUnavailable(cause: unknown): GatewayError {
  return new GatewayError('session_store_unavailable', 'the session store cannot be reached; try again shortly', { cause })
}
