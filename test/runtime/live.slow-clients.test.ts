import { mkdtempSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { stringify } from 'yaml'
import { LiveGateway } from '#src/runtime/live'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, freePort } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

// Clients that send their request slowly, or not at all, against the server production runs
// (LiveGateway): no connection is held past server.requestTimeoutMs, an answer given before the
// body arrived closes the connection instead of reading the rest, and the gateway's endpoints read
// no large body. Real time is what these tests are about: they wait on the
// socket's close, bounded.

async function gateway(t: Test, server: Record<string, unknown> = {}): Promise<{ port: number }> {
  const port = await freePort()
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const path = join(mkdtempSync(join(tmpdir(), 'ogw-slow-')), 'gateway.yaml')
  writeFileSync(
    path,
    stringify({
      server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}`, managementPort: 0, ...server },
      // Never discovered: these requests do not need the provider.
      provider: { issuer: 'http://127.0.0.1:9', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true, timeoutMs: 200 },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      upstreams: [{ name: 'app', target: upstream.url }],
      log: { level: 'silent' },
    }),
  )
  const live = await LiveGateway.start({ path, env: {} })
  t.teardown(() => live.close(1000))
  await live.listen()
  return { port }
}

interface Outcome {
  /** Milliseconds from the first byte sent until the server closed the connection; undefined if it had not within the bound. */
  closedAfterMs: number | undefined
  received: string
}

/** Sends `head`, then `trickle` one byte every 100 ms, until the server closes or `boundMs` passes. */
function slowRequest(port: number, head: string, trickle: string, boundMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1')
    const started = Date.now()
    let received = ''
    let sent = 0
    const timer = setInterval(() => {
      if (sent < trickle.length && !socket.destroyed) socket.write(trickle.charAt(sent++))
    }, 100)
    const bound = setTimeout(() => finish(undefined), boundMs)
    const finish = (closedAfterMs: number | undefined): void => {
      clearInterval(timer)
      clearTimeout(bound)
      socket.destroy()
      resolve({ closedAfterMs, received })
    }
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')))
    socket.on('close', () => finish(Date.now() - started))
    socket.on('error', () => undefined)
    socket.write(head)
  })
}

t.test('a body trickled to back-channel logout: 408 and closed after server.requestTimeoutMs', async (t) => {
  const { port } = await gateway(t, { requestTimeoutMs: 1000 })
  const head = 'POST /api/v1/openid/backchannel-logout HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\n'
  const outcome = await slowRequest(port, head, 'logout_token='.padEnd(10000, 'a'), 6000)
  t.ok(outcome.closedAfterMs !== undefined && outcome.closedAfterMs < 4000, `closed after ${outcome.closedAfterMs} ms, not held`)
  t.match(outcome.received, /^HTTP\/1\.1 408 /, 'answered 408')
})

t.test('headers that never end: closed after server.requestTimeoutMs', async (t) => {
  const { port } = await gateway(t, { requestTimeoutMs: 1000 })
  const outcome = await slowRequest(port, 'GET / HTTP/1.1\r\nHost: x\r\n', 'X-Slow: '.padEnd(500, 'a'), 6000)
  t.ok(outcome.closedAfterMs !== undefined && outcome.closedAfterMs < 4000, `closed after ${outcome.closedAfterMs} ms`)
})

t.test('a 401 answered before the body arrived closes the connection instead of reading the rest', async (t) => {
  // The default 30 s request timeout: what closes the connection here is the early answer.
  const { port } = await gateway(t)
  const head = 'POST /api/items HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n'
  const outcome = await slowRequest(port, head, 'a'.repeat(1000), 6000)
  t.match(outcome.received, /^HTTP\/1\.1 401 /, 'refused at once')
  t.match(outcome.received, /\r\nconnection: close\r\n/i, 'saying the connection closes')
  t.ok(outcome.closedAfterMs !== undefined && outcome.closedAfterMs < 3000, `and closed (${outcome.closedAfterMs} ms), the rest of the body unread`)
})

t.test("the gateway's own endpoints read at most 16 KiB of body: 413", async (t) => {
  const { port } = await gateway(t)
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/openid/logout`, {
    method: 'DELETE',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ pad: 'a'.repeat(20 * 1024) }),
  })
  t.equal(res.status, 413)
  const small = await fetch(`http://127.0.0.1:${port}/api/v1/openid/logout`, {
    method: 'DELETE',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ pad: 'a' }),
  })
  t.equal(small.status, 401, 'a small body is ignored: no session, 401')
})
