import t from 'tap'
import type { Authentication, AuthRequest } from '#src/access/authenticate'
import { Checker, checkContext, checkedTarget, isCheckRoute, type CheckedRequest } from '#src/access/checker'
import type { Verdict as CheckVerdict } from '#src/access/decision'
import { Answers } from '#src/access/answer'
import { UpstreamCredentials } from '#src/upstream/credentials'
import { AccessDecisions, type DecisionRequest } from '#src/access/decision'
import { GatewayError } from '#src/contract/errors'
import type { Identity } from '#src/contract/identity'
import { urlRedactor } from '#src/ops/logging'
import type { UpstreamConfig } from '#src/options/types'
import { createRedirectAfterValidator } from '#src/routes/redirect-after'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { manualClock, type ManualClock } from '../fixtures/clock.ts'
import { resolve, type Tree } from '../fixtures/config/base.ts'
import { identityOf, recordedLog } from '../fixtures/decision-inputs.ts'
import type { IncomingHttpHeaders } from 'node:http'

// The check endpoints' decision (access/checker.ts Checker) without Fastify: a real normalized
// configuration, its real AccessDecisions, the real cookie names and URL redaction, over a stub
// authentication (a unit test may stub its collaborator) that signs in the user the session cookie
// or the Bearer token names and counts how often it is asked, which tells a cached verdict from a
// decided one. The dialects that render the verdict are test/checks/ and test/e2e/.

const APP = 'app.example.com'
/** The clock's start, on a whole second (the step-up judge reads seconds). */
const NOW = 1_800_000_000
const SESSION = 'ogw'
const TRANSACTION = 'ogw_tx_state1'

const UPSTREAMS: Tree[] = [
  { name: 'app', match: { pathPrefix: '/', hosts: [APP] }, publicPaths: ['/public/**'] },
  { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['admins'] } },
  { name: 'cors', match: { pathPrefix: '/cors', hosts: [APP] }, allowPreflight: true },
  { name: 'payroll', match: { pathPrefix: '/payroll', hosts: [APP] }, allow: { acr: ['mfa'], maxAuthAgeSeconds: 60 } },
  { name: 'open', match: { pathPrefix: '/', hosts: ['open.example.com'] }, auth: 'none' },
  { name: 'other', match: { pathPrefix: '/', hosts: ['other.example.com'] } },
]

/** alice: an admin who signed in with mfa 50 s before NOW; bob: staff, by password. */
const USERS: Readonly<Record<string, Identity>> = {
  alice: identityOf({ sub: 'alice', groups: ['admins'], acr: 'mfa', auth_time: NOW - 50 }, { accessToken: 'token-alice' }),
  bob: identityOf({ sub: 'bob', groups: ['staff'], acr: 'pwd', auth_time: NOW }, { accessToken: 'token-bob' }),
}

/** Signs in the user the session cookie names, else the one whose access token is the Bearer token. */
function whoIs(req: AuthRequest): Identity | undefined {
  const session = req.cookies[SESSION]
  if (session !== undefined) return USERS[session]
  const token = req.headers.authorization?.replace(/^Bearer /, '')
  return Object.values(USERS).find((user) => user.accessToken === token)
}

interface Harness {
  checker: Checker
  clock: ManualClock
  config: ReturnType<typeof resolve>
  /** The URL of each request authentication was asked about: one per decision made. */
  asked: string[]
  lines: Array<Record<string, unknown>>
  log: DecisionRequest['log']
  upstream(name: string): UpstreamConfig
}

