import type { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress'
import type { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount'
import t from 'tap'
import YAML from 'yaml'
import { CHART, NAMESPACE, RELEASE, type Values, render, template } from '../fixtures/chart.ts'
import { type K8sObject, gateway, gatewayConfig, schemaProblems } from '../fixtures/k8s-objects.ts'
import { gatewayContainerProblems } from '../fixtures/k8s-checks.ts'
import { readFileSync } from 'node:fs'

// The values oauth2-proxy's chart users look for (oauth2-proxy/manifests, helm/oauth2-proxy/
// values.yaml and templates/ at fe328b0, chart 10.7.0), under the same names where the concept is
// the same: serviceAccount (create, name, annotations: workload identity), envFrom, extraVolumes
// and extraVolumeMounts, extraInitContainers, extraObjects, global.imageRegistry and
// image.registry, global.imagePullSecrets, values templated where that chart templates them
// (tpl), and proxy mode's own routes: a generic Ingress (ingress) and an HTTPRoute (gatewayApi,
// with gatewayRef). Each is rendered by the real helm and every object validated against its API
// schema.

const APP_VERSION = (YAML.parse(readFileSync(`${CHART}Chart.yaml`, 'utf8')) as { appVersion: string }).appVersion

/** The smallest proxy-mode release: the chart's own upstream for `app`. */
const BASE: Values = {
  publicUrl: 'https://app.example.com',
  config: { provider: { issuer: 'https://idp.example.com/realms/main', clientId: 'openid-gateway' } },
  secrets: { existingSecret: 'openid-gateway' },
}

function renderWith(values: Values) {
  const rendered = render([], { ...BASE, ...values })
  return { rendered, ...gateway(rendered) }
}

t.test('every object of every case validates against its API schema', async (t) => {
  const cases: Values[] = [
    { serviceAccount: { create: true, annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/x' } } },
    { ingress: { enabled: true } },
    { gatewayApi: { enabled: true, gatewayRef: { name: 'eg' } } },
    { extraObjects: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: '{{ .Release.Name }}-extra' }, data: { a: 'b' } }] },
  ]
  for (const values of cases) t.same(schemaProblems(renderWith(values).rendered.objects), [], JSON.stringify(values))
})

t.test('serviceAccount', async (t) => {
  const none = renderWith({})
  t.same(none.rendered.of('ServiceAccount'), [], 'by default: none created')
  t.equal(none.pod.serviceAccountName, undefined, "the namespace's default account")

  const created = renderWith({
    serviceAccount: { create: true, annotations: { 'iam.gke.io/gcp-service-account': '{{ .Release.Name }}@p.iam.gserviceaccount.com' } },
  })
  const [account] = created.rendered.of<ServiceAccount>('ServiceAccount')
  t.equal(account?.metadata?.name, RELEASE, 'create: named after the release')
  t.equal(account?.metadata?.namespace, NAMESPACE)
  t.same(account?.metadata?.annotations, { 'iam.gke.io/gcp-service-account': `${RELEASE}@p.iam.gserviceaccount.com` }, 'its annotations, templated')
  t.equal(account?.automountServiceAccountToken, false, 'no token from the account')
  t.equal(created.pod.serviceAccountName, RELEASE, 'the pod runs as it')
  t.equal(created.pod.automountServiceAccountToken, false, 'and mounts no token')

  const named = renderWith({ serviceAccount: { create: true, name: 'gw-identity' } })
  t.equal(named.rendered.of<ServiceAccount>('ServiceAccount')[0]?.metadata?.name, 'gw-identity', 'create with a name')
  t.equal(named.pod.serviceAccountName, 'gw-identity')

  const existing = renderWith({ serviceAccount: { name: 'existing-identity' } })
  t.same(existing.rendered.of('ServiceAccount'), [], 'a name without create: none created')
  t.equal(existing.pod.serviceAccountName, 'existing-identity', 'the pod runs as the existing one')
})

t.test('envFrom, extraEnv, extraVolumes and extraVolumeMounts', async (t) => {
  const { container, pod } = renderWith({
    envFrom: [{ secretRef: { name: '{{ .Release.Name }}-provider-keys' } }],
    extraEnv: [{ name: 'RELEASE_NAMESPACE', value: '{{ .Release.Namespace }}' }],
    extraVolumes: [{ name: 'ca', configMap: { name: '{{ .Release.Name }}-ca' } }],
    extraVolumeMounts: [{ name: 'ca', mountPath: '/etc/provider-ca', readOnly: true }],
  })
  t.same(container.envFrom, [{ secretRef: { name: `${RELEASE}-provider-keys` } }], 'envFrom on the gateway container, templated')
  t.same(
    container.env?.find((e) => e.name === 'RELEASE_NAMESPACE'),
    { name: 'RELEASE_NAMESPACE', value: NAMESPACE },
    'extraEnv templated',
  )
  t.same(
    pod.volumes?.find((v) => v.name === 'ca'),
    { name: 'ca', configMap: { name: `${RELEASE}-ca` } },
    'the volume, templated',
  )
  t.same(
    container.volumeMounts?.find((m) => m.name === 'ca'),
    { name: 'ca', mountPath: '/etc/provider-ca', readOnly: true },
    'mounted in the gateway container',
  )
  t.ok(
    ['config', 'tmp'].every((name) => pod.volumes?.some((v) => v.name === name)),
    "the chart's own volumes stay",
  )
})

t.test('extraInitContainers', async (t) => {
  const init = {
    name: 'wait-for-idp',
    image: 'busybox:1.37',
    command: ['sh', '-c', 'until nc -z idp 443; do sleep 1; done'],
    securityContext: { runAsNonRoot: true, runAsUser: 65534, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
  }
  const { pod, container } = renderWith({ extraInitContainers: [init] })
  t.same(pod.initContainers, [init], 'the init container, as given')
  t.same(gatewayContainerProblems(container), [], "the gateway's container unchanged")
  const refused = template([], { ...BASE, extraInitContainers: [{ name: 'x', image: 'busybox' }] })
  t.match(refused.stderr, /extraInitContainers\/0.*securityContext/, 'one without a securityContext of its own is refused')
})

t.test('extraObjects', async (t) => {
  const { rendered } = renderWith({
    extraObjects: [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: '{{ .Release.Name }}-extra', namespace: '{{ .Release.Namespace }}' },
        data: { publicUrl: '{{ .Values.publicUrl }}' },
      },
    ],
  })
  const extra = rendered.of<K8sObject & { data?: Record<string, string> }>('ConfigMap', `${RELEASE}-extra`)[0]
  t.equal(extra?.metadata.namespace, NAMESPACE, 'rendered with the release, templated')
  t.same(extra?.data, { publicUrl: 'https://app.example.com' })
})

