import { GatewayError } from '../contract/errors.js'
import type { Providers } from '../oidc/providers.js'
import type { IssuerBinding } from './issuer-binding.js'
import type { RefreshGrant } from './lifecycle.js'

// The refresh grant the session lifecycle asks (lifecycle.ts RefreshGrant), on the client of the
// session's own provider (oidc/client.ts: RFC 6749 6, with the session's DPoP key). A refresh
// token is sent only to the issuer that issued it: a session whose provider is gone, or now names
// another issuer (issuer-binding.ts), ends instead (`refresh_token_invalid`), so that one party's
// credentials never reach another.

/** Counts each redemption by outcome: `ok`, or the problem code it failed with (ops/metrics.ts observeRefresh). */
export type RefreshOutcome = (code: string) => void

export function providerRefreshGrant(providers: Providers, bindIssuer: IssuerBinding, observe: RefreshOutcome): RefreshGrant {
  return async function refreshGrant(token, session) {
    try {
      const provider = providers.get(session.provider)
      if (provider === undefined) throw new GatewayError('refresh_token_invalid', 'the provider of this session is no longer configured')
      // Another issuer's refresh token is never sent to this one: the session ends instead.
      if (bindIssuer(session) === undefined) throw new GatewayError('refresh_token_invalid', "the session was signed in at another issuer than its provider's")
      const refreshed = await provider.client.refresh(token, session.claims.sub, session.dpopKey)
      // Claim sources are asked again at each refresh (oidc/claim-sources.ts); a failure fails the refresh (502).
      const tokens = provider.claimSources === undefined ? refreshed : await provider.claimSources.resolve(refreshed, session.claims)
      observe('ok')
      return tokens
    } catch (err) {
      observe(err instanceof GatewayError ? err.code : 'internal_error')
      throw err
    }
  }
}
