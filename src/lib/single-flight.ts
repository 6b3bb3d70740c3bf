/**
 * Runs at most one operation per key at a time; concurrent callers share its result. Parallel
 * requests of one session trigger one refresh, not one each (a provider that rotates refresh
 * tokens would reject all but the first), and parallel requests with one opaque token one
 * introspection.
 */
export class SingleFlight<T> {
  readonly #running = new Map<string, Promise<T>>()

  /** Operations under way. */
  get size(): number {
    return this.#running.size
  }

  has(key: string): boolean {
    return this.#running.has(key)
  }

  run(key: string, operation: () => Promise<T>): Promise<T> {
    const running = this.#running.get(key)
    if (running !== undefined) return running
    const started = operation().finally(() => this.#running.delete(key))
    this.#running.set(key, started)
    return started
  }
}
