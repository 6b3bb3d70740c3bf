import t from 'tap'
import { refreshedClaims } from '#src/session/lifecycle'

// A refresh keeps what the sign-in established: OpenID Connect Core 12.2 lets
// a refreshed ID token leave out `sid`, which a back-channel logout then names; and its `sub`
// may not change. (Through a gateway, a refresh and a back-channel logout: test/e2e/refresh-claims.test.ts.)

t.test('refreshedClaims: the sign-in sid is kept when the refreshed ID token has none; another sub is refused', async (t) => {
  t.same(refreshedClaims({ sub: 'a', sid: 's1', email: 'old' }, { sub: 'a', email: 'new' }), { sub: 'a', email: 'new', sid: 's1' })
  t.same(refreshedClaims({ sub: 'a', sid: 's1' }, { sub: 'a', sid: 's2' }), { sub: 'a', sid: 's2' }, "the provider's new sid when it sends one")
  t.same(refreshedClaims({ sub: 'a' }, { sub: 'a' }), { sub: 'a' }, 'no sid at all')
  t.throws(() => refreshedClaims({ sub: 'a', sid: 's1' }, { sub: 'b', sid: 's1' }), { code: 'provider_unavailable' })
})

t.test('refreshedClaims: a refresh authenticates no one, so the sign-in acr, amr and auth_time stay when the refreshed ID token leaves them out', async (t) => {
  const signedIn = { sub: 'a', acr: 'mfa', amr: ['pwd', 'otp'], auth_time: 1700000000 }
  t.same(refreshedClaims(signedIn, { sub: 'a' }), signedIn)
  t.same(
    refreshedClaims(signedIn, { sub: 'a', acr: 'pwd', auth_time: 1700000001 }),
    { sub: 'a', acr: 'pwd', auth_time: 1700000001, amr: ['pwd', 'otp'] },
    "the provider's word when it says",
  )
})
