// The cross-key rules of `envoy`: the Envoy ext_authz HTTP check's path is a route of its own below
// /api/v1/openid, never under one of the gateway's endpoints, and it is given under one name.
//
// `envoy.pathPrefix` was `forwardAuth.extAuthzPath`, a name that said neither whose check it is
// nor what Envoy calls it (HttpService `path_prefix`, envoyproxy/envoy
// api/envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto). The former name is still read,
// with a warning naming the new one; both at once are refused, even with one value, so that the
// file never holds a key that could be edited to no effect.

import { ENDPOINT_SEGMENTS, SIGN_IN_PATH } from '../../contract/endpoints.js'
import { formatPath, type Issue, type Path } from '../path.js'
import { isString, type Read, valueAt } from './read.js'

const PATH_PREFIX: Path = ['envoy', 'pathPrefix']
/** Deprecated: the former name of envoy.pathPrefix. */
const FORMER_PATH_PREFIX: Path = ['forwardAuth', 'extAuthzPath']

export function envoyRules(read: Read, data: unknown): Issue[] {
  const given = [FORMER_PATH_PREFIX, PATH_PREFIX].filter((path) => valueAt(data, path) !== undefined)
  if (given.length > 1) {
    return [{ path: FORMER_PATH_PREFIX, message: `cannot be given with ${formatPath(PATH_PREFIX)}, its new name: remove ${formatPath(FORMER_PATH_PREFIX)}` }]
  }
  return given.flatMap((path) => checkPathPrefix(read, path))
}

/** The deprecated names the file gives, each with the name to write instead. */
export function envoyDeprecations(data: unknown): Issue[] {
  if (valueAt(data, FORMER_PATH_PREFIX) === undefined) return []
  return [{ path: FORMER_PATH_PREFIX, message: `is deprecated: write ${formatPath(PATH_PREFIX)} instead (the same value under its new name)` }]
}

// Under an endpoint's segment the prefix would collide with it (the router refuses a second
// /callback/*, which would stop the start).
function checkPathPrefix(read: Read, at: Path): Issue[] {
  const path = read(at, isString)
  const segment = path?.slice(SIGN_IN_PATH.length + 1).split('/')[0]
  if (segment === undefined || !ENDPOINT_SEGMENTS.includes(segment)) return []
  return [{ path: at, message: `must not be below the gateway's endpoint ${SIGN_IN_PATH}/${segment}` }]
}
