import type { Redis } from 'ioredis'
import pino from 'pino'
import t from 'tap'
import { closeRedis, connectRedis, firstConnection, switchedAway } from '#src/session/redis-client'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { call } from '../fixtures/redis-node.ts'
import { startSentinel } from '../fixtures/redis-sentinel.ts'

// Every sentinel announces a failover (`+switch-master`) on its own, as it learns of it: the
// leader at once, the others from its hello messages, seconds apart. ioredis's failover detector
// reconnected at each of them, so a gateway already on the new primary was disconnected again
// after service was back, and the commands in flight failed: a sign-in after the failover
// answered 503 (test/e2e/redis-sentinel.test.ts, under load). An announcement of the primary the
// client is on is now ignored; one that names another primary still moves it at once.
//
// The announcements here are published on a plain redis-server listed among the sentinels (a
// sentinel accepts PUBLISH only on its hello channel); the real sentinels, listed first, are the
// ones the client asks for the primary.

t.test('switchedAway: only an announcement of another primary of this master', async (t) => {
  const at = { host: '127.0.0.1', port: 6380 }
  t.notOk(switchedAway('mymaster 127.0.0.1 6379 127.0.0.1 6380', 'mymaster', at), 'the primary the client is on')
  t.ok(switchedAway('mymaster 127.0.0.1 6380 127.0.0.1 6381', 'mymaster', at), 'another primary')
  t.ok(switchedAway('mymaster 127.0.0.1 6379 10.0.0.1 6380', 'mymaster', at), 'another host')
  t.notOk(switchedAway('other 127.0.0.1 6379 127.0.0.1 6381', 'mymaster', at), 'another master')
  t.ok(switchedAway('mymaster 127.0.0.1 6379 127.0.0.1 6380', 'mymaster', undefined), 'a client whose address is unknown asks again')
  t.notOk(switchedAway('mymaster', 'mymaster', at), 'a truncated message')
})

t.test('Sentinel: an announcement of the primary the client is on leaves its commands alone; one of another primary reconnects it', async (t) => {
  const sentinel = await startSentinel(t)
  const announcer = await startRedis(t)
  const announcerAddr = { host: '127.0.0.1', port: announcer.port }
  const client = (await connectRedis(
    { topology: { kind: 'sentinel', name: sentinel.name, sentinels: [...sentinel.sentinels, announcerAddr], sentinelTls: false, tls: false }, timeoutMs: 2000 },
    pino({ level: 'silent' }),
  )) as Redis
  t.teardown(() => closeRedis(client))
  await firstConnection(client, 10_000)
  t.equal(client.status, 'ready')
  let reconnections = 0
  client.on('reconnecting', () => reconnections++)
  const primary = await sentinel.primary()
  await eventually('the client listens to the announcer', async () => {
    const reply = await call(announcerAddr, ['PUBSUB', 'NUMSUB', '+switch-master'])
    return Array.isArray(reply) && Number(reply[1]) >= 1
  })

  // A command in flight (the primary answers it after half a second) across the announcement.
  const inFlight = client.call('DEBUG', 'SLEEP', '0.5')
  await call(announcerAddr, ['PUBLISH', '+switch-master', `${sentinel.name} 127.0.0.1 1 ${primary.host} ${primary.port}`])
  t.equal(await inFlight.catch((err: Error) => err.message), 'OK', 'the command in flight is answered')
  t.equal(await client.get('announcement:key'), null, 'and the next')
  t.equal(reconnections, 0, 'the connection was kept')

  await call(announcerAddr, ['PUBLISH', '+switch-master', `${sentinel.name} ${primary.host} ${primary.port} 127.0.0.1 1`])
  await eventually('an announcement of another primary makes the client ask the sentinels again', () => reconnections > 0)
  await eventually('and it is back, on the primary they report', () => client.status === 'ready')
  t.equal(client.stream.remotePort, primary.port)
})
