import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import YAML from 'yaml'
import { CHART, EXAMPLES, EXAMPLE_FILES } from '../fixtures/chart.ts'
import { ROOT, fencedBlocks } from '../fixtures/markdown.ts'

// What a reader copies cannot drift from what the chart tests render: every values block of
// docs/deploy/kubernetes.md's quickstarts is, byte for byte, the example file it names, each
// platform's quickstart is there, and its helm commands name the chart (the OCI reference or the
// folder) and the namespace the Secret was created in. The chart README documents every value of
// values.yaml, names no value it lacks, and lists every example; values.schema.json knows every
// value of values.yaml.

const PAGE = 'docs/deploy/kubernetes.md'
const text = readFileSync(join(ROOT, PAGE), 'utf8')
const blocks = fencedBlocks({ file: PAGE, text } as never)
const QUICKSTARTS = ['quickstart-envoy-gateway.yaml', 'quickstart-istio.yaml', 'quickstart-traefik.yaml']

/** Removes the indentation a list item gives a fenced block. */
function dedent(body: string): string {
  const indent = Math.min(
    ...body
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => /^ */.exec(l)?.[0].length ?? 0),
  )
  return body
    .split('\n')
    .map((l) => l.slice(indent))
    .join('\n')
}

t.test(`${PAGE}: each values block is the example it names`, async (t) => {
  const lines = text.split('\n')
  const shown = new Set<string>()
  for (const block of blocks.filter((b) => b.lang === 'yaml')) {
    // The prose just before the block names the file.
    const before = lines.slice(Math.max(0, block.line - 5), block.line - 1).join(' ')
    const name = /charts\/openid-gateway\/examples\/([a-z0-9-]+\.yaml)/.exec(before)?.[1]
    if (name === undefined) continue
    shown.add(name)
    t.ok(existsSync(`${EXAMPLES}${name}`), `${name} exists`)
    t.equal(dedent(block.body), readFileSync(`${EXAMPLES}${name}`, 'utf8'), `the block at line ${block.line} is ${name}`)
  }
  for (const name of QUICKSTARTS) t.ok(shown.has(name), `the page shows ${name}`)
  const first = /^## (.*)$/m.exec(text)?.[1]
  t.equal(first, 'Quickstart: Envoy Gateway', 'the page opens with the Envoy Gateway quickstart')
})

t.test(`${PAGE}: the Envoy Gateway quickstart's commands`, async (t) => {
  const section = text.slice(text.indexOf('## Quickstart: Envoy Gateway'), text.indexOf('## Quickstart: Istio'))
  const shell = fencedBlocks({ file: PAGE, text: section } as never)
    .filter((b) => b.lang === 'sh')
    .map((b) => dedent(b.body).replace(/\\\n\s*/g, ''))
    .join('\n')
  const values = YAML.parse(readFileSync(`${EXAMPLES}quickstart-envoy-gateway.yaml`, 'utf8')) as { publicUrl: string; secrets: { existingSecret: string } }
  const secret = /kubectl -n (\S+) create secret generic (\S+) (.*)/.exec(shell)
  t.equal(secret?.[2], values.secrets.existingSecret, 'the Secret created is secrets.existingSecret')
  t.match(secret?.[3], /--from-literal=client-secret=/, 'with the key client-secret')
  t.match(secret?.[3], /--from-literal=cookie-secret="\$\(openssl rand -base64 32\)"/, 'and a random cookie-secret')
  const installs = [...shell.matchAll(/^helm install openid-gateway (\S+) .*-n (\S+) -f values\.yaml/gm)]
  t.same(
    installs.map((m) => m[1]),
    ['oci://ghcr.io/openid-gateway/charts/openid-gateway', 'charts/openid-gateway'],
    'from the OCI chart, or from the folder of a clone',
  )
  t.ok(
    installs.every((m) => m[2] === secret?.[1]),
    "into the Secret's namespace",
  )
  t.ok(existsSync(join(ROOT, 'charts/openid-gateway/Chart.yaml')), 'the folder is a chart')
  t.match(section, `${values.publicUrl}/api/v1/openid/callback`, "the redirect URI to register is publicUrl's")
  t.equal(
    dedent(readFileSync(`${EXAMPLES}quickstart-envoy-gateway.yaml`, 'utf8')).split('www.example.com').length - 1,
    1,
    'the values name the public hostname once',
  )
})

/** Every leaf path of a values tree (lists and empty maps are leaves). */
function leaves(tree: unknown, prefix = ''): string[] {
  if (tree === null || typeof tree !== 'object' || Array.isArray(tree) || Object.keys(tree).length === 0) return [prefix]
  return Object.entries(tree as Record<string, unknown>).flatMap(([k, v]) => leaves(v, prefix === '' ? k : `${prefix}.${k}`))
}

t.test('charts/openid-gateway/README.md documents every value, and only those', async (t) => {
  const readme = readFileSync(`${CHART}README.md`, 'utf8')
  const values = YAML.parse(readFileSync(`${CHART}values.yaml`, 'utf8')) as Record<string, unknown>
  const documented = [...readme.matchAll(/^\| `([A-Za-z0-9.]+)` \|/gm)].map((m) => m[1] ?? '').filter((name) => !name.endsWith('.yaml'))
  const paths = leaves(values)
  const covered = (path: string) => documented.some((d) => path === d || path.startsWith(`${d}.`))
  t.same(
    paths.filter((p) => !covered(p)),
    [],
    'every value of values.yaml is in the table (itself or its parent)',
  )
  t.same(
    documented.filter((d) => !paths.some((p) => p === d || p.startsWith(`${d}.`))),
    [],
    'the table names no value values.yaml lacks',
  )
  for (const example of EXAMPLE_FILES) t.match(readme, `\`${example}\``, `the README lists ${example}`)
  type SchemaNode = { properties?: Record<string, SchemaNode> }
  const schema = JSON.parse(readFileSync(`${CHART}values.schema.json`, 'utf8')) as SchemaNode
  const unknown = paths.filter((p) => {
    let node: SchemaNode | undefined = schema
    for (const part of p.split('.')) {
      if (node.properties === undefined) return false // a free-form object below here
      node = node.properties[part]
      if (node === undefined) return true
    }
    return false
  })
  t.same(unknown, [], 'values.schema.json knows every value of values.yaml')
})