t.test('global.imageRegistry, image.registry and global.imagePullSecrets', async (t) => {
  const image = (values: Values) => renderWith(values).container.image
  t.equal(image({}), `ghcr.io/openid-gateway/openid-gateway:${APP_VERSION}`, 'by default: image.repository as it is')
  t.equal(
    image({ global: { imageRegistry: 'mirror.example.com/ghcr' } }),
    `mirror.example.com/ghcr/openid-gateway/openid-gateway:${APP_VERSION}`,
    "global.imageRegistry replaces the repository's registry",
  )
  t.equal(
    image({ global: { imageRegistry: 'mirror.example.com' }, image: { registry: 'registry.internal:5000/' } }),
    `registry.internal:5000/openid-gateway/openid-gateway:${APP_VERSION}`,
    'image.registry wins over it',
  )
  t.equal(
    image({ global: { imageRegistry: '{{ .Release.Namespace }}.registry.example.com' } }),
    `${NAMESPACE}.registry.example.com/openid-gateway/openid-gateway:${APP_VERSION}`,
    'templated',
  )
  t.equal(
    image({ global: { imageRegistry: 'mirror.example.com' }, image: { repository: 'myteam/openid-gateway', digest: `sha256:${'a'.repeat(64)}` } }),
    `mirror.example.com/myteam/openid-gateway:${APP_VERSION}@sha256:${'a'.repeat(64)}`,
    'a repository without a registry is prefixed; the digest stays',
  )
  t.same(renderWith({ global: { imagePullSecrets: [{ name: 'mirror-pull' }] } }).pod.imagePullSecrets, [{ name: 'mirror-pull' }], 'global.imagePullSecrets')
  t.same(
    renderWith({ global: { imagePullSecrets: [{ name: 'mirror-pull' }] }, imagePullSecrets: [{ name: '{{ .Release.Name }}-pull' }] }).pod.imagePullSecrets,
    [{ name: `${RELEASE}-pull` }],
    'imagePullSecrets wins, templated',
  )
})

t.test('config and nodeSelector are templated', async (t) => {
  const result = renderWith({
    config: {
      ...(BASE.config as Values),
      upstreams: [{ name: 'app', match: { pathPrefix: '/' }, target: 'http://app.{{ .Release.Namespace }}.svc.cluster.local:80', auth: 'required' }],
      provider: { issuer: 'https://idp.example.com/realms/main', clientId: '{{ .Release.Name }}', clientSecret: '${MY_CLIENT_SECRET}' },
    },
    nodeSelector: { pool: '{{ .Release.Namespace }}-pool' },
  })
  const { config } = gatewayConfig(result.rendered)
  t.equal(config.upstreams[0]?.target, `http://app.${NAMESPACE}.svc.cluster.local:80`, 'a string of config')
  t.equal(config.providers[0]?.clientId, RELEASE)
  t.match(result.yamlText, /clientSecret: \$\{MY_CLIENT_SECRET\}/, 'a ${VARIABLE} stays for the gateway')
  t.same(result.pod.nodeSelector, { pool: `${NAMESPACE}-pool` }, 'nodeSelector')
})

