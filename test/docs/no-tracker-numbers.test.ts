// Readers of the docs and the code have the tree, not the tracker: "issue 16, point 7" tells them
// nothing. What a change was for is said in words; its history is in git. A reference to another
// project's tracker (`kubernetes-sigs/kustomize#6013`, `oauth2-proxy#3385`) names its project and
// is not what this test looks for.

import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { ROOT } from '../fixtures/markdown.ts'

const ROOT_FILES = ['README.md', 'ARCHITECTURE.md', 'SECURITY.md', 'package.json', '.ci/run']
const FOLDERS = ['src', 'test', 'bench', 'docs', 'config', 'docker', 'charts', '.github']
const SKIP = new Set(['node_modules', 'crds', 'protos'])
// This file shows the rule examples of what it refuses.
const SELF = fileURLToPath(import.meta.url)
const TEXT = /\.(ts|md|ya?ml|json|tpl|txt)$|Dockerfile$/

const TRACKER_NUMBER = /\bissues? ?#?\d+|\b(?:this|that|the same) issue\b|\(#\d+\)/i

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return SKIP.has(entry.name) ? [] : files(path)
    return TEXT.test(entry.name) ? [path] : []
  })
}

t.test('no file of the tree speaks of our own issue numbers', async (t) => {
  const all = [...ROOT_FILES.map((f) => join(ROOT, f)), ...FOLDERS.flatMap((d) => files(join(ROOT, d)))]
  t.ok(all.length > 300, `the whole tree is read (${all.length} files)`)
  const found: string[] = []
  for (const file of all) {
    if (file === SELF) continue
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      const hit = TRACKER_NUMBER.exec(line)
      if (hit !== null) found.push(`${relative(ROOT, file)}:${i + 1}: ${hit[0]}`)
    })
  }
  t.same(found, [], 'say what a change is for in words')
})

t.test('the rule catches what it is for', async (t) => {
  for (const line of ['(issue 16, point 7)', 'the features of issue 22', 'issue #6 point 1', 'before this issue', 'see (#12)']) {
    t.match(line, TRACKER_NUMBER, line)
  }
  for (const line of ['the issuer', 'kubernetes-sigs/kustomize#6013', 'the token was issued 3 s ago', 'RFC 6749 section 4.1']) {
    t.notMatch(line, TRACKER_NUMBER, line)
  }
})
