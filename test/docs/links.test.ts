// The documentation holds together: every relative link of README.md, ARCHITECTURE.md,
// SECURITY.md and docs/ leads to a file that exists, and to a heading of it when it names one
// (GitHub's anchors); and every configuration key the pages name is one the schema accepts, so a
// renamed or removed key cannot live on in the prose.
//
// A key is recognised as GitHub readers see one: an inline code span holding a dotted key path
// (`provider.timeoutMs`, `upstreams[1].target`, `upstreams[].allow.groups`), alone or followed by
// `: value` (`session.store: redis`), whose first segment is a top-level key of the schema; or
// whose first segment is an object key of an upstream or a provider (`allow.groups`,
// `match.pathPrefix`, `bearer.introspection`), which is then read below `upstreams[]` or
// `provider`. Anything else in backticks (`app.revocations.size()`, `process.env`, file names)
// is not a key path and is not checked.

import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import t from 'tap'
import { gatewaySchema, type JsonSchema } from '#src/options/schema'
import { anchors, fencedBlocks, markdownFiles, proseLines, ROOT } from '../fixtures/markdown.ts'
import { ENDPOINT_LIST } from '#src/contract/endpoints'
import { parseConfig } from '#src/config/load'

const PAGES = [join(ROOT, 'README.md'), join(ROOT, 'ARCHITECTURE.md'), join(ROOT, 'SECURITY.md'), ...markdownFiles()]

/** A line's prose: inline code spans blanked, so that `[a](b)` written as code is no link. */
function withoutCode(line: string): string {
  return line.replace(/(`+)[^`]*?\1/g, (span) => ' '.repeat(span.length))
}

/** Inline code spans of a line, without their backticks. */
function codeSpans(line: string): string[] {
  return [...line.matchAll(/(`+)([^`]+?)\1/g)].map((m) => (m[2] ?? '').trim())
}

interface Link {
  page: string
  line: number
  target: string
}

/** Inline links and images `[text](target "title")` and reference definitions `[x]: target`. */
function links(page: string): Link[] {
  const out: Link[] = []
  for (const { line, number } of proseLines(readFileSync(page, 'utf8'))) {
    const prose = withoutCode(line)
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ page, line: number, target: m[1] ?? '' })
    const definition = /^ {0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?/.exec(prose)?.[1]
    if (definition !== undefined) out.push({ page, line: number, target: definition })
  }
  return out
}

/** A link to another site or protocol, which this test does not follow. */
const EXTERNAL = /^[a-z][a-z0-9+.-]*:/i

t.test('every relative link leads to a file that exists, and its #anchor to a heading there', async (t) => {
  const all = PAGES.flatMap(links)
  const relativeLinks = all.filter(({ target }) => !EXTERNAL.test(target))
  t.ok(relativeLinks.length > 100, `${relativeLinks.length} relative links in ${PAGES.length} pages`)
  for (const { page, line, target } of relativeLinks) {
    const where = `${relative(ROOT, page)}:${line} ${target}`
    const [path = '', fragment] = target.split('#', 2)
    const file = path === '' ? page : join(dirname(page), decodeURIComponent(path))
    if (!existsSync(file)) {
      t.fail(`${where}: no such file`)
      continue
    }
    if (fragment === undefined) continue
    if (!statSync(file).isFile() || !file.endsWith('.md')) {
      t.fail(`${where}: an anchor into something that is not a Markdown page`)
      continue
    }
    t.ok(anchors(readFileSync(file, 'utf8')).has(decodeURIComponent(fragment)), `${where}: a heading of ${relative(ROOT, file)}`)
  }
})

// A page that names a source or test file as code (`src/session/cookies.ts`,
// `test/e2e/replicas.test.ts`) sends a reader, or an auditor checking SECURITY.md's table, to
// that file: it must exist. Brace lists (`test/session/store-contract-{memory,cookie}.test.ts`)
// and globs are patterns, not files, and are not read.
const REPO_FILE = /^(?:src|test)\/[A-Za-z0-9/_.-]+\.(?:ts|mjs|js|json|yaml)$/

t.test('every source or test file a page names as code exists', async (t) => {
  let named = 0
  for (const page of PAGES) {
    for (const { line, number } of proseLines(readFileSync(page, 'utf8'))) {
      for (const span of codeSpans(line)) {
        if (!REPO_FILE.test(span)) continue
        named++
        if (!existsSync(join(ROOT, span))) t.fail(`${relative(ROOT, page)}:${number} \`${span}\`: no such file`)
      }
    }
  }
  t.ok(named > 100, `${named} file names checked`)
})

/** Every key path the schema accepts, lists written `[]`; and the maps, below which any name goes. */
function schemaKeys(): { paths: Set<string>; maps: string[] } {
  const paths = new Set<string>()
  const maps: string[] = []
  const visit = (schema: JsonSchema, prefix: string): void => {
    for (const [key, child] of Object.entries(schema.properties ?? {})) {
      const path = `${prefix}${key}`
      paths.add(path)
      if (typeof child.additionalProperties === 'object') maps.push(path)
      visit(child, `${path}.`)
      if (child.items) visit(child.items, `${path}[].`)
    }
  }
  visit(gatewaySchema, '')
  return { paths, maps }
}

const { paths: KEYS, maps: MAPS } = schemaKeys()
const TOP = new Set(Object.keys(gatewaySchema.properties ?? {}))

/** Object keys of an upstream or a provider, which prose names without their parent. */
const RELATIVE = new Map<string, string>()
for (const parent of ['upstreams[]', 'provider']) {
  for (const path of KEYS) {
    const rest = path.startsWith(`${parent}.`) ? path.slice(parent.length + 1) : undefined
    const first = rest?.split('.')[0]
    if (first !== undefined && rest !== first && !TOP.has(first)) RELATIVE.set(first, parent)
  }
}

