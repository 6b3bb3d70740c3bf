import t from 'tap'
import type { GatewayConfig } from '#src/options/types'
import { DEFAULT_REDACTED_QUERY_PARAMS } from '#src/options/schema'
import { CLIENT_SECRET, COOKIE_SECRET, DEFAULT_IDENTITY_HEADER_NAMES, minimal, resolve } from '../fixtures/config/base.ts'
import { resolveConfig } from '#src/config/load'

const EXPECTED: GatewayConfig = {
  server: {
    host: '0.0.0.0',
    port: 8080,
    publicUrl: 'https://app.example.com',
    trustedProxies: [],
    managementHost: '127.0.0.1', managementPort: 9091, requestTimeoutMs: 30000,
    shutdownTimeoutMs: 10000,
    workers: 1,
    watchConfig: false,
    extAuthzGrpcPort: 0,
  },
  providers: [{
    name: 'default',
    issuer: 'https://idp.example.com/realms/main',
    clientId: 'gateway',
    clientSecret: CLIENT_SECRET,
    clientAuthMethod: 'client_secret_basic',
    pushedAuthorizationRequests: 'auto',
    responseMode: 'query',
    dpop: false,
    profile: 'oidc',
    scopes: ['openid', 'profile', 'email'],
    offlineAccess: false,
    audiences: ['gateway'],
    bearer: {
      algorithms: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'],
      introspection: false,
      requireAtJwt: false,
    },
    timeoutMs: 10000,
    notReadyPageAfterMs: 30000,
    clockToleranceSeconds: 30,
    allowInsecureHttp: false,
  }],
  cookies: { name: 'ogw', secrets: [COOKIE_SECRET], secure: true, sameSite: 'lax', credentialsPath: '/' },
  session: { store: 'cookie', maxAgeSeconds: 28800, maxSessionsPerUser: 10, memory: { maxSessions: 10000 }, redis: { keyPrefix: 'openid-gateway:', timeoutMs: 2000, tls: false, waitTimeoutMs: 500 } },
  redirects: { allowedHosts: [] },
  rateLimit: { signIn: { max: 6000, windowSeconds: 60 } },
  upstreams: [
    {
      name: 'app',
      match: { pathPrefix: '/' },
      target: 'http://127.0.0.1:3000',
      auth: 'required',
      publicPaths: [],
      allow: {},
      rules: [],
      forwardAccessToken: false,
      forwardIdToken: false,
      forwardAccessTokenHeader: false,
      allowPreflight: false,
      passHostHeader: true,
      websocket: false,
      timeoutMs: 30000,
      connectTimeoutMs: 5000,
      identityHeaders: DEFAULT_IDENTITY_HEADER_NAMES,
      identityAssertion: false,
      providers: ['default'],
    },
  ],
  assertions: { header: 'X-Identity-Assertion', ttlSeconds: 60 },
  websocket: { maxLifetimeSeconds: 86400 },
  forwardAuth: { cache: { enabled: false, ttlSeconds: 5, maxEntries: 10000 } },
  envoy: { pathPrefix: '/api/v1/openid/ext-authz' },
  log: { level: 'info', redactQueryParams: ['password', 'passwd', 'secret', 'token', 'api_key', 'apikey', 'key', 'jwt', 'session', 'auth', 'code', 'state'] },
  telemetry: {},
}

t.test('a minimal configuration gets every default', async (t) => {
  t.strictSame(resolve(), EXPECTED)
})

t.test('optional keys without a default stay absent', async (t) => {
  const config = resolve()
  t.notOk('postLogoutRedirectUri' in config.providers[0]!)
  t.notOk('domain' in config.cookies)
  t.notOk('redisUrl' in config.session)
  t.notOk('hosts' in (config.upstreams[0]?.match ?? {}))
})

t.test('audiences default to [clientId] when absent or empty, and are kept when given', async (t) => {
  t.same(resolve({ provider: { clientId: 'my-client' } }).providers[0]!.audiences, ['my-client'])
  t.same(resolve({ provider: { clientId: 'my-client', audiences: [] } }).providers[0]!.audiences, ['my-client'])
  t.same(resolve({ provider: { audiences: ['api', 'other'] } }).providers[0]!.audiences, ['api', 'other'])
})

t.test('a key given as null (empty in YAML) takes its default', async (t) => {
  const config = resolve({ server: { port: null }, session: null, log: null, provider: { postLogoutRedirectUri: null } })
  t.equal(config.server.port, 8080)
  t.same(config.session, { store: 'cookie', maxAgeSeconds: 28800, maxSessionsPerUser: 10, memory: { maxSessions: 10000 }, redis: { keyPrefix: 'openid-gateway:', timeoutMs: 2000, tls: false, waitTimeoutMs: 500 } })
  t.same(config.log, { level: 'info', redactQueryParams: [...DEFAULT_REDACTED_QUERY_PARAMS] })
  t.notOk('postLogoutRedirectUri' in config.providers[0]!)
})

t.test('partial identityHeaders keep the other defaults', async (t) => {
  const config = resolve({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', identityHeaders: { user: 'X-User' } }] })
  t.same(config.upstreams[0]?.identityHeaders, { ...DEFAULT_IDENTITY_HEADER_NAMES, user: 'X-User' })
})

t.test('defaults are fresh values: two loads share no arrays or objects', async (t) => {
  const a = resolve()
  const b = resolve()
  a.server.trustedProxies.push('10.0.0.0/8')
  a.upstreams[0]?.publicPaths.push('/x')
  t.same(b.server.trustedProxies, [])
  t.same(b.upstreams[0]?.publicPaths, [])
})

t.test('the input object is not modified', async (t) => {
  const input = minimal()
  const before = JSON.stringify(input)
  resolveConfig(input, {})
  t.equal(JSON.stringify(input), before)
})

t.test('server.managementHost: 127.0.0.1, or OPENID_GATEWAY_MANAGEMENT_HOST (the container image: 0.0.0.0), or the file', async (t) => {
  const host = (server: Record<string, string>, env: Record<string, string> = {}): string => resolve({ server }, env).server.managementHost
  t.equal(host({}), '127.0.0.1', '/metrics and /config are not served to the network by default')
  t.equal(host({}, { OPENID_GATEWAY_MANAGEMENT_HOST: '0.0.0.0' }), '0.0.0.0', "the image's environment")
  t.equal(host({ managementHost: '10.0.0.5' }, { OPENID_GATEWAY_MANAGEMENT_HOST: '0.0.0.0' }), '10.0.0.5', 'the file wins')
})
