// What an application receives from the gateway for one admitted request, computed in one place
// for every exit: the proxy (HTTP and WebSocket upgrades), forward-auth, and Envoy's checks over
// HTTP and gRPC. The answer is a set of headers to set and a set of request headers to remove, as
// Pomerium's evaluator returns the headers with its verdict and oauth2-proxy's proxy and auth-only
// endpoints share one headers chain:
// - the identity headers (header-policy.ts identityHeaderValues) under the upstream's names, or
//   under oauth2-proxy's X-Auth-Request-* for an ingress that copies them (forward-auth);
// - the access token as `Authorization: Bearer` (RFC 6750 2.1) when the upstream forwards it, only
//   when it is a valid header value (b64token, RFC 6750 2.1; header-policy.ts isHeaderSafeToken),
//   or the upstream's own token from an RFC 8693 exchange (token-exchange.ts), never the client's;
// - the legacy credentials of applications written for oauth2-proxy, each per upstream and off by
//   default, each only when it is a valid header value: the user as HTTP Basic (RFC 7617; its
//   `--pass-basic-auth`, `--set-basic-auth` in an answer), the session's ID token as
//   `Authorization: Bearer` (`--pass-authorization-header`, `--set-authorization-header`), and the
//   access token in X-Forwarded-Access-Token (`--pass-access-token`) and X-Auth-Request-Access-Token
//   (`--set-xauthrequest`'s answer header, which an edge copies): oauth2-proxy's legacy header
//   options (pkg/apis/options/legacy_options.go) name them so. One credential per upstream wants
//   `Authorization` (config/ refuses two);
// - a signed identity assertion (identity-assertion.ts) and a Transaction Token
//   (draft-ietf-oauth-transaction-tokens, transaction-token.ts) when the upstream asks for them;
// - the removals: every identity header name of the configuration (whichever upstream uses it, in
//   every spelling received, header-policy.ts identityHeadersToRemove), the client's Authorization
//   where the gateway owns it (any credential above that is written there; elsewhere the
//   client's Authorization passes unchanged, as it does through oauth2-proxy), the request-target overrides, and the gateway's cookies.
// The proxy strips the same names by pattern in one copying pass (`strippedNames`); a check exit
// names them for the edge, which removes exact names only (Envoy's headers_to_remove).

import { readFileSync } from 'node:fs'
import { mappedUser } from '../contract/claim-path.js'
import type { Identity } from '../contract/identity.js'
import { parsePrivateKey, signingKey } from '../keys/private-key.js'
import type { BasicAuthConfig, GatewayConfig, UpstreamConfig } from '../options/types.js'
import {
  AUTH_REQUEST_ACCESS_TOKEN,
  AUTH_REQUEST_HEADERS,
  FORWARDED_ACCESS_TOKEN,
  basicCredentials,
  GATEWAY_ONLY_HEADERS,
  REQUEST_OVERRIDE_HEADER_NAMES,
  claimHeadersOf,
  identityHeaderUnion,
  identityHeaderValues,
  identityHeadersToRemove,
  isHeaderSafeToken,
  stripCookies,
  type ClaimHeader,
  type IdentityHeaderUnion,
} from './header-policy.js'
import { IdentityAssertions } from './identity-assertion.js'
import type { TokenExchanger } from './token-exchange.js'
import {
  TXN_TOKEN_HEADER,
  TransactionTokens,
  subjectQualified,
  transactionTokenPolicy,
  type TransactionTokenMinting,
  type TransactionTokenPolicy,
} from './transaction-token.js'

/**
 * Where an exit puts the identity: `upstream` on the upstream request under the upstream's names
 * (the proxy, and Envoy, which copies the answer's headers onto it); `auth-request` in an answer an
 * ingress copies from, under oauth2-proxy's X-Auth-Request-* names (forward-auth).
 */
export type CredentialShape = 'upstream' | 'auth-request'

/** The request credentials are written for: only what the gateway itself established. */
export interface CredentialRequest {
  method: string
  /** The normalized path the access decision admitted, without its query. */
  path: string
  /** The scheme the client used (a Transaction Token's rctx.transport). */
  transport: string
  /** The client's address as the X-Forwarded-For decision found it, asked only for a Transaction Token; unknown to Envoy's checks. */
  clientAddress?: () => string | undefined
}

