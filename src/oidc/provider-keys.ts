import type { FastifyBaseLogger } from 'fastify'
import * as jose from 'jose'
import type { ExportedJWKSCache, JWKS } from 'openid-client'
import { describe } from './errors.js'
import type { CustomFetch } from 'openid-client'
import { ProviderFaultError, providerFetch } from './fetch.js'

// The provider's signing keys (its JWKS), one copy for the whole gateway: the Bearer verifier
// resolves keys here through jose, and every grant hands openid-client a copy of this set (see
// OidcClient), so ID tokens and Bearer JWTs follow the same refetch rules:
//
// - fetched at discovery, and again before use once older than MAX_AGE_MS;
// - a token whose key is not in the set (a new `kid` after a rotation: OpenID Connect Core 10.1
//   lets the provider publish a new key at any time) triggers one refetch, then one retry;
// - such refetches are rate-limited to one per unknownKeyRefetchMs, because the `kid` is chosen
//   by whoever sends the token: a flood of random kids costs the provider one request per
//   interval, not one per token. Concurrent lookups share one request;
// - each fetch whose keys differ from the set before starts a new generation. What was verified
//   with an earlier generation (the Bearer verifier's cache) is verified again before it is used,
//   so a key the provider withdrew (a compromised key, OpenID Connect Core 10.1.1) stops vouching
//   for tokens at the next refresh, not at their `exp`. Asking for the generation also starts the
//   age refresh in the background, so a gateway that only serves cached tokens still refreshes.
//
// openid-client alone would not do this: oauth4webapi refetches for an unknown key only when its
// copy is at least 60 s old, and keeps one copy per Configuration that cannot be cleared from
// outside (setJwksCache only seeds a Configuration that has no copy yet).

/** openid-client (oauth4webapi) also treats a JWKS older than five minutes as stale. */
export const MAX_AGE_MS = 5 * 60_000
/** jose's createRemoteJWKSet uses the same cooldown between refetches. */
export const UNKNOWN_KEY_REFETCH_MS = 30_000

export interface ProviderKeysOptions {
  timeoutMs: number
  log: Pick<FastifyBaseLogger, 'warn'>
  unknownKeyRefetchMs?: number
  /** How the JWKS is fetched (default providerFetch; the client passes its measured one). */
  fetch?: CustomFetch
  /** Milliseconds since the epoch; tests replace it. */
  now?: () => number
}

interface KeySet {
  jwks: JWKS
  select: ReturnType<typeof jose.createLocalJWKSet>
  fetchedAt: number
  /** The JWKS as served, to tell a changed set from the same one fetched again. */
  serialized: string
  generation: number
}

export class KeysNotLoadedError extends Error {
  override readonly name = 'KeysNotLoadedError'
}

/** What a key lookup may fail with because of the token, not the provider. */
function isKeySelectionError(err: unknown): boolean {
  return err instanceof jose.errors.JWKSNoMatchingKey || err instanceof jose.errors.JWKSMultipleMatchingKeys || err instanceof jose.errors.JOSENotSupported
}

function isJwks(value: unknown): value is JWKS {
  if (typeof value !== 'object' || value === null || !('keys' in value)) return false
  const { keys } = value
  return Array.isArray(keys) && keys.every((key: unknown) => typeof key === 'object' && key !== null && !Array.isArray(key))
}

export class ProviderKeys {
  readonly #timeoutMs: number
  readonly #log: Pick<FastifyBaseLogger, 'warn'>
  readonly #unknownKeyRefetchMs: number
  readonly #now: () => number
  readonly #fetchJwks: CustomFetch
  #uri: URL | undefined
  #set: KeySet | undefined
  #pending: Promise<KeySet> | undefined
  #lastAttempt = Number.NEGATIVE_INFINITY
  #lastUnknownKeyRefetch = Number.NEGATIVE_INFINITY

  constructor(options: ProviderKeysOptions) {
    this.#timeoutMs = options.timeoutMs
    this.#log = options.log
    this.#unknownKeyRefetchMs = options.unknownKeyRefetchMs ?? UNKNOWN_KEY_REFETCH_MS
    this.#now = options.now ?? Date.now
    this.#fetchJwks = options.fetch ?? providerFetch
  }

  /** The JWKS URI, once discovery has named it. */
  get uri(): string | undefined {
    return this.#uri?.href
  }

  get loaded(): boolean {
    return this.#set !== undefined
  }

  /** Fetches the key set from `uri` (the provider's jwks_uri); throws when it cannot. */
  async load(uri: URL): Promise<void> {
    this.#uri = uri
    await this.#refresh()
  }

