import t from 'tap'
import { systemClock } from '#src/lib/clock'
import { DEFAULT_PROVIDER } from '#src/options/types'
import { CookieCipher } from '#src/session/cipher'
import { fromSealed, SEALED_CREDENTIALS, SEALED_REFERENCE, SEALED_REFRESH_RESULT, SEALED_TRANSACTION, toSealed } from '#src/session/sealed'
import type { Session } from '#src/session/types'

// The sealed payloads' wire format is what cookies in browsers and values in Redis hold: values
// sealed by the hand-written shapes the codecs of session/sealed.ts replaced (literal below, with
// an expiry in 2100) must still open to the same values, and the same values must encode to the
// same JSON.

const cipher = new CookieCipher(['compat-secret-0123456789abcdefghijklmnop'], systemClock)
const KEY = { kty: 'EC', crv: 'P-256', x: 'xx', y: 'yy', d: 'dd' }
const SESSION: Session = {
  id: 'sid-1',
  claims: { sub: 'alice', sid: 'ps-1', groups: ['a'] },
  accessToken: 'at',
  expiresAt: 1700000000,
  createdAt: 1690000000,
  provider: 'corp',
  refreshToken: 'rt',
  idToken: 'idt',
  dpopKey: KEY,
}

/** Sealed by the previous code (its toSealed and its one-letter shapes), per purpose. */
const OLD = {
  sessionRedis:
    '0gTMCjA4.EzUg8HZkywa_bbg16aVOYwyiMwzjEH8uF8LlNbJn58WzrBkngfOEwmdDHbvaI9NWlu3R5FQOP7ZlQ8Q1P0Z7csTDyq3880LcBC4CVqYSK5lx1s_CKRFJuRVGOuYQJGV4uGUBs951V0htaTeSx1qzBQF0JmsnGsR_pRBGVPRw-d26JJxJXyHJAfco0bViNCsqjI9qK5WcdHgMBxfWEHeJjZ5ePJAXEqfnVgDNvMxT7Y-rsj0wfmw8pEj9j_1KdfpYx2NmAEBgJ79JMyp2TpvKnseIizLB3ayk1JQhDEbbwno4ycUilTUyCc1Y5CUB',
  sessionCookie:
    '0gTMCjA4.ck1tU2u0MYSSaspQlBdRRCBABp0iKSurJWHz_NILy7qN2D9gaYCtPfmu19krrSUJwF-dn5udt0VlTKrv2Y5zZticcWcmqhGISI_Y8EK1Wv8Pcde4Um7AGK94-6fuECh7rsdGxjC-pz7H773s7j9Ut3bS3Il-4Uo3wqmvqlBGU2ACJP0wUZm0SDXeRp_TPGRafqLyFmAeU6EaRhbBKhy_Movbesm_mJManWQiylV5XH6bsBRor4kM5_zw-8V3tuIEEm-TD4TIbANxLyHnZbM6B_6nqwvrMQvuesM',
  sessionBeforeProviders:
    '0gTMCjA4.GWhP_FZ1UPcU9o-87rzl3fWsSvw5AFZyqgy91jQ1qY-lBFN4wWJdHD9K_2Hs6weTvXOMq_P8gwWamLR9qpPibG7UqxHbYatdO_xv_x3lVedRapXfzPHfwgHxNk81thqEq_JQwmT_litKwiKBEiAac0ZRQg5rOPPx',
  credentials: '0gTMCjA4.K78ngYkLosml2S8yaHE76iYSQdwavQ7aLqTxGHk32kNyxsp5VgcjT_rltaDsVFQjCWbtKlJYM0poP-jFLGy8pOUJaRTW1tMTFXxj18EJ0xCQ',
  reference: '0gTMCjA4.pF4ylmJHCa5lx1PwqhnhEWBKY116dFj_ANRtJBiDYBj5by5DAxV1Z3ud_Y4ivV-2D-XueLWDuNlDn6DiHpY',
  transaction:
    '0gTMCjA4.G6U7fIzWeLtqAzp0ywNiRNAfuNROfvZD9-NsoAcY2ESSWbwMq-z8jSz4KvGgRWn1U6mVbIBQmCTNzqaeZk8LcRrjiggwFQCh5IVxS79su6DJq5VkHObJe8YlwEzHlIKFA-Ek9fd_I2kU-MNK5rl1Uz9rXRbCGyMtMpgbG_iEAmCXDBBolRWBF838B2qVn_EXHiDWAIrOniX-elPFPFJt',
  transactionBeforeProviders: '0gTMCjA4.cl0c4rymwvxYBFA51cnBpj3uSRX9xhEphdmFbfa6PpIz9ldeSZhSvLJAtaVi5ouDjqw2HpQ_u1eLWPnYvFjGtoVg5h_82PPSyzqoUDc',
  refreshResult:
    '0gTMCjA4.vJ1nK1IQF-J4dt9tN5FC7LZWjokW0dVtnMy4_tLDmGwBSi9aKJ4KlkGdSbCv0PnuMRYqbEWBGGnZidDxbBqnP7xBx7zwDgkAF8ZfNOTy_f4doVeFFEhVjB1SWcpLbuuDqIWegpRQ7db2N8Kr0XoWgnu83xYWk8JuskRuQ27FPQhdcvnrmyBKY6apGu2PMtSXUjVBdYonAri6wisTj5_gowf-YoYINvLqR4-y-uiGCXzZgxuXbayL1fO82g',
}

