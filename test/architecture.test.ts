import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'

// ARCHITECTURE.md is read before the code, so it must not describe a tree that no longer exists:
// its folder list is exactly the folders of src/, every module it names exists, and it stays
// short enough to be read whole.

const ROOT = new URL('../', import.meta.url).pathname
const SRC = join(ROOT, 'src')
const text = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8')
const MAX_LINES = 200

/** The rows of the "## Layout" table: the first cell of each, e.g. `src/proxy/`. */
function layoutEntries(): string[] {
  const section = text.split(/^## /m).find((part) => part.startsWith('Layout\n')) ?? ''
  return [...section.matchAll(/^\| `(src\/[^`]+)` \|/gm)].map((m) => m[1] ?? '')
}

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? modules(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  )
}

t.test(`ARCHITECTURE.md is at most ${MAX_LINES} lines`, async (t) => {
  const lines = text.trimEnd().split('\n').length
  t.ok(lines <= MAX_LINES, `${lines} lines`)
})

t.test('the layout names every folder and top-level module of src/, and nothing else', async (t) => {
  const actual = readdirSync(SRC, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() || entry.name.endsWith('.ts'))
    .map((entry) => `src/${entry.name}${entry.isDirectory() ? '/' : ''}`)
    .sort()
  t.ok(actual.length > 10, `${actual.length} entries in src/`)
  t.strictSame([...layoutEntries()].sort(), actual)
})

t.test('every src/ folder the page names exists', async (t) => {
  const named = new Set([...text.matchAll(/\bsrc\/([a-z-]+)\//g)].map((m) => m[1] ?? ''))
  for (const folder of named) t.ok(existsSync(join(SRC, folder)), `src/${folder}/`)
})

t.test('every module the page names exists', async (t) => {
  const folders = new Set(readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name))
  const basenames = new Set(modules(SRC).map((file) => file.slice(file.lastIndexOf('/') + 1)))
  const named = new Set([...text.matchAll(/(?<![\w./-])([\w./-]+\.ts)\b/g)].map((m) => m[1] ?? ''))
  t.ok(named.size > 40, `${named.size} modules named`)
  for (const name of named) {
    if (!name.includes('/')) t.ok(basenames.has(name), name)
    else if (name.startsWith('src/')) t.ok(existsSync(join(ROOT, name)), name)
    else if (folders.has(name.split('/')[0] ?? '')) t.ok(existsSync(join(SRC, name)), name)
    else t.ok(existsSync(join(ROOT, name)), name)
  }
})
