import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { rawRequest } from '../fixtures/http.js'
import { startStack } from '../fixtures/stack.js'

const JSON_ACCEPT = { accept: 'application/json' }

t.test('memory store: an expired access token is refreshed transparently, once per session', async (t) => {
  const stack = await startStack(t, {
    provider: { accessTokenTtlSeconds: 3 },
    config: { session: { store: 'memory' } },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  let refreshes = 0
  stack.provider?.provider.on('grant.success', (ctx) => {
    if ((ctx.oidc.params as Record<string, unknown> | undefined)?.grant_type === 'refresh_token') refreshes++
  })
  const browser = await stack.signedIn('alice')
  const cookie = `ogw=${browser.cookie('ogw')?.value}`
  await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie } })
  const firstToken = stack.upstream.requests.at(-1)?.headers.authorization
  await sleep(3300)
  const results = await Promise.all(Array.from({ length: 8 }, () => rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie } })))
  t.same(results.map((r) => r.status), Array(8).fill(200), 'every parallel request passes')
  t.equal(refreshes, 1, 'one refresh for eight parallel requests')
  const tokens = new Set(stack.upstream.requests.slice(-8).map((r) => r.headers.authorization))
  t.equal(tokens.size, 1, 'they all carry the refreshed token')
  t.not([...tokens][0], firstToken, 'which is a new one')
})

t.test('cookie store: an expired sign-in goes through the refresh endpoint (navigation) or gets 401 (API)', async (t) => {
  const stack = await startStack(t, { provider: { accessTokenTtlSeconds: 1 } })
  const browser = await stack.signedIn('bob')
  await sleep(1300)
  const api = await browser.fetch(`${stack.gw}/data`, { headers: JSON_ACCEPT })
  t.equal(api.status, 401)
  t.equal(api.headers.get('www-authenticate'), 'Bearer error="invalid_token"')
  const nav = await browser.fetch(`${stack.gw}/page?a=1`, { navigate: true })
  t.equal(nav.status, 302)
  t.equal(nav.headers.get('location'), '/api/v1/openid/refresh?redirectAfter=%2Fpage%3Fa%3D1')
  // Following it refreshes (the refresh cookie is sent there) and lands back on the page.
  const done = await browser.follow(`${stack.gw}/page?a=1`)
  t.equal(done.response.status, 200)
  t.equal(done.response.url, `${stack.gw}/page?a=1`)
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'bob')
})