/** Headers to set and request headers to remove, lower-case names. */
export interface UpstreamHeaders {
  readonly set: Array<[name: string, value: string]>
  readonly remove: readonly string[]
}

/** The assertion header and its signer, when keys are configured. */
export interface AssertionSigning {
  header: string
  signer: IdentityAssertions | undefined
}

export interface UpstreamCredentialsOptions {
  upstreams: readonly UpstreamConfig[]
  assertions: AssertionSigning
  transactionTokens: TransactionTokenMinting | undefined
  exchanger: TokenExchanger
  /** A cookie the upstream must not receive (a gateway cookie's name or a gateway seal as its value). */
  isGatewayCookie: (name: string, value: string) => boolean
}

/**
 * What one upstream receives, prepared once per configuration: its names parsed, its signer and
 * its Transaction Token policy looked up, so a request only reads them.
 */
export class UpstreamCredentialWriter {
  readonly upstream: UpstreamConfig
  /**
   * The request headers this upstream never receives from a client, by name or `prefix-*`: every
   * identity header of the configuration, the client's Authorization where the gateway owns it,
   * and what only the gateway sets (header-policy.ts GATEWAY_ONLY_HEADERS). The proxy strips them.
   */
  readonly strippedNames: readonly string[]
  readonly #claimHeaders: readonly ClaimHeader[]
  readonly #assertionHeader: string
  readonly #signer: IdentityAssertions | undefined
  readonly #txn: { minter: TransactionTokens; policy: TransactionTokenPolicy } | undefined
  readonly #exchanger: TokenExchanger | undefined
  readonly #union: IdentityHeaderUnion
  readonly #isGatewayCookie: (name: string, value: string) => boolean
  /** The gateway owns Authorization: the upstream gets the identity's token, its exchange, its ID token or its Basic credentials, never the client's. */
  readonly #ownsAuthorization: boolean
  /** forwardBasicAuth: which identity is the user-id, and the password read from its secret. */
  readonly #basic: { user: BasicAuthConfig['user']; password: string } | undefined

