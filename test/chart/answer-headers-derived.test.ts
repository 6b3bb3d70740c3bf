import type { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress'
import type { Middleware } from '@kubernetes-models/traefik/traefik.io/v1alpha1/Middleware'
import t from 'tap'
import { type Values, render, template } from '../fixtures/chart.ts'
import { type K8sObject, gatewayConfig } from '../fixtures/k8s-objects.ts'
import { answerHeaders, lower, upstreamHeaders } from '../fixtures/k8s-checks.ts'

// The chart's header lists name every header the gateway may set for the application, derived
// from the mounted configuration: an ingress (Traefik authResponseHeaders, ingress-nginx
// auth-response-headers) removes the client's copy only of a header it copies, and Envoy's
// allowed_upstream_headers copies only what it lists. A claim header (upstreams[].claimHeaders)
// missing there is one a client forges past the edge; the legacy credentials (forwardBasicAuth,
// forwardIdToken: Authorization; forwardAccessTokenHeader: the access token headers) likewise.

const ENV = { APP_BASIC_PASSWORD: 'app-password' }
const CLAIM_HEADERS = ['X-Tenant', 'X-Roles']
const values: Values = {
  config: {
    upstreams: [
      {
        name: 'app',
        target: 'http://app.demo.svc:80',
        claimHeaders: { 'X-Tenant': 'tenant', 'X-Roles': 'realm_access.roles' },
        forwardBasicAuth: { password: '${APP_BASIC_PASSWORD}' },
        forwardAccessTokenHeader: true,
      },
      {
        name: 'reports',
        target: 'http://reports.demo.svc:80',
        match: { pathPrefix: '/reports' },
        claimHeaders: { 'x-tenant': 'tenant' },
        forwardIdToken: true,
      },
    ],
  },
}

function traefikList(r: ReturnType<typeof render>): string[] {
  return lower(r.of<Middleware & K8sObject>('Middleware')[0]?.spec?.forwardAuth?.authResponseHeaders)
}

function nginxList(r: ReturnType<typeof render>): string[] {
  const annotation = r
    .of<Ingress>('Ingress')
    .map((i) => i.metadata?.annotations?.['nginx.ingress.kubernetes.io/auth-response-headers'])
    .find((a) => a !== undefined)
  return lower(annotation?.split(','))
}

t.test('forward-auth: every claim header and every legacy credential header among the answer headers', async (t) => {
  for (const [what, example, list] of [
    ['Traefik authResponseHeaders', 'quickstart-traefik.yaml', traefikList],
    ['ingress-nginx auth-response-headers', 'ingress-nginx.yaml', nginxList],
  ] as const) {
    const r = render([example], values)
    const copied = list(r)
    for (const name of CLAIM_HEADERS) t.ok(copied.includes(name.toLowerCase()), `${what}: the claim header ${name}`)
    t.ok(copied.includes('authorization'), `${what}: Authorization (forwardBasicAuth, forwardIdToken)`)
    t.ok(copied.includes('x-auth-request-access-token'), `${what}: X-Auth-Request-Access-Token (forwardAccessTokenHeader)`)
    t.equal(copied.filter((n) => n === 'x-tenant').length, 1, `${what}: a name two upstreams give in two cases, once`)
    t.same(copied, answerHeaders(gatewayConfig(r, ENV).config), `${what}: exactly what the gateway's answer may carry, and the overrides`)
  }
})

t.test('Envoy: allowed_upstream_headers lists the claim headers and the legacy credential headers', async (t) => {
  const r = render(['quickstart-envoy-gateway.yaml'], values)
  type Policy = K8sObject & { spec: { extAuth?: { http?: { headersToBackend?: string[] } } } }
  const listed = lower(r.of<Policy>('SecurityPolicy')[0]?.spec.extAuth?.http?.headersToBackend)
  for (const name of [...CLAIM_HEADERS.map((n) => n.toLowerCase()), 'authorization', 'x-forwarded-access-token', 'x-auth-request-access-token']) {
    t.ok(listed.includes(name), name)
  }
  t.same(listed, upstreamHeaders(gatewayConfig(r, ENV).config), 'exactly what the check answers')
})

t.test('without them, the lists are what they were', async (t) => {
  const plain = render(['quickstart-traefik.yaml'])
  const copied = traefikList(plain)
  t.notOk(copied.includes('authorization'))
  t.notOk(copied.includes('x-auth-request-access-token'))
  t.same(copied, answerHeaders(gatewayConfig(plain).config))
})

t.test('a Basic password written in the values is refused, naming the key', async (t) => {
  const literal = template(['quickstart-traefik.yaml'], {
    config: { upstreams: [{ name: 'app', target: 'http://app.demo.svc:80', forwardBasicAuth: { password: 'hunter2-literal' } }] },
  })
  t.not(literal.status, 0)
  t.match(literal.stderr, /config\.upstreams\[0\]\.forwardBasicAuth\.password is written in the values and would be in the ConfigMap/)
  t.notMatch(literal.stderr, /hunter2-literal/, 'never printing it')
  const fromFile = template(['quickstart-traefik.yaml'], {
    config: { upstreams: [{ name: 'app', target: 'http://app.demo.svc:80', forwardBasicAuth: { passwordFile: '/etc/openid-gateway-secrets/app' } }] },
  })
  t.equal(fromFile.status, 0, fromFile.stderr)
})

t.test('Envoy: the check is sent origin and access-control-request-method when an upstream lets preflights through', async (t) => {
  type Policy = K8sObject & { spec: { extAuth?: { headersToExtAuth?: string[] } } }
  const toCheck = (r: ReturnType<typeof render>): string[] => lower(r.of<Policy>('SecurityPolicy')[0]?.spec.extAuth?.headersToExtAuth)
  const cors = render(['quickstart-envoy-gateway.yaml'], { config: { upstreams: [{ name: 'app', target: 'http://app.demo.svc:80', allowPreflight: true }] } })
  t.ok(toCheck(cors).includes('origin'), 'origin')
  t.ok(toCheck(cors).includes('access-control-request-method'), 'access-control-request-method')
  const plain = toCheck(render(['quickstart-envoy-gateway.yaml']))
  t.notOk(plain.includes('origin'), 'not without allowPreflight')
  t.ok(plain.includes('cookie'))
})
