import type { Cluster } from 'ioredis'
import pino from 'pino'
import t from 'tap'
import { connectRedis, durableWrite, firstConnection, type RedisClient, type RedisObserver } from '#src/session/redis-client'
import { runScript } from '#src/session/redis-scripts'
import { eventually } from '../fixtures/poll.ts'
import { startCluster } from '../fixtures/redis-cluster.ts'
import { sameAddr } from '../fixtures/redis-node.ts'

// A durable write (the write, then WAIT for a replica) on a real Redis Cluster whose slot map
// changes under the client: a slot moved to another primary, then a primary killed. Every write
// shape the gateway uses (SET, DEL, a script) must follow the MOVED redirection, read the slot
// map again, and reach the new primary; none may stay failing with MOVED (Redis Cluster
// specification, "MOVED Redirection" and "Replica promotion").

interface Counts {
  moved: number
  failovers: number
}

function counting(): { counts: Counts; observer: RedisObserver } {
  const counts: Counts = { moved: 0, failovers: 0 }
  const observer: RedisObserver = {
    command: () => undefined,
    redirection: (kind) => void (kind === 'moved' && counts.moved++),
    failover: () => void counts.failovers++,
    unreplicated: () => undefined,
  }
  return { counts, observer }
}

/** Each write shape of the gateway on `key`'s slot: resolves what each answered (an error's message). */
async function writeEveryWay(redis: RedisClient, tag: string): Promise<string[]> {
  const key = `dw:{${tag}}:value`
  const set = `dw:{${tag}}:set`
  const outcome = (write: Promise<unknown>): Promise<string> =>
    write.then(
      (reply) => JSON.stringify(reply),
      (err: Error) => err.message,
    )
  return [
    await outcome(durableWrite(redis, key, (r) => r.set(key, 'v', 'EX', 60))),
    await outcome(durableWrite(redis, set, (r) => runScript(r, 'ogwLink', [set], ['member', Math.floor(Date.now() / 1000) + 60]))),
    await outcome(durableWrite(redis, key, (r) => r.del(key))),
  ]
}

const EVERY_WAY_OK = ['"OK"', '1', '1']

t.test('durable writes on a Redis Cluster follow MOVED after a slot moves and after a failover', async (t) => {
  const cluster = await startCluster(t)
  const lines: string[] = []
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) })
  const { counts, observer } = counting()
  const redis = await connectRedis(
    {
      topology: { kind: 'cluster', nodes: cluster.nodes, passthroughDns: false, tls: false },
      timeoutMs: 2000,
      wait: { replicas: 1, timeoutMs: 500 },
      observer,
    },
    log,
  )
  t.teardown(() => redis.disconnect())
  await firstConnection(redis, 5000)

  t.test('a slot moved to another primary', async (t) => {
    const tag = 'moved'
    t.same(await writeEveryWay(redis, tag), EVERY_WAY_OK, 'before the move')
    const owner = await cluster.primaryForKey(`{${tag}}`)
    const target = (await cluster.primaries()).find((p) => !sameAddr(p, owner))
    if (target === undefined) throw new Error('no other primary')
    const slot = Number(await redis.cluster('KEYSLOT', `{${tag}}`))
    await cluster.moveSlot(slot, target)
    const moved = counts.moved
    t.same(await writeEveryWay(redis, tag), EVERY_WAY_OK, 'after the move, every write shape reaches the new owner')
    t.ok(counts.moved > moved, 'by following MOVED')
  })

  t.test("a shard's primary killed: once its replica is promoted, durable writes to its slots reach it", async (t) => {
    // A tag on the primary to kill, found by asking the cluster (CLUSTER KEYSLOT), not by a slot table of our own.
    const doomed = (await cluster.primaries())[0]
    if (doomed === undefined) throw new Error('no primary')
    let tag = ''
    for (let i = 0; tag === ''; i++) if (sameAddr(await cluster.primaryForKey(`{failover-${i}}`), doomed)) tag = `failover-${i}`
    t.same(await writeEveryWay(redis, tag), EVERY_WAY_OK, 'before the failure')
    const { old } = await cluster.killPrimary(doomed)
    const promoted = await cluster.awaitFailover(old)
    // The promotion is done (the promoted replica answers ROLE as master): the client follows
    // within the 2 s the documentation promises, each try bounded by the command timeout.
    const promotedAt = performance.now()
    const answers = await eventually(
      'every write shape succeeds on the failed shard',
      async () => {
        const seen = await writeEveryWay(redis, tag)
        return seen.every((answer, i) => answer === EVERY_WAY_OK[i]) ? seen : undefined
      },
      15_000,
    )
    t.same(answers, EVERY_WAY_OK, 'the failed shard takes durable writes again')
    t.ok(
      performance.now() - promotedAt < 2000 + 2000,
      `within 2 s of the promotion, plus one command timeout (${Math.round(performance.now() - promotedAt)} ms)`,
    )
    const seen: string[][] = []
    for (let i = 0; i < 5; i++) seen.push(await writeEveryWay(redis, tag))
    t.same(seen, Array(5).fill(EVERY_WAY_OK), 'and keeps taking them: no MOVED left')
    t.ok(
      (redis as Cluster).nodes('master').some((node) => node.options.port === promoted.port),
      'the slot map names the promoted replica',
    )
    t.ok(counts.failovers >= 1, 'the failover was counted')
    t.match(lines.join(''), /redis primary changed \(failover\)/, 'and logged')
  })
})
