import type { Clock } from '../lib/clock.js'
import type { JtiReplay } from '../oidc/jti-replay.js'
import type { SsfStreams } from '../oidc/ssf-streams.js'
import type { GatewayMetrics } from '../ops/metrics.js'
import type { Tracing } from '../ops/tracing.js'
import type { WebSocketRegistry } from '../proxy/websocket-registry.js'
import type { RateLimitStore } from '../routes/sign-in-hardening.js'
import type { MemorySessions } from '../session/memory-store.js'
import type { RedisClient } from '../session/redis-client.js'
import type { RedisKeys } from '../session/redis-keys.js'
import type { RefreshCoordinator } from '../session/refresh-coordinator.js'
import type { RevocationList } from '../session/revocation.js'

/**
 * What outlives one configuration: built once per process from the first configuration (the
 * keys that decide it take a restart, runtime/live.ts RESTART_KEYS), handed to every app a
 * reload builds, closed when the process stops. Where each piece lives (Redis, the primary of
 * server.workers, or this process) is decided where it is built, not here.
 */
export interface ProcessState {
  /** What every expiry and cache of the process's apps is judged by (lib/clock.ts). */
  readonly clock: Clock
  /** The process's one Redis connection (session.redisUrl, sentinels or cluster), whatever the number of reloads. */
  readonly redis: RedisClient | undefined
  /** Every key the gateway writes in that Redis, under session.redis.keyPrefix. */
  readonly keys: RedisKeys
  readonly metrics: GatewayMetrics
  /**
   * The revocation list: the sessions of the cookie store, and with every store the Bearer tokens,
   * that a back-channel logout or a Shared Signals event ended.
   */
  readonly revocations: RevocationList
  readonly replay: JtiReplay
  /** The refresh coordinator of the cookie and memory stores (the Redis store's is in Redis). */
  readonly coordinator: RefreshCoordinator
  /** The memory store's sign-ins. */
  readonly memorySessions: MemorySessions
  /** On a worker of server.workers: the sign-in rate-limit counts the primary keeps. */
  readonly rateLimitStore: RateLimitStore | undefined
  /** Every cookies.name this process has run with: browsers may still send those cookies. */
  readonly cookieNames: Set<string>
  /** Open proxied WebSockets, whichever configuration opened them. */
  readonly websockets: WebSocketRegistry
  /** The process's tracer (telemetry.tracing); undefined when tracing is off. */
  readonly tracing: Tracing | undefined
  /** The Shared Signals streams' loops (provider ssf): each configuration hands it its transmitters. */
  readonly ssf: SsfStreams
  /**
   * Each provider's issuer when the process started: the issuer of its sessions sealed before
   * sessions recorded theirs (session/issuer-binding.ts).
   */
  readonly startIssuers: ReadonlyMap<string, string>
}
