import t from 'tap'
import { MemoryRevocationList } from '#src/session/revocation'
import { manualClock } from '../fixtures/clock.ts'

// A logout of the gateway's own lists exactly one session, by its id, until that session's seal
// expires (its creation + session.maxAgeSeconds). Logouts have a share of their own per provider:
// a storm of sign-ins and logouts (any user can make one) never folds away a back-channel entry.

const T0 = 1_800_000_000
const MAX_AGE = 3600

t.test('a session entry ends that session only, until its own end', async (t) => {
  const clock = manualClock(T0 * 1000)
  const list = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, clock })
  const tab = { id: 'session-1', provider: 'default', claims: { sub: 'alice', sid: 'op-1' }, createdAt: T0 - 600 }
  await list.revoke({ provider: 'default', session: tab.id }, tab.createdAt)
  t.ok(await list.isRevoked(tab), 'the logged-out session')
  t.notOk(await list.isRevoked({ ...tab, id: 'session-2' }), 'another session of the same user and provider session')
  t.notOk(await list.isRevoked({ ...tab, provider: 'partners' }), "another provider's session of that id")
  t.notOk(await list.isRevoked({ provider: 'default', claims: { sub: 'alice' }, createdAt: T0 - 700 }), 'a Bearer token of the user (no session id)')
  clock.advance((MAX_AGE - 600 - 1) * 1000)
  t.equal(await list.size(), 1, 'kept while the session could still be presented')
  clock.advance(1000)
  t.equal(await list.size(), 0, 'gone when its seal has expired')
})

t.test("a logout storm fills the logouts' share only: back-channel entries stay, other providers untouched", async (t) => {
  const clock = manualClock(T0 * 1000)
  const list = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 3, clock })
  await list.revoke({ provider: 'default', sid: 'op-ended' })
  await list.revoke({ provider: 'default', sub: 'bob' })
  clock.advance(10_000)
  for (let i = 0; i < 10; i++) {
    await list.revoke({ provider: 'default', session: `storm-${i}` }, T0 + 10 + i)
    clock.advance(1000)
  }
  t.ok(await list.isRevoked({ id: 'x', provider: 'default', claims: { sub: 'carol', sid: 'op-ended' }, createdAt: T0 + 100 }), 'the sid entry is still there')
  t.ok(await list.isRevoked({ id: 'y', provider: 'default', claims: { sub: 'bob' }, createdAt: T0 }), 'the sub entry is still there')
  t.ok(
    await list.isRevoked({ id: 'storm-0', provider: 'default', claims: { sub: 'mallory' }, createdAt: T0 + 10 }),
    'a folded logout is still refused (by the share floor)',
  )
  t.ok(await list.isRevoked({ id: 'storm-9', provider: 'default', claims: { sub: 'mallory' }, createdAt: T0 + 19 }), 'the latest logout')
  t.notOk(await list.isRevoked({ id: 'z', provider: 'default', claims: { sub: 'dave' }, createdAt: T0 + 30 }), 'a session signed in after the floor passes')
  t.notOk(await list.isRevoked({ id: 'w', provider: 'partners', claims: { sub: 'dave' }, createdAt: T0 }), "another provider's sessions are untouched")
  t.equal(await list.size(), 5, "the two back-channel entries and the logouts' three")

  // A worker started later gets both shares and both floors.
  const worker = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 3, clock })
  worker.restore(JSON.parse(JSON.stringify(list.snapshot())) as ReturnType<typeof list.snapshot>)
  t.ok(await worker.isRevoked({ id: 'storm-0', provider: 'default', claims: { sub: 'mallory' }, createdAt: T0 + 10 }), "the logouts' floor travels")
  t.ok(await worker.isRevoked({ id: 'x', provider: 'default', claims: { sub: 'carol', sid: 'op-ended' }, createdAt: T0 + 100 }), 'the sid entry travels')
  t.equal(await worker.size(), 5)
})
