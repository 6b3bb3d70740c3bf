import t from 'tap'
import fc from 'fast-check'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { manualClock } from '../fixtures/clock.ts'

const A = 'a'.repeat(32)
const B = 'b'.repeat(40)
const future = () => Date.now() / 1000 + 600

t.test('seal then open returns the data', async (t) => {
  const c = new CookieCipher([A], systemClock)
  const sealed = c.seal('session', { sub: 'alice', n: 1 }, future())
  t.same(c.open('session', sealed), { sub: 'alice', n: 1 })
  t.match(sealed, /^[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]+$/, 'cookie-safe characters only')
})

t.test('the plaintext is not readable in the sealed value', async (t) => {
  const c = new CookieCipher([A], systemClock)
  const sealed = c.seal('session', { token: 'very-secret-token' }, future())
  t.notMatch(Buffer.from(sealed.slice(9), 'base64url').toString('latin1'), /very-secret-token/)
})

t.test('each seal uses a fresh nonce', async (t) => {
  const c = new CookieCipher([A], systemClock)
  t.not(c.seal('p', 1, future()), c.seal('p', 1, future()))
})

t.test('a value sealed for one purpose does not open as another', async (t) => {
  const c = new CookieCipher([A], systemClock)
  t.equal(c.open('credentials', c.seal('session', { a: 1 }, future())), undefined)
})

t.test('expired envelopes do not open', async (t) => {
  const clock = manualClock()
  const c = new CookieCipher([A], clock)
  const sealed = c.seal('p', 'x', clock.now() / 1000 + 10)
  clock.advance(9000)
  t.equal(c.open('p', sealed), 'x')
  clock.advance(2000)
  t.equal(c.open('p', sealed), undefined)
  t.equal(new CookieCipher([A], clock).open('p', sealed), undefined, 'nor for a cipher that never opened it')
})

t.test('a kept value is found by its seal alone: a forged seal that ends as an opened one is decrypted, and refused', async (t) => {
  const c = new CookieCipher([A], systemClock)
  const sealed = c.seal('session', { sub: 'alice' }, future())
  t.same(c.open('session', sealed), { sub: 'alice' }, 'opened, and kept')
  // Same key id, same last characters (the tag), another ciphertext before them.
  const cut = sealed.length - 30
  const flipped = sealed.charAt(cut) === 'A' ? 'B' : 'A'
  const forged = sealed.slice(0, cut) + flipped + sealed.slice(cut + 1)
  t.not(forged, sealed)
  t.equal(forged.slice(-24), sealed.slice(-24), "the forged seal shares the kept one's last 24 characters")
  t.equal(c.open('session', forged), undefined, 'not the kept value: decrypted, and its tag does not match')
  t.same(c.open('session', sealed), { sub: 'alice' }, 'the genuine seal still opens')
})

t.test('opened values are kept: the same frozen value again, until expiry, for its purpose only', async (t) => {
  const clock = manualClock()
  const c = new CookieCipher([A], clock)
  const sealed = c.seal('session', { claims: { sub: 'alice', groups: ['staff'] } }, clock.now() / 1000 + 10)
  const first = c.open('session', sealed) as { claims: { sub: string; groups: string[] } }
  clock.advance(1000)
  t.equal(c.open('session', sealed), first, 'the second open is the kept value, not a new decryption')
  t.ok(Object.isFrozen(first) && Object.isFrozen(first.claims) && Object.isFrozen(first.claims.groups), 'frozen to the leaves')
  t.throws(
    () => {
      first.claims.groups.push('admins')
    },
    TypeError,
    'a request cannot change what the next one reads',
  )
  t.equal(c.open('credentials', sealed), undefined, 'a kept value does not open for another purpose')
  t.equal(c.open('session', sealed), first, 'nor does that evict it')
  clock.advance(9000)
  t.equal(c.open('session', sealed), undefined, 'a kept value expires with its envelope')
})

