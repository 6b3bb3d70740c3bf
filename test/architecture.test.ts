import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import ts from 'typescript'
import { ARCHITECTURE as text, layoutEntries } from './fixtures/architecture.ts'

// ARCHITECTURE.md is read before the code, so it must not describe a tree that no longer exists:
// its folder list is exactly the folders of src/, every module it names exists, it stays short
// enough to be read whole, and test/ is named as its "## Tests" says. Each check first finds what
// it checks, so a page whose wording changed under the regular expressions fails instead of
// passing with nothing read.

const ROOT = new URL('../', import.meta.url).pathname
const SRC = join(ROOT, 'src')
const MAX_LINES = 200

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
  t.ok(named.size > 10, `${named.size} folders named`)
  for (const folder of named) t.ok(existsSync(join(SRC, folder)), `src/${folder}/`)
})

t.test('every module the page names exists', async (t) => {
  const folders = new Set(
    readdirSync(SRC, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name),
  )
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

t.test('every function the page names beside its module is exported by that module', async (t) => {
  // "decision.ts `createAccessDecision`", "`createAccessDecision` in access/decision.ts": a reader
  // goes to that module for that name, so a rename or a move of either leaves the page wrong.
  const pairs = [
    ...[...text.matchAll(/(?<![\w./-])([\w./-]+\.ts)\)? `(\w+)`/g)].map((m) => [m[1] ?? '', m[2] ?? ''] as const),
    ...[...text.matchAll(/`(\w+)` in (?:src\/)?([\w./-]+\.ts)\b/g)].map((m) => [m[2] ?? '', m[1] ?? ''] as const),
  ]
  t.ok(pairs.length >= 4, `${pairs.length} functions named beside their module`)
  const all = modules(SRC)
  for (const [module, name] of pairs) {
    const candidates = all.filter((file) => file === join(SRC, module.replace(/^src\//, '')) || (!module.includes('/') && file.endsWith(`/${module}`)))
    const exporters = candidates.filter((file) => exportedNames(file).has(name)).map((file) => file.slice(SRC.length + 1))
    const found =
      exporters.length > 0
        ? `: ${exporters.join(', ')}`
        : candidates.length === 0
          ? ': no such module'
          : `: not exported by ${candidates.map((file) => file.slice(SRC.length + 1)).join(', ')}`
    t.ok(exporters.length > 0, `${module} \`${name}\`${found}`)
  }
})

t.test("each test file under a src/ folder's test/ twin is named after a module of that folder", async (t) => {
  // The page's rule for test/: the tests of src/<folder>/<module>.ts are test/<folder>/<module>.test.ts
  // or <module>.<behaviour>.test.ts (subfolders alike), so a reader finds a module's tests by its
  // name; a test of no one module, or of a whole stack, belongs in test/e2e/ (or its own folder).
  const TEST = join(ROOT, 'test')
  const folders = readdirSync(SRC, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
  const checked: string[] = []
  const offenders: string[] = []
  const walk = (folder: string): void => {
    const dir = join(TEST, folder)
    if (!existsSync(dir)) return
    const src = join(SRC, folder)
    const names = existsSync(src)
      ? readdirSync(src)
          .filter((name) => name.endsWith('.ts'))
          .map((name) => name.slice(0, -'.ts'.length))
      : []
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(`${folder}/${entry.name}`)
      else if (entry.name.endsWith('.test.ts')) {
        checked.push(`test/${folder}/${entry.name}`)
        const named = names.some((module) => entry.name.startsWith(`${module}.`))
        if (!named) offenders.push(`test/${folder}/${entry.name} (no module of src/${folder}/ starts its name)`)
      }
    }
  }
  for (const folder of folders) walk(folder)
  t.ok(checked.length > 50, `${checked.length} test files under test/ folders of src/ folders`)
  t.strictSame(offenders, [], 'rename each after the module it tests (test/<folder>/<module>.<behaviour>.test.ts), or move a whole-stack test to test/e2e/')
})

t.test('no test file sits where tap does not run it (a folder named dist, fixture or fixtures)', async (t) => {
  // tap's default `exclude` is **/@(fixture*(s)|dist)/**: a *.test.ts there is never run, and its
  // assertions drop out of the count without a failure.
  const hidden: string[] = []
  let seen = 0
  const walk = (dir: string, under: boolean): void => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      if (entry.isDirectory()) walk(`${dir}/${entry.name}`, under || /^(fixtures?|dist)$/.test(entry.name))
      else if (entry.name.endsWith('.test.ts')) {
        seen++
        if (under) hidden.push(`${dir}/${entry.name}`)
      }
    }
  }
  walk('test', false)
  t.ok(seen > 150, `${seen} test files under test/`)
  t.strictSame(hidden, [], 'move each out of the excluded folder (a test of a fixture that starts real peers belongs in test/e2e/)')
})

/** The names a module exports by its own declarations or an `export { ... }` list. */
function exportedNames(file: string): Set<string> {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const names = new Set<string>()
  for (const statement of source.statements) {
    const exported = ts.canHaveModifiers(statement) && (ts.getModifiers(statement) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
    if (exported && ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) if (ts.isIdentifier(declaration.name)) names.add(declaration.name.text)
    } else if (exported && 'name' in statement && statement.name !== undefined && ts.isIdentifier(statement.name as ts.Node)) {
      names.add((statement.name as ts.Identifier).text)
    } else if (ts.isExportDeclaration(statement) && statement.exportClause !== undefined && ts.isNamedExports(statement.exportClause)) {
      for (const element of statement.exportClause.elements) names.add(element.name.text)
    }
  }
  return names
}

/** The comments of a TypeScript source, as the scanner reads them (never a string or a regular expression). */
function commentsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text)
  const comments: string[] = []
  // Consecutive `//` lines are one comment: a citation may break its line after the project's name.
  let lineComment: string | undefined
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia)
      lineComment = lineComment === undefined ? scanner.getTokenText() : `${lineComment}\n${scanner.getTokenText()}`
    else if (kind === ts.SyntaxKind.NewLineTrivia || kind === ts.SyntaxKind.WhitespaceTrivia) continue
    else {
      if (lineComment !== undefined) comments.push(lineComment)
      lineComment = undefined
      if (kind === ts.SyntaxKind.MultiLineCommentTrivia) comments.push(scanner.getTokenText())
    }
  }
  if (lineComment !== undefined) comments.push(lineComment)
  return comments
}

