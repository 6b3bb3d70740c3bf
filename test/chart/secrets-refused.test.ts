import { generateKeyPairSync } from 'node:crypto'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { type Values, template } from '../fixtures/chart.ts'

// Secrets never reach the ConfigMap, which Kubernetes' built-in `view` role may read (and whoever
// reads a cookie secret can forge a session for any user): `helm template` refuses every secret
// the gateway's `check` masks (src/config/mask.ts) when it is written literally under `config`,
// naming the key and the value to use instead and never printing the secret; a ${VARIABLE}
// reference, and a key file's path, are accepted.

const ISSUER = 'https://idp.example.com/realms/main'
const BASE: Values = { publicUrl: 'https://app.example.com', secrets: { existingSecret: 'openid-gateway' } }
const provider = (extra: Values = {}): Values => ({ provider: { issuer: ISSUER, clientId: 'openid-gateway', ...extra } })

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
const PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
const JWK = JSON.stringify(privateKey.export({ format: 'jwk' }))
const BASE64_PEM = Buffer.from(PEM).toString('base64')
const SECRET = 'a-literal-secret-value-0123456789abcdef'

interface Case {
  /** The field of mask.ts it stands for. */
  masked: string
  what: string
  config: Values
  /** The refusal: the key named, then what to use instead. */
  key: RegExp
  instead: RegExp
}

const KEY_INSTEAD =
  /put it in the Secret \(secrets\.files, or a key of secrets\.existingSecret\), set secrets\.mount: true and write its path \/etc\/openid-gateway-secrets\/<key>, or write a \$\{VARIABLE\}/
const FROM_ENV = /write a \$\{VARIABLE\} that extraEnv \(valueFrom\.secretKeyRef\) or envFrom \(secretRef\) sets from a Secret/

