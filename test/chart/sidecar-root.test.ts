import t from 'tap'
import { render, template } from '../fixtures/chart.ts'
import { gatewayContainerProblems, podSecurityProblems } from '../fixtures/k8s-checks.ts'
import { gateway, sidecarProblems } from '../fixtures/k8s-objects.ts'

// Sidecar mode hosts a legacy application that runs as root: each extra container keeps its own
// securityContext, the pod's securityContext is only every container's default (runAsNonRoot may
// be false there), and the gateway's container stays non-root, read-only and without privilege
// on its own securityContext, which the schema holds. A root container that runAsNonRoot would
// stop at the kubelet is refused at `helm template`, naming the setting to change.

const EXAMPLE = 'sidecar-root.yaml'

t.test(`${EXAMPLE}: the root application renders and passes the chart's checks`, async (t) => {
  const rendered = render([EXAMPLE])
  const { pod, container } = gateway(rendered)
  t.same(podSecurityProblems(pod), [], "the pod's checks")
  t.same(sidecarProblems(rendered), [], 'the application is reachable through the gateway alone')
  t.same(gatewayContainerProblems(container), [], "the gateway's container is locked down on its own")
  const app = pod.containers.find((c) => c.name === 'app')
  t.equal(app?.securityContext?.runAsUser, 0, 'the application runs as root')
  t.equal(app?.securityContext?.runAsNonRoot, false, 'runAsNonRoot relaxed for it alone')
  t.equal(pod.securityContext?.runAsNonRoot, true, "the pod's default stays non-root")
})

t.test("the pod's runAsNonRoot may be false; the gateway's container is not moved by it", async (t) => {
  const rendered = render([EXAMPLE], { podSecurityContext: { runAsNonRoot: false, runAsUser: 0, runAsGroup: 0, fsGroup: 0 } })
  const { pod, container } = gateway(rendered)
  t.equal(pod.securityContext?.runAsNonRoot, false, 'accepted by the schema')
  t.same(gatewayContainerProblems(container), [], 'the gateway container: non-root 1000, read-only, no capability, RuntimeDefault')
  t.same(podSecurityProblems(pod), [])
})

t.test('refused: a root container left under runAsNonRoot', async (t) => {
  const app = { runAsUser: 0, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } }
  const sidecar = template([EXAMPLE], { extraContainers: [{ name: 'app', image: 'legacy-root-app:2.3', securityContext: app }] })
  t.not(sidecar.status, 0, 'helm template fails')
  t.match(
    sidecar.stderr,
    /extraContainers\[0\] \(app\) runs as root \(runAsUser 0\) but runAsNonRoot is true for it \(podSecurityContext\): the kubelet would refuse to start it\. Set runAsNonRoot: false in its own securityContext/,
    'naming the container and the setting',
  )
  const init = template([EXAMPLE], { extraInitContainers: [{ name: 'chown', image: 'busybox', securityContext: { ...app, runAsNonRoot: true } }] })
  t.match(
    init.stderr,
    /extraInitContainers\[0\] \(chown\) runs as root \(runAsUser 0\) but runAsNonRoot is true for it \(its securityContext\)/,
    'init containers too',
  )
})

t.test("refused: the gateway's container relaxed like the application's", async (t) => {
  for (const [key, value] of [
    ['runAsNonRoot', false],
    ['runAsUser', 0],
    ['readOnlyRootFilesystem', false],
  ] as const) {
    const result = template([EXAMPLE], { securityContext: { [key]: value } })
    t.match(result.stderr, new RegExp(`/securityContext/${key}`), `securityContext.${key}: ${String(value)}`)
  }
})
