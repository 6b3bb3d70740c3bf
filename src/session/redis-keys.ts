import { createHash } from 'node:crypto'
import type { RedisClient } from './redis-client.js'
import { providerScope } from './types.js'

// Every key the gateway writes in Redis, all under session.redis.keyPrefix (so several gateways
// can share one database). Keys carry digests, never a session id, subject or token: a key
// listing (or a dump) names nobody and gives nothing a browser could present.
//
// Redis Cluster runs a command, a transaction or a script only on keys of one hash slot, and the
// slot of a key with a `{...}` hash tag is that of the tag alone (Redis Cluster specification,
// "Hash tags"). So every key that one operation touches together carries the same tag:
// - a user's keys (their sessions, the sid and sub indexes, refresh locks and results) carry the
//   user's tag, a digest of the provider and `sub`: storing a session with its indexes, a refresh
//   claim or settlement, and a logout sweep each stay in one slot, whatever the topology;
// - the revocation list's three keys carry `{revocations}`;
// - a single-key value (a logout token's jti, the sid -> user and email -> users links) needs no tag.
//   The links cannot carry the user's: a logout token naming only a sid, or an event naming an
//   address, is looked up before the user is known. Each is a command of its own, which the
//   client redirects like any other (redis-client.ts), so its slot never has to be the user's.
// keyPrefix may hold no brace (options/schema.ts), or it would move the tag.

function digest(value: string): string {
  return createHash('sha256').update(value).digest('base64url')
}

/**
 * A digest of an address at `provider`, lowercased (RFC 9493 3.2.2 email subjects are compared
 * case-insensitively): what the email link's key and the cookie store's revocation list
 * (revocation.ts) know an address by, so that neither a key listing nor the list names anyone.
 */
export function emailDigest(provider: string, email: string): string {
  return digest(`${providerScope(provider)}\n${email.toLowerCase()}`)
}

/** A Redis client comes with the keys to use in it; without a client, keys are optional. */
export type RedisWithKeys = { redis?: undefined; keys?: RedisKeys } | { redis: RedisClient | undefined; keys: RedisKeys }

/** Whose keys: a session's provider and subject. */
export interface UserRef {
  provider: string
  sub: string
}

export class RedisKeys {
  readonly #prefix: string

  constructor(prefix: string) {
    this.#prefix = prefix
  }

  /** The digest of a session id: what Redis knows the session by. */
  ref(sessionId: string): string {
    return digest(sessionId)
  }

  /**
   * The hash tag of a user's keys: a digest of the provider (two providers may use the same `sub`
   * for different people) and the subject. The session cookie carries it, so a request finds its
   * session's key without asking Redis anything first.
   */
  userTag(user: UserRef): string {
    return digest(`${providerScope(user.provider)}\n${user.sub}`)
  }

  #user(tag: string): string {
    return `${this.#prefix}{${tag}}:`
  }

  /** The sealed session. */
  session(tag: string, ref: string): string {
    return `${this.#user(tag)}session:${ref}`
  }

  /** The refs of the user's sessions of one provider session (`sid`), for back-channel logout. */
  bySid(tag: string, sid: string): string {
    return `${this.#user(tag)}sid:${digest(sid)}`
  }

  /**
   * The user's sessions in sign-in order (a sorted set: ref -> end, epoch seconds), for the
   * bound of session.maxSessionsPerUser: the oldest go first.
   */
  signInOrder(tag: string): string {
    return `${this.#user(tag)}signed-in`
  }

  /** The refs of every session of the user, for back-channel logout without `sid`. */
  bySub(tag: string): string {
    return `${this.#user(tag)}sub`
  }

  /** Which user a provider session (`sid`) is: a logout token may name only the sid. */
  sidUser(provider: string, sid: string): string {
    return `${this.#prefix}sid-user:${digest(`${providerScope(provider)}\n${sid}`)}`
  }

  /**
   * The users (their tags) whose sessions at `provider` carried this `email` claim, compared
   * lowercased: a Shared Signals event may name its subject by email (written only with ssf).
   */
  emailUsers(provider: string, email: string): string {
    return `${this.#prefix}email-user:${emailDigest(provider, email)}`
  }

  /** The lock of a refresh of one session. */
  refreshLock(tag: string, sessionId: string): string {
    return `${this.#user(tag)}refresh-lock:${digest(sessionId)}`
  }

  /** A redemption of `refreshToken` for a session, started and not yet known to be over (outlives the lock). */
  refreshAttempt(tag: string, sessionId: string, refreshToken: string): string {
    return `${this.#user(tag)}refresh-attempt:${digest(`${sessionId}.${refreshToken}`)}`
  }

  /** The sealed result of redeeming `refreshToken` for a session, kept for the grace period. */
  refreshResult(tag: string, sessionId: string, refreshToken: string): string {
    return `${this.#user(tag)}refreshed:${digest(`${sessionId}.${refreshToken}`)}`
  }

  /** The back-channel logout revocation list of the cookie store (a sorted set: entry -> epoch second). */
  revocations(): string {
    return `${this.#prefix}{revocations}`
  }

  /** Bumped by every revocation: a replica rereads the list only when it changed. */
  revocationsVersion(): string {
    return `${this.#prefix}{revocations}:version`
  }

  /** When the revocation list started (epoch seconds): sessions created before it are refused. */
  revocationsSince(): string {
    return `${this.#prefix}{revocations}:since`
  }

  /** The revocation list's keys as releases before hash tags wrote them, read once at start (revocation.ts). */
  legacyRevocations(): { list: string; since: string } {
    return { list: `${this.#prefix}revocations`, since: `${this.#prefix}revocations:since` }
  }

  /** A logout token's jti, seen (`digest`: of its issuer and jti), for the replay guard. */
  logoutJti(digest: string): string {
    return `${this.#prefix}logout-jti:${digest}`
  }
}
