import type { Clock } from './clock.js'

// A map whose entries expire and whose size is capped. The gateway caches verification results
// keyed by what clients send, so every such cache must be bounded: a flood of distinct tokens
// may evict entries, never grow memory. Times are epoch milliseconds on the cache's clock, the
// only unit it knows: callers holding seconds convert at the call.

export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expiresAtMs: number }>()
  readonly #maxEntries: number
  readonly #clock: Clock

  constructor(maxEntries: number, clock: Clock) {
    this.#maxEntries = maxEntries
    this.#clock = clock
  }

  get size(): number {
    return this.#entries.size
  }

  /** The value, unless it has expired (then it is dropped). */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.expiresAtMs > this.#clock.now()) return entry.value
    this.#entries.delete(key)
    return undefined
  }

  /** Stores `value` until `expiresAtMs` (epoch milliseconds); an entry already expired is not stored. */
  set(key: string, value: V, expiresAtMs: number): void {
    if (expiresAtMs <= this.#clock.now()) return
    this.#entries.delete(key)
    if (this.#entries.size >= this.#maxEntries) {
      // Maps iterate in insertion order: the first key is the oldest entry.
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    this.#entries.set(key, { value, expiresAtMs })
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }

  clear(): void {
    this.#entries.clear()
  }
}
