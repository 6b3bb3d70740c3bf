import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import t from 'tap'
import ts from 'typescript'
import { SIGN_IN_PATH } from '#src/contract/endpoints'
import { layoutEntries } from './fixtures/architecture.ts'

// The rules ARCHITECTURE.md states, kept true. They read src/ as the compiler does (one program,
// its syntax trees, its module resolution, its TypeChecker's symbols), not as text: an import is
// every `import`, `import type`, `export ... from`, `export * from` and `import()`, and a rule
// about a named function follows that function through every name it is imported under. Each
// rule first finds its subject (a folder, a module, an export), so a rename fails it instead of
// leaving it nothing to check.

const ROOT = new URL('../', import.meta.url).pathname
const SRC = join(ROOT, 'src/')

/**
 * tsconfig.json's files under src/ as one program, shared by every rule of this file. The rules
 * are about src/: packages and the standard library are not loaded (noResolve, noLib, no
 * `types`), so the program costs a parse and a bind, not a type check; the TypeChecker still
 * resolves every import between src/ files, and an import of a package is known by its name.
 */
function srcProgram(): ts.Program {
  const { config, error } = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (path) => ts.sys.readFile(path))
  if (error !== undefined) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'))
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, ROOT)
  const files = parsed.fileNames.filter((file) => file.startsWith(SRC))
  return ts.createProgram(files, { ...parsed.options, noResolve: true, noLib: true, types: [] })
}

const program = srcProgram()
const checker = program.getTypeChecker()
const sourceFiles = program
  .getSourceFiles()
  .filter((file) => file.fileName.startsWith(SRC))
  .sort((a, b) => a.fileName.localeCompare(b.fileName))

/** A source's path under src/, e.g. `access/decision.ts`. */
function pathOf(file: ts.SourceFile | string): string {
  return relative(SRC, typeof file === 'string' ? file : file.fileName)
}

/** The folder of src/ a path belongs to; a file at the top level (cli.ts) is a folder of its own. */
function folderOf(path: string): string {
  return path.split('/')[0] ?? ''
}

/** The program's source at a path under src/; a rule whose subject is gone fails here. */
function sourceAt(path: string): ts.SourceFile {
  const file = program.getSourceFile(join(SRC, path))
  if (file === undefined) throw new Error(`src/${path} is not in the program: renamed or gone?`)
  return file
}

function lineOf(node: ts.Node): number {
  const file = node.getSourceFile()
  return file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1
}

function walk(node: ts.Node, visit: (node: ts.Node) => void): void {
  visit(node)
  ts.forEachChild(node, (child) => walk(child, visit))
}

/**
 * How a module imports another. `type` imports (`import type`, `export type ... from`, a type
 * written `import('...').Name`) are erased from the JavaScript; under verbatimModuleSyntax
 * `import { type A }` is not (it stays `import {}` and loads the module), so it is `static`.
 * `dynamic` is `import('...')` with a literal specifier, loaded when that line runs.
 */
type ImportKind = 'static' | 'type' | 'dynamic'

interface Import {
  /** The importing file, under src/. */
  from: string
  line: number
  spec: string
  /** The file it resolves to under src/, or the package's specifier. */
  to: string
  kind: ImportKind
  /** The specifier's string literal. */
  node: ts.StringLiteralLike
}

/** An import the rules cannot place: an `import()` of a computed name, or a relative specifier that resolves to no source. */
const unplaced: string[] = []

/**
 * The one reader of imports for every rule of this file: each import of a source, resolved by the
 * TypeChecker (the module resolution tsc itself uses).
 *
 * Every kind counts as an edge between folders, `import type` too: a type is a dependency of
 * understanding (to read a folder you must read the types it names), so the layering holds for
 * types as for code. Only the run-time walk (what `openid-gateway run` loads) follows `static`
 * imports alone.
 */
function importsOf(file: ts.SourceFile): Import[] {
  const cached = importCache.get(file)
  if (cached !== undefined) return cached
  const imports: Import[] = []
  const add = (specifier: ts.Expression, kind: ImportKind): void => {
    if (!ts.isStringLiteralLike(specifier)) {
      unplaced.push(`${pathOf(file)}:${lineOf(specifier)} import(${specifier.getText(file)})`)
      return
    }
    const spec = specifier.text
    let to = spec
    if (spec.startsWith('.')) {
      const target = checker.getSymbolAtLocation(specifier)?.valueDeclaration
      if (target === undefined || !ts.isSourceFile(target) || !target.fileName.startsWith(SRC)) {
        unplaced.push(`${pathOf(file)}:${lineOf(specifier)} ${spec}`)
        return
      }
      to = pathOf(target)
    }
    imports.push({ from: pathOf(file), line: lineOf(specifier), spec, to, kind, node: specifier })
  }
  walk(file, (node) => {
    if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, node.importClause?.isTypeOnly === true ? 'type' : 'static')
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined) add(node.moduleSpecifier, node.isTypeOnly ? 'type' : 'static')
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] !== undefined)
      add(node.arguments[0], 'dynamic')
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, 'type')
  })
  importCache.set(file, imports)
  return imports
}
const importCache = new Map<ts.SourceFile, Import[]>()