const REFUSED: Case[] = [
  {
    masked: 'clientSecret',
    what: 'a client secret',
    config: provider({ clientSecret: SECRET }),
    key: /config\.provider\.clientSecret is written in the values and would be in the ConfigMap, readable with Kubernetes' view role/,
    instead:
      /leave it out \(the chart sets \$\{OIDC_CLIENT_SECRET\} from the Secret: secrets\.clientSecret, or the key secrets\.clientSecretKey of secrets\.existingSecret\)/,
  },
  {
    masked: 'clientSecret',
    what: 'a client secret under providers[]',
    config: {
      providers: [
        { name: 'main', issuer: ISSUER, clientId: 'a', clientSecret: '${A_SECRET}' },
        { name: 'other', issuer: ISSUER, clientId: 'b', clientSecret: SECRET },
      ],
    },
    key: /config\.providers\[1\]\.clientSecret is written in the values/,
    instead: FROM_ENV,
  },
  {
    masked: 'clientSecret',
    what: 'a client secret with a literal default',
    config: provider({ clientSecret: '${OIDC_CLIENT_SECRET:-fallback-secret}' }),
    key: /config\.provider\.clientSecret is written in the values/,
    instead: FROM_ENV,
  },
  {
    masked: 'clientKey',
    what: 'a PEM private key',
    config: provider({ clientAuthMethod: 'private_key_jwt', clientKey: PEM }),
    key: /config\.provider\.clientKey is a private key written in the values/,
    instead: KEY_INSTEAD,
  },
  {
    masked: 'clientKey',
    what: 'a JWK private key under providers[]',
    config: { providers: [{ name: 'main', issuer: ISSUER, clientId: 'a', clientAuthMethod: 'private_key_jwt', clientKey: JWK }] },
    key: /config\.providers\[0\]\.clientKey is a private key/,
    instead: KEY_INSTEAD,
  },
  {
    masked: 'clientKey',
    what: 'a base64 PEM private key',
    config: provider({ clientAuthMethod: 'private_key_jwt', clientKey: BASE64_PEM }),
    key: /config\.provider\.clientKey is a private key/,
    instead: KEY_INSTEAD,
  },
  {
    masked: 'ssf.authorization',
    what: 'the SSF push Authorization',
    config: provider({ ssf: { authorization: 'Bearer 0123456789abcdef0123' } }),
    key: /config\.provider\.ssf\.authorization is written in the values/,
    instead: FROM_ENV,
  },
  {
    masked: 'ssf.bearerToken',
    what: "the SSF transmitter's token",
    config: provider({ ssf: { delivery: 'poll', bearerToken: SECRET } }),
    key: /config\.provider\.ssf\.bearerToken is written in the values/,
    instead: FROM_ENV,
  },
  {
    masked: 'assertions.signingKeys',
    what: 'an assertion signing key',
    config: { ...provider(), assertions: { signingKeys: ['/etc/openid-gateway-secrets/old.pem', PEM] } },
    key: /config\.assertions\.signingKeys\[1\] is a private key written in the values/,
    instead: KEY_INSTEAD,
  },
  {
    masked: 'cookies.secrets',
    what: 'a cookie secret',
    config: { ...provider(), cookies: { secrets: ['${COOKIE_SECRET}', SECRET] } },
    key: /config\.cookies\.secrets\[1\] is written in the values and would be in the ConfigMap, readable with Kubernetes' view role \(and whoever reads a cookie secret can forge a session for any user\)/,
    instead:
      /leave config\.cookies\.secrets out \(the chart sets \$\{COOKIE_SECRET\}, \$\{COOKIE_SECRET_2\}, \.\.\. from the Secret: secrets\.cookieSecrets, or the keys secrets\.cookieSecretKeys of secrets\.existingSecret\)/,
  },
  {
    masked: 'session.redisUrl',
    what: 'a Redis URL with a password',
    config: { ...provider(), session: { store: 'redis', redisUrl: `rediss://gateway:${SECRET}@redis:6379/0` } },
    key: /config\.session\.redisUrl carries a password written in the values/,
    instead:
      /use redis\.enabled with redis\.url without the password \(the chart adds \$\{REDIS_PASSWORD\} from the Secret: secrets\.redisPassword, or the key secrets\.redisPasswordKey of secrets\.existingSecret\), or write a \$\{VARIABLE\} in its place/,
  },
  {
    masked: 'session.redisUrl',
    what: 'a Redis URL with a password parameter',
    config: { ...provider(), session: { store: 'redis', redisUrl: `redis://redis:6379/0?password=${SECRET}` } },
    key: /config\.session\.redisUrl carries a password/,
    instead: /redis\.url without the password/,
  },
  {
    masked: 'session.redis.password',
    what: 'a Redis password',
    config: { ...provider(), session: { store: 'redis', redis: { cluster: { nodes: ['r:6379'] }, password: SECRET } } },
    key: /config\.session\.redis\.password is written in the values/,
    instead: /use redis\.auth \(the chart sets \$\{REDIS_PASSWORD\} from the Secret/,
  },
  {
    masked: 'session.redis.sentinels.password',
    what: "the sentinels' password",
    config: { ...provider(), session: { store: 'redis', redis: { sentinels: { name: 'm', nodes: ['s:26379'], password: SECRET } } } },
    key: /config\.session\.redis\.sentinels\.password is written in the values/,
    instead: FROM_ENV,
  },
]

for (const c of REFUSED) {
  t.test(`refused: ${c.what}`, async (t) => {
    const result = template([], { ...BASE, config: c.config })
    t.not(result.status, 0, 'helm template fails')
    t.match(result.stderr, c.key, 'naming the key')
    t.match(result.stderr, c.instead, 'and the value to use instead')
    for (const secret of [SECRET, 'fallback-secret', 'Bearer 0123', PEM.split('\n')[1] ?? PEM, BASE64_PEM.slice(0, 40), JWK.slice(0, 40)]) {
      t.notOk(result.stderr.includes(secret), 'never printing the secret')
    }
  })
}

const ACCEPTED: [string, Values][] = [
  [
    'every secret as a ${VARIABLE}',
    {
      ...provider({ clientSecret: '${OIDC_CLIENT_SECRET}', ssf: { authorization: '${SSF_PUSH_AUTHORIZATION}' } }),
      cookies: { secrets: ['${COOKIE_SECRET}', '${COOKIE_SECRET_2}'] },
      session: { store: 'redis', redisUrl: 'rediss://gateway:${REDIS_PASSWORD}@redis:6379/0?password=${REDIS_PASSWORD}' },
    },
  ],
  [
    'keys as file paths or variables',
    {
      ...provider({ clientAuthMethod: 'private_key_jwt', clientKey: '/etc/openid-gateway-secrets/client-key.pem' }),
      assertions: { signingKeys: ['${ASSERTION_KEY}', '/etc/openid-gateway-secrets/assertion.pem'] },
    },
  ],
  ['a Redis URL without credentials', { ...provider(), session: { store: 'redis', redisUrl: 'redis://redis:6379/0?db=1' } }],
  [
    'Redis passwords as variables',
    {
      ...provider(),
      session: { store: 'redis', redis: { sentinels: { name: 'm', nodes: ['s:26379'], password: '${SENTINEL_PASSWORD}' }, password: '${REDIS_PASSWORD}' } },
    },
  ],
]

for (const [what, config] of ACCEPTED) {
  t.test(`accepted: ${what}`, async (t) => {
    const result = template([], { ...BASE, config, secrets: { existingSecret: 'openid-gateway', clientSecretKey: '' } })
    t.equal(result.status, 0, result.stderr)
    t.match(result.stdout, 'kind: ConfigMap', 'the ConfigMap renders')
  })
}

t.test('every secret mask.ts masks has its refusal here', async (t) => {
  // The fields maskConfig overwrites (`provider.X`, `copy.a.b`), as written in src/config/mask.ts.
  const source = readFileSync(new URL('../../src/config/mask.ts', import.meta.url), 'utf8')
  const body = source.slice(source.indexOf('export function maskConfig'), source.indexOf('export function formatEffectiveConfig'))
  const masked = [...body.matchAll(/\b(?:provider|copy)\.([\w.?]+) = /g)].map((m) => (m[1] ?? '').replace(/\?/g, ''))
  t.ok(masked.length >= 9, `mask.ts masks ${masked.length} fields`)
  const covered = new Set(REFUSED.map((c) => c.masked))
  t.same(
    masked.filter((field) => !covered.has(field)),
    [],
    'each is refused when written literally under config',
  )
})
