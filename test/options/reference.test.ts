import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { FORMATS } from '#src/config/formats'
import { cell, FORMAT_TYPES, keyReference, type SectionLink } from '#src/options/reference'
import { gatewaySchema, type JsonSchema } from '#src/options/schema'
import { anchors, DOCS, docsAnchorIndex } from '../fixtures/markdown.ts'

const PAGE = join(DOCS, 'configuration.md')
const BEGIN = '<!-- keys:begin -->\n'
const END = '<!-- keys:end -->\n'

function splitPage(text: string): { before: string; table: string; after: string } {
  const begin = text.indexOf(BEGIN)
  const end = text.indexOf(END)
  if (begin === -1 || end < begin) throw new Error(`docs/configuration.md lacks ${BEGIN.trim()} ... ${END.trim()}`)
  return { before: text.slice(0, begin + BEGIN.length), table: text.slice(begin + BEGIN.length, end), after: text.slice(end) }
}

// A description links a section by its anchor alone; the table, in docs/configuration.md, links
// the page of docs/ that has that heading. A missing or twice-used heading stops the rendering.
const { page: pageOf, ambiguous } = docsAnchorIndex()
const link: SectionLink = (anchor) => {
  if (ambiguous.has(anchor)) throw new Error(`#${anchor}: a heading of several pages of docs/; rename one`)
  const page = pageOf.get(anchor)
  if (page === undefined) throw new Error(`#${anchor}: no heading of docs/ has this anchor`)
  return page === 'configuration.md' ? `#${anchor}` : `${page}#${anchor}`
}

// The schema is the source; the table of docs/configuration.md is its rendering. Regenerate with
// npm run docs:keys (UPDATE_DOCS=1 npx tap test/options/reference.test.ts).
if (process.env.UPDATE_DOCS === '1') {
  const { before, after } = splitPage(readFileSync(PAGE, 'utf8'))
  writeFileSync(PAGE, `${before}${keyReference(gatewaySchema, link)}${after}`)
}

const table = splitPage(readFileSync(PAGE, 'utf8')).table

/** The cells of a table row, split where GitHub splits them: on every `|` not escaped. */
function cells(row: string): string[] {
  return row
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((text) => text.trim())
}

/** Every key path the schema accepts, written as the table writes it. */
function* keyPaths(schema: JsonSchema, prefix = ''): Generator<string> {
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    yield `${prefix}${key}`
    yield* keyPaths(child, `${prefix}${key}.`)
    if (child.items) yield* keyPaths(child.items, `${prefix}${key}[].`)
  }
}

t.test("docs/configuration.md's key reference is the one generated from src/options/schema.ts", async (t) => {
  t.equal(table, keyReference(gatewaySchema, link), 'regenerate with npm run docs:keys')
})

t.test('every key the schema accepts has a row', async (t) => {
  const named = new Set(
    table
      .split('\n')
      .slice(2)
      .flatMap((row) => [...(cells(row)[0] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1])),
  )
  const paths = [...keyPaths(gatewaySchema)]
  t.ok(paths.length > 90, `${paths.length} keys`)
  for (const path of paths) t.ok(named.has(path), path)
  t.ok(named.has('providers[].issuer') && named.has('provider.issuer'), "provider's keys are named in both forms")
  t.ok(named.has('forwardAuth.cache.ttlSeconds') && named.has('server.extAuthzGrpcPort'))
})

t.test('every row renders as four cells, with defaults and required keys where the schema has them', async (t) => {
  const rows = table.trimEnd().split('\n')
  t.equal(rows[0], '| Key | Type | Default | Meaning |')
  for (const row of rows) t.equal(cells(row).length, 4, row)
  const byKey = new Map(rows.slice(2).map((row) => [cells(row)[0], cells(row)]))
  t.strictSame(byKey.get('`server.port`')?.slice(1, 3), ['integer 0–65535', '`8080`'])
  t.strictSame(byKey.get('`server.workers`')?.slice(1, 3), ['integer 1–64 or `auto`', '`1`'])
  t.strictSame(byKey.get('`upstreams[].allow.claims`, `upstreams[].rules[].allow.claims`')?.[1], 'map of name → non-empty list of string, number or boolean')
  t.ok(byKey.has('**`server.publicUrl`**'), 'a required key is bold')
  t.ok(byKey.has('**`provider.issuer`**, **`providers[].issuer`**'), 'required in both of its places')
})

t.test('text outside code spans cannot start HTML, and a | cannot end a cell early', async (t) => {
  t.equal(cell('a `<b> | c` <d> | e'), 'a `<b> \\| c` &lt;d> \\| e')
  for (const row of table.split('\n')) {
    const prose = row
      .split('`')
      .filter((_, i) => i % 2 === 0)
      .join('')
    t.notMatch(prose, /<[a-z]/i, row)
  }
})

t.test('every format the schema uses has a name in the Type column', async (t) => {
  t.strictSame(Object.keys(FORMAT_TYPES).sort(), Object.keys(FORMATS).sort())
})

t.test('every link of the table leads to a heading of a page of docs/', async (t) => {
  const links = [...table.matchAll(/\]\(([^)#]*)#([^)]+)\)/g)].map((m) => ({ page: m[1] || 'configuration.md', anchor: m[2] ?? '' }))
  t.ok(links.length > 10, `${links.length} links`)
  t.ok(
    links.some(({ page }) => page !== 'configuration.md'),
    'links lead to other pages too',
  )
  for (const { page, anchor } of links) t.ok(anchors(readFileSync(join(DOCS, page), 'utf8')).has(anchor), `${page}#${anchor}`)
})
