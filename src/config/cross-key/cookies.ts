// The cross-key rules of `cookies`: the attributes a browser needs together, and Secure cookies
// only where a browser keeps them.

import type { Issue } from '../path.js'
import { isBoolean, isPlainHttpRemote, isString, type Read } from './read.js'

export function cookieRules(read: Read): Issue[] {
  return [...checkSameSite(read), ...checkSecureOverHttp(read), ...checkDomains(read)]
}

/** Each cleared cookie is expired on every domain: the list stays short (Pomerium allows five). */
const MAX_DOMAINS = 10

// Several domains (docs/features/several-domains.md): one key or the other. The hand-off to another
// domain is a chain of cross-site redirects, which never carries a SameSite=Strict cookie (RFC
// 6265bis 5.2.1): the public host's session would never be found, and every sign-in would loop.
function checkDomains(read: Read): Issue[] {
  const domains = read(['cookies', 'domains'], (v): v is unknown[] => Array.isArray(v))
  if (domains === undefined) return []
  if (read(['cookies', 'domain'], isString) !== undefined) return [{ path: ['cookies', 'domains'], message: 'cannot be used with cookies.domain: list every domain here' }]
  if (domains.length > MAX_DOMAINS) return [{ path: ['cookies', 'domains'], message: `at most ${MAX_DOMAINS} domains (each costs a Set-Cookie line when a session ends)` }]
  if (domains.length > 1 && read(['cookies', 'sameSite'], isString) === 'strict')
    return [{ path: ['cookies', 'sameSite'], message: 'strict cannot be used with several cookies.domains: the hand-off between domains is cross-site' }]
  return []
}

function checkSameSite(read: Read): Issue[] {
  if (read(['cookies', 'sameSite'], isString) !== 'none' || read(['cookies', 'secure'], isBoolean) !== false) return []
  return [{ path: ['cookies', 'sameSite'], message: 'none requires cookies.secure: true' }]
}

// Browsers drop Secure cookies set over plain http (localhost excepted): every sign-in would end
// in a loop back to the provider.
function checkSecureOverHttp(read: Read): Issue[] {
  const publicUrl = read(['server', 'publicUrl'], isString)
  if (read(['cookies', 'secure'], isBoolean) !== true || publicUrl === undefined || !isPlainHttpRemote(publicUrl)) return []
  const message = 'must be false when server.publicUrl is plain http (browsers drop Secure cookies there)'
  return [{ path: ['cookies', 'secure'], message }]
}