/** An import as a failure message names it: `proxy/guard.ts:9 -> ../access/decision.js (type)`. */
function describe(i: Import): string {
  return `${i.from}:${i.line} -> ${i.spec}${i.kind === 'static' ? '' : ` (${i.kind})`}`
}

/** The imports from a folder of src/ to another, per folder (imports inside a folder are not edges). */
function folderGraph(): Map<string, Map<string, Import[]>> {
  const graph = new Map<string, Map<string, Import[]>>()
  for (const file of sourceFiles) {
    const from = folderOf(pathOf(file))
    for (const i of importsOf(file)) {
      if (!i.spec.startsWith('.')) continue
      const to = folderOf(i.to)
      if (to === from) continue
      const edges = graph.get(from) ?? new Map<string, Import[]>()
      edges.set(to, [...(edges.get(to) ?? []), i])
      graph.set(from, edges)
    }
  }
  return graph
}
const graph = folderGraph()

/** Each import cycle between folders, as the chain of imports that closes it. */
function folderCycles(): string[] {
  const cycles: string[] = []
  const done = new Set<string>()
  const visit = (node: string, trail: string[]): void => {
    const at = trail.indexOf(node)
    if (at !== -1) {
      const loop = [...trail.slice(at), node]
      cycles.push(
        loop
          .slice(0, -1)
          .map((from, i) => {
            const first = graph.get(from)?.get(loop[i + 1] ?? '')?.[0]
            return first === undefined ? from : describe(first)
          })
          .join(' ; '),
      )
      return
    }
    if (done.has(node)) return
    for (const to of graph.get(node)?.keys() ?? []) visit(to, [...trail, node])
    done.add(node)
  }
  for (const node of graph.keys()) visit(node, [])
  return cycles
}

/** The folders that have sources in the program (a rule about a folder first finds it here). */
const folders = new Set(sourceFiles.map((file) => folderOf(pathOf(file))))

