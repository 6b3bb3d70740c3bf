import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { buildImage, describeBuild } from '../fixtures/image.ts'
import { execute, run, runIn } from '../fixtures/image-base.ts'

// The image holds only what the gateway runs, and is at most 160 MB unpacked.
//
// How the size is measured: the image is copied out of buildah's storage with its layers
// uncompressed (`buildah push --disable-compression <id> dir:<folder>`), and the sizes its
// manifest gives those layers are added up. Each layer is then the tar of its files, as a container
// engine unpacks it: the unpacked size, to within tar's headers (what `docker images` and
// `buildah images` show, rounded). The files inside are listed by node in a container of the image:
// no shell, no npm, no package manager; only node and the libraries it links are executables;
// the production dependencies without maps, declarations or documentation; and what is left
// loads: every module of the gateway and every production dependency.

t.setTimeout(15 * 60_000)

/** 160 MB, in the decimal units `docker images` uses. */
const LIMIT = 160e6

// Lists every file as the image's user sees it, but /proc, /sys and /dev (the engine's).
const LIST = `
const fs = require('node:fs'), path = require('node:path')
const files = []
const walk = (p) => {
  const st = fs.lstatSync(p)
  if (st.isDirectory()) { for (const e of fs.readdirSync(p)) { const c = path.join(p, e); if (!['/proc', '/sys', '/dev'].includes(c)) walk(c) } return }
  let elf = false
  if (st.isFile() && st.size >= 4) { const fd = fs.openSync(p, 'r'); const b = Buffer.alloc(4); fs.readSync(fd, b, 0, 4, 0); fs.closeSync(fd); elf = b.toString('latin1') === '\\x7fELF' }
  files.push({ path: p, size: st.size, link: st.isSymbolicLink(), elf })
}
walk('/')
console.log(JSON.stringify(files))
`

// Imports every module of the gateway but its entry point (which would start it), and every
// production dependency, as the gateway loads them: from /app.
const LOAD = `
const fs = require('node:fs'), path = require('node:path')
const manifest = JSON.parse(fs.readFileSync('package.json', 'utf8'))
const modules = fs.readdirSync('build', { recursive: true }).filter((f) => f.endsWith('.js') && f !== 'cli.js').map((f) => './' + path.join('build', f))
;(async () => {
  const failed = []
  for (const m of [...modules, ...Object.keys(manifest.dependencies)]) await import(m).catch((e) => failed.push(m + ': ' + e.message))
  console.log(JSON.stringify({ modules: modules.length, dependencies: Object.keys(manifest.dependencies).length, failed }))
  process.exit(0)
})()
`

interface Listed {
  path: string
  size: number
  link: boolean
  elf: boolean
}

t.test('the image is at most 160 MB and holds only what the gateway runs', async (t) => {
  const built = await buildImage()
  t.comment(describeBuild(built))

  const dir = mkdtempSync(join(tmpdir(), 'ogw-image-size-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  await run('buildah', ['push', '--quiet', '--disable-compression', built.image, `dir:${dir}`])
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as { layers: Array<{ size: number; mediaType: string }> }
  t.ok(
    manifest.layers.every((l) => !/gzip|zstd/.test(l.mediaType)),
    'the layers were copied uncompressed',
    { mediaTypes: manifest.layers.map((l) => l.mediaType) },
  )
  const unpacked = manifest.layers.reduce((sum, l) => sum + l.size, 0)
  t.comment(`${manifest.layers.length} layers, ${unpacked} bytes unpacked (${(unpacked / 1e6).toFixed(1)} MB)`)
  t.ok(unpacked <= LIMIT, `at most ${LIMIT / 1e6} MB unpacked: ${(unpacked / 1e6).toFixed(1)} MB`)

  const name = `ogw-size-${process.pid}`
  const from = await execute('buildah', ['from', '--pull=never', '--name', name, built.image])
  t.equal(from.code, 0, 'a container of the image', { stderr: from.stderr })
  t.teardown(() => execute('buildah', ['rm', name]))
  const inside = (args: string[], env: string[] = []) => runIn(name, args, { user: built.config.User, env })

  const listing = await inside(['node', '-e', LIST])
  t.equal(listing.code, 0, 'the files are listed', { stderr: listing.stderr })
  const files = JSON.parse(listing.stdout) as Listed[]
  const sum = files.filter((f) => !f.link).reduce((s, f) => s + f.size, 0)
  t.comment(`${files.length} files, ${(sum / 1e6).toFixed(1)} MB of content`)
  const base = (p: string) => p.slice(p.lastIndexOf('/') + 1)
  t.strictSame(
    files.filter((f) => ['sh', 'bash', 'dash', 'busybox', 'ash', 'zsh'].includes(base(f.path))).map((f) => f.path),
    [],
    'no shell',
  )
  t.strictSame(
    files.filter((f) => /\/(npm|npx|corepack|yarn)(\/|$)|\/node_modules\/npm\//.test(f.path) && !f.path.startsWith('/app/node_modules/')).map((f) => f.path),
    [],
    'no npm, npx, corepack or yarn',
  )
  t.strictSame(
    files.filter((f) => ['apt', 'apt-get', 'dpkg', 'rpm', 'apk'].includes(base(f.path))).map((f) => f.path),
    [],
    'no package manager',
  )
  const elves = files.filter((f) => f.elf).map((f) => f.path)
  t.ok(elves.includes('/usr/local/bin/node'), 'node is there')
  t.strictSame(
    elves.filter((p) => p !== '/usr/local/bin/node' && !/^\/(usr\/)?lib(64)?\/([\w-]+\/)?[\w.+-]+\.so(\.\d+)*$/.test(p)),
    [],
    'the only other executables are shared libraries',
  )
  t.ok(
    files.some((f) => f.path === '/etc/ssl/certs/ca-certificates.crt' && f.size > 100_000),
    'CA certificates',
  )
  const trimmed = files.filter(
    (f) =>
      f.path.startsWith('/app/') &&
      /\.(map|d\.[mc]?ts|[mc]?ts|md|markdown)$/i.test(f.path) &&
      !/^(licen[cs]e|notice|copying|authors|patents)/i.test(base(f.path)),
  )
  t.strictSame(
    trimmed.map((f) => f.path),
    [],
    'no source maps, TypeScript, declarations or documentation in the app',
  )
  t.notOk(
    files.some((f) => f.path.startsWith('/app/build/dev/')),
    'no development provider or demo (they need development dependencies)',
  )

  const load = await inside(['node', '-e', LOAD])
  t.equal(load.code, 0, 'the load ran', { stderr: load.stderr })
  const loaded = JSON.parse(load.stdout || '{}') as { modules: number; dependencies: number; failed: string[] }
  t.ok(
    loaded.modules > 100 && loaded.dependencies > 10,
    `every module of the gateway (${loaded.modules}) and every production dependency (${loaded.dependencies}) was imported`,
  )
  t.strictSame(loaded.failed, [], 'and each loads from the trimmed dependencies')

  // The system store Node reads with NODE_USE_SYSTEM_CA=1 (or --use-openssl-ca): the bundle above.
  const system = await inside(['node', '-p', "require('node:tls').getCACertificates('system').length"], ['NODE_USE_SYSTEM_CA=1'])
  t.ok(Number(system.stdout) > 100, `node finds the CA certificates where OpenSSL looks (${system.stdout.trim()})`, { stderr: system.stderr })
})
