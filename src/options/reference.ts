// The key reference of docs/configuration.md, rendered from the schema so that the schema stays
// the one source of every key, type, default and description: a key added to the schema appears
// in the docs (a test compares the two), and no default can be documented differently from the
// one ajv applies.
//
// The output is a GitHub-flavoured Markdown table. A `|` ends a cell even inside a code span
// there, so every one is escaped; a `<` outside a code span would start an HTML tag and swallow
// text such as <issuer>, so it is written as an entity. Descriptions may use Markdown (code
// spans, links): editors showing config/gateway.schema.json print them as they are. A link to a
// section is written `[text](#anchor)`, naming the section and not the page, so that moving a
// section between pages of docs/ changes no description; the caller says where each anchor lives.

import { type JsonSchema, type JsonValue, PATTERN_MESSAGES } from './schema.js'

/** A schema the reference cannot render faithfully (a new keyword or format to name). */
export class KeyReferenceError extends Error {
  override name = 'KeyReferenceError'
}

/**
 * What each custom `format` accepts, in the words of the Type column. config/formats.ts
 * implements them; a test keeps the two lists equal.
 */
export const FORMAT_TYPES: Readonly<Record<string, string>> = {
  'http-url': 'http(s) URL',
  'base-url': 'http(s) URL',
  'issuer-url': 'https URL',
  'http-origin': 'http(s) origin',
  'ip-or-cidr': 'IP address or CIDR',
  host: 'host[:port]',
  'allowed-host': 'host[:port] or .domain',
  'path-prefix': 'path',
  'redirect-path': 'path',
  'path-glob': 'path glob',
  'path-regex': 'anchored RE2 regex',
  'identity-header': 'header name',
  'cookie-secret': 'secret of 32 bytes or more',
  'cookie-domain': 'domain',
  'redis-url': 'redis:// or rediss:// URL',
  'host-port': 'host:port',
  'email-address': 'email address',
  'email-domain': 'domain or .domain',
  'listen-host': 'IP address or host name',
  'private-key': 'PEM or JWK text, or a file path',
  'resource-uri': 'absolute URI',
  'claim-path': 'claim path',
}

interface Row {
  keys: { path: string; required: boolean }[]
  schema: JsonSchema
}

/**
 * One row per key, in the schema's order, objects included (their description says what the
 * keys below share). A schema reached by two paths is one row naming both: the keys of
 * `provider` are also those of each `providers[]` entry.
 */
function rows(schema: JsonSchema): Row[] {
  const byNode = new Map<JsonSchema, Row>()
  const visit = (node: JsonSchema, prefix: string): void => {
    const required = new Set(node.required ?? [])
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      const path = `${prefix}${key}`
      const seen = byNode.get(child)
      if (seen === undefined) byNode.set(child, { keys: [{ path, required: required.has(key) }], schema: child })
      else seen.keys.push({ path, required: required.has(key) })
      if (child.properties !== undefined) visit(child, `${path}.`)
      if (child.items?.properties !== undefined) visit(child.items, `${path}[].`)
    }
  }
  visit(schema, '')
  return [...byNode.values()]
}

function code(value: JsonValue): string {
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``
}

/** `a`, `b` or `c` */
function choice(parts: string[]): string {
  return parts.length <= 1 ? (parts[0] ?? '') : `${parts.slice(0, -1).join(', ')} or ${parts.at(-1)}`
}

function range(schema: JsonSchema): string {
  const { minimum, maximum } = schema
  if (minimum !== undefined && maximum !== undefined) return ` ${minimum}–${maximum}`
  if (minimum !== undefined) return ` ≥ ${minimum}`
  if (maximum !== undefined) return ` ≤ ${maximum}`
  return ''
}

