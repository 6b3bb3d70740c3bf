import t from 'tap'
import { REFRESH_MS } from '#src/session/revocation'
import type { Browser } from '../fixtures/browser.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { KEY_PREFIX, startRedisSessions } from '../fixtures/redis-sessions.ts'
import { startStack, type Stack } from '../fixtures/stack.ts'

// The whole production path at once: two replicas of the gateway (startStack's `replicas: 2`,
// each on its own port) share what a back-channel logout changes through a real redis-server; the
// user signs out at the real oidc-provider's own page, the provider POSTs its logout token to
// the registered back-channel URI (replica A's), and the session is refused by both. With the
// cookie store, the replicas share only the revocation list, which B reads again at most every
// REFRESH_MS: B's refusal is polled for (bounded), never slept for. With the redis store, the
// session itself is deleted: both refuse it at once.

const JSON_ACCEPT = { accept: 'application/json' }

/** How long replica B may take to see an entry of the shared revocation list: its refresh interval, and a margin for a loaded machine. */
const LIST_REFRESH_BOUND_MS = REFRESH_MS + 4000

/** Signs `browser` out at the provider and waits for the logout token's delivery; fails at once with the provider's error if it could not deliver it. */
async function logOutAtProvider(stack: Stack, browser: Browser): Promise<void> {
  const provider = stack.provider
  if (provider === undefined) throw new Error('the stack has no dev provider')
  const delivered = provider.nextBackchannelLogout()
  // Not left unhandled while the end-session page is followed.
  delivered.catch(() => undefined)
  const done = await browser.confirmProviderLogout(`${provider.issuer}/session/end`)
  await done.response.body?.cancel()
  await delivered
}

t.test(
  'cookie store, two replicas sharing the revocation list in Redis: a back-channel logout ends the session on both; Redis down, the check answers 503',
  async (t) => {
    const redis = await startRedis(t)
    const stack = await startStack(t, { replicas: 2, backchannelLogout: true, config: { session: { redisUrl: redis.url } } })
    const [a, b] = stack.replicas.map((r) => r.gw) as [string, string]
    const browser = await stack.signedIn('alice')
    const statusOn = async (gw: string, signedIn: Browser = browser): Promise<number> => {
      const res = await signedIn.fetch(`${gw}/hello`, { headers: JSON_ACCEPT })
      await res.body?.cancel()
      return res.status
    }
    t.equal(await statusOn(a), 200, 'replica A')
    t.equal(await statusOn(b), 200, 'replica B reads the same cookie session')

    await logOutAtProvider(stack, browser)
    t.equal(await statusOn(a), 401, 'replica A, which received the logout token, refuses at once')
    t.equal(
      await eventually('replica B refuses the session', async () => (await statusOn(b)) === 401, LIST_REFRESH_BOUND_MS),
      true,
      'replica B refuses it too, once it has read the list again',
    )
    t.equal(await stack.app.revocations?.size(), 1, 'one entry in the shared list')

    const again = await stack.signedIn('alice')
    t.equal(await statusOn(b, again), 200, 'a new sign-in works on B')
    t.equal(await statusOn(a, again), 200, 'and on A')

    await redis.stop()
    const down = await eventually(
      'replica B stops answering 200 with Redis down',
      async () => {
        const res = await again.fetch(`${b}/hello`, { headers: JSON_ACCEPT })
        if (res.status !== 200) return res
        await res.body?.cancel()
        return undefined
      },
      LIST_REFRESH_BOUND_MS,
    )
    t.equal(down.status, 503, 'Redis unreachable: the session is not let through unchecked')
    t.match(await down.json(), { code: 'session_store_unavailable' })
  },
)

t.test('redis store, two replicas sharing the sessions: a back-channel logout received by one ends the session on both, and only that session', async (t) => {
  const { stack, raw } = await startRedisSessions(t, { backchannelLogout: true })
  const [a, b] = stack.replicas.map((r) => r.gw) as [string, string]
  const ended = await stack.signedIn('alice')
  const kept = await stack.signedIn('alice')
  const cookieOf = (browser: Browser): string => `ogw=${browser.cookie('ogw')?.value}`
  const statusOn = async (gw: string, cookie: string): Promise<number> => (await rawRequest(gw, '/hello', { headers: { ...JSON_ACCEPT, cookie } })).status
  for (const [gw, name] of [
    [a, 'A'],
    [b, 'B'],
  ] as const) {
    t.equal(await statusOn(gw, cookieOf(ended)), 200, `signed in, on ${name}`)
    t.equal(await statusOn(gw, cookieOf(kept)), 200, `a second provider session of alice, on ${name}`)
  }
  const before = (await raw.keys(`${KEY_PREFIX}*:session:*`)).length

  await logOutAtProvider(stack, ended)
  t.equal(await statusOn(a, cookieOf(ended)), 401, 'replica A (which received the logout) refuses the session')
  t.equal(await statusOn(b, cookieOf(ended)), 401, 'replica B refuses it too')
  t.equal((await raw.keys(`${KEY_PREFIX}*:session:*`)).length, before - 1, 'exactly one session was deleted from Redis')
  t.equal(await statusOn(b, cookieOf(kept)), 200, 'the other provider session of the same user is left alone')

  const again = await ended.signIn(`${b}/api/v1/openid/redirect`, 'alice')
  await again.body?.cancel()
  t.equal(await statusOn(a, cookieOf(ended)), 200, 'a new sign-in (through B) works on A')
})
