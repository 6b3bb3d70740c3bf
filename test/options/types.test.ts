import { join } from 'node:path'
import t from 'tap'
import ts from 'typescript'
import { gatewaySchema, type JsonSchema, type JsonType } from '#src/options/schema'

// The configuration is written twice on purpose: src/options/schema.ts says what a file may hold
// (ajv applies its defaults and checks it), src/options/types.ts what the code reads, with its
// comments. config/validate.ts compiles the schema as `ajv.compile<ConfigFile>`: a promise that
// whatever passes the schema is a ConfigFile, which only holds while the two agree. This test
// reads ConfigFile as the compiler does (its TypeChecker, through every Omit, intersection and
// alias) and walks it beside the schema, key by key: the same keys; a key optional in the type
// exactly when the schema neither requires it nor gives it a default; the same kinds of value
// (string, number, boolean, list, mapping); the same values where the schema lists them (`enum`,
// or a pattern that is a list of words such as `^auto$`); the same item and entry types.

const ROOT = new URL('../../', import.meta.url).pathname
const TYPES = join(ROOT, 'src/options/types.ts')

function configFileType(): { checker: ts.TypeChecker; type: ts.Type } {
  const { config } = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (path) => ts.sys.readFile(path))
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT)
  const program = ts.createProgram([TYPES], { ...options, types: [] })
  const checker = program.getTypeChecker()
  const source = program.getSourceFile(TYPES)
  const module = source === undefined ? undefined : checker.getSymbolAtLocation(source)
  const symbol = module === undefined ? undefined : checker.getExportsOfModule(module).find((s) => s.name === 'ConfigFile')
  if (symbol === undefined) throw new Error('src/options/types.ts exports no ConfigFile')
  return { checker, type: checker.getDeclaredTypeOfSymbol(symbol) }
}

type Kind = 'string' | 'number' | 'boolean' | 'array' | 'object'

const KIND_OF_JSON_TYPE: Record<JsonType, Kind> = {
  string: 'string',
  integer: 'number',
  number: 'number',
  boolean: 'boolean',
  array: 'array',
  object: 'object',
}

/** The kinds of value the schema accepts at a key. */
function schemaKinds(schema: JsonSchema): Set<Kind> {
  const types = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type]
  return new Set(types.map((type) => KIND_OF_JSON_TYPE[type]))
}

/** The strings the schema lists for a string: its `enum`, or a pattern that is words and nothing else (`^auto$`, `^(a|b)$`). */
function schemaStrings(schema: JsonSchema): string[] | undefined {
  if (schema.enum !== undefined) return schema.enum.filter((value): value is string => typeof value === 'string')
  const words = schema.pattern === undefined ? undefined : /^\^\(?([A-Za-z0-9_-]+(?:\|[A-Za-z0-9_-]+)*)\)?\$$/.exec(schema.pattern)
  return words?.[1]?.split('|')
}

function compare(checker: ts.TypeChecker, schema: JsonSchema, type: ts.Type, at: string, problems: string[]): void {
  const members = (type.isUnion() ? type.types : [type]).filter((member) => (member.flags & ts.TypeFlags.Undefined) === 0)
  const byKind = new Map<Kind, ts.Type[]>()
  for (const member of members) {
    const kind = kindOf(checker, member)
    if (kind === undefined) {
      problems.push(`${at}: types.ts has ${checker.typeToString(member)}, which no JSON value is`)
      continue
    }
    byKind.set(kind, [...(byKind.get(kind) ?? []), member])
  }
  const expected = schemaKinds(schema)
  const actual = new Set(byKind.keys())
  if ([...expected].sort().join() !== [...actual].sort().join()) {
    problems.push(`${at}: the schema takes ${[...expected].sort().join(' or ')}, types.ts ${checker.typeToString(type)}`)
    return
  }
  for (const [kind, types] of byKind) {
    if (kind === 'string') compareStrings(checker, schema, types, at, problems)
    else if (kind === 'number' && types.some((member) => (member.flags & ts.TypeFlags.Number) === 0)) {
      problems.push(`${at}: the schema takes any number, types.ts ${types.map((member) => checker.typeToString(member)).join(' | ')}`)
    } else if (kind === 'array') compareArray(checker, schema, types, at, problems)
    else if (kind === 'object') compareObject(checker, schema, types, at, problems)
  }
}

function kindOf(checker: ts.TypeChecker, type: ts.Type): Kind | undefined {
  if ((type.flags & ts.TypeFlags.StringLike) !== 0) return 'string'
  if ((type.flags & ts.TypeFlags.NumberLike) !== 0) return 'number'
  if ((type.flags & ts.TypeFlags.BooleanLike) !== 0) return 'boolean'
  if (checker.isArrayType(type)) return 'array'
  if ((type.flags & (ts.TypeFlags.Object | ts.TypeFlags.Intersection)) !== 0) return 'object'
  return undefined
}

function compareStrings(checker: ts.TypeChecker, schema: JsonSchema, types: ts.Type[], at: string, problems: string[]): void {
  const listed = schemaStrings(schema)
  const literals = types.filter((member) => member.isStringLiteral()).map((member) => (member as ts.StringLiteralType).value)
  const written = types.map((member) => checker.typeToString(member)).join(' | ')
  if (listed === undefined) {
    if (literals.length > 0 || types.length !== 1) problems.push(`${at}: the schema takes any string, types.ts ${written}`)
    return
  }
  if (literals.length !== types.length || [...listed].sort().join('|') !== [...literals].sort().join('|')) {
    problems.push(`${at}: the schema takes ${listed.map((value) => `'${value}'`).join(' | ')}, types.ts ${written}`)
  }
}

