import { createHash } from 'node:crypto'
import { GatewayError } from '../contract/errors.js'
import type { Identity } from '../contract/identity.js'
import type { Clock } from '../lib/clock.js'
import { SingleFlight } from '../lib/single-flight.js'
import { TtlCache } from '../lib/ttl-cache.js'
import type { ExchangedToken } from '../oidc/client.js'
import type { Providers } from '../oidc/providers.js'
import type { UpstreamConfig } from '../options/types.js'
import { isHeaderSafeToken } from './header-policy.js'

// Token exchange per upstream (RFC 8693): an upstream with `tokenExchange` receives a token the
// provider issued for it (its audience, scope, resource: RFC 8693 2.1, RFC 8707 2), never the
// user's own. The user's access token is the subject token (subject_token_type access_token).
//
// - Cached under a SHA-256 digest of the provider, the upstream and the user's access token: a
//   hit needs the very token the access decision has just accepted (a session's, or a Bearer
//   token that verified), so an exchange is never reused for another token, and a refreshed
//   session (a new access token) exchanges afresh; the old entry is never asked for again and
//   expires. Logout drops the session's entries, back-channel logout every entry.
// - Kept until shortly before the exchanged token expires (RFC 8693 2.2.1 expires_in): 30 s
//   before, or half its lifetime when that is shorter, so an upstream never receives a token
//   about to expire; a provider that gives no expires_in has it reused for 60 s at most.
// - Bounded (TtlCache: the oldest entry goes first), and single flight per key: N concurrent
//   requests of one user to one upstream cause one exchange.
// - Refusals are not cached: each request asks again (a provider whose policy was fixed is
//   heard at once); concurrent ones share one answer.

/** Most exchanged tokens kept per configuration. */
export const EXCHANGE_CACHE_ENTRIES = 10_000
/** How long before its expiry an exchanged token stops being reused. */
const EXPIRY_MARGIN_MS = 30_000
/** How long a token without expires_in is reused. */
const UNKNOWN_LIFETIME_MS = 60_000

export interface TokenExchanger {
  /** The token to send `upstream` (which has tokenExchange) for `identity`. Throws GatewayError. */
  token(upstream: UpstreamConfig, identity: Identity): Promise<string>
  /** Drops the exchanges of an access token that has ended (logout). */
  forgetToken(provider: string, accessToken: string): void
  /** Drops every exchange (back-channel logout: the ended sessions' tokens are not known). */
  forget(): void
}

export interface TokenExchangeDeps {
  providers: Providers
  clock: Clock
  upstreams: readonly UpstreamConfig[]
  maxEntries?: number
}

function keyOf(provider: string, upstream: string, accessToken: string): string {
  return createHash('sha256').update(`${provider}\0${upstream}\0${accessToken}`).digest('base64url')
}

/** Until when (epoch ms) an exchanged token obtained at `nowMs` is reused. */
export function reuseUntil(exchanged: ExchangedToken, nowMs: number): number {
  if (exchanged.expiresAt === undefined) return nowMs + UNKNOWN_LIFETIME_MS
  const expiresMs = exchanged.expiresAt * 1000
  const lifetime = expiresMs - nowMs
  return expiresMs - Math.min(EXPIRY_MARGIN_MS, lifetime / 2)
}

export function createTokenExchanger(deps: TokenExchangeDeps): TokenExchanger {
  const { providers, clock } = deps
  const cache = new TtlCache<string>(deps.maxEntries ?? EXCHANGE_CACHE_ENTRIES, clock)
  const flight = new SingleFlight<string>()
  const exchanging = deps.upstreams.filter((u) => u.tokenExchange !== undefined).map((u) => u.name)

  async function exchange(key: string, upstream: UpstreamConfig, identity: Identity): Promise<string> {
    const provider = providers.get(identity.provider)
    // The access decision established the identity with a configured provider of this upstream.
    if (provider === undefined || upstream.tokenExchange === undefined)
      throw new GatewayError('provider_unavailable', 'the provider of this sign-in is not configured')
    const exchanged = await provider.client.exchangeToken(identity.accessToken, upstream.name, upstream.tokenExchange)
    // RFC 6749 A.12: anything else cannot be put in a header; the provider is broken.
    if (!isHeaderSafeToken(exchanged.accessToken))
      throw new GatewayError('provider_unavailable', 'the OpenID provider issued a token that cannot be sent in a header')
    const now = clock.now()
    cache.set(key, exchanged.accessToken, reuseUntil(exchanged, now))
    return exchanged.accessToken
  }

  return {
    token(upstream, identity) {
      const key = keyOf(identity.provider, upstream.name, identity.accessToken)
      const cached = cache.get(key)
      if (cached !== undefined) return Promise.resolve(cached)
      return flight.run(key, () => exchange(key, upstream, identity))
    },
    forgetToken(provider, accessToken) {
      for (const name of exchanging) cache.delete(keyOf(provider, name, accessToken))
    },
    forget() {
      cache.clear()
    },
  }
}
