import t, { type Test } from 'tap'
import { AUTHORIZATION_SERVICE } from '#src/checks/envoy-grpc/protos'
import { callbackPath } from '#src/contract/endpoints'
import { buildManagement } from '#src/ops/management'
import { serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { eventually } from '../fixtures/poll.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import { startRedis } from '../fixtures/redis.ts'
import { CLIENT_ID, CLIENT_SECRET, freePort, startStack, type Stack } from '../fixtures/stack.ts'

// The Envoy gRPC health service (grpc.health.v1.Health) and the management listener's /readyz
// agree at every moment: Envoy's health checker and Kubernetes' readiness probe see one gateway.
// grpc/grpc doc/health-checking.md: Check answers the status the server has when it is called,
// "" being the server as a whole; grpc-proto health.proto: Watch sends the current status, then
// each change. So right after /readyz first answers 200, Check("") answers SERVING (1), and right
// after /readyz answers 503, NOT_SERVING (2), whatever made it change: a provider discovered, a
// session store gone or back, a drain begun.

/** /readyz of `stack`'s gateway, served as the CLI serves it (its probes, its drain). */
async function readyz(t: Test, stack: Stack, draining: () => boolean): Promise<() => Promise<number>> {
  const management = await buildManagement({
    metrics: { contentType: 'text/plain', metrics: async () => '' },
    probes: stack.live.probes,
    draining,
  })
  t.teardown(() => management.close())
  return async () => (await management.inject({ url: '/readyz' })).statusCode
}

t.test('a provider discovered after the gateway started: SERVING as soon as /readyz answers 200; draining: NOT_SERVING with its 503', async (t) => {
  // The provider's address is known, but nothing answers there yet: discovery keeps being retried.
  const port = await freePort()
  const stack = await startStack(t, { issuer: `http://127.0.0.1:${port}` })
  let draining = false
  const status = await readyz(t, stack, () => draining)
  const grpc = await serveGatewayGrpc(t, stack, { draining: () => draining })
  t.equal(await status(), 503, 'the provider is not discovered: /readyz 503')
  t.equal(await grpc.health(''), 'NOT_SERVING', 'and the health service NOT_SERVING')

  await startTestProvider(t, {
    port,
    clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [stack.gw + callbackPath('default', false)] }],
  })
  await eventually('/readyz answers 200 once the provider is discovered', async () => (await status()) === 200, 30_000)
  t.equal(await grpc.health(''), 'SERVING', 'right after /readyz first answers 200, Check("") answers SERVING')
  t.equal(await grpc.health(AUTHORIZATION_SERVICE), 'SERVING', 'and so does the Authorization service')

  draining = true
  t.equal(await status(), 503, 'draining: /readyz 503')
  t.equal(await grpc.health(''), 'NOT_SERVING', 'and Check("") NOT_SERVING')
})

t.test('a session store that goes away and comes back: Check and Watch follow /readyz', async (t) => {
  const redis = await startRedis(t)
  const stack = await startStack(t, { config: { session: { store: 'redis', redisUrl: redis.url } } })
  const status = await readyz(t, stack, () => false)
  const grpc = await serveGatewayGrpc(t, stack)
  t.equal(await status(), 200, 'ready')
  t.equal(await grpc.health(''), 'SERVING')
  const watch = grpc.watch('')
  t.teardown(() => watch.cancel())
  t.equal(await watch.next(), 'SERVING', 'Watch sends the current status at once')

  await redis.stop()
  await eventually('/readyz answers 503 once Redis is gone', async () => (await status()) === 503)
  t.equal(await grpc.health(''), 'NOT_SERVING', 'right after /readyz answers 503, Check("") answers NOT_SERVING')
  t.equal(await watch.next(), 'NOT_SERVING', 'Watch sends the change')

  await redis.start()
  await eventually('/readyz answers 200 once Redis is back', async () => (await status()) === 200, 30_000)
  t.equal(await grpc.health(''), 'SERVING', 'right after /readyz answers 200 again, Check("") answers SERVING')
  t.equal(await watch.next(), 'SERVING', 'Watch sends that change too')
})
