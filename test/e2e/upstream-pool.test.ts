import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { UPSTREAM_POOL } from '#src/proxy/plugin'
import { startStack } from '../fixtures/stack.ts'

// The connection pool to an upstream (proxy/plugin.ts UPSTREAM_POOL, docs/performance.md): idle
// connections are reused, and no more than `connections` are open to one upstream at a time.

async function countingUpstream(t: { teardown(fn: () => unknown): void }) {
  let open = 0
  let peak = 0
  let accepted = 0
  const held: ServerResponse[] = []
  let holdUntil = 0
  const server = createServer((req, res) => {
    req.resume()
    if (req.url === '/held' && held.length + 1 < holdUntil) {
      held.push(res)
      return
    }
    if (req.url === '/held') {
      // Released once: the requests after these are answered at once.
      holdUntil = 0
      for (const waiting of held.splice(0)) waiting.end('ok')
    }
    res.end('ok')
  })
  server.on('connection', (socket) => {
    accepted++
    peak = Math.max(peak, ++open)
    socket.on('close', () => open--)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  t.teardown(() => server.closeAllConnections())
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stats: () => ({ accepted, peak }),
    /** Holds /held requests until `count` of them have arrived, then answers them all. */
    hold: (count: number) => void (holdUntil = count),
  }
}

t.test('one idle connection serves sequential requests', async (t) => {
  const upstream = await countingUpstream(t)
  const stack = await startStack(t, { upstreams: [{ name: 'app', target: upstream.url, auth: 'none' }] })
  for (let i = 0; i < 20; i++) t.equal((await fetch(`${stack.gw}/page${i}`)).status, 200)
  t.equal(upstream.stats().accepted, 1, 'the gateway kept and reused its connection')
})

t.test(`at most ${UPSTREAM_POOL.connections} connections to one upstream; the requests beyond wait for one`, async (t) => {
  const upstream = await countingUpstream(t)
  const stack = await startStack(t, { upstreams: [{ name: 'app', target: upstream.url, auth: 'none' }] })
  const total = UPSTREAM_POOL.connections + 12
  // Held until every connection the pool may open is in use: then all are answered.
  upstream.hold(UPSTREAM_POOL.connections)
  const statuses = await Promise.all(Array.from({ length: total }, () => fetch(`${stack.gw}/held`).then((res) => res.status)))
  t.same(new Set(statuses), new Set([200]), 'every request answered')
  t.equal(upstream.stats().peak, UPSTREAM_POOL.connections, 'the upstream saw the pool full, and no more')
})
