import t from 'tap'
import { type Values, template } from '../fixtures/chart.ts'

// A wrong value fails `helm template` (and so `helm install`) naming it: values.schema.json for
// a misspelt key, a wrong type or a weaker securityContext, the chart's `fail` for a combination
// that would run unsafely (several replicas without shared sessions, a check whose refreshed
// cookie never reaches the browser, a cookie that one host would not receive, a drain longer
// than the grace period). Each case is one helm run on the Envoy Gateway quickstart plus one change.

const BASE = ['quickstart-envoy-gateway.yaml']

const REFUSED: [string, Values, RegExp][] = [
  // values.schema.json
  ['a misspelt top-level value', { replicaCont: 2 }, /additional properties 'replicaCont' not allowed/],
  ['a misspelt nested value', { envoyGateway: { timout: '3s' } }, /\/envoyGateway.*additional properties 'timout' not allowed/],
  ['runAsNonRoot false', { securityContext: { runAsNonRoot: false } }, /\/securityContext\/runAsNonRoot/],
  ["the gateway's runAsUser 0", { securityContext: { runAsUser: 0 } }, /\/securityContext\/runAsUser/],
  ["the gateway's runAsUser left to the pod", { securityContext: { runAsUser: null } }, /\/securityContext.*runAsUser/],
  ['a writable root filesystem', { securityContext: { readOnlyRootFilesystem: false } }, /\/securityContext\/readOnlyRootFilesystem/],
  ['privilege escalation', { securityContext: { allowPrivilegeEscalation: true } }, /\/securityContext\/allowPrivilegeEscalation/],
  ['an added capability', { securityContext: { capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } } }, /\/securityContext\/capabilities\/add/],
  ['seccomp Unconfined', { securityContext: { seccompProfile: { type: 'Unconfined' } } }, /\/securityContext\/seccompProfile\/type/],
  ['a publicUrl with a path', { publicUrl: 'https://app.example.com/app' }, /\/publicUrl/],
  ['an unknown protocol', { envoyGateway: { protocol: 'grcp' } }, /\/envoyGateway\/protocol/],
  ['a short cookie secret', { secrets: { existingSecret: '', clientSecret: 'x', cookieSecrets: ['short'] } }, /\/secrets\/cookieSecrets\/0/],
  ['a digest that is not sha256', { image: { digest: 'latest' } }, /\/image\/digest/],
  ['a Redis node without a port', { redis: { enabled: true, cluster: { nodes: ['redis-0'] } } }, /\/redis\/cluster\/nodes\/0/],
  // the chart's fail
  ['no publicUrl', { publicUrl: '' }, /publicUrl is required: the gateway's public origin/],
  ['no provider', { config: { provider: null } }, /config\.provider is required/],
  ['no cookie secret', { secrets: { existingSecret: '' } }, /secrets\.existingSecret or secrets\.cookieSecrets is required/],
  ['two replicas without Redis', { replicaCount: 2 }, /replicaCount is 2 but sessions are not shared/],
  [
    'autoscaling without Redis',
    { autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 4 } },
    /autoscaling\.maxReplicas is 4 but sessions are not shared/,
  ],
  [
    'an autoscaler whose minimum exceeds its maximum',
    { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 1 } },
    /autoscaling\.minReplicas \(3\) exceeds autoscaling\.maxReplicas \(1\)/,
  ],
  ['Redis in two ways', { redis: { enabled: true, url: 'redis://r:6379/0', cluster: { nodes: ['r:6379'] } } }, /exactly one of redis\.url/],
  ['Envoy Gateway and GEP-1494 at once', { httpRoute: { enabled: true, parentRefs: [{ name: 'eg' }] } }, /envoyGateway\.enabled and httpRoute\.enabled/],
  ['no Gateway to attach to', { envoyGateway: { parentRefs: [] } }, /envoyGateway\.parentRefs is required/],
  ['cookie sessions behind an HTTP check', { config: { session: { store: 'cookie' } } }, /config\.session\.store cookie/],
  [
    'a cookie domain that misses a host',
    { envoyGateway: { enabled: false }, ingressNginx: { enabled: true }, app: { host: 'app.example.org' } },
    /config\.cookies\.domain must cover both/,
  ],
  ['another server.port', { config: { server: { port: 8081 } } }, /config\.server\.port must stay 8080/],
  ['a grace period shorter than the drain', { terminationGracePeriodSeconds: 10 }, /terminationGracePeriodSeconds \(10\) must cover/],
]

for (const [what, values, expected] of REFUSED) {
  t.test(`refused: ${what}`, async (t) => {
    const result = template(BASE, values)
    t.not(result.status, 0, 'helm template fails')
    t.match(result.stderr, expected, 'naming the value')
  })
}

t.test('accepted: the same quickstart unchanged', async (t) => {
  const result = template(BASE, {})
  t.equal(result.status, 0, result.stderr)
})
