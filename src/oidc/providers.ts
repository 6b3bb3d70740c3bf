import * as jose from 'jose'
import type { Tracer } from '@opentelemetry/api'
import type { FastifyBaseLogger } from 'fastify'
import type { ProviderConfig, UpstreamConfig } from '../options/types.js'
import { callbackPath, isGatewayPath } from '../contract/endpoints.js'
import type { Clock } from '../lib/clock.js'
import { BearerVerifier } from './bearer.js'
import { OidcClient, TOKEN_EXCHANGE_GRANT, type ProviderCall, type Tokens } from './client.js'
import { ClaimSources, claimSourcesWanted } from './claim-sources.js'
import { GithubIdentity } from './github-api.js'
import type { SessionClaims } from '../contract/identity.js'
import { claimMappingOf, type ClaimMapping } from '../contract/claim-path.js'

// The configured providers (`provider:` or `providers:`), each with its client and its Bearer
// verifier. A name selects a provider at sign-in and in a session, an issuer selects it for a
// token that names one (a Bearer JWT, a logout token): the configuration makes both unique.

export interface Provider {
  readonly name: string
  readonly config: ProviderConfig
  readonly client: OidcClient
  readonly bearer: BearerVerifier
  /** Which of its claims are the user and the groups (userClaim, groupsClaim), parsed once: every upstream shares it. */
  readonly mapping: ClaimMapping
  /**
   * provider.claimSources (or, for GitHub, its REST API: github-api.ts); undefined when it asks
   * for nothing, so a sign-in or refresh does no more than the ID token's work.
   */
  readonly claimSources?: ClaimResolver
}

/** What completes a sign-in's or refresh's claims: ClaimSources, GithubIdentity. */
export interface ClaimResolver {
  resolve(tokens: Tokens, previous?: SessionClaims): Promise<Tokens>
}

export class Providers {
  /** In configuration order; never empty. */
  readonly all: readonly Provider[]
  readonly #byName: ReadonlyMap<string, Provider>
  readonly #byIssuer: ReadonlyMap<string, Provider>

  constructor(all: readonly Provider[]) {
    if (all.length === 0) throw new Error('at least one provider is required')
    this.all = all
    this.#byName = new Map(all.map((p) => [p.name, p]))
    this.#byIssuer = new Map(all.map((p) => [p.config.issuer, p]))
  }

  /** Starts every provider's discovery; resolves once every provider's metadata is loaded (each retries until then). */
  start(): Promise<void> {
    return Promise.all(this.all.map((p) => p.client.start())).then(() => undefined)
  }

  /** Stops every provider's discovery retries and key refreshes. */
  stop(): void {
    for (const provider of this.all) provider.client.stop()
  }

  /**
   * The callback paths outside the gateway's own (a provider's redirectPath, e.g. oauth2-proxy's
   * /oauth2/callback for a cutover that keeps the registered redirect URI): each, and every path
   * below it, is the gateway's as SIGN_IN_PATH is (never proxied, never checked).
   */
  get ownCallbackPaths(): string[] {
    return [...new Set(this.all.map((p) => p.client.callbackPath).filter((path) => !isGatewayPath(path)))]
  }

  /** The first configured: the default of upstreams that do not name theirs. */
  get first(): Provider {
    return this.all[0] as Provider
  }

  get(name: string): Provider | undefined {
    return this.#byName.get(name)
  }

