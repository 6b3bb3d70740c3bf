import type { Session } from './types.js'

// A session is bound to the issuer that signed its user in. OpenID Connect Core 2: `sub` is
// unique only within its issuer (`iss`), so a session names a user only together with that
// issuer. Sessions name their provider, whose issuer a reload may change (`provider.issuer`
// re-pointed at another tenant, or a tenant cut off): the same `sub` at the new issuer is
// another person, or nobody. A session whose provider now names another issuer is therefore
// ended (the proxy, the check endpoints, refresh and logout, open WebSockets); its tokens are
// never sent to the new issuer (a refresh or a revocation would hand one party's credentials
// to another), and upstreams never receive the new issuer (X-Forwarded-Issuer, the assertion's
// `idp`) for the old issuer's `sub`.
//
// Sessions sealed before the issuer was recorded carry none. Signing every user out when the
// gateway is upgraded is avoided: such a session is taken to be of the issuer its provider had
// when this process started (with server.workers, when the primary did), which is the issuer it
// was signed in with unless the file was re-pointed while the gateway was down. It is accepted only while its provider still names
// that issuer (a reload that re-points the provider ends it), and it is stamped with it, so the
// next write of the session (a refresh) seals the issuer. Such sessions are gone at the latest
// session.maxAgeSeconds after the upgrade.

/** What a binding reads of a session. */
export type IssuerBound = Pick<Session, 'provider' | 'issuer'>

/**
 * `session` when it is a session of `configured` (its provider's issuer now), stamped with it
 * when it recorded none and `configured` is `atStart` (its provider's issuer when this process
 * started); undefined when it is not, and must be ended.
 */
export function sessionOfIssuer<S extends IssuerBound>(session: S, configured: string | undefined, atStart: string | undefined): S | undefined {
  if (configured === undefined) return undefined
  if (session.issuer !== undefined) return session.issuer === configured ? session : undefined
  return atStart === configured ? { ...session, issuer: configured } : undefined
}

/** The binding of one configuration: each provider's issuer now, and at the process's start. */
export type IssuerBinding = <S extends IssuerBound>(session: S) => S | undefined

export function issuerBinding(issuerOf: (provider: string) => string | undefined, startIssuerOf: (provider: string) => string | undefined): IssuerBinding {
  return (session) => sessionOfIssuer(session, issuerOf(session.provider), startIssuerOf(session.provider))
}
