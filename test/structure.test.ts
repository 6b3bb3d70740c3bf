import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import t from 'tap'
import ts from 'typescript'
import { SIGN_IN_PATH } from '#src/contract/endpoints'

// The layout ARCHITECTURE.md describes, kept true: the folders of src/ form no import cycle; the
// contract vocabulary (contract/) and the option types (options/) sit at the bottom; the proxy
// (access decision, forward-auth, header policy) and the sign-in endpoints are separate concerns
// that share contract/ and lib/, never each other.

const SRC = new URL('../src/', import.meta.url).pathname

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  )
}

function importsOf(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/^import[^'"]*['"]([^'"]+)['"]/gm)].flatMap((m) => (m[1] === undefined ? [] : [m[1]]))
}

function folderOf(file: string): string {
  return relative(SRC, file).split('/')[0] ?? ''
}

/** The folder a source imports from, per folder of src/ (a file at the top level is its own node). */
function folderGraph(): Map<string, Map<string, string[]>> {
  const graph = new Map<string, Map<string, string[]>>()
  for (const file of sources(SRC)) {
    const from = folderOf(file)
    for (const spec of importsOf(file)) {
      if (!spec.startsWith('.')) continue
      const to = folderOf(join(file, '..', spec)).replace(/\.js$/, '.ts')
      if (to === from) continue
      const edges = graph.get(from) ?? new Map<string, string[]>()
      edges.set(to, [...(edges.get(to) ?? []), `${relative(SRC, file)} -> ${spec}`])
      graph.set(from, edges)
    }
  }
  return graph
}

/** Each import cycle between folders, as the chain of imports that closes it. */
function folderCycles(graph: Map<string, Map<string, string[]>>): string[] {
  const cycles: string[] = []
  const done = new Set<string>()
  const visit = (node: string, trail: string[]): void => {
    const at = trail.indexOf(node)
    if (at !== -1) {
      const loop = [...trail.slice(at), node]
      cycles.push(loop.slice(0, -1).map((from, i) => graph.get(from)?.get(loop[i + 1] ?? '')?.[0] ?? from).join(' ; '))
      return
    }
    if (done.has(node)) return
    for (const to of graph.get(node)?.keys() ?? []) visit(to, [...trail, node])
    done.add(node)
  }
  for (const node of graph.keys()) visit(node, [])
  return cycles
}

t.test('the folders of src/ import each other without a cycle', async (t) => {
  // A cycle between folders means neither can be understood, tested or moved without the other.
  // The order from the bottom: contract/ and lib/, options/, the concerns (oidc/, session/,
  // proxy/, routes/, ...), config/ (which asks each concern for its rules), app/, runtime/, cli.ts.
  t.strictSame(folderCycles(folderGraph()), [])
})

t.test('contract/ imports nothing of the gateway and options/ only contract/', async (t) => {
  // The leaf option types, the schema and its defaults are what every folder reads; validation
  // (config/) asks the owners of each rule, so it sits above them and options/ below.
  const graph = folderGraph()
  t.strictSame([...(graph.get('contract')?.values() ?? [])].flat(), [])
  t.strictSame([...(graph.get('options')?.keys() ?? [])], ['contract'])
  t.strictSame([...(graph.get('app')?.keys() ?? [])].filter((to) => to === 'runtime' || to === 'cli.ts'), [], 'app/ never imports runtime/')
})

t.test('src/proxy and src/routes do not import each other', async (t) => {
  const crossings: string[] = []
  for (const file of sources(SRC)) {
    const from = folderOf(file)
    if (from !== 'proxy' && from !== 'routes') continue
    for (const spec of importsOf(file)) {
      if (!spec.startsWith('.')) continue
      const to = folderOf(join(file, '..', spec))
      if ((from === 'proxy' && to === 'routes') || (from === 'routes' && to === 'proxy')) crossings.push(`${relative(SRC, file)} -> ${spec}`)
    }
  }
  t.strictSame(crossings, [])
})

t.test('each URL character helper and the request identity have one home', async (t) => {
  const definitions = new Map<string, string[]>()
  for (const file of sources(SRC)) {
    const text = readFileSync(file, 'utf8')
    for (const name of ['asciiLower', 'hexDigitAt', 'pctByte', 'hexValue', 'isNavigation', 'escapeHtml']) {
      if (new RegExp(`function ${name}\\(`).test(text)) definitions.set(name, [...(definitions.get(name) ?? []), relative(SRC, file)])
    }
    if (/interface FastifyRequest\s*{[^}]*\bidentity\b/.test(text)) definitions.set('identity', [...(definitions.get('identity') ?? []), relative(SRC, file)])
  }
  for (const [name, files] of definitions) t.equal(files.length, 1, `${name}: ${files.join(', ')}`)
  t.strictSame(definitions.get('identity'), ['contract/identity.ts'])
})

