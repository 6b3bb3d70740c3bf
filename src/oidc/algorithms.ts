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
 * The algorithms ID tokens may be signed with. `pinned` (provider.idTokenAlgorithms, asymmetric by
 * the schema) when the operator gave them; else every asymmetric algorithm the provider lists in
 * `id_token_signing_alg_values_supported`, or RS256 when it lists nothing (OpenID Connect
 * Discovery 3 makes RS256 mandatory to support and Registration 2 makes it the default of
 * `id_token_signed_response_alg`). A provider decides per client which one it uses (one RSA key
 * serves RS256 and PS256 alike), so any of those it advertises is its own. Empty when the
 * provider lists only algorithms the gateway refuses.
 */
export function idTokenSigningAlgs(advertised: unknown, pinned?: readonly AsymmetricAlgorithm[]): AsymmetricAlgorithm[] {
  if (pinned !== undefined && pinned.length > 0) return [...pinned]
  if (!Array.isArray(advertised) || advertised.length === 0) return ['RS256']
  return [...new Set(advertised.filter(isAsymmetric))]
}
