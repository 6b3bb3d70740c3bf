import type { Clock } from './clock.js'

// A token bucket per key, bounded in keys: `burst` requests at once, then `perSecond` on average.
// For callers that are few and known once authenticated (a provider's back-channel logouts, a
// transmitter's pushes), the keys stay as few as the configured providers; the bound only keeps
// that true. Keyed by client address (the Bearer introspection budget), the bound is what keeps
// memory flat; a client that many other addresses push out starts full again, which costs the
// budget's burst once, never more than the global bound its caller keeps as well.

/** Keys kept at most; beyond, the one unused the longest is forgotten (it starts full again). */
const MAX_KEYS = 1_000

export interface RateLimitOptions {
  burst: number
  perSecond: number
  clock: Clock
  /** Keys kept at most (default MAX_KEYS). */
  maxKeys?: number
}

export class KeyedRateLimit {
  readonly #burst: number
  readonly #perMs: number
  readonly #clock: Clock
  readonly #maxKeys: number
  readonly #buckets = new Map<string, { tokens: number; atMs: number }>()

  constructor(options: RateLimitOptions) {
    this.#burst = options.burst
    this.#perMs = options.perSecond / 1000
    this.#clock = options.clock
    this.#maxKeys = options.maxKeys ?? MAX_KEYS
  }

  /**
   * Takes one request from `key`'s budget: undefined when it may go ahead, else how many whole
   * seconds until it may (an HTTP Retry-After, RFC 9110 10.2.3).
   */
  take(key: string): number | undefined {
    const now = this.#clock.now()
    const bucket = this.#buckets.get(key) ?? { tokens: this.#burst, atMs: now }
    this.#buckets.delete(key)
    bucket.tokens = Math.min(this.#burst, bucket.tokens + Math.max(0, now - bucket.atMs) * this.#perMs)
    bucket.atMs = now
    if (this.#buckets.size >= this.#maxKeys) {
      const oldest = this.#buckets.keys().next().value
      if (oldest !== undefined) this.#buckets.delete(oldest)
    }
    // Most recently used last: the first key is the one to forget.
    this.#buckets.set(key, bucket)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return undefined
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.#perMs / 1000))
  }
}

/**
 * What one provider may push per replica: back-channel logout tokens (the endpoint's budget) and
 * Shared Signals SETs (the push endpoint's), each counted only once the request is shown to be the
 * provider's (a logout token that verified, a transmitter's registered Authorization), so that no
 * one else can spend a provider's budget. 20 a second with bursts of 200: far above a provider's
 * sign-outs, far below what would fill a provider's share of the revocation list (100,000) within
 * a session lifetime of minutes.
 */
export const PROVIDER_PUSH_LIMIT = { burst: 200, perSecond: 20 } as const
