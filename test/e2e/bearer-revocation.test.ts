import { randomUUID } from 'node:crypto'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { closeCode, echo, openSocket } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'

// A back-channel logout (or a Shared Signals session-revoked) of a subject at time T refuses the
// Bearer access tokens issued to it before T, as it ends its sessions: in every store (the cookie
// store's list, and the same list beside the memory and Redis stores, shared by every replica
// through Redis), in the proxy and the check dialects (one access decision), and it closes the
// WebSockets opened with such a token. A token issued after T still works.

async function bearerStatus(gw: string, token: string): Promise<number> {
  const res = await fetch(`${gw}/hello`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  await res.body?.cancel()
  return res.status
}

/** Traefik's forward-auth check of GET /hello with the token. */
async function forwardAuthStatus(gw: string, token: string): Promise<number> {
  const host = new URL(gw).host
  const res = await fetch(`${gw}/api/v1/openid/auth`, {
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json',
      'x-forwarded-method': 'GET',
      'x-forwarded-host': host,
      'x-forwarded-uri': '/hello',
      'x-forwarded-proto': 'http',
    },
  })
  await res.body?.cancel()
  return res.status
}

async function logout(stack: Stack, sub: string): Promise<number> {
  const provider = stack.provider
  if (provider === undefined) throw new Error('no provider')
  const token = await provider.signJwt({ aud: CLIENT_ID, sub, jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } }, { typ: 'logout+jwt' })
  const res = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
  await res.body?.cancel()
  return res.status
}

function accessToken(stack: Stack, sub: string, iat: number): Promise<string> {
  const provider = stack.provider
  if (provider === undefined) throw new Error('no provider')
  return provider.signJwt({ sub, aud: CLIENT_ID, scope: 'api', iat }, { typ: 'at+jwt' })
}

const now = (): number => Math.floor(Date.now() / 1000)

for (const store of ['cookie', 'memory', 'redis'] as const) {
  t.test(`${store} store: a back-channel logout refuses the subject's Bearer tokens issued before it, and closes their WebSockets`, async (t) => {
    const session = store === 'redis' ? { store, redisUrl: (await startRedis(t)).url } : { store }
    const stack = await startStack(t, {
      upstreams: [{ name: 'app', websocket: true }],
      backchannelLogout: true,
      replicas: store === 'redis' ? 2 : 1,
      config: { session },
    })
    // Issued after the gateway started: a Redis list refuses what was issued before it started
    // (it cannot tell what an earlier, lost list held).
    const alice = await accessToken(stack, 'alice', now())
    const bob = await accessToken(stack, 'bob', now())
    t.equal(await bearerStatus(stack.gw, alice), 200, 'the token works before the logout')
    t.equal(await forwardAuthStatus(stack.gw, alice), 200, 'and the check allows it')
    const ws = await openSocket(`${stack.gw.replace('http', 'ws')}/socket`, { authorization: `Bearer ${alice}` })
    if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
    t.teardown(() => ws.terminate())
    await echo(ws, 'ping')
    const closed = closeCode(ws)
    // With Redis, a socket on another replica: closed by that replica's check of open sockets.
    const remote =
      store === 'redis'
        ? await openSocket(`${(stack.replicas[1]?.gw as string).replace('http', 'ws')}/socket`, { authorization: `Bearer ${alice}` })
        : undefined
    if (typeof remote === 'number') throw new Error(`upgrade refused with ${remote}`)
    if (remote !== undefined) {
      t.teardown(() => remote.terminate())
      await echo(remote, 'ping')
    }
    // The sweep runs every SWEEP_MS (10 s): bounded a little above it.
    const remoteClosed = remote === undefined ? undefined : closeCode(remote, 15_000)

    t.equal(await logout(stack, 'alice'), 200)
    t.equal(await bearerStatus(stack.gw, alice), 401, 'a token issued before the logout is refused')
    t.equal(await forwardAuthStatus(stack.gw, alice), 401, 'by the check dialects too')
    t.equal(await closed, 1008, 'its WebSocket is closed: policy violation')
    t.equal(await bearerStatus(stack.gw, bob), 200, "another subject's token is not")
    if (store === 'redis') {
      const other = stack.replicas[1]?.gw as string
      // Another replica rereads the list at most once a second (REFRESH_MS).
      await eventually(
        'another replica refuses it too (the list is in Redis)',
        async () => ((await bearerStatus(other, alice)) === 401 ? true : undefined),
        5000,
      )
      t.pass('another replica refuses it too (the list is in Redis)')
      t.equal(await remoteClosed, 1008, "the socket opened on the other replica is closed by that replica's sweep")
    }
    const later = await accessToken(stack, 'alice', now() + 2)
    t.equal(await bearerStatus(stack.gw, later), 200, 'a token issued after the logout works')
  })
}
