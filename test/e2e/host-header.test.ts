import { connect } from 'node:net'
import t from 'tap'
import { echo, openSocket, rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// Host header poisoning (OWASP WSTG-INPV-17): an application that builds absolute links from
// X-Forwarded-Host or Host (a password-reset email) must only ever see a host the gateway serves,
// whatever Host a client sends; and RFC 9112 3.2 requires 400 for a request with more than one
// Host line. With passHostHeader (the default) the upstream's Host is that same served host, on
// HTTP requests and WebSocket upgrades; without it, the target's (docs/proxying.md's table).

/** The status line's code of a request written byte for byte on a fresh connection. */
function rawStatus(origin: string, request: string): Promise<number> {
  const url = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(request))
    let data = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      data += chunk
      const end = data.indexOf('\r\n')
      if (end !== -1) {
        socket.destroy()
        resolve(Number(data.slice(0, end).split(' ')[1]))
      }
    })
    socket.on('error', reject)
    socket.on('end', () => reject(new Error(`no status line: ${JSON.stringify(data)}`)))
  })
}

t.test('Host and X-Forwarded-Host', async (t) => {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: ['allowed.example.com'] } },
    upstreams: [
      { name: 'app', auth: 'none', websocket: true },
      { name: 'hosted', match: { pathPrefix: '/hosted', hosts: ['hosted.example.com'] }, auth: 'none' },
      { name: 'own-host', match: { pathPrefix: '/own-host' }, auth: 'none', websocket: true, passHostHeader: false },
    ],
  })
  const own = new URL(stack.gw).host
  const target = new URL(stack.upstream.url).host

  t.test('two Host header lines are 400, whatever their values', async (t) => {
    t.equal(await rawStatus(stack.gw, `GET /x HTTP/1.1\r\nHost: ${own}\r\nHost: evil.example\r\nConnection: close\r\n\r\n`), 400)
    t.equal(await rawStatus(stack.gw, `GET /x HTTP/1.1\r\nHost: ${own}\r\nhOST: ${own}\r\nConnection: close\r\n\r\n`), 400, 'the same value twice too')
    const before = stack.upstream.requests.length
    t.equal(await rawStatus(stack.gw, `GET /x HTTP/1.1\r\nHost: ${own}\r\nConnection: close\r\n\r\n`), 200, 'one is served')
    t.equal(stack.upstream.requests.length, before + 1, 'only the request with one Host reached the upstream')
  })

  t.test("X-Forwarded-Host is a host the gateway serves, else the public URL's", async (t) => {
    const cases: Array<[string, string]> = [
      ['evil.example', own],
      ['evil.example:8443', own],
      [own, own],
      ['allowed.example.com', 'allowed.example.com'],
      ['hosted.example.com:8443', 'hosted.example.com:8443'],
    ]
    for (const [host, expected] of cases) {
      const before = stack.upstream.requests.length
      const path = host.startsWith('hosted.') ? '/hosted/x' : '/x'
      const res = await rawRequest(stack.gw, path, { headers: { host, 'x-forwarded-host': 'evil.example' } })
      t.equal(res.status, 200, host)
      t.equal(stack.upstream.requests[before]?.headers['x-forwarded-host'], expected, `Host ${host}`)
      t.equal(stack.upstream.requests[before]?.headers.host, expected, `Host ${host}: the upstream's Host is the same served host (passHostHeader)`)
    }
  })

  t.test("passHostHeader: false sends the target's host, and X-Forwarded-Host as ever", async (t) => {
    for (const host of ['evil.example', own]) {
      const before = stack.upstream.requests.length
      t.equal((await rawRequest(stack.gw, '/own-host/x', { headers: { host } })).status, 200)
      t.equal(stack.upstream.requests[before]?.headers.host, target, `Host ${host}`)
      t.equal(stack.upstream.requests[before]?.headers['x-forwarded-host'], own, `Host ${host}`)
    }
  })

  t.test("a WebSocket upgrade's Host is the served host, or the target's with passHostHeader: false", async (t) => {
    const ws = stack.gw.replace('http', 'ws')
    const cases: Array<[string, string, string]> = [
      ['/socket', 'evil.example', own],
      ['/socket', 'allowed.example.com', 'allowed.example.com'],
      ['/own-host/socket', 'evil.example', target],
    ]
    for (const [path, host, expected] of cases) {
      const socket = await openSocket(`${ws}${path}`, { host })
      if (typeof socket === 'number') throw new Error(`upgrade refused with ${socket}`)
      // One echo: the upstream has seen this upgrade before it is read.
      await echo(socket, 'ping')
      socket.close()
      const upgrade = stack.upstream.upgrades.at(-1)
      t.equal(upgrade?.url, path)
      t.equal(upgrade?.headers.host, expected, `${path} with Host ${host}`)
      t.equal(upgrade?.headers['x-forwarded-host'], path === '/socket' ? expected : own)
    }
  })
})

t.test("a trusted peer's X-Forwarded-Host passes only when the gateway serves it", async (t) => {
  const stack = await startStack(t, {
    config: { server: { trustedProxies: ['127.0.0.0/8'] }, redirects: { allowedHosts: ['app.example.com'] } },
    upstreams: [{ name: 'app', auth: 'none' }],
  })
  const own = new URL(stack.gw).host
  for (const [forwarded, expected] of [
    ['app.example.com', 'app.example.com'],
    ['evil.example', own],
    ['app.example.com, evil.example', own],
  ] as const) {
    const before = stack.upstream.requests.length
    await rawRequest(stack.gw, '/x', { headers: { 'x-forwarded-host': forwarded } })
    t.equal(stack.upstream.requests[before]?.headers['x-forwarded-host'], expected, forwarded)
  }
})
