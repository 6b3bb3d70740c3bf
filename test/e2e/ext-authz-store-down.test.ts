import t from 'tap'
import { checkRequestFor, sendCheck } from '../fixtures/envoy.ts'
import { checkRequest, serveGatewayGrpc } from '../fixtures/ext-authz-grpc.ts'
import { startRedisSessions } from '../fixtures/redis-sessions.ts'

// The contract's "provider or store down: 503" for Envoy's checks, with the store down: a real
// redis-server holding the sessions, stopped. Both protocols fail closed (503, UNAVAILABLE), never
// a 401 that would send a signed-in browser round the provider, never a 200.

t.test('ext_authz with the session store down: 503 session_store_unavailable over HTTP, UNAVAILABLE over gRPC', async (t) => {
  const { stack, redisServer } = await startRedisSessions(t, { replicas: 1 })
  const client = await serveGatewayGrpc(t, stack)
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value ?? ''}`
  const host = new URL(stack.gw).host
  const headers = { cookie, accept: 'application/json' }
  const overHttp = () => sendCheck(stack.gw, checkRequestFor({ method: 'GET', path: '/page', headers: { host, ...headers } }))
  const overGrpc = () => client.check(checkRequest({ method: 'GET', host, path: '/page', scheme: 'http', headers }))
  t.equal((await overHttp()).status, 200, 'signed in while Redis runs')
  t.equal((await overGrpc()).status?.code, 0)

  await redisServer.stop()
  const http = await overHttp()
  t.equal(http.status, 503)
  t.equal((JSON.parse(http.body) as { code: string }).code, 'session_store_unavailable')
  const grpc = await overGrpc()
  t.equal(grpc.status?.code, 14, 'UNAVAILABLE')
  t.equal(grpc.denied_response?.status?.code, 503)
  t.equal((JSON.parse(grpc.denied_response?.body ?? '{}') as { code: string }).code, 'session_store_unavailable')
})
