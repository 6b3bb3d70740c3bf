import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto'
import type { Clock } from '../lib/clock.js'
import { deepFreeze } from '../lib/deep-freeze.js'
import { TtlCache } from '../lib/ttl-cache.js'

// AES-256-GCM from node:crypto, one key per configured secret. The first key seals; every key
// opens, so operators rotate by prepending a new secret and dropping the old one a session
// lifetime later. A short key id in front of the ciphertext picks the key without trial
// decryption, which keeps a failed open as cheap as a successful one.
//
// The session cookie is opened on every request, and the browser sends the same sealed string
// until the session changes. Opening it again gives the same value (the key, nonce and
// ciphertext are the same), so values opened successfully are kept with their sealed string,
// until the envelope's own expiry: a request with a known cookie costs a map lookup instead of
// a decryption. Only authentic values enter, the whole sealed string and the purpose are compared
// on every hit, and the cache is bounded (a flood of distinct valid cookies evicts, never grows
// memory). An entry is found by the seal's last characters (its GCM tag, distinct for every
// seal): a map keyed by the whole string hashed each request's fresh copy of it, hundreds of
// characters, on every lookup. A forged seal that ends like a kept one is decrypted (and refused).

const IV_BYTES = 12
const TAG_BYTES = 16
const KEY_ID_CHARS = 8
export const MIN_SECRET_BYTES = 32
/** Node's base64url decoder skips foreign characters; only canonical alphabet input is accepted. */
const BASE64URL = /^[A-Za-z0-9_-]+$/
/** Opened values kept per cipher: the live sessions of one replica, as a rule. */
export const OPENED_ENTRIES = 4096
/** The opened cache's key: the seal's last 24 characters, its 16-byte tag in base64url and a little of the ciphertext. */
const OPENED_KEY_CHARS = 24

interface Key {
  id: string
  key: Buffer
}

/** The sealed envelope: the payload and the instant after which the envelope is worthless. */
interface Envelope {
  e: number
  d: unknown
}

function deriveKey(secret: string): Key {
  // HKDF rather than the raw secret: secrets are operator-chosen strings of any alphabet, and
  // a derived key is uniformly random whatever the secret looks like.
  const key = Buffer.from(hkdfSync('sha256', secret, 'openid-gateway', 'cookie-aead-v1', 32))
  const id = createHash('sha256').update(key).digest('base64url').slice(0, KEY_ID_CHARS)
  return { id, key }
}

export class CookieCipher {
  readonly #sealKey: Key
  readonly #keys: Map<string, Buffer>
  readonly #opened: TtlCache<{ sealed: string; purpose: string; data: unknown }>
  /** What seals expire by: the cookies' Max-Age is counted on it too (cookies.ts). */
  readonly clock: Clock

  constructor(secrets: readonly string[], clock: Clock) {
    if (secrets.length === 0) throw new TypeError('at least one cookie secret is required')
    for (const s of secrets) {
      if (Buffer.byteLength(s) < MIN_SECRET_BYTES) {
        throw new TypeError(`cookie secrets must be at least ${MIN_SECRET_BYTES} bytes`)
      }
    }
    const keys = secrets.map(deriveKey)
    this.#sealKey = keys[0] as Key
    this.#keys = new Map(keys.map((k) => [k.id, k.key]))
    this.clock = clock
    this.#opened = new TtlCache(OPENED_ENTRIES, clock)
  }

  /**
   * Seals `data` for one purpose (the cookie's role). The purpose is authenticated data, so a
   * value sealed for one cookie cannot be replayed as another.
   */
  /** `expiresAt`: epoch seconds. */
  seal(purpose: string, data: unknown, expiresAt: number): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.#sealKey.key, iv)
    cipher.setAAD(Buffer.from(purpose))
    const body: Envelope = { e: expiresAt, d: data }
    const ct = Buffer.concat([cipher.update(JSON.stringify(body), 'utf8'), cipher.final()])
    return `${this.#sealKey.id}.${Buffer.concat([iv, ct, cipher.getAuthTag()]).toString('base64url')}`
  }

  /**
   * Whether `value` is shaped like a seal of one of the configured keys (its key id, then `.`),
   * authentic or not: what the proxy strips from upstream requests whatever the cookie's name.
   */
  isSealed(value: string): boolean {
    return value.length > KEY_ID_CHARS + 1 && value.charCodeAt(KEY_ID_CHARS) === 46 && this.#keys.has(value.slice(0, KEY_ID_CHARS))
  }

  /**
   * Opens a sealed value (returned frozen). Anything wrong (unknown key, tampering, truncation, another purpose,
   * expiry, malformed JSON) yields `undefined`: a bad cookie means "no session", never an error.
   */
  open(purpose: string, sealed: string): unknown {
    const known = this.#opened.get(sealed.slice(-OPENED_KEY_CHARS))
    if (known !== undefined && known.sealed === sealed && known.purpose === purpose) return known.data
    if (sealed.length <= KEY_ID_CHARS + 1 || sealed.charCodeAt(KEY_ID_CHARS) !== 46 /* . */) return undefined
    const key = this.#keys.get(sealed.slice(0, KEY_ID_CHARS))
    const body = sealed.slice(KEY_ID_CHARS + 1)
    if (key === undefined || !BASE64URL.test(body)) return undefined
    const raw = Buffer.from(body, 'base64url')
    if (raw.length < IV_BYTES + TAG_BYTES + 2) return undefined
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES })
      decipher.setAAD(Buffer.from(purpose))
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES))
      const plain = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()])
      const envelope = JSON.parse(plain.toString('utf8')) as Envelope
      if (typeof envelope.e !== 'number' || !(envelope.e > this.clock.now() / 1000)) return undefined
      // Frozen: every request that presents this cookie shares the one value.
      const data = deepFreeze(envelope.d)
      this.#opened.set(sealed.slice(-OPENED_KEY_CHARS), { sealed, purpose, data }, envelope.e * 1000)
      return data
    } catch {
      return undefined
    }
  }
}
