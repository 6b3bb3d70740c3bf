import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'

// A short exclusive lock in Redis (SET NX PX with a random token). It expires by itself, so a
// holder that dies never blocks others for longer than the lock's lifetime; and only the holder's
// token releases it, so a holder that outlived its lock cannot release the next holder's.

// Compare-and-delete in one step: a GET then DEL could delete a lock taken over in between.
const RELEASE_IF_OWNER = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

export class RedisLock {
  readonly #redis: Redis

  constructor(redis: Redis) {
    this.#redis = redis
  }

  /** The lock's token when `key` was free (it is now held for `ttlMs`), else `undefined`. */
  async acquire(key: string, ttlMs: number): Promise<string | undefined> {
    const token = randomBytes(16).toString('base64url')
    const result = await this.#redis.set(key, token, 'PX', ttlMs, 'NX')
    return result === 'OK' ? token : undefined
  }

  /** Releases `key` if `token` still holds it; whether it did. */
  async release(key: string, token: string): Promise<boolean> {
    return (await this.#redis.eval(RELEASE_IF_OWNER, 1, key, token)) === 1
  }
}
