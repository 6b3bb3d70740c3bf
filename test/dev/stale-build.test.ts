import t from 'tap'
import type { Test } from 'tap'
import { mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BUILD_MARKER, staleBuildWarning, staleSources } from '#src/dev/stale-build'

// `npm ci` builds once; the development commands start that build instead of rebuilding, and
// speak up when the sources are newer than it.

function tree(t: Test, files: Record<string, number>): string {
  const root = t.testdir()
  for (const [file, mtime] of Object.entries(files)) {
    mkdirSync(join(root, file, '..'), { recursive: true })
    writeFileSync(join(root, file), '')
    utimesSync(join(root, file), mtime, mtime)
  }
  return root
}

t.test('no source newer than the build: nothing to say', async (t) => {
  const root = tree(t, { [BUILD_MARKER]: 2000, 'src/a.ts': 1000, 'src/dev/b.ts': 1999 })
  t.same(staleSources(root), [])
  t.equal(staleBuildWarning(root), undefined)
})

t.test('a source newer than the build is named, newest first, with the command that rebuilds', async (t) => {
  const root = tree(t, { [BUILD_MARKER]: 2000, 'src/a.ts': 2500, 'src/dev/b.ts': 3000, 'src/c.ts': 1000, 'src/notes.md': 4000 })
  t.same(staleSources(root), [join('src', 'dev', 'b.ts'), join('src', 'a.ts')])
  t.equal(staleBuildWarning(root), 'build/ is older than src/dev/b.ts and 1 more: this runs the last build; run `npm run build` first to use your changes')
})

t.test('no build or no sources (an installed package): nothing to compare', async (t) => {
  t.same(staleSources(tree(t, { 'src/a.ts': 1000 })), [])
  t.same(staleSources(tree(t, { [BUILD_MARKER]: 1000 })), [])
})

t.test('npm run demo and npm run provider start the build npm ci made, without rebuilding', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }
  t.equal(pkg.scripts.prepare, 'npm run build', 'npm ci builds')
  t.equal(pkg.scripts.demo, 'node build/dev/demo.js')
  t.equal(pkg.scripts.provider, 'node build/dev/provider-cli.js')
})
