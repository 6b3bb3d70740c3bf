import * as jose from 'jose'
import type { ProviderConfig } from '../config/types.js'
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

  byIssuer(issuer: string): Provider | undefined {
    return this.#byIssuer.get(issuer)
  }
}

/**
 * The `iss` claim of a JWT, read without verifying it: only to choose the provider whose keys
 * will then verify it (that provider's verifier checks `iss` again). `undefined` for anything
 * that is not a JWT with a string `iss`.
 */
export function unverifiedIssuer(token: string): string | undefined {
  try {
    const { iss } = jose.decodeJwt(token)
    return typeof iss === 'string' ? iss : undefined
  } catch {
    return undefined
  }
}
