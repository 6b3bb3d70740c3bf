import t from 'tap'
import { Redis } from 'ioredis'
import pino from 'pino'
import { GatewayError } from '#src/contract/errors'
import { DEFAULT_PROVIDER } from '#src/options/types'
import type { Tokens } from '#src/oidc/client'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { connectRedis, firstConnection } from '#src/session/redis-client'
import { RedisKeys } from '#src/session/redis-keys'
import { RedisRefreshCoordinator } from '#src/session/redis-refresh-coordinator'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'

const SECRET = 'coordinator-test-secret-0123456789abcdef'
const keys = new RedisKeys('test:')
/** The session a coordinator refreshes: its id, and whose it is (its keys carry the user's tag). */
const session = (id: string) => ({ id, provider: DEFAULT_PROVIDER, claims: { sub: 'alice' } })
const user = keys.userTag({ provider: DEFAULT_PROVIDER, sub: 'alice' })

/**
 * A provider that rotates refresh tokens with reuse detection: a spent token revokes the grant.
 * Each redemption answers once `answer` resolves (a provider's latency, ended by the test).
 */
function rotatingProvider(answer: () => Promise<unknown> = async () => undefined) {
  let current = 'rt-0'
  let serial = 0
  const state = { redeemed: [] as string[], revoked: false }
  const grant = (token: string) => async (): Promise<Tokens> => {
    state.redeemed.push(token)
    await answer()
    if (token !== current || state.revoked) {
      state.revoked = true
      throw new GatewayError('refresh_token_invalid', 'reused refresh token')
    }
    serial++
    current = `rt-${serial}`
    return { accessToken: `at-${serial}`, expiresAt: Math.floor(Date.now() / 1000) + 60, refreshToken: current, idToken: undefined, claims: undefined }
  }
  return { state, grant }
}

