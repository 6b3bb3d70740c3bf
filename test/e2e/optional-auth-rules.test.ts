import t from 'tap'
import { checkRequestFor, EXT_AUTHZ_PATH, sendCheck } from '../fixtures/envoy.ts'
import { rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// `auth: optional` and an `allow` that names anything: the path needs a sign-in (401, or a 302
// to sign in for a page load), as on `auth: required`, in the proxy and in the check dialects
// (one decision, UpstreamAccess.decide). Without it, rules and step-up refused signed-in users
// and passed anyone who came without a cookie. A path whose `allow` names nothing stays optional.

const JSON_ACCEPT = { accept: 'application/json' }
const NAVIGATION = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }
const AUTH = '/api/v1/openid/auth'

t.test('a path whose allow names anything needs a sign-in on an auth: optional upstream', async (t) => {
  const stack = await startStack(t, {
    provider: { acrValues: ['pwd', 'mfa'] },
    config: { session: { store: 'memory' }, envoy: { pathPrefix: EXT_AUTHZ_PATH } },
    upstreams: [
      {
        name: 'app',
        auth: 'optional',
        rules: [
          { path: '/admin', allow: { groups: ['admins'] } },
          { path: '/payroll', allow: { acr: ['mfa'] } },
          { path: '/recent', allow: { maxAuthAgeSeconds: 600 } },
          { path: '/staff', allow: { claims: { tenant: ['acme'] } } },
          { path: '/open', allow: {} },
        ],
      },
      { name: 'team', match: { pathPrefix: '/team' }, auth: 'optional', allow: { emails: ['alice@example.com'] } },
    ],
  })
  const host = new URL(stack.gw).host
  const guarded = ['/admin/secret', '/payroll/x', '/recent/x', '/staff/x', '/team/x']

  for (const path of guarded) {
    const api = await rawRequest(stack.gw, path, { headers: JSON_ACCEPT })
    t.equal(api.status, 401, `proxy ${path}: 401 without a sign-in`)
    t.equal(api.json<{ code: string }>().code, 'unauthenticated')
    const page = await rawRequest(stack.gw, path, { headers: NAVIGATION })
    t.equal(page.status, 302, `proxy ${path}: a page load is sent to sign in`)
    t.match(page.headers.location, `/api/v1/openid/redirect?redirectAfter=${encodeURIComponent(path)}`)
    const traefik = await rawRequest(stack.gw, AUTH, {
      headers: { ...JSON_ACCEPT, 'x-forwarded-method': 'GET', 'x-forwarded-host': host, 'x-forwarded-uri': path, 'x-forwarded-proto': 'http' },
    })
    t.equal(traefik.status, 401, `forward-auth ${path}: 401`)
    const envoy = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path, headers: { host, ...JSON_ACCEPT } }))
    t.equal(envoy.status, 401, `ext_authz ${path}: 401`)
  }
  t.equal(stack.upstream.requests.filter((r) => guarded.some((p) => r.url.startsWith(p))).length, 0, 'the upstream saw none of them')

  // Where the allow names nothing, optional still means optional.
  for (const path of ['/page', '/open/x']) {
    t.equal((await rawRequest(stack.gw, path, { headers: JSON_ACCEPT })).status, 200, `proxy ${path}: anonymous passes`)
    const envoy = await sendCheck(stack.gw, checkRequestFor({ method: 'GET', path, headers: { host, ...JSON_ACCEPT } }))
    t.equal(envoy.status, 200, `ext_authz ${path}: anonymous passes`)
  }

  // Signed in, the rules decide as before.
  const bob = await stack.signedIn('bob')
  t.equal((await bob.fetch(`${stack.gw}/admin/secret`, { headers: JSON_ACCEPT })).status, 403, 'bob is not in admins')
  t.equal((await bob.fetch(`${stack.gw}/team/x`, { headers: JSON_ACCEPT })).status, 403, 'bob is not alice')
  const alice = await stack.signedIn('alice')
  t.equal((await alice.fetch(`${stack.gw}/admin/secret`, { headers: JSON_ACCEPT })).status, 200, 'alice is')
  t.equal((await alice.fetch(`${stack.gw}/team/x`, { headers: JSON_ACCEPT })).status, 200)
})
