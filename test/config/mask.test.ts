import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import YAML from 'yaml'
import { configSecrets, formatEffectiveConfig, MASK, maskConfig } from '#src/config/mask'
import type { GatewayConfig } from '#src/options/types'
import { CLIENT_SECRET, COOKIE_SECRET, resolve } from '../fixtures/config/base.ts'

const OLD_COOKIE_SECRET = 'old-cookie-secret-ffffffffffffffffffffffff'
const REDIS_PASSWORD = 'redis-pa55word-xyz'

// The Redis store's keys are refused by validation until the store exists (see validate.test.ts),
// but masking covers every field the configuration type can hold, so they are set directly here.
const withRedisUrl = (cfg: GatewayConfig, redisUrl: string): GatewayConfig => ({ ...cfg, session: { ...cfg.session, redisUrl } })

const config = () =>
  withRedisUrl(resolve({ cookies: { secrets: [COOKIE_SECRET, OLD_COOKIE_SECRET] } }), `rediss://gateway:${REDIS_PASSWORD}@redis.example.com:6380/2`)

t.test('the effective configuration hides every secret', async (t) => {
  const text = formatEffectiveConfig(config())
  for (const secret of [CLIENT_SECRET, COOKIE_SECRET, OLD_COOKIE_SECRET, REDIS_PASSWORD]) {
    t.notOk(text.includes(secret), `${secret.slice(0, 6)}... is not printed`)
  }
  t.match(text, "clientSecret: '********'")
  t.match(text, 'rediss://gateway:********@redis.example.com:6380/2')
})

t.test('it is YAML of the whole configuration, secrets masked', async (t) => {
  const cfg = config()
  const parsed: unknown = YAML.parse(formatEffectiveConfig(cfg))
  t.same(parsed, maskConfig(cfg))
  t.same(parsed, {
    ...cfg,
    providers: [{ ...cfg.providers[0]!, clientSecret: MASK }],
    cookies: { ...cfg.cookies, secrets: [MASK, MASK] },
    session: { ...cfg.session, redisUrl: 'rediss://gateway:********@redis.example.com:6380/2' },
  })
})

t.test('keys are printed in the documented order, defaults included', async (t) => {
  const text = formatEffectiveConfig(config())
  const topLevel = text.split('\n').filter((line) => /^\w/.test(line))
  t.strictSame(topLevel, ['server:', 'providers:', 'cookies:', 'session:', 'redirects:', 'rateLimit:', 'upstreams:', 'assertions:', 'websocket:', 'forwardAuth:', 'envoy:', 'log:', 'telemetry: {}'])
  t.match(text, /^server:\n {2}host: 0\.0\.0\.0\n {2}port: 8080\n/)
})

t.test('masking does not touch the configuration itself', async (t) => {
  const cfg = config()
  maskConfig(cfg)
  formatEffectiveConfig(cfg)
  t.equal(cfg.providers[0]!.clientSecret, CLIENT_SECRET)
  t.strictSame(cfg.cookies.secrets, [COOKIE_SECRET, OLD_COOKIE_SECRET])
  t.match(cfg.session.redisUrl, REDIS_PASSWORD)
})

t.test('redis URL credentials in every form', async (t) => {
  const masked = (redisUrl: string): unknown => {
    const result = maskConfig(withRedisUrl(resolve(), redisUrl))
    return typeof result === 'object' && result !== null && 'session' in result ? result.session : undefined
  }
  t.match(masked('redis://:only-password@127.0.0.1:6379'), { redisUrl: 'redis://:********@127.0.0.1:6379' })
  t.match(masked('redis://lone-user-is-password@127.0.0.1'), { redisUrl: 'redis://********@127.0.0.1' })
  t.match(masked('redis://127.0.0.1:6379/0?password=qs-secret&db=1'), { redisUrl: 'redis://127.0.0.1:6379/0?password=********&db=1' })
  t.match(masked('redis://127.0.0.1:6379'), { redisUrl: 'redis://127.0.0.1:6379' })
})

t.test('a configuration without optional secrets prints without them', async (t) => {
  const text = formatEffectiveConfig(resolve())
  t.notMatch(text, 'redisUrl')
  t.notOk(text.includes(CLIENT_SECRET))
  t.notOk(text.includes(COOKIE_SECRET))
})

// config/file-modes.ts looks for configSecrets' values written in the file: a secret masked here
// but missing there would be written in a readable file without a warning.
t.test('configSecrets lists exactly what maskConfig hides, by key', async (t) => {
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  const cfg = resolve({ cookies: { secrets: [COOKIE_SECRET, OLD_COOKIE_SECRET] } })
  const [first] = cfg.providers
  if (first === undefined) throw new Error('no provider')
  const every: GatewayConfig = {
    ...cfg,
    providers: [
      { ...first, name: 'staff', ssf: { delivery: 'push', pollIntervalSeconds: 60, authorization: 'Bearer ssf-push-secret', bearerToken: 'ssf-bearer-secret', credentialChange: 'end', required: false } },
      { ...first, name: 'partners', clientSecret: undefined, clientKey: key },
    ],
    assertions: { ...cfg.assertions, signingKeys: [key, '/etc/gateway/assertion.pem'] },
    session: {
      ...cfg.session,
      redisUrl: `rediss://:${REDIS_PASSWORD}@redis.example.com:6380/2?token=url-token-secret`,
      redis: { ...cfg.session.redis, password: 'data-node-secret', sentinels: { name: 'mymaster', nodes: ['s:26379'], password: 'sentinel-secret', tls: false } },
    },
  }
  const secrets = configSecrets(every)
  t.strictSame(
    secrets.map((s) => s.key),
    [
      'providers[0].clientSecret',
      'providers[0].ssf.authorization',
      'providers[0].ssf.bearerToken',
      'providers[1].clientKey',
      'cookies.secrets[0]',
      'cookies.secrets[1]',
      'assertions.signingKeys[0]',
      'session.redisUrl',
      'session.redisUrl',
      'session.redis.password',
      'session.redis.sentinels.password',
    ],
  )
  const text = formatEffectiveConfig(every)
  for (const { key: at, value } of secrets) t.notOk(text.includes(value.split('\n')[1] ?? value), `${at}: masked in the effective configuration`)
  // Every string maskConfig changed held one of the listed secrets.
  const changed: string[] = []
  const walk = (before: unknown, after: unknown): void => {
    if (typeof before === 'string') {
      if (before !== after) changed.push(before)
    } else if (typeof before === 'object' && before !== null) {
      for (const [k, v] of Object.entries(before)) walk(v, (after as Record<string, unknown>)[k])
    }
  }
  walk(every, maskConfig(every))
  t.equal(changed.length, 10, 'ten strings masked')
  for (const value of changed) t.ok(secrets.some((s) => value.includes(s.value)), 'a masked value is a listed secret')
  t.strictSame(configSecrets(resolve()).map((s) => s.key), ['provider.clientSecret', 'cookies.secrets[0]'], 'the one-provider form names provider')
})
