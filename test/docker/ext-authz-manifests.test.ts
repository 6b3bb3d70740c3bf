import { readFileSync } from 'node:fs'
import { IstioOperator } from '@kubernetes-models/istio/install.istio.io/v1alpha1/IstioOperator'
import t, { type Test } from 'tap'
import YAML from 'yaml'
import type { GatewayConfig } from '#src/options/types'
import { SIGN_IN_PATH } from '#src/contract/endpoints'
import { ENVOY_PATH_PREFIX_DEFAULT, type ExtensionProvider, TO_CHECK, missing, upstreamHeaders } from '../fixtures/k8s-checks.ts'
import { type K8sObject, type Rendered, gateway, gatewayConfig, servicePort } from '../fixtures/k8s-objects.ts'
import { fixtureSchema, routeFilters, schemaValidator } from '../fixtures/k8s-validators.ts'
import { K8S, kustomize } from '../fixtures/kustomize.ts'

// The ext_authz overlays (envoy-gateway, envoy-gateway-grpc, gateway-api, istio) agree with the
// gateway configuration they mount and with the check endpoints' contract: the check's path prefix
// is envoy.pathPrefix, the gRPC port is server.extAuthzGrpcPort and is exposed, the header
// lists carry cookie to the check and the upstream's identity headers back, the sign-in endpoints
// are never behind the check, and nothing waits on Istio's 600 s default timeout. The schema
// validation of every object is test/docker/manifests.test.ts's.

type Checked = Rendered & { config: GatewayConfig }

/** An overlay's objects with the gateway configuration they mount, parsed by the gateway. */
function render(dir: string): Checked {
  const r = kustomize(dir)
  return { ...r, config: gatewayConfig(r).config }
}

function includesAll(t: Test, list: readonly string[] | undefined, expected: readonly string[], what: string) {
  t.same(missing(list, expected), [], `${what} lists ${expected.join(', ')}`)
}

type BackendRef = { name: string; port?: number; namespace?: string }
type HTTPRouteObject = K8sObject & { spec: { hostnames?: string[]; rules?: { matches?: { path?: { type?: string; value?: string } }[]; backendRefs?: BackendRef[] }[] } }

/** The route sending /api/v1/openid to the gateway's http port. */
function signInRoute(t: Test, rendered: Checked): HTTPRouteObject | undefined {
  const route = rendered.of<HTTPRouteObject>('HTTPRoute').find((r) =>
    (r.spec.rules ?? []).some((rule) => rule.matches?.some((m) => m.path?.type === 'PathPrefix' && m.path.value === SIGN_IN_PATH) && rule.backendRefs?.some((b) => b.name === 'openid-gateway')),
  )
  t.ok(route, `an HTTPRoute sends ${SIGN_IN_PATH} to the gateway`)
  const backend = route?.spec.rules?.flatMap((r) => r.backendRefs ?? []).find((b) => b.name === 'openid-gateway')
  t.equal(servicePort(rendered, backend?.port).containerPort, rendered.config.server.port, 'on the port the gateway listens on (server.port)')
  t.same(route?.spec.hostnames, [new URL(rendered.config.server.publicUrl).hostname], 'on the host of server.publicUrl')
  return route
}

/** server.extAuthzGrpcPort is on: a container port and an h2c Service port carry it. */
function grpcExposed(t: Test, rendered: Checked, port: number | undefined) {
  const grpcPort = rendered.config.server.extAuthzGrpcPort
  t.ok(grpcPort > 0, 'server.extAuthzGrpcPort is set')
  t.equal(port, grpcPort, 'the gRPC backend port is server.extAuthzGrpcPort')
  const { port: service, containerPort } = servicePort(rendered, port)
  t.equal(containerPort, grpcPort, 'the Service port reaches the container port of the gRPC listener')
  t.ok(gateway(rendered).container.ports?.some((p) => p.containerPort === grpcPort), 'the gateway container declares it')
  t.equal(service?.appProtocol, 'kubernetes.io/h2c', 'the Service port says cleartext HTTP/2 (appProtocol kubernetes.io/h2c)')
  t.equal(service?.name, 'grpc', 'the Service port is named grpc')
}

t.test('the envoy.pathPrefix default the overlays use', async (t) => {
  t.equal(ENVOY_PATH_PREFIX_DEFAULT, `${SIGN_IN_PATH}/ext-authz`)
})

type ExtAuth = {
  http?: { backendRefs?: BackendRef[]; path?: string; headersToBackend?: string[] }
  grpc?: { backendRefs?: BackendRef[] }
  headersToExtAuth?: string[]
  failOpen?: boolean
  timeout?: string
  statusOnError?: number
}
type SecurityPolicyObject = K8sObject & { spec: { extAuth?: ExtAuth; targetRefs?: { kind: string; name: string }[]; targetRef?: unknown; targetSelectors?: unknown } }

