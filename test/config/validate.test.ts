import t from 'tap'
import { COOKIE_SECRET, problems, resolve, type Tree, withUpstream } from '../fixtures/config/base.ts'
import { resolveConfig } from '#src/config/load'
import { type Case, table, upstreamCase, valid } from '../fixtures/config/cases.ts'


t.test('the minimal configuration is valid', async (t) => {
  t.strictSame(problems({}), [])
})

t.test('root', async (t) => {
  table(t, {
    'unknown top-level key': [{ servers: {} }, ['servers: unknown key']],
    'missing sections': [
      { server: undefined, provider: undefined, cookies: undefined, upstreams: undefined },
      ['server: is required', 'cookies: is required', 'upstreams: is required', 'provider: is required (or providers, a list, for several providers)'],
    ],
    'a section of the wrong type': [{ session: 'redis' }, ['session: must be a mapping']],
  })
  t.strictSame(
    (() => {
      try {
        resolveConfig(['a list'], {})
        return []
      } catch (error) {
        return (error as { issues: string[] }).issues
      }
    })(),
    ['(root): must be a mapping'],
  )
})

t.test('server', async (t) => {
  table(t, {
    'typo in a key': [{ server: { prot: 8080 } }, ['server.prot: unknown key']],
    'port not a number': [{ server: { port: 'abc' } }, ['server.port: must be an integer']],
    'port not an integer': [{ server: { port: 80.5 } }, ['server.port: must be an integer']],
    'port above 65535': [{ server: { port: 65536 } }, ['server.port: must be between 0 and 65535']],
    'negative port': [{ server: { port: -1 } }, ['server.port: must be between 0 and 65535']],
    'managementPort out of range': [{ server: { managementPort: 70000 } }, ['server.managementPort: must be between 0 and 65535']],
    'cache ttlSeconds above a minute': [{ forwardAuth: { cache: { enabled: true, ttlSeconds: 600 } } }, ['forwardAuth.cache.ttlSeconds: must be between 1 and 60']],
    'empty host': [{ server: { host: '' } }, ['server.host: must not be empty']],
    'host with a space': [{ server: { host: 'my host' } }, ['server.host: must be an IP address or a host name']],
    'IPv6 host': valid({ server: { host: '::' } }),
    'publicUrl missing': [{ server: { publicUrl: undefined } }, ['server.publicUrl: is required']],
    'publicUrl without scheme': [{ server: { publicUrl: 'app.example.com' } }, ['server.publicUrl: must be an http(s) URL']],
    'publicUrl ftp': [{ server: { publicUrl: 'ftp://app.example.com' } }, ['server.publicUrl: must be an http(s) URL']],
    'publicUrl with a path': [
      { server: { publicUrl: 'https://app.example.com/app' } },
      ['server.publicUrl: must be an origin (scheme, host and optional port) without a path or query'],
    ],
    'publicUrl with a query': [
      { server: { publicUrl: 'https://app.example.com/?a=1' } },
      ['server.publicUrl: must be an origin (scheme, host and optional port) without a path or query'],
    ],
    'publicUrl with a fragment': [{ server: { publicUrl: 'https://app.example.com/#x' } }, ['server.publicUrl: must not have a fragment']],
    'publicUrl with credentials': [
      { server: { publicUrl: 'https://user:pw@app.example.com' } },
      ['server.publicUrl: must not contain credentials'],
    ],
    'publicUrl with a newline': [{ server: { publicUrl: 'https://app.exa\nmple.com' } }, ['server.publicUrl: must be an http(s) URL']],
    'trusted proxies of every kind': valid({ server: { trustedProxies: ['10.0.0.0/8', '192.168.1.10', '::1', 'fd00::/8', '0.0.0.0/0'] } }),
  })
  for (const bad of ['10.0.0.0/33', '::/129', 'proxy.internal', '10.0.0.0/8/8', '10.0.0.0/x', '300.1.1.1', '10.0.0.0/']) {
    t.strictSame(
      problems({ server: { trustedProxies: ['127.0.0.1', bad] } }),
      ['server.trustedProxies[1]: must be an IP address or a CIDR such as 10.0.0.0/8'],
      bad,
    )
  }
})

