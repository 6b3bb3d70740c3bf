import cluster, { type Worker } from 'node:cluster'
import { availableParallelism } from 'node:os'
import { AggregatorRegistry } from 'prom-client'
import pino from 'pino'
import { EXIT_CONFIG, type LoadedConfig } from '../config/load.js'

/**
 * The exit code of a worker whose listener failed at start (EADDRINUSE, EACCES): the primary stops
 * the gateway with exit code 1, as one process does, instead of starting another worker.
 */
export const EXIT_WORKER_LISTEN = 3
import { ConfigWatcher, loadForReload, logRefusal, warnLoosening, watchedLoosening } from './live.js'
import type { GatewayConfig } from '../options/types.js'
import { loggerOptions, stdoutDestination } from '../ops/logging.js'
import type { Hangups } from '../ops/hangups.js'
import { buildManagement } from '../ops/management.js'
import { answerCall, isMessage, type Message, type PrimaryHandlers } from './ipc.js'
import { ABORT, COMMIT, PREPARE, behindAfterCommit, prepareVerdict, type AbortRequest, type CommitRequest, type PrepareRequest } from './reload.js'
import { PrimaryState } from './primary-state.js'
import { WORKER_SLOT_ENV } from './worker-state.js'

// server.workers > 1: this process serves nothing itself. It forks the workers, which share the
// listening port (node:cluster hands connections round-robin), restarts one that dies, keeps the
// state they share (primary-state.ts), serves the management listener for all of them, and on
// SIGTERM/SIGINT has every worker drain before it exits.

/** How long a broadcast waits for a worker's acknowledgement; a worker that dies misses nothing (it reloads). */
const ACK_TIMEOUT_MS = 2000
/** What GET /config says of the last reload, besides the running file. */
interface ReloadOutcome {
  outcome: 'reloaded' | 'refused'
  at: string
  reason?: string
}

/** How long workers have to build a configuration: its providers' discovery bound, and a margin. */
function prepareTimeoutMs(config: GatewayConfig): number {
  return 2 * Math.max(...config.providers.map((p) => p.timeoutMs)) + 5000
}

/** A worker whose readiness question goes unanswered is not ready. */
const READY_TIMEOUT_MS = 2000

export function workerCount(workers: GatewayConfig['server']['workers']): number {
  return workers === 'auto' ? availableParallelism() : workers
}

