import t from 'tap'
import WebSocket from 'ws'
import { openSocket } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// The pages trusted to act with the user's session (the sign-out form's Origin, a WebSocket
// handshake's Origin): the public origin, and a redirects.allowedHosts host over https. An http
// page on an allowed host is anyone's on the network path (RFC 6454 3: the scheme is part of the
// origin for that reason), so a gateway served over https refuses it; a gateway served over http
// (development, the demo) accepts its allowed hosts over http as well.

const ALLOWED_HOSTS = ['app.example.com', '.corp.example.com']

async function attempt(url: string, origin: string): Promise<WebSocket | number> {
  const result = await openSocket(url, { origin })
  if (typeof result !== 'number') result.close()
  return result
}

async function signOut(gw: string, origin: string): Promise<number> {
  const res = await fetch(`${gw}/api/v1/openid/sign-out`, {
    method: 'POST',
    headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
    body: '',
    redirect: 'manual',
  })
  return res.status
}

t.test('a gateway served over https trusts its allowed hosts over https only', async (t) => {
  const publicUrl = 'https://gateway.example.com'
  const stack = await startStack(t, {
    config: { server: { publicUrl }, redirects: { allowedHosts: ALLOWED_HOSTS } },
    upstreams: [{ name: 'app', websocket: true, auth: 'none' }],
  })
  const ws = `${stack.gw.replace('http', 'ws')}/socket`
  for (const origin of [publicUrl, 'https://app.example.com', 'https://wiki.corp.example.com']) {
    t.type(await attempt(ws, origin), WebSocket, `WebSocket from ${origin}`)
    t.equal(await signOut(stack.gw, origin), 303, `sign-out form from ${origin}`)
  }
  for (const origin of ['http://app.example.com', 'http://wiki.corp.example.com', 'http://gateway.example.com', 'HTTP://app.example.com']) {
    t.equal(await attempt(ws, origin), 403, `WebSocket from ${origin} refused`)
    t.equal(await signOut(stack.gw, origin), 400, `sign-out form from ${origin} refused`)
  }
})

t.test('a gateway served over http (development) trusts its allowed hosts over http too', async (t) => {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: ALLOWED_HOSTS } },
    upstreams: [{ name: 'app', websocket: true, auth: 'none' }],
  })
  const ws = `${stack.gw.replace('http', 'ws')}/socket`
  for (const origin of [stack.gw, 'http://app.example.com', 'https://app.example.com']) {
    t.type(await attempt(ws, origin), WebSocket, `WebSocket from ${origin}`)
    t.equal(await signOut(stack.gw, origin), 303, `sign-out form from ${origin}`)
  }
  t.equal(await attempt(ws, 'http://evil.example.com'), 403)
  t.equal(await signOut(stack.gw, 'http://evil.example.com'), 400)
})
