// The normalised form of an oauth2-proxy configuration, whatever it was written in: one option map,
// keyed by the option's flag name (`cookie-secret`), each value with where it was read. The three
// input forms oauth2-proxy reads (its TOML file, its command-line flags and OAUTH2_PROXY_*
// environment names, its alpha YAML; in oauth2-proxy/oauth2-proxy docs/docs/configuration/overview.md
// and the alpha configuration's reference next to it) each have a parser here that produces this map; mappings.ts turns it
// into the gateway's configuration.

/** How oauth2-proxy reads an option's value (the Go type of its field in pkg/apis/options). */
export type OptionKind = 'string' | 'bool' | 'list' | 'duration' | 'int'

/** An upstream of the alpha configuration (the alpha reference's "Upstream"), as the converter reads it. */
export interface AlphaUpstream {
  readonly id: string
  readonly path: string
  readonly uri?: string
  readonly rewriteTarget?: string
  readonly static?: boolean
  readonly passHostHeader?: boolean
  readonly proxyWebSockets?: boolean
  readonly timeout?: string
  readonly flushInterval?: string
  readonly insecureSkipTLSVerify?: boolean
  readonly disableKeepAlives?: boolean
  /** Where it was read, e.g. `<file> upstreamConfig.upstreams[0]`. */
  readonly from: string
}

/** One value of an injected header (the alpha reference's "HeaderValue"): a claim of the session, or a secret. */
export interface AlphaHeaderValue {
  readonly claim?: string
  readonly prefix?: string
  /** A value not from a claim (`value`, `fromEnv`, `fromFile`) or a Basic password: never copied. */
  readonly secret?: string
  readonly basicAuthPassword?: boolean
}

/** An injected request or response header (the alpha reference's "Header"). */
export interface AlphaHeader {
  readonly name: string
  readonly preserveRequestValue?: boolean
  readonly values: readonly AlphaHeaderValue[]
  readonly from: string
}

export type OptionValue = string | boolean | number | readonly string[] | readonly AlphaUpstream[] | readonly AlphaHeader[]

export interface ImportedOption {
  /** The flag name, e.g. `cookie-secret` (alpha-only settings: `alpha-…`). */
  readonly name: string
  readonly value: OptionValue
  /** Where it was read, as the user wrote it: `oauth2-proxy.cfg cookie_secret`, `--cookie-secret`, `OAUTH2_PROXY_COOKIE_SECRET`. */
  readonly from: string
}

export type OptionMap = Map<string, ImportedOption>

/** Exit code of a conversion that wrote nothing: an unreadable or malformed input, an unknown option, a contradiction. */
export const EXIT_IMPORT_FAILED = 2

/** A refusal of the input: nothing is written. The message names the file and the option. */
export class ImportError extends Error {}

export function isStringList(value: OptionValue): value is readonly string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string')
}
