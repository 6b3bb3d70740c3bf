// config/cross-key-rules.ts runs every section's rules (config/cross-key/) over the file, in one
// order, and lists the keys still read under a former name.

import t from 'tap'
import { crossCheck, deprecations } from '#src/config/cross-key-rules'

t.test('every section is run, in the order of the sections', async (t) => {
  const data = {
    server: { publicUrl: 'https://app.example.com', port: 8080, managementPort: 8080 },
    provider: {},
    providers: [],
    cookies: { sameSite: 'none', secure: false },
    session: { store: 'redis' },
    upstreams: [
      { name: 'app', identityAssertion: true },
      { name: 'APP', match: { pathPrefix: '/b' } },
    ],
    forwardAuth: { extAuthzPath: '/api/v1/openid/a' },
    envoy: { pathPrefix: '/api/v1/openid/b' },
  }
  t.strictSame(
    crossCheck(data, []).map((issue) => `${issue.path.join('.')}: ${issue.message}`),
    [
      'providers: cannot be given with provider: use providers alone (name the former provider in it)',
      'cookies.sameSite: none requires cookies.secure: true',
      'server.managementPort: must differ from server.port (0 turns the management listener off)',
      'forwardAuth.extAuthzPath: cannot be given with envoy.pathPrefix, its new name: remove forwardAuth.extAuthzPath',
      'session.store: redis requires session.redisUrl, session.redis.sentinels or session.redis.cluster',
      'upstreams.1.name: duplicate of upstreams[0].name',
      'upstreams.0.identityAssertion: requires assertions.signingKeys',
    ],
  )
})

t.test('a key with a known issue is not read by any rule', async (t) => {
  const data = { provider: {}, cookies: { sameSite: 'none', secure: false } }
  t.strictSame(crossCheck(data, []), [{ path: ['cookies', 'sameSite'], message: 'none requires cookies.secure: true' }], 'read when no issue touches it')
  t.strictSame(crossCheck(data, [{ path: ['cookies', 'secure'], message: 'must be true or false' }]), [])
  t.strictSame(crossCheck(data, [{ path: ['cookies'], message: 'must be a mapping' }]), [], 'nor a key under one')
})

t.test('deprecations: each former name the file gives, saying what to write instead', async (t) => {
  t.strictSame(deprecations({}), [])
  t.strictSame(deprecations({ forwardAuth: { extAuthzPath: '/api/v1/openid/x' } }), [
    { path: ['forwardAuth', 'extAuthzPath'], message: 'is deprecated: write envoy.pathPrefix instead (the same value under its new name)' },
  ])
})