function resolved(symbol: ts.Symbol | undefined): ts.Symbol | undefined {
  return symbol !== undefined && (symbol.flags & ts.SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(symbol) : symbol
}

/** What a module of src/ exports, by exported name, each resolved to its declaration's symbol. */
function exportsOf(path: string): Map<string, ts.Symbol> {
  const module = checker.getSymbolAtLocation(sourceAt(path))
  if (module === undefined) throw new Error(`src/${path} is not a module`)
  return new Map(
    checker.getExportsOfModule(module).flatMap((s) => {
      const target = resolved(s)
      return target === undefined ? [] : [[s.name, target] as const]
    }),
  )
}

/** The symbol a module of src/ exports under a name; a rule about a renamed or removed export fails here. */
function exported(path: string, name: string): ts.Symbol {
  const symbol = exportsOf(path).get(name)
  if (symbol === undefined) throw new Error(`src/${path} exports no ${name}: renamed or gone?`)
  return symbol
}

/** How a use of a symbol takes it: called, constructed, handed on as a value, or named in a type. */
type UseKind = 'call' | 'new' | 'value' | 'type'

interface Use {
  path: string
  line: number
  kind: UseKind
}

function useKind(node: ts.Node): UseKind {
  if (ts.isPartOfTypeNode(node)) return 'type'
  const parent = node.parent
  if (ts.isCallExpression(parent) && parent.expression === node) return 'call'
  if (ts.isNewExpression(parent) && parent.expression === node) return 'new'
  return 'value'
}

/** A name a file binds by an import declaration, and what the TypeChecker resolves it to (through any chain of `export ... from`). */
interface Binding {
  name: string
  /** The export's symbol, or the module's for `import * as m`. */
  target: ts.Symbol
}

const bindingCache = new Map<ts.SourceFile, Binding[]>()

function bindingsOf(file: ts.SourceFile): Binding[] {
  const cached = bindingCache.get(file)
  if (cached !== undefined) return cached
  const names: ts.Identifier[] = []
  for (const statement of file.statements) {
    const clause = ts.isImportDeclaration(statement) ? statement.importClause : undefined
    if (clause === undefined) continue
    if (clause.name !== undefined) names.push(clause.name)
    if (clause.namedBindings !== undefined && ts.isNamespaceImport(clause.namedBindings)) names.push(clause.namedBindings.name)
    else if (clause.namedBindings !== undefined) names.push(...clause.namedBindings.elements.map((element) => element.name))
  }
  const bindings = names.flatMap((name) => {
    const target = resolved(checker.getSymbolAtLocation(name))
    return target === undefined ? [] : [{ name: name.text, target }]
  })
  bindingCache.set(file, bindings)
  return bindings
}

/**
 * Every use of symbols exported by src/ modules, whatever name they are imported under. Each
 * import binding of each file is resolved by the TypeChecker (`import { a as b }`,
 * `import * as m`, through any chain of `export ... from`); then each identifier spelling one of
 * the local names found is resolved again (a local of the same name is not a use), and `m.a` is
 * looked up in the module `m` names. An `import()` of a module that exports one of them counts as
 * a use at that line (what it destructures is beyond this reader), and so does a type written
 * `import('...').Name`. The module that declares a symbol is searched for it under its own name.
 */
function usesOf(targets: ts.Symbol[]): Use[] {
  const wanted = new Set(targets)
  const uses: Use[] = []
  const declaredIn = new Map<ts.SourceFile, Set<string>>()
  for (const target of targets) {
    for (const declaration of target.declarations ?? []) {
      const names = declaredIn.get(declaration.getSourceFile()) ?? new Set<string>()
      declaredIn.set(declaration.getSourceFile(), names.add(target.name))
    }
  }
  const exportNames = (module: ts.Symbol): string[] =>
    (module.flags & ts.SymbolFlags.ValueModule) === 0 ? [] : checker.getExportsOfModule(module).flatMap((s) => (wanted.has(resolved(s) ?? s) ? [s.name] : []))
  for (const file of sourceFiles) {
    const names = new Set(declaredIn.get(file))
    const namespaces = new Map<string, string[]>()
    for (const { name, target } of bindingsOf(file)) {
      if (wanted.has(target)) names.add(name)
      else if (exportNames(target).length > 0) namespaces.set(name, exportNames(target))
    }
    for (const i of importsOf(file)) {
      if (!i.spec.startsWith('.') || i.kind === 'static') continue
      const module = checker.getSymbolAtLocation(sourceAt(i.to))
      if (module === undefined || exportNames(module).length === 0) continue
      const importType = i.node.parent.parent
      if (i.kind === 'dynamic') uses.push({ path: i.from, line: i.line, kind: 'value' })
      else if (ts.isImportTypeNode(importType) && importType.qualifier !== undefined) {
        const name = ts.isIdentifier(importType.qualifier) ? importType.qualifier : importType.qualifier.right
        const symbol = resolved(checker.getSymbolAtLocation(name))
        if (symbol !== undefined && wanted.has(symbol)) uses.push({ path: i.from, line: i.line, kind: 'type' })
      }
    }
    if (names.size === 0 && namespaces.size === 0) continue
    walk(file, (node) => {
      if (!ts.isIdentifier(node)) return
      const parent = node.parent
      if (ts.isImportSpecifier(parent) || ts.isImportClause(parent) || ts.isNamespaceImport(parent) || ts.isExportSpecifier(parent)) return
      if (
        (ts.isPropertyAccessExpression(parent) || ts.isQualifiedName(parent)) &&
        (ts.isPropertyAccessExpression(parent) ? parent.name : parent.right) === node
      ) {
        const namespace = ts.isPropertyAccessExpression(parent) ? parent.expression : parent.left
        if (!ts.isIdentifier(namespace) || !(namespaces.get(namespace.text) ?? []).includes(node.text)) return
        const module = resolved(checker.getSymbolAtLocation(namespace))
        const symbol = module === undefined ? undefined : resolved(checker.getExportsOfModule(module).find((s) => s.name === node.text))
        if (symbol !== undefined && wanted.has(symbol)) uses.push({ path: pathOf(file), line: lineOf(node), kind: useKind(parent) })
        return
      }
      if (!names.has(node.text)) return
      // The name a declaration declares (a parameter, a property, a local) is not a use of the import.
      if ((parent as ts.NamedDeclaration).name === node && !ts.isShorthandPropertyAssignment(parent)) return
      const symbol = ts.isShorthandPropertyAssignment(parent) ? checker.getShorthandAssignmentValueSymbol(parent) : checker.getSymbolAtLocation(node)
      const target = resolved(symbol)
      if (target !== undefined && wanted.has(target)) uses.push({ path: pathOf(file), line: lineOf(node), kind: useKind(node) })
    })
  }
  return uses
}

function at(use: Use): string {
  return `${use.path}:${use.line} (${use.kind})`
}

/** The files of src/ whose code (not comments) calls a method of that name on anything: `x.eval(...)`. */
function methodCallers(names: string[]): Map<string, string[]> {
  const callers = new Map<string, string[]>()
  for (const file of sourceFiles) {
    walk(file, (node) => {
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && names.includes(node.expression.name.text)) {
        const name = node.expression.name.text
        callers.set(name, [...new Set([...(callers.get(name) ?? []), pathOf(file)])])
      }
    })
  }
  return callers
}

