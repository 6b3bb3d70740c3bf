import fc from 'fast-check'
import t from 'tap'
import type { UpstreamConfig } from '#src/options/types'
import { createRoutingAmbiguityCheck } from '#src/access/ambiguity'
import { canonicalHost, createUpstreamMatcher } from '#src/access/match'
import { normalizePath } from '#src/access/path'
import { problems, resolve, type Tree } from '../fixtures/config/base.ts'
import { rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'
import { startEchoUpstream, type EchoUpstream } from '../fixtures/upstream.ts'

/** Upstreams as the loader makes them (prefixes and hosts normalized). */
function upstreams(list: Tree[]): UpstreamConfig[] {
  return resolve({ upstreams: list.map((u) => ({ target: 'http://127.0.0.1:3000', ...u })) }).upstreams
}

function matcherFor(list: Tree[]): (host: string, path: string) => string | undefined {
  const match = createUpstreamMatcher(upstreams(list))
  return (host, path) => match(host, path)?.name
}

t.test('longest prefix on segment boundaries', async (t) => {
  const match = matcherFor([{ name: 'root' }, { name: 'app', match: { pathPrefix: '/app/' } }, { name: 'api', match: { pathPrefix: '/app/api' } }])
  const cases: Array<[string, string]> = [
    ['/', 'root'],
    ['/x', 'root'],
    ['/app', 'app'],
    ['/app/', 'app'],
    ['/app/x', 'app'],
    ['/apple', 'root'],
    ['/app/api', 'api'],
    ['/app/api/', 'api'],
    ['/app/api/x/y', 'api'],
    ['/app/apiary', 'app'],
    ['/App/api', 'root'],
  ]
  for (const [path, expected] of cases) t.equal(match('gw.example.com', path), expected, path)
})

t.test('no upstream without a prefix that serves the path', async (t) => {
  const match = matcherFor([{ name: 'app', match: { pathPrefix: '/app' } }])
  t.equal(match('h', '/'), undefined)
  t.equal(match('h', '/application'), undefined)
  t.equal(match('h', '/app/x'), 'app')
})

t.test('hosts: case-insensitive, any port unless the entry names one, constrained before unconstrained', async (t) => {
  const match = matcherFor([
    { name: 'any', match: { pathPrefix: '/' } },
    { name: 'a', match: { pathPrefix: '/', hosts: ['a.example.com'] } },
    { name: 'a8443', match: { pathPrefix: '/x', hosts: ['a.example.com:8443'] } },
    { name: 'v6', match: { pathPrefix: '/', hosts: ['[::1]'] } },
  ])
  t.equal(match('a.example.com', '/'), 'a')
  t.equal(match('A.Example.COM:9000', '/y'), 'a', 'case and port ignored')
  t.equal(match('a.example.com', '/x'), 'a', 'the :8443 entry does not serve another port')
  t.equal(match('a.example.com:8443', '/x/1'), 'a8443')
  t.equal(match('b.example.com', '/'), 'any')
  t.equal(match('xa.example.com', '/'), 'any', 'no suffix matching')
  t.equal(match('a.example.com.evil', '/'), 'any', 'anchored at the end')
  t.equal(match('a-example.com', '/'), 'any', 'the dot is literal')
  t.equal(match('[::1]:8080', '/'), 'v6')
  t.equal(match('', '/'), 'any', 'no Host: only unconstrained upstreams')
})

t.test('canonicalHost: one spelling of a host', async (t) => {
  const cases: Array<[string, string]> = [
    ['app.example.com', 'app.example.com'],
    ['APP.Example.COM', 'app.example.com'],
    ['app.example.com.', 'app.example.com'],
    ['app.example.com..', 'app.example.com'],
    ['app.example.com:', 'app.example.com'],
    ['app.example.com.:', 'app.example.com'],
    ['app.example.com.:8443', 'app.example.com:8443'],
    ['app.example.com:08443', 'app.example.com:8443'],
    ['app.example.com:0', 'app.example.com:0'],
    ['[::1]', '[::1]'],
    ['[::1]:', '[::1]'],
    ['[::1]:80', '[::1]:80'],
    ['[::FFFF:1.2.3.4]:080', '[::ffff:1.2.3.4]:80'],
    ['1.2.3.4.:80', '1.2.3.4:80'],
    ['::1', '::1'],
    ['a:b', 'a:b'],
    ['', ''],
  ]
  for (const [host, expected] of cases) t.equal(canonicalHost(host), expected, host)
  for (const host of ['a.example.com.', 'A.EXAMPLE.COM:', 'a.example.com.:9']) {
    t.equal(matcherFor([{ name: 'any' }, { name: 'a', match: { hosts: ['a.example.com'] } }])(canonicalHost(host), '/'), 'a', host)
  }
})

t.test('a longer prefix for another host falls back to the shorter one', async (t) => {
  const match = matcherFor([{ name: 'root' }, { name: 'admin', match: { pathPrefix: '/admin', hosts: ['admin.example.com'] } }])
  t.equal(match('admin.example.com', '/admin/x'), 'admin')
  t.equal(match('www.example.com', '/admin/x'), 'root')
})

t.test('overlapping host lists at one prefix: the first in config order', async (t) => {
  const match = matcherFor([
    { name: 'first', match: { pathPrefix: '/app', hosts: ['a.example.com', 'b.example.com'] } },
    { name: 'second', match: { pathPrefix: '/app', hosts: ['b.example.com:8443'] } },
  ])
  t.equal(match('b.example.com:8443', '/app'), 'first')
  const reversed = matcherFor([
    { name: 'second', match: { pathPrefix: '/app', hosts: ['b.example.com:8443'] } },
    { name: 'first', match: { pathPrefix: '/app', hosts: ['a.example.com', 'b.example.com'] } },
  ])
  t.equal(reversed('b.example.com:8443', '/app'), 'second')
})

t.test('paths compare as the router decodes them', async (t) => {
  const match = matcherFor([{ name: 'root' }, { name: 'cafe', match: { pathPrefix: '/café' } }, { name: 'comma', match: { pathPrefix: '/a,b' } }])
  t.equal(match('h', '/caf%C3%A9/x'), 'cafe', 'percent-encoded UTF-8 is decoded')
  t.equal(match('h', '/caf%C3%A9s'), 'root')
  t.equal(match('h', '/a,b/x'), 'comma')
  t.equal(match('h', '/a%2Cb/x'), 'root', 'reserved characters stay encoded')
  t.equal(match('h', '/100%25'), 'root')
})

t.test("the gateway's own paths belong to no upstream", async (t) => {
  const match = matcherFor([{ name: 'root' }, { name: 'api', match: { pathPrefix: '/api' } }])
  t.equal(match('h', '/api/v1/openid'), undefined)
  t.equal(match('h', '/api/v1/openid/'), undefined)
  t.equal(match('h', '/api/v1/openid/auth'), undefined)
  t.equal(match('h', '/api/v1/openidx'), 'api')
  t.equal(match('h', '/API/v1/openid/x'), 'root', 'the router is case-sensitive')
})

t.test('prefixes the router would not read literally are refused at load', async (t) => {
  const refused = (pathPrefix: string) => problems({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', match: { pathPrefix } }] })
  // find-my-way reads `:` as a parameter and `*` as a wildcard.
  for (const pathPrefix of ['/a:b', '/:id', '/files/*', '/a::b']) {
    t.strictSame(refused(pathPrefix), ['upstreams[0].match.pathPrefix: must not contain : or *'], pathPrefix)
  }
  // A `%` is a literal percent sign to it: `/caf%C3%A9` would serve nothing, `/100%` only requests
  // the proxy then refuses.
  for (const pathPrefix of ['/caf%C3%A9', '/100%', '/a%2Cb']) {
    t.strictSame(refused(pathPrefix), ['upstreams[0].match.pathPrefix: must not contain percent-encoding; write the characters themselves'], pathPrefix)
  }
  t.strictSame(refused('/café'), [], 'non-ASCII characters written as they are')
})

// The cross-check: the matcher and the gateway's router must agree on every (host, path). Each
// upstream is its own echo server, so the one that received a request names the router's choice.
t.test('the matcher agrees with the real router', async (t) => {
  const list: Array<Record<string, unknown>> = [
    { name: 'root' },
    { name: 'app', match: { pathPrefix: '/app' } },
    { name: 'appApi', match: { pathPrefix: '/app/api' } },
    { name: 'aRoot', match: { pathPrefix: '/', hosts: ['a.example.com'] } },
    { name: 'abApp', match: { pathPrefix: '/app', hosts: ['a.example.com', 'b.example.com'] } },
    { name: 'b8443App', match: { pathPrefix: '/app', hosts: ['b.example.com:8443'] } },
    { name: 'cDeep', match: { pathPrefix: '/app/api/v2', hosts: ['c.example.com'] } },
    { name: 'dDeep', match: { pathPrefix: '/x/y', hosts: ['d.example.com'] } },
    { name: 'cafe', match: { pathPrefix: '/café' } },
    { name: 'comma', match: { pathPrefix: '/a,b' } },
    { name: 'upper', match: { pathPrefix: '/Docs' } },
    { name: 'v6', match: { pathPrefix: '/v6', hosts: ['[::1]'] } },
  ]
  const echoes = new Map<string, EchoUpstream>()
  for (const u of list) {
    const echo = await startEchoUpstream()
    t.teardown(() => echo.close())
    echoes.set(String(u.name), echo)
    u.target = echo.url
    u.auth = 'none'
  }
  const stack = await startStack(t, { upstreams: list })
  const matchUpstream = createUpstreamMatcher(stack.config.upstreams)
  const isAmbiguous = createRoutingAmbiguityCheck(stack.config.upstreams)
  // The gateway canonicalises the Host and refuses ambiguous paths before routing.
  const matcher = (host: string, path: string) => {
    const canonical = canonicalHost(host)
    return isAmbiguous(canonical, path) ? undefined : matchUpstream(canonical, path)
  }
  const ownHost = new URL(stack.gw).host

  /** Which upstream the gateway sent the request to, or undefined when it kept it. */
  async function routed(host: string, target: string): Promise<{ status: number; name: string | undefined }> {
    const before = new Map([...echoes].map(([name, echo]) => [name, echo.requests.length]))
    const res = await rawRequest(stack.gw, target, { headers: { host, accept: 'application/json' } })
    const received = [...echoes].filter(([name, echo]) => echo.requests.length !== before.get(name)).map(([name]) => name)
    if (received.length > 1) throw new Error(`${host} ${target} reached ${received.join(', ')}`)
    return { status: res.status, name: received[0] }
  }

  async function agree(host: string, target: string): Promise<boolean> {
    const actual = await routed(host, target)
    const normalized = normalizePath(target)
    if (normalized === null) return actual.status === 400 && actual.name === undefined
    return matcher(host, normalized.path)?.name === actual.name
  }

  const hosts = [
    ownHost,
    'a.example.com',
    'A.EXAMPLE.COM:9',
    'a.example.com.',
    'a.example.com:',
    'b.example.com.:08443',
    'b.example.com',
    'b.example.com:8443',
    'b.example.com:8443:1',
    'c.example.com',
    'd.example.com:80',
    'other.example.com',
    'xa.example.com',
    '[::1]:3000',
  ]
  const paths = [
    '/',
    '/x',
    '/app',
    '/app/',
    '/app/x',
    '/apple',
    '/app/api',
    '/app/api/',
    '/app/apiary',
    '/app/api/v2',
    '/app/api/v2/z',
    '/app/api/v3',
    '/caf%C3%A9',
    '/caf%c3%a9/x',
    '/caf%C3%A9s',
    '/a,b',
    '/a%2Cb',
    '/a,b/c',
    '/Docs',
    '/docs',
    '/Docs/x',
    '/100%25',
    '/100%25/z',
    '/x/y',
    '/x/y/z',
    '/x/yz',
    '/v6/q',
    '/api/v1/openid',
    '/api/v1/openid/x',
    '/API/v1/openid/x',
    '/%61pp/x',
    '/app//x',
    '/app/./x',
    '/app/../x',
    '/app?q=/app/api',
    '/app/%3Bx',
  ]
  let checked = 0
  for (const host of hosts) {
    for (const path of paths) {
      const actual = await routed(host, path)
      const normalized = normalizePath(path)
      const expected = normalized === null ? undefined : matcher(host, normalized.path)?.name
      t.equal(expected, actual.name, `${host} ${path}`)
      checked++
    }
  }
  t.ok(checked > 300, `${checked} table cases`)
  // The table must exercise every upstream, or a wrong answer for one could go unnoticed.
  for (const [name, echo] of echoes) t.ok(echo.requests.length > 0, `${name} received requests`)

  // Then random combinations of the same pieces.
  const segment = fc.constantFrom('app', 'api', 'v2', 'apiary', 'x', 'y', 'a,b', 'a%2Cb', 'caf%C3%A9', 'Docs', '100%25', 'v6', '.', '..', '', 'api/v1/openid')
  const target = fc.array(segment, { minLength: 0, maxLength: 5 }).map((s) => '/' + s.join('/'))
  await fc.assert(fc.asyncProperty(fc.constantFrom(...hosts), target, agree), { numRuns: 300, seed: 20240601 })
  t.pass('300 random (host, path) pairs agree')
})
