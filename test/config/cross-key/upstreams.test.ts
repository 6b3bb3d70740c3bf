// The cross-key rules of upstreams[] (config/cross-key/upstreams.ts): names and matches that select
// one upstream, identity headers that each carry one claim, per-path rules that can decide, the
// providers an upstream names, and what forwarding, exchanging and a resource audience need.

import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { problems, resolve, type Tree, withUpstream } from '../../fixtures/config/base.ts'
import { type Case, table, upstreamCase, valid } from '../../fixtures/config/cases.ts'
import { recipe } from '../../fixtures/markdown.ts'
import { PARTNERS, STAFF, several } from '../../fixtures/config/values.ts'

const SIGNING_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
const exchange = (tokenExchange: unknown, extra: Tree = {}): string[] => problems(withUpstream({ tokenExchange, ...extra }))

t.test('upstreams: unique names and matches', async (t) => {
  const two = (a: Tree, b: Tree): Tree => ({
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000', ...a },
      { name: 'api', target: 'http://127.0.0.1:4000', ...b },
    ],
  })
  table(t, {
    'same name, other case': [two({ match: { pathPrefix: '/a' } }, { name: 'APP', match: { pathPrefix: '/b' } }), ['upstreams[1].name: duplicate of upstreams[0].name']],
    'same default prefix': [two({}, {}), ['upstreams[1].match: same hosts and pathPrefix as upstreams[0]']],
    'same prefix up to the trailing slash': [
      two({ match: { pathPrefix: '/api' } }, { match: { pathPrefix: '/api/' } }),
      ['upstreams[1].match: same hosts and pathPrefix as upstreams[0]'],
    ],
    'same hosts in another order and case': [
      two({ match: { hosts: ['a.example.com', 'b.example.com'] } }, { match: { hosts: ['B.example.com', 'a.example.com'] } }),
      ['upstreams[1].match: same hosts and pathPrefix as upstreams[0]'],
    ],
    'same prefix, different hosts': valid(two({ match: { hosts: ['a.example.com'] } }, { match: { hosts: ['b.example.com'] } })),
    'same prefix, one with hosts': valid(two({}, { match: { hosts: ['b.example.com'] } })),
  })
})

t.test('upstreams: identityHeaders, one header per claim', async (t) => {
  t.strictSame(
    problems(withUpstream({ identityHeaders: { email: 'x_forwarded_user' } })),
    ['upstreams[0].identityHeaders.email: x_forwarded_user is the same header as identityHeaders.user (X-Forwarded-User)'],
    'two keys, one header',
  )
  t.strictSame(
    problems({ ...withUpstream({ identityHeaders: { user: 'X-User' } }), assertions: { header: 'X-Forwarded-Email' } }),
    ['upstreams[0].identityHeaders.email: X-Forwarded-Email is the same header as assertions.header (X-Forwarded-Email)'],
    'a default name is refused where the assertion header takes it',
  )
})

