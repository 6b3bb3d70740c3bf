import type { Tracer } from '@opentelemetry/api'
import type { Cluster, ClusterOptions, Command, Redis, RedisOptions } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import type { ConnectionOptions } from 'node:tls'
import { otelApi } from '../lib/otel.js'
import { errorType, failSpan } from '../lib/spans.js'
import type { SessionConfig } from '../options/types.js'

// The one Redis connection of a process, shared by the session store, the refresh coordinator and
// whatever else needs Redis, on one of three topologies:
// - one node (`session.redisUrl`);
// - Sentinel (`session.redis.sentinels`): ioredis asks the sentinels for the primary and
//   reconnects to the new one after a failover by itself; an announcement (`+switch-master`) of
//   another primary than the one it is on moves it at once (followSwitches);
// - Cluster (`session.redis.cluster`): ioredis routes each command by hash slot, follows MOVED and
//   ASK redirections and refreshes its slot map after a failover.
// Commands never wait for Redis: while it is unreachable each one fails at once (no offline
// queue, no retry of a command), so a request answers 503 instead of hanging; the connection itself
// is retried forever with capped backoff, so service resumes by itself. (With Sentinel, a command
// waits for a reconnection in progress, at most session.redis.timeoutMs: see below.)
//
// Every command is sent as a command of its own, scripts included, never in a pipeline: ioredis
// follows a Cluster redirection and refreshes its slot map for those (see durableWrite).
//
// Writes that must survive a failover (sessions, their ends, refresh results, revocations) are
// followed by `WAIT <replicas> <timeoutMs>` on the same connection (durableWrite): Redis
// replication is asynchronous, and a write acknowledged by a primary that dies before its replicas
// have it is lost with it (Redis replication documentation, "Allow writes only with N attached
// replicas"; WAIT command). A WAIT that times out does not fail the write: it is on the primary,
// and refusing sign-ins while one replica lags would turn a replica's outage into the gateway's.
// It is counted and logged; `min-replicas-to-write` on the primary refuses such writes instead
// (they answer 503), for those who want that trade.

export type RedisClient = Redis | Cluster

export interface HostPort {
  host: string
  port: number
}

export type RedisTopology =
  | { kind: 'single'; url: string }
  | {
      kind: 'sentinel'
      name: string
      sentinels: HostPort[]
      sentinelUsername?: string
      sentinelPassword?: string
      sentinelTls: boolean
      username?: string
      password?: string
      tls: boolean
    }
  | {
      kind: 'cluster'
      nodes: HostPort[]
      natMap?: Record<string, HostPort>
      /** Keep host names as given (no DNS lookup of the seeds), so TLS checks the name: AWS ElastiCache. */
      passthroughDns: boolean
      username?: string
      password?: string
      tls: boolean
    }

/** What the metrics see of the connection (ops/metrics.ts implements it). */
export interface RedisObserver {
  /** A command's round trip, with the kind of its failure if it failed. */
  command(name: string, seconds: number, failure: RedisFailureKind | undefined): void
  /** A Cluster redirection that ioredis followed. */
  redirection(kind: 'moved' | 'ask'): void
  /** The primary (Sentinel) or a shard's primary (Cluster) changed. */
  failover(): void
  /** A durable write whose WAIT saw fewer replicas than asked. */
  unreplicated(): void
}

export type RedisFailureKind = 'timeout' | 'connection' | 'other'

