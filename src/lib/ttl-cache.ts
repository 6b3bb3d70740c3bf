// A map whose entries expire and whose size is capped. The gateway caches verification results
// keyed by what clients send, so every such cache must be bounded: a flood of distinct tokens
// may evict entries, never grow memory.

export class TtlCache<V> {
  readonly #entries = new Map<string, { value: V; expiresAt: number }>()
  readonly #maxEntries: number

  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries
  }

  get size(): number {
    return this.#entries.size
  }

  /** The value, unless it expired at or before `now` (then it is dropped). */
  get(key: string, now: number): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.expiresAt > now) return entry.value
    this.#entries.delete(key)
    return undefined
  }

  /** Stores `value` until `expiresAt` (same unit as `now` in get); an entry already expired is not stored. */
  set(key: string, value: V, expiresAt: number, now: number): void {
    if (expiresAt <= now) return
    this.#entries.delete(key)
    if (this.#entries.size >= this.#maxEntries) {
      // Maps iterate in insertion order: the first key is the oldest entry.
      const oldest = this.#entries.keys().next().value
      if (oldest !== undefined) this.#entries.delete(oldest)
    }
    this.#entries.set(key, { value, expiresAt })
  }

  delete(key: string): void {
    this.#entries.delete(key)
  }

  clear(): void {
    this.#entries.clear()
  }
}
