// The cross-key rules of the Envoy ext_authz HTTP check's path: a route of its own below
// /api/v1/openid, never under one of the gateway's endpoints.

import { ENDPOINT_SEGMENTS, SIGN_IN_PATH } from '../../contract/endpoints.js'
import type { Issue } from '../path.js'
import { isString, type Read } from './read.js'

export function envoyRules(read: Read): Issue[] {
  return checkExtAuthzPath(read)
}

// The ext_authz prefix is a route of its own below /api/v1/openid: under an endpoint's segment it
// would collide with it (the router refuses a second /callback/*, which would stop the start).
function checkExtAuthzPath(read: Read): Issue[] {
  const path = read(['forwardAuth', 'extAuthzPath'], isString)
  const segment = path?.slice(SIGN_IN_PATH.length + 1).split('/')[0]
  if (segment === undefined || !ENDPOINT_SEGMENTS.includes(segment)) return []
  return [{ path: ['forwardAuth', 'extAuthzPath'], message: `must not be below the gateway's endpoint ${SIGN_IN_PATH}/${segment}` }]
}