/** A Checker over the UPSTREAMS, the minimal configuration changed by `patch`, on a manual clock at NOW. */
function harness(patch: Tree = {}): Harness {
  const config = resolve({ ...patch, upstreams: UPSTREAMS.map((u) => ({ target: 'http://127.0.0.1:3000', ...u })) })
  const clock = manualClock(NOW * 1000)
  const asked: string[] = []
  const authentication: Pick<Authentication, 'forProviders'> = {
    forProviders: () => ({
      authenticate: async (req) => {
        asked.push(req.url)
        return whoIs(req)
      },
    }),
  }
  const { publicUrl } = config.server
  const access = new AccessDecisions(
    config.upstreams,
    authentication,
    { nowSeconds: () => Math.floor(clock.now() / 1000), toleranceSeconds: () => 0 },
    publicUrl,
  )
  const cookies = new GatewayCookies(config.cookies, new CookieCipher(config.cookies.secrets, clock))
  const { log, lines } = recordedLog()
  const checker = new Checker({
    upstreams: config.upstreams,
    access,
    publicUrl,
    answers: new Answers({
      publicUrl,
      validateRedirectAfter: createRedirectAfterValidator({ publicUrl, allowedHosts: config.redirects.allowedHosts }),
      credentials: new UpstreamCredentials({
        upstreams: config.upstreams,
        assertions: { header: config.assertions.header, signer: undefined },
        transactionTokens: undefined,
        // No upstream here exchanges tokens: the Checker's verdicts are what these rows read.
        exchanger: { token: () => Promise.reject(new Error('no exchange in these rows')), forgetToken() {}, forget() {} },
        isGatewayCookie: cookies.isGatewayCookie,
      }),
    }),
    cookieDomains: config.cookies.domain === undefined ? (config.cookies.domains ?? []) : [config.cookies.domain],
    cache: config.forwardAuth.cache,
    isGatewayCookieName: cookies.isGatewayCookieName,
    clock,
    redactUrl: urlRedactor(config.log),
  })
  const upstream = (name: string): UpstreamConfig => config.upstreams.find((u) => u.name === name)!
  return { checker, clock, config, asked, lines, log, upstream }
}

interface Ask {
  method?: string
  host?: string
  target?: string
  cookies?: Record<string, string>
  headers?: IncomingHttpHeaders
  upstreamName?: string
}

const reply = { setCookie: () => undefined }

/** The Checker's verdict on a request as a dialect establishes it (its target already in normal form). */
function check(h: Harness, ask: Ask = {}): Promise<CheckVerdict> {
  const checked: CheckedRequest = {
    method: ask.method ?? 'GET',
    host: ask.host ?? APP,
    scheme: 'https',
    target: checkedTarget(ask.target ?? '/page', 'the target'),
  }
  const req = checkContext({ cookies: ask.cookies ?? {}, headers: ask.headers ?? {}, log: h.log }, checked)
  return h.checker.check(req, reply, checked, ask.upstreamName)
}

const as = (user: string): Record<string, string> => ({ [SESSION]: user })

t.test('refused before any decision: ambiguous 400, no upstream 404, an unknown upstream name 403', async (t) => {
  const h = harness()
  const rows: Array<[string, Ask, number, string]> = [
    ['a spelling another upstream serves in another case', { target: '/ADMIN/x', cookies: as('alice') }, 400, 'bad_request'],
    ['a spelling with a trailing dot', { target: '/admin./x', cookies: as('alice') }, 400, 'bad_request'],
    ['a host no upstream serves', { host: 'nowhere.example.com', target: '/' }, 404, 'not_found'],
    ['a host that only ends like a served one', { host: 'app.example.com.evil', target: '/' }, 404, 'not_found'],
    ["the gateway's own path, routed: no upstream serves it", { target: '/api/v1/openid/redirect', cookies: as('alice') }, 404, 'not_found'],
    ['an upstream name not configured', { upstreamName: 'nope', cookies: as('alice') }, 403, 'forbidden'],
    ['an upstream name in another case (names are exact)', { upstreamName: 'Open' }, 403, 'forbidden'],
  ]
  for (const [name, ask, status, code] of rows) {
    const err = await check(h, ask).then(
      (verdict) => verdict,
      (thrown: unknown) => thrown,
    )
    t.ok(err instanceof GatewayError, `${name}: refused (a GatewayError), not decided`)
    t.match(err, { status, code }, `${name}: ${status} ${code}`)
  }
  t.strictSame(h.asked, [], 'no session read for any of them')
})