t.test('claimHeaders names: checked like identityHeaders, naming the header', async (t) => {
  const refused = (name: string, reason: string): void => {
    t.strictSame(problems(withUpstream({ claimHeaders: { [name]: 'name' } })), [`upstreams[0].claimHeaders.${name}: ${reason}`], name)
  }
  const MANAGED = 'a header that HTTP or the gateway itself manages'
  const FORWARDED =
    'one of the forwarded headers (X-Forwarded-*) the gateway manages; of those only its identity header names may be used (X-Forwarded-User, X-Forwarded-Email, X-Forwarded-Groups, X-Forwarded-Preferred-Username, X-Forwarded-Issuer, X-Forwarded-Acr, X-Forwarded-Amr, X-Forwarded-Auth-Time)'
  for (const name of ['Authorization', 'cookie', 'Host', 'Connection', 'TE', 'Upgrade', 'Proxy-Authorization', 'Forwarded', 'X-Forwarded-For', 'x_forwarded_host', 'X-Forwarded-Proto', 'X-Real-IP', 'X-Auth-Request-User', 'X-Auth-Request-Access-Token']) {
    refused(name, `must not be ${name}, ${MANAGED}`)
  }
  for (const name of ['X-Forwarded-Name', 'x_forwarded_ssl_client']) refused(name, `must not be ${name}, ${FORWARDED}`)
  t.strictSame(problems(withUpstream({ claimHeaders: { 'Bad Name': 'name' } })), ['upstreams[0].claimHeaders["Bad Name"]: must be a valid HTTP header name'])
  refused('X-Forwarded-User', 'X-Forwarded-User is the same header as identityHeaders.user (X-Forwarded-User)')
  refused('x_forwarded_email', 'x_forwarded_email is the same header as identityHeaders.email (X-Forwarded-Email)')
  refused('X-Identity-Assertion', 'X-Identity-Assertion is the same header as assertions.header (X-Identity-Assertion)')
  t.strictSame(problems(withUpstream({ claimHeaders: { 'X-Name': 'name', x_name: 'department' } })), [
    'upstreams[0].claimHeaders.x_name: x_name is the same header as claimHeaders.X-Name (X-Name)',
  ])
  t.match(problems(withUpstream({ claimHeaders: {} })), [/claimHeaders: must not be empty/])
})

// A claim in `Txn-Token` reached the application as its Transaction Token (the user's display
// name where a signed token belongs), with or without the upstream's own transactionTokens.
t.test('claimHeaders: Txn-Token, where the gateway sends Transaction Tokens, is refused in every spelling', async (t) => {
  const TXN = 'the header the gateway sends Transaction Tokens in (upstreams[].transactionTokens)'
  for (const name of ['Txn-Token', 'txn-token', 'TXN_TOKEN']) {
    t.strictSame(problems(withUpstream({ claimHeaders: { [name]: 'name' } })), [`upstreams[0].claimHeaders.${name}: must not be ${name}, ${TXN}`], name)
  }
  const minting = {
    assertions: { signingKeys: [SIGNING_KEY] },
    ...withUpstream({ claimHeaders: { 'Txn-Token': 'name' }, transactionTokens: { trustDomain: 'trust-domain.example', scope: ['orders'] } }),
  }
  t.strictSame(problems(minting), [`upstreams[0].claimHeaders.Txn-Token: must not be Txn-Token, ${TXN}`], 'beside transactionTokens too')
  t.strictSame(
    problems({ assertions: { header: 'Txn-Token' } }),
    [`assertions.header: must not be Txn-Token, ${TXN}`],
    'nor is the assertion sent in it',
  )
})

t.test("the refusals docs/features/claim-mapping.md shows are the loader's", async (t) => {
  const shown = recipe('docs/features/claim-mapping.md', 'text').trimEnd().split('\n')
  t.strictSame(
    [
      ...problems(withUpstream({ claimHeaders: { 'Txn-Token': 'name' } })),
      ...problems(withUpstream({ identityHeaders: { user: 'Host' } })),
      ...problems(withUpstream({ identityHeaders: { groups: 'x_identity_assertion' } })),
    ],
    shown,
  )
})

