// docs/conformance.md maps every module of the OpenID RP certification plans to a test of
// test/conformance/, and the two must not drift: each row's test (`<module> (<old name>)`) is a
// t.test title in the file the row names, exactly once, and each t.test of test/conformance/*.test.ts
// titled like a module (starting oidcc- or fapi2-) is a row naming that file. Test titles are read
// from the source text, so they are written as string literals; a file that runs a module list
// shared by two plans (test/conformance/basic-rp-modules.ts) has that list's titles instead. A
// row without a file must say that the module does not apply to the plan's variant.

import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { BASIC_RP_MODULES } from '../conformance/basic-rp-modules.ts'
import { DOCS, proseLines, ROOT } from '../fixtures/markdown.ts'

/** Module lists run by a call instead of written-out t.test calls: the call, and the titles it runs. */
const MODULE_LISTS: ReadonlyArray<{ call: RegExp; titles: readonly string[] }> = [
  { call: /\brunBasicRpModules\(\s*t\s*,/, titles: BASIC_RP_MODULES.map((m) => `${m.name} (${m.old})`) },
]
const HEADER = '| Module | Old name | Test | Result | Choice / note |'
/** A test titled like a conformance-suite module. */
const MODULE_TITLE = /^(?:oidcc|fapi2)-[a-z0-9_-]+ \((?:rp-[A-Za-z0-9_-]+|no rp-\* name)\)$/

interface Row {
  plan: string
  line: number
  module: string
  oldName: string
  file: string | undefined
  result: string
  title: string
}

const CODE = /^`([^`]+)`$/
function codeSpan(cell: string): string | undefined {
  return CODE.exec(cell)?.[1]
}

function rows(): Row[] {
  const out: Row[] = []
  let plan = ''
  let inTable = false
  for (const { line, number } of proseLines(readFileSync(join(DOCS, 'conformance.md'), 'utf8'))) {
    const heading = /^## (.+)$/.exec(line)?.[1]
    if (heading !== undefined) plan = heading
    if (line === HEADER) {
      inTable = true
      continue
    }
    if (!line.startsWith('|')) {
      inTable = false
      continue
    }
    if (!inTable || /^\|[-|\s]+\|$/.test(line)) continue
    const cells = line.slice(1, -1).split(' | ').map((c) => c.trim())
    const [module = '', oldName = '', test = '', result = ''] = cells
    const name = codeSpan(module) ?? ''
    const old = oldName === 'none' ? 'no rp-* name' : (codeSpan(oldName) ?? '')
    out.push({ plan, line: number, module: name, oldName: old, file: codeSpan(test), result, title: `${name} (${old})` })
  }
  return out
}

/** The titles of the tests of a test file: its t.test calls as written, and the module lists it runs. */
function titles(file: string): string[] {
  // Line comments may name a call without making it.
  const source = readFileSync(join(ROOT, file), 'utf8').replace(/^\s*\/\/.*$/gm, '')
  const written = [...source.matchAll(/\bt\.test\(\s*(['"`])((?:(?!\1)[^\\]|\\.)*)\1/g)].map((m) => m[2] ?? '')
  return [...written, ...MODULE_LISTS.filter((list) => list.call.test(source)).flatMap((list) => list.titles)]
}

const table = rows()
const conformanceFiles = readdirSync(join(ROOT, 'test/conformance'))
  .filter((name) => name.endsWith('.test.ts'))
  .map((name) => `test/conformance/${name}`)
  .toSorted()

t.test('every plan has its table, every row a module and an old name', async (t) => {
  t.same([...new Set(table.map((r) => r.plan))], ['Basic RP', 'Config RP', 'Form Post RP', 'RP-Initiated Logout RP', 'Back-Channel Logout RP', 'FAPI 2.0 client'])
  for (const row of table) {
    t.ok(MODULE_TITLE.test(row.title), `line ${row.line}: module and old name make a test title: ${row.title}`)
  }
  const perPlan = new Map<string, Set<string>>()
  for (const row of table) {
    const seen = perPlan.get(row.plan) ?? new Set()
    t.notOk(seen.has(row.module), `line ${row.line}: ${row.module} listed once in ${row.plan}`)
    seen.add(row.module)
    perPlan.set(row.plan, seen)
  }
})

t.test('each row has its test, in the file it names', async (t) => {
  for (const row of table) {
    if (row.file === undefined) {
      t.match(row.result, /^not in this variant$/, `line ${row.line}: ${row.module} has no test, so it must not apply to the plan's variant`)
      continue
    }
    t.match(row.file, /^test\/conformance\/[a-z0-9-]+\.test\.ts$/, `line ${row.line}: a file of test/conformance/`)
    t.ok(existsSync(join(ROOT, row.file)), `line ${row.line}: ${row.file} exists`)
    t.equal(row.result, 'passes', `line ${row.line}: ${row.title}`)
    const found = existsSync(join(ROOT, row.file)) ? titles(row.file).filter((title) => title === row.title).length : 0
    t.equal(found, 1, `line ${row.line}: ${row.file} has exactly one test '${row.title}'`)
  }
})

t.test('each module test of test/conformance/ is in the table', async (t) => {
  t.ok(conformanceFiles.length >= 3, `the conformance tests are found: ${conformanceFiles.join(', ')}`)
  for (const file of conformanceFiles) {
    t.ok(table.some((row) => row.file === file), `${file} has rows in docs/conformance.md`)
    // Titles of other subtests (a group, a control) are not modules; a module's starts with its plan's prefix.
    for (const title of titles(file).filter((title) => /^(?:oidcc|fapi2)-/.test(title))) {
      t.ok(MODULE_TITLE.test(title), `${file}: '${title}' is named <module> (<old rp-* name>)`)
      t.ok(
        table.some((row) => row.file === file && row.title === title),
        `${file}: '${title}' has a row naming this file`,
      )
    }
  }
})