function securityPolicy(t: Test, rendered: Checked) {
  const policies = rendered.of<SecurityPolicyObject>('SecurityPolicy')
  t.equal(policies.length, 1, 'one SecurityPolicy')
  const policy = policies[0]
  const extAuth = policy?.spec.extAuth ?? {}
  includesAll(t, extAuth.headersToExtAuth, TO_CHECK, 'headersToExtAuth')
  t.not(extAuth.failOpen, true, 'fails closed (failOpen is not true)')
  t.match(extAuth.timeout, /^\d+(ms|s)$/, 'an explicit timeout')
  const signIn = signInRoute(t, rendered)
  t.same(policy?.spec.targetRef ?? policy?.spec.targetSelectors, undefined, 'targets named routes only (no targetRef to a Gateway, no selectors)')
  const targets = policy?.spec.targetRefs ?? []
  t.ok(targets.length > 0 && targets.every((r) => r.kind === 'HTTPRoute'), 'targets HTTPRoutes')
  t.notOk(targets.some((r) => r.name === signIn?.metadata.name), `the route for ${SIGN_IN_PATH} has no policy`)
  t.ok(targets.every((r) => rendered.of('HTTPRoute', r.name).length === 1), 'every target is a route of the overlay')
  return extAuth
}

t.test('envoy-gateway: SecurityPolicy extAuth.http to the HTTP check', async (t) => {
  const rendered = render('overlays/envoy-gateway')
  const extAuth = securityPolicy(t, rendered)
  t.equal(extAuth.grpc, undefined, 'no grpc')
  t.equal(extAuth.http?.path, ENVOY_PATH_PREFIX_DEFAULT, 'extAuth.http.path is the default envoy.pathPrefix')
  t.equal(extAuth.http?.path, rendered.config.envoy.pathPrefix, 'and envoy.pathPrefix of the mounted configuration')
  const backend = extAuth.http?.backendRefs?.[0]
  t.equal(backend?.name, 'openid-gateway', 'to the gateway Service')
  t.equal(servicePort(rendered, backend?.port).containerPort, rendered.config.server.port, 'on the port the gateway listens on')
  includesAll(t, extAuth.http?.headersToBackend, upstreamHeaders(rendered.config), 'headersToBackend')
})

t.test('envoy-gateway-grpc: SecurityPolicy extAuth.grpc to server.extAuthzGrpcPort', async (t) => {
  const rendered = render('overlays/envoy-gateway-grpc')
  const extAuth = securityPolicy(t, rendered)
  t.equal(extAuth.http, undefined, 'no http')
  const backend = extAuth.grpc?.backendRefs?.[0]
  t.equal(backend?.name, 'openid-gateway', 'to the gateway Service')
  grpcExposed(t, rendered, backend?.port)
  // With a headersToExtAuth list a gRPC check carries only the listed headers.
  includesAll(t, extAuth.headersToExtAuth, [...TO_CHECK, 'authorization'], 'headersToExtAuth (gRPC)')
})

type ExternalAuthFilter = {
  protocol: string
  backendRef: BackendRef
  http?: { path?: string; allowedHeaders?: string[]; allowedResponseHeaders?: string[] }
}

t.test('gateway-api: the ExternalAuth filter to the HTTP check', async (t) => {
  const rendered = render('overlays/gateway-api')
  const signIn = signInRoute(t, rendered)
  t.same(routeFilters(signIn), [], `the route for ${SIGN_IN_PATH} has no filter`)
  const filters = rendered
    .of('HTTPRoute')
    .flatMap((r) => routeFilters(r))
    .filter((f) => f.type === 'ExternalAuth')
  t.equal(filters.length, 1, 'one ExternalAuth filter')
  const filter = filters[0]?.externalAuth as ExternalAuthFilter | undefined
  t.equal(filter?.protocol, 'HTTP', 'protocol HTTP')
  t.equal(filter?.http?.path, ENVOY_PATH_PREFIX_DEFAULT, 'http.path is the default envoy.pathPrefix')
  t.equal(filter?.http?.path, rendered.config.envoy.pathPrefix, 'and envoy.pathPrefix of the mounted configuration')
  t.equal(filter?.backendRef.name, 'openid-gateway', 'to the gateway Service')
  t.equal(servicePort(rendered, filter?.backendRef.port).containerPort, rendered.config.server.port, 'on the port the gateway listens on')
  includesAll(t, filter?.http?.allowedHeaders, TO_CHECK, 'http.allowedHeaders')
  includesAll(t, filter?.http?.allowedResponseHeaders, upstreamHeaders(rendered.config), 'http.allowedResponseHeaders (empty would copy every answer header)')
})

