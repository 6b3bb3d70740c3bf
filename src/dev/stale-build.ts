// `npm ci` builds build/ once (the package's `prepare`), so `npm run demo` and `npm run provider`
// start the built files as they are instead of rebuilding every time. What they must not do is
// run stale code without a word: when a source file is newer than the build, they say so and
// name the command that rebuilds. Only a development convenience; the gateway itself never looks.

import { readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

/** The marker of the last build: `tsc` rewrites every emitted file, the CLI among them. */
export const BUILD_MARKER = join('build', 'cli.js')

/** The source files (relative to `root`) modified after the last build, newest first. */
export function staleSources(root: string): string[] {
  let built: number
  try {
    built = statSync(join(root, BUILD_MARKER)).mtimeMs
  } catch {
    return []
  }
  const newer: Array<{ file: string; mtime: number }> = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith('.ts')) {
        const mtime = statSync(path).mtimeMs
        if (mtime > built) newer.push({ file: relative(root, path), mtime })
      }
    }
  }
  try {
    walk(join(root, 'src'))
  } catch {
    return [] // an installed package ships build/ without src/: nothing to compare
  }
  return newer.sort((a, b) => b.mtime - a.mtime).map((n) => n.file)
}

/** One line for the terminal when the build is older than the sources, else undefined. */
export function staleBuildWarning(root: string): string | undefined {
  const stale = staleSources(root)
  if (stale.length === 0) return undefined
  const more = stale.length > 1 ? ` and ${stale.length - 1} more` : ''
  return `build/ is older than ${stale[0]}${more}: this runs the last build; run \`npm run build\` first to use your changes`
}
