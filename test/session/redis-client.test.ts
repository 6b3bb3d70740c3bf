import { createRequire } from 'node:module'
import pino from 'pino'
import t from 'tap'
import { connectRedis, durableWrite, firstConnection } from '../../src/session/redis-client.js'
import { eventually } from '../fixtures/poll.js'
import { startRedis } from '../fixtures/redis.js'
import { startStack } from '../fixtures/stack.js'

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
  const replies = await durableWrite(redis, (p) => p.set('k', 'v'))
  t.same(replies, ['OK'], "the write's own replies, without WAIT's")
  t.equal(await redis.get('k'), 'v', 'the write is kept')
  await eventually('MONITOR saw the write and the WAIT', () => sent.includes('wait'))
  t.same(sent.filter((c) => c === 'set' || c === 'wait'), ['set', 'wait'], 'WAIT follows the write')
  t.equal(unreplicated, 1, 'a standalone Redis has no replica: counted')
  t.match(lines.join(''), /fewer replicas than session\.redis\.waitReplicas/, 'and logged at warn')
})