t.test('key rotation: the first secret seals, every secret opens', async (t) => {
  const old = new CookieCipher([A], systemClock)
  const rotated = new CookieCipher([B, A], systemClock)
  const oldValue = old.seal('p', 'from-old', future())
  t.equal(rotated.open('p', oldValue), 'from-old', 'old cookies still open after rotation')
  const newValue = rotated.seal('p', 'from-new', future())
  t.equal(old.open('p', newValue), undefined, 'new cookies are sealed with the new secret')
  t.equal(new CookieCipher([B], systemClock).open('p', newValue), 'from-new')
  t.equal(new CookieCipher([B], systemClock).open('p', oldValue), undefined, 'a dropped secret no longer opens')
})

t.test('tampering with any byte, or with the key id, makes the value unopenable', async (t) => {
  const c = new CookieCipher([A], systemClock)
  const sealed = c.seal('p', { sub: 'alice' }, future())
  const kid = sealed.slice(0, 9)
  const raw = Buffer.from(sealed.slice(9), 'base64url')
  // Byte level: flipping characters would also hit the padding bits of the last base64url
  // character, which encode nothing (the decoded bytes, and so the seal, stay the same).
  for (let i = 0; i < raw.length; i++) {
    const tampered = Buffer.from(raw)
    tampered[i] = (tampered[i] ?? 0) ^ 0x01
    if (c.open('p', kid + tampered.toString('base64url')) !== undefined) t.fail(`byte ${i} flipped still opens`)
  }
  for (let i = 0; i < 8; i++) {
    const forged = sealed.slice(0, i) + (sealed[i] === 'A' ? 'B' : 'A') + sealed.slice(i + 1)
    t.equal(c.open('p', forged), undefined, `key id character ${i}`)
  }
  t.equal(c.open('p', kid + raw.subarray(0, -1).toString('base64url')), undefined, 'truncated')
  t.equal(c.open('p', kid + Buffer.concat([raw, Buffer.from([0])]).toString('base64url')), undefined, 'extended')
  t.equal(c.open('p', ''), undefined, 'empty')
  t.same(c.open('p', sealed), { sub: 'alice' })
})

t.test('a foreign secret does not open, even with a forged key id', async (t) => {
  const mine = new CookieCipher([A], systemClock)
  const theirs = new CookieCipher([B], systemClock)
  const forged = mine.seal('p', 'x', future()).slice(0, 9) + theirs.seal('p', 'x', future()).slice(9)
  t.equal(mine.open('p', forged), undefined)
})

t.test('secrets shorter than 32 bytes are refused', async (t) => {
  t.throws(() => new CookieCipher(['short'], systemClock), TypeError)
  t.throws(() => new CookieCipher([], systemClock), TypeError)
  t.doesNotThrow(() => new CookieCipher(['é'.repeat(16)], systemClock), '32 bytes of UTF-8 suffice')
})

t.test('property: any input opens to nothing or to exactly what was sealed, never throws', async (t) => {
  const c = new CookieCipher([A], systemClock)
  const valid = c.seal('p', { ok: true }, future())
  fc.assert(
    fc.property(fc.string({ maxLength: 600 }), fc.nat({ max: valid.length }), (junk, cut) => {
      if (c.open('p', junk) !== undefined) return false
      const opened = c.open('p', valid.slice(0, cut) + junk + valid.slice(cut))
      // Integrity: whatever the splice, the only thing that can come out is the sealed value.
      return opened === undefined || JSON.stringify(opened) === '{"ok":true}'
    }),
    { numRuns: 500 },
  )
  t.pass('500 random splices')
})

t.test('characters outside the base64url alphabet are refused', async (t) => {
  const c = new CookieCipher([A], systemClock)
  const sealed = c.seal('p', 'x', future())
  t.equal(c.open('p', `${sealed.slice(0, 12)} ${sealed.slice(12)}`), undefined)
  t.equal(c.open('p', `${sealed.slice(0, 12)}+${sealed.slice(12)}`), undefined)
})
