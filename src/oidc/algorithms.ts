import { ASYMMETRIC_ALGORITHMS, type AsymmetricAlgorithm } from '../options/algorithms.js'

// JWS algorithms the gateway verifies with: asymmetric only (RFC 8725 3.1 and 3.2; the list and
// its rationale are options/algorithms.ts, since the operator may name a subset).

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
