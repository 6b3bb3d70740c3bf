/**
 * Runs at most one operation per key at a time; concurrent callers share its result. Used so that
 * parallel requests of one session trigger one refresh, not one each (a provider that rotates
 * refresh tokens would reject all but the first).
 */
export class SingleFlight<T> {
  readonly #running = new Map<string, Promise<T>>()

  run(key: string, operation: () => Promise<T>): Promise<T> {
    const running = this.#running.get(key)
    if (running !== undefined) return running
    const started = operation().finally(() => this.#running.delete(key))
    this.#running.set(key, started)
    return started
  }
}