/** A file a comment names: a path ending in a source or document extension. */
const NAMED_FILE = /(?<![\w./@-])((?:\.{1,2}\/)?[\w.-]+(?:\/[\w.-]+)*\.(?:ts|md|json|yaml|yml|proto|tpl))(?![\w/-])/g

/** The repository's files (git's list: what a clone has), for a name given without its folder. */
function repositoryFiles(): string[] {
  return execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((line) => line !== '')
}

// A comment that points at a file sends the next engineer looking for it: the file must exist,
// read from the module's own folder, from src/ or from the repository's root, or be the end of a
// path of the repository (`normalize.ts`, `envoy/service/auth/v3/external_auth.proto`). A file
// of another project is cited after its project's name (`grpc/grpc doc/health-checking.md`).
t.test('every file a comment in src/ names exists', async (t) => {
  const files = repositoryFiles()
  const stale: string[] = []
  let named = 0
  for (const file of modules(SRC)) {
    const here = join(file, '..')
    for (const comment of commentsOf(file)) {
      for (const match of comment.matchAll(NAMED_FILE)) {
        const path = match[1]
        if (path === undefined) continue
        if (/[\w.-]+\/[\w.-]+(?:\s|\/\/|\*)+$/.test(comment.slice(Math.max(0, match.index - 80), match.index))) continue
        named++
        if ([join(here, path), join(SRC, path), join(ROOT, path)].some((candidate) => existsSync(candidate))) continue
        if (files.some((f) => f.endsWith(`/${path.replace(/^(\.\.?\/)+/, '')}`))) continue
        stale.push(`${file.slice(ROOT.length)}: ${path}`)
      }
    }
  }
  t.ok(named > 100, `${named} file names read in comments`)
  t.strictSame(stale, [], 'comments naming files that do not exist')
})
