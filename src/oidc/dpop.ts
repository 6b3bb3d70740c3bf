// DPoP (RFC 9449) for the gateway's own tokens: each sign-in gets its own key, kept sealed in the
// session, so a stolen access or refresh token is useless without it. openid-client builds the
// proofs; this module keeps the keys in a form a session can carry and the provider's nonces in
// one place for every session.

import * as jose from 'jose'
import * as oidc from 'openid-client'
import type { Clock } from '../lib/clock.js'
import { TtlCache } from '../lib/ttl-cache.js'

/** ES256: the algorithm every DPoP-capable provider accepts (oidc-provider's default list). */
export const DPOP_ALGORITHM = 'ES256'

/** A session's DPoP key: a private JWK (P-256), small enough to ride in a sealed cookie. */
export type DpopKey = jose.JWK

export function isDpopKey(value: unknown): value is DpopKey {
  if (typeof value !== 'object' || value === null) return false
  const { kty, crv, x, y, d } = value as Record<string, unknown>
  return kty === 'EC' && crv === 'P-256' && [x, y, d].every((member) => typeof member === 'string')
}

export async function generateDpopKey(): Promise<DpopKey> {
  const { privateKey } = await jose.generateKeyPair(DPOP_ALGORITHM, { extractable: true })
  const { kty, crv, x, y, d } = await jose.exportJWK(privateKey)
  return { kty, crv, x, y, d }
}

/** RFC 9449 10: the `dpop_jkt` authorization parameter binding the code to the key. */
export function dpopThumbprint(key: DpopKey): Promise<string> {
  const { kty, crv, x, y } = key
  return jose.calculateJwkThumbprint({ kty, crv, x, y }, 'sha256')
}

/** Nonces served are kept at most this long; a stale one costs one retry. */
const NONCE_TTL_MS = 5 * 60_000

/**
 * The last `DPoP-Nonce` (RFC 9449 8) each provider origin served. openid-client keeps nonces per
 * handle, and a handle lives for one grant: without this, every grant would be refused once
 * (use_dpop_nonce) before it is retried with the nonce.
 */
export class DpopNonces {
  readonly #nonces: TtlCache<string>
  readonly #clock: Clock

  constructor(clock: Clock) {
    this.#clock = clock
    this.#nonces = new TtlCache(64, clock)
  }

  /** Notes the nonce a provider response carries. */
  observe(url: string, response: Response): void {
    const nonce = response.headers.get('dpop-nonce')
    if (nonce !== null && nonce !== '') this.#nonces.set(new URL(url).origin, nonce, this.#clock.now() + NONCE_TTL_MS)
  }

  /** A DPoP handle of `key` for `configuration`, whose proofs carry the origin's latest nonce. */
  async handle(configuration: oidc.Configuration, key: DpopKey): Promise<oidc.DPoPHandle> {
    const { d: _private, ...publicJwk } = key
    const keyPair = {
      privateKey: (await jose.importJWK(key, DPOP_ALGORITHM)) as jose.CryptoKey,
      publicKey: (await jose.importJWK(publicJwk, DPOP_ALGORITHM, { extractable: true })) as jose.CryptoKey,
    }
    return oidc.getDPoPHandle(configuration, keyPair, {
      [oidc.modifyAssertion]: (_header, payload) => {
        if (payload.nonce === undefined && typeof payload.htu === 'string') {
          const nonce = this.#nonces.get(new URL(payload.htu).origin)
          if (nonce !== undefined) payload.nonce = nonce
        }
      },
    })
  }
}
