import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import type { SetVerdict, SsfTransmitter } from './ssf-transmitter.js'

// The process's Shared Signals loops (docs/features/shared-signals.md), one per transmitter of the
// running configuration: read the transmitter (and, in the managing process, read or create the
// stream, read its status, ask for a verification), then poll (RFC 8936) or keep the status fresh.
// Process-wide, like open WebSockets: the live gateway hands it each configuration it serves
// (use()), which stops the previous configuration's loops first, so that a reload never leaves two
// pollers; close() stops them for good. A transmitter that cannot be reached is retried with
// exponential backoff (1 s doubling to 60 s) and never stops the gateway.
//
// With server.workers > 1 every worker reads the transmitter (each verifies the pushes it
// receives), but only the first worker slot manages the stream and polls: one poller per
// gateway process tree, whichever worker has to be restarted (the primary gives the replacement
// the same slot).

export const FIRST_BACKOFF_MS = 1000
export const MAX_BACKOFF_MS = 60_000
/** How often a pushed-to stream's status is read again (/readyz with ssf.required). */
export const STATUS_REFRESH_MS = 30_000

/** What a configuration gives the loops: its transmitters, and how a polled SET is judged. */
export interface SsfBinding {
  readonly transmitters: readonly SsfTransmitter[]
  judge(transmitter: SsfTransmitter, token: string): Promise<SetVerdict>
}

export interface SsfStreamsOptions {
  /** This process manages streams and polls (false on workers other than the first slot). */
  manage: boolean
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'debug'>
}

export class SsfStreams {
  readonly #manage: boolean
  readonly #log: SsfStreamsOptions['log']
  #abort: AbortController | undefined
  #loops: Array<Promise<void>> = []
  #closed = false

  constructor(options: SsfStreamsOptions) {
    this.#manage = options.manage
    this.#log = options.log
  }

  /** Runs the loops of `binding`'s transmitters, after stopping those of the previous one. */
  async use(binding: SsfBinding): Promise<void> {
    await this.#stop()
    if (this.#closed || binding.transmitters.length === 0) return
    const abort = new AbortController()
    this.#abort = abort
    this.#loops = binding.transmitters.map((transmitter) => this.#run(transmitter, binding, abort.signal))
  }

  async close(): Promise<void> {
    this.#closed = true
    await this.#stop()
  }

  async #stop(): Promise<void> {
    this.#abort?.abort()
    this.#abort = undefined
    await Promise.all(this.#loops)
    this.#loops = []
  }

  async #run(transmitter: SsfTransmitter, binding: SsfBinding, signal: AbortSignal): Promise<void> {
    const log = { provider: transmitter.provider }
    let backoff = FIRST_BACKOFF_MS
    const retry = async (err: unknown, what: string): Promise<void> => {
      transmitter.status.reachable = false
      this.#log.warn({ ...log, ...transmitter.failed(err), retryInMs: backoff }, `shared signals: ${what} failed; retrying`)
      await wait(backoff, signal)
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
    }
    while (!signal.aborted) {
      try {
        if (!this.#manage) {
          await transmitter.load()
          return
        }
        await transmitter.ensureStream()
        transmitter.status.error = undefined
        this.#log.info({ ...log, stream: transmitter.status.streamId, status: transmitter.status.status }, 'shared signals stream ready')
        await transmitter.requestVerification()
        break
      } catch (err) {
        await retry(err, 'reading the transmitter')
      }
    }
    backoff = FIRST_BACKOFF_MS
    while (!signal.aborted) {
      try {
        if (transmitter.config.delivery === 'poll') {
          const more = await transmitter.poll((token) => binding.judge(transmitter, token))
          transmitter.status.reachable = true
          backoff = FIRST_BACKOFF_MS
          if (!more) await wait(transmitter.config.pollIntervalSeconds * 1000, signal)
        } else {
          await wait(STATUS_REFRESH_MS, signal)
          if (signal.aborted) return
          await transmitter.readStatus()
          transmitter.status.reachable = true
        }
      } catch (err) {
        await retry(err, transmitter.config.delivery === 'poll' ? 'polling' : 'reading the stream status')
      }
    }
  }
}

/** Waits `ms`, or less when `signal` aborts (never throws). */
async function wait(ms: number, signal: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal, ref: false })
  } catch {
    // Aborted: the loop looks at the signal.
  }
}
