// How the gateway authenticates to the provider's token, PAR, introspection and revocation
// endpoints: a shared secret (RFC 6749 2.3.1), or a JWT signed with its own key (private_key_jwt,
// OpenID Connect Core 9 and RFC 7523), whose algorithm is agreed with the provider's metadata and
// whose audience is the issuer, or the token endpoint for a provider that wants it.

import type * as jose from 'jose'
import * as oidc from 'openid-client'
import type { ProviderConfig } from '../options/types.js'
import { algorithmsOf, parsePrivateKey, signingKey, type SigningAlgorithm } from '../keys/private-key.js'
import { ProviderMetadataError } from './errors.js'

/**
 * The algorithm to sign client assertions with: the first the key allows (PS256 before RS256)
 * among those the provider lists in `token_endpoint_auth_signing_alg_values_supported` and
 * `allowed` (a profile's list) permits. A provider that lists none is sent RS256 for an RSA key,
 * the one algorithm every OpenID provider must accept (Discovery 3), else the key's own.
 */
export function clientAssertionAlgorithm(
  keyAlgorithms: readonly SigningAlgorithm[],
  advertised: unknown,
  allowed?: readonly string[],
): SigningAlgorithm | undefined {
  const permitted = keyAlgorithms.filter((alg) => allowed === undefined || allowed.includes(alg))
  // A profile's list never has RS256, so `permitted` has already dropped it there.
  if (!Array.isArray(advertised) || advertised.length === 0) return permitted.includes('RS256') ? 'RS256' : permitted[0]
  return permitted.find((alg) => advertised.includes(alg))
}

/**
 * The public JWKS to register at the provider for private_key_jwt (`openid-gateway jwks`). No
 * `alg` unless the key pins one: the algorithm is agreed with the provider at discovery.
 */
export async function clientJwks(config: ProviderConfig): Promise<{ keys: jose.JWK[] } | undefined> {
  if (config.clientKey === undefined) return undefined
  const parsed = parsePrivateKey(config.clientKey)
  const { alg, ...jwk } = (await signingKey(parsed, { kid: config.clientKeyId })).publicJwk
  return { keys: [parsed.alg === undefined ? jwk : { ...jwk, alg }] }
}

/** RFC 3986 2.3's unreserved characters: ALPHA / DIGIT / "-" / "." / "_" / "~". */
const UNRESERVED = /^[A-Za-z0-9\-._~]*$/

/**
 * A client id or secret form-urlencoded for Basic (RFC 6749 2.3.1 and Appendix B): UTF-8, a space
 * as "+", every other character but the unreserved ones as %HH. openid-client also encodes the
 * unreserved "-", ".", "_" and "~"; RFC 3986 2.3 says a producer should not, since they mean the
 * same encoded or not, so any provider that decodes (as 2.3.1 requires) reads the same value, and
 * one that does not (Glewlwyd 2.7) reads a secret of unreserved characters right too.
 */
export function basicEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]|%20/g, (c) => (c === '%20' ? '+' : `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
}

/**
 * Which of the client id and secret `client_secret_basic` sends as another text than configured
 * (basicEncode): those with a character outside RFC 3986 2.3's unreserved set. A provider that
 * decodes them reads the same value; one that does not (Glewlwyd 2.7) compares the encoded text
 * and answers invalid_client, which only `client_secret_post` avoids. A value of unreserved
 * characters only is sent as it is: its encoding can never be why a provider refuses it.
 */
export function basicEncodingChanges(config: Pick<ProviderConfig, 'clientId' | 'clientSecret'>): Array<'clientId' | 'clientSecret'> {
  const changed = (value: string | undefined): boolean => value !== undefined && !UNRESERVED.test(value)
  return [...(changed(config.clientId) ? (['clientId'] as const) : []), ...(changed(config.clientSecret) ? (['clientSecret'] as const) : [])]
}

/** client_secret_basic (RFC 6749 2.3.1; RFC 7617 2): the id and secret, each basicEncode'd, joined by ":", in base64. */
function clientSecretBasic(clientSecret: string | undefined): oidc.ClientAuth {
  if (clientSecret === undefined) throw new ProviderMetadataError('provider.clientSecret is required by client_secret_basic')
  return (_server, client, _body, headers) => {
    headers.set('authorization', `Basic ${Buffer.from(`${basicEncode(client.client_id)}:${basicEncode(clientSecret)}`).toString('base64')}`)
  }
}

/**
 * The `aud` of the client assertions when it is not openid-client's own, the issuer identifier
 * (RFC 9126 2, FAPI 2.0): the token endpoint URL, which OpenID Connect Core 9 says the audience
 * SHOULD be and the only value Ory Hydra 2.3 accepts (fosite's client_authentication.go).
 */
export function assertionAudience(audience: ProviderConfig['clientAssertionAudience'], server: oidc.ServerMetadata): string | undefined {
  if (audience !== 'token_endpoint') return undefined
  if (server.token_endpoint === undefined)
    throw new ProviderMetadataError('provider.clientAssertionAudience is token_endpoint, but the provider has no token_endpoint')
  return server.token_endpoint
}

type ClientAuthConfig = Pick<ProviderConfig, 'clientAuthMethod' | 'clientSecret' | 'clientKey' | 'clientKeyId' | 'clientAssertionAudience'>

/** The openid-client authentication of `config`'s method, for a provider described by `server`. */
export async function clientAuthentication(config: ClientAuthConfig, server: oidc.ServerMetadata, allowed?: readonly string[]): Promise<oidc.ClientAuth> {
  switch (config.clientAuthMethod) {
    case 'client_secret_post':
      return oidc.ClientSecretPost(config.clientSecret)
    case 'client_secret_basic':
      return clientSecretBasic(config.clientSecret)
    case 'private_key_jwt': {
      // config/cross-key-rules.ts makes provider.clientKey required with private_key_jwt.
      if (config.clientKey === undefined) throw new ProviderMetadataError('provider.clientKey is required by private_key_jwt')
      const parsed = parsePrivateKey(config.clientKey)
      const advertised = server.token_endpoint_auth_signing_alg_values_supported
      const alg = clientAssertionAlgorithm(algorithmsOf(parsed), advertised, allowed)
      if (alg === undefined) {
        throw new ProviderMetadataError(
          `provider.clientKey cannot sign with any algorithm the provider accepts for private_key_jwt (token_endpoint_auth_signing_alg_values_supported: ${JSON.stringify(advertised)})${allowed === undefined ? '' : ` and the profile allows (${allowed.join(', ')})`}`,
        )
      }
      const key = await signingKey(parsed, { alg, kid: config.clientKeyId })
      const aud = assertionAudience(config.clientAssertionAudience, server)
      return oidc.PrivateKeyJwt(
        { key: key.key, kid: key.kid },
        aud === undefined ? undefined : { [oidc.modifyAssertion]: (_header, payload) => void (payload.aud = aud) },
      )
    }
  }
}
