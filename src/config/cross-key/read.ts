// What every section of the cross-key rules shares: reading a key only when it is free of known
// problems, the type guards that give a read value its type, and finding duplicates. A rule runs
// whenever the keys it reads are themselves free of problems, whatever is wrong elsewhere, so one
// run reports as much as possible without building on a broken value.

import { isIP } from 'node:net'
import { type Issue, type Path, startsWith } from '../path.js'

/** Reads the value at `path` when it has the expected type and no known issue touches it. */
export type Read = <T>(path: Path, is: (value: unknown) => value is T) => T | undefined

/** A Read over `data` that skips every key `known` (the issues found so far) touches. */
export function reader(data: unknown, known: readonly Issue[]): Read {
  return (path, is) => {
    if (known.some((issue) => startsWith(issue.path, path) || startsWith(path, issue.path))) return undefined
    const value = valueAt(data, path)
    return is(value) ? value : undefined
  }
}

/** The value at `path`, whatever its problems; undefined where the file has nothing. */
export function valueAt(data: unknown, path: Path): unknown {
  let node = data
  for (const segment of path) {
    if (Array.isArray(node) && typeof segment === 'number') node = node[segment]
    else if (isRecord(node) && typeof segment === 'string' && Object.hasOwn(node, segment)) node = node[segment]
    else return undefined
  }
  return node
}

export type Keyed = readonly [index: number, key: string]

/** Each item whose key an earlier item already has, with the index of that earlier item. */
export function duplicates(items: readonly Keyed[]): Array<[index: number, first: number]> {
  const seen = new Map<string, number>()
  return items.flatMap(([index, key]): Array<[number, number]> => {
    const first = seen.get(key)
    if (first !== undefined) return [[index, first]]
    seen.set(key, index)
    return []
  })
}

/** A plain-http URL on a host that is not a loopback one: where browsers drop Secure cookies. */
export function isPlainHttpRemote(publicUrl: string): boolean {
  const url = new URL(publicUrl)
  if (url.protocol !== 'http:') return false
  const host = url.hostname
  // The URL parser writes every IPv4 spelling as dotted decimal, so 127/8 is read off the
  // address itself; a name such as 127.example.com is no loopback.
  const loopbackV4 = isIP(host) === 4 && host.startsWith('127.')
  return !(host === 'localhost' || host.endsWith('.localhost') || loopbackV4 || host === '[::1]')
}

/** The indexes of the upstreams whose `<flag>` is true. */
export function upstreamsWith(read: Read, upstreams: unknown, flag: string): number[] {
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index) => (read(['upstreams', index, flag], isBoolean) === true ? [index] : []))
}

// The type guards only give the values a type: a key without issues already passed the schema.
export function isNumber(value: unknown): value is number {
  return typeof value === 'number'
}

export function isString(value: unknown): value is string {
  return typeof value === 'string'
}

export function isBoolean(value: unknown): value is boolean {
  return typeof value === 'boolean'
}

export function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every(isString)
}

export function isStringRecord(value: unknown): value is Record<string, string> {
  return isRecord(value) && Object.values(value).every(isString)
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
