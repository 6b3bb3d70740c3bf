import { posix } from 'node:path'
import type { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import type { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import type { Service } from 'kubernetes-models/v1/Service'
import t from 'tap'
import YAML from 'yaml'
import { EXAMPLE_FILES, RELEASE, render, exampleValues } from '../fixtures/chart.ts'
import { type K8sObject, SECRET_LIKE, gateway, gatewayConfig, portNumber, schemaProblems, sidecarProblems } from '../fixtures/k8s-objects.ts'
import { HTTP_PORT, MANAGEMENT_PORT, podSecurityProblems } from '../fixtures/k8s-checks.ts'

// `helm template` of every values example under charts/openid-gateway/examples (the ones the
// chart README and docs/deploy/kubernetes.md show): every object validates against its API schema
// (kubernetes-models, prometheus-operator, Gateway API, Istio, Envoy Gateway's CRD), the mounted
// gateway configuration passes the gateway's own validation, the pod is locked down, secrets come
// only by reference, and ports, probes, the drain and the replicas agree with the code.

t.ok(EXAMPLE_FILES.length >= 10, `values examples found (${EXAMPLE_FILES.length})`)
// One helm template per example, shared by every assertion below.
const RENDERS = new Map(EXAMPLE_FILES.map((example) => [example, render([example])]))

for (const example of EXAMPLE_FILES) {
  t.test(example, async (t) => {
    const rendered = RENDERS.get(example) ?? render([example])
    const values = exampleValues(example)

    t.test('every object validates against its API schema', async (t) => {
      t.same(schemaProblems(rendered.objects), [], `${rendered.objects.length} objects`)
      for (const object of rendered.objects) t.ok(object.metadata.namespace, `${object.kind} ${object.metadata.name} names its namespace`)
    })

    t.test('the pod is locked down', async (t) => {
      const { pod, container } = gateway(rendered)
      t.same(
        podSecurityProblems(pod),
        [],
        "no token; the gateway's container non-root, read-only, no capability, seccomp RuntimeDefault on its own; every container with its securityContext, requests and a memory limit",
      )
      t.equal(pod.enableServiceLinks, false, 'no service links')
      const tmp = container.volumeMounts?.find((m) => m.mountPath === '/tmp')
      t.ok(pod.volumes?.find((v) => v.name === tmp?.name)?.emptyDir, 'an emptyDir on /tmp')
      t.ok(
        container.volumeMounts?.every((m) => m.mountPath === '/tmp' || m.readOnly === true),
        'every other mount is read-only',
      )
      const volumes = new Set(pod.volumes?.map((v) => v.name))
      const mounts = [...(pod.initContainers ?? []), ...pod.containers].flatMap((c) => c.volumeMounts ?? [])
      t.same(
        mounts.filter((m) => !volumes.has(m.name)).map((m) => m.name),
        [],
        'every mount names a volume of the pod (extraVolumes with extraVolumeMounts)',
      )
    })

    t.test('secrets only by reference', async (t) => {
      const { container } = gateway(rendered)
      for (const env of container.env ?? []) {
        if (SECRET_LIKE.test(env.name)) t.ok(env.valueFrom?.secretKeyRef?.name && env.value === undefined, `${env.name} from a secretKeyRef`)
      }
      t.same(container.envFrom ?? [], [], 'no envFrom (every variable is named)')
      const { yamlText } = gateway(rendered)
      if (yamlText !== undefined) {
        // The file as written, before the gateway puts in the environment's values.
        const raw = YAML.parse(yamlText) as {
          provider?: { clientSecret?: string }
          cookies?: { secrets?: string[] }
          session?: { redisUrl?: string; redis?: { password?: string } }
        }
        const secretValues = [raw.provider?.clientSecret, ...(raw.cookies?.secrets ?? []), raw.session?.redisUrl, raw.session?.redis?.password].filter(
          (v) => v !== undefined,
        )
        t.ok(secretValues.length >= 2, 'the client and cookie secrets are configured')
        for (const value of secretValues) t.match(value, /\$\{[A-Z_0-9]+\}/, `from the environment: ${value}`)
      }
      const secrets = rendered.of('Secret')
      const existing = (values.secrets as { existingSecret?: string } | undefined)?.existingSecret
      t.equal(secrets.length, existing ? 0 : 1, existing ? 'no Secret rendered with existingSecret' : 'the chart creates the Secret')
    })

    t.test('ports, probes and the Service agree with the code', async (t) => {
      const { container, deployment } = gateway(rendered)
      t.equal(portNumber(container, 'http'), HTTP_PORT, 'the http containerPort is server.port')
      t.equal(portNumber(container, 'metrics'), MANAGEMENT_PORT, 'the metrics containerPort is the management port')
      const probes = {
        liveness: [container.livenessProbe, '/healthz'],
        readiness: [container.readinessProbe, '/readyz'],
        startup: [container.startupProbe, '/healthz'],
      } as const
      for (const [name, [probe, path]] of Object.entries(probes)) {
        t.equal(probe?.httpGet?.path, path, `${name} on ${path}`)
        t.equal(portNumber(container, probe?.httpGet?.port), MANAGEMENT_PORT, `${name} on the management port`)
      }
      const service = rendered.of<Service>('Service', RELEASE)[0]
      const selector = service?.spec?.selector ?? {}
      const podLabels = deployment.spec?.template.metadata?.labels ?? {}
      t.ok(Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => podLabels[k] === v), 'the Service selects the gateway pods')
      t.same(deployment.spec?.selector.matchLabels, selector, 'as the Deployment does')
      for (const [name, number] of [
        ['http', HTTP_PORT],
        ['metrics', MANAGEMENT_PORT],
      ] as const) {
        const port = service?.spec?.ports?.find((p) => p.name === name)
        t.equal(port?.port, number, `the Service publishes ${name} on ${number}`)
        t.equal(portNumber(container, port?.targetPort), number, `to the ${name} listener`)
      }
    })

    t.test('a preStop sleep, then a drain that fits the grace period', async (t) => {
      const { container, pod, yamlText } = gateway(rendered)
      const command = container.lifecycle?.preStop?.exec?.command ?? []
      t.equal(command[0], 'sleep', 'preStop sleeps')
      const sleep = Number(command[1])
      t.ok(sleep >= 3 && sleep <= 15, `a few seconds (${command[1]})`)
      const shutdownMs = yamlText === undefined ? 10000 : gatewayConfig(rendered).config.server.shutdownTimeoutMs
      t.ok((pod.terminationGracePeriodSeconds ?? 30) >= sleep + shutdownMs / 1000 + 3, 'terminationGracePeriodSeconds covers preStop, the drain and the exit')
    })

    t.test('the mounted configuration is the one --config names, and it is valid', async (t) => {
      const { configPath, yamlText, container, pod } = gateway(rendered)
      t.match(configPath, /^\/.+\.yaml$/, 'an absolute --config path')
      const mount = container.volumeMounts?.find((m) => m.mountPath === posix.dirname(configPath))
      t.ok(mount?.readOnly, 'its directory is mounted read-only')
      t.equal(mount?.subPath, undefined, 'as a directory, not subPath (which the kubelet never updates)')
      t.ok(pod.volumes?.find((v) => v.name === mount?.name)?.configMap, 'from a ConfigMap')
      if ((values as { existingConfigMap?: string }).existingConfigMap) {
        t.equal(yamlText, undefined, 'existingConfigMap: the chart renders no ConfigMap of its own')
        return
      }
      t.type(yamlText, 'string', `a ConfigMap key is mounted at ${configPath}`)
      const { config, names, envNames } = gatewayConfig(rendered)
      for (const name of names) t.ok(envNames.includes(name), `\${${name}} is set in the container`)
      t.equal(config.server.port, HTTP_PORT, 'server.port')
      t.equal(config.server.host, '0.0.0.0', 'server.host: every interface of the pod')
      t.equal(config.server.publicUrl.replace(/\/$/, ''), String(values.publicUrl).replace(/\/$/, ''), 'server.publicUrl is publicUrl')
    })

    t.test('the pod budget and the autoscaler fit the replicas and the sessions', async (t) => {
      const { deployment, yamlText } = gateway(rendered)
      const hpa = rendered.of<HorizontalPodAutoscaler>('HorizontalPodAutoscaler')[0]
      const pdb = rendered.of<PodDisruptionBudget>('PodDisruptionBudget')[0]
      const most = hpa?.spec?.maxReplicas ?? deployment.spec?.replicas ?? 1
      const fewest = hpa?.spec?.minReplicas ?? deployment.spec?.replicas ?? 1
      t.ok(pdb, 'a PodDisruptionBudget')
      if (most > 1 && yamlText !== undefined) {
        const { session } = gatewayConfig(rendered).config
        t.ok(session.store === 'redis' || session.redisUrl !== undefined, 'more than one replica: sessions and revocations in Redis')
      }
      if (fewest > 1) t.equal(pdb?.spec?.minAvailable, 1, 'the budget keeps one')
      else t.equal(pdb?.spec?.maxUnavailable, 1, 'one replica: the budget lets a drain through')
    })
  })
}

t.test('object kinds the examples cover', async (t) => {
  const kinds = new Set([...RENDERS.values()].flatMap((r) => r.objects.map((o: K8sObject) => o.kind)))
  for (const kind of [
    'Deployment',
    'Service',
    'ConfigMap',
    'Secret',
    'HorizontalPodAutoscaler',
    'PodDisruptionBudget',
    'ServiceMonitor',
    'NetworkPolicy',
    'Ingress',
    'HTTPRoute',
    'SecurityPolicy',
    'ReferenceGrant',
    'AuthorizationPolicy',
    'VirtualService',
    'Middleware',
    'ServiceAccount',
  ]) {
    t.ok(kinds.has(kind), `some example renders a ${kind}`)
  }
})

for (const example of ['sidecar.yaml', 'sidecar-root.yaml']) {
  t.test(`${example}: the application listens in the pod only, behind the gateway`, async (t) => {
    t.same(sidecarProblems(RENDERS.get(example) ?? render([example])), [])
  })
}