  /** The providers `names` lists, in its order (names are checked against the configuration). */
  named(names: readonly string[]): Provider[] {
    return names.flatMap((name) => this.#byName.get(name) ?? [])
  }

  /**
   * The provider among `among` that verifies the JWT `token` (a Bearer token, a logout token):
   * the only one, which then says itself what is wrong with the token's `iss`, else the one its
   * `iss` names; `null` when the token names no issuer (not a JWT, or no `iss`), undefined when
   * it names one that is not among them.
   */
  verifierOf(token: string, among: readonly Provider[]): Provider | null | undefined {
    if (among.length === 1) return among[0]
    const issuer = unverifiedIssuer(token)
    if (issuer === undefined) return null
    const provider = this.#byIssuer.get(issuer)
    return provider !== undefined && among.includes(provider) ? provider : undefined
  }
}

/**
 * The `iss` claim of a JWT, read without verifying it: only to choose the provider whose keys
 * will then verify it (that provider's verifier checks `iss` again). `undefined` for anything
 * that is not a JWT with a string `iss`.
 */
function unverifiedIssuer(token: string): string | undefined {
  try {
    const { iss } = jose.decodeJwt(token)
    return typeof iss === 'string' ? iss : undefined
  } catch {
    return undefined
  }
}

/** Where the gateway serves a provider's sign-ins: settings of the configuration. */
export interface ProviderSite {
  publicUrl: string
  /** Whether the configuration has several providers: each then has a callback path of its own, and its log lines name it. */
  several: boolean
}

/** What a provider's client runs with, from the process: kept apart from the settings. */
export interface ProviderDeps {
  log: FastifyBaseLogger
  clock: Clock
  /** Told of every call to the provider (ops/metrics.ts observeProviderCall). */
  observeCall: (call: ProviderCall, seconds: number, failed: boolean) => void
  /** With telemetry.tracing: each call to the provider is a span. */
  tracer: Tracer | undefined
}

/** A provider's client and Bearer verifier. */
/** A configuration's providers (`provider:` or `providers:`), in its order; discovery waits for `start()`. */
export function createProviders(configs: readonly ProviderConfig[], publicUrl: string, deps: ProviderDeps): Providers {
  const site = { publicUrl, several: configs.length > 1 }
  return new Providers(configs.map((provider) => createProvider(provider, site, deps)))
}

export function createProvider(provider: ProviderConfig, site: ProviderSite, deps: ProviderDeps): Provider {
  const log = site.several ? deps.log.child({ provider: provider.name }) : deps.log
  const callback = callbackPath(provider.name, site.several, provider.redirectPath)
  const client: OidcClient = new OidcClient(
    provider,
    site.publicUrl,
    callback,
    log,
    deps.clock,
    (url, seconds, failed) => deps.observeCall(client.callOf(url), seconds, failed),
    deps.tracer,
  )
  const claimSources: ClaimResolver | undefined =
    provider.github !== undefined
      ? new GithubIdentity(provider.issuer, provider.github, provider.timeoutMs, log, deps.clock)
      : claimSourcesWanted(provider.claimSources)
        ? new ClaimSources({ ...provider, claimSources: provider.claimSources }, client, log, deps.clock)
        : undefined
  const bearer = new BearerVerifier({
    issuer: provider.issuer,
    clientId: provider.clientId,
    audiences: provider.audiences,
    algorithms: provider.bearer.algorithms,
    clockToleranceSeconds: provider.clockToleranceSeconds,
    getKey: client.keys.getKey,
    keyGeneration: () => client.keys.generation(),
    requireAtJwt: provider.bearer.requireAtJwt,
    ...(provider.bearer.introspection ? { introspect: (token: string) => client.introspect(token) } : {}),
    log,
    clock: deps.clock,
  })
  const mapping = claimMappingOf(provider)
  return { name: provider.name, config: provider, client, bearer, mapping, ...(claimSources === undefined ? {} : { claimSources }) }
}

/**
 * A provider whose grant_types_supported lacks the token exchange grant may still accept it (the
 * list is RECOMMENDED, RFC 8414 2, and several providers leave extension grants out): said once,
 * at warn, naming the upstreams; the exchange itself decides, and its refusal is a 403.
 */
export function warnUnadvertisedExchange(ready: Promise<void>, upstreams: readonly UpstreamConfig[], providers: Providers, log: FastifyBaseLogger): void {
  const exchanging = upstreams.filter((u) => u.tokenExchange !== undefined)
  if (exchanging.length === 0) return
  void ready.then(() => {
    for (const provider of providers.all) {
      const names = exchanging.filter((u) => u.providers.includes(provider.name)).map((u) => u.name)
      if (names.length > 0 && provider.client.advertisesGrant(TOKEN_EXCHANGE_GRANT) === false) {
        log.warn(
          { provider: provider.name, upstreams: names },
          'the provider does not list the token exchange grant in grant_types_supported: its exchanges for these upstreams may be refused (403 token_exchange_refused)',
        )
      }
    }
  })
}
