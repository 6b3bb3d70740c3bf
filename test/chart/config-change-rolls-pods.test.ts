import type { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import type { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import t from 'tap'
import { RELEASE, type Values, render } from '../fixtures/chart.ts'
import type { Rendered } from '../fixtures/k8s-objects.ts'

// How a changed configuration reaches running pods. With configReload: live (the default) the
// mounted ConfigMap changes in place and server.watchConfig reloads it
// (test/chart/config-live-reload.test.ts): the pod template must NOT change for an ordinary edit,
// or every edit would restart the pods, but must change for a key the live reload refuses
// (server ports, workers, the session store...), which only a restart applies. With
// configReload: restart, every edit changes it. A Secret created from values reaches the pods
// through environment variables, read at start: its change rolls them too.

const BASE = ['secret-from-values.yaml']
const LIVE = { configReload: 'live' }
const rule = (auth: string) => ({ config: { upstreams: [{ name: 'app', target: 'http://app.auth.svc.cluster.local:80', auth }] } })

function podAnnotations(r: Rendered): Record<string, string> {
  return r.of<Deployment>('Deployment', RELEASE)[0]?.spec?.template.metadata?.annotations ?? {}
}
function configText(r: Rendered): string | undefined {
  return r.of<ConfigMap>('ConfigMap')[0]?.data?.['gateway.yaml']
}
function renderWith(...values: Values[]): Rendered {
  return render(BASE, Object.assign({}, ...values) as Values)
}

const live = renderWith(LIVE, rule('required'))
const liveEdited = renderWith(LIVE, rule('none'))
const liveRestartKey = renderWith(LIVE, rule('required'), { config: { ...rule('required').config, server: { workers: 2 } } })
const restart = renderWith(rule('required'))
const restartEdited = renderWith(rule('none'))
const otherSecret = renderWith(rule('required'), {
  secrets: {
    cookieSecretKeys: ['cookie-secret', 'cookie-secret-previous'],
    clientSecret: 'another-client-secret',
    cookieSecrets: ['replace-me-with-32-random-bytes-base64-00000', 'the-previous-cookie-secret-00000000000000'],
  },
})

t.test('live: an edit changes the mounted file, not the pod template', async (t) => {
  t.not(configText(live), configText(liveEdited), 'the ConfigMap changed')
  t.match(configText(live), /watchConfig: true/, 'server.watchConfig is on')
  t.same(
    liveEdited.of<Deployment>('Deployment')[0]?.spec?.template,
    live.of<Deployment>('Deployment')[0]?.spec?.template,
    'the pod template is the same: no restart',
  )
  t.ok(podAnnotations(live)['checksum/config-restart-keys'], 'the keys a reload refuses are hashed')
  t.equal(podAnnotations(live)['checksum/config'], undefined, 'the whole file is not')
})

t.test('live: a key the reload refuses rolls the pods', async (t) => {
  t.not(
    podAnnotations(liveRestartKey)['checksum/config-restart-keys'],
    podAnnotations(live)['checksum/config-restart-keys'],
    'server.workers changes the annotation',
  )
})

t.test('restart: every edit rolls the pods', async (t) => {
  t.ok(podAnnotations(restart)['checksum/config'], 'the whole file is hashed')
  t.not(podAnnotations(restartEdited)['checksum/config'], podAnnotations(restart)['checksum/config'], 'an edit changes the annotation')
  t.notMatch(configText(restart), /watchConfig/, 'no live reload')
})

t.test('a Secret created from values rolls the pods when it changes', async (t) => {
  t.ok(podAnnotations(restart)['checksum/secret'], 'the Secret is hashed')
  t.not(podAnnotations(otherSecret)['checksum/secret'], podAnnotations(restart)['checksum/secret'], 'another client secret changes the annotation')
})

t.test("an existing Secret is the operator's: nothing to hash", async (t) => {
  const r = render(['quickstart-envoy-gateway.yaml'])
  t.equal(podAnnotations(r)['checksum/secret'], undefined)
  t.equal(r.of('Secret').length, 0)
})
