import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import YAML from 'yaml'
import { ConfigError, loadConfig, parseConfig } from '#src/config/load'
import { DEFAULT_REDACTED_QUERY_PARAMS, gatewaySchema, type JsonSchema } from '#src/options/schema'
import { COOKIE_SECRET, issuesOf } from '../fixtures/config/base.ts'

const file = (path: string): string => fileURLToPath(new URL(`../../${path}`, import.meta.url))
const fixture = (name: string): string => file(`test/fixtures/config/${name}`)
const SECRETS = { OIDC_CLIENT_SECRET: 'oidc-secret', COOKIE_SECRET }

t.test('ConfigError', async (t) => {
  const error = new ConfigError(['a: one', 'b: two'])
  t.ok(error instanceof Error)
  t.equal(error.name, 'ConfigError')
  t.strictSame(error.issues, ['a: one', 'b: two'])
  t.equal(error.message, 'invalid configuration:\n  a: one\n  b: two')
})

t.test('loadConfig reads a file', async (t) => {
  const config = loadConfig(fixture('minimal.yaml'), SECRETS)
  t.equal(config.providers[0]!.clientSecret, 'oidc-secret')
  t.strictSame(config.cookies.secrets, [COOKIE_SECRET])
})

t.test('a missing file', async (t) => {
  const path = fixture('does-not-exist.yaml')
  t.throws(() => loadConfig(path, {}), {
    name: 'ConfigError',
    issues: [`${path}: cannot read the configuration file (no such file)`],
    message: `invalid configuration:\n  ${path}: cannot read the configuration file (no such file)`,
  })
})

t.test('a directory', async (t) => {
  const path = file('test/fixtures/config')
  t.strictSame(issuesOf(() => loadConfig(path, {})), [`${path}: cannot read the configuration file (it is a directory)`])
})

t.test('a YAML syntax error names the line, and does not quote it', async (t) => {
  const path = fixture('syntax-error.yaml')
  const issues = issuesOf(() => loadConfig(path, {}))
  t.strictSame(issues, [`${path}: line 4, column 17: invalid YAML: Nested mappings are not allowed in compact mappings`])
  t.notMatch(issues.join('\n'), 'literal-secret', 'the offending line may hold a secret')
})

t.test('parseConfig reports YAML errors with or without a source name', async (t) => {
  t.strictSame(issuesOf(() => parseConfig('a: b: c', {})), ['line 1, column 4: invalid YAML: Nested mappings are not allowed in compact mappings'])
  t.strictSame(issuesOf(() => parseConfig('a: "open', {}, 'x.yaml')), ['x.yaml: line 1, column 9: invalid YAML: Missing closing "quote'])
})

t.test('duplicate keys are an error', async (t) => {
  const path = fixture('duplicate-key.yaml')
  t.strictSame(issuesOf(() => loadConfig(path, {})), [`${path}: line 4, column 3: invalid YAML: Map keys must be unique`])
})

t.test('unknown tags are an error, not a string', async (t) => {
  const path = fixture('unknown-tag.yaml')
  t.strictSame(issuesOf(() => loadConfig(path, {})), [
    `${path}: line 2, column 14: invalid YAML: Unresolved tag: tag:yaml.org,2002:js/function`,
  ])
})

t.test('several documents are an error', async (t) => {
  t.strictSame(issuesOf(() => parseConfig('a: 1\n---\nb: 2\n', {})), [
    'line 2, column 1: invalid YAML: Source contains multiple documents; please use YAML.parseAllDocuments()',
  ])
})

t.test('an alias bomb is refused', async (t) => {
  const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]']
  for (let i = 1; i < 12; i++) lines.push(`a${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]`)
  const issues = issuesOf(() => parseConfig(lines.join('\n'), {}))
  t.equal(issues.length, 1)
  t.match(issues[0], /^invalid YAML: Excessive alias count/)
})

t.test('an empty file', async (t) => {
  const path = fixture('empty.yaml')
  t.strictSame(issuesOf(() => loadConfig(path, {})), ['(root): the configuration is empty; expected server, provider, cookies and upstreams'])
  t.strictSame(issuesOf(() => parseConfig('# only a comment\n', {})), ['(root): the configuration is empty; expected server, provider, cookies and upstreams'])
})

t.test('a file that is not a mapping', async (t) => {
  t.strictSame(issuesOf(() => parseConfig('- a\n- b\n', {})), ['(root): must be a mapping'])
  t.strictSame(issuesOf(() => parseConfig('just text\n', {})), ['(root): must be a mapping'])
})

t.test('YAML 1.2: yes/no/on/off are strings, so they are not booleans', async (t) => {
  const yaml = readFileSync(fixture('minimal.yaml'), 'utf8') + '    websocket: yes\n'
  t.strictSame(issuesOf(() => parseConfig(yaml, SECRETS)), ['upstreams[0].websocket: must be true or false'])
})

t.test('empty keys in YAML take their defaults', async (t) => {
  const yaml = readFileSync(fixture('minimal.yaml'), 'utf8') + 'session:\nlog:\n  level:\n'
  const config = parseConfig(yaml, SECRETS)
  t.same(config.session, { store: 'cookie', maxAgeSeconds: 28800, maxSessionsPerUser: 10, memory: { maxSessions: 10000 }, redis: { keyPrefix: 'openid-gateway:', timeoutMs: 2000, tls: false, waitTimeoutMs: 500 } })
  t.same(config.log, { level: 'info', redactQueryParams: [...DEFAULT_REDACTED_QUERY_PARAMS] })
})