/** One node by its URL (redis:// or rediss://, user and password in it), or any topology. */
export type RedisClientOptions = ({ url: string } | { topology: RedisTopology }) & {
  /** Connect timeout and timeout of every command. */
  timeoutMs: number
  /** Replicas a durable write waits for, and how long (default: none). */
  wait?: { replicas: number; timeoutMs: number }
  observer?: RedisObserver
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

/** `host:port` (the schema's `host-port` format; an IPv6 host in brackets). */
function parseHostPort(value: string): HostPort {
  const at = value.lastIndexOf(':')
  const host = value.slice(0, at).replace(/^\[(.*)\]$/, '$1')
  return { host, port: Number(value.slice(at + 1)) }
}

/** The topology the session configuration names, if any (config/cross-key-rules.ts allows at most one). */
export function redisTopology(session: SessionConfig): RedisTopology | undefined {
  const { redis } = session
  if (session.redisUrl !== undefined) return { kind: 'single', url: session.redisUrl }
  const auth = { ...(redis.username === undefined ? {} : { username: redis.username }), ...(redis.password === undefined ? {} : { password: redis.password }) }
  if (redis.sentinels !== undefined) {
    const s = redis.sentinels
    return {
      kind: 'sentinel',
      name: s.name,
      sentinels: s.nodes.map(parseHostPort),
      ...(s.username === undefined ? {} : { sentinelUsername: s.username }),
      ...(s.password === undefined ? {} : { sentinelPassword: s.password }),
      sentinelTls: s.tls,
      ...auth,
      tls: redis.tls,
    }
  }
  if (redis.cluster !== undefined) {
    const c = redis.cluster
    return {
      kind: 'cluster',
      nodes: c.nodes.map(parseHostPort),
      ...(c.natMap === undefined ? {} : { natMap: Object.fromEntries(Object.entries(c.natMap).map(([from, to]) => [from, parseHostPort(to)])) }),
      passthroughDns: c.dnsLookup === 'passthrough',
      ...auth,
      tls: redis.tls,
    }
  }
  return undefined
}

/** What WAIT asks by default: one replica with Sentinel and Cluster (which have replicas), none on one node. */
export function defaultWaitReplicas(topology: RedisTopology): number {
  return topology.kind === 'single' ? 0 : 1
}

/** What may be logged of a topology: where it is, never a password. */
function topologyEndpoint(topology: RedisTopology): string {
  switch (topology.kind) {
    case 'single':
      return redisEndpoint(topology.url)
    case 'sentinel':
      return `sentinel:${topology.name}@${topology.sentinels.map((n) => `${n.host}:${n.port}`).join(',')}`
    case 'cluster':
      return `cluster:${topology.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`
  }
}

interface WritePolicy {
  replicas: number
  timeoutMs: number
  observer: RedisObserver | undefined
  log: FastifyBaseLogger
  /** ioredis's Command, kept from connectRedis's import: this module loads ioredis only there. */
  Command: typeof Command
}

const policies = new WeakMap<RedisClient, WritePolicy>()

/**
 * Runs `write` (commands on the keys of `key`'s hash slot), then WAITs for the client's replicas
 * on the connection the write went through, so that what it wrote is on a replica before the
 * caller acknowledges it. Resolves the write's reply; throws its error.
 *
 * The write is sent as ordinary commands, never as a pipeline with WAIT: with Cluster, ioredis
 * follows a MOVED or ASK redirection (and reads the slot map again) only for a command of its
 * own, or for a pipeline whose every command failed alike. In a pipeline [write, WAIT] the keyless
 * WAIT succeeds on whichever node it reaches while the write gets MOVED, so the redirection came
 * back as the write's error and the slot map was not read again: after a failover, durable writes
 * to that shard kept failing with MOVED until some other command to it happened to refresh the
 * map (Redis Cluster specification, "MOVED Redirection": a client follows it and should refresh
 * its slot map).
 */
export async function durableWrite<T>(client: RedisClient, key: string, write: (client: RedisClient) => Promise<T>): Promise<T> {
  const reply = await write(client)
  const policy = policies.get(client)
  if (policy === undefined || policy.replicas === 0) return reply
  const acknowledged = await waitForReplicas(client, policy, key)
  if (typeof acknowledged === 'number' && acknowledged < policy.replicas) {
    policy.observer?.unreplicated()
    policy.log.warn(
      { replicas: acknowledged, wanted: policy.replicas, waitMs: policy.timeoutMs },
      'a Redis write reached fewer replicas than session.redis.waitReplicas; it is lost if the primary fails before they catch up',
    )
  }
  return reply
}

/**
 * WAIT on the connection that wrote `key`: it counts the replicas that acknowledged every write
 * sent before it on that connection (WAIT command documentation). WAIT names no key, so Cluster
 * would send it to any node: it is routed by `key`'s slot instead, to the primary the write just
 * reached (after a redirection, the slot map already names the new one).
 */
async function waitForReplicas(client: RedisClient, policy: WritePolicy, key: string): Promise<unknown> {
  const wait = new policy.Command('wait', [policy.replicas, policy.timeoutMs])
  if (isCluster(client)) {
    const slot = new policy.Command('exists', [key]).getSlot()
    wait.getSlot = () => slot
  }
  void client.sendCommand(wait)
  return wait.promise
}

/** Whether Redis answers: with Cluster, every primary (a shard without one cannot serve its users). */
export async function pingRedis(client: RedisClient): Promise<boolean> {
  try {
    if (isCluster(client)) {
      const primaries = client.nodes('master')
      if (client.status !== 'ready' || primaries.length === 0) return false
      const answers = await Promise.all(primaries.map((node) => node.ping()))
      return answers.every((answer) => answer === 'PONG')
    }
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  }
}

function isCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true
}

