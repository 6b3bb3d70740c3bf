import t from 'tap'
import { MemoryRevocationList } from '#src/session/revocation'
import { manualClock } from '../fixtures/clock.ts'

// The memory revocation list is bounded per provider: when one provider's entries are full, its
// oldest entry is folded into that provider's floor. A provider (or its transmitter) that pushes
// revocations until the list is full signs out its own users at most, never another provider's.

const T0 = 1_800_000_000
const MAX_AGE = 3600

t.test('one provider filling its share folds only its own oldest entry, into its own floor', async (t) => {
  const clock = manualClock(T0 * 1000)
  const list = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 3, clock })
  // Staff's one entry is the oldest of the whole list.
  await list.revoke({ provider: 'staff', sub: 'mallory' })
  clock.advance(10_000)
  // The hostile provider pushes far more than its share.
  for (let i = 0; i < 10; i++) {
    await list.revoke({ provider: 'partners', sub: `user-${i}` })
    clock.advance(1000)
  }
  const staffAlice = { provider: 'staff', claims: { sub: 'alice' }, createdAt: T0 - 100 }
  t.notOk(await list.isRevoked(staffAlice), "staff's users signed in before are not refused: no floor crossed providers")
  t.notOk(await list.isRevoked({ ...staffAlice, createdAt: T0 + 5 }), 'nor those signed in after')
  t.ok(await list.isRevoked({ provider: 'staff', claims: { sub: 'mallory' }, createdAt: T0 - 1 }), "staff's own entry is kept, not folded")
  t.ok(
    await list.isRevoked({ provider: 'partners', claims: { sub: 'anyone' }, createdAt: T0 + 5 }),
    "partners' floor refuses partners' users signed in before its folded entries",
  )
  t.notOk(await list.isRevoked({ provider: 'partners', claims: { sub: 'anyone' }, createdAt: T0 + 20 }), 'and not those signed in after them')
  t.equal(await list.size(), 4, "each provider's share is bounded: 3 of partners and staff's 1")
})

t.test('floors travel per provider to a worker started later (the snapshot)', async (t) => {
  const clock = manualClock(T0 * 1000)
  const primary = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 1, clock })
  await primary.revoke({ provider: 'partners', sub: 'a' })
  clock.advance(1000)
  await primary.revoke({ provider: 'partners', sub: 'b' })
  const worker = new MemoryRevocationList({ maxAgeSeconds: MAX_AGE, maxEntries: 1, clock })
  worker.restore(JSON.parse(JSON.stringify(primary.snapshot())) as ReturnType<typeof primary.snapshot>)
  t.ok(await worker.isRevoked({ provider: 'partners', claims: { sub: 'x' }, createdAt: T0 }), "partners' floor")
  t.notOk(await worker.isRevoked({ provider: 'staff', claims: { sub: 'x' }, createdAt: T0 }), 'no floor for staff')
})
