// JWS algorithms the gateway verifies with: asymmetric only. `none` has no signature, and an
// HMAC algorithm would let anyone who knows the provider's public key (everyone) forge tokens
// by using that key as the HMAC secret (RFC 8725 3.1 and 3.2).

/** Every asymmetric JWS algorithm jose and openid-client verify, RS256 first. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const

export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number]

export function isAsymmetric(alg: unknown): alg is AsymmetricAlgorithm {
  return typeof alg === 'string' && (ASYMMETRIC_ALGORITHMS as readonly string[]).includes(alg)
}

/**
 * The one algorithm ID tokens must be signed with, given the provider's
 * `id_token_signing_alg_values_supported`: RS256 when it is listed or nothing is listed (OpenID
 * Connect Discovery 3 makes RS256 mandatory to support and Registration 2 makes it the default of
 * `id_token_signed_response_alg`), else the first asymmetric algorithm listed. `undefined` when
 * the provider lists only algorithms the gateway refuses.
 */
export function idTokenSigningAlg(advertised: unknown): AsymmetricAlgorithm | undefined {
  if (!Array.isArray(advertised) || advertised.length === 0 || advertised.includes('RS256')) return 'RS256'
  return advertised.find(isAsymmetric)
}
