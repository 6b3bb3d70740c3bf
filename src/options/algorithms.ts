// The JWS algorithms an operator may name (provider.idTokenAlgorithms): asymmetric only. `none`
// has no signature, and an HMAC algorithm would let anyone who knows the provider's public key
// (everyone) forge tokens by using that key as the HMAC secret (RFC 8725 3.1 and 3.2). The
// verifier's use of the list is oidc/algorithms.ts.

/** Every asymmetric JWS algorithm jose and openid-client verify, RS256 first. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const

export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number]
