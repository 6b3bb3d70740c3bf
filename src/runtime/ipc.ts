import { GatewayError, type ProblemCode } from '../contract/errors.js'
import type { Tokens } from '../oidc/client.js'
import type { RevocationSelector, RevocationSnapshot } from '../session/revocation.js'

// The messages between the primary and its workers (server.workers > 1). A worker calls the
// primary, which holds the state every worker must agree on, and gets one reply; the primary
// broadcasts changes, which each worker applies and acknowledges (with its answer, if asked one).
// The calls are one typed table (PrimaryOps): what a worker may ask, with what, and what it gets.
// Both ends run the same build, so the table is the contract; the primary still refuses an
// operation it does not know.

/** A worker asks to redeem session `sessionId`'s refresh token (`key`: its graceKey). */
export interface RefreshBegin {
  sessionId: string
  key: string
}

/** The redeeming worker's result: the tokens (and until when they answer the spent token), or its error. */
export interface RefreshEnd extends RefreshBegin {
  tokens?: Tokens
  graceUntil?: number | null
  error?: { code: ProblemCode; message: string }
}

/** The primary's answer to "may I redeem this session's refresh token?" (see primary-state.ts). */
export type RefreshTurn =
  | { kind: 'lead' }
  | { kind: 'result'; tokens: Tokens }
  | { kind: 'error'; code: ProblemCode; message: string }
  /** The worker that was redeeming it died: ask again. */
  | { kind: 'retry' }

/** Every call a worker makes to its primary: its arguments and the primary's answer. */
export interface PrimaryOps {
  /** The configuration text the primary runs: a starting worker runs it, not the file as it is now. */
  'config.text': { args: null; result: string }
  /**
   * Each provider's issuer in the file the primary started with: a worker restarted after a
   * reload still judges sessions that recorded no issuer by it (session/issuer-binding.ts).
   */
  'start.issuers': { args: null; result: Record<string, string> }
  revocations: { args: null; result: RevocationSnapshot }
  /** Resolves once every worker has the entry. */
  revoke: { args: { selector: RevocationSelector; at?: number }; result: null }
  'jti.firstUse': { args: { issuer: string; jti: string; until: number }; result: boolean }
  'jti.release': { args: { issuer: string; jti: string }; result: null }
  'refresh.begin': { args: RefreshBegin; result: RefreshTurn }
  'refresh.end': { args: RefreshEnd; result: null }
  'ratelimit.incr': { args: { key: string; timeWindow: number }; result: { current: number; ttl: number } }
}

export type PrimaryOp = keyof PrimaryOps

/** The primary's answer to each call; `worker` is the caller's cluster id. */
export type PrimaryHandlers = {
  [K in PrimaryOp]: (worker: number, args: PrimaryOps[K]['args']) => PrimaryOps[K]['result'] | Promise<PrimaryOps[K]['result']>
}

export type Message =
  | { ogw: 'call'; id: number; op: string; args: unknown }
  /** `fault`: the primary failed answering (a defect, logged there), not an outage. */
  | { ogw: 'reply'; id: number; result?: unknown; fault?: string }
  | { ogw: 'broadcast'; id: number; op: string; args: unknown }
  | { ogw: 'ack'; id: number; result?: unknown }

export function isMessage(value: unknown): value is Message {
  return typeof value === 'object' && value !== null && typeof (value as { ogw?: unknown }).ogw === 'string'
}

/** A call the primary does not answer in this time fails (503), rather than hang a request. */
export const CALL_TIMEOUT_MS = 5000

/**
 * The primary's side of a call: the handler's answer, or a fault. An operation outside the table
 * and a handler that throws are defects, not outages: `failed` logs them as errors, and the worker
 * answers 500 internal_error, where a primary that does not answer at all is a 503.
 */
export async function answerCall(
  handlers: PrimaryHandlers,
  worker: number,
  op: string,
  args: unknown,
  failed: (err: unknown) => void,
): Promise<{ result: unknown } | { fault: string }> {
  if (!Object.hasOwn(handlers, op)) {
    const err = new Error(`unknown operation ${op}`)
    failed(err)
    return { fault: err.message }
  }
  const handler = handlers[op as PrimaryOp] as (worker: number, args: unknown) => unknown
  try {
    return { result: await handler(worker, args) }
  } catch (err) {
    failed(err)
    return { fault: err instanceof Error ? err.message : String(err) }
  }
}

const pending = new Map<number, { op: string; resolve(value: unknown): void; reject(err: Error): void; timer: NodeJS.Timeout }>()
const handlers = new Map<string, (args: unknown) => unknown>()
let nextId = 0
let listening = false

function listen(): void {
  if (listening) return
  listening = true
  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return
    if (message.ogw === 'reply') {
      const call = pending.get(message.id)
      if (call === undefined) return
      pending.delete(message.id)
      clearTimeout(call.timer)
      if (message.fault === undefined) call.resolve(message.result)
      else call.reject(new GatewayError('internal_error', `the primary process failed answering ${call.op}`))
    } else if (message.ogw === 'broadcast') {
      const handler = handlers.get(message.op)
      Promise.resolve(handler?.(message.args)).then(
        (result) => process.send?.({ ogw: 'ack', id: message.id, result } satisfies Message),
        () => process.send?.({ ogw: 'ack', id: message.id } satisfies Message),
      )
    }
  })
}

/**
 * Asks the primary; fails with 503 session_store_unavailable when it does not answer in time, and
 * with 500 internal_error when it failed answering.
 */
export function callPrimary<K extends PrimaryOp>(op: K, args: PrimaryOps[K]['args']): Promise<PrimaryOps[K]['result']> {
  listen()
  const id = ++nextId
  return new Promise<PrimaryOps[K]['result']>((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id)
      reject(new GatewayError('session_store_unavailable', `the primary process did not answer ${op}`))
    }, CALL_TIMEOUT_MS)
    timer.unref()
    pending.set(id, { op, resolve: resolve, reject, timer })
    process.send?.({ ogw: 'call', id, op, args } satisfies Message)
  })
}

/** What this worker does when the primary broadcasts `op`; the handler's result is acknowledged. */
export function onBroadcast(op: string, handler: (args: unknown) => unknown): void {
  listen()
  handlers.set(op, handler)
}
