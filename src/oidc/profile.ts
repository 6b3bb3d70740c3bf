// Security profiles a client can be held to. FAPI 2.0 Security Profile (final, 2025) section 5.3.2
// and 5.4: PAR, PKCE S256, sender-constrained tokens, `iss` in the authorization response (RFC
// 9207), private_key_jwt or mTLS, and only PS256, ES256 and EdDSA signatures.

import type { ProviderConfig } from '../options/types.js'

/** FAPI 2.0 5.4.1: the JWS algorithms allowed; Ed25519 is EdDSA's fully specified name (RFC 9864). */
export const FAPI2_ALGORITHMS: readonly string[] = ['PS256', 'ES256', 'EdDSA', 'Ed25519']

/** The JWS algorithms the profile permits, or `undefined` when it does not restrict them. */
export function profileAlgorithms(config: Pick<ProviderConfig, 'profile'>): readonly string[] | undefined {
  return config.profile === 'fapi2' ? FAPI2_ALGORITHMS : undefined
}