  /**
   * The key for a JWS header, for jose's verify functions. Refetches once for a key that is not
   * in the set (rate-limited); throws jose's key-selection errors for a key that is still not
   * there, and the fetch error when the provider cannot be reached.
   */
  readonly getKey = async (header: jose.JWSHeaderParameters, token?: jose.FlattenedJWSInput): Promise<jose.CryptoKey> => {
    const set = await this.#current()
    try {
      return await set.select(header, token)
    } catch (err) {
      if (!(err instanceof jose.errors.JWKSNoMatchingKey)) throw err
      const fresh = await this.#refetchForUnknownKey()
      if (fresh === undefined) throw err
      return fresh.select(header, token)
    }
  }

  /**
   * Makes sure the key for `header` is in the set if the provider publishes it (the refetch
   * rules of getKey), without judging the token: a key that cannot be found is for the caller's
   * verifier to refuse. Throws only when the provider cannot be reached.
   */
  async prepare(header: jose.JWSHeaderParameters): Promise<void> {
    try {
      await this.getKey(header)
    } catch (err) {
      if (!isKeySelectionError(err)) throw err
    }
  }

  /**
   * The generation of the keys in use: it changes whenever a fetch brings a different set. Starts
   * the refresh of a set older than MAX_AGE_MS in the background (with getKey's retry rules), so
   * the answer is never delayed by the provider; the refreshed generation shows on a later call.
   */
  generation(): number {
    const set = this.#set
    if (set === undefined) return 0
    if (this.#now() - set.fetchedAt >= MAX_AGE_MS && this.#pending === undefined) {
      // #current logs a failed refresh itself and keeps the keys in use.
      this.#current().catch(() => undefined)
    }
    return set.generation
  }

  /** The current set in the form openid-client's setJwksCache takes; `undefined` before the first load. */
  exported(): ExportedJWKSCache | undefined {
    if (this.#set === undefined) return undefined
    // Stamped now, not with the fetch time: openid-client must take this set as it is and never
    // fetch on its own (its refetches would bypass the rate limit above).
    return { jwks: this.#set.jwks, uat: Math.floor(this.#now() / 1000) }
  }

  async #current(): Promise<KeySet> {
    const set = this.#set
    const now = this.#now()
    if (set === undefined) {
      // Never loaded (discovery is still retrying): no request per token meanwhile.
      if (this.#pending === undefined && now - this.#lastAttempt < this.#unknownKeyRefetchMs) {
        throw new KeysNotLoadedError('the provider keys are not loaded yet')
      }
      return this.#refresh()
    }
    if (now - set.fetchedAt < MAX_AGE_MS || this.#pending !== undefined) return set
    // A provider that cannot be reached is asked again at most once per refetch interval; until
    // then the keys it published last stay in use.
    if (now - this.#lastAttempt < this.#unknownKeyRefetchMs) return set
    try {
      return await this.#refresh()
    } catch (err) {
      this.#log.warn({ call: 'jwks', ...describe(err) }, 'JWKS refresh failed; keeping the keys fetched before')
      return set
    }
  }

  /** A fresh set, or `undefined` when a refetch for an unknown key is not allowed yet. */
  async #refetchForUnknownKey(): Promise<KeySet | undefined> {
    // Joining a fetch already under way costs nothing.
    if (this.#pending !== undefined) return this.#pending
    const now = this.#now()
    if (now - this.#lastUnknownKeyRefetch < this.#unknownKeyRefetchMs) return undefined
    this.#lastUnknownKeyRefetch = now
    return this.#refresh()
  }

  #refresh(): Promise<KeySet> {
    this.#pending ??= this.#fetch().finally(() => {
      this.#pending = undefined
    })
    return this.#pending
  }

  async #fetch(): Promise<KeySet> {
    const uri = this.#uri
    if (uri === undefined) throw new KeysNotLoadedError('the provider metadata (jwks_uri) is not loaded yet')
    this.#lastAttempt = this.#now()
    const res = await this.#fetchJwks(uri.href, {
      method: 'GET',
      headers: { accept: 'application/jwk-set+json, application/json' },
      redirect: 'manual',
      body: undefined,
      signal: AbortSignal.timeout(this.#timeoutMs),
    })
    if (res.status !== 200) {
      await res.body?.cancel()
      throw new ProviderFaultError(`${uri.pathname} answered HTTP ${res.status}`, { url: uri.href, status: res.status })
    }
    const jwks: unknown = await res.json()
    if (!isJwks(jwks)) throw new ProviderFaultError(`${uri.pathname} is not a JSON Web Key Set`, { url: uri.href })
    let select: KeySet['select']
    try {
      select = jose.createLocalJWKSet(jwks)
    } catch (cause) {
      throw new ProviderFaultError(`${uri.pathname} is not a JSON Web Key Set`, { url: uri.href, cause })
    }
    const serialized = JSON.stringify(jwks)
    const previous = this.#set
    const generation = previous === undefined ? 1 : previous.serialized === serialized ? previous.generation : previous.generation + 1
    const set: KeySet = { jwks, select, fetchedAt: this.#now(), serialized, generation }
    this.#set = set
    return set
  }
}
