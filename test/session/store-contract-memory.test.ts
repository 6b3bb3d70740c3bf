import t from 'tap'
import { CookieCipher } from '../../src/session/cipher.js'
import { GatewayCookies } from '../../src/session/cookies.js'
import { MemorySessionStore } from '../../src/session/memory-store.js'
import { CONTRACT_SECRET, storeContract } from '../fixtures/store-contract.js'

// The session store contract (test/fixtures/store-contract.ts) against the memory store.

const cipher = new CookieCipher([CONTRACT_SECRET])
const cookies = new GatewayCookies({ name: 'ogw', secrets: [CONTRACT_SECRET], secure: false, sameSite: 'lax', credentialsPath: '/' }, cipher)

storeContract(t, async (t) => {
  const store = new MemorySessionStore(cookies, 600, 100)
  t.teardown(() => store.close())
  return store
})
