import * as jose from 'jose'
import type { ProviderConfig } from '../options/types.js'
import type { BearerVerifier } from './bearer.js'
import type { OidcClient } from './client.js'

// The configured providers (`provider:` or `providers:`), each with its client and its Bearer
// verifier. A name selects a provider at sign-in and in a session, an issuer selects it for a
// token that names one (a Bearer JWT, a logout token): the configuration makes both unique.

export interface Provider {
  readonly name: string
  readonly config: ProviderConfig
  readonly client: OidcClient
  readonly bearer: BearerVerifier
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
