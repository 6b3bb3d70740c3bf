// The cross-key rules of `assertions`: what an upstream signs with needs configured keys.

import type { Issue } from '../path.js'
import { type Read, upstreamsWith, valueAt } from './read.js'

export function assertionRules(read: Read, data: unknown): Issue[] {
  const upstreams = valueAt(data, ['upstreams'])
  const signingKeys = valueAt(data, ['assertions', 'signingKeys'])
  return [...checkAssertionKeys(read, upstreams, signingKeys), ...checkTransactionTokenKeys(upstreams, signingKeys)]
}

// Assertions signed with a key made up at startup would differ on every replica and restart, and
// an upstream could not verify them against another replica's JWKS: the keys are configured.
function checkAssertionKeys(read: Read, upstreams: unknown, signingKeys: unknown): Issue[] {
  if (signingKeys !== undefined) return []
  return upstreamsWith(read, upstreams, 'identityAssertion').map((index) => ({ path: ['upstreams', index, 'identityAssertion'], message: 'requires assertions.signingKeys' }))
}

// Transaction Tokens are signed with the assertions' key, the one the JWKS publishes: verifiers
// (draft-ietf-oauth-transaction-tokens-10 section 12.2) need the same keys on every replica.
function checkTransactionTokenKeys(upstreams: unknown, signingKeys: unknown): Issue[] {
  if (signingKeys !== undefined || !Array.isArray(upstreams)) return []
  return upstreams.flatMap((upstream: unknown, index) =>
    typeof upstream === 'object' && upstream !== null && 'transactionTokens' in upstream && upstream.transactionTokens !== undefined
      ? [{ path: ['upstreams', index, 'transactionTokens'], message: 'requires assertions.signingKeys' }]
      : [],
  )
}
