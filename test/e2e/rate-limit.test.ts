import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { rawRequest, type RawResponse } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startStack, type Stack, type Teardown } from '../fixtures/stack.ts'
import type { Problem } from '#src/contract/errors'

// rateLimit.signIn: one budget per client address for the redirect, callback and refresh
// endpoints (routes/sign-in-hardening.ts); the client address is Fastify's req.ip.

const REDIRECT = '/api/v1/openid/redirect?performRedirect=0'

function limited(t: Teardown, signIn: Record<string, number>, server: Record<string, unknown> = {}, logStream?: { write(line: string): void }): Promise<Stack> {
  return startStack(t, {
    config: { rateLimit: { signIn }, server, ...(logStream === undefined ? {} : { log: { level: 'info' } }) },
    upstreams: [{ name: 'app', publicPaths: ['/public/**'] }],
    ...(logStream === undefined ? {} : { logStream }),
  })
}

function from(forwardedFor: string | undefined): Record<string, string> {
  return forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }
}

async function statuses(stack: Stack, target: string, count: number, headers: Record<string, string> = {}): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < count; i++) out.push((await rawRequest(stack.gw, target, { headers })).status)
  return out
}

function assertRateLimited(t: Test, res: RawResponse, windowSeconds: number): void {
  t.equal(res.status, 429)
  t.match(res.headers['content-type'], /^application\/problem\+json/)
  const body = res.json<Problem>()
  t.equal(body.code, 'rate_limited')
  t.equal(body.status, 429)
  t.equal(body.type, 'urn:openid-gateway:problem:rate_limited')
  const retryAfter = Number(res.headers['retry-after'])
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= windowSeconds, `Retry-After ${String(res.headers['retry-after'])}`)
  t.notOk('x-ratelimit-limit' in res.headers, "the answer is the gateway's, not the plugin's")
  t.equal(res.headers['cache-control'], 'no-store')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
}

t.test('a burst beyond max is answered 429 problem+json with Retry-After', async (t) => {
  const stack = await limited(t, { max: 3, windowSeconds: 60 })
  t.strictSame(await statuses(stack, REDIRECT, 3), [200, 200, 200], 'max requests pass')
  assertRateLimited(t, await rawRequest(stack.gw, REDIRECT), 60)

  // One budget for the three endpoints: they are refused before their handler runs.
  assertRateLimited(t, await rawRequest(stack.gw, '/api/v1/openid/callback?code=x&state=y'), 60)
  assertRateLimited(t, await rawRequest(stack.gw, '/api/v1/openid/refresh'), 60)
  const head = await rawRequest(stack.gw, REDIRECT, { method: 'HEAD' })
  t.equal(head.status, 429, 'HEAD too')
  t.ok(head.headers['retry-after'])

  const logout = await rawRequest(stack.gw, '/api/v1/openid/logout', { method: 'DELETE' })
  t.equal(logout.status, 401, 'logout is never limited: signing out must always work')
  const wrongMethod = await rawRequest(stack.gw, '/api/v1/openid/redirect', { method: 'POST' })
  t.equal(wrongMethod.status, 405, 'a wrong method is refused as usual, without spending the budget')
})

t.test('callback and refresh count towards the same budget as redirect', async (t) => {
  const stack = await limited(t, { max: 3, windowSeconds: 60 })
  t.equal((await rawRequest(stack.gw, '/api/v1/openid/callback')).status, 400)
  t.equal((await rawRequest(stack.gw, '/api/v1/openid/refresh')).status, 400)
  t.equal((await rawRequest(stack.gw, REDIRECT)).status, 200)
  t.equal((await rawRequest(stack.gw, '/api/v1/openid/callback')).status, 429)
})

t.test("with several providers, each provider's own callback counts towards the budget too", async (t) => {
  const stack = await startStack(t, {
    providers: ['corp', 'partner'],
    config: { rateLimit: { signIn: { max: 2, windowSeconds: 60 } } },
    upstreams: [{ name: 'app', providers: ['*'] }],
  })
  const callback = (name: string): Promise<RawResponse> =>
    rawRequest(stack.gw, `/api/v1/openid/callback/${name}?code=x&state=y`, { headers: { accept: 'application/json' } })
  t.not((await callback('corp')).status, 429)
  t.not((await callback('partner')).status, 429)
  assertRateLimited(t, await callback('corp'), 60)
  assertRateLimited(t, await rawRequest(stack.gw, REDIRECT), 60)
})

