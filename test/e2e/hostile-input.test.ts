import { request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { startStack, type Stack } from '../fixtures/stack.ts'

// Hostile input never gets a 500 and never hangs a socket: route-pattern syntax in gateway paths,
// any Content-Type on a body, hop-by-hop headers the upstream client refuses, and upgrades to
// upstreams that do not take WebSockets.

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** Sends a request with a body (null: none); `chunked` leaves Content-Length out. */
function send(
  origin: string,
  path: string,
  options: { method?: string; headers?: OutgoingHttpHeaders; body?: Buffer | null; chunked?: boolean } = {},
): Promise<Answer> {
  const { hostname, port } = new URL(origin)
  const body = options.body ?? null
  const headers: OutgoingHttpHeaders = { ...options.headers }
  if (body !== null && options.chunked !== true) headers['content-length'] = body.length
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method: options.method ?? 'POST', path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }))
    })
    req.on('error', reject)
    if (body !== null) req.write(body)
    req.end()
  })
}

/** Writes `bytes` and collects the answer until the server closes; 'open' if it has not after `ms`. */
function exchange(origin: string, bytes: string, ms: number): Promise<{ text: string; closed: boolean }> {
  const { hostname, port } = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) })
    const chunks: Buffer[] = []
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ text: Buffer.concat(chunks).toString('utf8'), closed: false })
    }, ms)
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ text: Buffer.concat(chunks).toString('utf8'), closed: true })
    })
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ECONNRESET') reject(err)
    })
    socket.write(bytes)
  })
}

function logCapture(): { lines: string[]; stream: { write(line: string): void }; errors(): string[] } {
  const lines: string[] = []
  return {
    lines,
    stream: { write: (line: string) => void lines.push(line) },
    errors: () => lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 50),
  }
}

t.test('gateway paths that look like route patterns are plain 404s, endpoints keep their 405', async (t) => {
  const log = logCapture()
  const stack = await startStack(t, { config: { log: { level: 'warn' } }, logStream: log.stream })
  const patterns = [
    '/api/v1/openid/**',
    '/api/v1/openid/*',
    '/api/v1/openid/:x(',
    '/api/v1/openid/:x',
    '/api/v1/openid/(a)',
    '/api/v1/openid/redirect/*',
    '/api/v1/openid/:redirect',
    '/api/v1/openid/x::y',
    '/api/v1/openid/(?:a|b)',
    '/api/v1/openid/:x(^(a+)+$)',
    '/api/v1/openid/*/**',
  ]
  for (const path of patterns) {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = await send(stack.gw, path, { method })
      t.equal(res.status, 404, `${method} ${path}`)
    }
  }
  const put = await send(stack.gw, '/api/v1/openid/redirect', { method: 'PUT' })
  t.equal(put.status, 405)
  t.same(put.headers.allow?.split(', ').sort(), ['GET', 'HEAD'])
  const get = await send(stack.gw, '/api/v1/openid/logout', { method: 'GET' })
  t.equal(get.status, 405)
  t.equal(get.headers.allow, 'DELETE')
  t.equal((await send(stack.gw, '/api/v1/openid/auth', { method: 'POST' })).status, 405, 'forward-auth is an endpoint too')
  t.equal((await send(stack.gw, '/api/v1/openid/nothing', { method: 'POST' })).status, 404)
  t.same(log.errors(), [], 'nothing was an unexpected error')
})

t.test('bodies reach the upstream byte for byte with their Content-Type, whatever it is', async (t) => {
  const log = logCapture()
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }], config: { log: { level: 'warn' } }, logStream: log.stream })
  const utf16 = Buffer.from('hé ✓', 'utf16le')
  const cases: Array<[string | undefined, Buffer]> = [
    ['text/plain;', Buffer.from('plain')],
    ['text/plain; charset=utf-16le', utf16],
    ['application/json', Buffer.from('{"not json')],
    ['application/json; charset=utf-8', Buffer.from('{"a":1}')],
    ['application/x-www-form-urlencoded', Buffer.from('a=1&a=2&%zz')],
    ['multipart/form-data; boundary=x', Buffer.from('--x\r\n\r\n--x--')],
    ['foo', Buffer.from([0, 1, 2, 255])],
    ['a/b; x="unterminated', Buffer.from('x')],
    ['TEXT/PLAIN; CHARSET=UTF-16LE', utf16],
    [undefined, Buffer.from([0xff, 0xfe, 0])],
  ]
  for (const [contentType, body] of cases) {
    for (const chunked of [false, true]) {
      const res = await send(stack.gw, '/upload', { headers: contentType === undefined ? {} : { 'content-type': contentType }, body, chunked })
      const seen = stack.upstream.requests.at(-1)
      const what = `${JSON.stringify(contentType)}${chunked ? ', chunked' : ''}`
      t.equal(res.status, 200, what)
      t.equal(seen?.bodyBase64, body.toString('base64'), `${what}: the same bytes`)
      t.equal(seen?.headers['content-type'], contentType, `${what}: the same Content-Type`)
    }
  }

  // Any header value a client can send, any bytes.
  const headerValue = fc.stringMatching(/^[\x21-\x7e][\x20-\x7e]{0,60}$/).filter((v) => !v.endsWith(' '))
  await fc.assert(
    fc.asyncProperty(headerValue, fc.uint8Array({ maxLength: 300 }), fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'), async (contentType, bytes, method) => {
      const body = Buffer.from(bytes)
      const res = await send(stack.gw, '/p', { method, headers: { 'content-type': contentType }, body })
      const seen = stack.upstream.requests.at(-1)
      return res.status === 200 && seen?.bodyBase64 === body.toString('base64') && seen.headers['content-type'] === contentType
    }),
    { numRuns: 100 },
  )
  t.same(log.errors(), [], 'nothing was an unexpected error')
})