t.test('server.publicUrl is reduced to its origin', async (t) => {
  t.equal(resolve({ server: { publicUrl: 'https://app.example.com/' } }).server.publicUrl, 'https://app.example.com')
  t.equal(resolve({ server: { publicUrl: 'HTTPS://App.Example.COM:443' } }).server.publicUrl, 'https://app.example.com')
  t.equal(
    resolve({ server: { publicUrl: 'http://localhost:8080/' }, cookies: { secure: false } }).server.publicUrl,
    'http://localhost:8080',
  )
})

t.test('provider', async (t) => {
  table(t, {
    'issuer without scheme': [{ provider: { issuer: 'idp.example.com' } }, ['provider.issuer: must be an http(s) URL']],
    'issuer with a query': [{ provider: { issuer: 'https://idp.example.com/?tenant=1' } }, ['provider.issuer: must not have a query']],
    'issuer missing': [{ provider: { issuer: undefined } }, ['provider.issuer: is required']],
    'clientId empty': [{ provider: { clientId: '' } }, ['provider.clientId: must not be empty']],
    'clientId missing': [{ provider: { clientId: undefined } }, ['provider.clientId: is required']],
    'clientId a number': [{ provider: { clientId: 12345 } }, ['provider.clientId: must be a string']],
    'clientSecret empty': [{ provider: { clientSecret: '' } }, ['provider.clientSecret: must not be empty']],
    'clientAuthMethod unknown': [
      { provider: { clientAuthMethod: 'tls_client_auth' } },
      ['provider.clientAuthMethod: must be one of: client_secret_basic, client_secret_post, private_key_jwt'],
    ],
    'client_secret_post': valid({ provider: { clientAuthMethod: 'client_secret_post' } }),
    'scopes without openid': [{ provider: { scopes: ['profile', 'email'] } }, ['provider.scopes: must include openid']],
    'scopes empty': [{ provider: { scopes: [] } }, ['provider.scopes: must include openid']],
    'duplicate scope': [{ provider: { scopes: ['openid', 'email', 'openid'] } }, ['provider.scopes[2]: duplicate of provider.scopes[0]']],
    'scope with a space': [
      { provider: { scopes: ['openid', 'read write'] } },
      ['provider.scopes[1]: must be a scope token (no spaces, quotes or backslashes)'],
    ],
    'scopes not a list': [{ provider: { scopes: 'openid profile' } }, ['provider.scopes: must be a list']],
    'empty audience': [{ provider: { audiences: [''] } }, ['provider.audiences[0]: must not be empty']],
    'timeoutMs zero': [{ provider: { timeoutMs: 0 } }, ['provider.timeoutMs: must be between 1 and 2147483647']],
    'timeoutMs too large for a timer': [{ provider: { timeoutMs: 2147483648 } }, ['provider.timeoutMs: must be between 1 and 2147483647']],
    'timeoutMs with a unit': [{ provider: { timeoutMs: '10s' } }, ['provider.timeoutMs: must be an integer']],
    'clockToleranceSeconds above 300': [{ provider: { clockToleranceSeconds: 301 } }, ['provider.clockToleranceSeconds: must be between 0 and 300']],
    'clockToleranceSeconds negative': [{ provider: { clockToleranceSeconds: -1 } }, ['provider.clockToleranceSeconds: must be between 0 and 300']],
    'clockToleranceSeconds 0': valid({ provider: { clockToleranceSeconds: 0 } }),
    'postLogoutRedirectUri relative': [{ provider: { postLogoutRedirectUri: '/bye' } }, ['provider.postLogoutRedirectUri: must be an http(s) URL']],
    'postLogoutRedirectUri javascript:': [
      { provider: { postLogoutRedirectUri: 'javascript:alert(1)' } },
      ['provider.postLogoutRedirectUri: must be an http(s) URL'],
    ],
    'postLogoutRedirectUri with a query': valid({ provider: { postLogoutRedirectUri: 'https://app.example.com/bye?x=1' } }),
    'allowInsecureHttp as text': [{ provider: { allowInsecureHttp: 'yes' } }, ['provider.allowInsecureHttp: must be true or false']],
  })
})

