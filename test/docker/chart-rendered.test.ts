import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import YAML from 'yaml'
import { K8S, kustomizations, MESH_CONFIG, REGENERATE, RENDERED, renderChartPart, renderMeshConfig } from '../fixtures/kustomize.ts'

// One source for the manifests: every kustomization under docker/k8s takes the gateway's objects
// from the chart (its chart-rendered.yaml is exactly what `helm template` renders from the chart
// and the kustomization's values.yaml, so a change of either without `npm run manifests` fails
// here), written for current kustomize (resources and patches; none of the fields kustomize v5
// deprecates). What a kustomization adds of its own never declares the chart's objects again: a
// Deployment, Service or ConfigMap of the chart appears in its resources only through
// chart-rendered.yaml, and elsewhere only as a patch. The istio overlay's mesh-config.yaml is the
// meshConfig the chart's NOTES.txt prints, generated likewise.
// UPDATE_MANIFESTS=1 (`npm run manifests`) writes the renderings instead of comparing them.

const UPDATE = process.env.UPDATE_MANIFESTS === '1'
/** kustomize v5's deprecated fields (`kustomize edit fix` rewrites them). */
const DEPRECATED = ['bases', 'patchesStrategicMerge', 'patchesJson6902', 'commonLabels', 'vars', 'imageTags']

interface Kustomization {
  apiVersion?: string
  kind?: string
  resources?: string[]
  patches?: { path?: string; patch?: string }[]
  [field: string]: unknown
}
type K8sObject = { kind?: string; metadata?: { name?: string } }

const documents = (text: string): K8sObject[] => YAML.parseAllDocuments(text).map((d) => d.toJS() as K8sObject).filter((o) => o !== null)

for (const dir of kustomizations()) {
  t.test(dir, async (t) => {
    const file = join(K8S, dir, RENDERED)
    const expected = renderChartPart(dir)
    if (UPDATE) writeFileSync(file, expected)
    t.ok(existsSync(file), `${RENDERED} exists`)
    t.ok(existsSync(file) && readFileSync(file, 'utf8') === expected, `${RENDERED} is the chart's rendering of values.yaml (run \`${REGENERATE}\`)`)

    // Istio's extension providers, as the chart's NOTES.txt prints them for these values.
    const mesh = renderMeshConfig(dir)
    const meshFile = join(K8S, dir, MESH_CONFIG)
    if (UPDATE && mesh !== undefined) writeFileSync(meshFile, mesh)
    if (mesh !== undefined) t.ok(existsSync(meshFile) && readFileSync(meshFile, 'utf8') === mesh, `${MESH_CONFIG} is the chart's meshConfig (run \`${REGENERATE}\`)`)
    else t.notOk(existsSync(meshFile), `no ${MESH_CONFIG} without Istio`)

    const kustomization = YAML.parse(readFileSync(join(K8S, dir, 'kustomization.yaml'), 'utf8')) as Kustomization
    t.equal(kustomization.kind, 'Kustomization', 'a Kustomization of kustomize.config.k8s.io/v1beta1')
    t.same(DEPRECATED.filter((field) => field in kustomization), [], 'no field kustomize v5 deprecates')
    t.equal(kustomization.resources?.[0], RENDERED, `its first resource is ${RENDERED}`)

    const chartObjects = new Set(documents(expected).map((o) => `${o.kind}/${o.metadata?.name}`))
    const own = (kustomization.resources ?? []).slice(1)
    for (const resource of own) {
      t.notOk(existsSync(join(K8S, dir, resource, 'kustomization.yaml')), `${resource} is a file of the overlay, not another kustomization`)
      const again = documents(readFileSync(join(K8S, dir, resource), 'utf8')).filter((o) => chartObjects.has(`${o.kind}/${o.metadata?.name}`))
      t.same(again.map((o) => `${o.kind}/${o.metadata?.name}`), [], `${resource} declares none of the chart's objects`)
    }
    const used = new Set([...(kustomization.resources ?? []), ...(kustomization.patches ?? []).flatMap((p) => (p.path === undefined ? [] : [p.path]))])
    const unused = readdirSync(join(K8S, dir)).filter((f) => f.endsWith('.yaml') && !['kustomization.yaml', 'values.yaml'].includes(f) && !used.has(f))
    // Istio's mesh configuration is installed with Istio: the one file an overlay keeps unapplied.
    t.same(unused.filter((f) => !(mesh !== undefined && f === MESH_CONFIG)), [], 'every file is used')
  })
}