t.test('upstreams[].rules: per-path allow rules are refused where they could not decide, naming the rule', async (t) => {
  const rules = (list: Tree[], upstream: Tree = {}): Case => upstreamCase({ ...upstream, rules: list }, [])
  const admin = { path: '/admin', allow: { groups: ['admins'] } }
  table(t, {
    'a rule': rules([admin]),
    'nested rules (the longest decides)': rules([admin, { path: '/admin/help', allow: {} }]),
    'a public tree inside a rule': rules([admin], { publicPaths: ['/admin/assets/**'] }),
    'a rule below the upstream prefix': rules([{ path: '/app/admin', allow: {} }], { match: { pathPrefix: '/app' } }),
  })
  table(t, {
    'path missing': upstreamCase({ rules: [{ allow: {} }] }, ['upstreams[0].rules[0]: needs path or regex']),
    'allow missing (it would admit everyone)': upstreamCase({ rules: [{ path: '/admin' }] }, ['upstreams[0].rules[0].allow: is required']),
    'a path with a wildcard': upstreamCase({ rules: [{ path: '/admin/*', allow: {} }] }, ['upstreams[0].rules[0].path: must not contain : or *']),
    'an unknown allow kind': upstreamCase({ rules: [{ path: '/admin', allow: { group: ['a'] } }] }, ['upstreams[0].rules[0].allow.group: unknown key']),
    'the same path twice': upstreamCase({ rules: [admin, { path: '/admin/', allow: {} }] }, [
      'upstreams[0].rules[1].path: same path as upstreams[0].rules[0].path: which rule decides would be ambiguous',
    ]),
    'the same path in another case': upstreamCase({ rules: [admin, { path: '/Admin', allow: {} }] }, [
      'upstreams[0].rules[1].path: same path, ignoring case and trailing dots, as upstreams[0].rules[0].path: which rule decides would be ambiguous',
    ]),
    'a public path': upstreamCase({ publicPaths: ['/admin/**'], rules: [admin] }, [
      'upstreams[0].rules[0].path: is public (upstreams[0].publicPaths[0] matches it): its allow would never apply',
    ]),
    'outside the upstream': upstreamCase({ match: { pathPrefix: '/app' }, rules: [admin] }, [
      'upstreams[0].rules[0].path: is not below upstreams[0].match.pathPrefix (/app): the rule would never apply',
    ]),
    'the whole upstream': upstreamCase({ match: { pathPrefix: '/app' }, rules: [{ path: '/app/', allow: {} }] }, [
      'upstreams[0].rules[0].path: is the whole upstream (upstreams[0].match.pathPrefix): write its allow as upstreams[0].allow',
    ]),
    'with auth: none': upstreamCase({ auth: 'none', rules: [admin] }, [
      'upstreams[0].rules: never apply with upstreams[0].auth: none (no request is signed in there); remove them or require a sign-in',
    ]),
    'a provider the upstream does not accept': upstreamCase({ rules: [{ path: '/admin', allow: { providers: ['other'] } }] }, [
      'upstreams[0].rules[0].allow.providers[0]: names no provider (the upstream accepts: default)',
    ]),
  })
})

