import t from 'tap'
import { behindAfterCommit, prepareVerdict } from '#src/runtime/reload'

// The primary's verdicts in a reload with server.workers > 1 (runtime/reload.ts): all or nothing
// at prepare, and after commit every worker serves the file /config reports or is replaced.

t.test('prepare: every worker prepared it, or every worker is told why not', async (t) => {
  t.equal(prepareVerdict(2, [{ ok: true }, { ok: true }]), undefined)
  t.match(prepareVerdict(2, [{ ok: true }, { ok: false, problems: ['provider down'], reason: 'x' }]), { problems: ['provider down'] })
  t.match(prepareVerdict(3, [{ ok: true }, { ok: true }]), { problems: ['1 of 3 workers did not prepare it in time'] })
  t.match(prepareVerdict(1, ['garbage']), { problems: ['1 of 1 workers did not prepare it in time'] }, 'an answer of another shape is no answer')
})

t.test('commit: a worker that did not serve the committed file is behind and replaced', async (t) => {
  t.strictSame(
    behindAfterCommit(
      [1, 2],
      new Map([
        [1, true],
        [2, true],
      ]),
    ),
    [],
    'every worker serves it',
  )
  t.strictSame(
    behindAfterCommit(
      [1, 2, 3],
      new Map([
        [1, true],
        [2, false],
      ]),
    ),
    [2, 3],
    'one prepared another file (or none), one did not answer',
  )
  t.strictSame(
    behindAfterCommit(
      [1, 4],
      new Map([
        [1, true],
        [2, true],
      ]),
    ),
    [4],
    'a worker started after prepare had nothing to commit',
  )
  t.strictSame(behindAfterCommit([1], new Map([[1, 'true']])), [1], 'only true is a commit')
})
