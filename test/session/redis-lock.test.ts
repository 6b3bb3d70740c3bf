import t from 'tap'
import { Redis } from 'ioredis'
import { RedisLock } from '../../src/session/redis-lock.js'
import { eventually } from '../fixtures/poll.js'
import { startRedis } from '../fixtures/redis.js'

t.test('a Redis lock against a real redis-server', async (t) => {
  const server = await startRedis(t)
  const redis = new Redis(server.url)
  t.teardown(() => redis.disconnect())
  const lock = new RedisLock(redis)
  const held = async (key: string): Promise<boolean> => (await redis.exists(key)) === 1

  t.test('one holder at a time', async (t) => {
    const token = await lock.acquire('lock:one', 5000)
    t.type(token, 'string', 'the first caller holds it')
    t.equal(await lock.acquire('lock:one', 5000), undefined, 'a second caller does not')
    t.ok(await held('lock:one'))
    t.ok(await lock.release('lock:one', token as string), 'the holder releases it')
    t.notOk(await held('lock:one'))
    t.type(await lock.acquire('lock:one', 5000), 'string', 'then another caller gets it')
  })

  t.test('only the owner releases it', async (t) => {
    const token = await lock.acquire('lock:two', 5000)
    t.notOk(await lock.release('lock:two', 'someone-else'), 'a foreign token releases nothing')
    t.ok(await held('lock:two'), 'the lock is still held')
    t.equal(await redis.get('lock:two'), token)
  })

  t.test('it expires by itself, and an expired holder cannot release the next holder', async (t) => {
    const dead = await lock.acquire('lock:three', 150)
    t.type(dead, 'string')
    // Redis expires the key (150 ms): looked at until it has.
    await eventually('the lock expires', async () => !(await held('lock:three')), 5000)
    t.notOk(await held('lock:three'), 'a holder that died leaves no lock behind')
    const next = await lock.acquire('lock:three', 5000)
    t.type(next, 'string', 'the next caller takes it')
    t.notOk(await lock.release('lock:three', dead as string), 'the late first holder releases nothing')
    t.ok(await held('lock:three'), "the next holder's lock stands")
  })
})
