// The cross-key rules of an upstream's legacy credentials (upstream/credentials.ts): the user as
// HTTP Basic (RFC 7617), the ID token as Bearer, the access token in a header of its own.
// - One header carries one credential: two keys that both write `Authorization` (forwardBasicAuth,
//   forwardIdToken, forwardAccessToken, tokenExchange) would leave the application a value that
//   depends on the order they are written in, so each pair is refused naming both keys.
// - tokenExchange promises that the user's own token never reaches the upstream (RFC 8693): the
//   access token in X-Forwarded-Access-Token contradicts it.
// - Each needs a signed-in user: with `auth: none` nobody is, and the key would do nothing.
// - The ID token lives with the session's long-lived credentials: with the cookie store and
//   `cookies.credentialsPath` on the sign-in path, that cookie never comes with an application's
//   request, so the upstream would never receive it.
// - The Basic password is a secret: given through the environment (`${VAR}`, the whole value) or
//   a file, never written in the configuration; refusedLiteralPasswords reads the file as written.

import { readFileSync } from 'node:fs'
import { describeFsError } from '../../lib/fs-errors.js'
import { formatPath, type Issue, type Path } from '../path.js'
import { isBoolean, isRecord, isString, type Read, valueAt } from './read.js'

/** The keys of an upstream that write `Authorization`, in the order a refusal names them. */
const AUTHORIZATION_KEYS = ['forwardAccessToken', 'tokenExchange', 'forwardIdToken', 'forwardBasicAuth'] as const
/** The pairs of them refused here (forwardAccessToken with tokenExchange is refused by upstreams.ts). */
const LEGACY_KEYS: ReadonlySet<string> = new Set(['forwardIdToken', 'forwardBasicAuth'])

/** A whole value that is one environment reference, `${NAME}`, with no default and nothing around it. */
const ONE_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/

const CONTROL = /[\x00-\x1f\x7f]/

export function legacyCredentialRules(read: Read, data: unknown): Issue[] {
  const upstreams = valueAt(data, ['upstreams'])
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index) => checkUpstream(read, index))
}

function checkUpstream(read: Read, index: number): Issue[] {
  const at = (key: string): Path => ['upstreams', index, key]
  const given = (key: string): boolean => read(at(key), isBoolean) === true || read(at(key), isRecord) !== undefined
  const issues: Issue[] = []
  const writers = AUTHORIZATION_KEYS.filter(given)
  writers.forEach((key, position) => {
    if (!LEGACY_KEYS.has(key)) return
    for (const other of writers.slice(0, position)) {
      issues.push({ path: at(key), message: `cannot be given with ${formatPath(at(other))}: both are sent as Authorization, which carries one credential` })
    }
  })
  if (given('forwardAccessTokenHeader') && given('tokenExchange')) {
    issues.push({
      path: at('forwardAccessTokenHeader'),
      message: `cannot be true with ${formatPath(at('tokenExchange'))}: the exchange keeps the user's own token from the upstream`,
    })
  }
  if (read(at('auth'), isString) === 'none') {
    for (const key of ['forwardIdToken', 'forwardAccessTokenHeader', 'forwardBasicAuth']) {
      if (given(key)) issues.push({ path: at(key), message: `needs a signed-in user: it does nothing with ${formatPath(at('auth'))}: none` })
    }
  }
  if (given('forwardIdToken')) {
    const store = read(['session', 'store'], isString) ?? 'cookie'
    const path = read(['cookies', 'credentialsPath'], isString) ?? '/'
    if (store === 'cookie' && path !== '/') {
      issues.push({
        path: at('forwardIdToken'),
        message: `cannot be true with ${formatPath(['cookies', 'credentialsPath'])}: ${path}: the ID token is kept in the cookie sent only there, never with the application's requests`,
      })
    }
  }
  issues.push(...checkBasicPassword(read, [...at('forwardBasicAuth')]))
  return issues
}

/** Exactly one of password and passwordFile; a file that is readable and holds a password. */
function checkBasicPassword(read: Read, at: Path): Issue[] {
  if (read(at, isRecord) === undefined) return []
  const password = read([...at, 'password'], isString)
  const file = read([...at, 'passwordFile'], isString)
  if (password !== undefined && file !== undefined) {
    return [{ path: [...at, 'passwordFile'], message: `cannot be given with ${formatPath([...at, 'password'])}: give the password one way` }]
  }
  if (password !== undefined) return CONTROL.test(password) ? [{ path: [...at, 'password'], message: 'holds a control character' }] : []
  // A key with a problem of its own is reported where it is: `read(at)` then reads nothing.
  if (file === undefined) return [{ path: at, message: 'needs password (${VAR}) or passwordFile' }]
  let content: string
  try {
    content = readFileSync(file, 'utf8').replace(/\r?\n$/, '')
  } catch (error) {
    return [{ path: [...at, 'passwordFile'], message: `cannot read ${file} (${describeFsError(error)})` }]
  }
  if (content === '') return [{ path: [...at, 'passwordFile'], message: `${file} is empty` }]
  if (CONTROL.test(content)) return [{ path: [...at, 'passwordFile'], message: `${file} holds a control character (a line break inside the password?)` }]
  return []
}

/**
 * The Basic passwords written in the configuration itself, read from the file as parsed before the
 * environment is substituted: a value other than one `${VAR}` is the secret in plain text (or a
 * default of one, `${VAR:-secret}`). Refused naming the key, never the value.
 */
export function refusedLiteralPasswords(raw: unknown): Issue[] {
  const upstreams = valueAt(raw, ['upstreams'])
  if (!Array.isArray(upstreams)) return []
  return upstreams.flatMap((_, index): Issue[] => {
    const path: Path = ['upstreams', index, 'forwardBasicAuth', 'password']
    const value = valueAt(raw, path)
    if (typeof value !== 'string' || ONE_REFERENCE.test(value)) return []
    return [{ path, message: 'is written in the configuration: give it as ${VAR} from the environment, or use passwordFile' }]
  })
}