t.test('values sealed by the previous shapes open to the same values', async (t) => {
  t.strictSame(fromSealed(cipher.open('redis-session', OLD.sessionRedis)), SESSION, 'a Redis session, with its credentials')
  const { refreshToken: _r, idToken: _d, ...identity } = SESSION
  t.strictSame(fromSealed(cipher.open('session:ogw', OLD.sessionCookie)), identity, 'a session cookie')
  t.strictSame(
    fromSealed(cipher.open('session:ogw', OLD.sessionBeforeProviders)),
    { id: 'sid-2', claims: { sub: 'bob' }, accessToken: 'at2', expiresAt: 1700000000, createdAt: 1690000000, provider: DEFAULT_PROVIDER },
    'a session sealed before several providers: the default provider',
  )
  t.strictSame(SEALED_CREDENTIALS.decode(cipher.open('credentials:ogw_cred', OLD.credentials)), { id: 'sid-1', refreshToken: 'rt', idToken: 'idt' })
  t.strictSame(SEALED_REFERENCE.decode(cipher.open('session:ogw', OLD.reference)), { id: 'sid-3' })
  t.strictSame(SEALED_TRANSACTION.decode(cipher.open('tx:state-1', OLD.transaction)), {
    provider: 'corp',
    nonce: 'nonce',
    codeVerifier: 'verifier',
    dpopKey: KEY,
    redirectAfter: '/after',
  })
  t.strictSame(SEALED_TRANSACTION.decode(cipher.open('tx:state-2', OLD.transactionBeforeProviders)), { nonce: 'nonce', codeVerifier: 'verifier' })
  t.strictSame(SEALED_REFRESH_RESULT.decode(cipher.open('refreshed', OLD.refreshResult)), {
    accessToken: 'at3',
    expiresAt: 1700000100,
    refreshToken: 'rt3',
    idToken: 'idt3',
    claims: { sub: 'alice', sid: 'ps-1' },
    dpopKey: KEY,
  })
})

t.test('the same values encode to the JSON the previous code wrote', async (t) => {
  t.equal(
    JSON.stringify(toSealed(SESSION, true)),
    '{"i":"sid-1","c":{"sub":"alice","sid":"ps-1","groups":["a"]},"a":"at","x":1700000000,"t":1690000000,"p":"corp","k":{"kty":"EC","crv":"P-256","x":"xx","y":"yy","d":"dd"},"r":"rt","d":"idt"}',
  )
  t.equal(
    JSON.stringify(toSealed(SESSION, false)),
    '{"i":"sid-1","c":{"sub":"alice","sid":"ps-1","groups":["a"]},"a":"at","x":1700000000,"t":1690000000,"p":"corp","k":{"kty":"EC","crv":"P-256","x":"xx","y":"yy","d":"dd"}}',
  )
  t.equal(
    JSON.stringify(SEALED_TRANSACTION.encode({ provider: 'p', nonce: 'n', codeVerifier: 'v', dpopKey: undefined, redirectAfter: '/r' })),
    '{"p":"p","n":"n","v":"v","r":"/r"}',
  )
  t.equal(JSON.stringify(SEALED_CREDENTIALS.encode({ id: 'i', refreshToken: undefined, idToken: 'd' })), '{"i":"i","d":"d"}')
})

t.test('a value without a required field, or with a field of another type, opens as nothing', async (t) => {
  const wire = toSealed(SESSION, true)
  for (const letter of ['i', 'c', 'a', 'x', 't']) {
    const { [letter]: _gone, ...missing } = wire
    t.equal(fromSealed(missing), undefined, `without ${letter}`)
  }
  const wrong: Array<[string, unknown]> = [
    ['i', 1],
    ['c', { name: 'no sub' }],
    ['x', '1'],
    ['p', null],
    ['k', { kty: 'RSA' }],
    ['r', 1],
    ['d', false],
  ]
  for (const [letter, value] of wrong) t.equal(fromSealed({ ...wire, [letter]: value }), undefined, `${letter}: ${JSON.stringify(value)}`)
  t.equal(SEALED_TRANSACTION.decode({ n: 'n' }), undefined, 'a transaction without its verifier')
  t.equal(SEALED_REFRESH_RESULT.decode({ a: 'a', c: {} }), undefined, 'refresh claims without a subject')
  for (const junk of [null, 'i', 1, []]) t.equal(SEALED_REFERENCE.decode(junk), undefined, JSON.stringify(junk))
})

t.test("a step-up sign-in's transaction keeps what it asked for; a malformed one opens as nothing", async (t) => {
  const stepUp = { acrValues: ['mfa', 'hwk'], maxAge: 60 }
  const wire = SEALED_TRANSACTION.encode({ provider: 'p', nonce: 'n', codeVerifier: 'v', dpopKey: undefined, redirectAfter: '/payroll', stepUp })
  t.equal(JSON.stringify(wire), '{"p":"p","n":"n","v":"v","r":"/payroll","s":{"acrValues":["mfa","hwk"],"maxAge":60}}')
  t.same(SEALED_TRANSACTION.decode(JSON.parse(JSON.stringify(wire))), { provider: 'p', nonce: 'n', codeVerifier: 'v', redirectAfter: '/payroll', stepUp })
  for (const bad of [{ acrValues: 'mfa' }, { acrValues: [1] }, { maxAge: '60' }, null, 'mfa']) {
    t.equal(SEALED_TRANSACTION.decode({ n: 'n', v: 'v', s: bad }), undefined, JSON.stringify(bad))
  }
  // A session sealed before step-up (no acr, amr, auth_time) still opens: it just meets no step-up rule.
  t.same(fromSealed(toSealed(SESSION, true))?.claims, SESSION.claims)
})
