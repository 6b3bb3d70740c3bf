import type { Session, SessionSelector } from './types.js'

// What the gateway hears when sessions end or their claims change, told once to everything that
// keeps something derived from a session: the check endpoints' decision cache, the token-exchange
// cache, the open WebSockets. Three producers tell it: the logout endpoints (one session, known),
// the back-channel logout endpoint and the Shared Signals receiver (the sessions a selector names,
// OpenID Connect Back-Channel Logout 1.0 2.4 `sub`/`sid`; a CAEP session-revoked or credential
// change, RFC 8935 delivery). A listener subscribes once per configuration and is told
// synchronously, in subscription order: nothing a producer does next (answering the logout) waits
// on a listener, and no listener can be skipped by another's failure.

export interface SessionListener {
  /** One session ended at the gateway (a logout). */
  sessionEnded?(session: Pick<Session, 'id' | 'provider' | 'accessToken'>): void
  /** The sessions `selector` names ended; with `at` (epoch seconds), those begun at or before it. */
  sessionsEnded?(selector: SessionSelector, at?: number): void
  /** Claims changed (a Shared Signals event refreshed in place): what was derived from them is stale. */
  claimsChanged?(): void
}

export class SessionEvents {
  readonly #listeners: SessionListener[] = []

  subscribe(listener: SessionListener): void {
    this.#listeners.push(listener)
  }

  sessionEnded(session: Pick<Session, 'id' | 'provider' | 'accessToken'>): void {
    for (const listener of this.#listeners) listener.sessionEnded?.(session)
  }

  sessionsEnded(selector: SessionSelector, at?: number): void {
    for (const listener of this.#listeners) listener.sessionsEnded?.(selector, at)
  }

  claimsChanged(): void {
    for (const listener of this.#listeners) listener.claimsChanged?.()
  }
}