/**
 * Connects in the background; commands fail fast until the connection is up. ioredis is loaded
 * here, only by gateways that use Redis: it adds some 20 MiB to the resident memory of every
 * process that imports it.
 */
export async function connectRedis(options: RedisClientOptions, log: FastifyBaseLogger, tracer?: Tracer): Promise<RedisClient> {
  const topology: RedisTopology = 'topology' in options ? options.topology : { kind: 'single', url: options.url }
  const endpoint = topologyEndpoint(topology)
  const { Redis, Cluster, Command } = await import('ioredis')
  const common: RedisOptions = {
    connectTimeout: options.timeoutMs,
    commandTimeout: options.timeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: reconnectDelay,
    connectionName: 'openid-gateway',
  }
  let client: RedisClient
  switch (topology.kind) {
    case 'single':
      client = new Redis(topology.url, common)
      break
    case 'sentinel': {
      const sentinelClient = new Redis({
        ...common,
        sentinels: topology.sentinels,
        name: topology.name,
        ...credentials(topology),
        ...(topology.tls ? { tls: {} } : {}),
        ...(topology.sentinelUsername === undefined ? {} : { sentinelUsername: topology.sentinelUsername }),
        ...(topology.sentinelPassword === undefined ? {} : { sentinelPassword: topology.sentinelPassword }),
        ...(topology.sentinelTls ? { sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
        sentinelRetryStrategy: reconnectDelay,
        sentinelCommandTimeout: options.timeoutMs,
        // The sentinels' +switch-master is followed by followSwitches, not by ioredis's detector,
        // which reconnects at every announcement: each sentinel makes its own as it learns of the
        // failover, seconds apart, so the client, already on the new primary, was disconnected
        // again after service was back, and the commands in flight failed (503).
        failoverDetector: false,
        // A request sent while the client reconnects (after losing the primary, or when an
        // announcement names another) waits for that attempt (each at most commandTimeout, and no
        // longer than one failed attempt, as maxRetriesPerRequest 0 fails the queue at every one)
        // rather than answer 503 once service is back.
        enableOfflineQueue: true,
        // A demoted primary answers writes with READONLY: reconnect, through the sentinels.
        reconnectOnError: (err) => err.message.startsWith('READONLY'),
      })
      followSwitches(sentinelClient, topology, options.timeoutMs, Redis)
      client = sentinelClient
      break
    }
    case 'cluster': {
      const tls: ConnectionOptions | undefined = topology.tls ? {} : undefined
      const clusterOptions: ClusterOptions = {
        redisOptions: { ...common, ...credentials(topology), ...(tls === undefined ? {} : { tls }) },
        enableOfflineQueue: false,
        clusterRetryStrategy: reconnectDelay,
        // A command to a shard whose primary just failed is tried again once the slot map is
        // refreshed, within the command's own timeout.
        retryDelayOnFailover: 100,
        retryDelayOnClusterDown: 100,
        slotsRefreshTimeout: options.timeoutMs,
        ...(topology.natMap === undefined ? {} : { natMap: topology.natMap }),
        ...(topology.passthroughDns ? { dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) => callback(null, address) } : {}),
      }
      client = new Cluster(topology.nodes, clusterOptions)
      break
    }
  }
  if (options.wait !== undefined) policies.set(client, { ...options.wait, observer: options.observer, log, Command })
  if (options.observer !== undefined) observeCommands(client, options.observer)
  if (tracer !== undefined) traceCommands(client, tracer, topology)
  markClosing(client)
  watchPrimaries(client, endpoint, log, options.observer)
  return client
}

/**
 * Whether a sentinel's `+switch-master` announcement (`<name> <old-ip> <old-port> <new-ip>
 * <new-port>`, Redis Sentinel documentation, "Pub/Sub messages") says that the primary of `name`
 * is now another than `current`, the address the client is connected to: the client must then
 * ask the sentinels again. An announcement of another master, or of the primary the client is
 * already on, is not.
 */
export function switchedAway(message: string, name: string, current: HostPort | undefined): boolean {
  const [announced, , , host, port] = message.split(' ')
  if (announced !== name || host === undefined || port === undefined) return false
  return current === undefined || current.host !== host || current.port !== Number(port)
}

/** Connections a client keeps beside itself (Sentinel subscriptions), closed with it. */
const companions = new WeakMap<RedisClient, Redis[]>()

/**
 * Subscribes to every sentinel's `+switch-master` and reconnects the client (through the
 * sentinels) when one names a primary other than the one it is connected to: the primary changes
 * without waiting for the old one's connection to break (a primary that is slow, not dead, would
 * keep it). Every sentinel announces the failover as it learns of it, so most announcements come
 * after the client has found the new primary by itself; those are ignored, rather than break a
 * connection that serves (its commands in flight would fail). A client that is reconnecting
 * already asks the sentinels.
 */
function followSwitches(client: Redis, topology: Extract<RedisTopology, { kind: 'sentinel' }>, timeoutMs: number, RedisClass: typeof Redis): void {
  const subscribers = topology.sentinels.map((sentinel) => {
    const subscriber = new RedisClass({
      host: sentinel.host,
      port: sentinel.port,
      ...(topology.sentinelUsername === undefined ? {} : { username: topology.sentinelUsername }),
      ...(topology.sentinelPassword === undefined ? {} : { password: topology.sentinelPassword }),
      ...(topology.sentinelTls ? { tls: {} } : {}),
      connectTimeout: timeoutMs,
      retryStrategy: reconnectDelay,
      connectionName: 'openid-gateway-sentinel',
    })
    subscriber.on('error', () => undefined)
    subscriber.subscribe(SWITCH_MASTER).catch(() => undefined)
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== SWITCH_MASTER || client.status !== 'ready') return
      const stream = client.stream
      const current =
        stream?.remoteAddress === undefined || stream.remotePort === undefined ? undefined : { host: stream.remoteAddress, port: stream.remotePort }
      if (switchedAway(message, topology.name, current)) client.disconnect(true)
    })
    return subscriber
  })
  companions.set(client, subscribers)
}

