import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client'
import type { ProviderCall } from '../oidc/client.js'
import { ENDPOINT_LIST } from '../contract/endpoints.js'
import type { RedisFailureKind, RedisObserver } from '../session/redis-client.js'
import type { EvictionCounts, EvictionReason } from '../session/types.js'

// The gateway's Prometheus metrics, in a registry of its own per app (never prom-client's global
// one: two apps in a process, as in the tests, must not share series). Every label takes its
// value from a fixed set: configured upstream names, a method list, status classes, the problem
// codes of contract/errors.ts, fixed endpoint and provider-call names. Nothing a client sends (a path, a
// host, a user) becomes a label, so no request can grow the number of series.

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** Redis commands the gateway sends (its scripts go as evalsha): anything else is counted as `other`. */
const REDIS_COMMANDS = new Set([
  'get',
  'set',
  'del',
  'mget',
  'smembers',
  'evalsha',
  'eval',
  'wait',
  'incr',
  'zadd',
  'zcount',
  'zrange',
  'zrangebyscore',
  'ping',
  'info',
  'cluster',
  'script',
])

/** The `endpoint` label of the gateway's own endpoints whose outcomes are counted, by route URL. */
const ENDPOINT_LABELS: ReadonlyMap<string, string> = new Map(ENDPOINT_LIST.flatMap((e) => (e.metric === undefined ? [] : [[e.path, e.metric]])))

/** Label of a request that no upstream route served: the gateway's own endpoints, or nothing. */
export const GATEWAY_ROUTE = '_gateway'
export const NO_ROUTE = '_none'

export interface RequestObservation {
  /** A configured upstream name, GATEWAY_ROUTE or NO_ROUTE. */
  route: string
  method: string
  status: number
  seconds: number
  /** The route URL as registered (a pattern, never the request's path). */
  routeUrl: string | undefined
  /** The problem code the gateway answered with, if any. */
  code: string | undefined
}

/** The counts a session store keeps since it was built (each app builds its own). */
export interface StoreCounts {
  /** Failed session-store operations (RedisSessionStore.errors). */
  storeErrors?: () => number
  /** Live sessions evicted, by reason (MemorySessionStore.evictions, RedisSessionStore.evictions). */
  evictions?: () => Readonly<EvictionCounts>
}

/** What decides the process's series: they are registered once, by kind. */
export interface MetricSeries {
  /** session.store (it takes a restart): redis has store errors, memory and redis evictions. */
  store: 'cookie' | 'memory' | 'redis'
  /** Entries in the back-channel logout revocation list (cookie store), which outlives reloads. */
  revocations?: () => Promise<number>
}

function methodClass(method: string): string {
  return METHODS.has(method) ? method : 'other'
}

