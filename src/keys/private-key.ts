// The gateway's own private keys (client authentication with private_key_jwt, signed identity
// assertions): read from the configuration as PEM or JWK text, inline (usually through the
// environment) or from a file, parsed by node:crypto and used through jose's WebCrypto keys.

import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import * as jose from 'jose'
import { describeFsError } from '../lib/fs-errors.js'

/** JWS algorithms the gateway signs with, by key type; the first is the key's default. */
const SIGNING_ALGORITHMS = {
  rsa: ['PS256', 'RS256'],
  'ec:P-256': ['ES256'],
  'ec:P-384': ['ES384'],
  'ec:P-521': ['ES512'],
  ed25519: ['Ed25519'],
} as const satisfies Record<string, readonly string[]>

type KeyKind = keyof typeof SIGNING_ALGORITHMS
export type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[KeyKind][number]

/** NIST SP 800-57 and RFC 7518 3.3: an RSA key of fewer than 2048 bits is too weak to sign with. */
const MIN_RSA_BITS = 2048

export class PrivateKeyError extends Error {
  override readonly name = 'PrivateKeyError'
}

/** A parsed private key and what it can sign with. */
export interface ParsedKey {
  key: KeyObject
  kind: KeyKind
  /** The `kid` of a JWK, if it had one. */
  kid: string | undefined
  /** The `alg` of a JWK, if it had one: the only algorithm the key is then used with. */
  alg: string | undefined
}

/** A key ready to sign: its WebCrypto form, algorithm, key id and public JWK. */
export interface SigningKey {
  kid: string
  alg: SigningAlgorithm
  key: jose.CryptoKey
  publicJwk: jose.JWK
}

// RFC 7468 section 2: text before the first encapsulation boundary is explanatory and "parsers
// MUST NOT malfunction" on it; openssl's PKCS#12 export writes "Bag Attributes" lines there.
const PEM_BOUNDARY = /^-----BEGIN [A-Z0-9 ]+-----$/m
const isPem = (text: string): boolean => PEM_BOUNDARY.test(text)
const isJwk = (text: string): boolean => text.startsWith('{')
// A PEM key base64-encoded once more (a Kubernetes Secret's data value given as stringData, or
// copied from `kubectl get secret -o yaml`): base64 of "-----BEGI".
const isBase64Pem = (text: string): boolean => text.startsWith('LS0tLS1CRUdJ')

/** The longest path a key source may be; anything longer (or spanning lines) is not a path. */
const MAX_PATH_LENGTH = 4096

/**
 * Whether a key source is (or looks like) key material rather than the path of a file: such a
 * value is masked in `check` and never read as a file name.
 */
export function isInlineKey(source: string): boolean {
  const trimmed = source.trim()
  return isPem(trimmed) || isJwk(trimmed) || isBase64Pem(trimmed) || !isPlausiblePath(trimmed)
}

function isPlausiblePath(text: string): boolean {
  return text.length > 0 && text.length <= MAX_PATH_LENGTH && !/[\r\n\0]/.test(text)
}

/** PEM text from its first boundary: the attribute lines before it are dropped. */
function pemFrom(text: string): string {
  const start = PEM_BOUNDARY.exec(text)?.index ?? 0
  return text.slice(start)
}

/**
 * The text of a key source: the source itself when it is PEM or JWK text, else the content of
 * the file it names. No message quotes the source or the file: either may be a key.
 */
export function keyText(source: string): string {
  const trimmed = source.trim()
  if (isPem(trimmed)) return pemFrom(trimmed)
  if (isJwk(trimmed)) return trimmed
  if (isBase64Pem(trimmed)) throw new PrivateKeyError(BASE64_PEM)
  if (!isPlausiblePath(trimmed)) {
    throw new PrivateKeyError('is neither PEM nor JWK private key text, nor the path of a file holding one (base64 DER is not read: give the PEM text)')
  }
  let content: string
  try {
    content = readFileSync(trimmed, 'utf8').trim()
  } catch (err) {
    throw new PrivateKeyError(`must be a PEM or JWK private key, or the path of a file holding one (the file cannot be read: ${describeFsError(err)})`)
  }
  if (isPem(content)) return pemFrom(content)
  if (isJwk(content)) return content
  if (isBase64Pem(content)) throw new PrivateKeyError(`names a file that ${BASE64_PEM.replace(/^is /, 'holds ')}`)
  throw new PrivateKeyError('names a file that holds neither a PEM nor a JWK private key')
}