const SWITCH_MASTER = '+switch-master'

function credentials(topology: { username?: string; password?: string }): Pick<RedisOptions, 'username' | 'password'> {
  return {
    ...(topology.username === undefined ? {} : { username: topology.username }),
    ...(topology.password === undefined ? {} : { password: topology.password }),
  }
}

/**
 * One line per state change, not one per failed attempt, and a failover counted when the primary
 * (a shard's, with Cluster) is another than before.
 */
function watchPrimaries(client: RedisClient, endpoint: string, log: FastifyBaseLogger, observer: RedisObserver | undefined): void {
  let down = false
  let lastError: string | undefined
  let primaries: string | undefined
  const changed = (now: string): void => {
    if (primaries !== undefined && now !== primaries) {
      observer?.failover()
      log.warn({ redis: endpoint, from: primaries, to: now }, 'redis primary changed (failover)')
    }
    primaries = now
  }
  client.on('ready', () => {
    log.info({ redis: endpoint }, down ? 'redis connection back' : 'redis connected')
    down = false
    if (!isCluster(client)) changed(`${client.stream?.remoteAddress ?? ''}:${client.stream?.remotePort ?? ''}`)
  })
  const lost = (): void => {
    if (down) return
    down = true
    log.error({ redis: endpoint, err: lastError }, 'redis connection lost; reconnecting')
  }
  client.on('reconnecting', lost)
  if (isCluster(client)) {
    client.on('node error', (err: Error) => {
      lastError = `${err.name}: ${err.message}`
    })
    client.on('refresh', () => {
      changed(
        client
          .nodes('master')
          .map((node) => `${node.options.host}:${node.options.port}`)
          .sort()
          .join(','),
      )
    })
  }
  // Without an 'error' listener ioredis prints "Unhandled error event" for every failed attempt.
  client.on('error', (err: Error) => {
    lastError = `${err.name}: ${err.message}`
  })
  // ioredis gives a connection up for good ('end': every command fails at once with "Connection
  // is closed.") only when told to close, or when a close finds it marked as closing by the
  // client itself. Around a Sentinel failover the second happened: the failover detector's
  // disconnection and the client's own reconnection crossed, and a gateway answered 503 until it
  // was restarted (seen in test/e2e/redis-sentinel.test.ts, about one run in four). A connection
  // that ends without closeRedis is connected again.
  client.on('end', () => {
    if (closing.has(client)) return
    log.warn({ redis: endpoint, err: lastError }, 'redis connection ended by itself; connecting again')
    setTimeout(() => {
      if (!closing.has(client)) client.connect().catch(() => undefined)
    }, RECONNECT_STEP_MS).unref()
  })
}

/** Clients told to close (quit, or disconnect without reconnecting): their end is the one asked for. */
const closing = new WeakSet<RedisClient>()