t.test('the upstream a caller names decides, not the one the host and path select', async (t) => {
  const h = harness()
  t.strictSame(
    await check(h, { target: '/admin/x', upstreamName: 'open' }),
    { outcome: 'pass', upstream: h.upstream('open'), identity: null },
    "open's auth: none",
  )
  t.strictSame(
    await check(h, { host: 'open.example.com', target: '/x', upstreamName: 'admin', cookies: as('bob') }),
    { outcome: 'forbidden', upstream: h.upstream('admin'), identity: USERS.bob },
    "admin's allow on open's host",
  )
})

t.test("the gateway's own paths: decided like any path of their upstream, and never passed", async (t) => {
  const h = harness()
  const rows: Array<[string, Ask, CheckVerdict]> = [
    [
      'under /api/v1/openid on an auth: none upstream',
      { target: '/api/v1/openid/callback', upstreamName: 'open' },
      { outcome: 'forbidden', upstream: h.upstream('open'), identity: null },
    ],
    [
      '/api/v1/openid itself, signed in',
      { target: '/api/v1/openid', upstreamName: 'app', cookies: as('alice') },
      { outcome: 'forbidden', upstream: h.upstream('app'), identity: USERS.alice! },
    ],
    [
      'without a sign-in: unauthenticated, so a browser is still sent to sign in',
      { target: '/api/v1/openid/auth', upstreamName: 'app' },
      { outcome: 'unauthenticated', upstream: h.upstream('app'), expired: false, refreshable: false },
    ],
    [
      'the assertion JWKS path, routed to the app',
      { target: '/.well-known/jwks.json', cookies: as('alice') },
      { outcome: 'forbidden', upstream: h.upstream('app'), identity: USERS.alice! },
    ],
    [
      'the assertion JWKS path on an auth: none host',
      { host: 'open.example.com', target: '/.well-known/jwks.json' },
      { outcome: 'forbidden', upstream: h.upstream('open'), identity: null },
    ],
    [
      '/api/v1/openidx is no gateway path (segment boundary)',
      { target: '/api/v1/openidx', upstreamName: 'app', cookies: as('alice') },
      { outcome: 'pass', upstream: h.upstream('app'), identity: USERS.alice! },
    ],
    [
      '/.well-known/jwks.json/x is no gateway path',
      { target: '/.well-known/jwks.json/x', cookies: as('alice') },
      { outcome: 'pass', upstream: h.upstream('app'), identity: USERS.alice! },
    ],
  ]
  for (const [name, ask, expected] of rows) t.strictSame(await check(h, ask), expected, name)
  t.match(
    h.lines.filter((l) => l.level === 40),
    [
      { upstream: 'open', path: '/api/v1/openid/callback', msg: /gateway's own paths: refused/ },
      { upstream: 'app', path: '/api/v1/openid' },
      { upstream: 'app', path: '/.well-known/jwks.json' },
      { upstream: 'open', path: '/.well-known/jwks.json' },
    ],
    'each refusal of a pass is a warning naming the path',
  )
})

t.test('a CORS preflight is OPTIONS with Access-Control-Request-Method, on an upstream that allows them', async (t) => {
  const h = harness()
  const acrm = { 'access-control-request-method': 'PUT', origin: 'https://spa.example.com' }
  const rows: Array<[string, Ask, CheckVerdict['outcome'], number]> = [
    ['a preflight on an allowPreflight upstream passes, reading nothing', { method: 'OPTIONS', target: '/cors/api', headers: acrm }, 'pass', 0],
    ['a plain OPTIONS is no preflight', { method: 'OPTIONS', target: '/cors/api' }, 'unauthenticated', 1],
    ['a GET with the header is no preflight', { target: '/cors/api', headers: acrm }, 'unauthenticated', 1],
    ['a preflight where the upstream does not allow them', { method: 'OPTIONS', target: '/page', headers: acrm }, 'unauthenticated', 1],
  ]
  for (const [name, ask, outcome, reads] of rows) {
    const before = h.asked.length
    t.equal((await check(h, ask)).outcome, outcome, name)
    t.equal(h.asked.length - before, reads, `${name}: ${reads} authentication`)
  }
})

t.test('the decision cache (forwardAuth.cache)', async (t) => {
  const CACHE = { forwardAuth: { cache: { enabled: true, ttlSeconds: 60 } } }

  t.test('what the key depends on: the gateway cookies, Authorization and the request; not foreign cookies nor the query', async (t) => {
    const h = harness(CACHE)
    const first = await check(h, { target: '/page?x=1', cookies: { ...as('alice'), app: '1' } })
    t.match(first, { outcome: 'pass', identity: { claims: { sub: 'alice' } } })
    t.ok(h.config.forwardAuth.cache.enabled, 'the configuration enables it')
    t.equal(h.config.cookies.name, SESSION, 'the session cookie the stub reads')
    const rows: Array<[string, Ask, 'cached' | 'decided']> = [
      ['the same request and credentials', { target: '/page?x=1', cookies: { ...as('alice'), app: '1' } }, 'cached'],
      ["another value of the application's own cookie", { target: '/page?x=1', cookies: { ...as('alice'), app: '2' } }, 'cached'],
      ['one more foreign cookie', { target: '/page?x=1', cookies: { ...as('alice'), app: '1', theme: 'dark' } }, 'cached'],
      ['another query (no decision reads it)', { target: '/page?y=2', cookies: { ...as('alice'), app: '1' } }, 'cached'],
      ['another session cookie', { target: '/page?x=1', cookies: { ...as('bob'), app: '1' } }, 'decided'],
      ['a sign-in transaction cookie besides', { target: '/page?x=1', cookies: { ...as('alice'), app: '1', [TRANSACTION]: 'v' } }, 'decided'],
      [
        'an Authorization header besides',
        { target: '/page?x=1', cookies: { ...as('alice'), app: '1' }, headers: { authorization: 'Bearer token-bob' } },
        'decided',
      ],
      ['another method', { method: 'HEAD', target: '/page?x=1', cookies: { ...as('alice'), app: '1' } }, 'decided'],
      ['another path', { target: '/other?x=1', cookies: { ...as('alice'), app: '1' } }, 'decided'],
      ['another host', { host: 'app.example.com:443', target: '/page?x=1', cookies: { ...as('alice'), app: '1' } }, 'decided'],
      ['an upstream named', { target: '/page?x=1', cookies: { ...as('alice'), app: '1' }, upstreamName: 'app' }, 'decided'],
    ]
    for (const [name, ask, expected] of rows) {
      const before = h.asked.length
      const verdict = await check(h, ask)
      t.equal(h.asked.length - before === 0 ? 'cached' : 'decided', expected, name)
      if (expected === 'cached') t.equal(verdict, first, `${name}: the very verdict kept`)
    }
    // Each row above that was decided is now cached in its turn.
    const before = h.asked.length
    await check(h, { target: '/page?x=1', cookies: { ...as('bob'), app: '1' } })
    t.equal(h.asked.length, before, "bob's verdict was kept under its own key")
  })

  t.test("a preflight's anonymous pass is never the answer to the same OPTIONS without the header", async (t) => {
    const h = harness(CACHE)
    const acrm = { 'access-control-request-method': 'PUT', origin: 'https://spa.example.com' }
    t.strictSame(await check(h, { method: 'OPTIONS', target: '/cors/x', headers: acrm, cookies: as('bob') }), {
      outcome: 'pass',
      upstream: h.upstream('cors'),
      identity: null,
    })
    t.strictSame(
      await check(h, { method: 'OPTIONS', target: '/cors/x', cookies: as('bob') }),
      { outcome: 'pass', upstream: h.upstream('cors'), identity: USERS.bob },
      'decided afresh: as bob',
    )
  })

  t.test('ttlSeconds on the injected clock', async (t) => {
    const h = harness(CACHE)
    await check(h, { cookies: as('alice') })
    h.clock.advance(59_999)
    await check(h, { cookies: as('alice') })
    t.equal(h.asked.length, 1, 'just before ttlSeconds: from the cache')
    h.clock.advance(1)
    await check(h, { cookies: as('alice') })
    t.equal(h.asked.length, 2, 'at ttlSeconds: decided afresh')
  })

  t.test("a pass under a step-up rule's max age is kept no longer than the age allows", async (t) => {
    const h = harness(CACHE)
    // alice signed in 50 s before NOW; payroll allows 60 s: her pass ends at NOW + 10 s, before the TTL.
    t.match(await check(h, { target: '/payroll', cookies: as('alice') }), { outcome: 'pass' })
    h.clock.advance(9_999)
    await check(h, { target: '/payroll', cookies: as('alice') })
    t.equal(h.asked.length, 1, 'until the deadline: from the cache')
    h.clock.advance(1)
    t.match(await check(h, { target: '/payroll', cookies: as('alice') }), { outcome: 'pass' }, 'at the deadline: decided afresh (exactly max age still passes)')
    await check(h, { target: '/payroll', cookies: as('alice') })
    t.equal(h.asked.length, 3, 'a pass whose deadline is now is not kept')
    h.clock.advance(1000)
    t.match(await check(h, { target: '/payroll', cookies: as('alice') }), { outcome: 'step_up' }, 'a second later: she must step up, never a kept pass')
  })

  t.test('what is never kept: a sign-in to come and a step-up; what is: a refusal', async (t) => {
    const h = harness(CACHE)
    const rows: Array<[string, Ask, CheckVerdict['outcome'], number]> = [
      ['unauthenticated', { target: '/page' }, 'unauthenticated', 2],
      ['step_up', { target: '/payroll', cookies: as('bob') }, 'step_up', 2],
      ['forbidden', { target: '/admin/x', cookies: as('bob') }, 'forbidden', 1],
      ["a gateway path's refused pass", { target: '/.well-known/jwks.json', cookies: as('alice') }, 'forbidden', 1],
    ]
    for (const [name, ask, outcome, decisions] of rows) {
      const before = h.asked.length
      t.equal((await check(h, ask)).outcome, outcome, name)
      t.equal((await check(h, ask)).outcome, outcome, `${name}, again`)
      t.equal(h.asked.length - before, decisions, `${name}: ${decisions === 2 ? 'decided each time' : 'kept'}`)
    }
  })

  t.test('forget() empties it (a session ended)', async (t) => {
    const h = harness(CACHE)
    await check(h, { cookies: as('alice') })
    await check(h, { cookies: as('alice') })
    t.equal(h.asked.length, 1)
    h.checker.forget()
    await check(h, { cookies: as('alice') })
    t.equal(h.asked.length, 2, 'decided afresh after forget()')
  })

  t.test('disabled (the default): every check is decided', async (t) => {
    const h = harness()
    t.equal(h.config.forwardAuth.cache.enabled, false)
    await check(h, { cookies: as('alice') })
    await check(h, { cookies: as('alice') })
    h.checker.forget()
    t.equal(h.asked.length, 2)
  })
})

t.test('checkedTarget: only a target already in normal form is decided; the query is kept as sent', async (t) => {
  const refused: Array<[string, string, RegExp]> = [
    ['a dot-dot segment', '/public/../admin', /not in normal form/],
    ['a dot segment', '/public/./x', /not in normal form/],
    ['a trailing dot-dot', '/public/..', /not in normal form/],
    ['a leading //', '//admin', /not in normal form/],
    ['a // inside', '/public//x', /not in normal form/],
    ['an encoded dot-dot', '/public/%2e%2e/admin', /not in normal form/],
    ['an encoded dot, upper case', '/public/%2E/x', /not in normal form/],
    ['an encoded unreserved letter', '/%61dmin', /not in normal form/],
    ['an encoded tilde', '/~a/%7Eb', /not in normal form/],
    ['lower-case hex of a kept escape', '/a%c3%a9', /not in normal form/],
    ['an encoded slash', '/a%2Fb', /not a valid request path/],
    ['a raw space', '/a b', /not a valid request path/],
    ['absolute-form', 'http://app.example.com/x', /not a valid request path/],
    ['a path parameter', '/admin;x=y', /not a valid request path/],
  ]
  for (const [name, raw, message] of refused) {
    t.throws(() => checkedTarget(raw, 'X-Forwarded-Uri'), { code: 'bad_request', status: 400, message }, `${name}: ${raw}`)
    t.throws(() => checkedTarget(raw, 'X-Forwarded-Uri'), { message: /^X-Forwarded-Uri is/ }, `${name}: the 400 names where the target was read`)
  }
  const accepted: Array<[string, string, { path: string; search: string }]> = [
    ['the root', '/', { path: '/', search: '' }],
    ['a plain path', '/page', { path: '/page', search: '' }],
    ['a query, untouched, even with dots and encoded slashes', '/page?next=%2F..%2Fx&a=./b', { path: '/page', search: '?next=%2F..%2Fx&a=./b' }],
    ['a kept escape in upper case', '/a%C3%A9', { path: '/a%C3%A9', search: '' }],
    ['a lone %25', '/100%25', { path: '/100%25', search: '' }],
    ['a trailing dot is another path, kept', '/admin.', { path: '/admin.', search: '' }],
    ['a trailing slash', '/admin/', { path: '/admin/', search: '' }],
  ]
  for (const [name, raw, expected] of accepted) t.strictSame(checkedTarget(raw, 'the target'), expected, `${name}: ${raw}`)
})

t.test('isCheckRoute: the raw target is a check endpoint exactly at its prefix boundary', async (t) => {
  const EXT = '/api/v1/openid/ext-authz'
  const rows: Array<[string, string, boolean]> = [
    ['forward-auth itself', '/api/v1/openid/auth', true],
    ['forward-auth with a query', '/api/v1/openid/auth?rd=x', true],
    ['forward-auth with a slash', '/api/v1/openid/auth/', true],
    ['forward-auth followed by a climb (routed to the check, never normalized to the sign-in)', '/api/v1/openid/auth/../redirect', true],
    ['a longer segment is another path', '/api/v1/openid/authx', false],
    ['an encoded slash after it is another segment', '/api/v1/openid/auth%2F', false],
    ['a shorter prefix', '/api/v1/openid/aut', false],
    ['case matters', '/API/v1/openid/auth', false],
    ['ext-authz followed by the path checked', `${EXT}/page`, true],
    ['ext-authz followed by a climb', `${EXT}/../redirect`, true],
    ['ext-authz followed by a bare slash', `${EXT}/`, true],
    ['ext-authz without a path after it', EXT, false],
    ['ext-authz followed by a query', `${EXT}?x`, false],
    ['a longer segment than ext-authz', `${EXT}x/page`, false],
    ['the sign-in endpoint', '/api/v1/openid/redirect', false],
  ]
  const routes = (prefix: string) => [
    { path: '/api/v1/openid/auth', match: 'endpoint' as const },
    { path: prefix, match: 'prefix' as const },
  ]
  for (const [name, raw, expected] of rows) t.equal(isCheckRoute(raw, routes(EXT)), expected, `${name}: ${raw}`)
  t.equal(isCheckRoute('/api/v1/openid/envoy/page', routes('/api/v1/openid/envoy')), true, 'a moved Envoy prefix')
  t.equal(isCheckRoute(`${EXT}/page`, routes('/api/v1/openid/envoy')), false, 'the default prefix once moved')
})

t.test('checkContext: the checked request as the session store and authentication read it', async (t) => {
  const { log } = recordedLog()
  const cookies = { [SESSION]: 'x' }
  const headers = { authorization: 'Bearer y' }
  const context = checkContext({ cookies, headers, log }, { method: 'GET', host: APP, scheme: 'https', target: { path: '/app/page', search: '?q=1' } })
  t.equal(context.url, '/app/page?q=1', "the checked request's target, which the browser chose its cookies for")
  t.equal(context.cookies, cookies)
  t.equal(context.headers, headers)
  t.equal(context.log, log)
})

t.test('a warning when the session cookie cannot reach the host checked: once per host, capped', async (t) => {
  const warned = (h: Harness): unknown[] => h.lines.filter((l) => l.level === 40 && String(l.msg).includes('cookies.domain')).map((l) => l.host)

  t.test('host-only cookies on the public host', async (t) => {
    const h = harness()
    t.equal(h.config.server.publicUrl, `https://${APP}`)
    for (const [host, upstreamName] of [
      [APP, undefined],
      ['app.example.com:8443', 'app'],
      ['other.example.com', undefined],
      ['other.example.com:8443', undefined],
      ['open.example.com', undefined],
      ['[::1]:8443', 'app'],
    ] as const) {
      await check(h, { host, upstreamName })
    }
    t.strictSame(warned(h), ['other.example.com', '[::1]'], 'once per host name (ports aside); not the public host nor an auth: none upstream')
    t.match(
      h.lines.find((l) => l.level === 40),
      { host: 'other.example.com', cookieHost: APP, cookieDomains: [] },
    )
    for (let i = 0; i < 80; i++) await check(h, { host: `h${i}.test`, upstreamName: 'other' })
    t.equal(warned(h).length, 64, 'the hosts remembered are capped')
  })

  t.test('cookies.domain covers the domain and its subdomains, on a dot boundary', async (t) => {
    const h = harness({ cookies: { domain: 'example.com' } })
    for (const host of ['x.example.com', 'example.com', 'deep.x.example.com', 'notexample.com', 'example.com.evil'])
      await check(h, { host, upstreamName: 'other' })
    t.strictSame(warned(h), ['notexample.com', 'example.com.evil'])
  })

  t.test('cookies.domains: each domain covers itself and its subdomains', async (t) => {
    const h = harness({ cookies: { domains: ['example.com', 'example.org'] }, redirects: { allowedHosts: ['.example.org'] } })
    for (const host of ['x.example.com', 'b.example.org', 'example.org', 'notexample.org', 'example.net']) await check(h, { host, upstreamName: 'other' })
    t.strictSame(warned(h), ['notexample.org', 'example.net'])
  })
})

t.test('the log lines of a refusal and of a step-up name the request checked, its secrets redacted', async (t) => {
  const h = harness()
  await check(h, { method: 'HEAD', target: '/admin/x?access_token=SECRET-TOKEN&page=2', cookies: as('bob') })
  await check(h, { target: '/payroll?code=SECRET-CODE', cookies: as('bob') })
  const info = h.lines.filter((l) => l.level === 30)
  t.match(info, [
    {
      msg: 'access refused by the allow rules',
      sub: 'bob',
      upstream: 'admin',
      rule: 'groups',
      method: 'HEAD',
      url: /^https:\/\/app\.example\.com\/admin\/x\?access_token=.*&page=2$/,
    },
    {
      msg: 'step-up authentication required',
      sub: 'bob',
      upstream: 'payroll',
      shortfall: 'acr',
      method: 'GET',
      url: /^https:\/\/app\.example\.com\/payroll\?code=/,
    },
  ])
  t.notMatch(JSON.stringify(h.lines), /SECRET/, 'no secret query value')
})
