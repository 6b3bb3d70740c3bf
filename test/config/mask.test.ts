import t from 'tap'
import YAML from 'yaml'
import { formatEffectiveConfig, MASK, maskConfig } from '#src/config/mask'
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