/** Marks the client as closing whenever it is told to close, by the gateway or by a test. */
function markClosing(client: RedisClient): void {
  const target = client as unknown as { quit: RedisClient['quit']; disconnect(reconnect?: boolean): void }
  const quit = target.quit.bind(client)
  const disconnect = target.disconnect.bind(client)
  // Its companions go with it: they would keep reconnecting, and the process alive.
  const closeCompanions = (): void => {
    for (const companion of companions.get(client) ?? []) companion.disconnect()
  }
  target.quit = (...args: Parameters<RedisClient['quit']>) => {
    closing.add(client)
    closeCompanions()
    return quit(...args)
  }
  target.disconnect = (reconnect?: boolean) => {
    if (reconnect !== true) {
      closing.add(client)
      closeCompanions()
    }
    disconnect(reconnect)
  }
}

/**
 * Closes the connection for good: QUIT lets pending replies arrive; disconnect() then also stops
 * what a connection keeps beside itself (Sentinel's failover-detector subscriptions, Cluster's
 * node connections), which QUIT alone leaves reconnecting.
 */
export async function closeRedis(client: RedisClient): Promise<void> {
  await client.quit().catch(() => undefined)
  client.disconnect()
}

type Send = Redis['sendCommand']

/** Wraps the client's sendCommand (pipelines and scripts go through it too). */
function wrapSend(client: RedisClient, wrap: (send: Send) => Send): void {
  const target = client as unknown as { sendCommand: Send }
  target.sendCommand = wrap(target.sendCommand.bind(client))
}

function failureKind(err: unknown): RedisFailureKind {
  const message = err instanceof Error ? err.message : ''
  if (/timed? ?out/i.test(message)) return 'timeout'
  if (
    /Connection is closed|isn't writeable|ECONNREFUSED|ECONNRESET|EPIPE|ENOTFOUND|EHOSTUNREACH|Cluster isn't ready|None of startup nodes|All sentinels are unreachable|CLUSTERDOWN|Failed to refresh slots cache/i.test(
      message,
    )
  ) {
    return 'connection'
  }
  return 'other'
}

function observeCommands(client: RedisClient, observer: RedisObserver): void {
  wrapSend(client, (send) => (command, stream, ...rest) => {
    const started = performance.now()
    const name = command.name.toLowerCase()
    command.promise.then(
      () => observer.command(name, (performance.now() - started) / 1000, undefined),
      (err: unknown) => observer.command(name, (performance.now() - started) / 1000, failureKind(err)),
    )
    return (send as (...args: unknown[]) => ReturnType<Send>)(command, stream, ...rest)
  })
  if (isCluster(client)) {
    // ioredis follows MOVED and ASK inside Cluster#handleError (a public method, marked @ignore);
    // counting there sees every redirection, which the command's own promise never does.
    const target = client as unknown as { handleError: (error: Error, ...rest: unknown[]) => unknown }
    const handle = target.handleError.bind(client)
    target.handleError = (error, ...rest) => {
      if (error.message.startsWith('MOVED ')) observer.redirection('moved')
      else if (error.message.startsWith('ASK ')) observer.redirection('ask')
      return handle(error, ...rest)
    }
  }
}

/**
 * One client span per command sent (a MULTI's commands each, and its EXEC), named by the command,
 * with no key and no argument (keys hold session ids). Only inside a trace: the connection's own
 * commands and background work (the revocation list's polling) would each start one.
 */
function traceCommands(client: RedisClient, tracer: Tracer, topology: RedisTopology): void {
  const { context, SpanKind, trace } = otelApi()
  const base: Record<string, string | number> = { 'db.system.name': 'redis' }
  if (topology.kind === 'single') {
    const { hostname, port, pathname } = new URL(topology.url)
    Object.assign(base, { 'server.address': hostname, 'server.port': Number(port || 6379), 'db.namespace': pathname.length > 1 ? pathname.slice(1) : '0' })
  } else {
    Object.assign(base, { 'db.namespace': '0' })
  }
  wrapSend(client, (send) => (command, stream, ...rest) => {
    const active = context.active()
    const call = (): ReturnType<Send> => (send as (...args: unknown[]) => ReturnType<Send>)(command, stream, ...rest)
    if (trace.getSpan(active) === undefined) return call()
    const name = command.name.toUpperCase()
    const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes: { ...base, 'db.operation.name': name } }, active)
    command.promise.then(
      () => span.end(),
      (err: unknown) => {
        failSpan(span, errorType(err))
        span.end()
      },
    )
    return call()
  })
}

/**
 * Waits until `redis` is connected, at most `timeoutMs`, and never fails: the gateway starts while
 * Redis is down (readiness says so), but at a normal start its first requests find Redis ready.
 */
export async function firstConnection(redis: RedisClient, timeoutMs: number): Promise<void> {
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
