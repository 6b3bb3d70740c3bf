import t from 'tap'
import { checkInputOf, headersOf } from '#src/checks/envoy-grpc/check-input'

// The decoded CheckRequest is whatever came off the network: anything that is not a described
// HTTP request is a reason to refuse, never an exception or a guess.

const HTTP = { method: 'GET', host: 'app.example.com', path: '/', scheme: 'https' }

t.test('anything but a described HTTP request is refused with its reason', async (t) => {
  for (const request of [
    undefined,
    null,
    'x',
    42,
    [],
    {},
    { attributes: null },
    { attributes: { request: null } },
    { attributes: { request: { http: null } } },
    { attributes: { request: { http: [] } } },
  ]) {
    t.equal(checkInputOf(request), 'no HTTP request attributes', JSON.stringify(request) ?? 'undefined')
  }
  for (const http of [
    { ...HTTP, method: '' },
    { ...HTTP, host: '' },
    { ...HTTP, path: '' },
    { ...HTTP, method: 5 },
    { ...HTTP, host: null },
  ]) {
    t.equal(checkInputOf({ attributes: { request: { http } } }), 'no method, path or host', JSON.stringify(http))
  }
})

t.test('the upstream is a string from context_extensions or nothing', async (t) => {
  const input = (context_extensions: unknown) => checkInputOf({ attributes: { request: { http: HTTP }, context_extensions } })
  t.match(input({ upstream: 'app' }), { upstream: 'app' })
  t.match(input({ upstream: '' }), { upstream: '' }, 'an empty name is passed on, to be refused as unknown')
  t.match(input({}), { upstream: undefined })
  t.match(input(null), { upstream: undefined })
  t.match(input({ upstream: 7 }), { upstream: undefined })
  t.match(checkInputOf({ attributes: { request: { http: { ...HTTP, scheme: undefined } } } }), { scheme: '' })
})

t.test('header names: ASCII lower-casing only, __proto__ is a header like any other', async (t) => {
  const headers = headersOf({ headers: { 'X-\u212Aey': 'kelvin', ['__proto__']: 'p' } })
  t.strictSame(Object.keys(headers), ['x-\u212Aey', '__proto__'], 'KELVIN SIGN is not folded onto k')
  t.equal(Object.getPrototypeOf(headers), Object.prototype)
  t.equal(headers['__proto__'], 'p')
  t.strictSame(
    headersOf({ header_map: { headers: [{ key: '', raw_value: Buffer.from('x') }, null, 'x', { key: 'A', raw_value: new Uint8Array([0x62]) }] } }),
    { a: 'b' },
    'entries without a name are skipped',
  )
})
