import t from 'tap'
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { exposedSecretFiles } from '#src/config/file-modes'
import { parseConfig } from '#src/config/load'
import { formatEffectiveConfig, MASK, maskConfig } from '#src/config/mask'
import { cli, configFile, SECRETS_ENV, valid } from '../fixtures/cli.ts'
import { problems, resolve } from '../fixtures/config/base.ts'
import { CLUSTER, ONE_OF, REDIS_URL, SENTINELS, session } from '../fixtures/config/values.ts'
import type { GatewayConfig } from '#src/options/types'

// Where Redis is (issue "Sessions that survive a Redis failover"): one node (session.redisUrl),
// Sentinel (session.redis.sentinels) or Cluster (session.redis.cluster), never two; the data
// nodes' username, password and tls only with the last two; waitReplicas only with one of them.
// Each refusal names its key path (config/cross-key/session.ts, config/formats.ts host-port).

const HOST_PORT = 'must be host:port (a host name or IP address, and a port from 1 to 65535)'

t.test('nodes are host:port', async (t) => {
  for (const node of ['redis-0:6379', '10.0.1.5:6379', 'redis.example.com:1', 'host:65535', '[::1]:6379']) {
    t.strictSame(problems(session({ store: 'redis', redis: { cluster: { nodes: [node] } } })), [], node)
    t.strictSame(problems(session({ store: 'redis', redis: { sentinels: { name: 'm', nodes: [node] } } })), [], `${node} (sentinel)`)
  }
  for (const node of ['redis-0', ':6379', 'host:0', 'host:99999', 'host:', '::1:6379', 'redis://redis-0:6379', 'host:port']) {
    t.strictSame(problems(session({ store: 'redis', redis: { cluster: { nodes: ['redis-0:6379', node] } } })), [`session.redis.cluster.nodes[1]: ${HOST_PORT}`], node)
    t.strictSame(problems(session({ store: 'redis', redis: { sentinels: { name: 'm', nodes: [node] } } })), [`session.redis.sentinels.nodes[0]: ${HOST_PORT}`], `${node} (sentinel)`)
  }
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: { nodes: [] } } })), ['session.redis.cluster.nodes: must not be empty'])
  t.strictSame(problems(session({ store: 'redis', redis: { sentinels: { nodes: ['s:26379'] } } })), ['session.redis.sentinels.name: is required'])
})

t.test('natMap maps an announced host:port to a reachable host:port', async (t) => {
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: { ...CLUSTER, natMap: { '10.0.1.5:6379': 'redis-0.example.com:6379' } } } })), [])
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: { ...CLUSTER, natMap: { '10.0.1.5:6379': 'redis-0.example.com' } } } })), [
    `session.redis.cluster.natMap["10.0.1.5:6379"]: ${HOST_PORT}`,
  ])
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: { ...CLUSTER, natMap: { '10.0.1.5': 'redis-0:6379' } } } })).length, 1, 'an announced address without a port')
  t.strictSame(problems(session({ store: 'redis', redis: { cluster: { ...CLUSTER, dnsLookup: 'dns' } } })), ['session.redis.cluster.dnsLookup: must be one of: system, passthrough'])
})

t.test('keyPrefix may not hold a brace (it would move every key hash tag)', async (t) => {
  const message = 'session.redis.keyPrefix: must be at most 64 printable ASCII characters without spaces or braces'
  for (const prefix of ['team-{a}:', 'a{', 'a}', '{revocations}']) t.strictSame(problems(session({ redis: { keyPrefix: prefix } })), [message], prefix)
  for (const prefix of ['team-a:', '', 'a|b~c:']) t.strictSame(problems(session({ redis: { keyPrefix: prefix } })), [], prefix)
})

