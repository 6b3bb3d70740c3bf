import fc from 'fast-check'
import t from 'tap'
import { parseConfig } from '#src/config/load'
import { substitute } from '#src/config/env'
import { COOKIE_SECRET, issuesOf, problems, resolve } from '../fixtures/config/base.ts'

const MALFORMED = 'malformed variable reference: write ${NAME} or ${NAME:-default}, and $${ for a literal ${'

const clientId = (value: string, env: Record<string, string>): string => resolve({ provider: { clientId: value } }, env).providers[0]!.clientId

t.test('${VAR} and ${VAR:-default}', async (t) => {
  t.equal(clientId('${ID}', { ID: 'from-env' }), 'from-env')
  t.equal(clientId('${ID:-fallback}', {}), 'fallback', 'unset: the default')
  t.equal(clientId('${ID:-fallback}', { ID: '' }), 'fallback', 'empty: the default, as in the shell')
  t.equal(clientId('${ID:-fallback}', { ID: 'set' }), 'set')
  t.equal(clientId('pre-${A}-${B:-b}-post', { A: 'a' }), 'pre-a-b-post', 'several references inside one string')
  t.equal(clientId('${ID:-a:-b c}', {}), 'a:-b c', 'the default is everything up to }')
  t.equal(clientId('x${ID:-}', {}), 'x', 'an empty default')
})

t.test('an empty value counts as set for ${VAR}', async (t) => {
  t.strictSame(problems({ provider: { clientId: '${ID}' } }, { ID: '' }), ['provider.clientId: must not be empty'])
})

t.test('an unset variable is an issue naming the key and the variable', async (t) => {
  t.strictSame(problems({ provider: { clientSecret: '${OIDC_CLIENT_SECRET}' } }), [
    'provider.clientSecret: environment variable OIDC_CLIENT_SECRET is not set',
  ])
  t.strictSame(
    problems({ cookies: { secrets: [COOKIE_SECRET, '${COOKIE_SECRET_OLD}'] } }),
    ['cookies.secrets[1]: environment variable COOKIE_SECRET_OLD is not set'],
    'the placeholder is not also reported as too short',
  )
  t.strictSame(
    problems({ server: { port: '${PORT}' } }),
    ['server.port: environment variable PORT is not set'],
    'the placeholder is not also reported as not an integer',
  )
  t.strictSame(problems({ provider: { clientId: '${A}${B}' } }), [
    'provider.clientId: environment variable A is not set',
    'provider.clientId: environment variable B is not set',
  ])
})

t.test('variables are looked up as own properties only', async (t) => {
  t.strictSame(problems({ provider: { clientId: '${constructor}' } }), ['provider.clientId: environment variable constructor is not set'])
})

t.test('$${ is a literal ${', async (t) => {
  t.equal(clientId('$${ID}', { ID: 'from-env' }), '${ID}')
  t.equal(clientId('a$${ID:-x}b', {}), 'a${ID:-x}b')
  t.equal(clientId('$${A}${A}', { A: 'v' }), '${A}v')
  t.equal(clientId('cost: $5, $HOME, $$', {}), 'cost: $5, $HOME, $$', 'a $ without { is plain text')
})

t.test('malformed references are issues', async (t) => {
  for (const value of ['${}', '${1ID}', '${ID', 'a ${ID:=x}', '${ID-x}', '${ ID }']) {
    t.strictSame(problems({ provider: { clientId: value } }), [`provider.clientId: ${MALFORMED}`], value)
  }
})

t.test('a malformed reference does not echo the value (it may be a literal secret)', async (t) => {
  const issues = problems({ provider: { clientSecret: 's3cr3t-${oops' } })
  t.equal(issues.length, 1)
  t.notMatch(issues[0] ?? '', 's3cr3t')
})

t.test('interpolation happens after YAML parsing: env values cannot inject YAML', async (t) => {
  const yaml = [
    'server: { publicUrl: "https://app.example.com" }',
    'provider:',
    '  issuer: https://idp.example.com',
    '  clientId: ${ID}',
    '  clientSecret: ${SECRET}',
    'cookies: { secrets: ["${COOKIE}"] }',
    'upstreams: [{ name: app, target: "http://127.0.0.1:3000" }]',
    '',
  ].join('\n')
  const injected = 'a\n b: c\nserver:\n  port: 1'
  const config = parseConfig(yaml, { ID: injected, SECRET: '"], evil: [', COOKIE: COOKIE_SECRET })
  t.equal(config.providers[0]!.clientId, injected)
  t.equal(config.providers[0]!.clientSecret, '"], evil: [')
  t.equal(config.server.port, 8080)
  t.notOk('b' in config.providers[0]!)
})

