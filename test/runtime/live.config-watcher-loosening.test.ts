import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { stringify } from 'yaml'
import { loadConfigText } from '#src/config/load'
import { ConfigWatcher, LOOSENING_QUIET_MS, WATCH_INTERVAL_MS, watchedLoosening } from '#src/runtime/live'
import { manualClock } from '../fixtures/clock.ts'
import { merge, minimal } from '../fixtures/config/base.ts'
import { eventually } from '../fixtures/poll.ts'
import { startStack } from '../fixtures/stack.ts'

// server.watchConfig and a writer that truncates the file, pauses longer than a look, then writes
// the rest: the half file may be valid and lack the rules the rest adds. A watched change that
// removes access rules is loaded only once the file has stayed the same for LOOSENING_QUIET_MS on
// the watcher's clock; one that removes none is loaded as before. The looks are the test's
// (ConfigWatcher.look) and time is the watcher's injected clock: nothing here waits. The last
// test wires it in a live gateway, whose timer looks every 2 s (observed, never slept on).

const HOUR = 3_600_000

/** The file with a per-path rule written last, so that a prefix of it is a valid file without the rule. */
const FULL = stringify(
  merge(minimal(), {
    upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', rules: [{ path: '/admin', allow: { groups: ['admins'] } }] }],
  }),
)
const CUT = FULL.indexOf('    rules:')
const HALF = FULL.slice(0, CUT)

function watched(t: Test) {
  const path = join(mkdtempSync(join(tmpdir(), 'ogw-watch-')), 'gateway.yaml')
  writeFileSync(path, FULL)
  const running = loadConfigText(FULL, path, {}).config
  const loaded: string[] = []
  const warnings: Array<Record<string, unknown>> = []
  const clock = manualClock()
  const log = { warn: (fields: Record<string, unknown>) => void warnings.push(fields) }
  const watcher = new ConfigWatcher(path, (text) => loaded.push(text), {
    intervalMs: HOUR,
    clock,
    loosens: watchedLoosening(
      () => log as never,
      path,
      {},
      () => running,
    ),
  })
  watcher.set(true)
  t.teardown(() => watcher.set(false))
  /** One look of the timer: its interval passes on the clock, then it looks. */
  const tick = async (): Promise<void> => {
    clock.advance(WATCH_INTERVAL_MS)
    await watcher.look()
  }
  return { path, loaded, warnings, watcher, tick, write: (text: string) => writeFileSync(path, text) }
}

t.test('the fixture: the half file is valid, and removes the rule', async (t) => {
  t.ok(CUT > 0)
  t.same(loadConfigText(HALF, 'half', {}).config.upstreams[0]?.rules, [], 'valid, without the rule')
})

t.test('a file truncated, left half-written past two looks, then completed: the half file is never loaded', async (t) => {
  const { loaded, warnings, watcher, tick, write } = watched(t)
  await watcher.look()
  write(HALF)
  await tick()
  await tick()
  t.same(loaded, [], 'unchanged across two looks, but it removes access rules: not loaded')
  t.equal(warnings.length, 1, 'said once, at warn')
  t.match(warnings[0], { trigger: 'file', keys: ['upstreams[0].rules[0] (/admin): removed (app)'], quietMs: LOOSENING_QUIET_MS })
  // The writer pauses, for less than the quiet period.
  for (let i = 0; i < LOOSENING_QUIET_MS / WATCH_INTERVAL_MS - 3; i++) await tick()
  t.same(loaded, [], 'still waiting')
  write(FULL)
  await tick()
  await tick()
  t.same(loaded, [], 'the file is whole again, as loaded: nothing to load')
  t.equal(warnings.length, 1)
})

t.test('a change that removes access rules and stays: loaded once unchanged for the quiet period, with the text judged', async (t) => {
  const { loaded, watcher, tick, write } = watched(t)
  await watcher.look()
  write(HALF)
  await tick()
  for (let i = 0; i < LOOSENING_QUIET_MS / WATCH_INTERVAL_MS - 1; i++) await tick()
  t.same(loaded, [], 'one look short of the quiet period')
  await tick()
  t.same(loaded, [HALF], 'loaded, once')
  await tick()
  t.same(loaded, [HALF])
})

t.test('a change that removes no access rule is loaded after two looks, as before', async (t) => {
  const { loaded, warnings, watcher, tick, write } = watched(t)
  await watcher.look()
  const tighter = FULL.replace('- admins', '- admins\n              - auditors').replace('groups:', 'emails: [a@example.com]\n            groups:')
  t.not(tighter, FULL)
  write(tighter)
  await tick()
  await tick()
  t.same(loaded, [tighter])
  t.same(warnings, [])
})

t.test('a file that does not load is not held: its reload is refused, naming its problems', async (t) => {
  const { loaded, watcher, tick, write } = watched(t)
  await watcher.look()
  write('upstreams: [')
  await tick()
  await tick()
  t.same(loaded, ['upstreams: ['])
})

t.test('a live gateway holds a watched loosening on its clock, then loads it', async (t) => {
  const clock = manualClock()
  const lines: Array<Record<string, unknown>> = []
  const stack = await startStack(t, {
    clock,
    config: { server: { watchConfig: true }, log: { level: 'info' } },
    upstreams: [{ name: 'app', rules: [{ path: '/admin', allow: { groups: ['admins'] } }] }],
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  const held = (): Record<string, unknown> | undefined =>
    lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('the changed file removes access rules'))
  stack.replicas[0]!.rewrite((c) => ({ ...c, upstreams: (c.upstreams as Array<Record<string, unknown>>).map(({ rules: _rules, ...u }) => u) }))
  t.match(await eventually('the loosening held', held), { keys: ['upstreams[0].rules[0] (/admin): removed (app)'] })
  t.equal(stack.live.config.upstreams[0]?.rules.length, 1, 'the running rules stay')
  clock.advance(LOOSENING_QUIET_MS)
  await eventually('reloaded', () => stack.live.config.upstreams[0]?.rules.length === 0)
  t.pass('loaded once the file stayed the same for the quiet period on the clock')
})
