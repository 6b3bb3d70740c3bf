import type { FastifyBaseLogger } from 'fastify'
import { pino } from 'pino'
import { buildApp, type BuildOptions, type GatewayApp, type ProcessState } from '../app/app.js'
import type { WorkerState } from './worker-state.js'
import type { GatewayConfig } from '../options/types.js'
import { systemClock, type Clock } from '../lib/clock.js'
import { JtiReplayGuard } from '../oidc/jti-replay.js'
import { SsfStreams } from '../oidc/ssf-streams.js'
import { loggerOptions, stdoutDestination } from '../ops/logging.js'
import { GatewayMetrics } from '../ops/metrics.js'
import { startTracing } from '../ops/tracing.js'
import { WebSocketRegistry } from '../proxy/websocket-registry.js'
import { closeRedis, connectRedis, defaultWaitReplicas, firstConnection, redisTopology } from '../session/redis-client.js'
import { RedisKeys } from '../session/redis-keys.js'
import { LocalRefreshCoordinator } from '../session/refresh-coordinator.js'
import { MemorySessions } from '../session/memory-store.js'
import { createRevocationList } from '../session/revocation.js'

// What a process keeps across its configurations, and the one place that decides where each
// piece lives:
// - in Redis, when one is configured (session.redisUrl, sentinels or cluster): sessions (store: redis), the revocation list (every store), the
//   logout-token replay guard, refreshes; every replica sees the same;
// - in the primary, on a worker of server.workers without Redis: what the workers must agree on
//   (runtime/worker-state.ts), asked over IPC;
// - in this process otherwise.
// The Redis connection is opened once, here, and closed when the process stops: a reload builds a
// new app on the same connection (app.ts never opens one), so neither reloads nor a retired app
// held open by a long request or a WebSocket multiply connections. Everything here is decided by
// keys that take a restart (runtime/live.ts RESTART_KEYS), so the first configuration decides it.
// So is the tracer (telemetry.tracing): one exporter per process, flushed by close().

export interface ProcessStateOptions {
  /** On a worker of server.workers > 1: what it shares with the others through the primary. */
  worker?: WorkerState
  /** Where the Redis connection's log lines go (default stdout). */
  logStream?: BuildOptions['logStream']
  /** The process's clock (default the system's); tests move it instead of waiting. */
  clock?: Clock
}

export interface OwnedProcessState extends ProcessState {
  /** Closes the Redis connection; after the last app of the process has closed. */
  close(): Promise<void>
}

export async function createProcessState(config: GatewayConfig, options: ProcessStateOptions = {}): Promise<OwnedProcessState> {
  const { session } = config
  const clock = options.clock ?? systemClock
  const log: FastifyBaseLogger = pino(loggerOptions(config.log), options.logStream ?? stdoutDestination())
  const tracing = config.telemetry.tracing === undefined ? undefined : await startTracing(config.telemetry.tracing, log)
  // Registered by kind (session.store takes a restart); each app binds its own store's counts.
  // The revocation list is read at scrape time, once it exists.
  let revocations: ProcessState['revocations'] | undefined
  const metrics = new GatewayMetrics({
    store: session.store,
    ...(session.store === 'cookie' ? { revocations: () => revocations?.size() ?? Promise.resolve(0) } : {}),
  })
  const topology = redisTopology(session)
  const redis =
    topology === undefined
      ? undefined
      : await connectRedis(
          {
            topology,
            timeoutMs: session.redis.timeoutMs,
            wait: { replicas: session.redis.waitReplicas ?? defaultWaitReplicas(topology), timeoutMs: session.redis.waitTimeoutMs },
            observer: metrics.redisObserver(),
          },
          log,
          tracing?.tracer,
        )
  const keys = new RedisKeys(session.redis.keyPrefix)
  // Without Redis, the workers of server.workers share through the primary what replicas share in Redis.
  const primary = redis === undefined ? options.worker : undefined
  // Every store has it: the cookie store's sessions are refused through it, and the Bearer tokens
  // of a subject that was logged out or revoked, whatever the store.
  if (primary !== undefined) await primary.revocations.start()
  revocations = primary?.revocations ?? createRevocationList({ maxAgeSeconds: session.maxAgeSeconds, redis, keys, clock })
  const state: OwnedProcessState = {
    clock,
    redis,
    keys,
    metrics,
    revocations,
    replay: primary?.replay ?? new JtiReplayGuard({ redis, keys, clock }),
    coordinator: options.worker?.coordinator ?? new LocalRefreshCoordinator(clock),
    memorySessions: new MemorySessions(),
    // Counted by the primary even with Redis: the per-process count would give each worker a budget.
    rateLimitStore: options.worker?.rateLimitStore,
    cookieNames: new Set(),
    websockets: new WebSocketRegistry(),
    tracing,
    // Shared Signals: one stream manager and poller per gateway, on the first worker slot with server.workers.
    ssf: new SsfStreams({ manage: (options.worker?.slot ?? 0) === 0, log }),
    // A worker's are its primary's: one restarted after a reload did not start the process.
    startIssuers: (await options.worker?.startIssuers()) ?? new Map(config.providers.map((p) => [p.name, p.issuer])),
    async close() {
      await state.ssf.close()
      if (redis !== undefined) await closeRedis(redis)
      // The spans of the last requests are sent before the process goes.
      await tracing?.shutdown()
    },
  }
  // At a normal start the first requests find Redis ready; a Redis that is down does not stop the
  // start (readiness says so).
  if (redis !== undefined) await firstConnection(redis, session.redis.timeoutMs)
  return state
}

/**
 * An app with a process state of its own, closed with it: a process that serves one
 * configuration and never reloads (the demo, the bench, tests of one app). Its WebSocket verdict
 * and Shared Signals transmitters apply at once, as it serves from the start. The CLI runs a
 * LiveGateway instead.
 */
export async function buildStandaloneApp(config: GatewayConfig, options: Omit<BuildOptions, 'state' | 'live'> & ProcessStateOptions = {}): Promise<GatewayApp> {
  const state = await createProcessState(config, options)
  let app: GatewayApp
  try {
    app = await buildApp(config, { logStream: options.logStream, state, checkDialects: options.checkDialects })
  } catch (err) {
    await state.close()
    throw err
  }
  state.websockets.use(app.websocketVerdict)
  void state.ssf.use(app.sharedSignals)
  app.http.addHook('onClose', () => state.close())
  return app
}
