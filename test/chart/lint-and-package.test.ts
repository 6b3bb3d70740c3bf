import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import YAML from 'yaml'
import { CHART, EXAMPLES, EXAMPLE_FILES, helm, render, template } from '../fixtures/chart.ts'

// `helm lint --strict` passes on the chart's own defaults and with every values example (lint
// renders past `fail`, so only the schema and the objects' shape can fail it), and `helm template`
// of the bare defaults is refused by the chart's own words (publicUrl is required), never by a
// schema pattern on ''; `helm package` produces the archive the release publishes, whose
// appVersion (the image tag) is package.json's version and which renders as the folder does.

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
const chart = YAML.parse(readFileSync(`${CHART}Chart.yaml`, 'utf8')) as { name: string; version: string; appVersion: string; apiVersion: string }

t.test('Chart.yaml', async (t) => {
  t.equal(chart.apiVersion, 'v2', 'a Helm 3+ chart')
  t.equal(chart.name, 'openid-gateway')
  t.equal(chart.appVersion, pkg.version, "appVersion, the default image tag, is package.json's version")
})

t.test('helm lint --strict on the defaults and with every values example', async (t) => {
  const defaults = helm(['lint', '--strict', CHART])
  t.equal(defaults.status, 0, `the defaults: ${defaults.stderr}`)
  for (const example of EXAMPLE_FILES) {
    const result = helm(['lint', '--strict', CHART, '-f', `${EXAMPLES}${example}`])
    t.equal(result.status, 0, `${example}: ${result.stderr}`)
  }
})

t.test('the bare defaults are refused at template time, saying publicUrl is required', async (t) => {
  const result = template([])
  t.not(result.status, 0, 'helm template fails')
  t.match(result.stderr, /publicUrl is required: the gateway's public origin/, "in the chart's words")
  t.notMatch(result.stderr, /does not match pattern/, 'not as a schema pattern error')
})

t.test('helm package produces the archive, which renders as the folder does', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'chart-package-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const result = helm(['package', CHART, '--destination', dir])
  t.equal(result.status, 0, result.stderr)
  const archive = join(dir, `openid-gateway-${chart.version}.tgz`)
  const list = spawnSync('tar', ['-tzf', archive], { encoding: 'utf8' })
  t.equal(list.status, 0, `${archive} is a gzipped tar`)
  const files = list.stdout.split('\n').filter(Boolean)
  for (const file of [
    'Chart.yaml',
    'values.yaml',
    'values.schema.json',
    'README.md',
    'templates/NOTES.txt',
    'templates/deployment.yaml',
    'examples/quickstart-envoy-gateway.yaml',
  ]) {
    t.ok(files.includes(`openid-gateway/${file}`), `it holds ${file}`)
  }
  const fromArchive = render(['quickstart-envoy-gateway.yaml'], undefined, archive)
  const fromFolder = render(['quickstart-envoy-gateway.yaml'])
  t.same(fromArchive.objects, fromFolder.objects, 'the quickstart renders the same objects from the archive')
})
