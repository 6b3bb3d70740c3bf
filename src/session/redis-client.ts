import { context, SpanKind, trace, type Tracer } from '@opentelemetry/api'
import type { Redis } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import { errorType, failSpan } from '../lib/spans.js'

// The one Redis connection of a process, shared by the session store, the refresh coordinator and
// whatever else needs Redis. Commands never wait for Redis: while it is unreachable each one fails
// at once (no offline queue, no retry of a command), so a request answers 503 instead of hanging;
// the connection itself is retried forever with capped backoff, so service resumes by itself.

export interface RedisClientOptions {
  /** redis:// or rediss:// (TLS); user and password, when any, in the URL. */
  url: string
  /** Connect timeout and timeout of every command. */
  timeoutMs: number
}

const RECONNECT_STEP_MS = 100
const RECONNECT_MAX_MS = 2000

/** Delay before the `attempt`th reconnection: grows by 100 ms per attempt, at most 2 s; never gives up. */
export function reconnectDelay(attempt: number): number {
  return Math.min(attempt * RECONNECT_STEP_MS, RECONNECT_MAX_MS)
}

/** The URL as it may be logged: without its password (or a lone user name, which some read as one). */
export function redisEndpoint(url: string): string {
  const parsed = new URL(url)
  return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`
}

/**
 * Connects in the background; commands fail fast until the connection is up. ioredis is loaded
 * here, only by gateways that use Redis: it adds some 20 MiB to the resident memory of every
 * process that imports it.
 */
export async function connectRedis(options: RedisClientOptions, log: FastifyBaseLogger, tracer?: Tracer): Promise<Redis> {
  const endpoint = redisEndpoint(options.url)
  const { Redis } = await import('ioredis')
  const redis = new Redis(options.url, {
    connectTimeout: options.timeoutMs,
    commandTimeout: options.timeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: reconnectDelay,
    connectionName: 'openid-gateway',
  })
  if (tracer !== undefined) traceCommands(redis, tracer, options.url)
  // One line per state change, not one per failed attempt: 'reconnecting' follows both a dropped
  // connection and every failed attempt, 'ready' every (re)connection.
  let down = false
  let lastError: string | undefined
  redis.on('ready', () => {
    log.info({ redis: endpoint }, down ? 'redis connection back' : 'redis connected')
    down = false
  })
  redis.on('reconnecting', () => {
    if (down) return
    down = true
    log.error({ redis: endpoint, err: lastError }, 'redis connection lost; reconnecting')
  })
  // Without an 'error' listener ioredis prints "Unhandled error event" for every failed attempt.
  redis.on('error', (err: Error) => {
    lastError = `${err.name}: ${err.message}`
  })
  return redis
}

/**
 * One client span per command sent (a MULTI's commands each, and its EXEC), named by the command,
 * with no key and no argument (keys hold session ids). Only inside a trace: the connection's own
 * commands and background work (the revocation list's polling) would each start one.
 */
function traceCommands(redis: Redis, tracer: Tracer, url: string): void {
  const { hostname, port, pathname } = new URL(url)
  const base = {
    'db.system.name': 'redis',
    'server.address': hostname,
    'server.port': Number(port || 6379),
    'db.namespace': pathname.length > 1 ? pathname.slice(1) : '0',
  }
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = (command, stream) => {
    const active = context.active()
    if (trace.getSpan(active) === undefined) return send(command, stream)
    const name = command.name.toUpperCase()
    const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes: { ...base, 'db.operation.name': name } }, active)
    command.promise.then(
      () => span.end(),
      (err: unknown) => {
        failSpan(span, errorType(err))
        span.end()
      },
    )
    return send(command, stream)
  }
}

/**
 * Waits until `redis` is connected, at most `timeoutMs`, and never fails: the gateway starts while
 * Redis is down (readiness says so), but at a normal start its first requests find Redis ready.
 */
export async function firstConnection(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      redis.off('ready', done)
      resolve()
    }
    const timer = setTimeout(done, timeoutMs)
    redis.once('ready', done)
  })
}
