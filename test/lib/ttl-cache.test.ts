import t from 'tap'
import { TtlCache } from '#src/lib/ttl-cache'
import { manualClock } from '../fixtures/clock.ts'

// The one expiring cache: epoch milliseconds on its clock, and bounded.

t.test('an entry is kept until its expiry in milliseconds, then dropped', async (t) => {
  const clock = manualClock(1_000_000)
  const cache = new TtlCache<string>(10, clock)
  cache.set('k', 'v', clock.now() + 1500)
  clock.advance(1499)
  t.equal(cache.get('k'), 'v', 'a millisecond before its expiry')
  clock.advance(1)
  t.equal(cache.get('k'), undefined, 'at its expiry')
  t.equal(cache.size, 0, 'and no longer held')
})

t.test('an entry already expired is not stored', async (t) => {
  const clock = manualClock(1_000_000)
  const cache = new TtlCache<string>(10, clock)
  cache.set('past', 'v', clock.now())
  t.equal(cache.size, 0)
  t.equal(cache.get('past'), undefined)
})

t.test('full: the oldest entry makes room; a key set again is the newest', async (t) => {
  const clock = manualClock(1_000_000)
  const cache = new TtlCache<number>(2, clock)
  const later = clock.now() + 60_000
  cache.set('a', 1, later)
  cache.set('b', 2, later)
  cache.set('a', 3, later)
  cache.set('c', 4, later)
  t.equal(cache.size, 2)
  t.equal(cache.get('b'), undefined, 'b, the oldest, went')
  t.equal(cache.get('a'), 3)
  t.equal(cache.get('c'), 4)
})
