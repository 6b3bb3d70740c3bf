import t from 'tap'
import type { Clock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { CookieSessionStore } from '#src/session/cookie-store'
import { GatewayCookies } from '#src/session/cookies'
import { CONTRACT_MAX_AGE, CONTRACT_SECRET, storeContract } from '../fixtures/store-contract.ts'

// The session store contract (test/fixtures/store-contract.ts) against the cookie store, whose ended sessions
// are on its revocation list.

/** The cookies of a store on `clock`: its seals expire by it too. */
function cookiesOn(clock: Clock): { cipher: CookieCipher; cookies: GatewayCookies } {
  const cipher = new CookieCipher([CONTRACT_SECRET], clock)
  return { cipher, cookies: new GatewayCookies({ name: 'ogw', secrets: [CONTRACT_SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher) }
}

storeContract(t, async (_t, clock) => new CookieSessionStore(cookiesOn(clock).cookies, CONTRACT_MAX_AGE, clock), { endsBySecond: true })
