import type { Providers } from '../oidc/providers.js'
import type { SsfTransmitter } from '../oidc/ssf-transmitter.js'
import { pingRedis, type RedisClient } from '../session/redis-client.js'
import type { SessionStore } from '../session/types.js'
import type { ReadinessProbe } from './management.js'

// What /readyz (management.ts) and the gRPC health service ask of one configuration: whether it
// can decide requests now. Each probe is asked at each /readyz request or health call and never
// throws.

export interface ReadinessSources {
  providers: Providers
  store: Pick<SessionStore, 'ping'>
  /** This configuration's Shared Signals transmitters (none without provider ssf). */
  transmitters: readonly SsfTransmitter[]
  /** The process's Redis connection, when one is configured. */
  redis: RedisClient | undefined
}

/**
 * The readiness probes of one configuration: each provider's metadata and keys loaded, the
 * session store answering, every required Shared Signals stream enabled, and Redis answering.
 */
export function readinessProbes({ providers, store, transmitters, redis }: ReadinessSources): ReadinessProbe[] {
  const probes: ReadinessProbe[] = [
    { name: 'provider_metadata', ready: () => providers.all.every((p) => p.client.ready) },
    { name: 'provider_keys', ready: () => providers.all.every((p) => p.client.keys.loaded) },
    { name: 'session_store', ready: () => store.ping() },
    // Always present (the live gateway's probe names are fixed at start); passes unless a required stream is not enabled.
    {
      name: 'shared_signals',
      ready: () => transmitters.every((t) => !t.config.required || t.healthy),
      detail: () => (transmitters.length === 0 ? undefined : Object.fromEntries(transmitters.map((t) => [t.provider, { ...t.status }]))),
    },
  ]
  // The revocation list and the logout-token replay guard live there too; with Sentinel or
  // Cluster, `redis` is what names a failover in progress (no primary, or a shard without one).
  if (redis !== undefined) probes.push({ name: 'redis', ready: () => pingRedis(redis) })
  return probes
}
