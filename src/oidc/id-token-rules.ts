import { createHash } from 'node:crypto'
import * as jose from 'jose'

// ID token rules of OpenID Connect Core that openid-client 6 does not enforce for the code and
// refresh grants. openid-client has already checked the signature, iss, aud, exp, nonce and the
// multi-audience azp rule when these run. And the name of the check an ID token failed, for the
// log line of a refused sign-in (failedIdTokenCheck).

/** The checks an ID token can fail, as the log names them. */
export type IdTokenCheck =
  'missing' | 'malformed' | 'alg' | 'signature' | 'iss' | 'aud' | 'azp' | 'exp' | 'iat' | 'nbf' | 'nonce' | 'sub' | 'at_hash' | 'c_hash' | 'auth_time' | 'other'

/** An ID token that breaks a rule of idTokenViolation: the cause of the GatewayError. */
export class IdTokenRuleError extends Error {
  override readonly name = 'IdTokenRuleError'
  readonly check: IdTokenCheck

  constructor(check: IdTokenCheck, message: string) {
    super(message)
    this.check = check
  }
}

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

/** The first rule the ID token breaks, or `undefined` when it keeps them all. */
export function idTokenViolation(idToken: string, claims: Record<string, unknown>, ctx: IdTokenContext): IdTokenRuleError | undefined {
  const now = Math.floor(Date.now() / 1000)
  // Core 3.1.3.7 step 10: iat may be used to reject tokens issued too far from the current time.
  if (typeof claims.iat !== 'number' || claims.iat > now + ctx.clockToleranceSeconds) return new IdTokenRuleError('iat', 'iat is in the future')
  // openid-client checks that sub is a string; an empty one names nobody (Core 2: "never reassigned
  // identifier", which "" cannot be), and the session, the identity headers and the log need one.
  if (claims.sub === '') return new IdTokenRuleError('sub', 'sub is empty')
  // Core 3.1.3.7 step 5: when azp is present it must be this client, whatever aud holds.
  if (claims.azp !== undefined && claims.azp !== ctx.clientId) return new IdTokenRuleError('azp', 'azp names another client')
  if (ctx.subject !== undefined && claims.sub !== ctx.subject) return new IdTokenRuleError('sub', 'sub differs from the signed-in subject')
  if (claims.at_hash !== undefined) {
    const hash = hashOf(jose.decodeProtectedHeader(idToken).alg ?? '')
    if (hash === undefined) return new IdTokenRuleError('at_hash', 'at_hash cannot be checked for this algorithm')
    const digest = createHash(hash).update(ctx.accessToken, 'ascii').digest()
    const expected = digest.subarray(0, digest.length / 2).toString('base64url')
    if (claims.at_hash !== expected) return new IdTokenRuleError('at_hash', 'at_hash does not match the access token')
  }
  return undefined
}

const CLAIM_CHECKS = new Set<IdTokenCheck>(['iss', 'aud', 'azp', 'exp', 'iat', 'nbf', 'nonce', 'sub', 'at_hash', 'c_hash', 'auth_time'])

/**
 * The check an ID token failed, from what the grant threw: an IdTokenRuleError, or an
 * openid-client (oauth4webapi) error, whose cause names the claim of a comparison or timestamp
 * check, and whose message names the claim of a presence or type check, the `alg` header, the
 * signature or the key. `undefined` when the error is not about the ID token.
 */
export function failedIdTokenCheck(err: unknown): IdTokenCheck | undefined {
  let malformed = false
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (e instanceof IdTokenRuleError) return e.check
    const cause: unknown = e.cause
    if (typeof cause === 'object' && cause !== null && 'claim' in cause && CLAIM_CHECKS.has(cause.claim as IdTokenCheck)) {
      return cause.claim as IdTokenCheck
    }
    const message = e.message
    if (/"id_token" property/.test(message)) return 'missing'
    if (/JWT "alg" header/.test(message) || /unsupported JWS algorithm/i.test(message)) return 'alg'
    const claim = /JWT "(\w+)" \(/.exec(message)?.[1] ?? /ID Token "(\w+)"/.exec(message)?.[1]
    if (claim !== undefined && CLAIM_CHECKS.has(claim as IdTokenCheck)) return claim as IdTokenCheck
    if (/signature|verification key/i.test(message)) return 'signature'
    // openid-client's own wrapper says "invalid response" or "parsing error"; its cause says more.
    if (/JWT|JWS|base64url|JSON|pars/i.test(message)) malformed = true
  }
  return malformed ? 'malformed' : undefined
}
