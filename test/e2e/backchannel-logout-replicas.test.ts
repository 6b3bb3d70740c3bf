import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { buildStandaloneApp } from '../../src/runtime/process-state.js'
import type { GatewayConfig } from '../../src/options/types.js'
import { REFRESH_MS } from '../../src/session/revocation.js'
import { startRedis } from '../fixtures/redis.js'
import { freePort, startStack } from '../fixtures/stack.js'

// Two replicas of the gateway with the cookie store, behind one public URL, sharing the
// revocation list in a real Redis: the real oidc-provider's back-channel logout reaches one of
// them, and the other refuses the session too (within REFRESH_MS). Redis stopped: the check
// answers 503, it never lets the session through.

t.test('cookie store, two replicas sharing Redis: a back-channel logout ends the session on both', async (t) => {
  const redisServer = await startRedis(t)
  const stack = await startStack(t, { backchannelLogout: true })
  // The stack's gateway makes way for replica one on its port (the URL registered at the provider).
  await stack.app.close()
  const port = new URL(stack.gw).port
  const config: GatewayConfig = { ...stack.config, session: { ...stack.config.session, redisUrl: redisServer.url } }
  const one = await buildStandaloneApp(config)
  t.teardown(() => one.close())
  await one.listen({ host: '127.0.0.1', port: Number(port) })
  const twoPort = await freePort()
  const two = await buildStandaloneApp({ ...config, server: { ...config.server, port: twoPort } })
  t.teardown(() => two.close())
  await two.listen({ host: '127.0.0.1', port: twoPort })
  await Promise.all([one.providerReady, two.providerReady])
  const replicaTwo = `http://127.0.0.1:${twoPort}`

  const browser = await stack.signedIn('alice')
  const get = async (origin: string) => {
    const res = await browser.fetch(`${origin}/hello`, { headers: { accept: 'application/json' } })
    await res.body?.cancel()
    return res
  }
  t.equal((await get(stack.gw)).status, 200, 'replica one')
  t.equal((await get(replicaTwo)).status, 200, 'replica two reads the same cookie session')

  const done = await browser.confirmProviderLogout(`${stack.provider?.issuer}/session/end`)
  await done.response.body?.cancel()
  t.equal((await get(stack.gw)).status, 401, 'replica one, which received the logout token, refuses at once')
  await sleep(REFRESH_MS + 50)
  t.equal((await get(replicaTwo)).status, 401, 'replica two refuses it too')
  t.equal(await one.revocations?.size(), 1, 'one entry in the shared list')

  const again = await stack.signedIn('alice')
  const fresh = await again.fetch(`${replicaTwo}/hello`, { headers: { accept: 'application/json' } })
  t.equal(fresh.status, 200, 'a new sign-in works on both')
  await fresh.body?.cancel()

  await redisServer.stop()
  await sleep(REFRESH_MS + 50)
  const down = await again.fetch(`${replicaTwo}/hello`, { headers: { accept: 'application/json' } })
  t.equal(down.status, 503, 'Redis unreachable: the session is not let through unchecked')
  t.match(await down.json(), { code: 'session_store_unavailable' })
})