function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`
}

/** A counter that mirrors a monotone count kept elsewhere, read at scrape time. */
function mirror(registry: Registry, name: string, help: string, read: () => number): void {
  let seen = 0
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const now = read()
      if (now > seen) this.inc(now - seen)
      seen = now
    },
  })
}

/** A counter per eviction reason, each mirroring a monotone count kept elsewhere, read at scrape time. */
function mirrorByReason(registry: Registry, name: string, help: string, reasons: readonly EvictionReason[], read: (reason: EvictionReason) => number): void {
  const seen = new Map<EvictionReason, number>()
  new Counter({
    name,
    help,
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      for (const reason of reasons) {
        const now = read(reason)
        const before = seen.get(reason) ?? 0
        this.inc({ reason }, now > before ? now - before : 0)
        seen.set(reason, now)
      }
    },
  })
}

/** What a registry reads of a metric: prom-client's MetricObjectWithValues, as its Counter and Histogram fill it. */
interface MetricReading {
  name: string
  help: string
  type: 'counter' | 'histogram'
  values: Array<{ labels: Record<string, string | number>; value: number; metricName?: string; exemplar?: null }>
  aggregator: 'sum'
}

/** One labelled series of a BoundMetric: its labels, fixed when it is made, and its counts. */
class BoundSeries {
  readonly labels: Readonly<Record<string, string>>
  /** Per bucket (a histogram), not cumulative. */
  readonly buckets: Float64Array
  sum = 0
  count = 0

  constructor(labels: Record<string, string>, buckets: number) {
    this.labels = labels
    this.buckets = new Float64Array(buckets)
  }
}

/**
 * The metrics every request updates: requests_total, request_duration_seconds and the endpoints'
 * outcomes. prom-client's `labels(...).inc()` and `.observe()` hash the label object on every call
 * (with its validation, about 0.4 µs each, per request); here a series is bound to its labels once
 * and a request adds to numbers. What the registry reads (get()) has the shape of prom-client's own Counter and Histogram
 * (cumulative `_bucket` series with `le`, `+Inf`, `_sum`, `_count`), so the exposition and the
 * workers' aggregation (runtime/primary.ts, by metric name and labels) are the same.
 */
class BoundMetric {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'histogram'
  readonly aggregator = 'sum' as const
  /** A histogram's upper bounds, ascending. */
  readonly #bounds: readonly number[]
  readonly #series = new Map<string, BoundSeries>()

  constructor(options: { name: string; help: string; type: 'counter' | 'histogram'; buckets?: readonly number[]; registry: Registry }) {
    this.name = options.name
    this.help = options.help
    this.type = options.type
    this.#bounds = options.buckets ?? []
    options.registry.registerMetric(this as unknown as Metric)
  }

  /** The series of these labels; its owner keeps it (the label values come from fixed sets). */
  series(labels: Record<string, string>): BoundSeries {
    const key = JSON.stringify(labels)
    let series = this.#series.get(key)
    if (series === undefined) this.#series.set(key, (series = new BoundSeries(labels, this.#bounds.length)))
    return series
  }

  observe(series: BoundSeries, value: number): void {
    const bounds = this.#bounds
    let i = 0
    while (i < bounds.length && value > (bounds[i] as number)) i++
    if (i < bounds.length) (series.buckets[i] as number)++
    series.sum += value
    series.count++
  }

  async get(): Promise<MetricReading> {
    const values: MetricReading['values'] = []
    for (const series of this.#series.values()) {
      if (this.type === 'counter') {
        values.push({ labels: { ...series.labels }, value: series.count })
        continue
      }
      let cumulative = 0
      for (const [i, le] of this.#bounds.entries()) {
        cumulative += series.buckets[i] as number
        values.push({ labels: { le, ...series.labels }, value: cumulative, metricName: `${this.name}_bucket`, exemplar: null })
      }
      values.push({ labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: `${this.name}_bucket`, exemplar: null })
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${this.name}_sum` })
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  reset(): void {
    for (const series of this.#series.values()) {
      series.buckets.fill(0)
      series.sum = 0
      series.count = 0
    }
  }
}

export class GatewayMetrics {
  readonly registry = new Registry()
  readonly #requests: BoundMetric
  readonly #duration: BoundMetric
  readonly #outcomes: BoundMetric
  /** The outcome series by `endpoint code`, bound once (BoundMetric.series builds its key per call). */
  readonly #outcomeSeries = new Map<string, BoundSeries>()
  readonly #refreshes: Counter<'code'>
  readonly #providerDuration: Histogram<'call'>
  readonly #providerErrors: Counter<'call'>
  readonly #storeUnavailable: Counter
  readonly #reloads: Counter<'outcome'>
  readonly #configLoaded: Gauge
  readonly #configInfo: Gauge<'hash'>
  /** The running app's store, read at scrape time (bindStore). */
  #store: StoreCounts = {}
  /** What the stores of retired apps counted, so the mirrored totals never go back. */
  readonly #retired = { storeErrors: 0, evictions: { store_full: 0, user_limit: 0 } satisfies EvictionCounts }
  readonly #requestSeries = new Map<string, { count: BoundSeries; duration: BoundSeries }>()