t.test('upstreams[].rules with regex and methods: refused where ambiguous or never deciding, naming the key and the pattern', async (t) => {
  const admins = { groups: ['admins'] }
  table(t, {
    'a regex rule': valid(withUpstream({ rules: [{ regex: '^/projects/[^/]+/settings(?:/.*)?$', allow: admins }] })),
    'a rule for some methods beside one for every method on the same path': valid(
      withUpstream({ rules: [{ path: '/api', methods: ['GET'], allow: {} }, { path: '/api', allow: admins }] }),
    ),
    'the same path for other methods': valid(withUpstream({ rules: [{ path: '/api', methods: ['GET'], allow: {} }, { path: '/api', methods: ['POST'], allow: admins }] })),
    'the same regex for other methods': valid(withUpstream({ rules: [{ regex: '^/x$', methods: ['PUT'], allow: {} }, { regex: '^/x$', methods: ['DELETE'], allow: admins }] })),
    'a regex rule for every path, for some methods only': valid(withUpstream({ rules: [{ regex: '^/.*$', methods: ['DELETE'], allow: admins }] })),
    'a path rule public only for GET': valid(withUpstream({ publicPaths: [{ glob: '/admin/**', methods: ['GET'] }], rules: [{ path: '/admin', allow: admins }] })),
  })
  table(t, {
    'both path and regex': upstreamCase({ rules: [{ path: '/admin', regex: '^/admin$', allow: {} }] }, [
      'upstreams[0].rules[0]: gives both path and regex: write two entries',
    ]),
    'an invalid regex': upstreamCase({ rules: [{ regex: '^/(admin$', allow: {} }] }, [
      'upstreams[0].rules[0].regex: "^/(admin$": not a valid RE2 regular expression: missing closing ): `^/(admin$`',
    ]),
    'an unanchored regex (oauth2-proxy searches; here the whole path must match)': upstreamCase({ rules: [{ regex: '/admin', allow: {} }] }, [
      'upstreams[0].rules[0].regex: "/admin": must be anchored, written ^...$ (it matches the whole path)',
    ]),
    'anchored at one end only': upstreamCase({ rules: [{ regex: '^/admin', allow: {} }] }, [
      'upstreams[0].rules[0].regex: "^/admin": must be anchored, written ^...$ (it matches the whole path)',
    ]),
    'an escaped $ is no anchor': upstreamCase({ rules: [{ regex: '^/admin\\$', allow: {} }] }, [
      'upstreams[0].rules[0].regex: "^/admin\\\\$": must be anchored, written ^...$ (it matches the whole path)',
    ]),
    'a | outside parentheses': upstreamCase({ rules: [{ regex: '^/a|/b$', allow: {} }] }, ['upstreams[0].rules[0].regex: "^/a|/b$": a | outside parentheses: write ^(?:a|b)$']),
    'a backreference': upstreamCase({ rules: [{ regex: '^/(a)\\1$', allow: {} }] }, [
      'upstreams[0].rules[0].regex: "^/(a)\\\\1$": backreferences are not supported by a linear-time engine (invalid escape sequence: `\\1`)',
    ]),
    'a lookahead': upstreamCase({ rules: [{ regex: '^/(?!public).*$', allow: {} }] }, [
      'upstreams[0].rules[0].regex: "^/(?!public).*$": lookahead and lookbehind are not supported by a linear-time engine (invalid or unsupported Perl syntax: `(?!`)',
    ]),
    'the same regex twice': upstreamCase({ rules: [{ regex: '^/x/.*$', allow: admins }, { regex: '^/x/.*$', methods: ['GET'], allow: {} }] }, [
      'upstreams[0].rules[1].regex: never decides: upstreams[0].rules[0].regex has the same pattern, is tried first, and applies to all of its methods',
    ]),
    'the same regex for a method more, after': valid(withUpstream({ rules: [{ regex: '^/x/.*$', methods: ['GET'], allow: {} }, { regex: '^/x/.*$', allow: admins }] })),
    'the same path for a method in common (GET covers HEAD)': upstreamCase(
      { rules: [{ path: '/api', methods: ['GET'], allow: {} }, { path: '/api', methods: ['HEAD', 'POST'], allow: admins }] },
      ['upstreams[0].rules[1].path: same path as upstreams[0].rules[0].path: which rule decides would be ambiguous'],
    ),
    'a regex rule for every path and method': upstreamCase({ rules: [{ regex: '^/.*$', allow: admins }] }, [
      'upstreams[0].rules[0].regex: "^/.*$" matches all of upstreams[0].match.pathPrefix (/): write its allow as upstreams[0].allow',
    ]),
    'a path rule a regex rule covers': upstreamCase({ rules: [{ path: '/admin', allow: admins }, { regex: '^/admin(?:/.*)?$', allow: {} }] }, [
      'upstreams[0].rules[0].path: never decides: upstreams[0].rules[1].regex (regex rules are tried first) matches all of it',
    ]),
    'a path rule public through a regex public path': upstreamCase({ publicPaths: [{ regex: '^/admin(?:/.*)?$' }], rules: [{ path: '/admin', allow: admins }] }, [
      'upstreams[0].rules[0].path: is public (upstreams[0].publicPaths[0] matches it): its allow would never apply',
    ]),
    'a GET rule public for GET': upstreamCase({ publicPaths: [{ glob: '/admin/**', methods: ['GET'] }], rules: [{ path: '/admin', methods: ['GET'], allow: admins }] }, [
      'upstreams[0].rules[0].path: is public (upstreams[0].publicPaths[0] matches it): its allow would never apply',
    ]),
    'a lowercase method': upstreamCase({ rules: [{ path: '/admin', methods: ['get'], allow: {} }] }, ['upstreams[0].rules[0].methods[0]: must be an HTTP method in uppercase, e.g. GET']),
    'no methods': upstreamCase({ rules: [{ path: '/admin', methods: [], allow: {} }] }, ['upstreams[0].rules[0].methods: must not be empty']),
  })
})

