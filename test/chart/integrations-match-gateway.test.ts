import type { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress'
import type { Middleware } from '@kubernetes-models/traefik/traefik.io/v1alpha1/Middleware'
import { generateKeyPairSync } from 'node:crypto'
import t, { type Test } from 'tap'
import YAML from 'yaml'
import { SIGN_IN_PATH } from '#src/contract/endpoints'
import type { GatewayConfig } from '#src/options/types'
import { sessionCookieName } from '#src/session/cookies'
import { recipe } from '../fixtures/markdown.ts'
import { sessionCookieNames } from '../fixtures/traefik.ts'
import { NAMESPACE, RELEASE, type Values, notes, render } from '../fixtures/chart.ts'
import { type K8sObject, type Rendered, gatewayConfig, servicePort } from '../fixtures/k8s-objects.ts'
import {
  ENVOY_PATH_PREFIX_DEFAULT,
  type ExtensionProvider,
  HTTP_PORT,
  TO_CHECK,
  answerHeaders,
  lower,
  missing,
  upstreamHeaders,
} from '../fixtures/k8s-checks.ts'
import { fixtureSchema, routeFilters, schemaValidator } from '../fixtures/k8s-validators.ts'

// The chart's companion objects agree with the gateway configuration it mounts and with the code:
// each header list carries what docs/deploy/kubernetes.md ("Headers: what each list must
// contain") says, computed here from src/ (identity headers, forward-auth answer, request
// overrides); the check path is envoy.pathPrefix; the gRPC port is exposed as h2c; every
// check fails closed with a timeout; the sign-in endpoints are never behind the check. The header
// lists are derived in the templates from the configuration, so an example with custom identity
// headers and forwardAccessToken (gateway-api.yaml) proves the derivation, not a copy.

type BackendRef = { name: string; namespace?: string; port?: number }
type Route = K8sObject & {
  spec: {
    hostnames?: string[]
    parentRefs?: unknown[]
    rules?: { matches?: { path?: { type?: string; value?: string } }[]; backendRefs?: BackendRef[]; filters?: unknown[] }[]
  }
}

function includesAll(t: Test, list: readonly string[] | undefined, expected: readonly string[], what: string) {
  t.same(missing(list, expected), [], `${what} lists ${expected.join(', ')}`)
}

/** The route sending /api/v1/openid on the public host to the gateway, with no filter. */
function signInRoute(t: Test, r: Rendered, config: GatewayConfig): Route | undefined {
  const route = r
    .of<Route>('HTTPRoute')
    .find((x) => (x.spec.rules ?? []).some((rule) => rule.matches?.some((m) => m.path?.type === 'PathPrefix' && m.path.value === SIGN_IN_PATH)))
  t.ok(route, `an HTTPRoute sends ${SIGN_IN_PATH} to the gateway`)
  const backend = route?.spec.rules?.flatMap((x) => x.backendRefs ?? []).find((b) => b.name === RELEASE)
  t.equal(servicePort(r, backend?.port).containerPort, config.server.port, 'on server.port')
  t.same(route?.spec.hostnames, [new URL(config.server.publicUrl).hostname], 'on the host of server.publicUrl')
  t.same(routeFilters(route), [], 'with no filter')
  t.equal(route?.metadata.namespace, NAMESPACE, "in the gateway's namespace (its backendRef needs no grant)")
  return route
}

function grpcExposed(t: Test, r: Rendered, config: GatewayConfig, port: number | undefined) {
  t.ok(config.server.extAuthzGrpcPort > 0, 'server.extAuthzGrpcPort is set')
  t.equal(port, config.server.extAuthzGrpcPort, 'the gRPC backend port is server.extAuthzGrpcPort')
  const { port: service, containerPort } = servicePort(r, port)
  t.equal(containerPort, config.server.extAuthzGrpcPort, 'the Service port reaches the gRPC listener')
  t.equal(service?.appProtocol, 'kubernetes.io/h2c', 'appProtocol kubernetes.io/h2c (cleartext HTTP/2)')
}

/** A ReferenceGrant in the gateway's namespace lets `kind` of `from` name the gateway Service. */
function granted(r: Rendered, group: string, kind: string, from: string): boolean {
  type Grant = K8sObject & { spec: { from: { group: string; kind: string; namespace: string }[]; to: { group: string; kind: string; name?: string }[] } }
  return r
    .of<Grant>('ReferenceGrant')
    .some(
      (g) =>
        g.metadata.namespace === NAMESPACE &&
        g.spec.from.some((f) => f.group === group && f.kind === kind && f.namespace === from) &&
        g.spec.to.some((x) => x.group === '' && x.kind === 'Service' && (x.name ?? RELEASE) === RELEASE),
    )
}

type ExtAuth = {
  http?: { backendRefs?: BackendRef[]; path?: string; headersToBackend?: string[] }
  grpc?: { backendRefs?: BackendRef[] }
  headersToExtAuth?: string[]
  failOpen?: boolean
  timeout?: string
}
type SecurityPolicy = K8sObject & { spec: { extAuth?: ExtAuth; targetRefs?: { kind: string; name: string }[] } }

function securityPolicy(t: Test, r: Rendered, config: GatewayConfig): ExtAuth {
  const policies = r.of<SecurityPolicy>('SecurityPolicy')
  t.equal(policies.length, 1, 'one SecurityPolicy')
  const policy = policies[0]
  const extAuth = policy?.spec.extAuth ?? {}
  includesAll(t, extAuth.headersToExtAuth, [...TO_CHECK, 'authorization'], 'headersToExtAuth')
  t.equal(extAuth.failOpen, false, 'fails closed')
  t.match(extAuth.timeout, /^\d+(ms|s)$/, 'an explicit timeout')
  const signIn = signInRoute(t, r, config)
  const targets = policy?.spec.targetRefs ?? []
  t.ok(targets.length > 0 && targets.every((x) => x.kind === 'HTTPRoute'), 'targets HTTPRoutes')
  t.notOk(
    targets.some((x) => x.name === signIn?.metadata.name),
    `the route for ${SIGN_IN_PATH} has no policy`,
  )
  t.ok(
    targets.every((x) => r.of<Route>('HTTPRoute', x.name).some((route) => route.metadata.namespace === policy?.metadata.namespace)),
    "every target is a route of the policy's namespace",
  )
  const backend = (extAuth.http ?? extAuth.grpc)?.backendRefs?.[0]
  t.equal(backend?.name, RELEASE, 'to the gateway Service')
  const cross = policy?.metadata.namespace !== NAMESPACE
  t.equal(backend?.namespace, cross ? NAMESPACE : undefined, 'naming its namespace when the policy is elsewhere')
  if (cross) t.ok(granted(r, 'gateway.envoyproxy.io', 'SecurityPolicy', policy?.metadata.namespace ?? ''), 'and a ReferenceGrant allows it')
  return extAuth
}

t.test('envoy-gateway (HTTP): SecurityPolicy extAuth.http', async (t) => {
  const r = render(['quickstart-envoy-gateway.yaml'])
  const { config } = gatewayConfig(r)
  const extAuth = securityPolicy(t, r, config)
  t.equal(extAuth.grpc, undefined, 'no grpc')
  t.equal(extAuth.http?.path, config.envoy.pathPrefix, 'extAuth.http.path is envoy.pathPrefix')
  t.equal(extAuth.http?.path, ENVOY_PATH_PREFIX_DEFAULT, 'its default')
  t.equal(servicePort(r, extAuth.http?.backendRefs?.[0]?.port).containerPort, config.server.port, 'on server.port')
  t.same(lower(extAuth.http?.headersToBackend), upstreamHeaders(config), "headersToBackend: the upstreams' identity headers and cookie")
  t.not(config.session.store, 'cookie', 'sessions on the gateway: a refreshed cookie would never reach the browser')
  t.equal(r.of('ReferenceGrant').length, 0, 'one namespace: no ReferenceGrant')
})

t.test('envoy.pathPrefix, or its deprecated former name forwardAuth.extAuthzPath, moves the check path of every Envoy integration', async (t) => {
  const moved = '/api/v1/openid/envoy'
  for (const config of [{ envoy: { pathPrefix: moved } }, { forwardAuth: { extAuthzPath: moved } }]) {
    const name = Object.keys(config)[0] ?? ''
    const envoy = render(['quickstart-envoy-gateway.yaml'], { config })
    t.equal(gatewayConfig(envoy).config.envoy.pathPrefix, moved, `${name}: the mounted configuration's envoy.pathPrefix`)
    const policy = envoy.of<K8sObject & { spec: { extAuth?: { http?: { path?: string } } } }>('SecurityPolicy')[0]
    t.equal(policy?.spec.extAuth?.http?.path, moved, `${name}: the SecurityPolicy's extAuth.http.path`)
    const filter = routeFilters(
      render(['gateway-api.yaml'], { config })
        .of<Route>('HTTPRoute')
        .find((route) => routeFilters(route).some((f) => f.type === 'ExternalAuth')),
    ).find((f) => f.type === 'ExternalAuth')?.externalAuth as ExternalAuthFilter | undefined
    t.equal(filter?.http?.path, moved, `${name}: the ExternalAuth filter's http.path`)
    const text = notes(['quickstart-istio.yaml'], { config })
    const mesh = YAML.parse(text.slice(text.indexOf('meshConfig:'))) as { meshConfig: { extensionProviders: ExtensionProvider[] } }
    const http = mesh.meshConfig.extensionProviders.find((p) => p.envoyExtAuthzHttp !== undefined)?.envoyExtAuthzHttp
    t.equal(http?.pathPrefix, moved, `${name}: Istio's envoyExtAuthzHttp.pathPrefix`)
  }
})

t.test('envoy-gateway-grpc: SecurityPolicy extAuth.grpc to server.extAuthzGrpcPort, the application elsewhere', async (t) => {
  const r = render(['envoy-gateway-grpc.yaml'])
  const { config } = gatewayConfig(r)
  const extAuth = securityPolicy(t, r, config)
  t.equal(extAuth.http, undefined, 'no http')
  grpcExposed(t, r, config, extAuth.grpc?.backendRefs?.[0]?.port)
})

type ExternalAuthFilter = { protocol: string; backendRef: BackendRef; http?: { path?: string; allowedHeaders?: string[]; allowedResponseHeaders?: string[] } }

t.test('gateway-api: the ExternalAuth filter, its lists derived from custom identity headers and forwardAccessToken', async (t) => {
  const r = render(['gateway-api.yaml'])
  const { config } = gatewayConfig(r)
  signInRoute(t, r, config)
  const routes = r.of<Route>('HTTPRoute').filter((route) => routeFilters(route).some((f) => f.type === 'ExternalAuth'))
  t.equal(routes.length, 1, 'one route with the filter')
  const filter = routeFilters(routes[0]).find((f) => f.type === 'ExternalAuth')?.externalAuth as ExternalAuthFilter | undefined
  t.equal(filter?.protocol, 'HTTP')
  t.equal(filter?.http?.path, config.envoy.pathPrefix, 'http.path is envoy.pathPrefix')
  t.equal(filter?.backendRef.name, RELEASE, 'to the gateway Service')
  t.equal(filter?.backendRef.namespace, NAMESPACE, 'in its namespace')
  t.ok(granted(r, 'gateway.networking.k8s.io', 'HTTPRoute', routes[0]?.metadata.namespace ?? ''), 'which a ReferenceGrant allows')
  t.equal(servicePort(r, filter?.backendRef.port).containerPort, config.server.port, 'on server.port')
  includesAll(t, filter?.http?.allowedHeaders, TO_CHECK, 'http.allowedHeaders')
  const expected = upstreamHeaders(config)
  t.ok(expected.includes('x-remote-user') && expected.includes('authorization'), "the example's upstream sets X-Remote-User and the access token")
  t.same(
    lower(filter?.http?.allowedResponseHeaders),
    expected,
    'http.allowedResponseHeaders: exactly what the check answers (empty would copy every answer header)',
  )
})

type AuthorizationPolicy = K8sObject & {
  spec: { action?: string; provider?: { name?: string }; selector?: unknown; rules?: { to?: { operation?: { paths?: string[]; notPaths?: string[] } }[] }[] }
}

t.test('istio: a CUSTOM AuthorizationPolicy, and NOTES.txt prints the extension providers it names', async (t) => {
  const r = render(['quickstart-istio.yaml'])
  const { config } = gatewayConfig(r)
  const text = notes(['quickstart-istio.yaml'])
  const snippet = text.slice(text.indexOf('meshConfig:'))
  const mesh = YAML.parse(snippet) as { meshConfig: { extensionProviders: ExtensionProvider[]; pathNormalization?: { normalization?: string } } }
  t.ok(
    ['MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'].includes(mesh.meshConfig.pathNormalization?.normalization ?? 'BASE'),
    'pathNormalization merges slashes after resolving dot segments',
  )
  const validate = schemaValidator(fixtureSchema('istio-meshconfig-extensionprovider.schema.yaml'))
  const providers = mesh.meshConfig.extensionProviders
  t.equal(providers.length, 2, 'an HTTP and a gRPC provider')
  for (const provider of providers) {
    t.ok(validate(provider), `${provider.name} validates: ${JSON.stringify(validate.errors ?? [])}`)
    const service = provider.envoyExtAuthzHttp ?? provider.envoyExtAuthzGrpc
    t.match(service?.timeout, /^\d+(ms|s)$/, `${provider.name}: an explicit timeout (Istio's default is 600 s)`)
    t.equal(service?.failOpen, false, `${provider.name}: fails closed`)
    t.equal(service?.service, `${RELEASE}.${NAMESPACE}.svc.cluster.local`, `${provider.name}: the gateway Service`)
  }
  const http = providers.find((p) => p.envoyExtAuthzHttp)?.envoyExtAuthzHttp
  t.equal(http?.pathPrefix, config.envoy.pathPrefix, 'pathPrefix is envoy.pathPrefix')
  t.equal(servicePort(r, http?.port).containerPort, HTTP_PORT, 'the HTTP provider reaches server.port')
  includesAll(t, http?.includeRequestHeadersInCheck, [...TO_CHECK, 'authorization'], 'includeRequestHeadersInCheck')
  t.same(lower(http?.headersToUpstreamOnAllow), upstreamHeaders(config), 'headersToUpstreamOnAllow')
  includesAll(t, http?.headersToDownstreamOnAllow, ['set-cookie'], 'headersToDownstreamOnAllow')
  includesAll(t, http?.headersToDownstreamOnDeny, ['location', 'www-authenticate', 'set-cookie'], 'headersToDownstreamOnDeny')
  grpcExposed(t, r, config, providers.find((p) => p.envoyExtAuthzGrpc)?.envoyExtAuthzGrpc?.port)

  const policies = r.of<AuthorizationPolicy>('AuthorizationPolicy')
  t.equal(policies.length, 1, 'one AuthorizationPolicy')
  const policy = policies[0]
  t.equal(policy?.spec.action, 'CUSTOM')
  t.equal(policy?.metadata.namespace, 'demo', "in the application's namespace")
  t.ok(
    providers.some((p) => p.name === policy?.spec.provider?.name),
    'its provider is one NOTES.txt prints',
  )
  const operations = (policy?.spec.rules ?? []).flatMap((x) => x.to ?? []).map((to) => to.operation ?? {})
  t.ok(operations.length > 0, 'rules with operations (a CUSTOM policy without rules checks nothing)')
  t.ok(
    operations.every((o) => o.notPaths?.includes(`${SIGN_IN_PATH}/*`)),
    `every rule excludes ${SIGN_IN_PATH}/*`,
  )
  t.match(text, `${config.server.publicUrl.replace(/\/$/, '')}${SIGN_IN_PATH}/callback`, 'NOTES.txt names the redirect URI to register')
})

function forwardAuth(t: Test, r: Rendered, config: GatewayConfig, app: Ingress | undefined) {
  const appHost = app?.spec?.rules?.[0]?.host ?? ''
  t.equal(app?.metadata?.namespace, 'demo', "the application's Ingress is in its namespace")
  t.ok(config.cookies.domain && appHost.endsWith(`.${config.cookies.domain}`), "cookies.domain covers the application's host")
  t.ok(new URL(config.server.publicUrl).hostname.endsWith(`.${config.cookies.domain}`), "and the gateway's")
  t.ok(
    config.upstreams.some((u) => u.match.hosts?.includes(appHost)),
    "an upstream names the application's host",
  )
  t.ok(
    config.redirects.allowedHosts.some((h) => h === appHost || (h.startsWith('.') && appHost.endsWith(h))),
    "redirectAfter may name the application's host",
  )
  const host = new URL(config.server.publicUrl).hostname
  const paths = r
    .of<Ingress>('Ingress')
    .flatMap((i) => i.spec?.rules ?? [])
    .filter((x) => x.host === host)
    .flatMap((x) => x.http?.paths ?? [])
  t.ok(
    paths.some((p) => p.path === SIGN_IN_PATH && p.pathType === 'Prefix' && p.backend.service?.name === RELEASE && p.backend.service.port?.name === 'http'),
    `an Ingress sends ${SIGN_IN_PATH} on the gateway's host to the gateway`,
  )
}

const authUrl = `http://${RELEASE}.${NAMESPACE}.svc.cluster.local:${HTTP_PORT}${SIGN_IN_PATH}/auth`

t.test('ingress-nginx: forward-auth annotations that match the gateway', async (t) => {
  const r = render(['ingress-nginx.yaml'])
  const { config } = gatewayConfig(r)
  const app = r.of<Ingress>('Ingress').find((i) => i.metadata?.annotations?.['nginx.ingress.kubernetes.io/auth-url'] !== undefined)
  const annotations = app?.metadata?.annotations ?? {}
  t.equal(annotations['nginx.ingress.kubernetes.io/auth-url'], authUrl, "auth-url is the gateway Service's check")
  t.equal(
    annotations['nginx.ingress.kubernetes.io/auth-signin'],
    `${config.server.publicUrl.replace(/\/$/, '')}${SIGN_IN_PATH}/redirect`,
    'auth-signin is the sign-in endpoint',
  )
  t.equal(annotations['nginx.ingress.kubernetes.io/auth-signin-redirect-param'], 'redirectAfter')
  t.same(
    lower(annotations['nginx.ingress.kubernetes.io/auth-response-headers']?.split(',')),
    answerHeaders(config),
    'auth-response-headers: every identity header of the answer and every request override',
  )
  forwardAuth(t, r, config, app)
})

t.test("traefik: a ForwardAuth middleware used by the application's Ingress", async (t) => {
  const r = render(['quickstart-traefik.yaml'])
  const { config } = gatewayConfig(r)
  const middleware = r.of<Middleware & K8sObject>('Middleware')[0]
  t.equal(middleware?.spec?.forwardAuth?.address, authUrl, "the address is the gateway Service's check")
  t.same(
    lower(middleware?.spec?.forwardAuth?.authResponseHeaders),
    answerHeaders(config),
    'authResponseHeaders: every identity header of the answer and every request override',
  )
  t.notOk(middleware?.spec?.forwardAuth?.authSigninURL, 'no authSigninURL: the gateway answers a browser with 302 itself')
  t.equal(middleware?.spec?.forwardAuth?.trustForwardHeader, false, "the client's X-Forwarded-* are not trusted")
  const reference = `${middleware?.metadata?.namespace}-${middleware?.metadata?.name}@kubernetescrd`
  const app = r.of<Ingress>('Ingress').find((i) => i.metadata?.annotations?.['traefik.ingress.kubernetes.io/router.middlewares'] === reference)
  t.ok(app, `an Ingress uses ${reference}`)
  t.equal(app?.metadata?.namespace, middleware?.metadata?.namespace, "in the middleware's namespace")
  forwardAuth(t, r, config, app)
  // The entry point option that drops X_Auth_Request_User is Traefik's installation, not the chart's.
  t.match(notes(['quickstart-traefik.yaml']), /--entryPoints\.<name>\.http\.aliasHeadersStrategy=delete/, 'NOTES.txt names the entry point setting')
})

t.test('transactionTokens: Txn-Token among the headers Envoy and the ingresses copy from the answer', async (t) => {
  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  // The key comes from the environment: the chart refuses one written in the values.
  const env = { ASSERTION_KEY: pem }
  const values = {
    config: {
      assertions: { signingKeys: ['${ASSERTION_KEY}'] },
      upstreams: [{ name: 'app', target: 'http://app.demo.svc:80', transactionTokens: { trustDomain: 'trust-domain.example', scope: ['app'] } }],
    },
  }
  const envoy = render(['quickstart-envoy-gateway.yaml'], values)
  const { config } = gatewayConfig(envoy, env)
  t.ok(upstreamHeaders(config).includes('txn-token'), 'what the check answers')
  t.same(lower(securityPolicy(t, envoy, config).http?.headersToBackend), upstreamHeaders(config), 'headersToBackend')
  const traefik = render(['quickstart-traefik.yaml'], values)
  const authResponseHeaders = lower(traefik.of<Middleware & K8sObject>('Middleware')[0]?.spec?.forwardAuth?.authResponseHeaders)
  t.ok(answerHeaders(gatewayConfig(traefik, env).config).includes('txn-token'))
  t.same(authResponseHeaders, answerHeaders(gatewayConfig(traefik, env).config), 'authResponseHeaders')
})

t.test('identityAssertion: the assertion header, under assertions.header, among the headers Envoy and the ingresses copy from the answer', async (t) => {
  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  // The key comes from the environment: the chart refuses one written in the values.
  const env = { ASSERTION_KEY: pem }
  const values = {
    config: {
      assertions: { signingKeys: ['${ASSERTION_KEY}'], header: 'X-Signed-Identity' },
      upstreams: [{ name: 'app', target: 'http://app.demo.svc:80', identityAssertion: true }],
    },
  }
  const envoy = render(['quickstart-envoy-gateway.yaml'], values)
  const { config } = gatewayConfig(envoy, env)
  t.ok(upstreamHeaders(config).includes('x-signed-identity'), 'what the check answers')
  t.same(lower(securityPolicy(t, envoy, config).http?.headersToBackend), upstreamHeaders(config), 'headersToBackend')
  const traefik = render(['quickstart-traefik.yaml'], values)
  const authResponseHeaders = lower(traefik.of<Middleware & K8sObject>('Middleware')[0]?.spec?.forwardAuth?.authResponseHeaders)
  t.ok(authResponseHeaders.includes('x-signed-identity'), 'Traefik copies it from the 200')
  t.same(authResponseHeaders, answerHeaders(gatewayConfig(traefik, env).config), 'authResponseHeaders')
  const nginx = render(['ingress-nginx.yaml'], values)
  const annotation = nginx
    .of<Ingress>('Ingress')
    .map((i) => i.metadata?.annotations?.['nginx.ingress.kubernetes.io/auth-response-headers'])
    .find((a) => a !== undefined)
  t.ok(lower(annotation?.split(',')).includes('x-signed-identity'), 'ingress-nginx copies it from the 200')
  t.same(lower(annotation?.split(',')), answerHeaders(gatewayConfig(nginx, env).config), 'auth-response-headers')
})

t.test("traefik: addAuthCookiesToResponse names every cookie of the mounted configuration's session", async (t) => {
  const cases: { what: string; values: Values; store: string; first: string }[] = [
    { what: 'the quickstart (memory: rendered the same)', values: {}, store: 'memory', first: '__Secure-ogw' },
    { what: 'cookie store, cookies.domain over two hosts', values: { config: { session: { store: 'cookie' } } }, store: 'cookie', first: '__Secure-ogw' },
    { what: 'cookie store, one host', values: { app: { host: '' }, config: { session: { store: 'cookie' } } }, store: 'cookie', first: '__Host-ogw' },
    {
      what: 'cookie store, another cookies.name, credentials on the sign-in path',
      values: { app: { host: '' }, config: { session: { store: 'cookie' }, cookies: { name: 'sso', credentialsPath: SIGN_IN_PATH } } },
      store: 'cookie',
      first: '__Host-sso',
    },
    {
      what: 'cookie store, cookies.secure false',
      values: { config: { session: { store: 'cookie' }, cookies: { secure: false } } },
      store: 'cookie',
      first: 'ogw',
    },
    {
      what: 'redis (rendered the same)',
      values: { redis: { enabled: true, url: 'redis://redis.auth.svc:6379/0', auth: false } },
      store: 'redis',
      first: '__Secure-ogw',
    },
  ]
  for (const { what, values, store, first } of cases) {
    const r = render(['quickstart-traefik.yaml'], values)
    const { config } = gatewayConfig(r)
    t.equal(config.session.store, store, `${what}: session.store ${store}`)
    const listed = r.of<Middleware & K8sObject>('Middleware')[0]?.spec?.forwardAuth?.addAuthCookiesToResponse
    const expected = sessionCookieNames(config.cookies)
    t.equal(expected[0], sessionCookieName(config.cookies), `${what}: the session cookie comes first`)
    t.equal(expected[0], first, `${what}: named ${first}`)
    t.same(listed, expected, `${what}: ${expected.join(', ')}`)
  }
  // docs/deploy/traefik.md's middleware, run by a real Traefik in test/e2e/traefik-forward-auth.test.ts,
  // lists the quickstart's names (cookies.secure with cookies.domain, the default cookies.name).
  const page = YAML.parse(recipe('docs/deploy/traefik.md', 'yaml')) as { spec: { forwardAuth: { addAuthCookiesToResponse?: string[] } } }
  const quickstart = render(['quickstart-traefik.yaml']).of<Middleware & K8sObject>('Middleware')[0]?.spec?.forwardAuth?.addAuthCookiesToResponse
  t.same(quickstart, page.spec.forwardAuth.addAuthCookiesToResponse, 'the same list as docs/deploy/traefik.md')
})
