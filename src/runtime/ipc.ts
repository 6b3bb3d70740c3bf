import { GatewayError } from '../errors.js'

// The messages between the primary and its workers (server.workers > 1). A worker calls the
// primary, which holds the state every worker must agree on, and gets one reply; the primary
// broadcasts changes, which each worker applies and acknowledges (with its answer, if asked one).

export type Message =
  | { ogw: 'call'; id: number; op: string; args: unknown }
  | { ogw: 'reply'; id: number; result?: unknown; error?: string }
  | { ogw: 'broadcast'; id: number; op: string; args: unknown }
  | { ogw: 'ack'; id: number; result?: unknown }

export function isMessage(value: unknown): value is Message {
  return typeof value === 'object' && value !== null && typeof (value as { ogw?: unknown }).ogw === 'string'
}

/** The call a worker makes at start for the configuration text the primary runs. */
export const CONFIG_TEXT = 'config.text'

/** A call the primary does not answer in this time fails (503), rather than hang a request. */
export const CALL_TIMEOUT_MS = 5000

const pending = new Map<number, { resolve(value: unknown): void; reject(err: Error): void; timer: NodeJS.Timeout }>()
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
      if (message.error === undefined) call.resolve(message.result)
      else call.reject(new GatewayError('session_store_unavailable', message.error))
    } else if (message.ogw === 'broadcast') {
      const handler = handlers.get(message.op)
      Promise.resolve(handler?.(message.args)).then(
        (result) => process.send?.({ ogw: 'ack', id: message.id, result } satisfies Message),
        () => process.send?.({ ogw: 'ack', id: message.id } satisfies Message),
      )
    }
  })
}

/** Asks the primary; fails with 503 session_store_unavailable when it cannot answer. */
export function callPrimary<T>(op: string, args: unknown): Promise<T> {
  listen()
  const id = ++nextId
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id)
      reject(new GatewayError('session_store_unavailable', `the primary process did not answer ${op}`))
    }, CALL_TIMEOUT_MS)
    timer.unref()
    pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer })
    process.send?.({ ogw: 'call', id, op, args } satisfies Message)
  })
}

/** What this worker does when the primary broadcasts `op`; the handler's result is acknowledged. */
export function onBroadcast(op: string, handler: (args: unknown) => unknown): void {
  listen()
  handlers.set(op, handler)
}