t.test('proxy mode: ingress', async (t) => {
  const one = renderWith({ ingress: { enabled: true } })
  const [ingress] = one.rendered.of<Ingress>('Ingress')
  t.equal(ingress?.metadata?.name, RELEASE)
  t.same(
    ingress?.spec?.rules?.map((r) => r.host),
    ['app.example.com'],
    "publicUrl's host",
  )
  const path = ingress?.spec?.rules?.[0]?.http?.paths[0]
  t.same(path, { path: '/', pathType: 'Prefix', backend: { service: { name: RELEASE, port: { name: 'http' } } } }, 'every path to the gateway Service')
  t.equal(ingress?.spec?.ingressClassName, undefined, "no class: the cluster's default")

  const two = renderWith({
    app: { host: 'www.example.com' },
    ingress: {
      enabled: true,
      className: 'nginx',
      annotations: { 'cert-manager.io/cluster-issuer': '{{ .Release.Namespace }}-issuer' },
      labels: { team: 'auth' },
      tls: [{ secretName: '{{ .Release.Name }}-tls', hosts: ['app.example.com', 'www.example.com'] }],
    },
  })
  const [second] = two.rendered.of<Ingress>('Ingress')
  t.same(
    second?.spec?.rules?.map((r) => r.host),
    ['app.example.com', 'www.example.com'],
    "and app.host, which the chart's upstream serves",
  )
  t.equal(second?.spec?.ingressClassName, 'nginx')
  t.equal(second?.metadata?.annotations?.['cert-manager.io/cluster-issuer'], `${NAMESPACE}-issuer`, 'annotations templated')
  t.equal(second?.metadata?.labels?.team, 'auth')
  t.equal(second?.spec?.tls?.[0]?.secretName, `${RELEASE}-tls`, 'tls templated')
  const hosts = renderWith({ ingress: { enabled: true, hosts: ['{{ .Release.Name }}.example.com'] } }).rendered.of<Ingress>('Ingress')[0]
  t.same(
    hosts?.spec?.rules?.map((r) => r.host),
    [`${RELEASE}.example.com`],
    'hosts given, templated',
  )
})

t.test('proxy mode: gatewayApi', async (t) => {
  const { rendered } = renderWith({
    app: { host: 'www.example.com' },
    gatewayApi: { enabled: true, gatewayRef: { name: 'public', namespace: 'gateways', sectionName: 'https' }, annotations: { a: '{{ .Release.Name }}' } },
  })
  const [route] = rendered.of<K8sObject & { spec: { parentRefs: unknown; hostnames: string[]; rules: { backendRefs: unknown }[] } }>('HTTPRoute')
  t.equal(route?.metadata.name, RELEASE)
  t.same(route?.spec.parentRefs, [{ name: 'public', namespace: 'gateways', sectionName: 'https' }], 'attached to gatewayRef')
  t.same(route?.spec.hostnames, ['app.example.com', 'www.example.com'], "publicUrl's host and app.host")
  t.same(route?.spec.rules[0]?.backendRefs, [{ name: RELEASE, port: 8080 }], 'every path to the gateway Service')
  t.equal(route?.metadata.annotations?.a, RELEASE, 'annotations templated')
})

const REFUSED: [string, Values, RegExp][] = [
  ['an Ingress beside a check integration', { ingress: { enabled: true }, traefik: { enabled: true } }, /ingress\.enabled is proxy mode .* enable one/],
  [
    'an HTTPRoute beside a check integration',
    { gatewayApi: { enabled: true, gatewayRef: { name: 'eg' } }, envoyGateway: { enabled: true, parentRefs: [{ name: 'eg' }] } },
    /gatewayApi\.enabled is proxy mode .* enable one/,
  ],
  [
    'both proxy routes',
    { ingress: { enabled: true }, gatewayApi: { enabled: true, gatewayRef: { name: 'eg' } } },
    /ingress\.enabled and gatewayApi\.enabled both/,
  ],
  ['an HTTPRoute without its Gateway', { gatewayApi: { enabled: true } }, /gatewayApi\.gatewayRef\.name is required/],
  ['a misspelt serviceAccount value', { serviceAccount: { enabled: true } }, /\/serviceAccount.*additional properties 'enabled' not allowed/],
]
for (const [what, values, expected] of REFUSED) {
  t.test(`refused: ${what}`, async (t) => {
    const result = template([], { ...BASE, ...values })
    t.not(result.status, 0, 'helm template fails')
    t.match(result.stderr, expected, 'naming the values')
  })
}
