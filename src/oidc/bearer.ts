import * as jose from 'jose'
import type { SessionClaims } from '../session/types.js'

// Bearer JWT access tokens (RFC 9068 style) verified against the provider's JWKS. Verifying an
// RS256 signature costs about 100 µs, more than the whole proxy hop, so verified tokens are
// cached until they expire; the cache is bounded so a flood of distinct tokens cannot grow it.

/** Asymmetric algorithms only: `none` and HMAC (a public key used as an HMAC secret) never verify. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519']

const CACHE_ENTRIES = 10_000

export interface BearerOptions {
  issuer: string
  audiences: string[]
  clockToleranceSeconds: number
  timeoutMs: number
  /** The provider's JWKS URI once discovery has happened. */
  jwksUri: () => string | undefined
}

interface Verified {
  claims: SessionClaims
  exp: number
}

export class BearerVerifier {
  readonly #options: BearerOptions
  readonly #cache = new Map<string, Verified>()
  #jwks: ReturnType<typeof jose.createRemoteJWKSet> | undefined

  constructor(options: BearerOptions) {
    this.#options = options
  }

  /** The verified claims, or `undefined` for any token that does not verify. */
  async verify(token: string): Promise<SessionClaims | undefined> {
    const now = Date.now() / 1000
    const cached = this.#cache.get(token)
    if (cached !== undefined) {
      if (cached.exp > now) return cached.claims
      this.#cache.delete(token)
    }
    const jwks = this.#keySet()
    if (jwks === undefined) return undefined
    let payload: jose.JWTPayload
    try {
      ;({ payload } = await jose.jwtVerify(token, jwks, {
        issuer: this.#options.issuer,
        audience: this.#options.audiences,
        algorithms: ASYMMETRIC_ALGORITHMS,
        clockTolerance: this.#options.clockToleranceSeconds,
        requiredClaims: ['exp', 'sub'],
      }))
    } catch {
      return undefined
    }
    const claims = payload as SessionClaims
    if (this.#cache.size >= CACHE_ENTRIES) {
      // Maps iterate in insertion order: dropping the first entry evicts the oldest.
      const oldest = this.#cache.keys().next().value
      if (oldest !== undefined) this.#cache.delete(oldest)
    }
    this.#cache.set(token, { claims, exp: payload.exp as number })
    return claims
  }

  #keySet(): ReturnType<typeof jose.createRemoteJWKSet> | undefined {
    if (this.#jwks === undefined) {
      const uri = this.#options.jwksUri()
      if (uri === undefined) return undefined
      this.#jwks = jose.createRemoteJWKSet(new URL(uri), { timeoutDuration: this.#options.timeoutMs })
    }
    return this.#jwks
  }
}