t.test('refresh coordination across replicas through a real Redis', async (t) => {
  const server = await startRedis(t)
  const cipher = new CookieCipher([SECRET], systemClock)
  const replica = async (options: { lockMs?: number; waitMs?: number } = {}) => {
    const redis = await connectRedis({ url: server.url, timeoutMs: 1000 }, pino({ level: 'silent' }))
    t.teardown(() => redis.disconnect())
    await firstConnection(redis, 1000)
    return {
      redis,
      coordinator: new RedisRefreshCoordinator({ redis, keys, cipher, lockMs: options.lockMs ?? 5000, waitMs: options.waitMs ?? 10000, clock: systemClock }),
    }
  }
  const a = await replica()
  const b = await replica()
  const raw = new Redis(server.url)
  t.teardown(() => raw.disconnect())

  t.test('concurrent refreshes of one session on two replicas redeem the token once and all succeed', async (t) => {
    // The provider answers once both replicas have asked Redis for the lock (one SET NX each: a
    // replica's own callers share its one attempt), so the other one is surely left waiting.
    const setCalls = async (): Promise<number> => Number(/^cmdstat_set:calls=(\d+)/m.exec(await raw.info('commandstats'))?.[1] ?? 0)
    const before = await setCalls()
    const provider = rotatingProvider(() => eventually('both replicas ask for the lock', async () => (await setCalls()) >= before + 2))
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).coordinator.redeem(session('session-1'), 'rt-0', provider.grant('rt-0'))),
    )
    t.same(provider.state.redeemed, ['rt-0'], 'the provider saw the token once')
    t.notOk(provider.state.revoked)
    t.same(new Set(results.map((r) => r.accessToken)), new Set(['at-1']), 'every caller got the fresh tokens')
    t.equal(results[1]?.refreshToken, 'rt-1')

    const late = await b.coordinator.redeem(session('session-1'), 'rt-0', provider.grant('rt-0'))
    t.equal(late.accessToken, 'at-1', 'a request still carrying the spent token gets the fresh result (grace)')
    t.same(provider.state.redeemed, ['rt-0'], 'without a second redemption')

    const [resultKey] = await raw.keys('test:*:refreshed:*')
    const sealed = (await raw.get(resultKey ?? '')) ?? ''
    t.ok(sealed.length > 0, 'the result is kept in Redis')
    t.notMatch(sealed, 'at-1', 'sealed: no access token readable')
    t.notMatch(sealed, 'rt-1', 'sealed: no refresh token readable')
    const ttl = await raw.pttl(resultKey ?? '')
    t.ok(ttl > 0 && ttl <= 30_000, 'and only for the grace period')
    t.same(await raw.keys('test:*:refresh-lock:*'), [], 'the lock was released')
  })

  t.test('a token the provider did not rotate is not remembered: redeemed again next time', async (t) => {
    let calls = 0
    const grant = async (): Promise<Tokens> => {
      calls++
      return { accessToken: `plain-${calls}`, expiresAt: undefined, refreshToken: undefined, idToken: undefined, claims: undefined }
    }
    t.equal((await a.coordinator.redeem(session('session-2'), 'same', grant)).accessToken, 'plain-1')
    t.equal((await b.coordinator.redeem(session('session-2'), 'same', grant)).accessToken, 'plain-2')
  })

  t.test('a lock holder that died: its lock expires and the next request redeems', async (t) => {
    const provider = rotatingProvider()
    await raw.set(keys.refreshLock(user, 'session-3'), 'dead-holder', 'PX', 400)
    const started = Date.now()
    const result = await a.coordinator.redeem(session('session-3'), 'rt-0', provider.grant('rt-0'))
    t.equal(result.accessToken, 'at-1')
    t.ok(Date.now() - started >= 350, 'it waited for the expiry')
    t.same(provider.state.redeemed, ['rt-0'])
  })

  t.test('the wait is bounded: 503, never a second redemption', async (t) => {
    const impatient = await replica({ waitMs: 300 })
    const provider = rotatingProvider()
    await raw.set(keys.refreshLock(user, 'session-4'), 'slow-holder', 'PX', 10_000)
    const error = await impatient.coordinator.redeem(session('session-4'), 'rt-0', provider.grant('rt-0')).catch((err: unknown) => err)
    t.ok(error instanceof GatewayError)
    t.match(error, { code: 'session_store_unavailable', status: 503, headers: { 'retry-after': '1' } })
    t.same(provider.state.redeemed, [], 'the token was not redeemed')
  })

  t.test('a holder slower than its lock: the other replica waits for its result and never redeems the token again', async (t) => {
    const slowA = await replica({ lockMs: 300 })
    const slowB = await replica({ lockMs: 300 })
    let release = (): void => undefined
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    // The provider answers A only once A's lock has expired and B has asked Redis again since.
    const provider = rotatingProvider(() => held)
    const lockKey = keys.refreshLock(user, 'session-6')
    const first = slowA.coordinator.redeem(session('session-6'), 'rt-0', provider.grant('rt-0'))
    await eventually('A is redeeming, and its lock has expired', async () => provider.state.redeemed.length === 1 && (await raw.exists(lockKey)) === 0)
    const scriptCalls = async (): Promise<number> => {
      const stats = await raw.info('commandstats')
      return ['eval', 'evalsha'].reduce((n, c) => n + Number(new RegExp(`^cmdstat_${c}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0), 0)
    }
    const before = await scriptCalls()
    const second = slowB.coordinator.redeem(session('session-6'), 'rt-0', provider.grant('rt-0'))
    await eventually(
      'B has claimed after the expiry (and waits, or redeems)',
      async () => provider.state.redeemed.length > 1 || (await scriptCalls()) >= before + 3,
    )
    release()
    const [fromA, fromB] = await Promise.all([first, second.catch((err: unknown) => err)])
    t.same(provider.state.redeemed, ['rt-0'], 'the provider saw the token once')
    t.notOk(provider.state.revoked, 'the grant was not revoked')
    t.equal(fromA.accessToken, 'at-1')
    t.match(fromB, { accessToken: 'at-1' }, "B answers with A's result")
  })

  t.test('a failed redemption is over: the next request, on any replica, tries again at once (the 502 keeps the session)', async (t) => {
    const impatient = await replica({ waitMs: 300 })
    const timedOut = async (): Promise<Tokens> => {
      throw new GatewayError('provider_unavailable', 'the provider did not answer in time')
    }
    const failed = await a.coordinator.redeem(session('session-7'), 'rt-0', timedOut).catch((err: unknown) => err)
    t.match(failed, { code: 'provider_unavailable' })
    const provider = rotatingProvider()
    const tokens = await impatient.coordinator.redeem(session('session-7'), 'rt-0', provider.grant('rt-0'))
    t.equal(tokens.refreshToken, 'rt-1', 'redeemed by the other replica, not held back until the attempt expires')
    t.same(provider.state.redeemed, ['rt-0'])
  })

  t.test('Redis unreachable: 503 session_store_unavailable, the token is not redeemed', async (t) => {
    const provider = rotatingProvider()
    await server.stop()
    t.teardown(() => server.start())
    const error = await a.coordinator.redeem(session('session-5'), 'rt-0', provider.grant('rt-0')).catch((err: unknown) => err)
    t.match(error, { code: 'session_store_unavailable', status: 503 })
    t.same(provider.state.redeemed, [])
  })
})
