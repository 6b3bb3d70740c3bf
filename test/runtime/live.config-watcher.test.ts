import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { loosenedKeys } from '#src/config/loosening'
import { ConfigWatcher } from '#src/runtime/live'
import { resolve } from '../fixtures/config/base.ts'

// server.watchConfig: a file written in place in steps is loaded only once it
// has stayed the same for a whole look; and a reload that removes access rules names them. The
// looks are made by the test (ConfigWatcher.look), so no timing decides the outcome.

const HOUR = 3_600_000

function watched(): { path: string; changes: string[]; watcher: ConfigWatcher; write(text: string): void } {
  const path = join(mkdtempSync(join(tmpdir(), 'ogw-watch-')), 'gateway.yaml')
  const changes: string[] = []
  writeFileSync(path, 'v: 1\n')
  // An interval that never fires during the test: every look is the test's.
  const watcher = new ConfigWatcher(path, () => changes.push('changed'), { intervalMs: HOUR })
  return { path, changes, watcher, write: (text) => writeFileSync(path, text) }
}

t.test('a change is reported once the file has stayed the same across two looks', async (t) => {
  const { changes, watcher, write } = watched()
  watcher.set(true)
  t.teardown(() => watcher.set(false))
  await watcher.look()
  t.same(changes, [], 'the file as it was when the watch began')
  write('v: 1\nallow: {}\n')
  await watcher.look()
  t.same(changes, [], 'first step of an edit: seen, not yet loaded')
  write('v: 1\nallow: {groups: [admins]}\n')
  await watcher.look()
  t.same(changes, [], 'second step: different again, still waiting')
  await watcher.look()
  t.same(changes, ['changed'], 'unchanged for a whole look: loaded, once')
  await watcher.look()
  t.same(changes, ['changed'], 'and not again')
})

t.test('the same size and mtime with other content is a change (the hash)', async (t) => {
  const { changes, watcher, write } = watched()
  watcher.set(true)
  t.teardown(() => watcher.set(false))
  await watcher.look()
  write('v: 2\n')
  await watcher.look()
  write('v: 3\n')
  await watcher.look()
  await watcher.look()
  t.same(changes, ['changed'])
})

t.test('a file that goes back to what was loaded is no change; rebase takes the file as loaded', async (t) => {
  const { changes, watcher, write } = watched()
  watcher.set(true)
  t.teardown(() => watcher.set(false))
  await watcher.look()
  write('v: 9\n')
  await watcher.look()
  write('v: 1\n')
  await watcher.look()
  await watcher.look()
  t.same(changes, [], 'back to the loaded content before it settled')
  write('v: 5\n')
  watcher.rebase()
  await watcher.look()
  await watcher.look()
  t.same(changes, [], 'loaded by other means (SIGHUP): not reloaded again')
})

t.test('loosenedKeys: a per-path rule removed, or a kind of its allow', async (t) => {
  const app = (rules: unknown[]) => resolve({ upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', rules }] })
  const before = app([
    { path: '/admin', allow: { groups: ['admins'] } },
    { path: '/reports', allow: { emails: ['a@example.com'], claims: { tenant: ['acme'] } } },
  ])
  t.same(loosenedKeys(before, before), [])
  t.same(loosenedKeys(before, app([{ path: '/reports', allow: { emails: ['a@example.com'] } }])), [
    'upstreams[0].rules[0] (/admin): removed (app)',
    'upstreams[0].rules[1].allow.claims.tenant (app)',
  ])
})

t.test('loosenedKeys: the access rules a new configuration removes, by key', async (t) => {
  const before = resolve({
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000' },
      {
        name: 'admin',
        match: { pathPrefix: '/admin' },
        target: 'http://127.0.0.1:3000',
        allow: { groups: ['admins'], claims: { tenant: ['acme'], role: ['x'] } },
      },
      { name: 'api', match: { pathPrefix: '/api' }, target: 'http://127.0.0.1:3001', publicPaths: ['/api/health'] },
    ],
  })
  t.same(loosenedKeys(before, before), [], 'the same configuration')
  const after = resolve({
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000', auth: 'optional' },
      { name: 'admin', match: { pathPrefix: '/admin' }, target: 'http://127.0.0.1:3000', allow: { claims: { tenant: ['acme', 'other'] } } },
    ],
  })
  t.same(loosenedKeys(before, after), [
    'upstreams[0].auth (app)',
    'upstreams[1].allow.groups (admin)',
    'upstreams[1].allow.claims.role (admin)',
    'upstreams[2] (api): removed',
  ])
  const tightened = resolve({
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000', allow: { emails: ['a@example.com'] } },
      {
        name: 'admin',
        match: { pathPrefix: '/admin' },
        target: 'http://127.0.0.1:3000',
        allow: { groups: ['admins'], claims: { tenant: ['acme'], role: ['x'] } },
      },
      { name: 'api', match: { pathPrefix: '/api' }, target: 'http://127.0.0.1:3001', publicPaths: ['/api/health', '/api/docs/**'] },
    ],
  })
  t.same(loosenedKeys(before, tightened), ['upstreams[2].publicPaths (api)'], 'a rule added is no loosening; a new public path is')
})
