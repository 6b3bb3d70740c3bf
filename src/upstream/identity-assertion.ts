// Signed identity for upstreams (zero trust: an upstream need not trust the network between it
// and the gateway): a short-lived JWT of the signed-in identity, signed with the gateway's key and
// verifiable against the JWKS it publishes. Signed once per identity and upstream, then reused
// until half its lifetime is gone, so the hot path does not sign per request.

import * as jose from 'jose'
import type { Identity, SessionClaims } from '../contract/identity.js'
import { mappedGroups, mappedUser } from '../contract/claim-path.js'
import { claimHeaderValues, type ClaimHeader } from './header-policy.js'
import type { SigningKey } from '../keys/private-key.js'
import { plausibleAuthTime } from '../oidc/step-up.js'
import { MAX_CLOCK_TOLERANCE_SECONDS } from '../options/schema.js'

export interface AssertionOptions {
  /** The first signs; all are published (rotation: prepend the new key, drop the old later). */
  keys: readonly SigningKey[]
  /** `iss`: the gateway's public URL. */
  issuer: string
  ttlSeconds: number
}

interface Signed {
  jwt: string
  /** Epoch seconds after which a fresh assertion is signed (half the lifetime). */
  renewAt: number
}

export class IdentityAssertions {
  readonly #options: AssertionOptions
  readonly #jwks: { keys: jose.JWK[] }
  // Claims are deeply frozen, one object per session (or Bearer token): the cache dies with them.
  readonly #signed = new WeakMap<SessionClaims, Map<string, Signed>>()

  constructor(options: AssertionOptions) {
    if (options.keys.length === 0) throw new TypeError('identity assertions need a signing key')
    this.#options = options
    this.#jwks = { keys: options.keys.map((key) => key.publicJwk) }
  }

  /** The keys, the first signing: Transaction Tokens (transaction-token.ts) sign with the same. */
  get keys(): readonly SigningKey[] {
    return this.#options.keys
  }

  /** The public keys, for /.well-known/jwks.json. */
  get jwks(): { keys: jose.JWK[] } {
    return this.#jwks
  }

  /**
   * The assertion of `identity` (its claims, its provider's issuer and claim mapping) for the
   * upstream `audience`, whose extra identity headers are `claimHeaders`, from the cache while it
   * is fresh (a claims object belongs to one provider, an audience to one upstream, and both the
   * mapping and the extra headers are this configuration's, as this signer is).
   */
  async assertion(identity: Pick<Identity, 'claims' | 'issuer' | 'mapping'>, audience: string, claimHeaders: readonly ClaimHeader[] = []): Promise<string> {
    const cached = this.cached(identity, audience)
    if (cached !== undefined) return cached
    const now = Math.floor(Date.now() / 1000)
    const claims = identity.claims
    let perAudience = this.#signed.get(claims)
    const jwt = await this.#sign(identity, audience, claimHeaders, now)
    if (perAudience === undefined) {
      perAudience = new Map()
      this.#signed.set(claims, perAudience)
    }
    perAudience.set(audience, { jwt, renewAt: now + Math.floor(this.#options.ttlSeconds / 2) })
    return jwt
  }

  /** The assertion of `identity` for `audience` while the cache holds a fresh one: a lookup, no promise. */
  cached(identity: Pick<Identity, 'claims'>, audience: string): string | undefined {
    const cached = this.#signed.get(identity.claims)?.get(audience)
    return cached !== undefined && cached.renewAt > Math.floor(Date.now() / 1000) ? cached.jwt : undefined
  }

  #sign(identity: Pick<Identity, 'claims' | 'issuer' | 'mapping'>, audience: string, claimHeaders: readonly ClaimHeader[], now: number): Promise<string> {
    const [key] = this.#options.keys as [SigningKey]
    const { claims, mapping } = identity
    // `iss` is the gateway, which signs; the user's provider goes in `idp` (the claim Entra ID
    // gives the same meaning), since a `sub` is unique only within its issuer (OpenID Connect
    // Core 2) and two providers may name two people alike. `sub` stays the provider's subject
    // whatever the mapping (RFC 7519 4.1.2: the subject, stable; an email or a name may pass to
    // someone else): a mapped user goes in `user`, as the user header carries it.
    const payload: jose.JWTPayload = { sub: claims.sub, idp: identity.issuer }
    // acr, amr and auth_time: how and when the user authenticated, for an upstream's own step-up.
    for (const name of ['email', 'email_verified', 'groups', 'preferred_username', 'acr', 'amr'] as const) {
      if (claims[name] !== undefined) payload[name] = claims[name]
    }
    if (!mapping.isDefault) {
      const user = mappedUser(claims, mapping)
      if (user !== undefined) payload.user = user
      // The groups `allow.groups` decided on and the groups header carries: the mapped claim,
      // never the provider's own `groups` beside it.
      const groups = mappedGroups(claims, mapping)
      if (Array.isArray(groups) || typeof groups === 'string') payload.groups = groups
      else delete payload.groups
    }
    // The upstream's extra identity headers, as sent (lowercased name to value): an upstream that
    // verifies the assertion need not trust those headers either.
    if (claimHeaders.length > 0) {
      const headers = claimHeaderValues(claims, claimHeaders)
      if (Object.keys(headers).length > 0) payload.headers = headers
    }
    // As the identity header: an implausible auth_time (0, before 2000, in the future) is left out.
    const authTime = plausibleAuthTime(claims.auth_time, now, MAX_CLOCK_TOLERANCE_SECONDS)
    if (authTime !== undefined) payload.auth_time = authTime
    return new jose.SignJWT(payload)
      .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
      .setIssuer(this.#options.issuer)
      .setAudience(audience)
      .setIssuedAt(now)
      .setExpirationTime(now + this.#options.ttlSeconds)
      .sign(key.key)
  }
}
