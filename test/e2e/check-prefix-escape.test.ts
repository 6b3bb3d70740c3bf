import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { Problem } from '#src/contract/errors'
import { EXT_AUTHZ_PATH, startEnvoy } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// A request whose raw target starts with envoy.pathPrefix (or the forward-auth path) is
// the check's and no other endpoint's. Envoy asks `<pathPrefix>` + the client's path; had the
// router normalized first, `<pathPrefix>/../redirect` would be the sign-in endpoint's 200, which
// Envoy takes for an allow and forwards `/../redirect` to the application (`/redirect` to it).
// The same with the anonymous 200s of /.well-known/oauth-protected-resource and /.well-known/jwks.json.

const APP = 'app.example.com'
const dir = mkdtempSync(join(tmpdir(), 'ogw-escape-'))
const keyFile = join(dir, 'assertion.pem')
writeFileSync(keyFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))

/** The client's path (what Envoy appends to the prefix) and the gateway endpoint it would reach once normalized. */
const ESCAPES: Array<{ client: string; lands: string }> = [
  { client: '/../redirect?performRedirect=false', lands: '/api/v1/openid/redirect?performRedirect=false' },
  { client: '/admin/secret//..//..//../redirect?performRedirect=false', lands: '/api/v1/openid/redirect?performRedirect=false' },
  { client: '/%2e%2e/redirect?performRedirect=false', lands: '/api/v1/openid/redirect?performRedirect=false' },
  { client: '/../../../../.well-known/oauth-protected-resource', lands: '/.well-known/oauth-protected-resource' },
  { client: '/admin//..//..//..//..//..//../.well-known/jwks.json', lands: '/.well-known/jwks.json' },
]

t.test('a check request never reaches another endpoint of the gateway', async (t) => {
  const stack = await startStack(t, {
    config: { redirects: { allowedHosts: [APP] }, assertions: { signingKeys: [keyFile] } },
    upstreams: [{ name: 'app', match: { pathPrefix: '/', hosts: [APP] }, rules: [{ path: '/admin', allow: { groups: ['admins'] } }] }],
  })

  t.test('HTTP ext_authz: 400 bad_request, not the 200 of the endpoint the normalized path names', async (t) => {
    for (const { client, lands } of ESCAPES) {
      const landed = await rawRequest(stack.gw, lands, { headers: { host: APP } })
      t.equal(landed.status, 200, `${lands} answers anyone 200: the escape would be an allow`)
      const res = await rawRequest(stack.gw, EXT_AUTHZ_PATH + client, { headers: { host: APP } })
      t.equal(res.status, 400, client)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
  })

  t.test('through Envoy: the client gets the 400 and the application receives nothing', async (t) => {
    const envoy = await startEnvoy({ gateway: stack.gw, upstream: stack.upstream.url, headersToBackend: ['x-forwarded-user', 'cookie'] })
    t.teardown(() => envoy.close())
    for (const { client } of ESCAPES) {
      const before = stack.upstream.requests.length
      const res = await rawRequest(envoy.url, client, { headers: { host: APP } })
      t.equal(res.status, 400, client)
      t.equal(envoy.checks.at(-1), 400)
      t.equal(stack.upstream.requests.length, before, 'nothing forwarded')
    }
  })

  t.test('envoy.pathPrefix moved: the prefix matched is the configured one', async (t) => {
    const moved = await startStack(t, {
      config: { redirects: { allowedHosts: [APP] }, envoy: { pathPrefix: '/api/v1/openid/envoy' } },
      upstreams: [{ name: 'app', match: { pathPrefix: '/', hosts: [APP] } }],
    })
    const res = await rawRequest(moved.gw, '/api/v1/openid/envoy/../redirect?performRedirect=false', { headers: { host: APP } })
    t.equal(res.status, 400)
    t.equal((await rawRequest(moved.gw, '/api/v1/openid/envoy/page', { headers: { host: APP } })).status, 401, 'a check in normal form is decided')
  })

  t.test('the forward-auth path: a target below or beside it out of normal form is 400, never another endpoint', async (t) => {
    const nginx = { 'x-original-method': 'GET', 'x-original-url': `https://${APP}/page` }
    for (const target of ['/api/v1/openid/auth/../redirect?performRedirect=false', '/api/v1/openid/auth//../redirect', '/api/v1/openid/auth/%2e%2e/redirect']) {
      const res = await rawRequest(stack.gw, target, { headers: nginx })
      t.equal(res.status, 400, target)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
    t.equal((await rawRequest(stack.gw, '/api/v1/openid/auth?x=1', { headers: nginx })).status, 401, 'the check itself, with a query')
    t.equal(
      (await rawRequest(stack.gw, '/api/v1/openid/authx/../redirect?performRedirect=false', { headers: { host: APP } })).status,
      200,
      'another path is routed as any other',
    )
  })
})
