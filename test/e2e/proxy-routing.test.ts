import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer as createHttpsServer } from 'node:https'
import { connect, type AddressInfo } from 'node:net'
import t from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { freePort, startStack, type Teardown } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

const JSON_ACCEPT = { accept: 'application/json' }

t.test('matching by host and longest path prefix; 404 when nothing matches', async (t) => {
  const api = await startEchoUpstream()
  const special = await startEchoUpstream()
  t.teardown(() => api.close())
  t.teardown(() => special.close())
  const stack = await startStack(t, {
    upstreams: [
      { name: 'app', match: { pathPrefix: '/app' }, auth: 'none' },
      { name: 'api', match: { pathPrefix: '/app/api' }, target: api.url, auth: 'none' },
      { name: 'special', match: { pathPrefix: '/', hosts: ['special.example.com'] }, target: special.url, auth: 'none' },
    ],
  })
  const get = (path: string, host?: string) => rawRequest(stack.gw, path, { headers: { ...JSON_ACCEPT, ...(host ? { host } : {}) } })

  t.equal((await get('/app/page')).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.url, '/app/page', 'the path is forwarded unchanged')
  t.equal((await get('/app/api/items')).status, 200)
  t.equal(api.requests.at(-1)?.url, '/app/api/items', 'the longest prefix wins')
  t.equal((await get('/app/apiary')).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.url, '/app/apiary', 'prefixes match on segment boundaries')
  t.equal((await get('/app')).status, 200)
  t.equal(stack.upstream.requests.at(-1)?.url, '/app')
  t.equal((await get('/anything', 'special.example.com')).status, 200)
  t.equal(special.requests.at(-1)?.url, '/anything')
  t.equal((await get('/anything', 'SPECIAL.example.com:8443')).status, 200, 'host match ignores case and port')
  t.equal(special.requests.length, 2)

  const missing = await get('/application')
  t.equal(missing.status, 404)
  t.match(missing.headers['content-type'], /^application\/problem\+json/)
  t.equal(missing.json().code, 'not_found')
  t.equal((await get('/other', 'other.example.com')).status, 404)
})

/**
 * A TCP port that never completes a connection: a listener (python3, which can listen without
 * accepting) whose accept queue the test fills, after which the kernel drops every new SYN, as a
 * firewall that blackholes traffic does.
 */
async function blackholePort(t: Teardown): Promise<number> {
  const script = 'import socket,sys,time\ns=socket.socket();s.bind(("127.0.0.1",0));s.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(600)'
  const child = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => child.kill('SIGKILL'))
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))
    child.once('error', reject)
  })
  const fillers = [0, 1].map(() => connect(port, '127.0.0.1'))
  for (const socket of fillers) socket.on('error', () => {})
  t.teardown(() => fillers.forEach((s) => s.destroy()))
  // A filler's handshake done: the queue of a listener with backlog 0 is full (the other filler's
  // SYN may be the one dropped).
  await Promise.any(fillers.map((socket) => once(socket, 'connect')))
  return port
}

t.test('an upstream whose connection does not open within connectTimeoutMs is unreachable: 502 at once, not after timeoutMs', async (t) => {
  const port = await blackholePort(t)
  const stack = await startStack(t, {
    upstreams: [{ name: 'blackholed', target: `http://127.0.0.1:${port}`, auth: 'none', connectTimeoutMs: 300, timeoutMs: 20000 }],
  })
  const started = Date.now()
  const res = await rawRequest(stack.gw, '/x', { headers: JSON_ACCEPT })
  const took = Date.now() - started
  t.equal(res.status, 502)
  t.equal(res.json().code, 'upstream_unavailable')
  t.ok(took >= 250 && took < 5000, `answered after the connect timeout (${took} ms), not the 20 s response timeout`)
})

t.test("an https upstream's certificate is verified: a self-signed one is unreachable (502), never trusted silently", async (t) => {
  // @fastify/reply-from turns certificate verification off unless told otherwise.
  const tls = new URL('../fixtures/tls/', import.meta.url)
  /** The TLS server name (SNI) of each handshake: the name the gateway verifies the certificate against. */
  const serverNames: string[] = []
  const server = createHttpsServer(
    {
      key: readFileSync(new URL('self-signed.key', tls)),
      cert: readFileSync(new URL('self-signed.crt', tls)),
      SNICallback: (name, done) => {
        serverNames.push(name)
        done(null, undefined)
      },
    },
    (_req, res) => res.end('secret upstream'),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const { port } = server.address() as AddressInfo
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: ['app.example.com'] } },
    upstreams: [
      { name: 'tls', target: `https://127.0.0.1:${port}`, auth: 'none' },
      { name: 'named', match: { pathPrefix: '/named' }, target: `https://localhost:${port}`, auth: 'none' },
    ],
  })
  const res = await rawRequest(stack.gw, '/x', { headers: JSON_ACCEPT })
  t.equal(res.status, 502)
  t.equal(res.json().code, 'upstream_unavailable')
  t.notMatch(res.body, /secret upstream/)

  // passHostHeader (the default) sends the served host as Host; the TLS name stays the target's,
  // whose certificate the operator installed, whatever host the request names.
  const named = await rawRequest(stack.gw, '/named/x', { headers: { ...JSON_ACCEPT, host: 'app.example.com' } })
  t.equal(named.status, 502)
  t.strictSame(serverNames, ['localhost'], "the server name is the target's, not the Host sent")
})