t.test('the session lifecycle takes a refresh grant, not the provider client', async (t) => {
  t.notMatch(readFileSync(join(SRC, 'session/lifecycle.ts'), 'utf8'), /OidcClient/)
})

t.test('src/checks/envoy-grpc takes the decision as `check` and imports none of the gateway behind it', async (t) => {
  // The gRPC service is transport only: proxy/, routes/, session/, oidc/ and config/ reach it
  // through the `check` the gateway passes in, so it can be tested and replaced on its own.
  const allowed = new Set(['checks/envoy-grpc', 'lib', 'contract/errors.ts', 'ops/logging.ts', 'ops/response-headers.ts'])
  const outside: string[] = []
  for (const file of sources(SRC)) {
    if (!relative(SRC, file).startsWith('checks/envoy-grpc/')) continue
    for (const spec of importsOf(file)) {
      if (!spec.startsWith('.')) continue
      const target = relative(SRC, join(file, '..', spec)).replace(/\.js$/, '.ts')
      const folder = target.startsWith('checks/envoy-grpc/') ? 'checks/envoy-grpc' : folderOf(join(SRC, target))
      if (!allowed.has(folder) && !allowed.has(target)) outside.push(`${relative(SRC, file)} -> ${spec}`)
    }
  }
  t.strictSame(outside, [])
  t.ok(sources(join(SRC, 'checks/envoy-grpc')).length > 0, 'the folder exists')
})