// ---------------------------------------------------------------------------------------------
// What the rules read

t.test('the rules read every source of src/ and can place each of its imports', async (t) => {
  // A file outside the program, or an import these rules cannot resolve (a computed `import()`,
  // a relative path to nothing), would be a dependency no rule below sees.
  const onDisk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? onDisk(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [pathOf(join(dir, entry.name))] : [],
    )
  t.strictSame(
    sourceFiles.map(pathOf),
    onDisk(SRC).sort((a, b) => join(SRC, a).localeCompare(join(SRC, b))),
  )
  for (const file of sourceFiles) importsOf(file)
  t.strictSame(unplaced, [], 'every import names a literal module that resolves')
  const kinds = new Set(sourceFiles.flatMap((file) => importsOf(file).map((i) => i.kind)))
  t.strictSame([...kinds].sort(), ['dynamic', 'static', 'type'], 'the reader sees static, type-only and dynamic imports')
})

// ---------------------------------------------------------------------------------------------
// Layers: the Layout table's order is the layering; no cycle; proxy/ and routes/ apart; the gRPC
// transport reaches the decision only through `check`; only the entry points import runtime/.

t.test('the folders of src/ import each other without a cycle', async (t) => {
  // A cycle between folders means neither can be understood, tested or moved without the other.
  t.ok(graph.size > 10, `${graph.size} folders import another`)
  t.strictSame(folderCycles(), [])
})

t.test('the files of src/ import each other without a cycle, type-only imports included', async (t) => {
  // Inside a folder too: two modules that import each other (even for a type) are one concept in
  // two files, and neither can be read first.
  const edges = new Map(sourceFiles.map((file) => [pathOf(file), importsOf(file).filter((i) => i.spec.startsWith('.'))]))
  const cycles: string[] = []
  const done = new Set<string>()
  const visit = (node: string, trail: Import[]): void => {
    const at = trail.findIndex((i) => i.from === node)
    if (at !== -1) {
      cycles.push(trail.slice(at).map(describe).join(' ; '))
      return
    }
    if (done.has(node)) return
    for (const i of edges.get(node) ?? []) visit(i.to, [...trail, i])
    done.add(node)
  }
  for (const node of edges.keys()) visit(node, [])
  t.ok([...edges.values()].flat().length > 300, 'the imports between files of src/ are read')
  t.strictSame(cycles, [])
})