  constructor(upstream: UpstreamConfig, union: IdentityHeaderUnion, options: UpstreamCredentialsOptions) {
    this.upstream = upstream
    this.#union = union
    this.#isGatewayCookie = options.isGatewayCookie
    this.#claimHeaders = claimHeadersOf(upstream.claimHeaders)
    this.#assertionHeader = options.assertions.header.toLowerCase()
    // config/ requires the keys whenever an upstream asks for assertions or Transaction Tokens.
    this.#signer = upstream.identityAssertion ? options.assertions.signer : undefined
    const policy = options.transactionTokens?.policyOf(upstream.name)
    this.#txn = policy === undefined || options.transactionTokens === undefined ? undefined : { minter: options.transactionTokens.minter, policy }
    this.#exchanger = upstream.tokenExchange === undefined ? undefined : options.exchanger
    this.#basic =
      upstream.forwardBasicAuth === undefined ? undefined : { user: upstream.forwardBasicAuth.user, password: basicAuthPassword(upstream.forwardBasicAuth) }
    this.#ownsAuthorization = upstream.forwardAccessToken || this.#exchanger !== undefined || upstream.forwardIdToken || this.#basic !== undefined
    this.strippedNames = Object.freeze([...union.names, ...(this.#ownsAuthorization ? ['authorization'] : []), ...GATEWAY_ONLY_HEADERS])
  }

  /**
   * The headers set for `identity` (none for an anonymous pass): at once when nothing is to be
   * asked or signed (the identity headers, a forwarded token, a cached assertion), else a promise.
   * Throws (or rejects with) GatewayError when a token exchange is refused (403) or its provider
   * fails (502): nothing then reaches the upstream.
   */
  set(identity: Identity | null, request: CredentialRequest, shape: CredentialShape): Array<[string, string]> | Promise<Array<[string, string]>> {
    if (identity === null) return []
    const upstream = this.upstream
    const names = shape === 'upstream' ? upstream.identityHeaders : AUTH_REQUEST_HEADERS
    const set: Array<[string, string]> = []
    const values = identityHeaderValues(identity.claims, names, identity.issuer, identity.mapping, this.#claimHeaders)
    for (const name in values) set.push([name, values[name] as string])
    if (this.#exchanger === undefined && upstream.forwardAccessToken && isHeaderSafeToken(identity.accessToken)) {
      // An ingress copies the token from its own header (oauth2-proxy's `--set-xauthrequest`).
      set.push(shape === 'upstream' ? ['authorization', `Bearer ${identity.accessToken}`] : [AUTH_REQUEST_ACCESS_TOKEN, identity.accessToken])
    }
    // config/ refuses two credentials that want Authorization on one upstream: at most one is set.
    if (this.#basic !== undefined) {
      const userId = this.#basic.user === 'email' ? identity.claims.email : mappedUser(identity.claims, identity.mapping)
      const basic = basicCredentials(userId, this.#basic.password)
      if (basic !== undefined) set.push(['authorization', basic])
    }
    if (upstream.forwardIdToken && identity.idToken !== undefined && isHeaderSafeToken(identity.idToken))
      set.push(['authorization', `Bearer ${identity.idToken}`])
    if (upstream.forwardAccessTokenHeader && this.#exchanger === undefined && isHeaderSafeToken(identity.accessToken)) {
      // To the upstream under both names an application behind oauth2-proxy reads: its proxy's and
      // the one an edge copies from its answer. An answer carries the latter once.
      if (shape === 'upstream') set.push([FORWARDED_ACCESS_TOKEN, identity.accessToken], [AUTH_REQUEST_ACCESS_TOKEN, identity.accessToken])
      else if (!upstream.forwardAccessToken) set.push([AUTH_REQUEST_ACCESS_TOKEN, identity.accessToken])
    }
    const assertion = this.#signer?.cached(identity, upstream.name)
    if (assertion !== undefined) set.push([this.#assertionHeader, assertion])
    if (this.#exchanger === undefined && this.#txn === undefined && (this.#signer === undefined || assertion !== undefined)) return set
    return this.#signed(set, identity, request, shape, assertion === undefined)
  }

  /** The credentials that are asked for (an exchange) or signed (an assertion not cached, a Txn-Token), added to `set`. */
  async #signed(
    set: Array<[string, string]>,
    identity: Identity,
    request: CredentialRequest,
    shape: CredentialShape,
    sign: boolean,
  ): Promise<Array<[string, string]>> {
    const upstream = this.upstream
    if (this.#exchanger !== undefined) {
      // RFC 8693: the upstream's own token, never the user's.
      const token = await this.#exchanger.token(upstream, identity)
      set.push(['authorization', `Bearer ${token}`])
      if (shape === 'auth-request') set.push([AUTH_REQUEST_ACCESS_TOKEN, token])
    }
    if (sign && this.#signer !== undefined) set.push([this.#assertionHeader, await this.#signer.assertion(identity, upstream.name, this.#claimHeaders)])
    if (this.#txn !== undefined) {
      const { minter, policy } = this.#txn
      const { method, path, transport } = request
      set.push([TXN_TOKEN_HEADER, await minter.mint(policy, { identity, method, path, transport, clientAddress: request.clientAddress?.() })])
    }
    return set
  }

  /**
   * The headers set and the request headers an edge must remove, by exact name, for a request whose
   * headers were `received`: every identity header name the answer does not set (in each spelling
   * received), the client's Authorization where the gateway owns it, the request-target overrides
   * (the upstream must serve what was checked), and the gateway's cookies (a Cookie without them set
   * in its place, or removed when nothing is left).
   */
  async headers(
    identity: Identity | null,
    request: CredentialRequest,
    received: Readonly<Record<string, string | string[] | undefined>>,
  ): Promise<UpstreamHeaders> {
    const set = await this.set(identity, request, 'upstream')
    const setNames = new Set<string>()
    for (const [name] of set) setNames.add(name)
    const remove = identityHeadersToRemove(this.#union, received, setNames)
    if (this.#ownsAuthorization && !setNames.has('authorization')) remove.push('authorization')
    remove.push(...REQUEST_OVERRIDE_HEADER_NAMES)
    const cookie = this.cookie(received.cookie)
    if (cookie === null) remove.push('cookie')
    else if (cookie !== undefined) set.push(['cookie', cookie])
    return { set, remove }
  }

  /**
   * A Cookie header without the gateway's cookies: undefined when it needs no change, null when
   * nothing is left (the header goes).
   */
  cookie(header: string | string[] | undefined): string | null | undefined {
    if (typeof header !== 'string') return undefined
    const kept = stripCookies(header, this.#isGatewayCookie)
    return kept === undefined ? null : kept === header ? undefined : kept
  }
}

/** Each upstream's credential writer, and what the configuration publishes for them. */
export class UpstreamCredentials {
  /** Every identity header name of the configuration (assertion and Txn-Token headers among them). */
  readonly union: IdentityHeaderUnion
  /** The assertion signer, when keys are configured: its JWKS is published (ASSERTION_JWKS_PATH). */
  readonly signer: IdentityAssertions | undefined
  readonly #byUpstream: ReadonlyMap<UpstreamConfig, UpstreamCredentialWriter>

  constructor(options: UpstreamCredentialsOptions) {
    const { upstreams, assertions, transactionTokens } = options
    this.signer = assertions.signer
    // One application behind a public and a protected upstream reads its names on every route:
    // a name one upstream sets is an identity header on all of them.
    this.union = identityHeaderUnion(
      upstreams.map((upstream) => upstream.identityHeaders),
      assertions.header,
      upstreams.flatMap((upstream) => Object.keys(upstream.claimHeaders ?? {})),
      [
        ...(transactionTokens === undefined ? [] : [TXN_TOKEN_HEADER]),
        ...(upstreams.some((upstream) => upstream.forwardAccessTokenHeader) ? [FORWARDED_ACCESS_TOKEN] : []),
      ],
    )
    this.#byUpstream = new Map(upstreams.map((upstream) => [upstream, new UpstreamCredentialWriter(upstream, this.union, options)]))
  }

  /** The writer of `upstream`, one of this configuration's. */
  of(upstream: UpstreamConfig): UpstreamCredentialWriter {
    const writer = this.#byUpstream.get(upstream)
    if (writer === undefined) throw new Error(`the upstream ${upstream.name} is not one of this configuration's`)
    return writer
  }
}

/**
 * The password of forwardBasicAuth: the value the environment gave, or the content of its file
 * without one trailing line break (`echo secret > file`, a Secret written by hand). config/ has
 * checked that the file is readable; a file gone since throws, and the configuration is refused.
 */
export function basicAuthPassword(config: BasicAuthConfig): string {
  if (config.password !== undefined) return config.password
  if (config.passwordFile === undefined) throw new Error('forwardBasicAuth has neither password nor passwordFile')
  return readFileSync(config.passwordFile, 'utf8').replace(/\r?\n$/, '')
}

/** The signer of identity assertions, when keys are configured (config/ requires them when used). */
export async function assertionSigner(config: Pick<GatewayConfig, 'assertions' | 'server'>): Promise<IdentityAssertions | undefined> {
  const sources = config.assertions.signingKeys
  if (sources === undefined) return undefined
  const keys = await Promise.all(sources.map((source) => signingKey(parsePrivateKey(source))))
  return new IdentityAssertions({ keys, issuer: config.server.publicUrl, ttlSeconds: config.assertions.ttlSeconds })
}

/**
 * Transaction Tokens, when an upstream asks for them: signed with the assertions' keys, each
 * upstream's policy decided here, once. Undefined otherwise: nothing on the hot path asks.
 */
export function transactionTokenMinting(
  config: Pick<GatewayConfig, 'upstreams' | 'server'>,
  signer: IdentityAssertions | undefined,
): TransactionTokenMinting | undefined {
  if (signer === undefined || !config.upstreams.some((upstream) => upstream.transactionTokens !== undefined)) return undefined
  const qualified = subjectQualified(config.upstreams)
  const policies = new Map(
    config.upstreams.flatMap((upstream) => {
      const policy = transactionTokenPolicy(upstream, qualified)
      return policy === undefined ? [] : [[upstream.name, policy] as const]
    }),
  )
  return { minter: new TransactionTokens({ keys: signer.keys, issuer: config.server.publicUrl }), policyOf: (name) => policies.get(name) }
}
