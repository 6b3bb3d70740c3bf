import { createRequire } from 'node:module'
import pino from 'pino'
import t from 'tap'
import { closeRedis, connectRedis, durableWrite, firstConnection } from '#src/session/redis-client'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { startStack } from '../fixtures/stack.ts'

// ioredis adds some 20 MiB to a process's resident memory: only gateways that use Redis load it.
const loaded = (): boolean => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/node_modules/ioredis/'))

t.test('ioredis is loaded only when Redis is used', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app' }] })
  t.equal((await stack.browser().fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })).status, 401, 'a request was served')
  t.notOk(loaded(), 'not by a gateway without session.redisUrl')
  const redis = await connectRedis({ url: 'redis://127.0.0.1:1', timeoutMs: 100 }, pino({ level: 'silent' }))
  redis.disconnect()
  t.ok(loaded(), 'by the Redis client, when one is made')
})

t.test('a durable write waits for replicas on its own connection; fewer than asked are logged and counted, and the write is kept', async (t) => {
  const server = await startRedis(t)
  const lines: string[] = []
  const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) })
  let unreplicated = 0
  const observer = { command: () => undefined, redirection: () => undefined, failover: () => undefined, unreplicated: () => void unreplicated++ }
  const redis = await connectRedis({ url: server.url, timeoutMs: 1000, wait: { replicas: 1, timeoutMs: 50 }, observer }, log)
  t.teardown(() => redis.disconnect())
  await firstConnection(redis, 2000)
  // Loaded here: the first test asserts that nothing loaded ioredis before it.
  const { Redis } = await import('ioredis')
  const watcher = new Redis(server.url)
  const monitor = await watcher.monitor()
  t.teardown(() => {
    monitor.disconnect()
    watcher.disconnect()
  })
  const sent: string[] = []
  monitor.on('monitor', (_time: string, [command]: string[]) => sent.push(String(command).toLowerCase()))
  const reply = await durableWrite(redis, 'k', (r) => r.set('k', 'v'))
  t.equal(reply, 'OK', "the write's own reply, not WAIT's")
  t.equal(await redis.get('k'), 'v', 'the write is kept')
  await eventually('MONITOR saw the write and the WAIT', () => sent.includes('wait'))
  t.same(
    sent.filter((c) => c === 'set' || c === 'wait'),
    ['set', 'wait'],
    'WAIT follows the write',
  )
  t.equal(unreplicated, 1, 'a standalone Redis has no replica: counted')
  t.match(lines.join(''), /fewer replicas than session\.redis\.waitReplicas/, 'and logged at warn')
})

t.test('the topology keys reach ioredis as its options say they should', async (t) => {
  const { parseConfig } = await import('#src/config/load')
  const { redisTopology } = await import('#src/session/redis-client')
  const base = {
    server: { publicUrl: 'https://app.example.com' },
    provider: { issuer: 'https://idp.example.com', clientId: 'c', clientSecret: 's' },
    cookies: { secrets: ['0123456789abcdef0123456789abcdef'] },
    upstreams: [{ name: 'app', target: 'http://127.0.0.1:1' }],
  }
  const { stringify } = await import('yaml')
  const load = (redis: Record<string, unknown>) => parseConfig(stringify({ ...base, session: { store: 'redis', redis } }), {}).session
  const silent = pino({ level: 'silent' })

  const sentinel = load({
    sentinels: { name: 'mymaster', nodes: ['s-0:26379', '[::1]:26380'], username: 'watcher', password: 'sentinel-pw', tls: true },
    username: 'gw',
    password: 'data-pw',
    tls: true,
  })
  const s = await connectRedis({ topology: redisTopology(sentinel)!, timeoutMs: 100 }, silent)
  s.disconnect()
  t.match((s as unknown as { options: Record<string, unknown> }).options, {
    name: 'mymaster',
    sentinels: [
      { host: 's-0', port: 26379 },
      { host: '::1', port: 26380 },
    ],
    sentinelUsername: 'watcher',
    sentinelPassword: 'sentinel-pw',
    enableTLSForSentinelMode: true,
    sentinelTLS: {},
    username: 'gw',
    password: 'data-pw',
    tls: {},
    // Announcements are followed by the gateway's own subscriptions (redis-client.sentinel-announcements.test.ts).
    failoverDetector: false,
  })

  const cluster = load({
    cluster: { nodes: ['redis-0:6379'], natMap: { '10.0.1.5:6379': 'redis.example.com:7000' }, dnsLookup: 'passthrough' },
    password: 'data-pw',
    tls: true,
  })
  const c = await connectRedis({ topology: redisTopology(cluster)!, timeoutMs: 100 }, silent)
  c.disconnect()
  const options = (
    c as unknown as {
      options: {
        natMap: unknown
        redisOptions: Record<string, unknown>
        dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) => void
      }
    }
  ).options
  t.same(options.natMap, { '10.0.1.5:6379': { host: 'redis.example.com', port: 7000 } }, 'natMap, as host and port')
  t.match(options.redisOptions, { password: 'data-pw', tls: {} }, 'credentials and TLS for every node')
  const looked = await new Promise<string>((resolve) => options.dnsLookup('clustercfg.example.com', (_err, address) => resolve(address)))
  t.equal(looked, 'clustercfg.example.com', 'passthrough: the name is kept, so TLS checks it')
})

t.test('a connection that ioredis ends by itself is connected again; one the gateway closes stays closed', async (t) => {
  const server = await startRedis(t)
  const lines: string[] = []
  const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) })
  const redis = await connectRedis({ url: server.url, timeoutMs: 1000 }, log)
  await firstConnection(redis, 2000)
  // What the race around a Sentinel failover did (redis-client.ts): the client took a close it
  // did not ask for as a manual one, and gave the connection up ('end').
  const internals = redis as unknown as { manuallyClosing: boolean; stream?: { destroy(): void } }
  internals.manuallyClosing = true
  internals.stream?.destroy()
  await eventually('the ended connection was opened again', async () => (await redis.ping().catch(() => undefined)) === 'PONG', 5000)
  t.match(lines.join(''), /redis connection ended by itself; connecting again/, 'and a warning said so')
  await closeRedis(redis)
  await eventually('closed by the gateway', async () => redis.status === 'end', 2000)
  // Longer than the watchdog's delay (RECONNECT_STEP_MS): nothing opens it again.
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(redis.status, 'end', 'and stays closed')
})