t.test('provider.bearer', async (t) => {
  const asymmetric = 'RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, Ed25519'
  table(t, {
    'a subset of the asymmetric algorithms': valid({ provider: { bearer: { algorithms: ['ES256', 'RS256'] } } }),
    'introspection on': valid({ provider: { bearer: { introspection: true } } }),
    'HS256 (the public key as HMAC secret)': [
      { provider: { bearer: { algorithms: ['RS256', 'HS256'] } } },
      [`provider.bearer.algorithms[1]: must be one of: ${asymmetric}`],
    ],
    'none': [{ provider: { bearer: { algorithms: ['none'] } } }, [`provider.bearer.algorithms[0]: must be one of: ${asymmetric}`]],
    'lower-case rs256': [{ provider: { bearer: { algorithms: ['rs256'] } } }, [`provider.bearer.algorithms[0]: must be one of: ${asymmetric}`]],
    'no algorithm': [{ provider: { bearer: { algorithms: [] } } }, ['provider.bearer.algorithms: must not be empty']],
    'an algorithm twice': [
      { provider: { bearer: { algorithms: ['RS256', 'RS256'] } } },
      ['provider.bearer.algorithms[1]: duplicate of provider.bearer.algorithms[0]'],
    ],
    'algorithms as text': [{ provider: { bearer: { algorithms: 'RS256' } } }, ['provider.bearer.algorithms: must be a list']],
    'introspection as text': [{ provider: { bearer: { introspection: 'yes' } } }, ['provider.bearer.introspection: must be true or false']],
    'requireAtJwt as text': [{ provider: { bearer: { requireAtJwt: 'yes' } } }, ['provider.bearer.requireAtJwt: must be true or false']],
    'unknown key': [{ provider: { bearer: { issuer: 'x' } } }, ['provider.bearer.issuer: unknown key']],
  })
  t.same(resolve({ provider: { bearer: { introspection: true } } }).providers[0]!.bearer, {
    algorithms: asymmetric.split(', '),
    introspection: true,
    requireAtJwt: false,
  })
  t.same(resolve({ provider: { bearer: { algorithms: ['ES256'] } } }).providers[0]!.bearer, { algorithms: ['ES256'], introspection: false, requireAtJwt: false })
  t.equal(resolve({ provider: { bearer: { requireAtJwt: true } } }).providers[0]!.bearer.requireAtJwt, true)
  t.same(resolve({ provider: { audiences: ['api', 'gateway'] } }).providers[0]!.audiences, ['api', 'gateway'])
})

t.test('the issuer is kept exactly as written', async (t) => {
  t.equal(resolve({ provider: { issuer: 'https://idp.example.com/realms/main/' } }).providers[0]!.issuer, 'https://idp.example.com/realms/main/')
})

t.test('cookies', async (t) => {
  table(t, {
    'no secrets': [{ cookies: { secrets: [] } }, ['cookies.secrets: must not be empty']],
    'secrets missing': [{ cookies: { secrets: undefined } }, ['cookies.secrets: is required']],
    'second secret too short': [{ cookies: { secrets: [COOKIE_SECRET, 'x'.repeat(31)] } }, ['cookies.secrets[1]: must be at least 32 bytes']],
    '32 ASCII bytes': valid({ cookies: { secrets: ['x'.repeat(32)] } }),
    // 11 characters, 33 bytes: the limit is on bytes, not characters.
    '11 three-byte characters': valid({ cookies: { secrets: ['€'.repeat(11)] } }),
    '10 three-byte characters': [{ cookies: { secrets: ['€'.repeat(10)] } }, ['cookies.secrets[0]: must be at least 32 bytes']],
    'secret a number': [{ cookies: { secrets: [12345] } }, ['cookies.secrets[0]: must be a string']],
    'secrets a string': [{ cookies: { secrets: COOKIE_SECRET } }, ['cookies.secrets: must be a list']],
    'name with a space': [{ cookies: { name: 'my cookie' } }, ['cookies.name: must be 1 to 32 letters, digits, _ or -']],
    'name too long': [{ cookies: { name: 'a'.repeat(33) } }, ['cookies.name: must be 1 to 32 letters, digits, _ or -']],
    'name empty': [{ cookies: { name: '' } }, ['cookies.name: must be 1 to 32 letters, digits, _ or -']],
    'name with _ and -': valid({ cookies: { name: 'My_gw-2' } }),
    'sameSite capitalised': [{ cookies: { sameSite: 'Lax' } }, ['cookies.sameSite: must be one of: lax, strict, none']],
    'sameSite strict': valid({ cookies: { sameSite: 'strict' } }),
    'secure as text': [{ cookies: { secure: 'true' } }, ['cookies.secure: must be true or false']],
    'responseMode unknown': [{ provider: { responseMode: 'fragment' } }, ['provider.responseMode: must be one of: query, form_post']],
    'domain as a URL': [{ cookies: { domain: 'https://example.com' } }, ['cookies.domain: must be a domain name (no scheme, port or path)']],
    'domain with a port': [{ cookies: { domain: 'example.com:443' } }, ['cookies.domain: must be a domain name (no scheme, port or path)']],
  })
})