t.test('defaults', async (t) => {
  const sentinel = resolve(session({ store: 'redis', redis: { sentinels: SENTINELS } })).session.redis
  t.equal(sentinel.waitTimeoutMs, 500)
  t.equal(sentinel.tls, false)
  t.equal(sentinel.sentinels?.tls, false)
  t.notOk('waitReplicas' in sentinel, 'unset: the topology decides (1 with sentinels or cluster, 0 with redisUrl)')
  t.notOk('username' in sentinel || 'password' in sentinel)
  const cluster = resolve(session({ store: 'redis', redis: { cluster: CLUSTER } })).session.redis
  t.equal(cluster.cluster?.dnsLookup, 'system')
  t.notOk(cluster.cluster !== undefined && 'natMap' in cluster.cluster)
  t.equal(cluster.tls, false)
})

const DATA_PASSWORD = 'data-node-pa55word-xyz'
const SENTINEL_PASSWORD = 'sentinel-pa55word-abc'

t.test('both Redis passwords are masked and count as secrets', async (t) => {
  const config = resolve(session({ store: 'redis', redis: { sentinels: { ...SENTINELS, password: SENTINEL_PASSWORD }, username: 'gateway', password: DATA_PASSWORD } }))
  const masked = maskConfig(config) as GatewayConfig
  t.equal(masked.session.redis.password, MASK)
  t.equal(masked.session.redis.sentinels?.password, MASK)
  t.equal(config.session.redis.password, DATA_PASSWORD, 'the configuration itself is not changed')
  const text = formatEffectiveConfig(config)
  t.notMatch(text, DATA_PASSWORD)
  t.notMatch(text, SENTINEL_PASSWORD)

  const dir = mkdtempSync(join(tmpdir(), 'ogw-redis-modes-'))
  for (const [name, redis] of [
    ['data', { cluster: CLUSTER, password: DATA_PASSWORD }],
    ['sentinel', { sentinels: { ...SENTINELS, password: SENTINEL_PASSWORD } }],
  ] as const) {
    const path = join(dir, `${name}.yaml`)
    const file = { ...valid(8080, 'http://127.0.0.1:3000'), session: { store: 'redis', redis } }
    writeFileSync(path, stringify(file))
    chmodSync(path, 0o644)
    const parsed = parseConfig(stringify(file), SECRETS_ENV, path)
    t.strictSame(
      exposedSecretFiles(parsed, path).map((f) => f.key),
      ['(configuration file)'],
      `a ${name} password written in a readable file is a secret there`,
    )
  }
})

t.test('check prints both Redis passwords masked (the CLI)', async (t) => {
  const path = configFile({
    ...valid(8080, 'http://127.0.0.1:3000'),
    session: { store: 'redis', redis: { sentinels: { ...SENTINELS, password: '${SENTINEL_PW}' }, username: 'gateway', password: '${DATA_PW}' } },
  })
  const run = await cli(['check', '--print-config', '--config', path], { ...SECRETS_ENV, SENTINEL_PW: SENTINEL_PASSWORD, DATA_PW: DATA_PASSWORD }).done
  t.equal(run.code, 0, run.stderr)
  t.notMatch(run.stdout, DATA_PASSWORD)
  t.notMatch(run.stdout, SENTINEL_PASSWORD)
  t.equal(run.stdout.match(/^\s*password: '\*{8}'$/gm)?.length, 2, 'two passwords, both masked')
  t.match(run.stdout, /name: mymaster/)
})

t.test('check and run refuse two topologies, exit 2, naming the key', async (t) => {
  const path = configFile({
    ...valid(8080, 'http://127.0.0.1:3000'),
    session: { store: 'redis', redisUrl: REDIS_URL, redis: { cluster: CLUSTER, username: 'gateway' } },
  })
  for (const command of [['check'], []]) {
    const run = await cli([...command, '--config', path], SECRETS_ENV).done
    t.equal(run.code, 2, `${command[0] ?? 'run'} exits 2`)
    t.match(run.stderr, `session.redis.cluster: must not be given with session.redisUrl: ${ONE_OF}`)
    t.match(run.stderr, 'session.redis.username: applies to sentinels and cluster only; with session.redisUrl, write it in the URL')
  }
})
