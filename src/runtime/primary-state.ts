import { systemClock } from '../lib/clock.js'
import { TtlCache } from '../lib/ttl-cache.js'
import type { Tokens } from '../oidc/client.js'
import { JtiReplayGuard } from '../oidc/jti-replay.js'
import { MemoryRevocationList } from '../session/revocation.js'
import type { PrimaryHandlers, RefreshBegin, RefreshEnd, RefreshTurn } from './ipc.js'

// The state the primary keeps for its workers (see worker-state.ts for their side): the
// authoritative revocation list, the logout-token jti memory, who is redeeming which session's
// refresh token and the results of recent rotations, and the sign-in rate-limit counts. The
// primary runs on the system clock: its workers' clocks are chosen in their own processes.

/** Bound of the grace memo, as in LocalRefreshCoordinator. */
const GRACE_ENTRIES = 10_000
/** Client addresses whose sign-in counts are kept (as sign-in-hardening's per-process store). */
const RATE_LIMIT_KEYS = 10_000

interface Flight {
  leader: number
  waiters: Array<(turn: RefreshTurn) => void>
}

/** Sends `op` to every worker and resolves when each has applied it. */
export type Broadcast = (op: string, args: unknown) => Promise<void>

export class PrimaryState {
  readonly #revocations: MemoryRevocationList
  readonly #replay = new JtiReplayGuard({ clock: systemClock })
  readonly #flights = new Map<string, Flight>()
  readonly #grace = new TtlCache<Tokens>(GRACE_ENTRIES, systemClock)
  readonly #counts = new Map<string, { current: number; startMs: number }>()
  readonly #broadcast: Broadcast

  constructor(maxAgeSeconds: number, broadcast: Broadcast) {
    this.#revocations = new MemoryRevocationList({ maxAgeSeconds, clock: systemClock })
    this.#broadcast = broadcast
  }

  /** The answers to the workers' calls (ipc.ts PrimaryOps), but for the configuration's text and its issuers at the start, which the primary's loop holds. */
  handlers(): Omit<PrimaryHandlers, 'config.text' | 'start.issuers'> {
    return {
      revocations: () => this.#revocations.snapshot(),
      revoke: async (_worker, { selector, at }) => {
        await this.#broadcast('revocation', this.#revocations.add(selector, at))
        return null
      },
      'jti.firstUse': (_worker, { issuer, jti, until }) => this.#replay.firstUse(issuer, jti, until),
      'jti.release': async (_worker, { issuer, jti }) => {
        await this.#replay.release(issuer, jti)
        return null
      },
      'refresh.begin': (worker, begin) => this.#begin(worker, begin),
      'refresh.end': (_worker, end) => {
        this.#end(end)
        return null
      },
      'ratelimit.incr': (_worker, { key, timeWindow }) => this.#incr(key, timeWindow),
    }
  }

  /** A worker died: the refreshes it was making are handed to the next asker. */
  workerExited(worker: number): void {
    for (const [sessionId, flight] of this.#flights) {
      if (flight.leader !== worker) continue
      this.#flights.delete(sessionId)
      for (const waiter of flight.waiters) waiter({ kind: 'retry' })
    }
  }

  #begin(worker: number, { sessionId, key }: RefreshBegin): RefreshTurn | Promise<RefreshTurn> {
    const graced = this.#grace.get(key)
    if (graced !== undefined) return { kind: 'result', tokens: graced }
    const flight = this.#flights.get(sessionId)
    if (flight === undefined) {
      this.#flights.set(sessionId, { leader: worker, waiters: [] })
      return { kind: 'lead' }
    }
    return new Promise((resolve) => flight.waiters.push(resolve))
  }

  #end({ sessionId, key, tokens, graceUntil, error }: RefreshEnd): void {
    const flight = this.#flights.get(sessionId)
    this.#flights.delete(sessionId)
    // Remembered before the waiters hear of it, so no request falls between the two.
    if (tokens !== undefined && typeof graceUntil === 'number') this.#grace.set(key, tokens, graceUntil * 1000)
    const turn: RefreshTurn =
      tokens !== undefined
        ? { kind: 'result', tokens }
        : { kind: 'error', code: error?.code ?? 'internal_error', message: error?.message ?? 'the refresh failed' }
    for (const waiter of flight?.waiters ?? []) waiter(turn)
  }

  /** @fastify/rate-limit's fixed window, as its per-process store counts it. */
  #incr(key: string, timeWindow: number): { current: number; ttl: number } {
    const nowMs = Date.now()
    let count = this.#counts.get(key)
    if (count === undefined || count.startMs + timeWindow <= nowMs) {
      count = { current: 0, startMs: nowMs }
      this.#counts.delete(key)
      if (this.#counts.size >= RATE_LIMIT_KEYS) {
        const oldest = this.#counts.keys().next().value
        if (oldest !== undefined) this.#counts.delete(oldest)
      }
      this.#counts.set(key, count)
    }
    count.current++
    return { current: count.current, ttl: timeWindow - (nowMs - count.startMs) }
  }
}
