import t from 'tap'
import WebSocket from 'ws'
import { openSocket } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

t.test('WebSocket upgrades are authenticated before they are proxied', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', websocket: true }] })
  const url = `${stack.gw.replace('http', 'ws')}/socket?room=1`

  t.equal(await openSocket(url, {}), 401, 'no session: refused before the upgrade')
  t.equal(await openSocket(url, { cookie: 'ogw=forged' }), 401)
  t.equal(stack.upstream.upgrades.length, 0, 'the upstream saw no upgrade')

  const browser = await stack.signedIn('alice')
  const ws = await openSocket(url, { cookie: `theme=dark; ogw=${browser.cookie('ogw')?.value}`, 'x-forwarded-user': 'mallory' })
  if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
  t.teardown(() => ws.close())
  const echoed = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))))
  ws.send('hello')
  t.equal(await echoed, 'hello')
  const upgrade = stack.upstream.upgrades.at(-1)
  t.equal(upgrade?.url, '/socket?room=1')
  t.equal(upgrade?.headers['x-forwarded-user'], 'alice')
  t.equal(upgrade?.headers.cookie, 'theme=dark', "the gateway's cookie is not forwarded")
  t.equal(upgrade?.headers['x-forwarded-for'], '127.0.0.1')
})

t.test('an upstream without websocket: true does not upgrade', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }] })
  const result = await openSocket(`${stack.gw.replace('http', 'ws')}/socket`, {}).catch(() => 'error')
  t.equal(result, 400, 'refused at once (test/e2e/hostile-input.test.ts: the socket is closed)')
  t.equal(stack.upstream.upgrades.length, 0)
})

t.test('WebSocket Origin: the public origin or an allowed host (cross-site WebSocket hijacking)', async (t) => {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: ['app.example.com', '.corp.example.com'] } },
    upstreams: [{ name: 'app', websocket: true }],
  })
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value}`
  const url = `${stack.gw.replace('http', 'ws')}/socket`
  const attempt = async (origin: string | undefined): Promise<WebSocket | number> => {
    const headers: Record<string, string> = { cookie }
    if (origin !== undefined) headers.origin = origin
    const result = await openSocket(url, headers)
    if (typeof result !== 'number') {
      // One echo: the upstream has seen this upgrade before the next attempt is counted.
      const echoed = new Promise((resolve) => result.once('message', resolve))
      result.send('ping')
      await echoed
      result.close()
    }
    return result
  }

  for (const origin of [stack.gw, 'https://app.example.com', 'https://wiki.corp.example.com', 'https://corp.example.com', undefined]) {
    t.type(await attempt(origin), WebSocket, `allowed: ${origin ?? 'no Origin (not a browser)'}`)
  }
  const before = stack.upstream.upgrades.length
  const refused = [
    'https://evil.example.com',
    'https://app.example.com.evil.com',
    'https://evilcorp.example.com',
    'https://app.example.com:8443',
    stack.gw.replace('127.0.0.1', 'localhost'),
    `${stack.gw}/`,
    `${stack.gw}/path`,
    'https://user@app.example.com',
    'null',
    '',
    `${stack.gw}, https://evil.example.com`,
  ]
  for (const origin of refused) {
    t.equal(await attempt(origin), 403, `refused: ${JSON.stringify(origin)}`)
  }
  t.equal(stack.upstream.upgrades.length, before, 'no refused upgrade reached the upstream')
})
