// `${VAR}` / `${VAR:-default}` interpolation. It runs on the parsed YAML tree, never on the
// text, so an environment value is always one string scalar and cannot add keys or structure.

import type { Issue, Path } from './path.js'
import type { JsonSchema } from '../options/schema.js'

export type Env = Readonly<Record<string, string | undefined>>

export interface Expansion {
  value: unknown
  issues: Issue[]
}

export interface Substitution {
  text: string
  /** True when at least one reference was replaced: only such strings are coerced. */
  substituted: boolean
  missing: string[]
  malformed: boolean
}

// `$${` first, so an escaped reference is consumed before it could look like a reference.
const TOKEN = /\$\$\{|\$\{([^}]*)\}|\$\{/g
const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s

/** Replaces references in every string of `data`; `schema` guides the coercion of results. */
export function expandEnv(data: unknown, env: Env, schema: JsonSchema | undefined): Expansion {
  const issues: Issue[] = []
  const value = walk(data, schema, [], env, issues)
  return { value, issues }
}

function walk(node: unknown, schema: JsonSchema | undefined, path: Path, env: Env, issues: Issue[]): unknown {
  if (typeof node === 'string') return expandString(node, schema, path, env, issues)
  if (Array.isArray(node)) return node.map((item, i) => walk(item, schema?.items, [...path, i], env, issues))
  if (isRecord(node)) {
    // fromEntries, not assignment: a `__proto__` key must stay a plain (and unknown) key.
    return Object.fromEntries(
      Object.entries(node).map(([key, value]) => [key, walk(value, childSchema(schema, key), [...path, key], env, issues)]),
    )
  }
  return node
}

function expandString(text: string, schema: JsonSchema | undefined, path: Path, env: Env, issues: Issue[]): unknown {
  const result = substitute(text, env)
  for (const name of result.missing) issues.push({ path, message: `environment variable ${name} is not set` })
  if (result.malformed) {
    issues.push({ path, message: 'malformed variable reference: write ${NAME} or ${NAME:-default}, and $${ for a literal ${' })
  }
  if (result.missing.length > 0 || result.malformed) return text
  return result.substituted ? coerce(result.text, schema) : result.text
}

export function substitute(text: string, env: Env): Substitution {
  const missing: string[] = []
  let substituted = false
  let malformed = false
  const replaced = text.replace(TOKEN, (token: string, body: string | undefined) => {
    if (token === '$${') return '${'
    const reference = body === undefined ? null : REFERENCE.exec(body)
    if (!reference) {
      malformed = true
      return token
    }
    const [, name = '', fallback] = reference
    const value = lookup(env, name)
    substituted = true
    if (fallback !== undefined) return value === undefined || value === '' ? fallback : value
    if (value === undefined) missing.push(name)
    return value ?? ''
  })
  return { text: replaced, substituted, missing, malformed }
}

// Own properties only: with a plain object as env, `${constructor}` must not find Object's.
function lookup(env: Env, name: string): string | undefined {
  const value = Object.hasOwn(env, name) ? env[name] : undefined
  return typeof value === 'string' ? value : undefined
}

// Environment values are strings; where the schema wants an integer or a boolean, a string that
// spells one is converted. Anything else is left for the schema to reject.
// A key of two types (`resourceMetadata`: boolean or object) coerces to the scalar one it names.
function coerce(text: string, schema: JsonSchema | undefined): unknown {
  const types = schema?.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type]
  if (types.includes('integer') && /^[+-]?\d+$/.test(text) && Number.isSafeInteger(Number(text))) return Number(text)
  if (types.includes('boolean') && /^(true|false)$/i.test(text)) return text.toLowerCase() === 'true'
  return text
}

function childSchema(schema: JsonSchema | undefined, key: string): JsonSchema | undefined {
  if (schema?.properties && Object.hasOwn(schema.properties, key)) return schema.properties[key]
  return typeof schema?.additionalProperties === 'object' ? schema.additionalProperties : undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
