// envoy.pathPrefix, the Envoy ext_authz HTTP check's path (config/cross-key/envoy.ts): below the
// gateway's paths and under none of its endpoints; read under its former name
// forwardAuth.extAuthzPath with a warning naming the new one; the two together refused.

import t from 'tap'
import { resolveWithWarnings } from '#src/config/load'
import { merge, minimal, problems, resolve, type Tree } from '../../fixtures/config/base.ts'

const DEPRECATED = 'forwardAuth.extAuthzPath: is deprecated: write envoy.pathPrefix instead (the same value under its new name)'

const loaded = (patch: Tree) => resolveWithWarnings(merge(minimal(), patch), {})

t.test('unset: /api/v1/openid/ext-authz, without a warning', async (t) => {
  const { config, warnings } = loaded({})
  t.equal(config.envoy.pathPrefix, '/api/v1/openid/ext-authz')
  t.strictSame(warnings, [])
  t.notOk('extAuthzPath' in config.forwardAuth, 'the normalized configuration has no former name')
})

t.test('envoy.pathPrefix moves the check, without a warning', async (t) => {
  const { config, warnings } = loaded({ envoy: { pathPrefix: '/api/v1/openid/envoy' } })
  t.equal(config.envoy.pathPrefix, '/api/v1/openid/envoy')
  t.strictSame(warnings, [])
})

t.test('forwardAuth.extAuthzPath, its former name, still moves it, with a warning naming envoy.pathPrefix', async (t) => {
  const { config, warnings } = loaded({ forwardAuth: { extAuthzPath: '/api/v1/openid/envoy', cache: { enabled: true } } })
  t.equal(config.envoy.pathPrefix, '/api/v1/openid/envoy')
  t.strictSame(config.forwardAuth, { cache: { enabled: true, ttlSeconds: 5, maxEntries: 10000 } }, 'the rest of forwardAuth as written')
  t.strictSame(warnings, [DEPRECATED])
})

t.test('both names at once are refused, naming both, even with one value', async (t) => {
  const both = 'forwardAuth.extAuthzPath: cannot be given with envoy.pathPrefix, its new name: remove forwardAuth.extAuthzPath'
  t.strictSame(problems({ forwardAuth: { extAuthzPath: '/api/v1/openid/a' }, envoy: { pathPrefix: '/api/v1/openid/b' } }), [both])
  t.strictSame(problems({ forwardAuth: { extAuthzPath: '/api/v1/openid/a' }, envoy: { pathPrefix: '/api/v1/openid/a' } }), [both])
})

t.test('refused values, under either name, naming the key written', async (t) => {
  const outside = 'must be a path below /api/v1/openid/ of letters, digits and . _ ~ -, without a trailing slash'
  t.strictSame(problems({ envoy: { pathPrefix: '/ext-authz' } }), [`envoy.pathPrefix: ${outside}`])
  t.strictSame(problems({ envoy: { pathPrefix: '/api/v1/openid/ext-authz/' } }), [`envoy.pathPrefix: ${outside}`])
  t.strictSame(problems({ envoy: { path: '/api/v1/openid/x' } }), ['envoy.path: unknown key'])
  t.strictSame(problems({ forwardAuth: { extAuthzPath: '/ext-authz' } }), [`forwardAuth.extAuthzPath: ${outside}`])
  // Below an endpoint's segment it would collide with the endpoint (the router refuses a second /callback/*).
  t.strictSame(problems({ envoy: { pathPrefix: '/api/v1/openid/callback/envoy' } }), ["envoy.pathPrefix: must not be below the gateway's endpoint /api/v1/openid/callback"])
  t.strictSame(problems({ forwardAuth: { extAuthzPath: '/api/v1/openid/callback/envoy' } }), [
    "forwardAuth.extAuthzPath: must not be below the gateway's endpoint /api/v1/openid/callback",
  ])
  t.equal(resolve({ envoy: { pathPrefix: '/api/v1/openid/callbacks' } }).envoy.pathPrefix, '/api/v1/openid/callbacks', 'a segment that only starts like an endpoint is not under it')
})