t.test('502 upstream_unavailable and 504 upstream_timeout', async (t) => {
  const dead = await freePort()
  const stack = await startStack(t, {
    upstreams: [
      { name: 'dead', match: { pathPrefix: '/dead' }, target: `http://127.0.0.1:${dead}`, auth: 'none' },
      { name: 'slow', match: { pathPrefix: '/' }, auth: 'none', timeoutMs: 300 },
    ],
  })
  const down = await rawRequest(stack.gw, '/dead/x', { headers: JSON_ACCEPT })
  t.equal(down.status, 502)
  t.match(down.headers['content-type'], /^application\/problem\+json/)
  t.equal(down.json().code, 'upstream_unavailable')

  const started = Date.now()
  const slow = await rawRequest(stack.gw, '/slow?ms=3000', { headers: JSON_ACCEPT })
  t.equal(slow.status, 504)
  t.equal(slow.json().code, 'upstream_timeout')
  t.ok(Date.now() - started < 2500, 'answered after the upstream timeout, not after the upstream')
  t.equal((await rawRequest(stack.gw, '/slow?ms=10', { headers: JSON_ACCEPT })).status, 200)
})

t.test('upstream responses pass through untouched, errors included', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }] })
  const res = await rawRequest(stack.gw, '/status/418', { headers: JSON_ACCEPT })
  t.equal(res.status, 418)
  const err = await rawRequest(stack.gw, '/status/500', { headers: JSON_ACCEPT })
  t.equal(err.status, 500, "the upstream's own 500 is its answer, not the gateway's")
})

t.test('routing is canonical: a variant of a stricter route is refused, a variant host is the same host', async (t) => {
  const secure = await startEchoUpstream()
  const docs = await startEchoUpstream()
  t.teardown(() => secure.close())
  t.teardown(() => docs.close())
  const stack = await startStack(t, {
    upstreams: [
      { name: 'site', publicPaths: ['/public/**', '/Content/**'] },
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
      { name: 'docs', match: { pathPrefix: '/Docs' }, target: docs.url, auth: 'none' },
      { name: 'secure', match: { pathPrefix: '/', hosts: ['secure.example.com'] }, target: secure.url, allow: { groups: ['admins'] } },
    ],
  })
  const bob = (await stack.signedIn('bob')).cookieHeader(`${stack.gw}/`)
  const alice = (await stack.signedIn('alice')).cookieHeader(`${stack.gw}/`)
  const get = (path: string, headers: Record<string, string> = {}) => rawRequest(stack.gw, path, { headers: { ...JSON_ACCEPT, cookie: bob, ...headers } })

  const before = stack.upstream.requests.length
  // Each of these reached the `/` upstream with bob's identity while /admin refused him.
  for (const path of [
    '/ADMIN/x',
    '/%41dmin/x',
    '/admin./x',
    '/admin%20/x',
    '/Admin%2e/x',
    '/admin.%20./x',
    '/docs/x',
    '/DOCS',
    '/PUBLIC/x',
    '/content/x',
    '/API/v1/openid/x',
  ]) {
    const res = await get(path)
    t.equal(res.status, 400, path)
    t.equal(res.json().code, 'bad_request')
  }
  t.equal(stack.upstream.requests.length, before, 'none of them reached an upstream')
  t.equal((await get('/admin/x')).status, 403, 'the exact form: refused by the allow rule')
  t.equal((await get('/admin/X')).status, 403, 'case below the prefix stays with the upstream that owns it')
  t.equal((await get('/administrator.')).status, 200, 'a variant that reaches the same upstream and rule passes')
  t.equal((await get('/Docs/x')).status, 200, 'an uppercase prefix is served as written')
  t.equal(docs.requests.at(-1)?.url, '/Docs/x')
  t.equal((await get('/Content/app.css', { cookie: '' })).status, 200, 'an uppercase public glob is public as written')

  for (const host of ['secure.example.com.', 'secure.example.com:', 'SECURE.example.COM.:0443', 'secure.example.com..']) {
    t.equal((await get('/x', { host })).status, 403, `${host}: the host-matched upstream's rule`)
  }
  t.equal((await get('/x', { host: 'secure.example.com.:8443', cookie: alice })).status, 200)
  t.equal(secure.requests.at(-1)?.headers['x-forwarded-host'], 'secure.example.com:8443', 'the upstream sees the canonical host')
})
