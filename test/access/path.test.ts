import t from 'tap'
import fc from 'fast-check'
import { isInNormalForm, normalizePath } from '#src/access/path'

const NUM_RUNS = 3000

// Test names go into TAP lines: escape everything outside printable ASCII (U+2028 ends a line).
function show(s: string): string {
  return JSON.stringify(s).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

function pathOf(raw: string): string | null {
  const r = normalizePath(raw)
  return r === null ? null : r.path
}

t.test('accepts and normalizes', async (t) => {
  const cases: Array<[string, string]> = [
    ['/', '/'],
    ['/a/b', '/a/b'],
    ['/a/b/', '/a/b/'],
    ['/.well-known/openid-configuration', '/.well-known/openid-configuration'],
    // RFC 3986 6.2.2.2: percent-encoded unreserved characters are decoded
    ['/%61dmin', '/admin'],
    ['/%41%5a%61%7a%30%39%2d%2e%5f%7e', '/AZaz09-._~'],
    ['/a%2Eb', '/a.b'],
    // RFC 3986 6.2.2.1: other percent-encodings keep their bytes, hex uppercased
    ['/a%3ab', '/a%3Ab'],
    ['/a%20b', '/a%20b'],
    ['/a%40b%21', '/a%40b%21'],
    ['/a%3fb', '/a%3Fb'],
    ['/a%23b', '/a%23b'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/%e2%82%ac', '/%E2%82%AC'],
    ['/%F0%9F%98%80', '/%F0%9F%98%80'],
    ['/%ef%bf%bd', '/%EF%BF%BD'],
    ['/%c2%a0', '/%C2%A0'],
    // a lone %25 is kept: only a hex digit after it is the double-encoding shape
    ['/100%25', '/100%25'],
    ['/100%25/x', '/100%25/x'],
    ['/100%25%25', '/100%25%25'],
    ['/%25x', '/%25x'],
    // runs of '/' collapse (nginx merge_slashes)
    ['//admin', '/admin'],
    ['///a///b///', '/a/b/'],
    ['/a//b', '/a/b'],
    // RFC 3986 5.2.4 remove_dot_segments
    ['/a/./b', '/a/b'],
    ['/a/b/.', '/a/b/'],
    ['/a/b/..', '/a/'],
    ['/a/..', '/'],
    ['/..', '/'],
    ['/.', '/'],
    ['/../../etc/passwd', '/etc/passwd'],
    ['/a/b/../../..', '/'],
    ['/a/b/../c/./d', '/a/c/d'],
    // the bypasses dot segments are for: /public/** must not cover these (NVIDIA/OpenShell#878)
    ['/public/../admin', '/admin'],
    ['/public/%2e%2e/admin', '/admin'],
    ['/public/%2E%2E/admin', '/admin'],
    ['/public/.%2e/admin', '/admin'],
    ['/public/%2e./admin', '/admin'],
    ['/public/%2e/admin', '/public/admin'],
    ['/%2e%2e/', '/'],
    // encoded dots that are not a whole segment stay ordinary characters
    ['/a/.../b', '/a/.../b'],
    ['/a/..b/c', '/a/..b/c'],
    ['/a/b../c', '/a/b../c'],
    // trailing-dot segment: a different path, kept (default-deny makes it fail closed)
    ['/admin.', '/admin.'],
    ['/admin..', '/admin..'],
    // sub-delims and other pchar are fine raw
    ["/a:b@c!$&'()*+,=", "/a:b@c!$&'()*+,="],
  ]
  for (const [raw, want] of cases) {
    t.equal(pathOf(raw), want, show(raw))
  }
})

t.test('splits the query at the first ? and returns it unchanged', async (t) => {
  t.same(normalizePath('/a/b?x=1'), { path: '/a/b', search: '?x=1' })
  t.same(normalizePath('/a/b'), { path: '/a/b', search: '' })
  t.same(normalizePath('/a?'), { path: '/a', search: '?' })
  t.same(normalizePath('/a?x=%2F&y=/../b;c\\d'), { path: '/a', search: '?x=%2F&y=/../b;c\\d' })
  t.same(normalizePath('/a/..?x=1?y'), { path: '/', search: '?x=1?y' })
  t.same(normalizePath('/%61?%61'), { path: '/a', search: '?%61' })
  t.same(normalizePath('/?caf\u00e9'), { path: '/', search: '?caf\u00e9' }, "raw non-ASCII in the query is the upstream's business")
})

t.test('fast path returns the input path untouched', async (t) => {
  const raw = '/assets/app.min.js'
  const r = normalizePath(raw)
  t.equal(r?.path, raw)
  t.equal(r?.search, '')
})

t.test('refuses', async (t) => {
  const cases: Array<[string, string]> = [
    ['', 'empty'],
    ['a/b', 'not origin-form'],
    ['*', 'asterisk-form'],
    ['http://evil.example/admin', 'absolute-form'],
    ['/a#b', 'fragment (RFC 9112 3.2)'],
    ['/a?x#y', 'fragment after the query'],
    ['/a%2Fb', 'encoded slash'],
    ['/a%2fb', 'encoded slash, lowercase'],
    ['/public%2F..%2Fadmin', 'encoded slash traversal'],
    ['/a%5Cb', 'encoded backslash'],
    ['/a%5cb', 'encoded backslash, lowercase'],
    ['/a\\b', 'raw backslash'],
    ['/..\\admin', 'raw backslash traversal'],
    ['/admin;x=y', 'path parameter (Tomcat/Spring strip it: istio/istio#27409)'],
    ['/admin;', 'bare ;'],
    ['/public/..;/admin', 'Tomcat ..; traversal'],
    ['/admin%3bx', 'encoded ;'],
    ['/admin%3B', 'encoded ;, uppercase'],
    ['/a%00b', 'encoded NUL'],
    ['/a%09', 'encoded TAB'],
    ['/a%0d%0aSet-Cookie:x', 'encoded CRLF'],
    ['/a%1f', 'encoded US'],
    ['/a%7f', 'encoded DEL'],
    ['/a%7F', 'encoded DEL, uppercase'],
    ['/a\u0000b', 'raw NUL'],
    ['/a\tb', 'raw TAB'],
    ['/a\nb', 'raw LF'],
    ['/a\rb', 'raw CR'],
    ['/a\u007fb', 'raw DEL'],
    ['/a b', 'raw space'],
    ['/caf\u00e9', 'raw non-ASCII (latin1 octet)'],
    ['/\u0085', 'raw NEL'],
    ['/\u2028', 'raw LINE SEPARATOR'],
    ['/a?x=\r\n', 'raw CRLF in the query'],
    ['/a?x=\u0000', 'raw NUL in the query'],
    ['/a?x y', 'raw space in the query'],
    ['/a%252e', 'double-encoded dot'],
    ['/a%252F', 'double-encoded slash'],
    ['/%252e%252e/admin', 'double-encoded traversal'],
    ['/a%25%32%65', 'double encoding assembled from decoded unreserved digits'],
    ['/a%25%41', '%25 then an encoded hex letter'],
    ['/a%25a', '%25 then one raw hex digit'],
    ['/a%', 'truncated escape'],
    ['/a%2', 'truncated escape'],
    ['/a%zz', 'invalid escape'],
    ['/a%g0', 'invalid escape'],
    ['/a%%32', 'invalid escape'],
    ['/%C0%AE', 'overlong "." (RFC 3629)'],
    ['/%c0%ae%c0%ae/admin', 'overlong ".." traversal'],
    ['/%C0%AF', 'overlong "/"'],
    ['/%C1%9C', 'overlong "\\"'],
    ['/%E0%80%AE', 'overlong 3-byte "."'],
    ['/%F0%80%80%AE', 'overlong 4-byte "."'],
    ['/%ED%A0%80', 'UTF-16 surrogate'],
    ['/%F4%90%80%80', 'above U+10FFFF'],
    ['/%F5%80%80%80', 'invalid lead byte'],
    ['/%FF', 'invalid byte'],
    ['/%80', 'lone continuation byte'],
    ['/%C3', 'truncated sequence'],
    ['/%C3x', 'continuation byte not encoded'],
    ['/%C3ZA9', 'continuation byte not encoded, hex-looking characters after it'],
    ['/%E2-82%AC', 'middle byte not encoded'],
    ['/%C3%28', 'invalid continuation byte'],
    ['/%E2%82', 'truncated 3-byte sequence'],
    ['/%C2%85', 'encoded NEL (C1 control)'],
    ['/%C2%80', 'encoded C1 control'],
    ['/%C2%9F', 'encoded C1 control'],
  ]
  for (const [raw, why] of cases) {
    t.equal(normalizePath(raw), null, `${why}: ${show(raw)}`)
  }
})

// Tokens that exercise every branch: separators, dot segments in all encodings, forbidden
// characters raw and encoded, valid and invalid UTF-8, the query and fragment delimiters.
const TOKENS = [
  '/',
  '/',
  '/',
  '/',
  '.',
  '..',
  '.',
  'a',
  'b',
  'admin',
  'public',
  '%2e',
  '%2E',
  '%2e%2e',
  '%2f',
  '%2F',
  '%5c',
  '%5C',
  '\\',
  ';',
  '%3b',
  '%25',
  '%2525',
  '%41',
  '%61',
  '%7e',
  '%20',
  '%3A',
  '%3f',
  '%00',
  '%09',
  '%0a',
  '%7f',
  '%C0%AE',
  '%c3%a9',
  '%E2%82%AC',
  '%F0%9F%98%80',
  '%ED%A0%80',
  '%C2%85',
  '%',
  '%z',
  '%zz',
  '?',
  '#',
  '=',
  '~',
  '-',
  '_',
  ':',
  '@',
  '!',
  '\t',
  ' ',
  '\u00e9',
  '\u2028',
  '\u0000',
]
const tokenPath = fc.array(fc.constantFrom(...TOKENS), { maxLength: 24 }).map((ts) => '/' + ts.join(''))
const anyPath = fc.oneof(
  tokenPath,
  fc.string({ unit: 'binary', maxLength: 40 }).map((s) => '/' + s),
  fc.string({ unit: 'binary', maxLength: 40 }),
)

t.test('property: output invariants', async (t) => {
  fc.assert(
    fc.property(anyPath, (raw) => {
      const r = normalizePath(raw)
      if (r === null) return true
      const p = r.path
      return (
        p.charCodeAt(0) === 0x2f &&
        !p.includes('//') &&
        !p.includes('/./') &&
        !p.includes('/../') &&
        !p.endsWith('/.') &&
        !p.endsWith('/..') &&
        !p.includes('\\') &&
        !p.includes(';') &&
        !p.includes('#') &&
        !p.includes('?') &&
        !/%2f|%5c|%3b/i.test(p) &&
        !/%25[0-9a-f]/i.test(p) &&
        !/%[0-9a-f]?[a-f]/.test(p) && // hex is uppercase
        !/[\u0000-\u0020\u007f-\uffff]/.test(p) &&
        (r.search === '' || raw.endsWith(r.search))
      )
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('invariants hold')
})

t.test('property: idempotent', async (t) => {
  fc.assert(
    fc.property(anyPath, (raw) => {
      const r = normalizePath(raw)
      if (r === null) return true
      const again = normalizePath(r.path + r.search)
      return again !== null && again.path === r.path && again.search === r.search
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('idempotent')
})

t.test('property: one decoding upstream sees the same segments', async (t) => {
  // What the upstream router sees after its usual single percent-decoding: no new separators,
  // no dot segments, no backslash, valid UTF-8 (decodeURIComponent throws otherwise).
  fc.assert(
    fc.property(anyPath, (raw) => {
      const r = normalizePath(raw)
      if (r === null) return true
      const decoded = decodeURIComponent(r.path)
      const segments = decoded.split('/')
      return (
        segments.length === r.path.split('/').length &&
        !segments.slice(1, -1).some((s) => s === '' || s === '.' || s === '..') &&
        !['.', '..'].includes(segments[segments.length - 1] ?? '') &&
        !decoded.includes('\\') &&
        !decoded.includes(';') &&
        !/[\u0000-\u001f\u007f-\u009f]/.test(decoded)
      )
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('single decoding is safe')
})

// RFC 3986 5.2.4 remove_dot_segments, transcribed step by step as an independent oracle. (Not
// WHATWG URL: Node 20's parser, ada 2.9.2, leaves `/x/.b/c/..` unresolved after a segment that
// starts with a dot, ada-url/ada#935; one more reason auth decisions never use it for paths.)
function removeDotSegments(path: string): string {
  let input = path
  let output = ''
  const dropLast = (): void => {
    output = output.slice(0, Math.max(0, output.lastIndexOf('/')))
  }
  while (input.length > 0) {
    if (input.startsWith('../')) input = input.slice(3)
    else if (input.startsWith('./')) input = input.slice(2)
    else if (input.startsWith('/./')) input = input.slice(2)
    else if (input === '/.') input = '/'
    else if (input.startsWith('/../')) {
      input = input.slice(3)
      dropLast()
    } else if (input === '/..') {
      input = '/'
      dropLast()
    } else if (input === '.' || input === '..') input = ''
    else {
      const next = input.indexOf('/', 1)
      const segment = next === -1 ? input : input.slice(0, next)
      output += segment
      input = input.slice(segment.length)
    }
  }
  return output
}

t.test('property: agrees with RFC 3986 5.2.4 on plain paths', async (t) => {
  // Without percent-encoding and without '//' (which we collapse first), the result is exactly
  // remove_dot_segments.
  const plain = fc
    .array(fc.constantFrom('/', '.', '..', 'a', 'b', '.b', '-', '_', '~', ':', '@', '!', '$', '=', '+'), { maxLength: 16 })
    .map((ts) => '/' + ts.join(''))
    .filter((s) => !s.includes('//'))
  t.equal(removeDotSegments('/a/b/c/./../../g'), '/a/g', 'oracle: RFC 3986 5.2.4 example')
  t.equal(removeDotSegments('/x/.b/c/..'), '/x/.b/', 'oracle: dot-prefixed segment')
  fc.assert(
    fc.property(plain, (raw) => pathOf(raw) === removeDotSegments(raw)),
    { numRuns: NUM_RUNS },
  )
  t.pass('agrees with RFC 3986')
})

t.test('property: every forbidden character or escape refuses, wherever it sits', async (t) => {
  const forbidden = fc.constantFrom(
    '%2f',
    '%2F',
    '%5c',
    '%5C',
    '\\',
    ';',
    '%3b',
    '%3B',
    '#',
    '%00',
    '%0a',
    '%0D',
    '%1F',
    '%7f',
    '\u0000',
    '\t',
    '\n',
    '\r',
    ' ',
    '\u007f',
    '\u00e9',
    '%C0%AE',
    '%c0%af',
    '%80',
    '%ff',
    '%C2%85',
    '%2525',
    '%252e',
    '%g1',
    '%',
  )
  const clean = fc.array(fc.constantFrom('/', 'a', '.', '..', '%41', '%2e'), { maxLength: 8 }).map((ts) => ts.join(''))
  fc.assert(
    fc.property(clean, forbidden, clean, (before, bad, after) => normalizePath('/' + before + bad + after) === null),
    { numRuns: NUM_RUNS },
  )
  t.pass('refused')
})

t.test('property: clean paths take the fast path unchanged', async (t) => {
  const clean = fc
    .array(fc.constantFrom('/', 'a', 'b', '-', '_', '~', '.', ':', '@'), { maxLength: 20 })
    .map((ts) => '/' + ts.join(''))
    .filter((s) => !s.includes('//') && !s.includes('/.'))
  fc.assert(
    fc.property(clean, (raw) => pathOf(raw) === raw),
    { numRuns: NUM_RUNS },
  )
  t.pass('unchanged')
})

t.test('isInNormalForm: only a target the normalizer leaves unchanged, the query aside', async (t) => {
  const normal = ['/', '/a/b', '/a/b/', '/admin/users?x=/../y', '/.well-known/jwks.json', '/a%20b', '/caf%C3%A9', '/100%25', '/a.b/c..d']
  for (const raw of normal) {
    const n = normalizePath(raw)
    t.ok(n !== null && isInNormalForm(raw, n), show(raw))
  }
  const rewritten = [
    '/admin//../users',
    '/admin/../users',
    '/admin/./users',
    '/admin/%2e%2e/users',
    '//admin',
    '/admin//x',
    '/%61dmin',
    '/a%3ab',
    '/caf%c3%a9',
    '/a/.',
    '/a/..',
    '/..',
  ]
  for (const raw of rewritten) {
    const n = normalizePath(raw)
    t.ok(n !== null && !isInNormalForm(raw, n), show(raw))
  }
})

t.test('property: a normalized target is in normal form, and so is exactly what normalizes to itself', async (t) => {
  fc.assert(
    fc.property(fc.stringMatching(/^(\/(\.|\.\.|%2[eE]|%61|[a-z]{1,3}|))+(\?[a-z/.]*)?$/), (raw) => {
      const n = normalizePath(raw)
      if (n === null) return true
      const again = normalizePath(n.path + n.search)
      return again !== null && isInNormalForm(n.path + n.search, again) && isInNormalForm(raw, n) === (n.path === raw.split('?')[0])
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('holds')
})