t.test('a value from the environment is not interpolated again', async (t) => {
  t.equal(clientId('${ID}', { ID: '${OTHER}', OTHER: 'no' }), '${OTHER}')
  t.equal(clientId('${ID}', { ID: '$${X}' }), '$${X}')
})

t.test('numbers and booleans from the environment are coerced where the schema says so', async (t) => {
  const config = resolve(
    {
      server: { port: '${PORT}' },
      provider: { timeoutMs: '${MS:-9999}' },
      cookies: { secure: '${SECURE}' },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', websocket: '${WS:-true}', timeoutMs: '${T}' }],
    },
    { PORT: '9000', SECURE: 'FALSE', T: '+5000' },
  )
  t.equal(config.server.port, 9000)
  t.equal(config.providers[0]!.timeoutMs, 9999)
  t.equal(config.cookies.secure, false)
  t.equal(config.upstreams[0]?.websocket, true)
  t.equal(config.upstreams[0]?.timeoutMs, 5000)
})

t.test('coercion failures are schema issues', async (t) => {
  t.strictSame(problems({ server: { port: '${PORT}' } }, { PORT: '80a' }), ['server.port: must be an integer'])
  t.strictSame(problems({ server: { port: '${PORT}' } }, { PORT: '' }), ['server.port: must be an integer'])
  t.strictSame(problems({ server: { port: '${PORT}' } }, { PORT: ' 80' }), ['server.port: must be an integer'])
  t.strictSame(problems({ server: { port: '${PORT}' } }, { PORT: '1e3' }), ['server.port: must be an integer'])
  t.strictSame(problems({ server: { port: '${PORT}' } }, { PORT: '99999' }), ['server.port: must be between 0 and 65535'])
  t.strictSame(problems({ cookies: { secure: '${S}' } }, { S: 'yes' }), ['cookies.secure: must be true or false'])
})

t.test('strings stay strings', async (t) => {
  t.equal(clientId('${ID}', { ID: '12345' }), '12345')
  t.equal(clientId('${ID}', { ID: 'true' }), 'true')
  const config = resolve({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', allow: { claims: { level: ['${LEVEL}', 3] } } }] }, { LEVEL: '3' })
  t.same(config.upstreams[0]?.allow.claims, { level: ['3', 3] }, 'claim values may be strings, so no coercion')
  t.strictSame(problems({ server: { port: '8080' } }), ['server.port: must be an integer'], 'a quoted literal is not coerced')
})

t.test('keys are never interpolated', async (t) => {
  t.strictSame(problems({ server: { '${KEY}': 1 } }, { KEY: 'port' }), ['server["${KEY}"]: unknown key'])
})

t.test('any environment value arrives unchanged as one string', async () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', minLength: 1 }), (value) => {
      const config = resolve({ provider: { clientSecret: '${S}' } }, { S: value })
      return config.providers[0]!.clientSecret === value
    }),
  )
})

t.test('substitute() on its own', async (t) => {
  t.strictSame(substitute('plain', {}), { text: 'plain', substituted: false, missing: [], malformed: false })
  t.strictSame(substitute('$${X}', { X: '1' }), { text: '${X}', substituted: false, missing: [], malformed: false })
  t.strictSame(substitute('${X}', { X: '1' }), { text: '1', substituted: true, missing: [], malformed: false })
  t.strictSame(substitute('${X}', {}), { text: '', substituted: true, missing: ['X'], malformed: false })
})

t.test('issues are collected across the whole file', async (t) => {
  const issues = issuesOf(() =>
    resolve({ provider: { clientSecret: '${S}', clientId: '${I}' }, cookies: { secrets: ['${C}'] } }, {}),
  )
  t.strictSame(issues, [
    'provider.clientId: environment variable I is not set',
    'provider.clientSecret: environment variable S is not set',
    'cookies.secrets[0]: environment variable C is not set',
  ])
})
