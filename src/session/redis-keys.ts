import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'

// Every key the gateway writes in Redis, all under session.redis.keyPrefix (so several gateways
// can share one database). Keys carry digests, never a session id, subject or token: a key
// listing (or a dump) names nobody and gives nothing a browser could present.

function digest(value: string): string {
  return createHash('sha256').update(value).digest('base64url')
}

/** A Redis client comes with the keys to use in it; without a client, keys are optional. */
export type RedisWithKeys = { redis?: undefined; keys?: RedisKeys } | { redis: Redis | undefined; keys: RedisKeys }

export class RedisKeys {
  readonly #prefix: string

  constructor(prefix: string) {
    this.#prefix = prefix
  }

  /** The digest of a session id: what Redis knows the session by. */
  ref(sessionId: string): string {
    return digest(sessionId)
  }

  /** The sealed session. */
  session(ref: string): string {
    return `${this.#prefix}session:${ref}`
  }

  /** The refs of the sessions of one provider session (`sid`), for back-channel logout. */
  bySid(sid: string): string {
    return `${this.#prefix}sid:${digest(sid)}`
  }

  /** The refs of the sessions of one subject, for back-channel logout without `sid`. */
  bySub(sub: string): string {
    return `${this.#prefix}sub:${digest(sub)}`
  }

  /** The lock of a refresh of one session. */
  refreshLock(sessionId: string): string {
    return `${this.#prefix}refresh-lock:${digest(sessionId)}`
  }

  /** The sealed result of redeeming `refreshToken` for a session, kept for the grace period. */
  refreshResult(sessionId: string, refreshToken: string): string {
    return `${this.#prefix}refreshed:${digest(`${sessionId}.${refreshToken}`)}`
  }

  /** The back-channel logout revocation list of the cookie store (a sorted set: entry -> epoch second). */
  revocations(): string {
    return `${this.#prefix}revocations`
  }

  /** Bumped by every revocation: a replica rereads the list only when it changed. */
  revocationsVersion(): string {
    return `${this.#prefix}revocations:version`
  }

  /** When the revocation list started (epoch seconds): sessions created before it are refused. */
  revocationsSince(): string {
    return `${this.#prefix}revocations:since`
  }

  /** A logout token's jti, seen (`digest`: of its issuer and jti), for the replay guard. */
  logoutJti(digest: string): string {
    return `${this.#prefix}logout-jti:${digest}`
  }
}