t.test('upstreams[].publicPaths with regex and methods: refused where invalid, doubled or the whole upstream, naming the key and the pattern', async (t) => {
  table(t, {
    'a regex for GET': valid(withUpstream({ publicPaths: [{ regex: '^/api/health$', methods: ['GET'] }] })),
    'a glob object': valid(withUpstream({ publicPaths: [{ glob: '/public/**' }, { glob: '/docs/**', methods: ['GET', 'HEAD'] }] })),
    'a regex for every path, for GET only': valid(withUpstream({ publicPaths: [{ regex: '^/.*$', methods: ['GET'] }] })),
    'the same glob for other methods': valid(withUpstream({ publicPaths: [{ glob: '/x/**', methods: ['POST'] }, { glob: '/x/**', methods: ['GET'] }] })),
  })
  table(t, {
    'neither glob nor regex': upstreamCase({ publicPaths: [{ methods: ['GET'] }] }, ['upstreams[0].publicPaths[0]: needs glob or regex']),
    'both': upstreamCase({ publicPaths: [{ glob: '/a', regex: '^/a$' }] }, ['upstreams[0].publicPaths[0]: gives both glob and regex: write two entries']),
    'an unknown key': upstreamCase({ publicPaths: [{ regex: '^/a$', method: 'GET' }] }, ['upstreams[0].publicPaths[0].method: unknown key']),
    'an unanchored regex': upstreamCase({ publicPaths: [{ regex: '^/api/health' }] }, [
      'upstreams[0].publicPaths[0].regex: "^/api/health": must be anchored, written ^...$ (it matches the whole path)',
    ]),
    'non-ASCII (the path is matched percent-encoded)': upstreamCase({ publicPaths: [{ regex: '^/café$' }] }, [
      'upstreams[0].publicPaths[0].regex: "^/café$": only printable ASCII (the path is matched percent-encoded: write /caf%C3%A9, not /café)',
    ]),
    'a Unicode class': upstreamCase({ publicPaths: [{ regex: '^/\\pL+$' }] }, [
      'upstreams[0].publicPaths[0].regex: "^/\\\\pL+$": Unicode classes are refused: the path is ASCII (invalid escape sequence: `\\p`)',
    ]),
    'a count above 100': upstreamCase({ publicPaths: [{ regex: '^/a{101}$' }] }, ['upstreams[0].publicPaths[0].regex: "^/a{101}$": repetition counts above 100']),
    'too long': upstreamCase({ publicPaths: [{ regex: `^/${'a'.repeat(1000)}$` }] }, [
      `upstreams[0].publicPaths[0].regex: "^/${'a'.repeat(37)}...: longer than 1000 characters`,
    ]),
    'the same regex twice': upstreamCase({ publicPaths: [{ regex: '^/a$' }, { regex: '^/a$', methods: ['GET'] }] }, [
      'upstreams[0].publicPaths[1].regex: same regex as upstreams[0].publicPaths[0] for a method in common: one of them says nothing',
    ]),
    'the same glob twice': upstreamCase({ publicPaths: ['/public/**', { glob: '/public/**', methods: ['GET'] }] }, [
      'upstreams[0].publicPaths[1]: same glob as upstreams[0].publicPaths[0] for a method in common: one of them says nothing',
    ]),
    'a regex making the whole upstream public': upstreamCase({ publicPaths: [{ regex: '^/.*$' }] }, [
      'upstreams[0].publicPaths[0].regex: "^/.*$" makes all of upstreams[0].match.pathPrefix (/) public: write upstreams[0].auth: none, or name the paths',
    ]),
    'a regex making the whole prefix public': upstreamCase({ match: { pathPrefix: '/app' }, publicPaths: [{ regex: '^/app(?:/.*)?$' }] }, [
      'upstreams[0].publicPaths[0].regex: "^/app(?:/.*)?$" makes all of upstreams[0].match.pathPrefix (/app) public: write upstreams[0].auth: none, or name the paths',
    ]),
    'a lowercase method': upstreamCase({ publicPaths: [{ regex: '^/a$', methods: ['get'] }] }, ['upstreams[0].publicPaths[0].methods[0]: must be an HTTP method in uppercase, e.g. GET']),
  })
})