t.test('every problem of a broken file at once, in the order of the file', async (t) => {
  const path = fixture('invalid.yaml')
  t.strictSame(issuesOf(() => loadConfig(path, {})), [
    'server.publicUrl: must be an origin (scheme, host and optional port) without a path or query',
    'server.prot: unknown key',
    'provider.issuer: must be an https URL (http only with provider.allowInsecureHttp: true)',
    'provider.clientSecret: environment variable MISSING_SECRET is not set',
    'provider.scopes: must include openid',
    'cookies.secrets[0]: must be at least 32 bytes',
    'cookies.sameSite: none requires cookies.secure: true',
    'session.store: redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster',
    'upstreams[1].name: duplicate of upstreams[0].name',
    'upstreams[1].target: must be an http(s) URL',
    'log.level: must be one of: fatal, error, warn, info, debug, trace, silent',
  ])
})

t.test('config/gateway.example.yaml loads with OIDC_CLIENT_SECRET and COOKIE_SECRET', async (t) => {
  const config = loadConfig(file('config/gateway.example.yaml'), SECRETS)
  t.equal(config.server.publicUrl, 'https://app.example.com')
  t.equal(config.providers[0]!.clientSecret, 'oidc-secret')
  t.strictSame(config.cookies.secrets, [COOKIE_SECRET])
  t.strictSame(config.upstreams.map((u) => u.name), ['app', 'admin', 'orders'])
  t.strictSame(issuesOf(() => loadConfig(file('config/gateway.example.yaml'), {})), [
    'provider.clientSecret: environment variable OIDC_CLIENT_SECRET is not set',
    'cookies.secrets[0]: environment variable COOKIE_SECRET is not set',
  ])
})

function* keyNames(schema: JsonSchema): Generator<string> {
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    yield key
    yield* keyNames(child)
  }
  if (schema.items) yield* keyNames(schema.items)
}

t.test('config/gateway.example.yaml shows every key of the schema', async (t) => {
  const text = readFileSync(file('config/gateway.example.yaml'), 'utf8')
  for (const key of new Set(keyNames(gatewaySchema))) t.match(text, new RegExp(`^\\s*(# )?(- )?${key}:`, 'm'), key)
})

t.test('config/gateway.yaml loads with its environment', async (t) => {
  const env = {
    ...SECRETS,
    PUBLIC_URL: 'https://gateway.example.net',
    OIDC_ISSUER: 'https://login.example.net',
    PORT: '8443',
  }
  const config = loadConfig(file('config/gateway.yaml'), env)
  t.equal(config.server.port, 8443)
  t.equal(config.server.managementPort, 9091, 'the management listener on its default port')
  t.equal(loadConfig(file('config/gateway.yaml'), { ...env, MANAGEMENT_PORT: '9191' }).server.managementPort, 9191, 'MANAGEMENT_PORT moves it, as documented')
  t.equal(config.server.publicUrl, 'https://gateway.example.net')
  t.equal(config.providers[0]!.issuer, 'https://login.example.net')
  t.equal(config.providers[0]!.clientId, 'gateway')
  t.equal(config.upstreams[0]?.target, 'http://127.0.0.1:3000')
  t.equal(config.log.level, 'info')
  t.strictSame(issuesOf(() => loadConfig(file('config/gateway.yaml'), {})), [
    'server.publicUrl: environment variable PUBLIC_URL is not set',
    'provider.issuer: environment variable OIDC_ISSUER is not set',
    'provider.clientSecret: environment variable OIDC_CLIENT_SECRET is not set',
    'cookies.secrets[0]: environment variable COOKIE_SECRET is not set',
  ])
})

t.test('config/demo.yaml loads with the demo environment', async (t) => {
  const env = {
    DEMO_ISSUER: 'http://127.0.0.1:9400',
    DEMO_PUBLIC_URL: 'http://127.0.0.1:9402',
    DEMO_GATEWAY_PORT: '9402',
    DEMO_CLIENT_SECRET: 'demo-client-secret',
    DEMO_COOKIE_SECRET: COOKIE_SECRET,
    DEMO_UPSTREAM_URL: 'http://127.0.0.1:9401',
  }
  const config = loadConfig(file('config/demo.yaml'), env)
  t.equal(config.server.host, '127.0.0.1')
  t.equal(config.server.port, 9402)
  t.equal(config.providers[0]!.issuer, 'http://127.0.0.1:9400')
  t.equal(config.providers[0]!.clientId, 'demo-gateway')
  t.equal(config.providers[0]!.allowInsecureHttp, true)
  t.equal(config.cookies.secure, false)
  t.strictSame(config.upstreams.map((u) => [u.name, u.match.pathPrefix, u.target, u.auth, u.publicPaths, u.websocket]), [
    ['demo', '/', 'http://127.0.0.1:9401', 'required', ['/public/**'], true],
  ])
  t.equal(loadConfig(file('config/demo.yaml'), { ...env, DEMO_CLIENT_ID: 'other' }).providers[0]!.clientId, 'other')
  t.equal(config.log.level, 'info')
  t.equal(loadConfig(file('config/demo.yaml'), { ...env, DEMO_LOG_LEVEL: 'warn' }).log.level, 'warn')
})

t.test('the fixtures used by other tests stay valid YAML', async (t) => {
  for (const name of ['minimal.yaml', 'invalid.yaml']) t.type(YAML.parse(readFileSync(fixture(name), 'utf8')), 'object', name)
})