const KEY_PATH = /^([A-Za-z][A-Za-z0-9]*(?:\[\d*\])?(?:\.[A-Za-z][A-Za-z0-9_]*(?:\[\d*\])?)+)(?::(?:\s.*)?)?$/

/** The schema's form of a key path named in prose, or undefined when the span is no key path. */
function keyNamed(span: string): string | undefined {
  const path = KEY_PATH.exec(span)?.[1]?.replace(/\[\d*\]/g, '[]').replace(/\[\]$/, '')
  const first = path?.split(/[.[]/)[0] ?? ''
  if (path === undefined) return undefined
  if (TOP.has(first)) return path
  const parent = RELATIVE.get(first)
  return parent === undefined ? undefined : `${parent}.${path}`
}

/** Fields of other software that read like a key path of ours, by page. */
const NOT_OURS: ReadonlyArray<{ page: string; span: string; whose: string }> = [
  { page: 'docs/deploy/kubernetes.md', span: 'provider.name', whose: "Istio AuthorizationPolicy's field" },
  { page: 'docs/features/tracing.md', span: 'server.address', whose: "the OpenTelemetry semantic conventions' attribute" },
]

function isKey(path: string): boolean {
  return KEYS.has(path) || MAPS.some((map) => path.startsWith(`${map}.`))
}

t.test('the key pattern reads what prose writes, and nothing else', async (t) => {
  t.equal(keyNamed('provider.timeoutMs'), 'provider.timeoutMs')
  t.equal(keyNamed('upstreams[1].target: must be an http(s) URL'), 'upstreams[].target')
  t.equal(keyNamed('cookies.secrets[1]'), 'cookies.secrets')
  t.equal(keyNamed('session.store: redis'), 'session.store')
  t.equal(keyNamed('allow.groups'), 'upstreams[].allow.groups')
  t.equal(keyNamed('bearer.introspection'), 'provider.bearer.introspection')
  for (const other of ['app.revocations.size()', 'process.env', 'redis.yaml', 'src/access/checker.ts', 'server', 'ogw_1']) t.equal(keyNamed(other), undefined, other)
  t.ok(isKey('upstreams[].allow.claims.hd'), 'any name below a map')
  t.notOk(isKey('provider.timeoutMS'))
})

t.test('every configuration key the pages name is one the schema accepts', async (t) => {
  let named = 0
  for (const page of PAGES) {
    for (const { line, number } of proseLines(readFileSync(page, 'utf8'))) {
      for (const span of codeSpans(line)) {
        const key = keyNamed(span)
        if (key === undefined || NOT_OURS.some((other) => other.page === relative(ROOT, page) && other.span === span)) continue
        named++
        if (!isKey(key)) t.fail(`${relative(ROOT, page)}:${number} \`${span}\`: no key ${key} in src/options/schema.ts`)
      }
    }
  }
  t.ok(named > 300, `${named} key names checked`)
})

// docs/migrating-from-oauth2-proxy.md maps oauth2-proxy's flags and endpoints to the gateway's: its
// tables' gateway column names only what the gateway has. A key is written in full there (a bare
// `camelCase` word could be an invented key that the key pattern above does not read), an
// endpoint is one of the contract's (or the management listener's), and every row names one or
// says none. Its configuration example is one the gateway accepts.
const MIGRATION = 'docs/migrating-from-oauth2-proxy.md'
const MANAGEMENT_PATHS = ['/healthz', '/readyz', '/metrics']

t.test('the oauth2-proxy page names only keys and endpoints the gateway has', async (t) => {
  const text = readFileSync(join(ROOT, MIGRATION), 'utf8')
  const endpoints = new Set<string>([...ENDPOINT_LIST.map((e) => e.path), ...MANAGEMENT_PATHS])
  let rows = 0
  for (const { line, number } of proseLines(text)) {
    const cells = line.split('|').map((c) => c.trim())
    // | oauth2-proxy | openid-gateway | What differs |
    if (cells.length !== 5 || !cells[1]?.startsWith('`') && !cells[1]?.startsWith('(')) continue
    rows++
    const gateway = cells[2] ?? ''
    const where = `${MIGRATION}:${number}`
    t.ok(codeSpans(gateway).length > 0 || /^none\b/.test(gateway), `${where}: names a key or endpoint, or says none`)
    for (const span of codeSpans(gateway)) {
      const key = keyNamed(span)
      const endpoint = /^(?:(?:GET|POST|DELETE) )?(\/[^?\s]*)/.exec(span)?.[1]
      if (key !== undefined) t.ok(isKey(key), `${where}: \`${span}\` is a key of src/options/schema.ts`)
      else if (endpoint !== undefined) t.ok(endpoints.has(endpoint), `${where}: \`${span}\` is an endpoint of src/contract/endpoints.ts or the management listener`)
      else t.notMatch(span, /^[a-z]+[A-Z][A-Za-z]*(?::|$)/, `${where}: \`${span}\` is written as a full key path`)
    }
  }
  t.ok(rows >= 40, `${rows} rows`)
})

t.test('the oauth2-proxy page\'s configuration is one the gateway accepts', async (t) => {
  const page = { file: MIGRATION, text: readFileSync(join(ROOT, MIGRATION), 'utf8') }
  const yaml = fencedBlocks(page).filter((b) => b.lang === 'yaml')
  t.equal(yaml.length, 1)
  const config = parseConfig(yaml[0]?.body ?? '', { OIDC_CLIENT_SECRET: 'client-secret', COOKIE_SECRET: 'c'.repeat(32) }, MIGRATION)
  t.same(config.upstreams[0]?.allow.emailDomains, ['example.com'])
})
