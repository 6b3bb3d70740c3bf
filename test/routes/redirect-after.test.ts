import t, { type Test } from 'tap'
import fc from 'fast-check'
import { createRedirectAfterValidator, REDIRECT_AFTER_MAX_LENGTH } from '#src/routes/redirect-after'

const NUM_RUNS = 3000
const PUBLIC = 'https://app.example.com'
const ALLOWED = ['other.example.org', '.corp.example', 'port.example.net:8443', '[::1]:9000', '*.wild.example']

const validate = createRedirectAfterValidator({ publicUrl: PUBLIC, allowedHosts: ALLOWED })

// Test names go into TAP lines: escape everything outside printable ASCII (U+2028 ends a line).
function show(s: string): string {
  return JSON.stringify(s).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

function refuses(t: Test, cases: Array<[string, string]>): void {
  for (const [value, why] of cases) t.equal(validate(value), null, `${why}: ${show(value)}`)
}

t.test('accepts relative paths on the public origin', async (t) => {
  const cases: Array<[string, string]> = [
    ['/', '/'],
    ['/dashboard', '/dashboard'],
    ['/a/b?x=1&y=2#frag', '/a/b?x=1&y=2#frag'],
    ['/search?next=%2Fhome', '/search?next=%2Fhome'],
    ['/search?next=https://other.site/x', '/search?next=https://other.site/x'],
    ['/files/100%25', '/files/100%25'],
    ['/files/100%25?q=%252F', '/files/100%25?q=%252F'],
    ['/caf%C3%A9', '/caf%C3%A9'],
    ['/a:b@c', '/a:b@c'],
    // re-serialized: what the browser follows is what was checked
    ['/a/../b', '/b'],
    ['/a/%2e%2e/b', '/b'],
    ['/../../x', '/x'],
    ['/a"b<c>', '/a%22b%3Cc%3E'],
    ['/a?', '/a'],
    ['/a#', '/a'],
  ]
  for (const [value, want] of cases) t.equal(validate(value), want, show(value))
  t.equal(validate('/' + 'a'.repeat(REDIRECT_AFTER_MAX_LENGTH - 1)), '/' + 'a'.repeat(REDIRECT_AFTER_MAX_LENGTH - 1), 'exactly 2048 characters')
})

t.test('accepts absolute URLs on the public origin or an allowed host', async (t) => {
  const cases: Array<[string, string]> = [
    ['https://app.example.com/x?y=1#z', 'https://app.example.com/x?y=1#z'],
    ['https://app.example.com', 'https://app.example.com/'],
    ['HTTPS://APP.EXAMPLE.COM/x', 'https://app.example.com/x'],
    ['https://other.example.org/x', 'https://other.example.org/x'],
    ['http://other.example.org/x', 'http://other.example.org/x'],
    // `.corp.example`: subdomains on a dot boundary and the bare domain (oauth2-proxy whitelist-domain)
    ['https://corp.example/', 'https://corp.example/'],
    ['https://a.corp.example/', 'https://a.corp.example/'],
    ['https://a.b.corp.example/p', 'https://a.b.corp.example/p'],
    // `*.wild.example` is the same as `.wild.example`
    ['https://wild.example/', 'https://wild.example/'],
    ['https://x.wild.example/', 'https://x.wild.example/'],
    ['https://port.example.net:8443/', 'https://port.example.net:8443/'],
    ['http://port.example.net:8443/', 'http://port.example.net:8443/'],
    ['http://[::1]:9000/', 'http://[::1]:9000/'],
    ['https://app.example.com/a/../b', 'https://app.example.com/b'],
  ]
  for (const [value, want] of cases) t.equal(validate(value), want, show(value))
})

t.test('refuses scheme-relative and backslash forms (published oauth2-proxy bypasses)', async (t) => {
  refuses(t, [
    ['//evil.com', 'scheme-relative (bitly/oauth2_proxy#228)'],
    ['//evil.com/', 'scheme-relative'],
    ['///evil.com', 'three slashes'],
    ['////evil.com', 'four slashes'],
    ['//evil.com@app.example.com', 'scheme-relative with userinfo'],
    ['/\\evil.com', '/\\ (GHSA-qqxw-m5fj-f7gv, CVE-2020-5233)'],
    ['/\\/evil.com', '/\\/'],
    ['\\\\evil.com', '\\\\'],
    ['\\/evil.com', '\\/'],
    ['\\/\\/evil.com/', '\\/\\/'],
    ['/\t/evil.com', 'tab between slashes (GHSA-j7px-6hwj-hpjg)'],
    ['/ /evil.com', 'space between slashes (GHSA-j7px-6hwj-hpjg)'],
    ['/\n/evil.com', 'LF between slashes'],
    ['/\r/evil.com', 'CR between slashes'],
    ['/\v/evil.com', 'VT between slashes'],
    ['/\f/evil.com', 'FF between slashes'],
    ['/\t\\evil.com', 'tab and backslash'],
    ['/\t/\t\\evil.com', 'double tab'],
    ['/./\\evil.com', 'dot segment then backslash (GHSA-5m6c-jp6f-2vcv)'],
    ['/../\\evil.com', 'dot-dot segment then backslash (GHSA-5m6c-jp6f-2vcv)'],
    ['/./../../\\evil.com', 'relative subpath then backslash'],
    ['/.//evil.com', 'dot segment then double slash'],
    ['/<>//evil.com', 'double slash inside the path'],
    ['/https://evil.com//', 'double slash inside the path'],
    ['/%09/evil.com', 'encoded tab between slashes'],
    ['/%2f%2fevil.com', 'encoded double slash (state=%2F%2F..., bitly/oauth2_proxy#478)'],
    ['/%2F%2Fevil.com', 'encoded double slash, uppercase'],
    ['/%5cevil.com', 'encoded backslash'],
    ['/%5Cevil.com', 'encoded backslash, uppercase'],
    ['/%2f%5c%2fevil.com/', 'mixed encoded separators'],
    ['/%68%74%74%70%3a%2f%2fevil.com', 'fully encoded URL'],
    ['//%09/evil.com', 'scheme-relative with encoded tab'],
    ['//%5cevil.com', 'scheme-relative with encoded backslash'],
  ])
})

t.test('refuses other schemes and scheme tricks', async (t) => {
  refuses(t, [
    ['https:evil.com', 'https: without slashes (WHATWG reads https://evil.com)'],
    ['https:/evil.com', 'https: with one slash'],
    ['https:///evil.com', 'https: with three slashes'],
    ['http:evil.com', 'http: without slashes'],
    ['https:/\\evil.com', 'https:/\\'],
    ['javascript:alert(1)', 'javascript:'],
    ['JaVaScRiPt:alert(1)', 'javascript:, mixed case'],
    ['javascript://app.example.com/%0aalert(1)', 'javascript: that looks like a URL'],
    ['java%09script:alert(1)', 'encoded tab in the scheme'],
    ['data:text/html,<script>alert(1)</script>', 'data:'],
    ['DATA:text/html,x', 'data:, uppercase'],
    ['vbscript:msgbox(1)', 'vbscript:'],
    ['file:///etc/passwd', 'file:'],
    ['ftp://app.example.com/', 'ftp: on the public host'],
    ['ws://app.example.com/', 'ws: on the public host'],
    ['blob:https://app.example.com/x', 'blob:'],
    ['app.example.com/x', 'no scheme, no slash'],
    ['evil.com', 'bare host'],
    ['@evil.com', 'leading @'],
    ['?x=1', 'query only'],
    ['#x', 'fragment only'],
    ['.', 'dot'],
  ])
})

t.test('refuses hosts that are not the public origin nor allowed', async (t) => {
  refuses(t, [
    ['https://evil.com', 'other host'],
    ['HTTPS://evil.com', 'other host, uppercase scheme'],
    ['https://app.example.com.evil.com/', 'allowed name as a prefix'],
    ['https://evil.com/app.example.com', 'allowed name in the path'],
    ['https://evil.com?app.example.com', 'allowed name in the query'],
    ['https://evil.com#app.example.com', 'allowed name in the fragment'],
    ['https://evilcorp.example/', 'no dot boundary (GHSA-4mf2-f3wh-gvf2, CVE-2021-21291)'],
    ['https://corp.example.evil.com/', 'allowed domain as a prefix'],
    ['https://evil-other.example.org/', 'suffix without dot (go-oauth2/oauth2#298)'],
    ['https://sub.other.example.org/', 'exact entry does not cover subdomains'],
    ['https://other.example.org:8443/', 'exact entry without port: other ports refused'],
    ['https://port.example.net/', 'entry with port: default port refused'],
    ['https://port.example.net:9443/', 'entry with port: other port refused'],
    ['http://[::1]:9001/', 'IPv6 entry, other port'],
    ['http://app.example.com/', 'public host over http is another origin'],
    ['https://app.example.com:8443/', 'public host on another port'],
    ['https://app.example.com:443/', 'explicit default port (not canonical)'],
    ['https://app.example.com:/', 'empty port'],
    ['https://app.example.com./x', 'trailing-dot host'],
    ['http://0x7f.1/', 'numeric IPv4 trick'],
    ['http://3627734734/', 'decimal IPv4'],
    ['http://[::ffff:216.58.214.206]/', 'IPv4-mapped IPv6'],
    ['https://app.example.com%2eevil.com/', 'percent-encoded dot in the host'],
    ['http://evil.com%23.app.example.com/', 'percent-encoded # in the host'],
    ['http://evil.com%2f%2f.app.example.com/', 'percent-encoded slashes in the host'],
    ['https://app.example.com//evil.com', 'double slash in the path'],
    ['https://app.example.com/%2F%2Fevil.com', 'encoded double slash in the path'],
    ['https://app.example.com/%5Cevil.com', 'encoded backslash in the path'],
    ['https://app.example.com/%252F', 'double-encoded slash in the path'],
    ['https://[evil/', 'unparsable host'],
    ['http://[::1/', 'unterminated IPv6 literal'],
  ])
})

t.test('refuses userinfo', async (t) => {
  refuses(t, [
    ['https://app.example.com@evil.com', 'allowed name as userinfo'],
    ['https://app.example.com@evil.com/', 'allowed name as userinfo'],
    ['https://user:pw@app.example.com/', 'credentials on the public host'],
    ['https://user@other.example.org/', 'user on an allowed host'],
    ['https://@app.example.com/', 'empty userinfo'],
    ['https://:@app.example.com/', 'empty user and password'],
    ['http://app.example.com:80%40evil.com/', 'encoded @'],
    ['http://app.example.com+&@evil.com#+@app.example.com/', 'userinfo with decoys'],
  ])
})

t.test('refuses percent-encoded controls, separators and double encoding', async (t) => {
  refuses(t, [
    ['/%2F', 'encoded slash'],
    ['/%2f', 'encoded slash, lowercase'],
    ['/a%2Fb', 'encoded slash mid-path'],
    ['/%5C', 'encoded backslash'],
    ['/%5c', 'encoded backslash, lowercase'],
    ['/%09', 'encoded tab'],
    ['/%0d%0aSet-Cookie:x=1', 'encoded CRLF'],
    ['/%00', 'encoded NUL'],
    ['/%1F', 'encoded US'],
    ['/%7F', 'encoded DEL'],
    ['/%C2%85', 'encoded NEL'],
    ['/%252F', 'double-encoded slash'],
    ['/%252f', 'double-encoded slash, lowercase'],
    ['/%255C', 'double-encoded backslash'],
    ['/%252e%252e/', 'double-encoded dots'],
    ['/%25%32%46', 'double encoding with an encoded hex digit'],
    ['/x?a=%0d%0a', 'encoded CRLF in the query'],
    ['/x?a=%00', 'encoded NUL in the query'],
    ['/x#%0a', 'encoded LF in the fragment'],
    ['/x?a=%C2%85', 'encoded NEL in the query'],
    ['/%', 'truncated escape'],
    ['/%2', 'truncated escape'],
    ['/%zz', 'invalid escape'],
    ['/x?a=%', 'truncated escape in the query'],
    ['/x?a=%g1', 'invalid escape in the query'],
  ])
})

t.test('refuses raw controls, whitespace, backslashes and non-ASCII', async (t) => {
  refuses(t, [
    ['', 'empty'],
    [' /dashboard', 'leading space'],
    ['/dashboard ', 'trailing space'],
    ['\t/dashboard', 'leading tab'],
    ['/dashboard\n', 'trailing LF'],
    ['/a\r\nSet-Cookie: x=1', 'CRLF'],
    ['/a\u0000', 'NUL'],
    ['/a\u007f', 'DEL'],
    ['/a\u0085', 'NEL'],
    ['/a\u00a0', 'NO-BREAK SPACE'],
    ['/a\u2028', 'LINE SEPARATOR'],
    ['/a\u2029', 'PARAGRAPH SEPARATOR'],
    ['/a\u3000', 'IDEOGRAPHIC SPACE'],
    ['/a\ufeff', 'BOM'],
    ['/a\\b', 'backslash'],
    ['\u3031evil.com', 'look-alike of / (oauth2-proxy testdata)'],
    ['\u30fcevil.com', 'look-alike of -'],
    ['/caf\u00e9', 'raw non-ASCII'],
    ['https://\u0430pp.example.com/', 'Cyrillic look-alike host'],
    ['https://other.example.org\u3002evil.com/', 'ideographic full stop'],
    ['/' + 'a'.repeat(REDIRECT_AFTER_MAX_LENGTH), '2049 characters'],
    ['https://app.example.com/' + 'a'.repeat(REDIRECT_AFTER_MAX_LENGTH), 'long absolute URL'],
  ])
})

t.test('rejects allowedHosts entries that could never match as written', async (t) => {
  const invalid = [
    'https://app.example.com',
    'app.example.com/',
    'user@host',
    'host:0',
    'host:65536',
    'host:x',
    '',
    '.',
    '*.',
    'a b',
    '0x7f.1',
    'ex\u00e4mple.com',
  ]
  for (const entry of invalid) {
    t.throws(() => createRedirectAfterValidator({ publicUrl: PUBLIC, allowedHosts: [entry] }), TypeError, show(entry))
  }
  t.throws(() => createRedirectAfterValidator({ publicUrl: 'ftp://x', allowedHosts: [] }), TypeError, 'non-http publicUrl')
  const v = createRedirectAfterValidator({ publicUrl: PUBLIC, allowedHosts: ['Other.Example.ORG:08443', 'secure.example:443'] })
  t.equal(v('https://other.example.org:8443/'), 'https://other.example.org:8443/', 'entries are lowercased, ports canonical')
  t.equal(v('https://secure.example/'), 'https://secure.example/', 'an entry with the default port matches the default port')
  t.equal(v('http://secure.example/'), null, 'but not http on 80')
  t.equal(v('http://secure.example:443/'), 'http://secure.example:443/', 'nor http on 443 if you say 443')
})

t.test('no allowed hosts: only the public origin', async (t) => {
  const v = createRedirectAfterValidator({ publicUrl: 'http://localhost:8080', allowedHosts: [] })
  t.equal(v('http://localhost:8080/x'), 'http://localhost:8080/x')
  t.equal(v('/x'), '/x')
  t.equal(v('http://localhost/x'), null)
  t.equal(v('http://localhost:8081/x'), null)
})

// Independent model of the host rules for the property tests.
function modelAllowed(url: URL): boolean {
  if (url.origin === PUBLIC) return true
  const h = url.hostname
  const port = url.port
  const effective = port === '' ? (url.protocol === 'https:' ? '443' : '80') : port
  return (
    (port === '' &&
      (h === 'other.example.org' || h === 'corp.example' || h.endsWith('.corp.example') || h === 'wild.example' || h.endsWith('.wild.example'))) ||
    (h === 'port.example.net' && effective === '8443') ||
    (h === '[::1]' && effective === '9000')
  )
}

const hostArb = fc.constantFrom(
  'app.example.com',
  'other.example.org',
  'corp.example',
  'a.corp.example',
  'evilcorp.example',
  'corp.example.evil',
  'port.example.net',
  'wild.example',
  'x.wild.example',
  'evil.com',
  '[::1]',
  'APP.example.com',
  'xother.example.org',
)
const portArb = fc.constantFrom('', ':8443', ':9000', ':80', ':443', ':1')
const pathArb = fc.constantFrom('', '/', '/x', '/a/b?c=d', '/#f', '/%2F', '//x', '/..', '/a%20b')
const schemeArb = fc.constantFrom('https://', 'http://', 'HTTPS://', 'https:', 'https:/', 'javascript://', '//')

t.test('property: absolute URLs are accepted exactly when the model allows them', async (t) => {
  fc.assert(
    fc.property(schemeArb, hostArb, portArb, pathArb, (scheme, host, port, path) => {
      const value = scheme + host + port + path
      const out = validate(value)
      if (out === null) return true
      const url = new URL(out)
      // accepted ⇒ well-formed scheme, allowed by the model, canonical, and stable
      return /^https?:\/\//i.test(value) && modelAllowed(url) && url.username === '' && url.password === '' && validate(out) === out
    }),
    { numRuns: NUM_RUNS },
  )
  fc.assert(
    fc.property(fc.constantFrom('https://', 'http://'), hostArb, portArb, fc.constantFrom('/', '/x', '/a/b?c=d'), (scheme, host, port, path) => {
      // canonical, clean input ⇒ accepted exactly when the model says so
      const value = scheme + host.toLowerCase() + port + path
      const url = new URL(value)
      if (url.host !== (host + port).toLowerCase()) return true // non-canonical port, refused by design
      return (validate(value) !== null) === modelAllowed(url)
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('matches the model')
})

const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 60 }).map((s) => '/' + s),
  fc
    .array(
      fc.constantFrom(
        '/',
        '\\',
        '.',
        '..',
        'evil.com',
        'app.example.com',
        '@',
        ':',
        'https:',
        '//',
        '%2f',
        '%5c',
        '%09',
        '%25',
        '%2e',
        '\t',
        ' ',
        '\n',
        '#',
        '?',
        'javascript:',
        '\u3031',
        'a',
      ),
      { maxLength: 12 },
    )
    .map((ts) => ts.join('')),
)

t.test('property: whatever is accepted stays on an allowed origin for any base', async (t) => {
  fc.assert(
    fc.property(anyString, (value) => {
      const out = validate(value)
      if (out === null) return true
      if (out.length > REDIRECT_AFTER_MAX_LENGTH * 3 || /[\s\\\u0000-\u001f\u007f-\uffff]/.test(out)) return false
      if (validate(out) !== out) return false
      if (out.startsWith('/')) {
        // A relative result must be a path on whatever origin it is resolved against: never
        // scheme-relative, never able to change the host.
        return (
          !out.startsWith('//') &&
          new URL(out, PUBLIC).origin === PUBLIC &&
          new URL(out, 'http://elsewhere.invalid:1234').origin === 'http://elsewhere.invalid:1234'
        )
      }
      return modelAllowed(new URL(out))
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('never leaves the allowed origins')
})

t.test('property: a forbidden character anywhere refuses', async (t) => {
  const bad = fc.constantFrom('\u0000', '\t', '\n', '\r', ' ', '\u007f', '\u0085', '\u00a0', '\u2028', '\\', '\u3031', '\ufeff')
  const good = fc.constantFrom('/x', '/a/b?c=d#e', 'https://app.example.com/x', 'https://a.corp.example/?q=1')
  fc.assert(
    fc.property(good, bad, fc.nat(), (value, c, at) => {
      const i = at % (value.length + 1)
      return validate(value.slice(0, i) + c + value.slice(i)) === null
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('refused')
})