const BASE64_PEM = 'is a base64-encoded PEM key: decode it once (base64 -d) and give the PEM text, which starts with -----BEGIN'

/** Parses a PEM (PKCS#8, PKCS#1 or SEC1) or JWK private key and checks it can sign. */
export function parsePrivateKey(source: string): ParsedKey {
  const text = keyText(source)
  let key: KeyObject
  let jwk: Record<string, unknown> | undefined
  try {
    if (isJwk(text)) {
      jwk = JSON.parse(text) as Record<string, unknown>
      key = createPrivateKey({ key: jwk as JsonWebKey, format: 'jwk' })
    } else {
      key = createPrivateKey({ key: text, format: 'pem' })
    }
  } catch {
    throw new PrivateKeyError('is not a readable private key (PEM: PKCS#8, PKCS#1 or SEC1; or a private JWK)')
  }
  const kind = kindOf(key)
  const alg = typeof jwk?.alg === 'string' ? jwk.alg : undefined
  if (alg !== undefined && !(SIGNING_ALGORITHMS[kind] as readonly string[]).includes(alg)) {
    throw new PrivateKeyError(`has alg ${alg}, which a ${kind} key cannot sign with here (${SIGNING_ALGORITHMS[kind].join(', ')})`)
  }
  return { key, kind, kid: typeof jwk?.kid === 'string' ? jwk.kid : undefined, alg }
}

function kindOf(key: KeyObject): KeyKind {
  const { asymmetricKeyType: type, asymmetricKeyDetails: details } = key
  if (type === 'rsa') {
    if ((details?.modulusLength ?? 0) < MIN_RSA_BITS) throw new PrivateKeyError(`is an RSA key of fewer than ${MIN_RSA_BITS} bits`)
    return 'rsa'
  }
  if (type === 'ec') {
    const curve = { prime256v1: 'P-256', secp384r1: 'P-384', secp521r1: 'P-521' }[details?.namedCurve ?? '']
    if (curve === undefined) throw new PrivateKeyError('is an EC key on a curve other than P-256, P-384 or P-521')
    return `ec:${curve}` as KeyKind
  }
  if (type === 'ed25519') return 'ed25519'
  throw new PrivateKeyError('must be an RSA (2048 bits or more), EC (P-256, P-384, P-521) or Ed25519 key')
}

/** The algorithms `parsed` may sign with: its JWK's alg, else every one its type allows. */
export function algorithmsOf(parsed: ParsedKey): readonly SigningAlgorithm[] {
  const all: readonly SigningAlgorithm[] = SIGNING_ALGORITHMS[parsed.kind]
  return parsed.alg === undefined ? all : all.filter((alg) => alg === parsed.alg)
}

/**
 * A key ready to sign with `alg` (default: the first of algorithmsOf, e.g. ES256 for P-256, PS256
 * for RSA). Its kid: `kid` when given, else the JWK's own, else the RFC 7638 thumbprint of the
 * public key (stable across restarts and replicas, as verifiers need).
 */
export async function signingKey(parsed: ParsedKey, options: { alg?: SigningAlgorithm; kid?: string } = {}): Promise<SigningKey> {
  // parsePrivateKey refused a JWK alg outside the key's list, so the list is never empty.
  const alg = options.alg ?? algorithmsOf(parsed)[0] ?? SIGNING_ALGORITHMS[parsed.kind][0]
  const jwk = createPublicKey(parsed.key).export({ format: 'jwk' }) as jose.JWK
  const keyId = options.kid ?? parsed.kid ?? (await jose.calculateJwkThumbprint(jwk, 'sha256'))
  const privateJwk = parsed.key.export({ format: 'jwk' }) as jose.JWK
  const key = await jose.importJWK(privateJwk, alg)
  if (key instanceof Uint8Array) throw new PrivateKeyError('is not an asymmetric key')
  return { kid: keyId, alg, key, publicJwk: { ...jwk, kid: keyId, alg, use: 'sig' } }
}
