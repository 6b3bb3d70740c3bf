import { asciiLower } from '../../lib/url-chars.js'
import type { CheckInput } from './types.js'

// Envoy's CheckRequest (envoy/service/auth/v3/external_auth.proto, attribute_context.proto) as
// the request the gateway decides on. What is checked comes from `attributes.request.http` only:
// method, host (:authority), path (the request target, query included, not decoded), scheme and
// headers, plus `context_extensions.upstream`, which Envoy's route configuration sets and a
// client cannot. Nothing else (source address, Envoy's metadata) changes the decision.
//
// Headers arrive in one of two forms (attribute_context.proto, HttpRequest.headers and
// header_map): a map with lower-cased names and values of one name merged, or, with the filter's
// encode_raw_headers, `header_map`, a list of key and raw_value with repeated names kept apart.
// Both become one map: names lower-cased (ASCII only, like everywhere in the gateway), repeated
// names joined as RFC 9113 section 8.2.3 (cookie, `; `) and RFC 9110 section 5.3 (`, `) say, and
// a name in header_map wins over the same name in the map (the same request, raw).
//
// The message is read as `unknown`: it comes off the network, and a field Envoy did not send is a
// default or null depending on the loader's options, never trusted to be there.

/** Why a CheckRequest cannot be checked: the detail of the 400 answered. */
export type CheckInputError = 'no HTTP request attributes' | 'no method, path or host'

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

/** Adds one value of `name` (joined to the ones before it); a header named __proto__ is a header, not a prototype. */
function add(into: Record<string, string>, name: string, value: string): void {
  const before = Object.hasOwn(into, name) ? into[name] : undefined
  const joined = before === undefined ? value : `${before}${name === 'cookie' ? '; ' : ', '}${value}`
  if (name === '__proto__') Object.defineProperty(into, name, { value: joined, enumerable: true, writable: true, configurable: true })
  else into[name] = joined
}

/** One map of the request's headers from `headers` and `header_map`. */
export function headersOf(http: Record<string, unknown>): Record<string, string> {
  const merged: Record<string, string> = {}
  const map = record(http.headers)
  if (map !== undefined) {
    for (const key in map) {
      if (key !== '' && Object.hasOwn(map, key)) add(merged, asciiLower(key), text(map[key]))
    }
  }
  const list = record(http.header_map)?.headers
  if (!Array.isArray(list) || list.length === 0) return merged
  const raw: Record<string, string> = {}
  for (const entry of list) {
    const header = record(entry)
    const key = header?.key
    if (header === undefined || typeof key !== 'string' || key === '') continue
    const bytes = header.raw_value
    // Envoy fills raw_value only; `value` is read when raw_value is empty, as another client might.
    const value =
      bytes instanceof Uint8Array && bytes.length > 0 ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8') : text(header.value)
    add(raw, asciiLower(key), value)
  }
  // A name in header_map replaces the map's: the same request, raw.
  for (const name of Object.keys(raw)) {
    if (Object.hasOwn(merged, name)) delete merged[name]
    add(merged, name, raw[name] as string)
  }
  return merged
}

/** The request to check, or why there is none. */
export function checkInputOf(request: unknown): CheckInput | CheckInputError {
  const attributes = record(record(request)?.attributes)
  const http = record(record(attributes?.request)?.http)
  if (http === undefined) return 'no HTTP request attributes'
  const method = text(http.method)
  const host = text(http.host)
  const path = text(http.path)
  if (method === '' || host === '' || path === '') return 'no method, path or host'
  const upstream = record(attributes?.context_extensions)?.upstream
  return {
    method,
    host,
    path,
    scheme: text(http.scheme),
    headers: headersOf(http),
    upstream: typeof upstream === 'string' ? upstream : undefined,
  }
}