t.test('a too-short secret is never quoted in the message', async (t) => {
  const secret = 'hunter2-hunter2'
  const issues = problems({ cookies: { secrets: [secret] } })
  t.equal(issues.length, 1)
  t.notMatch(issues.join('\n'), secret)
})

t.test('cookies.domain is lowercased without its leading dot', async (t) => {
  t.equal(resolve({ cookies: { domain: '.Example.COM' } }).cookies.domain, 'example.com')
})

t.test('session', async (t) => {
  table(t, {
    'unknown store': [{ session: { store: 'file' } }, ['session.store: must be one of: cookie, memory, redis']],
    'redis with redisUrl': valid({ session: { store: 'redis', redisUrl: 'redis://127.0.0.1:6379/0' } }),
    'memory': valid({ session: { store: 'memory' } }),
    'redisUrl with store cookie': valid({ session: { redisUrl: 'redis://127.0.0.1' } }),
    'redis key prefix and timeout': valid({ session: { store: 'redis', redisUrl: 'rediss://:pw@redis:6380', redis: { keyPrefix: 'team-a:', timeoutMs: 500 } } }),
    'redis key prefix with a space': [{ session: { redis: { keyPrefix: 'a b' } } }, ['session.redis.keyPrefix: must be at most 64 printable ASCII characters without spaces or braces']],
    'redis timeout 0': [{ session: { redis: { timeoutMs: 0 } } }, ['session.redis.timeoutMs: must be between 1 and 2147483647']],
    'redisUrl http': [{ session: { redisUrl: 'http://127.0.0.1:6379' } }, ['session.redisUrl: must be a redis:// or rediss:// URL']],
    'redisUrl without host': [{ session: { redisUrl: 'redis://' } }, ['session.redisUrl: must be a redis:// or rediss:// URL']],
    'maxAgeSeconds below 60': [{ session: { maxAgeSeconds: 59 } }, ['session.maxAgeSeconds: must be between 60 and 2592000']],
    'maxAgeSeconds above 30 days': [{ session: { maxAgeSeconds: 2592001 } }, ['session.maxAgeSeconds: must be between 60 and 2592000']],
    'maxAgeSeconds bounds': valid({ session: { maxAgeSeconds: 60 } }),
  })
})

t.test('redirects.allowedHosts', async (t) => {
  const at0 = (message: string): string[] => [`redirects.allowedHosts[0]: ${message}`]
  table(t, {
    'every valid kind': valid({
      redirects: { allowedHosts: ['docs.example.com', 'app.example.com:8443', '.example.org', '127.0.0.1:3000', '[::1]:8080', 'intranet'] },
    }),
    'a URL': [{ redirects: { allowedHosts: ['https://docs.example.com'] } }, at0('must be a host name, not a URL')],
    'a path': [{ redirects: { allowedHosts: ['docs.example.com/x'] } }, at0('must be a host name without a path')],
    'a wildcard': [
      { redirects: { allowedHosts: ['*.example.com'] } },
      at0('must not contain wildcards; write .example.com to allow example.com and its subdomains'),
    ],
    'a lone star': [
      { redirects: { allowedHosts: ['*'] } },
      at0('must not contain wildcards; write .example.com to allow example.com and its subdomains'),
    ],
    'a bad port': [{ redirects: { allowedHosts: ['docs.example.com:99999'] } }, at0('must be a host name, optionally with :port')],
    'a hex IPv4': [{ redirects: { allowedHosts: ['0x7f.1'] } }, at0('must be a host name, optionally with :port')],
    'an empty entry': [{ redirects: { allowedHosts: [''] } }, at0('must be a host name, optionally with :port')],
    'a dot alone': [{ redirects: { allowedHosts: ['.'] } }, at0('must be a host name or a .example.com entry, optionally with :port')],
  })
  t.same(resolve({ redirects: { allowedHosts: ['Docs.Example.COM', '.Example.org'] } }).redirects.allowedHosts, ['docs.example.com', '.example.org'])
})