t.test("each folder of src/ imports only the folders listed before it in ARCHITECTURE.md's Layout table", async (t) => {
  // The page lists the folders from the bottom, so its order is the layering a reader relies on:
  // an import of a folder listed after the importer (or not listed at all) is named here with its
  // line, and either the import moves down or the page's row moves up.
  const order = layoutEntries().map((entry) => entry.replace(/^src\//, '').replace(/\/$/, ''))
  t.ok(order.length > 10, `${order.length} rows in the Layout table`)
  t.strictSame(
    [...folders].filter((folder) => !order.includes(folder)),
    [],
    'every folder of src/ has a row',
  )
  const upward: string[] = []
  for (const [from, edges] of graph) {
    for (const [to, imports] of edges) {
      if (order.indexOf(to) === -1 || order.indexOf(to) > order.indexOf(from)) upward.push(...imports.map(describe))
    }
  }
  t.strictSame(upward, [], `imports of a folder listed later in the Layout table (${order.join(', ')})`)
})

t.test('contract/ imports nothing of the gateway and options/ only contract/', async (t) => {
  // The leaf option types, the schema and its defaults are what every folder reads; validation
  // (config/) asks the owners of each rule, so it sits above them and options/ below.
  for (const folder of ['contract', 'options', 'app']) t.ok(folders.has(folder), `src/${folder}/ exists`)
  t.strictSame([...(graph.get('contract')?.values() ?? [])].flat().map(describe), [])
  t.strictSame([...(graph.get('options')?.keys() ?? [])], ['contract'])
  t.strictSame(
    [...(graph.get('app')?.keys() ?? [])].filter((to) => to === 'runtime' || to === 'cli.ts'),
    [],
    'app/ never imports runtime/',
  )
})

t.test('src/proxy and src/routes do not import each other', async (t) => {
  t.ok(folders.has('proxy') && folders.has('routes'), 'both folders exist')
  const crossings = [...(graph.get('proxy')?.get('routes') ?? []), ...(graph.get('routes')?.get('proxy') ?? [])].map(describe)
  t.strictSame(crossings, [])
})

t.test('src/checks/envoy-grpc takes the decision as `check` and imports none of the gateway behind it', async (t) => {
  // The gRPC service is transport only: proxy/, routes/, session/, oidc/ and config/ reach it
  // through the `check` the gateway passes in, so it can be tested and replaced on its own.
  const allowed = new Set(['checks/envoy-grpc', 'lib', 'contract/errors.ts', 'ops/logging.ts', 'ops/response-headers.ts'])
  const transport = sourceFiles.filter((file) => pathOf(file).startsWith('checks/envoy-grpc/'))
  t.ok(transport.length > 0, 'the folder exists')
  const outside = transport
    .flatMap(importsOf)
    .filter((i) => i.spec.startsWith('.'))
    .filter((i) => !i.to.startsWith('checks/envoy-grpc/') && !allowed.has(folderOf(i.to)) && !allowed.has(i.to))
    .map(describe)
  t.strictSame(outside, [])
})

t.test('the process model is src/runtime: only the entry points (cli.ts, dev/) import it, and it alone opens Redis', async (t) => {
  // buildApp is wiring: what outlives a configuration (the Redis connection, the state shared
  // through the primary) is built by runtime/process-state.ts and handed in, so app.ts and the
  // folders below it cannot reach back into the process that runs them.
  t.ok(folders.has('runtime'), 'src/runtime/ exists')
  const inward = [...graph]
    .filter(([from]) => from !== 'runtime' && from !== 'cli.ts' && from !== 'dev')
    .flatMap(([, edges]) => edges.get('runtime') ?? [])
    .map(describe)
  t.strictSame(inward, [], 'nothing below the entry points imports runtime/')
  const connects = usesOf([exported('session/redis-client.ts', 'connectRedis')]).filter((use) => use.kind !== 'type')
  t.strictSame([...new Set(connects.map((use) => use.path))], ['runtime/process-state.ts'], 'one place opens the Redis connection')
})

// ---------------------------------------------------------------------------------------------
// One decision core: access/ decides and knows no Fastify; only access/ builds the decision; the
// check dialects render the Checker's verdict.

t.test("nothing in src/access/ imports 'fastify', not even a type", async (t) => {
  // The decision is made the same way for an HTTP request, a check endpoint and a gRPC check: a
  // module of access/ that named Fastify (even as a type) would decide on what only an HTTP
  // request has. Fastify's plugins (@fastify/...) are packages of their own.
  const access = sourceFiles.filter((file) => folderOf(pathOf(file)) === 'access')
  t.ok(access.length > 5, `${access.length} modules in src/access/`)
  const fastify = access
    .flatMap(importsOf)
    .filter((i) => i.to === 'fastify' || i.to.startsWith('fastify/'))
    .map(describe)
  t.strictSame(fastify, [])
})

t.test('only src/access/ builds the access decision, once per configuration', async (t) => {
  // One decision core: a second place that built an upstream's decision could configure it apart
  // from the one the proxy guard, the check endpoints and the WebSocket verdict share. Each use of
  // the classes access/decision.ts exports is found under whatever name it is imported (aliases,
  // namespaces, re-exports, a dynamic import): an upstream's decision (UpstreamAccess) is built only
  // in access/, and the per-configuration AccessDecisions that holds them only by the wiring (app/).
  const upstreamAccess = exported('access/decision.ts', 'UpstreamAccess')
  const decisions = exported('access/decision.ts', 'AccessDecisions')
  for (const symbol of [upstreamAccess, decisions]) t.ok((symbol.flags & ts.SymbolFlags.Class) !== 0, `${symbol.name} is a class`)
  const built = usesOf([upstreamAccess]).filter((use) => use.kind !== 'type')
  t.ok(
    built.some((use) => use.path === 'access/decision.ts'),
    'AccessDecisions builds each UpstreamAccess',
  )
  t.strictSame(built.filter((use) => folderOf(use.path) !== 'access').map(at), [], 'an UpstreamAccess built outside src/access/')
  const wired = usesOf([decisions]).filter((use) => use.kind !== 'type' && folderOf(use.path) !== 'access')
  t.strictSame([...new Set(wired.map((use) => folderOf(use.path)))], ['app'], 'AccessDecisions built by the wiring alone')
})

// One answer, one set of credentials: every exit (the proxy guard and each check dialect) writes out
// access/answer.ts's answer, and only upstream/credentials.ts writes what an upstream receives. A
// dialect is a file that checks/dialects.ts lists, found here through that list.
t.test('every exit writes out the one answer of access/answer.ts, with the credentials of upstream/credentials.ts', async (t) => {
  t.ok(
    importsOf(sourceAt('access/checker.ts')).some((i) => i.to === 'access/decision.ts'),
    'the Checker asks the access decision',
  )
  const dialects = importsOf(sourceAt('checks/dialects.ts'))
    .filter((i) => i.kind !== 'type' && folderOf(i.to) === 'checks')
    .map((i) => i.to)
  t.ok(dialects.length >= 2, `checks/dialects.ts lists ${dialects.join(', ')}`)
  for (const dialect of dialects) {
    t.ok(
      importsOf(sourceAt(dialect)).some((i) => i.to === 'access/checker.ts'),
      `${dialect} answers through the Checker`,
    )
  }
  const problems = ['forbiddenError', 'unauthenticatedError', 'stepUpError', 'signInLocation'].map((name) => exported('access/decision.ts', name))
  t.strictSame(
    [
      ...new Set(
        usesOf(problems)
          .filter((use) => use.kind !== 'type')
          .map((use) => use.path),
      ),
    ].sort(),
    ['access/answer.ts'],
    "a verdict's problem and sign-in URL are written by access/answer.ts alone",
  )
  const writers = [exported('upstream/header-policy.ts', 'identityHeaderValues'), exported('upstream/token-exchange.ts', 'createTokenExchanger')]
  t.strictSame(
    [
      ...new Set(
        usesOf([writers[0] as ts.Symbol])
          .filter((use) => use.kind !== 'type')
          .map((use) => use.path),
      ),
    ].sort(),
    ['upstream/credentials.ts'],
    'identity headers are written by upstream/credentials.ts alone',
  )
  t.strictSame(
    [...methodCallers(['mint', 'assertion']).values()].flat().filter((path) => path !== 'upstream/credentials.ts'),
    [],
    'Transaction Tokens and identity assertions are minted by upstream/credentials.ts alone',
  )
  t.strictSame(
    [...methodCallers(['token']).entries()]
      .filter(([, paths]) => paths.length > 0)
      .flatMap(([, paths]) => paths)
      .filter((path) => folderOf(path) !== 'upstream'),
    [],
    'a token exchange is asked by upstream/ alone',
  )
  t.ok(usesOf([writers[1] as ts.Symbol]).length > 0, 'the exchanger is built')
  const grpc = importsOf(sourceAt('runtime/envoy-grpc-listener.ts'))
    .filter((i) => folderOf(i.to) === 'access' || i.to === 'proxy/guard.ts')
    .map(describe)
  t.strictSame(grpc, [], "the gRPC listener asks the running configuration's check, not the decision")
  for (const transport of ['checks/envoy-http.ts', 'checks/envoy-grpc-check.ts']) {
    t.ok(
      importsOf(sourceAt(transport)).some((i) => i.to === 'checks/pipeline.ts'),
      `${transport} is an adapter onto the check pipeline`,
    )
  }
})

t.test('the decision reads no Fastify request: sessions, authentication and the checker take what they read', async (t) => {
  // The gRPC check decides without an HTTP request (checks/envoy-http.ts createGrpcCheck): the
  // session stores read a SessionRequest and write a SessionReply, authentication an AuthRequest,
  // the access decision and the checker a DecisionRequest.
  const decision = [
    ...sourceFiles.filter((file) => folderOf(pathOf(file)) === 'session'),
    ...['authenticate.ts', 'checker.ts', 'decision.ts'].map((name) => sourceAt(`access/${name}`)),
  ]
  t.ok(decision.length > 10, `${decision.length} modules`)
  const fastify = decision.filter((file) => /FastifyRequest|FastifyReply/.test(file.text)).map(pathOf)
  t.strictSame(fastify, [])
  t.match(sourceAt('access/decision.ts').text, /async decide\(req: DecisionRequest, reply: SessionReply/)
})

// ---------------------------------------------------------------------------------------------
// One home per concept

t.test('each URL character helper and the request identity have one home', async (t) => {
  // A second copy of a helper drifts from the first: each is declared once in src/ (a function or
  // a constant holding one), and the request identity is declared on FastifyRequest once.
  const helpers = ['asciiLower', 'hexDigitAt', 'pctByte', 'hexValue', 'isNavigation', 'escapeHtml']
  const definitions = new Map<string, string[]>(helpers.map((name) => [name, []]))
  definitions.set('FastifyRequest.identity', [])
  const define = (name: string, file: ts.SourceFile): void => {
    const homes = definitions.get(name)
    if (homes !== undefined) homes.push(pathOf(file))
  }
  for (const file of sourceFiles) {
    walk(file, (node) => {
      if ((ts.isFunctionDeclaration(node) || ts.isVariableDeclaration(node)) && node.name !== undefined && ts.isIdentifier(node.name))
        define(node.name.text, file)
      if (
        ts.isInterfaceDeclaration(node) &&
        node.name.text === 'FastifyRequest' &&
        node.members.some((m) => m.name !== undefined && ts.isIdentifier(m.name) && m.name.text === 'identity')
      ) {
        define('FastifyRequest.identity', file)
      }
    })
  }
  for (const [name, files] of definitions) t.equal(files.length, 1, `${name}: declared in ${files.join(', ') || 'no file'}`)
  t.strictSame(definitions.get('FastifyRequest.identity'), ['contract/identity.ts'])
})

t.test('the session lifecycle takes a refresh grant, not the provider client', async (t) => {
  const client = exported('oidc/client.ts', 'OidcClient')
  exported('session/lifecycle.ts', 'RefreshGrant')
  t.notMatch(sourceAt('session/lifecycle.ts').text, /OidcClient/)
  t.strictSame(
    usesOf([client])
      .filter((use) => use.path === 'session/lifecycle.ts')
      .map(at),
    [],
    'lifecycle.ts names no OidcClient, under any name',
  )
})

t.test("the gateway's URL space is written in one file: no string outside contract/endpoints.ts spells SIGN_IN_PATH", async (t) => {
  // The metrics, the rate limit, the reserved paths and the routes read the endpoints table; a
  // path written out elsewhere is one they would not know of. Comments may name the paths.
  const spelled: string[] = []
  for (const file of sourceFiles) {
    walk(file, (node) => {
      if ((ts.isStringLiteral(node) || ts.isTemplateLiteralToken(node) || ts.isNoSubstitutionTemplateLiteral(node)) && node.text.includes(SIGN_IN_PATH))
        spelled.push(`${pathOf(file)}:${lineOf(node)}`)
    })
  }
  t.ok(SIGN_IN_PATH.startsWith('/') && spelled.some((at) => at.startsWith('contract/endpoints.ts:')), `contract/endpoints.ts spells ${SIGN_IN_PATH}`)
  t.strictSame(
    spelled.filter((at) => !at.startsWith('contract/endpoints.ts:')),
    [],
  )
})

// ---------------------------------------------------------------------------------------------
// State ownership: Redis and the clock

t.test(
  'Redis: every key is named by session/redis-keys.ts, every script lives in session/redis-scripts.ts, and writes that must survive a failover go through durableWrite',
  async (t) => {
    // Redis Cluster runs a multi-key command or script only on one hash slot: the keys one
    // operation touches get their common hash tag in one place, and a script written elsewhere
    // (an eval, a MULTI) would escape the review of which keys it touches together.
    const callers = methodCallers(['eval', 'evalsha', 'defineCommand', 'multi'])
    t.ok(callers.get('defineCommand')?.includes('session/redis-scripts.ts'), 'redis-scripts.ts defines the scripts')
    const scripts = ['eval', 'evalsha', 'defineCommand'].flatMap((name) => callers.get(name) ?? []).filter((from) => from !== 'session/redis-scripts.ts')
    t.strictSame(scripts, [], 'no Lua script outside redis-scripts.ts')
    t.strictSame(callers.get('multi') ?? [], [], 'no MULTI: a script says which keys it touches together')
    const writes = usesOf([exported('session/redis-client.ts', 'durableWrite')]).filter((use) => use.kind === 'call')
    for (const from of ['session/redis-store.ts', 'session/redis-refresh-coordinator.ts', 'session/revocation.ts']) {
      t.ok(
        writes.some((use) => use.path === from),
        `${from} writes through durableWrite`,
      )
    }
  },
)

t.test('what judges by time reads the injected clock: no Date.now() in the session, authentication, check and cache modules', async (t) => {
  // The process chooses one clock (runtime/process-state.ts) and hands it down (lib/clock.ts): a
  // module that also read the system's time would judge part of an expiry on another clock, and a
  // test moving the gateway's time would not move it.
  const onTheClock = [
    'lib/ttl-cache.ts',
    'oidc/bearer.ts',
    'oidc/client.ts',
    'oidc/dpop.ts',
    'oidc/jti-replay.ts',
    'access/authenticate.ts',
    'access/checker.ts',
    'session/cipher.ts',
    'session/cookie-store.ts',
    'session/cookies.ts',
    'session/lifecycle.ts',
    'session/memory-store.ts',
    'session/redis-refresh-coordinator.ts',
    'session/redis-store.ts',
    'session/refresh-coordinator.ts',
    'session/revocation.ts',
  ]
  const readsSystemTime = (file: ts.SourceFile): boolean => {
    let reads = false
    walk(file, (node) => {
      const dateNow = ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && node.name.text === 'now'
      const newDate = ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && (node.arguments?.length ?? 0) === 0
      reads ||= dateNow || newDate
    })
    return reads
  }
  t.ok(readsSystemTime(sourceAt('lib/clock.ts')), "lib/clock.ts's system clock reads Date.now (the reader finds it)")
  t.strictSame(
    onTheClock.filter((path) => readsSystemTime(sourceAt(path))),
    [],
  )
  const takers = new Set(usesOf([exported('lib/clock.ts', 'Clock')]).map((use) => use.path))
  t.strictSame(
    onTheClock.filter((path) => !takers.has(path)),
    ['session/cookies.ts'],
    "each takes a Clock (cookies.ts its cipher's)",
  )
})

// ---------------------------------------------------------------------------------------------
// What is off is not loaded

t.test('what is off is not loaded: the static imports of `openid-gateway run` reach no gRPC, OpenTelemetry or Redis client', async (t) => {
  // gRPC (server.extAuthzGrpcPort), the OpenTelemetry SDK and API (telemetry.tracing; lib/otel.ts)
  // and ioredis (a Redis store) are imported where the feature is configured, so that a gateway
  // without them does not carry their modules (docs/performance.md, Memory). `import type` costs
  // nothing at run time; `export ... from` loads the module as an import does.
  const optional = /^(@grpc\/|@opentelemetry\/|ioredis$|protobufjs$)/
  const packages = new Set(
    sourceFiles.flatMap((file) =>
      importsOf(file)
        .filter((i) => i.kind !== 'type' && optional.test(i.to))
        .map((i) => i.to.split('/')[0]),
    ),
  )
  t.strictSame([...packages].sort(), ['@grpc', '@opentelemetry', 'ioredis', 'protobufjs'], 'src/ imports each of them somewhere')
  const reached = new Map<string, string>()
  const seen = new Set<string>()
  const visit = (path: string): void => {
    if (seen.has(path)) return
    seen.add(path)
    for (const i of importsOf(sourceAt(path))) {
      if (i.kind !== 'static') continue
      if (i.spec.startsWith('.')) visit(i.to)
      else if (!reached.has(i.to)) reached.set(i.to, i.from)
    }
  }
  visit('cli.ts')
  t.ok(seen.has('app/app.ts') && reached.has('fastify'), `the walk follows the imports (${seen.size} modules, ${reached.size} packages)`)
  const loaded = [...reached].filter(([spec]) => optional.test(spec)).map(([spec, from]) => `${spec} (${from})`)
  t.strictSame(loaded, [])
})

t.test('tests and benchmarks load the gateway from build/ (#src/...), never a module of src/ itself', async (t) => {
  // A process that loaded a module both from src/ (type-stripped) and from build/ would hold two
  // copies of it: two classes of one name (instanceof fails across them) and two module states.
  // package.json "imports" sends #src/* to build/ at run time; tsc checks it against src/.
  const root = ROOT
  const sources = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
    )
  const reaching: string[] = []
  for (const dir of ['test', 'bench']) {
    const files = sources(join(root, dir))
    t.ok(files.length > 0, `${dir}/ has TypeScript files`)
    for (const file of files) {
      const text = readFileSync(file, 'utf8')
      const { importedFiles } = ts.preProcessFile(text, true, true)
      const mocked = [...text.matchAll(/mockImport(?:<[\s\S]*?>)?\(\s*['"]([^'"]+)['"]/g)].map((m) => m[1] ?? '')
      for (const spec of [...importedFiles.map((f) => f.fileName), ...mocked]) {
        if (spec.startsWith('.') && relative(SRC, join(file, '..', spec)).split('/')[0] !== '..') reaching.push(`${relative(root, file)}: ${spec}`)
      }
    }
  }
  t.strictSame(reaching, [])
})
