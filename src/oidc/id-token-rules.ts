import { createHash } from 'node:crypto'
import * as jose from 'jose'

// ID token rules of OpenID Connect Core that openid-client 6 does not enforce for the code and
// refresh grants. openid-client has already checked the signature, iss, aud, exp, nonce and the
// multi-audience azp rule when these run.

export interface IdTokenContext {
  clientId: string
  accessToken: string
  clockToleranceSeconds: number
  /** On refresh: the subject of the session (Core 12.2: it must not change). */
  subject?: string
}

/** Hash for at_hash by JWS algorithm (Core 3.1.3.8 / 3.3.2.11: the hash of the alg). */
function hashOf(alg: string): string | undefined {
  if (/^(RS|PS|ES)256$/.test(alg)) return 'sha256'
  if (/^(RS|PS|ES)384$/.test(alg)) return 'sha384'
  if (/^(RS|PS|ES)512$/.test(alg) || alg === 'EdDSA' || alg === 'Ed25519') return 'sha512'
  return undefined
}

/** The first rule the ID token breaks, as a sentence, or `undefined` when it keeps them all. */
export function idTokenViolation(idToken: string, claims: Record<string, unknown>, ctx: IdTokenContext): string | undefined {
  const now = Math.floor(Date.now() / 1000)
  // Core 3.1.3.7 step 10: iat may be used to reject tokens issued too far from the current time.
  if (typeof claims.iat !== 'number' || claims.iat > now + ctx.clockToleranceSeconds) return 'iat is in the future'
  // Core 3.1.3.7 step 5: when azp is present it must be this client, whatever aud holds.
  if (claims.azp !== undefined && claims.azp !== ctx.clientId) return 'azp names another client'
  if (ctx.subject !== undefined && claims.sub !== ctx.subject) return 'sub differs from the signed-in subject'
  if (claims.at_hash !== undefined) {
    const hash = hashOf(jose.decodeProtectedHeader(idToken).alg ?? '')
    if (hash === undefined) return 'at_hash cannot be checked for this algorithm'
    const digest = createHash(hash).update(ctx.accessToken, 'ascii').digest()
    const expected = digest.subarray(0, digest.length / 2).toString('base64url')
    if (claims.at_hash !== expected) return 'at_hash does not match the access token'
  }
  return undefined
}
