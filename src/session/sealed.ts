import type { IDToken } from 'openid-client'
import { DEFAULT_PROVIDER } from '../options/types.js'
import { isDpopKey } from '../oidc/dpop.js'
import type { SessionClaims } from '../contract/identity.js'
import type { StepUpRequirement } from '../oidc/step-up.js'
import type { Session } from './types.js'

// What the gateway seals (session/cipher.ts), in a cookie or in Redis, one codec per purpose. A
// sealed value is JSON with one-letter names, because cookies travel with every request. Each
// purpose is a table of its fields (wire name, type, required) from which both the encoding and
// the guard that opens it derive, so the two cannot drift. The letters are the wire format:
// cookies and Redis values sealed by earlier releases must still open, so a letter never changes
// meaning and a field added later is optional.

type Guard<T> = (v: unknown) => v is T

interface Field<T, Required extends boolean> {
  readonly wire: string
  readonly is: Guard<T>
  readonly required: Required
}

function required<T>(wire: string, is: Guard<T>): Field<T, true> {
  return { wire, is, required: true }
}

function optional<T>(wire: string, is: Guard<T>): Field<T, false> {
  return { wire, is, required: false }
}

type Fields = Readonly<Record<string, Field<unknown, boolean>>>
type TypeOf<F> = F extends Field<infer T, boolean> ? T : never

/** The value a table describes, by its long names: required fields, then the optional ones. */
export type Decoded<F extends Fields> = { -readonly [K in keyof F as F[K]['required'] extends true ? K : never]: TypeOf<F[K]> } & {
  -readonly [K in keyof F as F[K]['required'] extends true ? never : K]?: TypeOf<F[K]>
}

export interface SealedCodec<T> {
  /** The wire shape of `value`: its fields under their letters, the undefined ones left out. */
  encode(value: T): Record<string, unknown>
  /** The value an opened seal holds, or undefined for anything without the shape. */
  decode(sealed: unknown): T | undefined
}

function sealedCodec<F extends Fields>(fields: F): SealedCodec<Decoded<F>> {
  const table = Object.entries(fields).map(([name, field]) => ({ name, ...field }))
  return {
    encode(value) {
      const wire: Record<string, unknown> = {}
      const named = value as Readonly<Record<string, unknown>>
      for (const { name, wire: letter } of table) {
        const v = named[name]
        if (v !== undefined) wire[letter] = v
      }
      return wire
    },
    decode(sealed) {
      if (typeof sealed !== 'object' || sealed === null) return undefined
      const wire = sealed as Readonly<Record<string, unknown>>
      const value: Record<string, unknown> = {}
      for (const { name, wire: letter, is, required } of table) {
        const v = wire[letter]
        if (v === undefined) {
          if (required) return undefined
        } else if (is(v)) {
          value[name] = v
        } else {
          return undefined
        }
      }
      return value as Decoded<F>
    },
  }
}

const isString = (v: unknown): v is string => typeof v === 'string'
const isNumber = (v: unknown): v is number => typeof v === 'number'
/** Validated claims are kept whole; what the gateway relies on is that they name a subject. */
const hasSubject = (v: unknown): v is { sub: string } => typeof v === 'object' && v !== null && typeof (v as { sub?: unknown }).sub === 'string'
const isSessionClaims = hasSubject as Guard<SessionClaims>
const isIdTokenClaims = hasSubject as Guard<IDToken>
const isStepUp = (v: unknown): v is StepUpRequirement => {
  if (typeof v !== 'object' || v === null) return false
  const { acrValues, maxAge } = v as { acrValues?: unknown; maxAge?: unknown }
  if (acrValues !== undefined && !(Array.isArray(acrValues) && acrValues.every(isString))) return false
  return maxAge === undefined || isNumber(maxAge)
}

/**
 * A session: the cookie store keeps the credentials (r, d) in a cookie of their own; the Redis
 * store keeps them in the same value. The DPoP key (k) is with the identity, because every
 * refresh needs it. `p` is absent in sessions sealed before several providers existed, `o` (the
 * issuer of the sign-in) in sessions sealed before it was recorded (issuer-binding.ts).
 */
const SESSION = sealedCodec({
  id: required('i', isString),
  claims: required('c', isSessionClaims),
  accessToken: required('a', isString),
  expiresAt: required('x', isNumber),
  createdAt: required('t', isNumber),
  provider: optional('p', isString),
  issuer: optional('o', isString),
  dpopKey: optional('k', isDpopKey),
  refreshToken: optional('r', isString),
  idToken: optional('d', isString),
})

/** The cookie store's credentials cookie: the refresh and ID tokens of session `id`. */
export const SEALED_CREDENTIALS = sealedCodec({
  id: required('i', isString),
  refreshToken: optional('r', isString),
  idToken: optional('d', isString),
})

/**
 * The session cookie of the memory and Redis stores: the id of a session kept on the server, and
 * (Redis) the hash tag of its user's keys (session/redis-keys.ts), so a request reads one key.
 */
export const SEALED_REFERENCE = sealedCodec({ id: required('i', isString), user: optional('u', isString) })

/**
 * A sign-in in progress (the transaction cookie), bound to its state by the seal's purpose. `p`
 * is absent in transactions started before several providers existed (DEFAULT_PROVIDER); `k`
 * is the sign-in's DPoP key (provider.dpop), to which the code is bound; `s` what a step-up
 * sign-in asked for (acr_values, max_age), which the callback checks the ID token against; `b`
 * the digest of the browser's binding cookie (cookies.ts), without which it does not open.
 */
export const SEALED_TRANSACTION = sealedCodec({
  provider: optional('p', isString),
  nonce: required('n', isString),
  codeVerifier: required('v', isString),
  dpopKey: optional('k', isDpopKey),
  redirectAfter: optional('r', isString),
  stepUp: optional('s', isStepUp),
  binding: optional('b', isString),
})
export type SignInTransaction = NonNullable<ReturnType<typeof SEALED_TRANSACTION.decode>>

/** A refresh's result, kept in Redis for the grace period (session/redis-refresh-coordinator.ts). */
export const SEALED_REFRESH_RESULT = sealedCodec({
  accessToken: required('a', isString),
  expiresAt: optional('x', isNumber),
  refreshToken: optional('r', isString),
  idToken: optional('d', isString),
  claims: optional('c', isIdTokenClaims),
  dpopKey: optional('k', isDpopKey),
})

/** `session` in its sealed shape; its refresh and ID tokens only when `withCredentials`. */
export function toSealed(session: Session, withCredentials: boolean): Record<string, unknown> {
  if (withCredentials) return SESSION.encode(session)
  const { refreshToken: _r, idToken: _d, ...identity } = session
  return SESSION.encode(identity)
}

/** The session an opened seal holds, or undefined for anything that does not have the shape. */
export function fromSealed(sealed: unknown): Session | undefined {
  const session = SESSION.decode(sealed)
  return session === undefined ? undefined : { ...session, provider: session.provider ?? DEFAULT_PROVIDER }
}
