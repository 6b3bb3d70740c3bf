import { createServer, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { listen } from '#src/dev/listen'
import { startStack, type Teardown } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

// Oversized and malformed requests are refused by Node's parser before Fastify sees them; the
// gateway's clientErrorHandler (ops/client-errors.ts) answers them with problem+json. Session cookie
// chunks are capped (session/cookies.ts MAX_CHUNKS): forged chunk cookies are "no session".

/** Sends `bytes` as they are and returns everything the server wrote until it closed. */
function rawExchange(origin: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(origin)
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) })
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A reset after the answer arrived still leaves the answer to check.
      if (err.code === 'ECONNRESET' && chunks.length > 0) return
      reject(err)
    })
    socket.end(bytes)
  })
}

function parseRaw(text: string): { status: number; headers: Record<string, string>; body: string } {
  const [head = '', body = ''] = text.split('\r\n\r\n', 2)
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const i = line.indexOf(':')
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body }
}

const JSON_ACCEPT = { accept: 'application/json' }

/**
 * An upstream that takes headers as large as the gateway does (the echo upstream keeps Node's
 * 16 KiB default and would answer 431 itself), recording what it was sent.
 */
async function roomyUpstream(t: Teardown): Promise<{ url: string; seen: IncomingHttpHeaders[] }> {
  const seen: IncomingHttpHeaders[] = []
  const server = createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    seen.push(req.headers)
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
  const port = await listen(server, 0, '127.0.0.1')
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return { url: `http://127.0.0.1:${port}`, seen }
}

t.test('header size limits', async (t) => {
  const upstream = await roomyUpstream(t)
  const stack = await startStack(t, { upstreams: [{ name: 'app', target: upstream.url }] })

  t.test('a 40 KiB Cookie header is refused with 431 problem+json and the connection closed', async (t) => {
    const res = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie: `big=${'x'.repeat(40 * 1024)}` } })
    t.equal(res.status, 431)
    t.match(res.headers['content-type'], /^application\/problem\+json/)
    t.equal(res.headers.connection, 'close')
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(res.headers['x-content-type-options'], 'nosniff')
    t.equal(res.headers['x-frame-options'], 'DENY')
    const body = res.json<Problem>()
    t.equal(body.status, 431)
    t.equal(body.code, 'bad_request')
    t.notMatch(res.body, /xxxxxxxx/, 'nothing of the request is echoed')
  })

  t.test('a malformed request is refused with 400 problem+json', async (t) => {
    for (const bytes of [
      'GET /page HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n',
      'GET /page HTTP/9.9\r\nHost: x\r\n\r\n',
      'GET /page HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      'GET /page HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      '\x00\x01\x02\r\n\r\n',
    ]) {
      const res = parseRaw(await rawExchange(stack.gw, bytes))
      t.equal(res.status, 400, JSON.stringify(bytes))
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      t.equal(res.headers.connection, 'close')
      t.equal(res.headers['x-content-type-options'], 'nosniff')
      t.equal((JSON.parse(res.body) as Problem).code, 'bad_request')
      t.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body), 'the framing is right')
    }
  })

  t.test('a 20 KiB Cookie header beside a valid session still works', async (t) => {
    const browser = await stack.signedIn('alice')
    const big = { cookie: `big=${'x'.repeat(20 * 1024)}` }
    const res = await browser.fetch(`${stack.gw}/page`, { headers: { ...JSON_ACCEPT, ...big } })
    t.equal(res.status, 200)
    const seen = upstream.seen.at(-1)
    t.equal(seen?.['x-forwarded-user'], 'alice', 'signed in')
    t.match(seen?.cookie, /(^|; )big=x{20480}(;|$)/, 'the application cookie reaches the upstream')
    t.notMatch(seen?.cookie, /(^|; )ogw/, "the gateway's do not")
    const refresh = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`, { headers: big })
    t.equal(refresh.status, 200, 'the sign-in endpoints read the session too')
  })

  t.test('the process survives a storm of oversized and malformed requests', async (t) => {
    const storm = Array.from({ length: 30 }, (_, i) =>
      i % 2 === 0
        ? rawRequest(stack.gw, '/page', { headers: { cookie: `c=${'y'.repeat(64 * 1024)}` } }).then(
            (r) => r.status,
            () => 0,
          )
        : rawExchange(stack.gw, `GET /page HTTP/1.1\r\nHost: x\r\n${'X'.repeat(100)}\r\n\r\n`).then(
            (r) => parseRaw(r).status,
            () => 0,
          ),
    )
    const statuses = await Promise.all(storm)
    t.ok(
      statuses.every((s) => s === 431 || s === 400),
      `statuses: ${[...new Set(statuses)].join(', ')}`,
    )
    const res = await rawRequest(stack.gw, '/api/v1/openid/redirect?performRedirect=0')
    t.equal(res.status, 200, 'the gateway still serves')
  })
})

t.test('forged session cookie chunks are "no session", never a 500', async (t) => {
  const stack = await startStack(t)
  const browser = await stack.signedIn('alice')
  const sealed = browser.cookie('ogw')?.value ?? ''
  t.ok(sealed.length > 100 && !sealed.includes('~'), 'a real, unchunked session cookie')

  // A real sealed value split in 9 chunks would reassemble into a valid session: the cap
  // refuses it anyway, so no request can make the gateway join more than MAX_CHUNKS cookies.
  const size = Math.ceil(sealed.length / 9)
  const parts = Array.from({ length: 9 }, (_, i) => sealed.slice(i * size, (i + 1) * size))
  const nine = [`ogw=9~${parts[0]}`, ...parts.slice(1).map((p, i) => `ogw_${i + 1}=${p}`)].join('; ')
  const junk50 = Array.from({ length: 50 }, (_, i) => `ogw_${i + 1}=${'j'.repeat(100)}`).join('; ')
  const forged: Record<string, string> = {
    'nine chunks of a real session': nine,
    'a first cookie claiming 9 chunks': `ogw=9~${sealed}`,
    'claiming 3 chunks with none present': `ogw=3~${sealed}`,
    'claiming 3 chunks with junk': `ogw=3~${sealed.slice(0, 50)}; ogw_1=${sealed.slice(50)}; ogw_2=junk`,
    'claiming 0 and 1 chunks': `ogw=0~${sealed}; ogw_1=1~${sealed}`,
    'a bare marker': 'ogw=~',
    'ogw_1..ogw_50 junk alone': junk50,
    'ogw_1..ogw_50 junk with a junk first cookie': `ogw=2~abc; ${junk50}`,
    'the credentials cookie forged too': `ogw=9~x; ogw_cred=9~y; ogw_cred_1=z`,
  }
  for (const [label, cookie] of Object.entries(forged)) {
    const page = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie } })
    t.equal(page.status, 401, `${label}: proxied path`)
    t.equal(page.json<Problem>().code, 'unauthenticated')
    const refresh = await rawRequest(stack.gw, '/api/v1/openid/refresh', { headers: { cookie } })
    t.equal(refresh.status, 400, `${label}: refresh`)
    const logout = await rawRequest(stack.gw, '/api/v1/openid/logout', { method: 'DELETE', headers: { cookie } })
    t.equal(logout.status, 401, `${label}: logout`)
  }

  const withJunk = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie: `ogw=${sealed}; ${junk50}` } })
  t.equal(withJunk.status, 200, 'stray chunk cookies beside a real unchunked session change nothing')
})
