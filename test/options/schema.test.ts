import { readFileSync, writeFileSync } from 'node:fs'
import t from 'tap'
import { FORMATS } from '#src/config/formats'
import { gatewaySchema, type JsonSchema, schemaJson } from '#src/options/schema'

const SCHEMA_FILE = new URL('../../config/gateway.schema.json', import.meta.url)

// The TypeScript value is the source; the JSON file is its copy for editors. Regenerate with
// UPDATE_SCHEMA=1 npx tap test/options/schema.test.ts
if (process.env.UPDATE_SCHEMA === '1') writeFileSync(SCHEMA_FILE, schemaJson())

function* objectSchemas(schema: JsonSchema, path = '(root)'): Generator<[string, JsonSchema]> {
  if (schema.type === 'object') yield [path, schema]
  for (const [key, child] of Object.entries(schema.properties ?? {})) yield* objectSchemas(child, `${path}.${key}`)
  if (typeof schema.additionalProperties === 'object') yield* objectSchemas(schema.additionalProperties, `${path}.*`)
  if (schema.items) yield* objectSchemas(schema.items, `${path}[]`)
}

function* formats(schema: JsonSchema): Generator<string> {
  if (schema.format !== undefined) yield schema.format
  for (const child of Object.values(schema.properties ?? {})) yield* formats(child)
  if (typeof schema.additionalProperties === 'object') yield* formats(schema.additionalProperties)
  if (schema.items) yield* formats(schema.items)
}

t.test('config/gateway.schema.json is the schema of src/options/schema.ts', async (t) => {
  const text = readFileSync(SCHEMA_FILE, 'utf8')
  t.same(JSON.parse(text), gatewaySchema)
  t.equal(text, schemaJson(), 'byte for byte (regenerate with UPDATE_SCHEMA=1)')
})

t.test('every object with fixed keys refuses unknown keys', async (t) => {
  let checked = 0
  for (const [path, schema] of objectSchemas(gatewaySchema)) {
    if (schema.properties === undefined) continue
    t.equal(schema.additionalProperties, false, path)
    checked++
  }
  t.ok(checked >= 10, `walked ${checked} object schemas`)
})

t.test('every format the schema names is implemented', async (t) => {
  const used = new Set(formats(gatewaySchema))
  t.ok(used.size > 5)
  for (const format of used) t.type(FORMATS[format], 'function', format)
})

t.test('the schema uses only keywords that env.ts knows how to walk', async (t) => {
  const text = schemaJson()
  for (const keyword of ['$ref', 'oneOf', 'anyOf', 'allOf', 'if', 'patternProperties']) {
    t.notMatch(text, `"${keyword}"`, keyword)
  }
})