t.test('upstreams: list, name, target', async (t) => {
  table(t, {
    'no upstreams': [{ upstreams: [] }, ['upstreams: must not be empty']],
    'name missing': [{ upstreams: [{ target: 'http://127.0.0.1:3000' }] }, ['upstreams[0].name: is required']],
    'target missing': [{ upstreams: [{ name: 'app' }] }, ['upstreams[0].target: is required']],
    'name starting with -': upstreamCase(
      { name: '-app' },
      ['upstreams[0].name: must start with a letter or digit and contain only letters, digits, _ and -'],
    ),
    'name with a dot': upstreamCase(
      { name: 'my.app' },
      ['upstreams[0].name: must start with a letter or digit and contain only letters, digits, _ and -'],
    ),
    'target not http (the contract example)': [
      { upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000' }, { name: 'api', target: 'ftp://127.0.0.1', match: { pathPrefix: '/x' } }] },
      ['upstreams[1].target: must be an http(s) URL'],
    ],
    'target with a query': upstreamCase({ target: 'http://127.0.0.1:3000/?a=1' }, ['upstreams[0].target: must not have a query']),
    'target with a fragment': upstreamCase({ target: 'http://127.0.0.1:3000/#a' }, ['upstreams[0].target: must not have a fragment']),
    'target with credentials': upstreamCase({ target: 'http://u:p@127.0.0.1:3000' }, ['upstreams[0].target: must not contain credentials']),
    'target with a backslash': upstreamCase({ target: 'http://127.0.0.1:3000\\evil' }, ['upstreams[0].target: must be an http(s) URL']),
    'target https with a path': valid(withUpstream({ target: 'https://backend.internal:8443/base/' })),
    'unknown key in an upstream': upstreamCase({ taget: 'x' }, ['upstreams[0].taget: unknown key']),
    'auth unknown': upstreamCase({ auth: 'maybe' }, ['upstreams[0].auth: must be one of: required, optional, none']),
    'timeoutMs zero': upstreamCase({ timeoutMs: 0 }, ['upstreams[0].timeoutMs: must be between 1 and 2147483647']),
    'websocket as text': upstreamCase({ websocket: 'on' }, ['upstreams[0].websocket: must be true or false']),
    'booleans set': valid(withUpstream({ forwardAccessToken: true, allowPreflight: true, websocket: true, auth: 'optional' })),
  })
})

t.test('upstreams: match', async (t) => {
  const prefix = (pathPrefix: string, message: string): Case => [withUpstream({ match: { pathPrefix } }), [`upstreams[0].match.pathPrefix: ${message}`]]
  table(t, {
    'relative prefix': prefix('app', 'must start with /'),
    'dot-dot': prefix('/a/../b', 'must not contain . or .. segments'),
    'dot-dot at the end': prefix('/a/..', 'must not contain . or .. segments'),
    'dot segment': prefix('/a/./b', 'must not contain . or .. segments'),
    'double slash': prefix('/a//b', 'must not contain //'),
    'question mark': prefix('/a?b', 'must not contain ?, # or \\'),
    'hash': prefix('/a#b', 'must not contain ?, # or \\'),
    'backslash': prefix('/a\\b', 'must not contain ?, # or \\'),
    'encoded dots': prefix('/%2e%2e/admin', 'must not contain percent-encoded dots, slashes or backslashes'),
    'encoded slash': prefix('/a%2Fb', 'must not contain percent-encoded dots, slashes or backslashes'),
    'the gateway path': prefix('/api/v1/openid', 'must not be /api/v1/openid or below it (the gateway serves that path)'),
    'below the gateway path': prefix('/API/v1/openid/x', 'must not be /api/v1/openid or below it (the gateway serves that path)'),
    'space': prefix('/a b', 'must not contain whitespace or control characters'),
    'empty hosts': upstreamCase({ match: { hosts: [] } }, ['upstreams[0].match.hosts: must not be empty']),
    'host as a URL': upstreamCase({ match: { hosts: ['https://a.example.com'] } }, ['upstreams[0].match.hosts[0]: must be a host name, not a URL']),
    'host wildcard': upstreamCase({ match: { hosts: ['*.example.com'] } }, ['upstreams[0].match.hosts[0]: must not contain wildcards']),
    'unknown key in match': upstreamCase({ match: { path: '/x' } }, ['upstreams[0].match.path: unknown key']),
  })
  const config = resolve({
    upstreams: [
      { name: 'a', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/app/', hosts: ['App.Example.com', 'app.example.com', 'x.example.com:8443'] } },
      { name: 'b', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/' } },
    ],
  })
  t.same(config.upstreams[0]?.match, { pathPrefix: '/app', hosts: ['app.example.com', 'x.example.com:8443'] })
  t.same(config.upstreams[1]?.match, { pathPrefix: '/' })
})

t.test('upstreams: publicPaths', async (t) => {
  table(t, {
    'valid globs': valid(withUpstream({ publicPaths: ['/public/**', '/assets/*.js', '/x/[abc]', '/favicon.ico', '/a?c'] })),
    'relative glob': upstreamCase({ publicPaths: ['public/**'] }, ['upstreams[0].publicPaths[0]: must start with /']),
    'unbalanced bracket': upstreamCase(
      { publicPaths: ['/ok', '/a[b'] },
      ['upstreams[0].publicPaths[1]: is not a valid glob: Missing closing: "]" - use "\\\\]" to match literal characters'],
    ),
    'inverted range': upstreamCase({ publicPaths: ['/[z-a]'] }, ['upstreams[0].publicPaths[0]: is not a valid glob']),
    'whitespace': upstreamCase({ publicPaths: ['/a b'] }, ['upstreams[0].publicPaths[0]: must not contain whitespace or control characters']),
    'two stars in a segment (super-linear matching)': upstreamCase(
      { publicPaths: ['/a/*x*'] },
      ['upstreams[0].publicPaths[0]: at most one "*" per segment (use "**" for several segments)'],
    ),
    'regex syntax in a wildcard segment': upstreamCase(
      { publicPaths: ['/(a|aa)+*'] },
      ["upstreams[0].publicPaths[0]: a segment with wildcards may only use letters, digits, -._~%:=,$&', *, ?, [...] and \\-escapes"],
    ),
  })
})

t.test('upstreams: allow', async (t) => {
  const allow = (rules: Tree, message: string): Case => upstreamCase({ allow: rules }, [`upstreams[0].allow.${message}`])
  table(t, {
    'every kind': valid(
      withUpstream({
        allow: {
          emails: ['alice@example.com'],
          emailDomains: ['example.com', '.corp.example.com'],
          groups: ['/admins'],
          claims: { department: ['it'], level: [3], 'https://example.com/roles': ['admin', true] },
        },
      }),
    ),
    'not an email': allow({ emails: ['alice'] }, 'emails[0]: must be an email address'),
    'two @': allow({ emails: ['a@b@example.com'] }, 'emails[0]: must be an email address'),
    'empty emails': allow({ emails: [] }, 'emails: must not be empty'),
    'domain with @': allow({ emailDomains: ['@example.com'] }, 'emailDomains[0]: must be a domain without @'),
    'domain wildcard': allow({ emailDomains: ['*.example.com'] }, 'emailDomains[0]: must not contain wildcards; write .example.com for the subdomains of example.com'),
    'domain with a space': allow({ emailDomains: ['example .com'] }, 'emailDomains[0]: must be a domain name'),
    'empty group': allow({ groups: [''] }, 'groups[0]: must not be empty'),
    'empty claims': allow({ claims: {} }, 'claims: must not be empty'),
    'claim without values': allow({ claims: { role: [] } }, 'claims.role: must not be empty'),
    'claim value an object': allow({ claims: { role: [{ a: 1 }] } }, 'claims.role[0]: must be a string, a number or a boolean'),
    'claim with a URL name': allow({ claims: { 'https://x.example/roles': 'admin' } }, 'claims["https://x.example/roles"]: must be a list'),
    'claim with an empty name': allow({ claims: { '': ['x'] } }, 'claims[""]: must not be an empty name'),
    'unknown kind': allow({ roles: ['x'] }, 'roles: unknown key'),
    // Step-up (docs/features/step-up.md).
    'step-up keys': valid(withUpstream({ allow: { acr: ['urn:example:loa:2', 'mfa', '2'], maxAuthAgeSeconds: 900 } })),
    'step-up on a path rule': valid(withUpstream({ rules: [{ path: '/payroll', allow: { acr: ['mfa'], maxAuthAgeSeconds: 60 } }] })),
    'empty acr': allow({ acr: [] }, 'acr: must not be empty'),
    'acr with a space': allow({ acr: ['mfa otp'] }, 'acr[0]: must be an acr value: 1 to 256 printable ASCII characters without spaces, quotes or backslashes'),
    'acr with a quote': allow({ acr: ['m"fa'] }, 'acr[0]: must be an acr value: 1 to 256 printable ASCII characters without spaces, quotes or backslashes'),
    'empty acr value': allow({ acr: [''] }, 'acr[0]: must be an acr value: 1 to 256 printable ASCII characters without spaces, quotes or backslashes'),
    'acr not a list': allow({ acr: 'mfa' }, 'acr: must be a list'),
    'maxAuthAgeSeconds 0': allow({ maxAuthAgeSeconds: 0 }, 'maxAuthAgeSeconds: must be between 1 and 31536000'),
    'maxAuthAgeSeconds a string': allow({ maxAuthAgeSeconds: '5m' }, 'maxAuthAgeSeconds: must be an integer'),
    'maxAuthAgeSeconds a fraction': allow({ maxAuthAgeSeconds: 1.5 }, 'maxAuthAgeSeconds: must be an integer'),
    'bad acr on a path rule': upstreamCase({ rules: [{ path: '/payroll', allow: { acr: ['a b'] } }] }, ['upstreams[0].rules[0].allow.acr[0]: must be an acr value: 1 to 256 printable ASCII characters without spaces, quotes or backslashes']),
  })
  const config = resolve(withUpstream({ allow: { emails: ['Alice@Example.COM'], emailDomains: ['Example.COM'], groups: ['Admins'], claims: { n: [1, 'One', false] } } }))
  t.same(config.upstreams[0]?.allow, {
    emails: ['alice@example.com'],
    emailDomains: ['example.com'],
    groups: ['Admins'],
    claims: { n: [1, 'One', false] },
  })
})

t.test('upstreams: identityHeaders', async (t) => {
  const header = (headers: Tree, message: string): Case => upstreamCase({ identityHeaders: headers }, [`upstreams[0].identityHeaders.${message}`])
  const managed = (key: string, name: string): Case => header({ [key]: name }, `${key}: must not be ${name}, a header that HTTP or the gateway itself manages`)
  table(t, {
    'custom names': valid(withUpstream({ identityHeaders: { user: 'X-User', email: 'X-Email', groups: 'X-Groups', preferredUsername: 'X-Name' } })),
    'space in a name': header({ user: 'X User' }, 'user: must be a valid HTTP header name'),
    'colon in a name': header({ user: 'X-User:' }, 'user: must be a valid HTTP header name'),
    'Authorization': managed('user', 'Authorization'),
    'Cookie, in any case': managed('email', 'COOKIE'),
    'Host': managed('groups', 'Host'),
    'X-Forwarded-For with underscores': managed('email', 'x_forwarded_for'),
    'Forwarded (RFC 7239)': managed('issuer', 'Forwarded'),
    'X-Auth-Request-*': managed('groups', 'X-Auth-Request-Groups'),
    // The header policy (upstream/header-policy.ts) is asked: client-address, request-override
    // and hop-by-hop headers are refused like the rest.
    'True-Client-IP': managed('user', 'True-Client-IP'),
    'X-Original-URI': managed('email', 'X-Original-URI'),
    'X-HTTP-Method-Override': managed('groups', 'X_HTTP_Method_Override'),
    'Keep-Alive': managed('preferredUsername', 'Keep-Alive'),
    'Transfer-Encoding (hop-by-hop)': managed('acr', 'Transfer-Encoding'),
    'X-Forwarded-Prefix': managed('user', 'X-Forwarded-Prefix'),
    // Transaction Tokens (upstream/transaction-token.ts TXN_TOKEN_HEADER), in every spelling.
    'Txn-Token': header({ user: 'Txn-Token' }, 'user: must not be Txn-Token, the header the gateway sends Transaction Tokens in (upstreams[].transactionTokens)'),
    'txn_token': header({ amr: 'txn_token' }, 'amr: must not be txn_token, the header the gateway sends Transaction Tokens in (upstreams[].transactionTokens)'),
    // The X-Forwarded-* family is the gateway's: only its own identity names are usable in it.
    'another X-Forwarded-* name': header(
      { user: 'X-Forwarded-Login' },
      'user: must not be X-Forwarded-Login, one of the forwarded headers (X-Forwarded-*) the gateway manages; of those only its identity header names may be used (X-Forwarded-User, X-Forwarded-Email, X-Forwarded-Groups, X-Forwarded-Preferred-Username, X-Forwarded-Issuer, X-Forwarded-Acr, X-Forwarded-Amr, X-Forwarded-Auth-Time)',
    ),
    'an X-Forwarded-* name a framework reads as the scheme': header(
      { email: 'X-Forwarded-Protocol' },
      'email: must not be X-Forwarded-Protocol, one of the forwarded headers (X-Forwarded-*) the gateway manages; of those only its identity header names may be used (X-Forwarded-User, X-Forwarded-Email, X-Forwarded-Groups, X-Forwarded-Preferred-Username, X-Forwarded-Issuer, X-Forwarded-Acr, X-Forwarded-Amr, X-Forwarded-Auth-Time)',
    ),
    "the gateway's identity names, under another key": valid(withUpstream({ identityHeaders: { user: 'X-User', email: 'x_forwarded_user' } })),
    'the assertion header': header({ email: 'x_identity_assertion' }, 'email: x_identity_assertion is the same header as assertions.header (X-Identity-Assertion)'),
    'the configured assertion header': [
      { ...withUpstream({ identityHeaders: { groups: 'X-Signed' } }), assertions: { header: 'x-signed' } },
      ['upstreams[0].identityHeaders.groups: X-Signed is the same header as assertions.header (x-signed)'],
    ],
    'unknown key': header({ name: 'X-Name' }, 'name: unknown key'),
  })
})

t.test('log', async (t) => {
  table(t, {
    'unknown level': [{ log: { level: 'verbose' } }, ['log.level: must be one of: fatal, error, warn, info, debug, trace, silent']],
    'silent': valid({ log: { level: 'silent' } }),
  })
})

t.test('every problem is reported at once, cross-checks included', async (t) => {
  const issues = problems({
    server: { prot: 1, port: 'x' },
    provider: { issuer: 'http://idp.example.com' },
    cookies: { sameSite: 'none', secure: false },
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000' },
      { name: 'app', target: 'ftp://x', match: { pathPrefix: '/x' } },
      { name: 'app', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/y' } },
    ],
    log: { level: 'loud' },
  })
  t.strictSame(issues.toSorted(), [
    'cookies.sameSite: none requires cookies.secure: true',
    'log.level: must be one of: fatal, error, warn, info, debug, trace, silent',
    'provider.issuer: must be an https URL (http only with provider.allowInsecureHttp: true)',
    'server.port: must be an integer',
    'server.prot: unknown key',
    'upstreams[1].name: duplicate of upstreams[0].name',
    'upstreams[1].target: must be an http(s) URL',
    'upstreams[2].name: duplicate of upstreams[0].name',
  ])
})

t.test('unknown keys named __proto__ are reported, not merged', async (t) => {
  const input = JSON.parse('{"__proto__": {"polluted": true}}') as Tree
  const issues = problems(input)
  t.strictSame(issues, ['__proto__: unknown key'])
  t.equal(({} as Tree).polluted, undefined)
})

t.test('upstreams[].rules: normalized as the upstream is', async (t) => {
  const config = resolve(withUpstream({ rules: [{ path: '/Admin/', allow: { emails: ['Boss@Example.com'] } }] }))
  t.strictSame(config.upstreams[0]?.rules, [{ path: '/Admin', allow: { emails: ['boss@example.com'] } }])
})
