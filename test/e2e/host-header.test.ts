import { connect } from 'node:net'
import t from 'tap'
import { rawRequest } from '../fixtures/http.js'
import { startStack } from '../fixtures/stack.js'

// Host header poisoning (OWASP WSTG-INPV-17): an application that builds absolute links from
// X-Forwarded-Host (a password-reset email) must only ever see a host the gateway serves, whatever
// Host a client sends; and RFC 9112 3.2 requires 400 for a request with more than one Host line.

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
      { name: 'app', auth: 'none' },
      { name: 'hosted', match: { pathPrefix: '/hosted', hosts: ['hosted.example.com'] }, auth: 'none' },
    ],
  })
  const own = new URL(stack.gw).host

  t.test('two Host header lines are 400, whatever their values', async (t) => {
    t.equal(await rawStatus(stack.gw, `GET /x HTTP/1.1\r\nHost: ${own}\r\nHost: evil.example\r\nConnection: close\r\n\r\n`), 400)
    t.equal(await rawStatus(stack.gw, `GET /x HTTP/1.1\r\nHost: ${own}\r\nhOST: ${own}\r\nConnection: close\r\n\r\n`), 400, 'the same value twice too')
    const before = stack.upstream.requests.length
    t.equal(await rawStatus(stack.gw, `GET /x HTTP/1.1\r\nHost: ${own}\r\nConnection: close\r\n\r\n`), 200, 'one is served')
    t.equal(stack.upstream.requests.length, before + 1, 'only the request with one Host reached the upstream')
  })

  t.test('X-Forwarded-Host is a host the gateway serves, else the public URL\'s', async (t) => {
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
    }
  })
})

t.test("a trusted peer's X-Forwarded-Host passes only when the gateway serves it", async (t) => {
  const stack = await startStack(t, { config: { server: { trustedProxies: ['127.0.0.0/8'] }, redirects: { allowedHosts: ['app.example.com'] } }, upstreams: [{ name: 'app', auth: 'none' }] })
  const own = new URL(stack.gw).host
  for (const [forwarded, expected] of [['app.example.com', 'app.example.com'], ['evil.example', own], ['app.example.com, evil.example', own]] as const) {
    const before = stack.upstream.requests.length
    await rawRequest(stack.gw, '/x', { headers: { 'x-forwarded-host': forwarded } })
    t.equal(stack.upstream.requests[before]?.headers['x-forwarded-host'], expected, forwarded)
  }
})
