// Trims an installed production node_modules to what Node can load, for the image's final stage
// (docker/Dockerfile): `node trim-modules.mjs <node_modules>`. Prints what it removed.
//
// What goes, and why it can never be loaded by the gateway:
// - source maps, TypeScript sources and declarations (*.map, *.ts, *.mts, *.cts, *.d.ts): Node
//   runs no TypeScript under node_modules (type stripping refuses it there) and reads maps only
//   with --enable-source-maps, which the image does not set;
// - documentation (*.md, *.markdown) and each package's own test, docs, example and benchmark
//   folders at its root, and its CI settings (.github);
// - the alternative builds some packages ship beside their Node one (build/esm, build/esnext,
//   browser): only when neither `main` nor any `exports` target Node picks (conditions node,
//   import or require, module-sync, default; in each conditions object the first one Node
//   matches) lies inside them. Node ignores the `module`,
//   `esnext` and `browser` fields those builds are published for
//   (https://nodejs.org/api/packages.html#conditional-exports);
// - the .bin links (commands, never run in the image) and the folders left empty.
// Licence and notice files stay whatever their extension: the packages' licences travel with
// their code.

import { existsSync, lstatSync, readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'

const root = process.argv[2]
if (root === undefined || !existsSync(join(root, '.package-lock.json'))) {
  console.error('usage: node trim-modules.mjs <an installed node_modules folder>')
  process.exit(2)
}

const KEEP_FILE = /^(licen[cs]e|notice|copying|authors|patents)/i
const DROP_FILE = /\.(map|ts|mts|cts|md|markdown|tsbuildinfo)$/i
const DROP_AT_PACKAGE_ROOT = ['test', 'tests', '__tests__', 'docs', 'doc', 'example', 'examples', 'benchmark', 'benchmarks', 'bench', '.github', 'coverage']
const ALTERNATIVE_BUILDS = ['build/esm', 'build/esnext', 'browser']
// Node's conditions for an import and for a require (Node 22.12 and later also match module-sync).
const NODE_CONDITIONS = [new Set(['node', 'import', 'module-sync', 'default']), new Set(['node', 'require', 'module-sync', 'default'])]

let bytes = 0
let files = 0
function size(path) {
  const stat = lstatSync(path)
  if (!stat.isDirectory()) return (files++, stat.size)
  return readdirSync(path).reduce((sum, entry) => sum + size(join(path, entry)), 0)
}
function remove(path) {
  bytes += size(path)
  rmSync(path, { recursive: true, force: true })
}

/** Every package folder under a node_modules folder, nested ones included. */
function packages(dir) {
  const found = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue
    const path = join(dir, entry.name)
    if (entry.name.startsWith('@')) found.push(...packages(path))
    else if (existsSync(join(path, 'package.json'))) {
      found.push(path)
      if (existsSync(join(path, 'node_modules'))) found.push(...packages(join(path, 'node_modules')))
    }
  }
  return found
}

/**
 * The files Node may start a package from: `main`, and each `exports` target Node picks, for an
 * import and for a require (in a conditions object the first key Node matches wins).
 */
function entryPoints(manifest) {
  const targets = [manifest.main ?? 'index.js']
  const collect = (value, conditions) => {
    if (typeof value === 'string') targets.push(value)
    else if (Array.isArray(value)) value.forEach((inner) => collect(inner, conditions))
    else if (value !== null && typeof value === 'object') {
      const keys = Object.keys(value)
      if (keys.some((key) => key.startsWith('.'))) for (const key of keys) collect(value[key], conditions)
      else {
        const chosen = keys.find((key) => conditions.has(key))
        if (chosen !== undefined) collect(value[chosen], conditions)
      }
    }
  }
  for (const conditions of NODE_CONDITIONS) collect(manifest.exports, conditions)
  return targets.map((target) => target.replace(/^\.\//, ''))
}

function walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) {
      walk(path)
      if (readdirSync(path).length === 0) rmdirSync(path)
    } else if (DROP_FILE.test(entry.name) && !KEEP_FILE.test(entry.name)) remove(path)
  }
}

for (const pkg of packages(root)) {
  for (const dir of DROP_AT_PACKAGE_ROOT) if (existsSync(join(pkg, dir))) remove(join(pkg, dir))
  const entries = entryPoints(JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')))
  for (const dir of ALTERNATIVE_BUILDS)
    if (existsSync(join(pkg, dir)) && !entries.some((entry) => entry === dir || entry.startsWith(`${dir}/`))) remove(join(pkg, dir))
}
if (existsSync(join(root, '.bin'))) remove(join(root, '.bin'))
walk(root)
console.log(`trim-modules: removed ${files} files, ${(bytes / 1e6).toFixed(1)} MB, from ${root}`)
