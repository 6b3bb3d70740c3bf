import t from 'tap'
import fc from 'fast-check'
import { validateHeaderValue } from 'node:http'
import {
  createHeaderScrubber,
  GATEWAY_ONLY_HEADERS,
  identityHeaderUnion,
  identityHeadersToRemove,
  identityHeaderValues,
  isReservedHeaderName,
  scrubResponseHeaders,
  stripCookies,
  type HeaderBag,
} from '#src/upstream/header-policy'
import type { IdentityHeaderNames } from '#src/options/types'
import { DEFAULT_IDENTITY_HEADER_NAMES } from '../fixtures/config/base.ts'
import { deepFreeze } from '#src/lib/deep-freeze'

const NUM_RUNS = 2000

const NAMES: IdentityHeaderNames = DEFAULT_IDENTITY_HEADER_NAMES

function show(s: string): string {
  return JSON.stringify(s).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

t.test('scrubber: case and underscore variants are all removed, into a new object', async (t) => {
  const scrub = createHeaderScrubber([NAMES.user, NAMES.email, ...GATEWAY_ONLY_HEADERS])
  let headers: HeaderBag = {
    'x-forwarded-user': 'a',
    'X-FORWARDED-USER': 'b',
    X_Forwarded_User: 'c',
    'x_forwarded-user': 'd',
    'X-Forwarded_Email': 'e',
    'x-auth-request-user': 'f',
    X_Auth_Request_Access_Token: 'g',
    'x-forwarded-access-token': 'h',
    'x-forwarded-for': '1.2.3.4',
    'x-forwarded-proto': 'http',
    'x-forwarded-host': 'evil',
    'x-forwarded-port': '1',
    'x-forwarded-uri': '/public',
    'x-forwarded-method': 'GET',
    'x-original-url': '/public',
    'x-real-ip': '1.2.3.4',
    forwarded: 'for=1.2.3.4',
    Forwarded: 'for=1.2.3.4',
    host: 'app.example.com',
    'x-auth-requests': 'kept: not the x-auth-request- prefix',
    'x-forwarded-user-agent': "removed: every X-Forwarded-* is the gateway's",
    'x-forwarded-groups': 'removed: a default identity header, whatever this upstream configures',
    'x-forwardedness': 'kept: not the x-forwarded- prefix',
    cookie: 'a=1',
    'set-cookie': ['x'],
    'x-empty': undefined,
  }
  const given = headers
  const before = { ...given }
  headers = scrub(given)
  t.not(headers, given, 'a new object')
  t.same(given, before, 'the given headers are left as they were')
  t.same(Object.keys(headers).sort(), ['cookie', 'host', 'set-cookie', 'x-auth-requests', 'x-empty', 'x-forwardedness'])
})

t.test('scrubber: every gateway-only header goes (GHSA-7x63-xv5r-3p2x: forged X-Forwarded-Uri)', async (t) => {
  const scrub = createHeaderScrubber(GATEWAY_ONLY_HEADERS)
  for (const name of GATEWAY_ONLY_HEADERS) {
    const concrete = name.endsWith('*') ? `${name.slice(0, -1)}email` : name
    for (const variant of [concrete, concrete.toUpperCase(), concrete.replaceAll('-', '_')]) {
      let h: HeaderBag = { [variant]: 'x', keep: 'y' }
      h = scrub(h)
      t.same(h, { keep: 'y' }, variant)
    }
  }
})

t.test('scrubber: configured names are matched the same way', async (t) => {
  const scrub = createHeaderScrubber(['Remote_User', 'X-Custom-*'])
  let h: HeaderBag = { 'remote-user': 'a', REMOTE_USER: 'b', 'x-custom-a': 'c', X_CUSTOM_B: 'd', 'x-customer': 'e' }
  h = scrub(h)
  t.same(h, { 'x-customer': 'e' })
  t.throws(() => createHeaderScrubber(['*']), TypeError, 'a bare * would strip every header')
  const none = createHeaderScrubber([])
  let h2: HeaderBag = { a: '1' }
  h2 = none(h2)
  t.same(h2, { a: '1' })
})

t.test('property: any case/underscore spelling of a scrubbed name is removed', async (t) => {
  const scrub = createHeaderScrubber(['x-forwarded-user', 'x-auth-request-*'])
  const flags = fc.array(fc.boolean(), { minLength: 30, maxLength: 30 })
  const spelling = fc
    .tuple(fc.constantFrom('x-forwarded-user', 'x-auth-request-user', 'x-auth-request-'), flags, flags)
    .map(([name, upper, underscore]) => [...name].map((c, i) => (c === '-' && underscore[i] ? '_' : upper[i] ? c.toUpperCase() : c)).join(''))
  fc.assert(
    fc.property(spelling, (name) => {
      let h: HeaderBag = { [name]: 'forged', other: 'kept' }
      h = scrub(h)
      return !(name in h) && h.other === 'kept'
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('removed')
})

t.test('identityHeaderValues: lowercased names, absent values omitted', async (t) => {
  t.same(
    identityHeaderValues({ sub: 'u-1', email: 'a@example.com', groups: ['admins', 'ops'], preferred_username: 'alice' }, NAMES, 'https://login.example.com'),
    {
      'x-forwarded-user': 'u-1',
      'x-forwarded-email': 'a@example.com',
      'x-forwarded-groups': 'admins,ops',
      'x-forwarded-preferred-username': 'alice',
      'x-forwarded-issuer': 'https://login.example.com',
    },
    "the issuer of the user's provider in X-Forwarded-Issuer",
  )
  t.same(identityHeaderValues({ sub: 'u-1' }, NAMES, ''), { 'x-forwarded-user': 'u-1' })
  t.same(identityHeaderValues({}, NAMES, ''), {})
  t.same(identityHeaderValues({ sub: 'u', groups: 'admins' }, NAMES, ''), { 'x-forwarded-user': 'u', 'x-forwarded-groups': 'admins' }, 'single string group')
  t.same(identityHeaderValues({ sub: 42, email: ['a@b'], preferred_username: null, groups: { a: 1 } }, NAMES, ''), {}, 'non-strings omitted')
  t.same(identityHeaderValues({ groups: [] }, NAMES, ''), {}, 'no groups, no header')
  t.same(identityHeaderValues({ groups: ['a', 1, null, 'b', ''] }, NAMES, ''), { 'x-forwarded-groups': 'a,b' }, 'non-string and empty groups skipped')
  const custom = {
    user: 'Remote-User',
    email: 'Remote-Email',
    groups: 'Remote-Groups',
    preferredUsername: 'Remote-Name',
    issuer: 'Remote-Issuer',
    acr: 'Remote-Acr',
    amr: 'Remote-Amr',
    authTime: 'Remote-Auth-Time',
  }
  t.same(identityHeaderValues({ sub: 's', preferred_username: 'n' }, custom, ''), { 'remote-user': 's', 'remote-name': 'n' })
  t.same(identityHeaderValues(Object.create({ sub: 'inherited' }) as Record<string, unknown>, NAMES, ''), {}, 'own claims only')
  t.same(
    identityHeaderValues({ sub: 's', acr: 'mfa', amr: ['pwd', 'otp', 3, 'a,b'], auth_time: 1700000000 }, NAMES, ''),
    { 'x-forwarded-user': 's', 'x-forwarded-acr': 'mfa', 'x-forwarded-amr': 'pwd,otp', 'x-forwarded-auth-time': '1700000000' },
    'acr, amr (comma-joined, unsafe entries skipped) and auth_time',
  )
  t.same(identityHeaderValues({ acr: 'a\r\nx: y', amr: 'pwd', auth_time: 1.5 }, NAMES, ''), {}, 'unsafe acr, a non-list amr, a non-integer auth_time: omitted')
  // OpenID Connect Core 2: the time an authentication occurred. 0 (Glewlwyd 2.7), a time before
  // 2000 or one beyond the largest clock tolerance in the future is none: not forwarded.
  const future = Math.floor(Date.now() / 1000) + 3600
  for (const authTime of [0, 946684799, future]) {
    t.same(identityHeaderValues({ sub: 's', auth_time: authTime }, NAMES, ''), { 'x-forwarded-user': 's' }, `auth_time ${authTime}: not forwarded`)
  }
  t.same(identityHeaderValues({ auth_time: 946684800 }, NAMES, ''), { 'x-forwarded-auth-time': '946684800' }, '2000-01-01 is forwarded')
})

t.test('identityHeaderValues: refuses header injection and spoofing shapes', async (t) => {
  const bad = [
    'admin\r\nX-Forwarded-User: root',
    'admin\nx',
    'admin\rx',
    'admin\u0000',
    'admin\tx',
    '\tadmin',
    'admin\u007f',
    'admin\u0085',
    'admin\u2028x',
    'admin\u2029x',
    ' admin',
    'admin ',
    'admin\ud800',
    '\udc00admin',
    '',
  ]
  for (const value of bad) {
    t.same(identityHeaderValues({ sub: value, email: value, preferred_username: value, groups: [value] }, NAMES, ''), {}, show(value))
  }
  t.same(
    identityHeaderValues({ groups: ['ops', 'admins,root', 'dev', ' admins', 'x\ny'] }, NAMES, ''),
    { 'x-forwarded-groups': 'ops,dev' },
    'a comma would split one group into two; padded or broken names dropped',
  )
  t.same(
    identityHeaderValues({ sub: 'Alice Smith', preferred_username: 'a,b' }, NAMES, ''),
    {
      'x-forwarded-user': 'Alice Smith',
      'x-forwarded-preferred-username': 'a,b',
    },
    'inner spaces, and commas outside groups, are fine',
  )
})

t.test('identityHeaderValues: non-ASCII goes out as UTF-8 bytes', async (t) => {
  const out = identityHeaderValues({ sub: 'José', preferred_username: 'Пётр', email: 'a@ex\u00e4mple.com', groups: ['😀'] }, NAMES, '')
  const utf8 = (s: string): string => Buffer.from(s, 'utf8').toString('latin1')
  t.same(out, {
    'x-forwarded-user': utf8('José'),
    'x-forwarded-preferred-username': utf8('Пётр'),
    'x-forwarded-email': utf8('a@ex\u00e4mple.com'),
    'x-forwarded-groups': utf8('😀'),
  })
  t.equal(Buffer.from(out['x-forwarded-preferred-username'] ?? '', 'latin1').toString('utf8'), 'Пётр', 'upstream decodes UTF-8')
  t.throws(() => validateHeaderValue('x', 'Пётр'), 'Node refuses the raw string')
  t.doesNotThrow(() => validateHeaderValue('x', out['x-forwarded-preferred-username'] ?? ''))
})

t.test('property: every produced value is a valid header value Node accepts', async (t) => {
  const text = fc.string({ unit: 'binary', maxLength: 20 })
  fc.assert(
    fc.property(text, text, fc.array(text, { maxLength: 4 }), text, (sub, email, groups, name) => {
      const out = identityHeaderValues({ sub, email, groups, preferred_username: name }, NAMES, '')
      for (const [key, value] of Object.entries(out)) {
        validateHeaderValue(key, value)
        if (/[\u0000-\u001f\u007f]/.test(value) || value.startsWith(' ') || value.endsWith(' ')) return false
        const original: Record<string, string> = {
          'x-forwarded-user': sub,
          'x-forwarded-email': email,
          'x-forwarded-preferred-username': name,
        }
        // UTF-8 on the wire decodes back to exactly the claim
        if (key !== 'x-forwarded-groups' && Buffer.from(value, 'latin1').toString('utf8') !== original[key]) return false
      }
      const g = out['x-forwarded-groups']
      if (g !== undefined) {
        const decoded = Buffer.from(g, 'latin1').toString('utf8').split(',')
        if (!decoded.every((x) => groups.includes(x))) return false
      }
      return true
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('valid')
})

const gateway = (name: string): boolean => name === '__Host-gw' || name.startsWith('__Host-gw.')

t.test('stripCookies', async (t) => {
  t.equal(stripCookies('a=1; __Host-gw=x; b=2', gateway), 'a=1; b=2')
  t.equal(stripCookies('__Host-gw=x', gateway), undefined, 'nothing left')
  t.equal(stripCookies('__Host-gw=x; __Host-gw.1=y', gateway), undefined, 'chunked session cookies')
  t.equal(stripCookies('', gateway), undefined, 'empty header')
  t.equal(stripCookies(' ;; ', gateway), undefined, 'only separators')
  const untouched = 'a=1;b=2 ;  c="q v"'
  t.equal(stripCookies(untouched, gateway), untouched, 'nothing removed: byte for byte')
  t.equal(stripCookies('a=1;__Host-gw=x;b=2', gateway), 'a=1; b=2')
  t.equal(stripCookies('a=1 ;\t__Host-gw=x ;  b=2', gateway), 'a=1; b=2', 'only the OWS around pairs is dropped')
  t.equal(stripCookies('q="a; b"; __Host-gw=x', gateway), 'q="a; b"', 'split on ; like the cookie parser, even inside quotes')
  t.equal(stripCookies('a=b=c; __Host-gw=x; d==', gateway), 'a=b=c; d==', 'values with =')
  t.equal(stripCookies(' __Host-gw =x; a=1', gateway), 'a=1', 'name padding trimmed as @fastify/cookie does')
  t.equal(stripCookies('\t__Host-gw\t=x; a=1', gateway), 'a=1', 'tab padding')
  t.equal(stripCookies('__Host-gw=1; a=1; __Host-gw=2', gateway), 'a=1', 'every occurrence')
  t.equal(stripCookies('__Host-gw; a=1', gateway), '__Host-gw; a=1', 'no = is not a cookie to the parser, kept')
  t.equal(stripCookies('__Host-gw.0; a=1', gateway), '__Host-gw.0; a=1', 'the name never reaches past its own pair')
  t.equal(stripCookies('__Host-gw.0; a=1; __Host-gw=x', gateway), '__Host-gw.0; a=1')
  // By value: a seal under a name the gateway does not know takes its chunks with it.
  const sealed = (_name: string, value: string): boolean => value.replace(/^[2-9]~/, '').startsWith('KEYID123.')
  t.equal(stripCookies('old=2~KEYID123.abc; a=1; old_1=def; old_2=ghi; other_1=x', sealed), 'a=1; other_1=x', "a removed cookie's chunks go too, others stay")
  t.equal(stripCookies('old_1=def; old=KEYID123.abc', sealed), undefined, 'whatever their order')
  t.equal(stripCookies('__host-gw=x; a=1', gateway), '__host-gw=x; a=1', 'names are case-sensitive')
  t.equal(stripCookies('x__Host-gw=1; __Host-gwx=2; a=1', gateway), 'x__Host-gw=1; __Host-gwx=2; a=1')
  t.equal(stripCookies('a=%E2%82%AC; __Host-gw=x; b=\u00e9', gateway), 'a=%E2%82%AC; b=\u00e9', 'values kept byte for byte')
  t.equal(stripCookies('=v; __Host-gw=x', gateway), '=v', 'nameless pair kept')
})

t.test('property: stripCookies keeps exactly the foreign pairs', async (t) => {
  const nameArb = fc.constantFrom('a', 'b', '__Host-gw', '__Host-gw.0', 'session', '__Host-gwx', '')
  const valueArb = fc.constantFrom('1', 'x=y', '"q"', '%20', '')
  const padArb = fc.constantFrom('', ' ', '\t', '  ')
  const pairArb = fc.tuple(padArb, nameArb, padArb, valueArb, padArb).map(([p1, n, p2, v, p3]) => ({ n, text: `${p1}${n}${p2}=${v}${p3}` }))
  fc.assert(
    fc.property(fc.array(pairArb, { maxLength: 6 }), (pairs) => {
      const header = pairs.map((p) => p.text).join(';')
      const out = stripCookies(header, gateway)
      const kept = pairs
        .filter((p) => !gateway(p.n))
        .map((p) => p.text.replace(/^[ \t]+|[ \t]+$/g, ''))
        .filter((s) => s !== '')
      const removedAny = pairs.some((p) => gateway(p.n))
      if (kept.length === 0) return out === undefined
      return removedAny ? out === kept.join('; ') : out === header
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('exact')
})

t.test('hop-by-hop: the fixed list and every header Connection names, in any case', async (t) => {
  const h: HeaderBag = {
    Connection: 'close, X-Drop, x_other',
    connection: ['x-third'],
    'keep-alive': 'timeout=5',
    'Proxy-Connection': 'keep-alive',
    TE: 'trailers',
    trailer: 'x',
    'transfer-encoding': 'chunked',
    upgrade: 'websocket',
    'proxy-authorization': 'Basic x',
    'http2-settings': 'x',
    expect: '100-continue',
    'x-drop': '1',
    'X-OTHER': '1',
    'x-third': '1',
    'content-type': 'text/plain',
    'x-kept': '1',
  }
  t.same(createHeaderScrubber([])(h), { 'content-type': 'text/plain', 'x-kept': '1' }, 'the request policy')
  t.same(
    scrubResponseHeaders(h, () => false),
    { 'content-type': 'text/plain', 'x-kept': '1' },
    'the response policy',
  )
})

t.test('response policy: Set-Cookie of the gateway dropped, however it is spelled to a browser', async (t) => {
  const isGateway = (name: string): boolean => name === 'ogw' || name.startsWith('ogw_')
  const h: HeaderBag = {
    'set-cookie': ['ogw=x', ' ogw\t=x', '=ogw=x', 'ogw_1=x; Path=/', 'ogw=; Max-Age=0', 'a=1', 'OGW=x', 'ogwx=1', '=novalue', 'bare'],
    connection: 'x-hop',
    'x-hop': '1',
    'keep-alive': 'timeout=1',
    'content-type': 'text/html',
  }
  t.same(scrubResponseHeaders(h, isGateway), { 'set-cookie': ['a=1', 'OGW=x', 'ogwx=1', '=novalue', 'bare'], 'content-type': 'text/html' })
  const only: HeaderBag = { 'Set-Cookie': 'ogw=x' }
  t.same(scrubResponseHeaders(only, isGateway), {})
})

t.test('reserved header names: what the policy manages or strips, except the X-Forwarded-* the identity may use', async (t) => {
  for (const name of [
    'Authorization',
    'cookie',
    'Host',
    'X-Forwarded-For',
    'x_forwarded_proto',
    'X-Forwarded-Prefix',
    'Keep-Alive',
    'TE',
    'True-Client-IP',
    'X-Original-URL',
    'X-Original-Anything',
    'X-HTTP-Method-Override',
    'X-Envoy-Internal',
    'X-Auth-Request-User',
    'Forwarded',
    'X-Forwarded',
  ]) {
    t.ok(isReservedHeaderName(name), name)
  }
  for (const name of ['X-Forwarded-User', 'X-Forwarded-Email', 'X-Forwarded-Groups', 'X-Forwarded-Preferred-Username', 'Remote-User', 'X-User']) {
    t.notOk(isReservedHeaderName(name), name)
  }
})

t.test('identity headers of frozen (session) claims are computed once; other claims every time', async (t) => {
  const frozen = deepFreeze({ sub: 'alice', email: 'alice@example.com', groups: ['staff', 'admins'] })
  const first = identityHeaderValues(frozen, NAMES, '')
  t.same(first, { 'x-forwarded-user': 'alice', 'x-forwarded-email': 'alice@example.com', 'x-forwarded-groups': 'staff,admins' })
  t.equal(identityHeaderValues(frozen, NAMES, ''), first, 'the same values object for the same claims')
  t.ok(Object.isFrozen(first), 'shared, so frozen')
  const other: IdentityHeaderNames = { ...NAMES, user: 'X-User' }
  t.same(identityHeaderValues(frozen, other, '')['x-user'], 'alice', 'kept per set of names')
  const open: Record<string, unknown> = { sub: 'bob' }
  t.same(identityHeaderValues(open, NAMES, '')['x-forwarded-user'], 'bob')
  open.sub = 'carol'
  t.same(identityHeaderValues(open, NAMES, '')['x-forwarded-user'], 'carol', 'claims that can change are read again')
})

t.test('request scrubber: the hop-by-hop headers and the listed ones go in the same pass, Connection-named ones too', async (t) => {
  const scrub = createHeaderScrubber(['x-forwarded-user'])
  let h: HeaderBag = {
    connection: 'keep-alive, X-Named',
    'keep-alive': 'timeout=5',
    'x-named': '1',
    te: 'trailers',
    'x-forwarded-user': 'mallory',
    accept: '*/*',
  }
  h = scrub(h)
  t.same(h, { accept: '*/*' })
  let plain: HeaderBag = { connection: 'keep-alive', accept: '*/*', 'x-kept': '1' }
  plain = scrub(plain)
  t.same(plain, { accept: '*/*', 'x-kept': '1' }, 'keep-alive alone names no other header')
})

t.test('header-name verdicts are kept for a bounded number of names, and judged alike past the bound', async (t) => {
  const scrub = createHeaderScrubber(['x-forwarded-user'])
  // More distinct names than the memo keeps: the verdicts after the bound are still made.
  const wrong: number[] = []
  for (let i = 0; i < 600; i++) {
    let h: HeaderBag = { [`x-filler-${i}`]: '1', X_Forwarded_User: 'mallory', 'x-forwarded-user': 'mallory', Connection: `x-named-${i}`, [`x-named-${i}`]: '1' }
    h = scrub(h)
    if (JSON.stringify(h) !== JSON.stringify({ [`x-filler-${i}`]: '1' })) wrong.push(i)
  }
  t.same(wrong, [], 'every request scrubbed alike')
})

t.test('the identity header union: every name configured anywhere, folded, once', async (t) => {
  const defaults = DEFAULT_IDENTITY_HEADER_NAMES
  const union = identityHeaderUnion([defaults, { ...defaults, user: 'X-WEBAUTH-USER' }, { ...defaults, user: 'x_webauth_user' }], 'X-Identity-Assertion')
  for (const name of ['x-forwarded-user', 'x-webauth-user', 'x-auth-request-user', 'x-auth-request-access-token', 'x-identity-assertion'])
    t.ok(union.names.includes(name), name)
  t.equal(union.names.filter((name) => name === 'x-webauth-user').length, 1, 'each name once, canonical')
  t.ok(union.has('X_WebAuth-User'), 'case and _/- folded')
  t.notOk(union.has('x-forwarded-for'))

  const remove = identityHeadersToRemove(
    union,
    { x_forwarded_user: 'admin', 'x-forwarded-user': 'admin', 'x-webauth_user': 'admin', accept: '*/*' },
    new Set(['x-forwarded-user']),
  )
  t.notOk(remove.includes('x-forwarded-user'), 'a name the answer sets is overwritten, not removed')
  t.ok(remove.includes('x-webauth-user'), "another upstream's name")
  t.ok(remove.includes('x_forwarded_user'), 'a received spelling with `_`')
  t.ok(remove.includes('x-webauth_user'), 'a mixed spelling')
  t.notOk(remove.includes('accept'))
})
