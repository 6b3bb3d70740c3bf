import type { Redis } from 'ioredis'
import { GatewayError } from '../contract/errors.js'
import type { Clock } from '../lib/clock.js'
import type { CookieCipher } from './cipher.js'
import type { GatewayCookies } from './cookies.js'
import type { RedisKeys } from './redis-keys.js'
import { fromSealed, SEALED_REFERENCE, toSealed } from './sealed.js'
import { selects, type Session, type SessionReply, type SessionRequest, type SessionSelector, type SessionStore } from './types.js'

// Sessions in Redis, shared by every replica. The browser holds only a sealed reference to a random
// session id (the memory store's cookie). Redis knows a session by a digest of that id, and its
// value is sealed with the cookie secret, bound to its key: a Redis dump (or a Redis operator)
// gets neither tokens nor anything a browser could present, and cannot move a value to another key.
// Every entry expires with the session (session.maxAgeSeconds); back-channel logout finds the
// sessions of a sid or sub through two index sets, never by scanning the keyspace.
//
// Fail closed: when Redis cannot be reached, every operation that needs it throws GatewayError
// session_store_unavailable (503). A session that cannot be read is not "no session": that would
// send a signed-in user to the provider in a loop, or let an ended session look merely absent.

export interface RedisStoreOptions {
  redis: Redis
  keys: RedisKeys
  cookies: GatewayCookies
  cipher: CookieCipher
  maxAgeSeconds: number
  clock: Clock
}

export class RedisSessionStore implements SessionStore {
  readonly #redis: Redis
  readonly #keys: RedisKeys
  readonly #cookies: GatewayCookies
  readonly #cipher: CookieCipher
  readonly #maxAgeSeconds: number
  readonly #clock: Clock
  #errors = 0

  constructor(options: RedisStoreOptions) {
    this.#redis = options.redis
    this.#keys = options.keys
    this.#cookies = options.cookies
    this.#cipher = options.cipher
    this.#maxAgeSeconds = options.maxAgeSeconds
    this.#clock = options.clock
  }

  /** Redis operations that failed (unreachable, timed out), since start: a counter for metrics. */
  get errors(): number {
    return this.#errors
  }

  async load(req: SessionRequest): Promise<Session | undefined> {
    const id = this.#idOf(req)
    if (id === undefined) return undefined
    const ref = this.#keys.ref(id)
    const sealed = await this.#call(() => this.#redis.get(this.#keys.session(ref)))
    if (sealed === null) return undefined
    const session = this.#open(ref, sealed)
    if (session === undefined || session.id !== id || session.createdAt + this.#maxAgeSeconds <= this.#clock.now() / 1000) return undefined
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
    const ref = this.#keys.ref(session.id)
    const endsAt = session.createdAt + this.#maxAgeSeconds
    const sealed = this.#cipher.seal(purpose(ref), toSealed(session, true), endsAt)
    // An update stores only while the session exists (SET XX): a refresh that finishes after a
    // logout or back-channel logout deleted it must not bring it back.
    const indexes = [this.#keys.bySub(session.claims.sub)]
    if (typeof session.claims.sid === 'string') indexes.push(this.#keys.bySid(session.claims.sid))
    const results = await this.#call(async () => {
      const multi = this.#redis.multi()
      if (update) multi.set(this.#keys.session(ref), sealed, 'EXAT', endsAt, 'XX')
      else multi.set(this.#keys.session(ref), sealed, 'EXAT', endsAt)
      // An index lives as long as its longest session: NX sets the first expiry, GT extends it.
      for (const index of indexes) multi.sadd(index, ref).expireat(index, endsAt, 'NX').expireat(index, endsAt, 'GT')
      return checked(await multi.exec())
    })
    if (results[0] !== 'OK') {
      // Ended meanwhile: this request finishes with what it has, the browser is signed out.
      this.#clearCookies(reply)
      return false
    }
    if (!update) {
      this.#cookies.write(req, reply, 'session', SEALED_REFERENCE.encode({ id: session.id }), endsAt)
    }
    return true
  }

  async destroy(req: SessionRequest, reply: SessionReply): Promise<void> {
    const id = this.#idOf(req)
    if (id !== undefined) {
      const key = this.#keys.session(this.#keys.ref(id))
      await this.#call(() => this.#redis.del(key))
    }
    this.#clearCookies(reply)
  }

  async end(selector: SessionSelector): Promise<void> {
    const index = selector.sid === undefined ? this.#keys.bySub(selector.sub) : this.#keys.bySid(selector.sid)
    const refs = await this.#call(() => this.#redis.smembers(index))
    if (refs.length === 0) return
    const values = await this.#call(() => this.#redis.mget(refs.map((ref) => this.#keys.session(ref))))
    const ended: string[] = []
    const gone: string[] = []
    refs.forEach((ref, i) => {
      const sealed = values[i]
      if (sealed === null || sealed === undefined) {
        gone.push(ref)
        return
      }
      const session = this.#open(ref, sealed)
      // A value no configured secret opens is of no use to anyone: it goes too.
      if (session === undefined || selects(selector, session)) ended.push(ref)
    })
    if (ended.length + gone.length === 0) return
    await this.#call(async () => {
      const multi = this.#redis.multi()
      if (ended.length > 0) multi.del(...ended.map((ref) => this.#keys.session(ref)))
      multi.srem(index, ...ended, ...gone)
      return checked(await multi.exec())
    })
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.#redis.ping()) === 'PONG'
    } catch {
      return false
    }
  }

  /** The Redis connection belongs to the app, which closes it after the store. */
  async close(): Promise<void> {}

  #idOf(req: SessionRequest): string | undefined {
    return SEALED_REFERENCE.decode(this.#cookies.read(req, 'session'))?.id
  }

  #open(ref: string, sealed: string): Session | undefined {
    return fromSealed(this.#cipher.open(purpose(ref), sealed))
  }

  #clearCookies(reply: SessionReply): void {
    this.#cookies.clear(reply, 'session')
    this.#cookies.clear(reply, 'credentials')
  }

  async #call<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await operation()
    } catch (err) {
      this.#errors++
      throw storeUnavailable(err)
    }
  }
}

/** The seal's authenticated data: a value opens only under the key it was written to. */
function purpose(ref: string): string {
  return `redis-session:${ref}`
}

export function storeUnavailable(cause: unknown): GatewayError {
  return new GatewayError('session_store_unavailable', 'the session store cannot be reached; try again shortly', { cause })
}

/** The replies of a transaction; throws the first command error (exec answers them in the list). */
function checked(results: Array<[Error | null, unknown]> | null): unknown[] {
  if (results === null) throw new Error('the Redis transaction was aborted')
  return results.map(([err, result]) => {
    if (err !== null) throw err
    return result
  })
}
