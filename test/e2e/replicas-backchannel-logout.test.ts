import t from 'tap'
import { rawRequest } from '../fixtures/http.js'
import { KEY_PREFIX, startRedisSessions } from '../fixtures/redis-sessions.js'

// The whole production path at once: two replicas sharing sessions through a real redis-server,
// the user signs out at the real oidc-provider's own page, the provider POSTs its logout token to
// one replica (the registered back-channel URI), and the session is refused by both.

const JSON_ACCEPT = { accept: 'application/json' }

t.test('a back-channel logout from the real provider, received by one replica, ends the session on both', async (t) => {
  const { stack, raw } = await startRedisSessions(t, { backchannelLogout: true })
  const [a, b] = [stack.replicas[0]?.gw ?? '', stack.replicas[1]?.gw ?? '']
  const delivered: string[] = []
  stack.provider?.provider.on('backchannel.success', () => delivered.push('ok'))
  stack.provider?.provider.on('backchannel.error', (_ctx: unknown, err: Error) => delivered.push(err.message))

  const ended = await stack.signedIn('alice')
  const kept = await stack.signedIn('alice')
  const cookieOf = (browser: typeof ended): string => `ogw=${browser.cookie('ogw')?.value}`
  const statusOn = async (gw: string, cookie: string): Promise<number> =>
    (await rawRequest(gw, '/hello', { headers: { ...JSON_ACCEPT, cookie } })).status
  for (const gw of [a, b]) {
    t.equal(await statusOn(gw, cookieOf(ended)), 200, `signed in, on ${gw === a ? 'A' : 'B'}`)
    t.equal(await statusOn(gw, cookieOf(kept)), 200, `a second provider session of alice, on ${gw === a ? 'A' : 'B'}`)
  }
  const before = (await raw.keys(`${KEY_PREFIX}session:*`)).length

  const done = await ended.confirmProviderLogout(`${stack.provider?.issuer}/session/end`)
  await done.response.body?.cancel()
  t.same(delivered, ['ok'], 'the provider delivered the logout token and the gateway accepted it')

  t.equal(await statusOn(a, cookieOf(ended)), 401, 'replica A (which received the logout) refuses the session')
  t.equal(await statusOn(b, cookieOf(ended)), 401, 'replica B refuses it too')
  t.equal((await raw.keys(`${KEY_PREFIX}session:*`)).length, before - 1, 'exactly one session was deleted from Redis')
  t.equal(await statusOn(b, cookieOf(kept)), 200, 'the other provider session of the same user is left alone')

  const again = await ended.signIn(`${b}/api/v1/openid/redirect`, 'alice')
  await again.body?.cancel()
  t.equal(await statusOn(a, cookieOf(ended)), 200, 'a new sign-in (through B) works on A')
})