  constructor(series: MetricSeries = { store: 'cookie' }) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry })
    this.#requests = new BoundMetric({
      name: 'openid_gateway_requests_total',
      help: 'Requests answered, by upstream (or _gateway, _none), method and status class.',
      type: 'counter',
      registry: this.registry,
    })
    this.#duration = new BoundMetric({
      name: 'openid_gateway_request_duration_seconds',
      help: 'Time from the request to the end of the response, by upstream and method.',
      type: 'histogram',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registry: this.registry,
    })
    this.#outcomes = new BoundMetric({
      name: 'openid_gateway_endpoint_outcomes_total',
      help: 'Outcomes of the sign-in, refresh, logout, back-channel logout and forward-auth endpoints: ok, or the problem code.',
      type: 'counter',
      registry: this.registry,
    })
    this.#refreshes = new Counter({
      name: 'openid_gateway_refreshes_total',
      help: 'Refresh-token grants at the provider (transparent and explicit): ok, or the problem code.',
      labelNames: ['code'],
      registers,
    })
    this.#providerDuration = new Histogram({
      name: 'openid_gateway_provider_request_duration_seconds',
      help: 'Latency of calls to the OpenID provider, by call.',
      labelNames: ['call'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    })
    this.#providerErrors = new Counter({
      name: 'openid_gateway_provider_errors_total',
      help: 'Calls to the OpenID provider that failed (unreachable, timed out, 5xx, malformed), by call.',
      labelNames: ['call'],
      registers,
    })
    this.#storeUnavailable = new Counter({
      name: 'openid_gateway_session_store_unavailable_total',
      help: 'Requests answered 503 session_store_unavailable.',
      registers,
    })
    this.#reloads = new Counter({
      name: 'openid_gateway_config_reloads_total',
      help: 'Configuration reloads (SIGHUP or a change of the file): success, or failure (the running configuration was kept).',
      labelNames: ['outcome'],
      registers,
    })
    for (const outcome of ['success', 'failure']) this.#reloads.inc({ outcome }, 0)
    this.#configLoaded = new Gauge({
      name: 'openid_gateway_config_loaded_timestamp_seconds',
      help: 'When the running configuration was loaded (epoch seconds).',
      registers,
      aggregator: 'max',
    })
    this.#configInfo = new Gauge({
      name: 'openid_gateway_config_info',
      help: 'The SHA-256 of the running configuration file, as a label (value 1).',
      labelNames: ['hash'],
      registers,
      aggregator: 'max',
    })
    if (series.store === 'redis') {
      mirror(
        this.registry,
        'openid_gateway_session_store_errors_total',
        'Failed session-store operations (Redis unreachable or timed out).',
        () => this.#retired.storeErrors + (this.#store.storeErrors?.() ?? 0),
      )
    }
    if (series.store !== 'cookie') {
      const reasons: EvictionReason[] = series.store === 'memory' ? ['store_full', 'user_limit'] : ['user_limit']
      mirrorByReason(
        this.registry,
        'openid_gateway_session_evictions_total',
        'Live sessions evicted, by reason: store_full (the memory store was full, the oldest sign-in went), user_limit (a user signed in beyond session.maxSessionsPerUser, their oldest went).',
        reasons,
        (reason) => this.#retired.evictions[reason] + (this.#store.evictions?.()[reason] ?? 0),
      )
    }
    const { revocations } = series
    if (revocations !== undefined) {
      new Gauge({
        name: 'openid_gateway_revocation_list_entries',
        help: 'Entries in the back-channel logout revocation list (cookie store).',
        registers,
        async collect() {
          // NaN while the Redis list cannot be read (the size is unknown, not zero); /readyz names the outage.
          this.set(await revocations().catch(() => Number.NaN))
        },
      })
    }
  }

  /**
   * What the Redis connection reports (session/redis-client.ts), registered when a process
   * connects to Redis: command latency by command, failures by kind, the redirections of a Cluster
   * that ioredis followed, failovers seen, and writes that fewer replicas acknowledged than asked.
   */
  redisObserver(): RedisObserver {
    const registers = [this.registry]
    const latency = new Histogram({
      name: 'openid_gateway_redis_command_duration_seconds',
      help: 'Round trip of Redis commands, by command (scripts are evalsha), failed ones included.',
      labelNames: ['command'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    })
    const errors = new Counter({
      name: 'openid_gateway_redis_errors_total',
      help: 'Redis commands that failed, by kind: timeout, connection (no connection, no primary, cluster down) or other (an error reply).',
      labelNames: ['kind'],
      registers,
    })
    const redirections = new Counter({
      name: 'openid_gateway_redis_redirections_total',
      help: 'Redis Cluster redirections followed, by kind: moved (the slot has a new owner) or ask (the slot is migrating).',
      labelNames: ['kind'],
      registers,
    })
    const failovers = new Counter({
      name: 'openid_gateway_redis_failovers_total',
      help: 'Failovers seen: the primary (Sentinel) or the set of primaries (Cluster) changed.',
      registers,
    })
    const unreplicated = new Counter({
      name: 'openid_gateway_redis_unreplicated_writes_total',
      help: 'Writes that fewer replicas acknowledged than session.redis.waitReplicas within session.redis.waitTimeoutMs (kept on the primary).',
      registers,
    })
    for (const kind of ['timeout', 'connection', 'other'] satisfies RedisFailureKind[]) errors.inc({ kind }, 0)
    for (const kind of ['moved', 'ask']) redirections.inc({ kind }, 0)
    const byCommand = new Map<string, { observe(value: number): void }>()
    return {
      command(name, seconds, failure) {
        const command = REDIS_COMMANDS.has(name) ? name : 'other'
        let series = byCommand.get(command)
        if (series === undefined) {
          series = latency.labels(command)
          byCommand.set(command, series)
        }
        series.observe(seconds)
        if (failure !== undefined) errors.inc({ kind: failure })
      },
      redirection: (kind) => redirections.inc({ kind }),
      failover: () => failovers.inc(),
      unreplicated: () => unreplicated.inc(),
    }
  }

  observeRequest(o: RequestObservation): void {
    const method = methodClass(o.method)
    const status = statusClass(o.status)
    // The series are looked up once per combination; the labels' fixed sets bound the map.
    const key = `${o.route} ${method} ${status}`
    let series = this.#requestSeries.get(key)
    if (series === undefined) {
      series = { count: this.#requests.series({ route: o.route, method, status }), duration: this.#duration.series({ route: o.route, method }) }
      this.#requestSeries.set(key, series)
    }
    series.count.count++
    this.#duration.observe(series.duration, o.seconds)
    const endpoint = o.routeUrl === undefined ? undefined : ENDPOINT_LABELS.get(o.routeUrl)
    if (endpoint !== undefined) {
      const code = o.code ?? (o.status < 400 ? 'ok' : `http_${o.status}`)
      // The endpoints, the problem codes and the statuses are fixed sets: the map is bounded.
      const key = `${endpoint} ${code}`
      let outcome = this.#outcomeSeries.get(key)
      if (outcome === undefined) this.#outcomeSeries.set(key, (outcome = this.#outcomes.series({ endpoint, code })))
      outcome.count++
    }
    if (o.code === 'session_store_unavailable') this.#storeUnavailable.inc()
  }

  /**
   * The store of the app now serving: a reload builds a new one, whose counts start at zero; what
   * the previous one counted is kept, so the counters stay monotone.
   */
  bindStore(counts: StoreCounts): void {
    this.#retired.storeErrors += this.#store.storeErrors?.() ?? 0
    for (const reason of ['store_full', 'user_limit'] satisfies EvictionReason[]) this.#retired.evictions[reason] += this.#store.evictions?.()[reason] ?? 0
    this.#store = counts
  }

  observeReload(outcome: 'success' | 'failure'): void {
    this.#reloads.inc({ outcome })
  }

  /** The configuration now running: its file's hash and when it was loaded. */
  configLoaded(hash: string, loadedAt: Date): void {
    this.#configLoaded.set(loadedAt.getTime() / 1000)
    this.#configInfo.reset()
    this.#configInfo.set({ hash }, 1)
  }

  observeRefresh(code: string): void {
    this.#refreshes.inc({ code })
  }

  observeProviderCall(call: ProviderCall, seconds: number, failed: boolean): void {
    this.#providerDuration.observe({ call }, seconds)
    if (failed) this.#providerErrors.inc({ call })
  }
}
