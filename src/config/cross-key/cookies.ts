// The cross-key rules of `cookies`: the attributes a browser needs together, and Secure cookies
// only where a browser keeps them.

import type { Issue } from '../path.js'
import { isBoolean, isPlainHttpRemote, isString, type Read } from './read.js'

export function cookieRules(read: Read): Issue[] {
  return [...checkSameSite(read), ...checkSecureOverHttp(read)]
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
