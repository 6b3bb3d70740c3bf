import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ROOT, userPages } from '../fixtures/markdown.ts'

// Documented = true: every environment variable the documentation names is read
// by something the project ships. README.md named MANAGEMENT_PORT, which nothing read.
//
// Named: an upper-case word with an underscore anywhere in README.md, docs/**/*.md and
// docker/README.md (`OIDC_CLIENT_SECRET`), or a single upper-case word in a code span or a
// `${...}` reference (`PORT`), minus NOT_VARIABLES. Read: a `${NAME` reference in config/**/*.yaml
// or docker/** (the image, the Kubernetes manifests), an `env` entry, ENV or ARG line there,
// `process.env.NAME` or the string 'NAME' in src/ or bench/ (runtime code that names a variable
// in a constant), one of Node's own (BY_NODE), or one of Go's runtime that the bench's page says
// it leaves unset for oauth2-proxy (BY_GO). OPERATORS_OWN lists the names offered for the
// operator's own file.

/** Upper-case words the documentation uses that are not environment variables. */
const NOT_VARIABLES = new Set([
  // HTTP methods, gRPC status codes, signals, Redis commands and options, npm's error codes
  'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE',
  'INVALID_ARGUMENT', 'PERMISSION_DENIED', 'UNAUTHENTICATED', 'UNAVAILABLE', 'NOT_FOUND', 'DEADLINE_EXCEEDED',
  'SIGKILL', 'SIGTERM', 'SIGINT', 'SIGHUP', 'PING', 'SET', 'EXEC', 'EXAT', 'PXAT', 'WAIT', 'MOVED', 'ASK', 'EBADENGINE', 'ENOENT', 'EACCES', 'ECONNREFUSED',
  // Transport and TLS error codes, and openid-client's, as the provider-failure log lines carry them
  'ENOTFOUND', 'CERT_HAS_EXPIRED', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'ERR_TLS_CERT_ALTNAME_INVALID', 'OAUTH_RESPONSE_IS_NOT_CONFORM',
  // Another program's variable: Jaeger v1's, in the tracing page's collector example
  'COLLECTOR_OTLP_ENABLED',
  // Dockerfile instructions, token and protocol words, Istio's policy action
  'HEALTHCHECK', 'JWT', 'JWKS', 'JSON', 'HTML', 'HTTP', 'HTTPS', 'TLS', 'URL', 'CUSTOM',
  // Envoy's and Istio's path normalization values (path_with_escaped_slashes_action, pathNormalization)
  'BASE', 'MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES', 'KEEP_UNCHANGED', 'REJECT_REQUEST', 'UNESCAPE_AND_REDIRECT',
  // Placeholders inside a provider's URLs (`https://login.microsoftonline.com/TENANT_ID/v2.0`)
  'TENANT_ID', 'AUTH_SERVER_ID', 'CLIENT_ID',
  // The names the `${VAR}` syntax is explained with
  'VAR', 'VARIABLE', 'SECURE', 'X',
])
/**
 * Names the documentation suggests for the operator's own file, which no shipped file reads: the
 * key of private_key_jwt (`clientKey: ${OIDC_CLIENT_KEY}`) has no place in config/gateway.yaml,
 * whose client authenticates with a secret; the variable `googleGroups.serviceAccountKeyEnv` names
 * is read by that name, whatever the operator chooses.
 */
const OPERATORS_OWN = new Set(['OIDC_CLIENT_KEY', 'GOOGLE_SERVICE_ACCOUNT_JSON'])
/** JOSE algorithm names (`RS256`, `ES384`, ...). */
const ALGORITHM = /^(?:RS|PS|ES|HS)\d{3}$|^EDDSA$/
/** Read by Node.js itself. */
const BY_NODE = new Set(['NODE_EXTRA_CA_CERTS', 'NODE_ENV', 'NODE_OPTIONS'])
/** Read by Go's runtime in oauth2-proxy, the peer docs/performance.md measures beside the gateway. */
const BY_GO = new Set(['GOGC', 'GOMAXPROCS'])

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return name === 'node_modules' ? [] : filesUnder(path, keep)
    return keep(name) ? [path] : []
  })
}

function named(): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>()
  const add = (name: string, file: string) => {
    if (NOT_VARIABLES.has(name) || OPERATORS_OWN.has(name) || ALGORITHM.test(name)) return
    let files = found.get(name)
    if (files === undefined) found.set(name, (files = new Set()))
    files.add(file)
  }
  for (const { file, text } of userPages()) {
    for (const m of text.matchAll(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g)) add(m[0], file)
    for (const m of text.matchAll(/`([A-Z][A-Z0-9]{2,})`/g)) add(m[1] as string, file)
    for (const m of text.matchAll(/\$\{([A-Z][A-Z0-9_]*)/g)) add(m[1] as string, file)
  }
  return found
}

function read(): Set<string> {
  const names = new Set<string>([...BY_NODE, ...BY_GO])
  const shipped = [
    ...filesUnder(join(ROOT, 'config'), (n) => n.endsWith('.yaml') || n.endsWith('.yml')),
    ...filesUnder(join(ROOT, 'docker'), (n) => !n.endsWith('.md')),
  ]
  for (const path of shipped) {
    const text = readFileSync(path, 'utf8')
    for (const m of text.matchAll(/\$\{([A-Z_][A-Z0-9_]*)/g)) names.add(m[1] as string)
    for (const m of text.matchAll(/^\s*-\s*name:\s*([A-Z_][A-Z0-9_]*)\s*$/gm)) names.add(m[1] as string)
    for (const m of text.matchAll(/^ENV\s+([A-Z_][A-Z0-9_]*)=/gm)) names.add(m[1] as string)
    // A build argument is read by the image's build (`--build-arg NAME=...`).
    for (const m of text.matchAll(/^ARG\s+([A-Z_][A-Z0-9_]*)\b/gm)) names.add(m[1] as string)
    for (const m of text.matchAll(/process\.env\.([A-Z_][A-Z0-9_]*)/g)) names.add(m[1] as string)
  }
  for (const path of [...filesUnder(join(ROOT, 'src'), (n) => n.endsWith('.ts')), ...filesUnder(join(ROOT, 'bench'), (n) => n.endsWith('.ts'))]) {
    const text = readFileSync(path, 'utf8')
    for (const m of text.matchAll(/process\.env(?:\.([A-Z_][A-Z0-9_]*)|\[['"]([A-Z_][A-Z0-9_]*)['"]\])/g)) names.add((m[1] ?? m[2]) as string)
    for (const m of text.matchAll(/'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)'/g)) names.add(m[1] as string)
  }
  return names
}

t.test('every environment variable the documentation names is read by something shipped', async (t) => {
  const documented = named()
  const readers = read()
  t.ok(documented.has('OIDC_CLIENT_SECRET') && documented.has('PORT'), 'the documented variables are found')
  for (const [name, files] of [...documented].sort(([a], [b]) => a.localeCompare(b))) {
    t.ok(readers.has(name), `${name} (${[...files].join(', ')}) is read by config/*.yaml, docker/, src/ or bench/, or by Node or Go`)
  }
})

t.test('a variable nothing reads is found', async (t) => {
  t.notOk(read().has('OPENID_GATEWAY_UNREAD_EXAMPLE'), 'the readers are not everything')
})