function stringType(schema: JsonSchema): string {
  if (schema.format !== undefined) {
    const name = FORMAT_TYPES[schema.format]
    if (name === undefined) throw new KeyReferenceError(`format ${schema.format} has no entry in FORMAT_TYPES`)
    return name
  }
  const length = schema.maxLength === undefined ? '' : `, at most ${schema.maxLength} characters`
  if (schema.pattern !== undefined) {
    const literal = /^\^([A-Za-z0-9_-]+)\$$/.exec(schema.pattern)?.[1]
    if (literal !== undefined) return code(literal)
    const message = PATTERN_MESSAGES[schema.pattern]
    if (message === undefined) throw new KeyReferenceError(`pattern ${schema.pattern} has no message to describe it`)
    return `string: ${message}${length}`
  }
  return `string${length}`
}

/** An array's item, named by its description where the type alone would say only "string". */
function itemType(schema: JsonSchema): string {
  if (schema.enum !== undefined || schema.format !== undefined || schema.type !== 'string' || schema.description === undefined) return typeOf(schema)
  return schema.description
}

function typeOf(schema: JsonSchema): string {
  if (schema.enum !== undefined) return choice(schema.enum.map(code))
  const types = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type]
  if (types.length === 0) throw new KeyReferenceError('a key without a type')
  return choice(
    types.map((type) => {
      switch (type) {
        case 'integer':
        case 'number':
          return `${type}${range(schema)}`
        case 'string':
          return types.length > 1 && schema.pattern === undefined ? 'string' : stringType(schema)
        case 'boolean':
          return 'boolean'
        case 'array': {
          if (schema.items === undefined) throw new KeyReferenceError('a list without items')
          const size = (schema.minItems ?? 0) > 0 ? 'non-empty list' : 'list'
          const items = schema.items.properties !== undefined ? 'objects' : itemType(schema.items)
          return `${size} of ${items}${schema.uniqueItems === true ? ', no duplicates' : ''}`
        }
        case 'object':
          if (typeof schema.additionalProperties === 'object') return `map of name → ${typeOf(schema.additionalProperties)}`
          return 'object'
      }
    }),
  )
}

function defaultOf(schema: JsonSchema): string {
  const value = schema.default
  if (value === undefined || schema.type === 'object') return ''
  if (Array.isArray(value)) return `\`[${value.map((item) => (typeof item === 'string' ? item : JSON.stringify(item))).join(', ')}]\``
  return code(value)
}

/** Makes text safe inside a table cell: see the top of the module. */
export function cell(text: string): string {
  return text
    .split('`')
    .map((part, i) => (i % 2 === 0 ? part.replace(/</g, '&lt;') : part))
    .join('`')
    .replace(/\|/g, '\\|')
    .replace(/\s*\n\s*/g, ' ')
}

function keyCell(keys: Row['keys']): string {
  return keys.map(({ path, required }) => (required ? `**\`${path}\`**` : `\`${path}\``)).join(', ')
}

/** Where a `#anchor` of a description leads, as a link target; the default keeps it as it is. */
export type SectionLink = (anchor: string) => string

/** Rewrites the targets of `[text](#anchor)` links; the rest of the text is left as it is. */
function linkSections(text: string, link: SectionLink): string {
  return text.replace(/\]\(#([^)\s]+)\)/g, (_, anchor: string) => `](${link(anchor)})`)
}

/** The Markdown table of every key the schema accepts: Key, Type, Default, Meaning. */
export function keyReference(schema: JsonSchema, link: SectionLink = (anchor) => `#${anchor}`): string {
  const lines = ['| Key | Type | Default | Meaning |', '|---|---|---|---|']
  for (const { keys, schema: node } of rows(schema)) {
    if ((node.description ?? '').trim() === '') throw new KeyReferenceError(`${keys[0]?.path ?? '?'} has no description`)
    if ((node.description ?? '').split('`').length % 2 === 0) throw new KeyReferenceError(`${keys[0]?.path ?? '?'}: unbalanced code span`)
    lines.push(`| ${[keyCell(keys), typeOf(node), defaultOf(node), linkSections(node.description ?? '', link)].map(cell).join(' | ')} |`)
  }
  return `${lines.join('\n')}\n`
}
