import { randomUUID } from 'node:crypto'
import t from 'tap'
import type WebSocket from 'ws'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { closeCode, echo, openSocket } from '../fixtures/http.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'

// An open WebSocket does not outlive the access it was opened with: it is
// closed with 1008 (policy violation, RFC 6455 7.4.1) when its session is logged out, here or by
// the provider's back-channel logout, and when its credential expires. (A reload that refuses it:
// test/runtime/live.test.ts.)

async function socketOf(stack: Stack, headers: Record<string, string>): Promise<WebSocket> {
  const ws = await openSocket(`${stack.gw.replace('http', 'ws')}/socket`, headers)
  if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
  t.teardown(() => ws.terminate())
  // One echo: the socket is relayed end to end (and tracked) before the test acts.
  await echo(ws, 'ping')
  return ws
}

for (const store of ['cookie', 'memory'] as const) {
  t.test(`${store} store: logout closes the session's open WebSocket with 1008, not another session's`, async (t) => {
    const stack = await startStack(t, { upstreams: [{ name: 'app', websocket: true }], config: { session: { store } } })
    const alice = await stack.signedIn('alice')
    const bob = await stack.signedIn('bob')
    const aliceSocket = await socketOf(stack, { cookie: alice.cookieHeader(`${stack.gw}/socket`) })
    const bobSocket = await socketOf(stack, { cookie: bob.cookieHeader(`${stack.gw}/socket`) })
    const aliceClosed = closeCode(aliceSocket)
    const res = await alice.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
    t.equal(res.status, 200)
    t.equal(await aliceClosed, 1008, "alice's socket closed: policy violation")
    t.equal(await echo(bobSocket, 'still here'), 'still here', "bob's socket relays on")
  })
}

t.test('a back-channel logout closes the open WebSockets of the sessions it ends', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', websocket: true }], backchannelLogout: true })
  const alice = await stack.signedIn('alice')
  const ws = await socketOf(stack, { cookie: alice.cookieHeader(`${stack.gw}/socket`) })
  const closed = closeCode(ws)
  const provider = stack.provider
  if (provider === undefined) throw new Error('no provider')
  const token = await provider.signJwt({ aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } }, { typ: 'logout+jwt' })
  const res = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
  t.equal(res.status, 200)
  t.equal(await closed, 1008)
})

t.test('a socket opened with a Bearer token closes when the token expires', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', websocket: true }] })
  const provider = stack.provider
  if (provider === undefined) throw new Error('no provider')
  const token = await provider.signJwt({ sub: 'service', aud: CLIENT_ID, scope: 'api' }, { typ: 'at+jwt', expiresIn: 2 })
  const ws = await socketOf(stack, { authorization: `Bearer ${token}` })
  const started = Date.now()
  t.equal(await closeCode(ws, 8000), 1008, 'closed')
  t.ok(Date.now() - started < 6000, 'at the expiry, not later')
})