t.test("an upstream's providers must be configured providers", async (t) => {
  const upstream = (providers: string[]) => ({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', providers }] })
  t.strictSame(problems(several([STAFF, PARTNERS], upstream(['staff', 'nobody']))), ['upstreams[0].providers[1]: names no provider (configured: staff, partners)'])
  t.strictSame(problems(upstream(['staff'])), ['upstreams[0].providers[0]: names no provider (configured: default)'])
  t.strictSame(problems(upstream([])), ['upstreams[0].providers: must not be empty'])
  t.strictSame(problems(upstream(['default', 'default'])), ['upstreams[0].providers[1]: duplicate of upstreams[0].providers[0]'])
  t.strictSame(problems(several([STAFF, PARTNERS], upstream(['*']))), [], "'*': every provider")
  t.strictSame(problems(several([STAFF, PARTNERS], upstream(['staff', '*']))), ["upstreams[0].providers: '*' means every provider and stands alone"])
})

t.test("allow.providers must be providers the upstream accepts; unset upstream providers are the default's alone", async (t) => {
  const upstream = (extra: Record<string, unknown>) => ({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', ...extra }] })
  t.strictSame(problems(several([STAFF, PARTNERS], upstream({ allow: { providers: ['partners'] } }))), [
    'upstreams[0].allow.providers[0]: names no provider (the upstream accepts: staff)',
  ])
  t.strictSame(problems(several([STAFF, PARTNERS], upstream({ providers: ['*'], allow: { providers: ['partners'] } }))), [])
  t.strictSame(problems(several([STAFF, PARTNERS], upstream({ providers: ['*'], allow: { providers: ['*', 'staff'] } }))), [
    "upstreams[0].allow.providers: '*' means every provider and stands alone",
  ])
})

t.test('forwardAccessToken is refused only on upstreams that accept a DPoP provider', async (t) => {
  const bound = { ...PARTNERS, dpop: true }
  const forwarding = (providers?: string[]) => ({
    upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', forwardAccessToken: true, ...(providers === undefined ? {} : { providers }) }],
  })
  t.strictSame(problems(several([STAFF, bound], forwarding(['staff']))), [])
  t.strictSame(problems(several([STAFF, bound], forwarding())), [], 'unset: the first provider (staff) alone')
  t.strictSame(problems(several([STAFF, bound], forwarding(['*']))), [
    'upstreams[0].forwardAccessToken: cannot be true with providers[1].dpop: DPoP-bound access tokens are not forwarded',
  ])
  t.strictSame(problems(several([STAFF, bound], forwarding(['partners']))), [
    'upstreams[0].forwardAccessToken: cannot be true with providers[1].dpop: DPoP-bound access tokens are not forwarded',
  ])
})

t.test('tokenExchange: refused where it could not do what it says', async (t) => {
  t.strictSame(exchange({ audience: 'a' }, { auth: 'none' }), ['upstreams[0].tokenExchange: needs a signed-in user: it does nothing with upstreams[0].auth: none'])
  t.strictSame(exchange({ audience: 'a' }, { forwardAccessToken: true }), [
    "upstreams[0].tokenExchange: cannot be given with upstreams[0].forwardAccessToken: true (the exchanged token is the upstream's only Authorization)",
  ])
  t.strictSame(problems({ ...withUpstream({ tokenExchange: { audience: 'a' } }), provider: { dpop: true } }), [
    'upstreams[0].tokenExchange: cannot be used with provider.dpop (or profile: fapi2): DPoP-bound access tokens are not exchanged',
  ])
})

t.test('resourceMetadata on auth: none: refused when it asks for a document, accepted when false', async (t) => {
  const refused = ['upstreams[0].resourceMetadata: needs a signed-in user: it does nothing with upstreams[0].auth: none']
  t.strictSame(problems(withUpstream({ resourceMetadata: {}, auth: 'none' })), refused)
  t.strictSame(problems(withUpstream({ resourceMetadata: { scopes: ['a'] }, auth: 'none' })), refused)
  t.strictSame(problems(withUpstream({ resourceMetadata: true, auth: 'none' })), refused)
  t.strictSame(problems(withUpstream({ resourceMetadata: false, auth: 'none' })), [])
  t.strictSame(problems(withUpstream({ auth: 'none' })), [], 'unset: nothing to refuse')
})

t.test('tokenAudience: provider or resource; resource refused where it could not be checked as documented', async (t) => {
  t.equal(resolve().upstreams[0]?.tokenAudience, undefined, "unset: the provider's audiences, nothing new decided")
  t.equal(resolve(withUpstream({ tokenAudience: 'resource' })).upstreams[0]?.tokenAudience, 'resource')
  t.strictSame(problems(withUpstream({ tokenAudience: 'provider' })), [])
  t.strictSame(problems(withUpstream({ tokenAudience: 'resource', resourceMetadata: { scopes: ['mcp:tools'] } })), [])
  t.match(problems(withUpstream({ tokenAudience: 'client' })), [/^upstreams\[0\]\.tokenAudience: /])
  t.strictSame(problems(withUpstream({ tokenAudience: 'resource', auth: 'none' })), [
    'upstreams[0].tokenAudience: needs a signed-in user: it does nothing with upstreams[0].auth: none',
  ])
  t.strictSame(problems(withUpstream({ tokenAudience: 'resource', resourceMetadata: false })), [
    'upstreams[0].tokenAudience: resource needs the protected resource metadata that names the resource (RFC 9728): it cannot be given with upstreams[0].resourceMetadata: false',
  ])
})

t.test("tokenAudience: resource: refused when a provider's audiences name the resource (its tokens would pass everywhere)", async (t) => {
  const mcp = { name: 'mcp', match: { pathPrefix: '/mcp' }, target: 'http://127.0.0.1:3001', tokenAudience: 'resource' }
  const base = withUpstream({})
  const publicUrl = resolve().server.publicUrl
  const withAudiences = (audiences: string[], upstream: Tree = mcp): Tree => ({
    ...base,
    provider: { ...(base.provider as Tree), audiences },
    upstreams: [...(base.upstreams as Tree[]), upstream],
  })
  t.strictSame(problems(withAudiences(['orders-api'])), [], 'other audiences: accepted')
  t.strictSame(problems(withAudiences([`${publicUrl}/mcp`])), [
    `provider.audiences: names ${publicUrl}/mcp, the resource of upstreams[1].tokenAudience: resource, whose tokens would then be accepted at every upstream of this provider`,
  ])
  t.equal(problems(withAudiences([`${publicUrl}/mcp`.toUpperCase()])).length, 1, 'whatever its case')
  t.equal(problems(withAudiences(['https://mcp.example.com/mcp'], { ...mcp, match: { pathPrefix: '/mcp', hosts: ['mcp.example.com'] } })).length, 1, 'on a host of match.hosts')
  t.strictSame(problems(withAudiences([`${publicUrl}/mcp`], { ...mcp, tokenAudience: 'provider' })), [], 'tokenAudience: provider: nothing to refuse')
})
