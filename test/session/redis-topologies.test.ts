// The Sentinel and Cluster fixtures (test/fixtures/redis-sentinel.ts, redis-cluster.ts) do what
// the tests of a gateway on those topologies will count on, shown with a plain ioredis client: a
// failover keeps the data written before it and moves the primary, and a slot moved behind a
// client's back answers MOVED at its old node. (A sleeping primary, with passwords: the gateway's
// own test, test/e2e/redis-sentinel.test.ts.)

import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { eventually } from '../fixtures/poll.ts'
import { startCluster } from '../fixtures/redis-cluster.ts'
import { startSentinel } from '../fixtures/redis-sentinel.ts'

const quiet = <C extends { on(event: 'error', listener: (err: Error) => void): unknown; disconnect(): void }>(t: Test, client: C): C => {
  // Connection errors during a failover are expected; the commands' results are what is checked.
  client.on('error', () => {})
  t.teardown(() => client.disconnect())
  return client
}

t.test('Sentinel: a killed primary fails over to a replica that has the data', async (t) => {
  const topology = await startSentinel(t)
  const { sentinels, name } = topology
  const client = quiet(t, new Redis({ sentinels, name, maxRetriesPerRequest: 1 }))
  t.equal(await client.set('topology:key', 'before-failover'), 'OK')
  // Both replicas have the write before the primary goes: a failover to either keeps it.
  t.equal(await client.wait(2, 10_000), 2, 'both replicas acknowledged the write')
  const before = await topology.primary()
  t.same(before, topology.nodes[0], 'the first node started as the primary')

  const { old } = await topology.killPrimary()
  t.same(old, before)
  const promoted = await topology.awaitFailover(old)
  t.not(promoted.port, old.port, 'another node is the primary')
  t.same(await topology.primary(), promoted, 'the sentinels report it')

  const fresh = quiet(t, new Redis({ sentinels, name, maxRetriesPerRequest: 1 }))
  t.equal(await fresh.get('topology:key'), 'before-failover', 'a new client reads the key from the new primary')
  t.equal(await fresh.set('topology:key', 'after-failover'), 'OK', 'and can write')

  await topology.restart(old)
  const rejoined = quiet(t, new Redis({ host: old.host, port: old.port, maxRetriesPerRequest: 1 }))
  t.equal((await rejoined.role())[0], 'slave', 'the restarted node is a replica')
  t.equal(await eventually('the restarted replica has the new value', async () => (await rejoined.get('topology:key')) === 'after-failover' || undefined), true)
})

t.test('Cluster: a killed primary fails over, and a moved slot answers MOVED at its old node', async (t) => {
  const password = 'cluster-secret'
  const topology = await startCluster(t, { requirePass: password })
  const primaries = await topology.primaries()
  t.equal(primaries.length, 3, 'three primaries')
  t.equal(
    primaries.flatMap((p) => p.slots).reduce((n, [from, to]) => n + to - from + 1, 0),
    16384,
    'serving every slot',
  )

  const client = quiet(t, new Cluster(topology.nodes, { redisOptions: { password } }))
  // Keys on every primary.
  const keys = Array.from({ length: 12 }, (_, i) => `topology:key:${i}`)
  const owners = await Promise.all(keys.map((k) => topology.primaryForKey(k)))
  t.equal(new Set(owners.map((o) => o.port)).size, 3, 'the keys are spread over the three primaries')
  for (const key of keys) t.equal(await client.set(key, `value of ${key}`), 'OK')
  // Each primary's replica has the writes before one goes (WAIT counts for the connection that wrote).
  for (const node of client.nodes('master')) t.equal(await node.wait(1, 10_000), 1, `the replica of ${node.options.port} acknowledged`)

  const victim = keys[0] as string
  const old = await topology.primaryForKey(victim)
  await topology.killPrimary(old)
  const promoted = await topology.awaitFailover(old)
  t.not(promoted.port, old.port, 'a replica serves the slots now')
  t.same(await topology.primaryForKey(victim), promoted)

  const fresh = quiet(t, new Cluster(topology.nodes, { redisOptions: { password } }))
  for (const key of keys) t.equal(await fresh.get(key), `value of ${key}`, `${key} is readable after the failover`)
  t.equal(
    await eventually(
      'the first client follows the failover',
      async () => (await client.get(victim).catch(() => undefined)) === `value of ${victim}` || undefined,
      30_000,
    ),
    true,
  )

  // A slot moved behind a client's back: its old node redirects.
  const moving = keys[1] as string
  const slot = Number(await fresh.cluster('KEYSLOT', moving))
  const from = await topology.primaryForKey(moving)
  const to = (await topology.primaries()).find((p) => p.port !== from.port) as { host: string; port: number }
  await topology.moveSlot(slot, to)
  t.same(await topology.primaryForKey(moving), { host: to.host, port: to.port }, 'the slot is served by the other primary')
  const stale = quiet(t, new Redis({ host: from.host, port: from.port, password, maxRetriesPerRequest: 1 }))
  await t.rejects(stale.get(moving), { message: new RegExp(`^MOVED ${slot} 127\\.0\\.0\\.1:${to.port}$`) }, 'the old node answers MOVED')
  t.equal(await fresh.get(moving), `value of ${moving}`, 'the key moved with its slot')
})