t.test('the budget comes back after the window', async (t) => {
  const stack = await limited(t, { max: 1, windowSeconds: 1 })
  t.strictSame(await statuses(stack, REDIRECT, 2), [200, 429])
  // Real time is the subject: the one-second window has to pass (and 100 ms for the clocks).
  await sleep(1100)
  t.equal((await rawRequest(stack.gw, REDIRECT)).status, 200)
})

t.test('proxied paths are never rate limited', async (t) => {
  const stack = await limited(t, { max: 1, windowSeconds: 60 })
  t.strictSame(await statuses(stack, REDIRECT, 2), [200, 429], 'the budget is spent')
  const json = { accept: 'application/json' }
  t.strictSame(await statuses(stack, '/public/page', 10, json), Array(10).fill(200), 'public proxied path')
  t.strictSame(await statuses(stack, '/private', 10, json), Array(10).fill(401), 'protected proxied path')
  const navigations = await statuses(stack, '/private', 5, { accept: 'text/html' })
  t.strictSame(navigations, Array(5).fill(302), 'the sign-in redirect of a navigation is not refused either')
})

t.test('max: 0 turns the limit off', async (t) => {
  const stack = await limited(t, { max: 0 })
  t.strictSame(await statuses(stack, REDIRECT, 20), Array(20).fill(200))
})