t.test('the check dialects render the one decision of access/checker.ts and make none of their own', async (t) => {
  // ingress-nginx/Traefik (forward-auth.ts), Envoy HTTP (ext-authz.ts) and Envoy gRPC (which asks
  // ext-authz.ts through runtime/grpc-check.ts) take their verdict from the Checker; only check.ts, the
  // proxy guard and the open-WebSocket verdict call the access decision itself.
  const callers = sources(SRC)
    .filter((file) => /\bcreateAccessDecision\(/.test(readFileSync(file, 'utf8')))
    .map((file) => relative(SRC, file))
    .sort()
  t.strictSame(callers, ['access/checker.ts', 'access/decision.ts', 'proxy/guard.ts', 'proxy/websocket-access.ts'])
  for (const dialect of ['checks/forward-auth.ts', 'checks/envoy-http.ts']) {
    t.match(readFileSync(join(SRC, dialect), 'utf8'), /from '\.\.\/access\/checker\.js'/, `${dialect} renders the Checker's verdict`)
  }
  t.notMatch(readFileSync(join(SRC, 'runtime/grpc-check.ts'), 'utf8'), /check\.js'|guard\.js'/, "the gRPC service asks the app's extAuthzCheck, not the decision")
})

t.test('the decision reads no Fastify request: sessions, authentication and the checker take what they read', async (t) => {
  // The gRPC check decides without an HTTP request (checks/envoy-http.ts createGrpcCheck): the
  // session stores read a SessionRequest and write a SessionReply, authentication an AuthRequest,
  // the access decision and the checker a DecisionRequest.
  const decision = [...sources(join(SRC, 'session')), ...['authenticate.ts', 'checker.ts', 'decision.ts'].map((name) => join(SRC, 'access', name))]
  const fastify = decision.filter((file) => /FastifyRequest|FastifyReply/.test(readFileSync(file, 'utf8'))).map((file) => relative(SRC, file))
  t.strictSame(fastify, [])
  t.match(readFileSync(join(SRC, 'access/decision.ts'), 'utf8'), /export type AccessDecider = \(req: DecisionRequest, reply: SessionReply/)
})

t.test('the process model is src/runtime: only the entry points (cli.ts, dev/) import it, and it alone opens Redis', async (t) => {
  // buildApp is wiring: what outlives a configuration (the Redis connection, the state shared
  // through the primary) is built by runtime/process-state.ts and handed in, so app.ts and the
  // folders below it cannot reach back into the process that runs them.
  const inward: string[] = []
  const connects: string[] = []
  for (const file of sources(SRC)) {
    const from = relative(SRC, file)
    if (/\bconnectRedis\(/.test(readFileSync(file, 'utf8')) && from !== 'session/redis-client.ts') connects.push(from)
    if (folderOf(file) === 'runtime' || from === 'cli.ts' || folderOf(file) === 'dev') continue
    for (const spec of importsOf(file)) {
      if (spec.startsWith('.') && folderOf(join(file, '..', spec)) === 'runtime') inward.push(`${from} -> ${spec}`)
    }
  }
  t.strictSame(inward, [], 'nothing below the entry points imports runtime/')
  t.strictSame(connects, ['runtime/process-state.ts'], 'one place opens the Redis connection')
})

t.test('Redis: every key is named by session/redis-keys.ts, every script lives in session/redis-scripts.ts, and writes that must survive a failover go through durableWrite', async (t) => {
  // Redis Cluster runs a multi-key command or script only on one hash slot: the keys one
  // operation touches get their common hash tag in one place, and a script written elsewhere
  // (an eval, a MULTI) would escape the review of which keys it touches together.
  const scripts: string[] = []
  const transactions: string[] = []
  for (const file of sources(SRC)) {
    const from = relative(SRC, file)
    const text = readFileSync(file, 'utf8')
    if (/\.(eval|evalsha|defineCommand)\(/.test(text) && from !== 'session/redis-scripts.ts') scripts.push(from)
    if (/\.multi\(\)/.test(text)) transactions.push(from)
  }
  t.strictSame(scripts, [], 'no Lua script outside redis-scripts.ts')
  t.strictSame(transactions, [], 'no MULTI: a script says which keys it touches together')
  const stores = ['session/redis-store.ts', 'session/redis-refresh-coordinator.ts', 'session/revocation.ts']
  for (const from of stores) t.match(readFileSync(join(SRC, from), 'utf8'), /durableWrite\(/, `${from} writes through durableWrite`)
})

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
  const readers = onTheClock.filter((file) => /\bDate\.now\b|new Date\(\)/.test(readFileSync(join(SRC, file), 'utf8')))
  t.strictSame(readers, [])
  t.strictSame(onTheClock.filter((file) => !/\bClock\b/.test(readFileSync(join(SRC, file), 'utf8'))), ['session/cookies.ts'], "each takes a Clock (cookies.ts its cipher's)")
})

t.test('the gateway\'s URL space is written in one file: no string outside contract/endpoints.ts spells SIGN_IN_PATH', async (t) => {
  // The metrics, the rate limit, the reserved paths and the routes read the endpoints table; a
  // path written out elsewhere is one they would not know of. Comments may name the paths.
  const spelled: string[] = []
  for (const file of sources(SRC)) {
    const from = relative(SRC, file)
    if (from === 'contract/endpoints.ts') continue
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
    const visit = (node: ts.Node): void => {
      if ((ts.isStringLiteral(node) || ts.isTemplateLiteralToken(node) || ts.isNoSubstitutionTemplateLiteral(node)) && node.text.includes(SIGN_IN_PATH)) {
        spelled.push(`${from}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`)
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }
  t.strictSame(spelled, [])
})

t.test('what is off is not loaded: the static imports of `openid-gateway run` reach no gRPC, OpenTelemetry or Redis client', async (t) => {
  // gRPC (server.extAuthzGrpcPort), the OpenTelemetry SDK and API (telemetry.tracing; lib/otel.ts)
  // and ioredis (a Redis store) are imported where the feature is configured, so that a gateway
  // without them does not carry their modules (docs/performance.md, Memory). `import type` costs
  // nothing at run time.
  const reached = new Map<string, string>()
  const seen = new Set<string>()
  const walk = (file: string): void => {
    if (seen.has(file)) return
    seen.add(file)
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
    for (const statement of source.statements) {
      if (!ts.isImportDeclaration(statement) || statement.importClause?.isTypeOnly === true) continue
      const spec = (statement.moduleSpecifier as ts.StringLiteral).text
      if (spec.startsWith('.')) walk(join(file, '..', spec.replace(/\.js$/, '.ts')))
      else if (!reached.has(spec)) reached.set(spec, relative(SRC, file))
    }
  }
  walk(join(SRC, 'cli.ts'))
  const loaded = [...reached].filter(([spec]) => /^(@grpc\/|@opentelemetry\/|ioredis$|protobufjs$)/.test(spec)).map(([spec, from]) => `${spec} (${from})`)
  t.strictSame(loaded, [])
})

t.test('tests and benchmarks load the gateway from build/ (#src/...), never a module of src/ itself', async (t) => {
  // A process that loaded a module both from src/ (type-stripped) and from build/ would hold two
  // copies of it: two classes of one name (instanceof fails across them) and two module states.
  // package.json "imports" sends #src/* to build/ at run time; tsc checks it against src/.
  const root = new URL('../', import.meta.url).pathname
  const reaching: string[] = []
  for (const dir of ['test', 'bench']) {
    for (const file of sources(join(root, dir))) {
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
