import t from 'tap'
import { rawRequest } from '../fixtures/http.js'
import { freePort, startStack } from '../fixtures/stack.js'
import { startEchoUpstream } from '../fixtures/upstream.js'

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