t.test('with the defaults a user opening many tabs never hits the limit', async (t) => {
  const stack = await startStack(t, { config: { rateLimit: null } })
  t.strictSame(stack.config.rateLimit, { signIn: { max: 6000, windowSeconds: 60 } })
  const browser = stack.browser()
  // 20 tabs, each sent to sign in, each completing it (40 requests), then a refresh in 10 of them.
  for (let tab = 0; tab < 20; tab++) {
    const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Ftab${tab}`, 'alice')
    t.equal(res.status, 302, `tab ${tab}`)
  }
  for (let tab = 0; tab < 10; tab++) t.equal((await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)).status, 200)
})

t.test('with the defaults an office behind one NAT address is not locked out at the morning peak', async (t) => {
  // 5,000 people behind one address, arriving over ten minutes, two requests per sign-in: about
  // 1,000 sign-in requests a minute. One minute of that, sent as fast as the gateway answers.
  const stack = await startStack(t, { config: { rateLimit: null } })
  const peakMinute = 1200
  const refused: number[] = []
  const worker = async (): Promise<void> => {
    for (let sent = 0; sent < peakMinute / 20; sent++) {
      const res = await rawRequest(stack.gw, REDIRECT)
      if (res.status !== 200) refused.push(res.status)
    }
  }
  await Promise.all(Array.from({ length: 20 }, worker))
  t.strictSame(refused, [], `${peakMinute} sign-in requests from one address within a minute all pass`)
})

t.test('without trusted proxies X-Forwarded-For is ignored: a client cannot escape its budget', async (t) => {
  const stack = await limited(t, { max: 2, windowSeconds: 60 })
  const results: number[] = []
  for (const xff of ['203.0.113.1', '203.0.113.2', '198.51.100.7, 203.0.113.3', '::1', undefined, '127.0.0.2']) {
    results.push((await rawRequest(stack.gw, REDIRECT, { headers: from(xff) })).status)
  }
  t.strictSame(results, [200, 200, 429, 429, 429, 429])
})

t.test('behind a trusted proxy each client address has its own budget', async (t) => {
  const stack = await limited(t, { max: 2, windowSeconds: 60 }, { trustedProxies: ['127.0.0.0/8'] })
  t.strictSame(await statuses(stack, REDIRECT, 3, from('203.0.113.1')), [200, 200, 429], '203.0.113.1 spends its budget')
  t.strictSame(await statuses(stack, REDIRECT, 3, from('203.0.113.2')), [200, 200, 429], '203.0.113.2 has its own')
  t.strictSame(await statuses(stack, REDIRECT, 1), [200], 'the proxy itself (no X-Forwarded-For) has its own')
  // The left part of X-Forwarded-For is whatever the client sent; only the hop the trusted
  // proxy appended counts, so varying the rest does not help.
  const spoofed = ['10.0.0.1, 203.0.113.1', '203.0.113.99, 203.0.113.1', 'garbage, 203.0.113.1']
  for (const xff of spoofed) t.equal((await rawRequest(stack.gw, REDIRECT, { headers: from(xff) })).status, 429, xff)
})

t.test('IPv6 clients count per /64', async (t) => {
  const stack = await limited(t, { max: 2, windowSeconds: 60 }, { trustedProxies: ['127.0.0.0/8'] })
  const results: number[] = []
  for (const xff of ['2001:db8:1:2::1', '2001:db8:1:2::ffff', '2001:db8:1:2:aaaa::1', '2001:db8:1:3::1']) {
    results.push((await rawRequest(stack.gw, REDIRECT, { headers: from(xff) })).status)
  }
  t.strictSame(results, [200, 200, 429, 200], 'the same /64 shares a budget; the next /64 does not')
})

interface LogLine {
  msg?: string
  url?: string
  ip?: string
  status?: number
}

async function ipOf(stack: Stack, lines: string[], xff: string): Promise<string | undefined> {
  const marker = `/api/v1/openid/redirect?performRedirect=0&m=${Math.random().toString(36).slice(2)}`
  await rawRequest(stack.gw, marker, { headers: from(xff) })
  // The request line is written in onResponse, possibly just after the client has the answer.
  const line = await eventually(
    'the request line',
    () => lines.map((l) => JSON.parse(l) as LogLine).find((l) => l.msg === 'request' && l.url === marker),
    1000,
  ).catch(() => undefined)
  return line?.ip
}

t.test('X-Forwarded-For is read right to left, skipping trusted hops', async (t) => {
  t.test('only the loopback proxy is trusted: the hop it appended is the client', async (t) => {
    const lines: string[] = []
    const stack = await limited(t, { max: 2, windowSeconds: 60 }, { trustedProxies: ['127.0.0.0/8'] }, { write: (l) => void lines.push(l) })
    t.equal(await ipOf(stack, lines, '198.51.100.7, 203.0.113.9'), '203.0.113.9')
    t.equal(await ipOf(stack, lines, '10.1.1.1, 203.0.113.9'), '203.0.113.9')
    // Both went to 203.0.113.9's bucket: the third request is over.
    t.equal((await rawRequest(stack.gw, REDIRECT, { headers: from('198.51.100.8, 203.0.113.9') })).status, 429)
    t.equal(await ipOf(stack, lines, '198.51.100.7, 127.0.0.5'), '198.51.100.7', 'a trusted hop in the chain is skipped')
  })

  t.test('203.0.113.0/24 trusted too: the address before it is the client', async (t) => {
    const lines: string[] = []
    const trustedProxies = ['127.0.0.0/8', '203.0.113.0/24']
    const stack = await limited(t, { max: 2, windowSeconds: 60 }, { trustedProxies }, { write: (l) => void lines.push(l) })
    t.equal(await ipOf(stack, lines, '198.51.100.7, 203.0.113.9'), '198.51.100.7')
    t.equal(await ipOf(stack, lines, '198.51.100.8, 203.0.113.9'), '198.51.100.8')
    t.equal(await ipOf(stack, lines, '198.51.100.7, 203.0.113.9'), '198.51.100.7')
    const status = (await rawRequest(stack.gw, REDIRECT, { headers: from('198.51.100.7, 203.0.113.10') })).status
    t.equal(status, 429, '198.51.100.7 spent its budget whichever trusted hop relayed it')
    t.equal((await rawRequest(stack.gw, REDIRECT, { headers: from('198.51.100.8, 203.0.113.10') })).status, 200)
  })
})
