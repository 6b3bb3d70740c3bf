import t from 'tap'
import { CookieCipher } from '../../src/session/cipher.js'
import { CookieSessionStore } from '../../src/session/cookie-store.js'
import { GatewayCookies } from '../../src/session/cookies.js'
import { CONTRACT_SECRET, storeContract } from '../fixtures/store-contract.js'

// The session store contract (test/fixtures/store-contract.ts) against the cookie store, whose ended sessions
// are on its revocation list.

const cipher = new CookieCipher([CONTRACT_SECRET])
const cookies = new GatewayCookies({ name: 'ogw', secrets: [CONTRACT_SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)

storeContract(t, async () => new CookieSessionStore(cookies, 600), { endsBySecond: true })
