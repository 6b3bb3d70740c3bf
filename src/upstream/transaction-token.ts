// Transaction Tokens for the services behind the gateway (draft-ietf-oauth-transaction-tokens-10,
// "Txn-Tokens"): a short-lived JWT, signed with the key of the identity assertions (published at
// /.well-known/jwks.json), stating who called and in what context, sent in the `Txn-Token` header
// (section 12.1) so that every workload of the call chain can verify it on its own (section 12.2:
// signature, `aud` = its trust domain, not expired).
//
// The gateway is the Txn-Token Service at the edge, minting locally from the identity it verified
// (a session or a Bearer token): section 5.1 lets the external endpoint obtain the token "through
// a local interface"; only a TTS reached over HTTP must speak the RFC 8693 profile of section 11,
// which the gateway does not serve. The issuance rules of section 11.3 that apply are kept: the
// subject's credential was verified first (the access decision), `iat` is the time of issuance,
// `aud` the trust domain, `txn` unique to the transaction, and no access token is ever put in the
// token (section 13.4).
//
// One token per transaction: `txn` is a fresh UUID for every request (section 9.2; RFC 8417 2.2's
// `txn`), so a token is signed per request and never cached: a cached one would give two
// transactions one `txn` and defeat the replay detection of section 13.2. Only upstreams that ask
// for Txn-Tokens pay for it (docs/features/transaction-tokens.md measures it).

import { randomUUID } from 'node:crypto'
import * as jose from 'jose'
import type { Identity } from '../contract/identity.js'
import type { SigningKey } from '../keys/private-key.js'
import type { TransactionTokensConfig } from '../options/types.js'

/** The `Txn-Token` HTTP header (section 12.1), lowercase as Node and Envoy carry header names. */
export const TXN_TOKEN_HEADER = 'txn-token'

/** The JOSE `typ` of a Txn-Token (section 9.1), checked by verifiers to tell it from other JWTs. */
export const TXN_TOKEN_TYP = 'txntoken+jwt'

export interface TransactionTokenOptions {
  /** The first signs (the identity assertions' keys, `assertions.signingKeys`). */
  keys: readonly SigningKey[]
  /** `iss` (optional in section 9.2, set so that a verifier knows whose JWKS to read): `server.publicUrl`. */
  issuer: string
}

/** What one upstream's tokens say, decided once per configuration (transactionTokenPolicy). */
export interface TransactionTokenPolicy {
  /** The upstream's name, in `tctx.upstream`. */
  upstream: string
  /** `aud` (section 9.2): the trust domain. */
  trustDomain: string
  /** `scope` (section 9.2.1), space-joined. */
  scope: string
  ttlSeconds: number
  /**
   * Whether `sub` is qualified by the provider's issuer (`<issuer>#<sub>`): section 9.2 wants
   * `sub` unique within the trust domain, and a provider's `sub` is unique only within its issuer
   * (OpenID Connect Core 2); so it is qualified as soon as the trust domain is fed by more than
   * one provider (subjectQualified).
   */
  qualifySubject: boolean
}

/** The request a token is minted for: only what the gateway itself established. */
export interface TransactionContext {
  identity: Identity
  method: string
  /** The normalized path the access decision admitted, without its query. */
  path: string
  /** The scheme the client used (rctx.transport). */
  transport: string
  /** The client's address, as the X-Forwarded-For decision found it; unknown in Envoy's checks. */
  clientAddress?: string | undefined
}

/**
 * Whether the trust domain of each upstream is fed by more than one provider: then a bare `sub`
 * could name two people in one trust domain. `upstreams` carry their resolved providers.
 */
export function subjectQualified(
  upstreams: ReadonlyArray<{ providers: readonly string[]; transactionTokens?: TransactionTokensConfig | undefined }>,
): (trustDomain: string) => boolean {
  const providersOf = new Map<string, Set<string>>()
  for (const upstream of upstreams) {
    const domain = upstream.transactionTokens?.trustDomain
    if (domain === undefined) continue
    const set = providersOf.get(domain) ?? new Set<string>()
    for (const name of upstream.providers) set.add(name)
    providersOf.set(domain, set)
  }
  return (trustDomain) => (providersOf.get(trustDomain)?.size ?? 0) > 1
}

/** The policy of an upstream with `transactionTokens`, else undefined: no work for the others. */
export function transactionTokenPolicy(
  upstream: { name: string; transactionTokens?: TransactionTokensConfig | undefined },
  qualified: (trustDomain: string) => boolean,
): TransactionTokenPolicy | undefined {
  const config = upstream.transactionTokens
  if (config === undefined) return undefined
  return {
    upstream: upstream.name,
    trustDomain: config.trustDomain,
    scope: config.scope.join(' '),
    ttlSeconds: config.ttlSeconds,
    qualifySubject: qualified(config.trustDomain),
  }
}

/** The subject of a Txn-Token: the provider's `sub`, qualified by its issuer when the policy says so (an issuer has no fragment, so `#` splits it). */
export function transactionSubject(identity: Identity, qualify: boolean): string {
  return qualify ? `${identity.issuer}#${identity.claims.sub}` : identity.claims.sub
}

/** The minter and each upstream's policy: what the proxy and the checks are given when an upstream asks for Txn-Tokens. */
export interface TransactionTokenMinting {
  minter: TransactionTokens
  policyOf: (upstreamName: string) => TransactionTokenPolicy | undefined
}

export class TransactionTokens {
  readonly #key: SigningKey
  readonly #issuer: string
  /** `req_wl` (section 9.2, REQUIRED): the workload that requested the token, the gateway by its public host. */
  readonly #requestingWorkload: string

  constructor(options: TransactionTokenOptions) {
    const [key] = options.keys
    if (key === undefined) throw new TypeError('transaction tokens need a signing key')
    this.#key = key
    this.#issuer = options.issuer
    this.#requestingWorkload = new URL(options.issuer).host
  }

  /** The claims of a fresh Txn-Token for `context` under `policy`, issued at `now` (epoch seconds). */
  claims(policy: TransactionTokenPolicy, context: TransactionContext, now: number): jose.JWTPayload {
    const { identity } = context
    // rctx (section 9.2.2): the environment of the request as the gateway saw it.
    const rctx: Record<string, unknown> = { transport: context.transport }
    if (context.clientAddress !== undefined && context.clientAddress !== '') rctx.req_ip = context.clientAddress
    // RFC 8176 authentication method references, as the draft's own `authn` example.
    if (identity.claims.amr !== undefined) rctx.authn = identity.claims.amr
    return {
      iss: this.#issuer,
      iat: now,
      exp: now + policy.ttlSeconds,
      aud: policy.trustDomain,
      txn: randomUUID(),
      sub: transactionSubject(identity, policy.qualifySubject),
      scope: policy.scope,
      req_wl: this.#requestingWorkload,
      rctx,
      // tctx (section 9.2.3): what the gateway authorized, immutable along the call chain.
      tctx: { upstream: policy.upstream, method: context.method, path: context.path, idp: identity.issuer },
    }
  }

  /** A signed Txn-Token for `context`: a new one every call (one `txn` per transaction). */
  mint(policy: TransactionTokenPolicy, context: TransactionContext): Promise<string> {
    const key = this.#key
    const payload = this.claims(policy, context, Math.floor(Date.now() / 1000))
    return new jose.SignJWT(payload).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: TXN_TOKEN_TYP }).sign(key.key)
  }
}
