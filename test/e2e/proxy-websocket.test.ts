import t from 'tap'
import WebSocket from 'ws'
import { startStack } from '../fixtures/stack.js'

function open(url: string, headers: Record<string, string>): Promise<WebSocket | number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers })
    ws.once('open', () => resolve(ws))
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0)
      res.resume()
    })
    ws.once('error', reject)
  })
}

t.test('WebSocket upgrades are authenticated before they are proxied', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', websocket: true }] })
  const url = `${stack.gw.replace('http', 'ws')}/socket?room=1`

  t.equal(await open(url, {}), 401, 'no session: refused before the upgrade')
  t.equal(await open(url, { cookie: 'ogw=forged' }), 401)
  t.equal(stack.upstream.upgrades.length, 0, 'the upstream saw no upgrade')

  const browser = await stack.signedIn('alice')
  const ws = await open(url, { cookie: `theme=dark; ogw=${browser.cookie('ogw')?.value}`, 'x-forwarded-user': 'mallory' })
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
  const result = await open(`${stack.gw.replace('http', 'ws')}/socket`, {}).catch(() => 'error')
  t.not(typeof result, 'object', 'no connection was established')
  t.equal(stack.upstream.upgrades.length, 0)
})
