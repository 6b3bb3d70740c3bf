import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import type { RateLimitConfig } from '../options/types.js'
import { GatewayError } from '../contract/errors.js'
import { SECURITY_HEADERS } from '../ops/response-headers.js'
import { ENDPOINT_LIST } from '../contract/endpoints.js'

// What every sign-in endpoint gets before its handler runs: the security headers of responses
// the gateway writes itself, and the per-client budget of sign-in requests. Called inside the
// sign-in plugin, so the hooks are scoped to its routes and never touch proxied responses.

/** The route URLs of the endpoints the sign-in budget covers (contract/endpoints.ts, signInRateLimit). */
const LIMITED: ReadonlySet<string> = new Set(ENDPOINT_LIST.filter((e) => e.signInRateLimit).map((e) => e.path))

/** Client addresses remembered per replica; the least recently seen are dropped beyond it. */
const TRACKED_ADDRESSES = 10_000

/** A @fastify/rate-limit store class (its `store` option). */
export type RateLimitStore = NonNullable<RateLimitPluginOptions['store']>

/** `alsoLimited`: route paths counted like the table's sign-in endpoints (a provider's own callback path). */
export async function hardenSignIn(
  app: FastifyInstance,
  limit: RateLimitConfig['signIn'],
  store?: RateLimitStore,
  alsoLimited: readonly string[] = [],
): Promise<void> {
  app.addHook('onRequest', async (_req, reply) => {
    reply.headers(SECURITY_HEADERS).header('cache-control', 'no-store')
  })
  if (limit.max === 0) return

  // The plugin keys by req.ip, which Fastify's trustProxy derives: X-Forwarded-For walked from
  // the right, skipping server.trustedProxies, and ignored from any other peer. IPv6 addresses
  // count per /64, the smallest block a single client usually holds.
  await app.register(rateLimit, {
    global: false,
    max: limit.max,
    timeWindow: limit.windowSeconds * 1000,
    cache: TRACKED_ADDRESSES,
    ...(store === undefined ? {} : { store }),
  })
  const check = app.createRateLimit()
  const limited = new Set([...LIMITED, ...alsoLimited])
  app.addHook('onRequest', async (req) => {
    if (!limited.has(req.routeOptions.url ?? '')) return
    const result = await check(req)
    if (result.isAllowed || !result.isExceeded) return
    const retryAfter = String(Math.max(1, result.ttlInSeconds))
    throw new GatewayError('rate_limited', `too many sign-in requests from this address; retry in ${retryAfter} s`, {
      headers: { 'retry-after': retryAfter },
    })
  })
}
