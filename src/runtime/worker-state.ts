import { GatewayError } from '../contract/errors.js'
import { systemClock } from '../lib/clock.js'
import type { Tokens } from '../oidc/client.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import { graceEnd, graceKey, rotated, type RefreshCoordinator, type RefreshingSession } from '../session/refresh-coordinator.js'
import { MemoryRevocationList, type Revocable, type RevocationEntry, type RevocationList, type RevocationSelector } from '../session/revocation.js'
import { callPrimary, onBroadcast, type RefreshEnd } from './ipc.js'

// What a worker (server.workers > 1) shares with the others through the primary, when there is
// no Redis to share it: back-channel logouts, logout-token replays, refreshes and sign-in rate
// limits. Only the rare operations cross processes; the check on every request (is this session
// revoked?) reads a local copy of the list, which the primary updates in every worker before a
// logout is answered. Workers run on the system clock, as the primary does (primary-state.ts):
// their times are compared with each other's.

export class WorkerRevocationList implements RevocationList {
  readonly #local: MemoryRevocationList

  constructor(maxAgeSeconds: number) {
    this.#local = new MemoryRevocationList({ maxAgeSeconds, clock: systemClock })
    onBroadcast('revocation', (entry) => this.#local.apply(entry as RevocationEntry))
  }

  /** Takes the primary's list: a worker started after logouts refuses those sessions too. */
  async start(): Promise<void> {
    this.#local.restore(await callPrimary('revocations', null))
  }

  /** Resolves once every worker has the entry. */
  async revoke(selector: RevocationSelector, at?: number): Promise<void> {
    await callPrimary('revoke', at === undefined ? { selector } : { selector, at })
  }

  isRevoked(session: Revocable): Promise<boolean> {
    return this.#local.isRevoked(session)
  }

  size(): Promise<number> {
    return this.#local.size()
  }

  /** The primary's list starts with it, before any worker creates a session. */
  startBy(): Promise<void> {
    return this.#local.startBy()
  }
}

export class WorkerJtiReplay implements JtiReplay {
  firstUse(issuer: string, jti: string, until: number): Promise<boolean> {
    return callPrimary('jti.firstUse', { issuer, jti, until })
  }

  async release(issuer: string, jti: string): Promise<void> {
    await callPrimary('jti.release', { issuer, jti })
  }
}

/** One redemption per session across workers, and the grace result of a rotation (RefreshCoordinator). */
export class WorkerRefreshCoordinator implements RefreshCoordinator {
  async redeem(session: RefreshingSession, refreshToken: string, grant: () => Promise<Tokens>): Promise<Tokens> {
    const sessionId = session.id
    const key = graceKey(sessionId, refreshToken)
    for (;;) {
      const turn = await callPrimary('refresh.begin', { sessionId, key })
      if (turn.kind === 'result') return turn.tokens
      if (turn.kind === 'error') throw new GatewayError(turn.code, turn.message)
      if (turn.kind === 'retry') continue
      let fresh: Tokens
      try {
        fresh = await grant()
      } catch (err) {
        const error: RefreshEnd['error'] =
          err instanceof GatewayError ? { code: err.code, message: err.message } : { code: 'internal_error', message: 'the refresh failed' }
        await callPrimary('refresh.end', { sessionId, key, error }).catch(() => undefined)
        throw err
      }
      const graceUntil = rotated(refreshToken, fresh) ? graceEnd(fresh, systemClock.now() / 1000) : null
      await callPrimary('refresh.end', { sessionId, key, tokens: fresh, graceUntil })
      return fresh
    }
  }
}

type RateLimitCallback = (err: Error | null, result?: { current: number; ttl: number }) => void

/** A @fastify/rate-limit store whose counts the primary keeps: N workers do not make N budgets. */
export class WorkerRateLimitStore {
  incr(key: string, callback: RateLimitCallback, timeWindow: number): void {
    callPrimary('ratelimit.incr', { key, timeWindow }).then(
      (result) => callback(null, result),
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
    )
  }

  child(): this {
    return this
  }
}

/** Set by the primary on each worker it forks (runtime/primary.ts). */
export const WORKER_SLOT_ENV = 'OGW_WORKER_SLOT'

export interface WorkerState {
  revocations: WorkerRevocationList
  replay: WorkerJtiReplay
  coordinator: WorkerRefreshCoordinator
  rateLimitStore: typeof WorkerRateLimitStore
  /** The worker's slot (0 to server.workers - 1), kept by a replacement: slot 0 runs the Shared Signals streams. */
  slot: number
  /** Each provider's issuer when the primary started (ProcessState.startIssuers), not when this worker did. */
  startIssuers(): Promise<ReadonlyMap<string, string>>
}

export function workerState(maxAgeSeconds: number): WorkerState {
  return {
    revocations: new WorkerRevocationList(maxAgeSeconds),
    replay: new WorkerJtiReplay(),
    coordinator: new WorkerRefreshCoordinator(),
    rateLimitStore: WorkerRateLimitStore,
    slot: Number(process.env[WORKER_SLOT_ENV] ?? '0'),
    startIssuers: async () => new Map(Object.entries(await callPrimary('start.issuers', null))),
  }
}
