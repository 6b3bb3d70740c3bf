import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { REDIS_SERVER, startRedis } from '../fixtures/redis.ts'
import { call, dataNode, PortTaken, spawnOnFreePorts, spawnRedis, type Launch } from '../fixtures/redis-node.ts'

// The Redis fixtures (redis.ts, redis-sentinel.ts, redis-cluster.ts) pick free ports, release
// them and start redis-server or redis-sentinel on them. Tests run in parallel: another process
// can take a port in between, and the start failed ("redis-server on <port> exited with 1"), or
// worse, took the other process's answer for its own. Here a port is taken on purpose in that
// window, deterministically: the fixture starts the process again on fresh ports instead.

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'ogw-ports-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Takes `port` on the loopback address until the test ends, as another process would. */
async function take(t: Test, port: number): Promise<Server> {
  // It hangs up on whoever connects (the fixture, asking whether its redis answers).
  const server = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', resolve)
  })
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return server
}

t.test('a redis-server whose port was taken before it bound it starts again on a fresh port', async (t) => {
  const dir = tempDir(t)
  const given: number[] = []
  let taken: Promise<Server> | undefined
  const proc = await spawnOnFreePorts(1, ([port]) => {
    given.push(port as number)
    // Taken between the pick and redis-server's bind, on the first attempt only.
    if (given.length === 1) taken = take(t, port as number)
    const { logfile, args } = dataNode(dir, port as number)
    return { bin: REDIS_SERVER, args, port: port as number, logfile }
  })
  t.teardown(() => proc.kill())
  await taken
  t.equal(given.length, 2, 'started twice')
  t.equal(proc.addr.port, given[1], 'on the second, fresh port')
  t.not(proc.addr.port, given[0])
  t.equal(await call(proc.addr, ['PING']), 'PONG')
})

t.test('a cluster node whose bus port was taken starts again on fresh ports', async (t) => {
  const dir = tempDir(t)
  const given: number[][] = []
  const launch = (port: number, busPort: number): Launch => {
    const { logfile, args } = dataNode(dir, port)
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-port', String(busPort))
    return { bin: REDIS_SERVER, args, port, logfile }
  }
  let taken: Promise<Server> | undefined
  const proc = await spawnOnFreePorts(2, (ports) => {
    given.push(ports)
    const [port, busPort] = ports as [number, number]
    // The node's own port is free; the bus's is taken, on the first attempt only.
    if (given.length === 1) taken = take(t, busPort)
    return launch(port, busPort)
  })
  t.teardown(() => proc.kill())
  await taken
  t.equal(given.length, 2, 'started twice')
  t.equal(proc.addr.port, given[1]?.[0])
  t.match(String(await call(proc.addr, ['CLUSTER', 'INFO'])), /cluster_state:/, 'a cluster node answers')
})

t.test('a redis-server that finds its port served by another is not taken for that one', async (t) => {
  const dir = tempDir(t)
  const other = await startRedis(t)
  const { logfile, args } = dataNode(dir, other.port)
  // The other server answers PING at once, before this one has even failed to bind.
  const err = await spawnRedis(REDIS_SERVER, args, other.port, logfile).catch((e: unknown) => e)
  t.type(err, PortTaken, 'its exit (address in use) is what the start reports')
  t.match((err as Error).message, /Address already in use/, 'quoting its log')
})

t.test('a start that fails for another reason is not tried again', async (t) => {
  const dir = tempDir(t)
  let attempts = 0
  const err = await spawnOnFreePorts(1, ([port]) => {
    attempts++
    const { logfile, args } = dataNode(dir, port as number)
    return { bin: REDIS_SERVER, args: [...args, '--no-such-option', 'yes'], port: port as number, logfile }
  }).catch((e: unknown) => e)
  t.type(err, Error)
  t.notOk(err instanceof PortTaken)
  t.equal(attempts, 1, 'once')
})