type AuthorizationPolicyObject = K8sObject & {
  spec: { action?: string; provider?: { name?: string }; rules?: { to?: { operation?: { paths?: string[]; notPaths?: string[] } }[] }[] }
}

t.test('istio: extension providers and a CUSTOM AuthorizationPolicy', async (t) => {
  const rendered = render('overlays/istio')
  const meshFile = YAML.parse(readFileSync(`${K8S}overlays/istio/mesh-config.yaml`, 'utf8')) as {
    spec: { meshConfig: { extensionProviders: ExtensionProvider[]; pathNormalization?: { normalization?: string } } }
  }
  t.doesNotThrow(() => new IstioOperator(meshFile as never).validate(), 'mesh-config.yaml is an IstioOperator')
  // istio/api mesh/v1alpha1/config.proto, ProxyPathNormalization.NormalizationType: NONE, BASE (the
  // default: dot segments only), MERGE_SLASHES, DECODE_AND_MERGE_SLASHES. The check refuses a path
  // out of normal form, so the mesh must resolve dot segments and merge slashes before it asks.
  t.ok(
    ['MERGE_SLASHES', 'DECODE_AND_MERGE_SLASHES'].includes(meshFile.spec.meshConfig.pathNormalization?.normalization ?? 'BASE'),
    'meshConfig.pathNormalization merges slashes after resolving dot segments',
  )
  const validate = schemaValidator(fixtureSchema('istio-meshconfig-extensionprovider.schema.yaml'))
  const providers = meshFile.spec.meshConfig.extensionProviders
  for (const provider of providers) t.ok(validate(provider), `extension provider ${provider.name} validates: ${JSON.stringify(validate.errors ?? [])}`)

  const gatewayHost = `openid-gateway.${rendered.namespace}.svc.cluster.local`
  for (const provider of providers) {
    const service = provider.envoyExtAuthzHttp ?? provider.envoyExtAuthzGrpc
    t.match(service?.timeout, /^\d+(ms|s)$/, `${provider.name}: an explicit timeout (Istio's default is 600 s)`)
    t.not(service?.failOpen, true, `${provider.name}: fails closed`)
    t.equal(service?.service, gatewayHost, `${provider.name}: the gateway Service in its namespace`)
  }
  const http = providers.find((p) => p.envoyExtAuthzHttp)?.envoyExtAuthzHttp
  t.equal(http?.pathPrefix, ENVOY_PATH_PREFIX_DEFAULT, 'pathPrefix is the default envoy.pathPrefix')
  t.equal(http?.pathPrefix, rendered.config.envoy.pathPrefix, 'and envoy.pathPrefix of the mounted configuration')
  t.equal(servicePort(rendered, http?.port).containerPort, rendered.config.server.port, 'the HTTP provider reaches server.port')
  // Istio's defaults are Host, Method, Path and Content-Length: authorization has to be listed.
  includesAll(t, http?.includeRequestHeadersInCheck, [...TO_CHECK, 'authorization'], 'includeRequestHeadersInCheck')
  includesAll(t, http?.headersToUpstreamOnAllow, upstreamHeaders(rendered.config), 'headersToUpstreamOnAllow')
  includesAll(t, http?.headersToDownstreamOnAllow, ['set-cookie'], 'headersToDownstreamOnAllow')
  includesAll(t, http?.headersToDownstreamOnDeny ?? ['location', 'www-authenticate'], ['location', 'www-authenticate'], 'headersToDownstreamOnDeny')
  const grpc = providers.find((p) => p.envoyExtAuthzGrpc)?.envoyExtAuthzGrpc
  grpcExposed(t, rendered, grpc?.port)

  const policies = rendered.of<AuthorizationPolicyObject>('AuthorizationPolicy')
  t.equal(policies.length, 1, 'one AuthorizationPolicy')
  const policy = policies[0]
  t.equal(policy?.spec.action, 'CUSTOM', 'action CUSTOM')
  t.ok(providers.some((p) => p.name === policy?.spec.provider?.name && (p.envoyExtAuthzHttp ?? p.envoyExtAuthzGrpc)), 'its provider is one of the ext_authz providers')
  const operations = (policy?.spec.rules ?? []).flatMap((r) => r.to ?? []).map((to) => to.operation ?? {})
  t.ok(operations.length > 0, 'rules with operations (a CUSTOM policy without rules checks nothing)')
  t.ok(operations.every((o) => o.notPaths?.includes(`${SIGN_IN_PATH}/*`)), `every rule excludes ${SIGN_IN_PATH}/*`)
  t.notOk(operations.some((o) => o.paths?.some((p) => p.startsWith(SIGN_IN_PATH))), `no rule names ${SIGN_IN_PATH}`)
})
