// Schema validation with ajv, and the translation of ajv's errors into `key.path: message`.

import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { FORMATS } from './formats.js'
import type { Issue, Path, PathSegment } from './path.js'
import { formatPath } from './path.js'
import { gatewaySchema, PATTERN_MESSAGES } from '../options/schema.js'
import type { ConfigFile } from '../options/types.js'

export type SchemaResult = { ok: true; config: ConfigFile } | { ok: false; issues: Issue[] }

let validator: ValidateFunction<ConfigFile> | undefined

// Compiled on first use: most importers of the config module (types, masking) never validate.
function getValidator(): ValidateFunction<ConfigFile> {
  validator ??= compileValidator()
  return validator
}

function compileValidator(): ValidateFunction<ConfigFile> {
  // verbose: the failing value is needed to explain a format error (never to print it).
  const ajv = new Ajv({ allErrors: true, useDefaults: true, verbose: true, allowUnionTypes: true, strict: true })
  for (const [name, check] of Object.entries(FORMATS)) {
    ajv.addFormat(name, { type: 'string', validate: (value: string) => check(value) === undefined })
  }
  // The type parameter is a promise the schema keeps: ConfigFile has the schema's keys, each
  // optional unless required or defaulted, with the values it takes (test/options/types.test.ts
  // compares the two; test/config/validate.defaults.test.ts the defaults a minimal file gets).
  return ajv.compile<ConfigFile>(gatewaySchema)
}

/** Validates `data` against the schema, filling in defaults in place (also when it fails). */
export function validateSchema(data: unknown): SchemaResult {
  const validate = getValidator()
  if (validate(data)) return { ok: true, config: data }
  return { ok: false, issues: translateErrors(validate.errors ?? [], data) }
}

function translateErrors(errors: readonly ErrorObject[], data: unknown): Issue[] {
  return firstPerPath(errors.filter(isReportable).map((error) => translateError(error, data)))
}

// One message per key: the first, from the most basic rule (an empty host is "must not be
// empty", not also "must be a host name").
function firstPerPath(issues: readonly Issue[]): Issue[] {
  const seen = new Set<string>()
  return issues.filter((issue) => {
    const key = formatPath(issue.path)
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

// The per-item errors below `contains` and `propertyNames` only restate their parent's error.
function isReportable(error: ErrorObject): boolean {
  return !/\/(contains|propertyNames)\//.test(error.schemaPath)
}

function translateError(error: ErrorObject, data: unknown): Issue {
  const path = pointerToPath(error.instancePath, data)
  const params: Record<string, unknown> = error.params
  switch (error.keyword) {
    case 'required':
      return { path: [...path, String(params.missingProperty)], message: 'is required' }
    case 'additionalProperties':
      return { path: [...path, String(params.additionalProperty)], message: 'unknown key' }
    case 'propertyNames':
      return { path: [...path, String(params.propertyName)], message: 'must not be an empty name' }
    case 'uniqueItems': {
      const [first, later] = [Number(params.i), Number(params.j)].sort((a, b) => a - b)
      return { path: [...path, later ?? 0], message: `duplicate of ${formatPath([...path, first ?? 0])}` }
    }
    default:
      return { path, message: describe(error, params) }
  }
}

function describe(error: ErrorObject, params: Record<string, unknown>): string {
  switch (error.keyword) {
    case 'type':
      return params.type === 'boolean' ? 'must be true or false' : `must be ${typeNames(params.type)}`
    case 'enum':
      return `must be one of: ${asArray(params.allowedValues).map(String).join(', ')}`
    case 'const':
      return `must be ${String(params.allowedValue)}`
    case 'minimum':
    case 'maximum':
      return describeRange(error.parentSchema)
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : `must be at least ${String(params.limit)} characters long`
    case 'maxLength':
      return `must be at most ${String(params.limit)} characters long`
    case 'minItems':
    case 'minProperties':
      return params.limit === 1 ? 'must not be empty' : `must have at least ${String(params.limit)} entries`
    case 'pattern':
      return PATTERN_MESSAGES[String(params.pattern)] ?? 'has an invalid format'
    case 'format':
      return describeFormat(String(params.format), error.data)
    case 'contains':
      return `must include ${describeContains(error.schema)}`
    default:
      return error.message ?? 'is invalid'
  }
}

const TYPE_NAMES: Readonly<Record<string, string>> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean',
  array: 'a list',
  object: 'a mapping',
  null: 'empty',
}

function typeNames(types: unknown): string {
  const names = (Array.isArray(types) ? types : String(types).split(',')).map((type) => TYPE_NAMES[String(type)] ?? String(type))
  return names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names.at(-1) ?? ''}` : (names[0] ?? '')
}

function describeRange(schema: unknown): string {
  const minimum = isRecord(schema) && typeof schema.minimum === 'number' ? schema.minimum : undefined
  const maximum = isRecord(schema) && typeof schema.maximum === 'number' ? schema.maximum : undefined
  if (minimum !== undefined && maximum !== undefined) return `must be between ${minimum} and ${maximum}`
  return minimum !== undefined ? `must be at least ${minimum}` : `must be at most ${String(maximum)}`
}

function describeFormat(format: string, value: unknown): string {
  const check = FORMATS[format]
  const reason = check && typeof value === 'string' ? check(value) : undefined
  return reason ?? `must be a valid ${format}`
}

function describeContains(schema: unknown): string {
  return isRecord(schema) && 'const' in schema ? String(schema.const) : 'a matching entry'
}

// ajv reports JSON pointers, where `/1` may be an array index or a key named "1"; the data
// tells which, so that the path reads `upstreams[1]` but `claims["1"]`.
function pointerToPath(pointer: string, data: unknown): Path {
  const path: PathSegment[] = []
  let node = data
  for (const raw of pointer === '' ? [] : pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    if (Array.isArray(node)) {
      path.push(Number(key))
      node = node[Number(key)]
    } else {
      path.push(key)
      node = isRecord(node) ? node[key] : undefined
    }
  }
  return path
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : []
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
