import { readFileSync } from 'node:fs'
import { posix } from 'node:path'
import YAML from 'yaml'
import type { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import type { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import type { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress'
import type { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec'
import type { Service } from 'kubernetes-models/v1/Service'
import type { Middleware } from '@kubernetes-models/traefik/traefik.io/v1alpha1/Middleware'
import t, { type Test } from 'tap'
import { SIGN_IN_PATH } from '#src/contract/endpoints'
import { HTTP_PORT, MANAGEMENT_PORT } from '../fixtures/k8s-checks.ts'
import { type K8sObject, type Rendered, SECRET_LIKE, gateway, gatewayConfig, portNumber, schemaProblems, sidecarProblems, stringValues } from '../fixtures/k8s-objects.ts'
import { kustomizations, kustomize } from '../fixtures/kustomize.ts'
import { AUTH_REQUEST_HEADERS as FORWARD_AUTH_IDENTITY_HEADERS } from '#src/checks/forward-auth'
import { REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'

// Every kustomization under docker/k8s renders (kubectl 1.35, kustomize v5.7, of test/fixtures/
// kube-tools.ts; their gateway objects come from the chart, test/docker/chart-rendered.test.ts), every
// object validates against its API schema (test/fixtures/k8s-validators.ts: the Kubernetes models,
// or a published CRD schema for the kinds they lack), and the manifests agree with the code: ports,
// probe paths, the mounted configuration (which must pass the gateway's own validation), a
// restrictive securityContext, and secrets only by reference. They are what keeps the chart's
// renderings right for the setups the overlays show.

const DOCKERFILE = new URL('../../docker/Dockerfile', import.meta.url)


/** The identity headers of forward-auth's 200 (checks/forward-auth.ts). */
const AUTH_REQUEST_HEADERS = Object.values(FORWARD_AUTH_IDENTITY_HEADERS)
/**
 * What the forward-auth overlays copy from the check's answer: the identity headers, then the
 * request-target and method overrides the proxy strips, which the answer never carries, so the
 * ingress removes the client's copy (header-policy.ts owns the list; compared lower-cased).
 */
const ANSWER_HEADERS = [...AUTH_REQUEST_HEADERS.map((name) => name.toLowerCase()), ...REQUEST_OVERRIDE_HEADER_NAMES]
const lowered = (names: readonly string[] | undefined): string[] | undefined => names?.map((name) => name.toLowerCase())

const KUSTOMIZATIONS = kustomizations()

const render = kustomize

function podSpecs(rendered: Rendered): [string, IPodSpec][] {
  return rendered.of<Deployment>('Deployment').map((d) => [d.metadata?.name ?? '', d.spec?.template.spec ?? { containers: [] }])
}

/** Keys whose values are secrets: each must be a ${VARIABLE} reference, never a value. */
const SECRET_KEYS = /^(clientSecret|secrets|password|redisUrl)$/

t.test('the code defaults the manifests are compared with', async (t) => {
  t.equal(HTTP_PORT, 8080, 'server.port has a default')
  t.equal(MANAGEMENT_PORT, 9091)
})

for (const dir of KUSTOMIZATIONS) {
  t.test(dir, async (t) => {
    const rendered = render(dir)

    t.test('every object validates against its API schema', async (t) => {
      t.same(schemaProblems(rendered.objects), [], `${rendered.objects.length} objects`)
    })

    t.test('no Secret and no secret value in any manifest', async (t) => {
      t.same(rendered.of('Secret').map((s) => (s as K8sObject).metadata.name), [], 'the operator creates the Secret')
      t.notMatch(JSON.stringify(rendered.objects), /"stringData"/, 'no stringData anywhere')
      for (const [name, pod] of podSpecs(rendered)) {
        for (const container of pod.containers) {
          for (const env of container.env ?? []) {
            if (!SECRET_LIKE.test(env.name)) continue
            t.ok(env.valueFrom?.secretKeyRef?.name && env.value === undefined, `${name}/${container.name}: ${env.name} from a secretKeyRef`)
          }
          t.same(container.envFrom ?? [], [], `${name}/${container.name}: no envFrom (every variable is named)`)
        }
      }
      const secrets = stringValues(YAML.parse(gateway(rendered).yamlText ?? '')).filter(({ key }) => SECRET_KEYS.test(key))
      t.ok(secrets.length >= 2, 'the configuration names its secrets (client secret, cookie secrets)')
      for (const { key, value } of secrets) t.match(value, /\$\{[A-Z_][A-Z0-9_]*\}/, `${key} comes from the environment`)
    })

    t.test('a restrictive securityContext for every container', async (t) => {
      for (const [name, pod] of podSpecs(rendered)) {
        t.equal(pod.automountServiceAccountToken, false, `${name}: no service account token`)
        for (const container of pod.containers) {
          const where = `${name}/${container.name}`
          const sc = container.securityContext ?? {}
          const podSc = pod.securityContext ?? {}
          t.equal(sc.runAsNonRoot ?? podSc.runAsNonRoot, true, `${where}: runAsNonRoot`)
          const user = sc.runAsUser ?? podSc.runAsUser
          t.ok(Number.isInteger(user) && (user ?? 0) > 0, `${where}: a numeric non-root runAsUser`)
          t.equal(sc.readOnlyRootFilesystem, true, `${where}: readOnlyRootFilesystem`)
          t.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation false`)
          t.same(sc.capabilities?.drop, ['ALL'], `${where}: drops ALL capabilities`)
          t.same(sc.capabilities?.add ?? [], [], `${where}: adds none`)
          t.equal((sc.seccompProfile ?? podSc.seccompProfile)?.type, 'RuntimeDefault', `${where}: seccomp RuntimeDefault`)
          t.notOk(sc.privileged, `${where}: not privileged`)
          t.ok(container.resources?.requests?.cpu && container.resources.requests.memory, `${where}: requests`)
          t.ok(container.resources?.limits?.memory, `${where}: memory limit`)
        }
      }
    })

    t.test('ports and probes agree with the code', async (t) => {
      const { container, deployment } = gateway(rendered)
      const { config } = gatewayConfig(rendered)
      t.equal(portNumber(container, 'http'), config.server.port, 'the http containerPort is server.port')
      t.equal(config.server.port, HTTP_PORT, 'server.port is the default')
      t.equal(portNumber(container, 'metrics'), MANAGEMENT_PORT, 'the metrics containerPort is the management port')
      t.equal(config.server.managementPort ?? MANAGEMENT_PORT, MANAGEMENT_PORT, 'the configuration keeps the management port')
      const live = container.livenessProbe?.httpGet
      const ready = container.readinessProbe?.httpGet
      t.equal(live?.path, '/healthz', 'liveness on /healthz')
      t.equal(portNumber(container, live?.port), MANAGEMENT_PORT, 'liveness on the management port')
      t.equal(ready?.path, '/readyz', 'readiness on /readyz')
      t.equal(portNumber(container, ready?.port), MANAGEMENT_PORT, 'readiness on the management port')
      if (container.startupProbe !== undefined) {
        t.equal(container.startupProbe.httpGet?.path, '/healthz', 'startup on /healthz')
        t.equal(portNumber(container, container.startupProbe.httpGet?.port), MANAGEMENT_PORT, 'startup on the management port')
      }
      const service = rendered.of<Service>('Service', 'openid-gateway')[0]
      const selector = service?.spec?.selector ?? {}
      const podLabels = deployment.spec?.template.metadata?.labels ?? {}
      t.ok(Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => podLabels[k] === v), 'the Service selects the gateway pods')
      const servicePort = (name: string) => service?.spec?.ports?.find((p) => p.name === name)
      t.equal(servicePort('http')?.port, HTTP_PORT, 'the Service publishes server.port as http')
      t.equal(portNumber(container, servicePort('http')?.targetPort), HTTP_PORT, 'to the gateway listener')
      t.equal(servicePort('metrics')?.port, MANAGEMENT_PORT, 'a separately named metrics port for a ServiceMonitor')
      t.equal(portNumber(container, servicePort('metrics')?.targetPort), MANAGEMENT_PORT, 'to the management listener')
    })

    t.test('a preStop sleep, then a drain that fits the grace period', async (t) => {
      const { container, pod } = gateway(rendered)
      const command = container.lifecycle?.preStop?.exec?.command ?? []
      t.equal(command[0], 'sleep', 'preStop sleeps (the endpoints stop sending before SIGTERM)')
      const sleepSeconds = Number(command[1])
      t.ok(sleepSeconds >= 3 && sleepSeconds <= 15, `a few seconds (${command[1]})`)
      const { shutdownTimeoutMs } = gatewayConfig(rendered).config.server
      const grace = pod.terminationGracePeriodSeconds ?? 30
      // A few seconds more to close the session store and exit after the drain.
      t.ok(grace >= sleepSeconds + shutdownTimeoutMs / 1000 + 3, `terminationGracePeriodSeconds ${grace} covers preStop ${sleepSeconds} s, the drain ${shutdownTimeoutMs / 1000} s and the exit`)
    })

    t.test('the mounted configuration is the one --config names, and it is valid', async (t) => {
      const { configPath, yamlText, container } = gateway(rendered)
      t.match(configPath, /^\/.+\.yaml$/, 'an absolute --config path')
      t.type(yamlText, 'string', `a ConfigMap key is mounted at ${configPath}`)
      t.ok(container.volumeMounts?.find((m) => m.mountPath === posix.dirname(configPath))?.readOnly, 'mounted read-only')
      const { names, envNames } = gatewayConfig(rendered)
      for (const name of names) t.ok(envNames.includes(name), `\${${name}} is set in the container`)
      t.ok(names.includes('OIDC_CLIENT_SECRET') && names.includes('COOKIE_SECRET'), 'both secrets from the environment')
      t.doesNotThrow(() => gatewayConfig(rendered), 'passes the gateway\'s validation')
    })

    t.test('the pod budget and the autoscaler fit the replicas', async (t) => {
      const { deployment } = gateway(rendered)
      const hpas = rendered.of<HorizontalPodAutoscaler>('HorizontalPodAutoscaler')
      const hpa = hpas[0]
      const pdb = rendered.of<PodDisruptionBudget>('PodDisruptionBudget', 'openid-gateway')[0]
      t.ok(hpas.every((h) => h.spec?.scaleTargetRef.name === 'openid-gateway'), 'an HPA, if any, scales the gateway')
      t.ok(pdb, 'a PodDisruptionBudget')
      // With an HPA the Deployment leaves replicas to it (a fixed count would fight the autoscaler).
      if (hpa !== undefined) t.equal(deployment.spec?.replicas, undefined, 'replicas left to the HPA')
      const fewest = hpa?.spec?.minReplicas ?? deployment.spec?.replicas ?? 1
      const most = hpa?.spec?.maxReplicas ?? deployment.spec?.replicas ?? 1
      const store = gatewayConfig(rendered).config.session.store
      const shared = store === 'redis'
      if (!shared) {
        t.equal(most, 1, 'without Redis one replica (sessions or revocations are per process)')
        t.not(pdb?.spec?.minAvailable, 1, 'one replica: the budget lets a drain through')
      } else {
        t.ok(fewest >= 2, 'two replicas or more')
        t.ok(most >= fewest, 'the HPA may add more')
        t.equal(pdb?.spec?.minAvailable, 1, 'the budget keeps one')
      }
    })
  })
}

t.test('sidecar: the application listens in the pod only, behind the gateway', async (t) => {
  t.same(sidecarProblems(render('overlays/sidecar')), [])
})

t.test('replicas-redis: sessions in Redis with its URL from the Secret', async (t) => {
  const rendered = render('overlays/replicas-redis')
  const { config } = gatewayConfig(rendered)
  t.equal(config.session.store, 'redis', 'session.store: redis')
  const redisUrl = gateway(rendered).yamlText?.match(/redisUrl: (.*)/)?.[1] ?? ''
  t.match(redisUrl, /\$\{REDIS_PASSWORD\}/, 'the password comes from the environment')
  const host = new URL(config.session.redisUrl ?? '').hostname
  t.ok(rendered.of<Service>('Service', host).length === 1, `a Service ${host} in the overlay`)
})

function forwardAuthConfig(rendered: Rendered) {
  const { config } = gatewayConfig(rendered)
  return { config, authUrl: `http://openid-gateway.${rendered.of<Deployment>('Deployment')[0]?.metadata?.namespace}.svc.cluster.local:${HTTP_PORT}/api/v1/openid/auth` }
}

function gatewayIngressServesPrefix(t: Test, rendered: Rendered, host: string) {
  const paths = rendered
    .of<Ingress>('Ingress')
    .flatMap((i) => i.spec?.rules ?? [])
    .filter((r) => r.host === host)
    .flatMap((r) => r.http?.paths ?? [])
  t.ok(
    paths.some((p) => p.path === '/api/v1/openid' && p.pathType === 'Prefix' && p.backend.service?.name === 'openid-gateway' && p.backend.service.port?.name === 'http'),
    'an Ingress sends /api/v1/openid on the gateway\'s host to the gateway',
  )
}

t.test('ingress-nginx: forward-auth annotations that match the gateway', async (t) => {
  const rendered = render('overlays/ingress-nginx')
  const { config, authUrl } = forwardAuthConfig(rendered)
  const app = rendered.of<Ingress>('Ingress').find((i) => i.metadata?.annotations?.['nginx.ingress.kubernetes.io/auth-url'] !== undefined)
  const annotations = app?.metadata?.annotations ?? {}
  t.equal(annotations['nginx.ingress.kubernetes.io/auth-url'], authUrl, 'auth-url is the gateway Service\'s check')
  t.equal(annotations['nginx.ingress.kubernetes.io/auth-signin'], `${config.server.publicUrl}${SIGN_IN_PATH}/redirect`, 'auth-signin is the sign-in endpoint')
  t.equal(annotations['nginx.ingress.kubernetes.io/auth-signin-redirect-param'], 'redirectAfter')
  t.same(
    lowered(annotations['nginx.ingress.kubernetes.io/auth-response-headers']?.split(',')),
    ANSWER_HEADERS,
    'auth-response-headers: every identity header of the check\'s answer and every request override (ingress-nginx overwrites a client\'s copy of each)',
  )
  const appHost = app?.spec?.rules?.[0]?.host ?? ''
  t.ok(config.cookies.domain && appHost.endsWith(`.${config.cookies.domain}`), 'cookies.domain covers the application\'s host')
  t.ok(new URL(config.server.publicUrl).hostname.endsWith(`.${config.cookies.domain}`), 'and the gateway\'s')
  t.ok(config.upstreams.some((u) => u.match.hosts?.includes(appHost)), 'an upstream names the application\'s host')
  gatewayIngressServesPrefix(t, rendered, new URL(config.server.publicUrl).hostname)
})

t.test('traefik: a ForwardAuth middleware used by the application\'s Ingress', async (t) => {
  const rendered = render('overlays/traefik')
  const { config, authUrl } = forwardAuthConfig(rendered)
  const middleware = rendered.of<Middleware>('Middleware')[0]
  t.equal(middleware?.spec?.forwardAuth?.address, authUrl, 'the address is the gateway Service\'s check')
  t.same(
    lowered(middleware?.spec?.forwardAuth?.authResponseHeaders),
    ANSWER_HEADERS,
    'authResponseHeaders: every identity header of the check\'s answer and every request override (Traefik removes a client\'s copy of each)',
  )
  t.notOk(middleware?.spec?.forwardAuth?.authSigninURL, 'no authSigninURL: the gateway itself answers a browser with 302 to the sign-in')
  t.notOk(middleware?.spec?.forwardAuth?.trustForwardHeader, 'the client\'s X-Forwarded-* are not trusted')
  const reference = `${middleware?.metadata?.namespace}-${middleware?.metadata?.name}@kubernetescrd`
  const app = rendered.of<Ingress>('Ingress').find((i) => i.metadata?.annotations?.['traefik.ingress.kubernetes.io/router.middlewares'] === reference)
  t.ok(app, `an Ingress uses ${reference}`)
  const appHost = app?.spec?.rules?.[0]?.host ?? ''
  t.ok(config.cookies.domain && appHost.endsWith(`.${config.cookies.domain}`), 'cookies.domain covers the application\'s host')
  gatewayIngressServesPrefix(t, rendered, new URL(config.server.publicUrl).hostname)
})

t.test('Dockerfile', async (t) => {
  const text = readFileSync(DOCKERFILE, 'utf8').replace(/\\\n/g, ' ')
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  const stages: string[][] = []
  for (const line of lines) {
    if (/^FROM\s/i.test(line)) stages.push([])
    stages.at(-1)?.push(line)
  }
  t.ok(stages.length >= 2, 'multi-stage')
  // The official Node image, pinned by version and digest; a build argument, so that CI builds on
  // the base docker/build-image.sh assembles.
  t.match(lines[0], /^ARG BASE_IMAGE=node:\d+\.\d+\.\d+-bookworm-slim@sha256:[0-9a-f]{64}$/, 'the base image is pinned by version and digest')
  const names = stages.map((stage) => /\sAS\s+(\w+)$/i.exec(stage[0] ?? '')?.[1])
  stages.slice(0, -1).forEach((stage, i) => {
    const from = /^FROM (\S+)/i.exec(stage[0] ?? '')?.[1]
    t.ok(from === '${BASE_IMAGE}' || names.slice(0, i).includes(from), `stage ${names[i]} is on the base or an earlier stage`)
  })
  const final = stages.at(-1) ?? []
  // Built from nothing: only what the gateway runs, no shell, no npm (test/image/stays-small.test.ts).
  t.equal(final[0], 'FROM scratch', 'the final stage starts from nothing')
  t.notOk(final.some((l) => /^RUN\s/.test(l)), 'and runs nothing (it has no shell)')
  const all = stages.flat()
  t.ok(all.some((l) => /^RUN .*\bnpm ci\b/.test(l)), 'the dependencies are installed from the lockfile')
  t.ok(all.some((l) => /^RUN npm run build\b/.test(l)), 'the gateway is built')
  t.ok(all.some((l) => /^RUN npm prune --omit=dev\b.*trim-modules\.mjs/.test(l)), 'the production dependencies only, trimmed')
  t.ok(final.some((l) => /^COPY --from=\S+ \S*build\S* /.test(l)), 'the final stage takes build/ from the build stage')
  t.notOk(final.some((l) => /^COPY (\.|src|\.\/src)\s/.test(l)), 'no sources or whole context in the final stage')
  // The image's configuration is root's, read by the runtime user through its group and by no
  // one else (test/image/runs-unprivileged.test.ts proves the user can change nothing there).
  const userLine = final.filter((l) => /^USER\s/i.test(l)).at(-1) ?? ''
  const gid = /^USER \d+:(\d+)$/.exec(userLine)?.[1]
  t.ok(final.includes(`COPY --from=runtime --chown=0:${gid} /config ./config`), "config/ is root's, group the runtime user's")
  t.ok(
    all.some((l) => /^RUN .*find \/config -type d -exec chmod 0550 \{\} \+ && find \/config -type f -exec chmod 0440 \{\} \+/.test(l)),
    'its files 0440 and its directories 0550',
  )
  t.notOk(final.some((l) => /^COPY\b.*--chown/.test(l) && /\sbuild\b/.test(l)), 'the code is not the runtime user\'s')
  const users = final.filter((l) => /^USER\s/i.test(l))
  t.match(users.at(-1), /^USER [1-9]\d*(:[1-9]\d*)?$/, 'a numeric non-root USER')
  const healthcheck = final.find((l) => /^HEALTHCHECK\s/i.test(l)) ?? ''
  t.match(
    healthcheck,
    new RegExp(`CMD \\["node", "-e", ".*fetch\\('http://127\\.0\\.0\\.1:'\\+\\(process\\.env\\.MANAGEMENT_PORT\\|\\|${MANAGEMENT_PORT}\\)\\+'/healthz'`),
    'HEALTHCHECK fetches /healthz on the management port with node: MANAGEMENT_PORT, as config/gateway.yaml reads it, else the default',
  )
  const shipped = readFileSync(new URL('../../config/gateway.yaml', import.meta.url), 'utf8')
  t.match(shipped, new RegExp(`managementPort: \\$\\{MANAGEMENT_PORT:-${MANAGEMENT_PORT}\\}`), 'the image\'s configuration reads the same variable with the same default')
  for (const line of lines.filter((l) => /^(ENV|ARG)\s/i.test(l))) t.notMatch(line, SECRET_LIKE, `no secret in the image: ${line}`)
  // The management listener is 127.0.0.1 by default, every address in the image (probes).
  t.ok(final.includes('ENV OPENID_GATEWAY_MANAGEMENT_HOST=0.0.0.0'), 'the image serves the management listener to its pod')
})