export async function runPrimary(loaded: LoadedConfig, count: number, path: string, hangups: Hangups): Promise<void> {
  const { config } = loaded
  const log = pino(loggerOptions(config.log), stdoutDestination())
  let running = loaded
  let draining = false
  let nextBroadcast = 0
  const acks = new Map<number, { waiting: Set<number>; results: Map<number, unknown>; resolve(): void }>()
  /** Ends broadcast `id` with the answers it has (all of them, or what came before the timeout). */
  const settle = (id: number): void => {
    const entry = acks.get(id)
    if (entry === undefined) return
    acks.delete(id)
    entry.resolve()
  }
  /** Worker `worker` acknowledged broadcast `id` (or died, result undefined and not kept). */
  const acknowledged = (id: number, worker: number, result?: { value: unknown }): void => {
    const entry = acks.get(id)
    if (entry === undefined) return
    entry.waiting.delete(worker)
    if (result !== undefined) entry.results.set(worker, result.value)
    if (entry.waiting.size === 0) settle(id)
  }

  const live = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected())

  /**
   * Sends to every live worker; resolves with each one's answer, by worker id, once all have
   * acknowledged, or at the timeout (a worker that did not answer has no entry).
   */
  const broadcast = (op: string, args: unknown, timeoutMs = ACK_TIMEOUT_MS): Promise<Map<number, unknown>> => {
    const workers = live()
    if (workers.length === 0) return Promise.resolve(new Map<number, unknown>())
    const id = ++nextBroadcast
    return new Promise((resolve) => {
      const results = new Map<number, unknown>()
      const timer = setTimeout(() => settle(id), timeoutMs)
      acks.set(id, {
        waiting: new Set(workers.map((w) => w.id)),
        results,
        resolve: () => {
          clearTimeout(timer)
          resolve(results)
        },
      })
      for (const worker of workers) worker.send({ ogw: 'broadcast', id, op, args } satisfies Message)
    })
  }
  const state = new PrimaryState(config.session.maxAgeSeconds, async (op, args) => {
    await broadcast(op, args)
  })
  const startIssuers = Object.fromEntries(config.providers.map((p) => [p.name, p.issuer]))
  const handlers: PrimaryHandlers = {
    ...state.handlers(),
    // A worker starting (or restarted) runs the file the others run, not the file as it is now.
    'config.text': () => running.text,
    'start.issuers': () => startIssuers,
  }

  const onMessage = (worker: Worker, message: unknown): void => {
    if (!isMessage(message)) return
    if (message.ogw === 'ack') return acknowledged(message.id, worker.id, { value: message.result })
    if (message.ogw !== 'call') return
    const { id, op } = message
    void answerCall(handlers, worker.id, op, message.args, (err) =>
      log.error({ err, op, worker: worker.process.pid }, 'the primary failed answering a worker'),
    ).then((body) => {
      if (worker.isConnected()) worker.send({ ogw: 'reply', id, ...body } satisfies Message)
    })
  }

  // Each worker has a slot that its replacement takes over (the Shared Signals poller is slot 0's).
  const slots = new Map<number, number>()
  const fork = (slot: number): void => {
    const worker = cluster.fork({ [WORKER_SLOT_ENV]: String(slot) })
    slots.set(worker.id, slot)
    worker.on('message', (message: unknown) => onMessage(worker, message))
  }

  let exited: () => void = () => undefined
  cluster.on('exit', (worker, code, signal) => {
    state.workerExited(worker.id)
    // A broadcast does not wait for a worker that is gone.
    for (const id of [...acks.keys()]) acknowledged(id, worker.id)
    if (draining) {
      if (live().length === 0) exited()
      return
    }
    // A worker that refuses the configuration would be refused again: the gateway does not start.
    if (code === EXIT_CONFIG) {
      log.error({ worker: worker.process.pid }, 'a worker refused the configuration; stopping')
      for (const other of live()) other.process.kill('SIGKILL')
      process.exit(EXIT_CONFIG)
    }
    // A worker that could not listen (the port is taken, or not allowed) would fail again: a
    // replacement would only restart for ever, busy on a core, while the port serves no one.
    if (code === EXIT_WORKER_LISTEN) {
      log.error({ worker: worker.process.pid, host: config.server.host, port: config.server.port }, 'a worker could not listen on server.port; stopping')
      for (const other of live()) other.process.kill('SIGKILL')
      process.exit(1)
    }
    log.warn({ worker: worker.process.pid, code, signal }, 'worker exited; starting another')
    const slot = slots.get(worker.id) ?? 0
    slots.delete(worker.id)
    fork(slot)
  })

  const aggregate = new AggregatorRegistry()
  const management =
    config.server.managementPort === 0
      ? undefined
      : await buildManagement({
          metrics: { contentType: aggregate.contentType, metrics: () => aggregate.clusterMetrics() },
          probes: [
            {
              name: 'workers',
              ready: async () => {
                if (live().length < count) return false
                const answers = await broadcast('ready', null, READY_TIMEOUT_MS)
                return answers.size === count && [...answers.values()].every((ready) => ready === true)
              },
            },
          ],
          draining: () => draining,
          config: () => ({ ...running.state, ...(lastReload === undefined ? {} : { lastReload }) }),
        })

  // SIGHUP (or a change of the file, server.watchConfig): the primary validates the file, then
  // the workers prepare it and serve it only if all could (reload.ts); an invalid file reaches no
  // worker, and every outcome is counted by the workers' reload metric.
  let lastReload: ReloadOutcome | undefined
  const reloadOnce = async (trigger: 'SIGHUP' | 'file', text?: string): Promise<void> => {
    if (draining) return
    // The watcher hands over the text it judged (ConfigWatcher); SIGHUP reads the file.
    const next = loadForReload(path, process.env, running.config, text)
    if (!('config' in next)) {
      logRefusal(log, trigger, next, running.state)
      lastReload = { outcome: 'refused', at: new Date().toISOString(), reason: next.reason }
      await broadcast(ABORT, next satisfies AbortRequest)
      return
    }
    const asked = live().length
    log.info({ trigger, config: next.state.hash, workers: asked }, 'configuration valid: the workers prepare it')
    const answers = await broadcast(PREPARE, { text: next.text } satisfies PrepareRequest, prepareTimeoutMs(next.config))
    const refusal = prepareVerdict(asked, [...answers.values()])
    if (refusal !== undefined) {
      logRefusal(log, trigger, refusal, running.state)
      lastReload = { outcome: 'refused', at: new Date().toISOString(), reason: refusal.reason }
      await broadcast(ABORT, refusal satisfies AbortRequest)
      return
    }
    warnLoosening(log, trigger, running.config, next.config)
    // Adopted before the workers are told: one that starts meanwhile asks for this file.
    running = next
    const committed = await broadcast(COMMIT, { hash: next.state.hash } satisfies CommitRequest)
    lastReload = { outcome: 'reloaded', at: new Date().toISOString() }
    // A worker that did not serve the file (it started between prepare and commit, or did not
    // answer) runs another configuration than /config reports: it is replaced, and its successor
    // starts on the running file ('config.text').
    const laggards = new Set(
      behindAfterCommit(
        live().map((worker) => worker.id),
        committed,
      ),
    )
    const behind = live().filter((worker) => laggards.has(worker.id))
    for (const worker of behind) {
      log.error({ trigger, config: running.state.hash, worker: worker.process.pid }, 'a worker did not take the reloaded configuration; replacing it')
      worker.process.kill('SIGTERM')
    }
    log.info({ trigger, config: running.state.hash, workers: asked, replaced: behind.length }, 'configuration reloaded by every worker')
    watcher.set(next.config.server.watchConfig)
    watcher.rebase()
  }
  let reloads: Promise<void> = Promise.resolve()
  const reload = (trigger: 'SIGHUP' | 'file', text?: string): void => {
    reloads = reloads.then(() => reloadOnce(trigger, text)).catch((err: unknown) => log.error({ err }, 'reload failed'))
  }
  const watcher = new ConfigWatcher(path, (text) => reload('file', text), {
    loosens: watchedLoosening(
      () => log,
      path,
      process.env,
      () => running.config,
    ),
  })
  hangups.handle(() => reload('SIGHUP'))
  watcher.set(config.server.watchConfig)

  const stop = (signal: string): void => {
    if (draining) return
    draining = true
    const started = Date.now()
    log.info({ signal, workers: live().length, shutdownTimeoutMs: config.server.shutdownTimeoutMs }, 'draining in-flight requests')
    const allExited = new Promise<void>((resolve) => {
      exited = resolve
      if (live().length === 0) resolve()
    })
    // Each worker drains itself, bounded by shutdownTimeoutMs; past that and a margin, it is killed.
    for (const worker of live()) worker.process.kill('SIGTERM')
    const bound = setTimeout(() => {
      for (const worker of live()) worker.process.kill('SIGKILL')
    }, config.server.shutdownTimeoutMs + 2000)
    bound.unref()
    allExited
      .then(() => management?.close())
      .then(
        () => {
          clearTimeout(bound)
          log.info({ signal, ms: Date.now() - started }, 'stopped')
          process.exit(0)
        },
        (err: unknown) => {
          log.error({ err }, 'shutdown failed')
          process.exit(1)
        },
      )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))

  for (let i = 0; i < count; i++) fork(i)
  log.info({ workers: count }, 'primary: workers started')
  if (management !== undefined) {
    const address = await management.listen({ host: config.server.managementHost, port: config.server.managementPort })
    log.info({ address }, 'management listener (/healthz, /readyz, /metrics, /config)')
  }
}