function compareArray(checker: ts.TypeChecker, schema: JsonSchema, types: ts.Type[], at: string, problems: string[]): void {
  const [array] = types
  const item = array === undefined ? undefined : checker.getTypeArguments(array as ts.TypeReference)[0]
  if (types.length !== 1 || item === undefined || schema.items === undefined) {
    problems.push(`${at}: the schema's list and types.ts's (${types.map((member) => checker.typeToString(member)).join(' | ')}) are not one list each`)
    return
  }
  compare(checker, schema.items, item, `${at}[]`, problems)
}

function compareObject(checker: ts.TypeChecker, schema: JsonSchema, types: ts.Type[], at: string, problems: string[]): void {
  const [object] = types
  if (types.length !== 1 || object === undefined) {
    problems.push(`${at}: types.ts has several object types (${types.map((member) => checker.typeToString(member)).join(' | ')})`)
    return
  }
  const entries = checker.getIndexInfoOfType(object, ts.IndexKind.String)
  const additional = typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined
  if (additional !== undefined || entries !== undefined) {
    if (additional === undefined || entries === undefined) {
      problems.push(
        `${at}: ${additional === undefined ? 'types.ts has entries of any name, the schema none' : 'the schema has entries of any name, types.ts none'}`,
      )
    } else compare(checker, additional, entries.type, `${at}.*`, problems)
  }
  const properties = schema.properties ?? {}
  const typed = new Map(checker.getPropertiesOfType(object).map((property) => [property.name, property]))
  for (const name of Object.keys(properties)) if (!typed.has(name)) problems.push(`${at}.${name}: in the schema, not in types.ts`)
  for (const name of typed.keys()) if (!(name in properties)) problems.push(`${at}.${name}: in types.ts, not in the schema`)
  for (const [name, child] of Object.entries(properties)) {
    const property = typed.get(name)
    if (property === undefined) continue
    const optional = (property.flags & ts.SymbolFlags.Optional) !== 0
    const always = (schema.required ?? []).includes(name) || child.default !== undefined
    if (optional === always) {
      problems.push(
        `${at}.${name}: ${always ? 'required or defaulted by the schema, optional in types.ts' : 'optional in the schema (neither required nor defaulted), required in types.ts'}`,
      )
    }
    compare(checker, child, checker.getTypeOfSymbol(property), `${at}.${name}`, problems)
  }
}

t.test('ConfigFile (src/options/types.ts) is the type of what the schema (src/options/schema.ts) accepts', async (t) => {
  const { checker, type } = configFileType()
  const problems: string[] = []
  compare(checker, gatewaySchema, type, '(root)', problems)
  t.strictSame(problems, [], 'change schema.ts and types.ts together')
})

t.test('the comparison reads the type: every key of the schema is found, with its optionality', async (t) => {
  // A walk that read nothing would find no difference either: count what it compares.
  const { checker, type } = configFileType()
  let keys = 0
  let optional = 0
  const count = (schema: JsonSchema, type: ts.Type): void => {
    const object = (type.isUnion() ? type.types : [type]).find((member) => kindOf(checker, member) === 'object' && !checker.isArrayType(member))
    const array = (type.isUnion() ? type.types : [type]).find((member) => checker.isArrayType(member))
    if (array !== undefined && schema.items !== undefined) {
      const item = checker.getTypeArguments(array as ts.TypeReference)[0]
      if (item !== undefined) count(schema.items, item)
    }
    if (object === undefined) return
    for (const property of checker.getPropertiesOfType(object)) {
      const child = schema.properties?.[property.name]
      if (child === undefined) continue
      keys++
      if ((property.flags & ts.SymbolFlags.Optional) !== 0) optional++
      count(child, checker.getTypeOfSymbol(property))
    }
  }
  count(gatewaySchema, type)
  t.ok(keys > 150, `${keys} keys compared`)
  t.ok(optional > 20 && optional < keys, `${optional} of them optional`)
})

t.test('a difference is found and named', async (t) => {
  // The walk on schemas that differ from the real one in one place each: a key missing, an
  // optional key made required, a list of values that differs, a kind that differs.
  const { checker, type } = configFileType()
  const problems = (change: (schema: JsonSchema) => void): string[] => {
    const schema = structuredClone(gatewaySchema)
    change(schema)
    const found: string[] = []
    compare(checker, schema, type, '(root)', found)
    return found
  }
  const log = (schema: JsonSchema): JsonSchema => schema.properties?.log ?? {}
  t.strictSame(
    problems((schema) => delete log(schema).properties?.level),
    ['(root).log.level: in types.ts, not in the schema'],
  )
  t.strictSame(
    problems((schema) => {
      delete log(schema).properties?.level?.default
    }),
    ['(root).log.level: optional in the schema (neither required nor defaulted), required in types.ts'],
  )
  // The type is written as the compiler prints it, its members in the compiler's order.
  const values = problems((schema) => {
    const level = log(schema).properties?.level
    if (level !== undefined) level.enum = ['info', 'debug']
  })
  t.equal(values.length, 1)
  t.match(values[0], /^\(root\)\.log\.level: the schema takes 'info' \| 'debug', types\.ts (?=.*"fatal")(?=.*"silent")/)
  const kinds = problems((schema) => {
    const level = log(schema).properties?.level
    if (level !== undefined) level.type = 'integer'
  })
  t.equal(kinds.length, 1)
  t.match(kinds[0], /^\(root\)\.log\.level: the schema takes number, types\.ts (?=.*"fatal")(?=.*"silent")/)
  t.strictSame(
    problems((schema) => {
      const server = schema.properties?.server
      if (server?.properties !== undefined) server.properties.extra = { type: 'string' }
    }),
    ['(root).server.extra: in the schema, not in types.ts'],
  )
})