t.test('the sign-in endpoints still parse (or refuse) bodies themselves, never with a 500', async (t) => {
  const stack = await startStack(t)
  for (const contentType of ['text/plain;', 'application/json', 'foo', 'text/plain; charset=utf-16le']) {
    const res = await send(stack.gw, '/api/v1/openid/logout', {
      method: 'DELETE',
      headers: { 'content-type': contentType, accept: 'application/json' },
      body: Buffer.from('{x'),
    })
    t.ok(res.status >= 400 && res.status < 500, `${contentType}: ${res.status}`)
  }
})

t.test('hop-by-hop request headers are answered or dropped, never a 502', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }] })
  const hopByHop: Record<string, string> = {
    'keep-alive': 'timeout=5, max=100',
    upgrade: 'websocket',
    te: 'trailers',
    trailer: 'x-checksum',
    'proxy-connection': 'keep-alive',
    'proxy-authorization': 'Basic cHJveHk6c2VjcmV0',
    'http2-settings': 'AAMAAABkAARAAAAAAAIAAAAA',
  }
  for (const [name, value] of Object.entries(hopByHop)) {
    // Node's client sends a Trailer header only with chunked framing.
    const res = await send(stack.gw, '/h', { headers: { [name]: value }, body: Buffer.from('ab'), chunked: name === 'trailer' })
    t.equal(res.status, 200, name)
    t.equal(stack.upstream.requests.at(-1)?.headers[name], undefined, `${name} does not reach the upstream`)
    t.equal(stack.upstream.requests.at(-1)?.body, 'ab')
  }

  // Node answers the Expect itself (100 Continue); the upstream gets the body, not the Expect.
  const { hostname, port } = new URL(stack.gw)
  const continued = await new Promise<{ status: number; sawContinue: boolean }>((resolve, reject) => {
    let sawContinue = false
    const req = httpRequest(
      { host: hostname, port, method: 'POST', path: '/e', agent: false, headers: { expect: '100-continue', 'content-length': 2 } },
      (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode ?? 0, sawContinue }))
      },
    )
    req.on('continue', () => {
      sawContinue = true
      req.end('ok')
    })
    req.on('error', reject)
  })
  t.same(continued, { status: 200, sawContinue: true })
  t.equal(stack.upstream.requests.at(-1)?.headers.expect, undefined)
  t.equal(stack.upstream.requests.at(-1)?.body, 'ok')

  const named = await send(stack.gw, '/c', { headers: { connection: 'x-drop-me', 'x-drop-me': '1', 'x-keep': '1' }, body: Buffer.from('') })
  t.equal(named.status, 200)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-drop-me'], undefined, 'a header named in Connection is hop-by-hop')
  t.equal(stack.upstream.requests.at(-1)?.headers['x-keep'], '1')
})

const UPGRADE = (host: string, path: string): string =>
  `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
  'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'

async function upgradesAreRefused(t: Test, stack: Stack, path: string): Promise<void> {
  const host = new URL(stack.gw).host
  const answers = await Promise.all(Array.from({ length: 20 }, () => exchange(stack.gw, UPGRADE(host, path), 3000)))
  for (const [i, answer] of answers.entries()) {
    t.match(answer.text, /^HTTP\/1\.1 400 /, `socket ${i}: answered 400 at once`)
    t.match(answer.text, /"code":"bad_request"/)
    t.ok(answer.closed, `socket ${i}: closed by the gateway`)
  }
  t.equal(stack.upstream.upgrades.length, 0, 'the upstream saw no upgrade')
  t.equal(stack.upstream.requests.length, 0, 'nor a plain request in its place')
}

t.test('an upgrade to an upstream without websocket: true is refused at once and the socket closed', async (t) => {
  t.test('next to an upstream that takes WebSockets', async (t) => {
    const stack = await startStack(t, {
      upstreams: [
        { name: 'app', auth: 'none' },
        { name: 'live', auth: 'none', websocket: true, match: { pathPrefix: '/live' } },
      ],
    })
    await upgradesAreRefused(t, stack, '/socket')
  })
  t.test('with no upstream that takes WebSockets', async (t) => {
    const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }] })
    await upgradesAreRefused(t, stack, '/socket')
  })
})
