// The cross-key rules of `server`: each listener on a port of its own, and the Envoy gRPC service
// in a single process.

import type { Issue } from '../path.js'
import { isNumber, type Read } from './read.js'

export function serverRules(read: Read): Issue[] {
  return [...checkManagementPort(read), ...checkExtAuthzGrpcPort(read)]
}

// The probes and metrics must not share the public listener: a second bind of the same port
// would fail at start, after `check` passed.
function checkManagementPort(read: Read): Issue[] {
  const port = read(['server', 'port'], isNumber)
  const management = read(['server', 'managementPort'], isNumber)
  if (port === undefined || management === undefined || management === 0 || management !== port) return []
  return [{ path: ['server', 'managementPort'], message: 'must differ from server.port (0 turns the management listener off)' }]
}

// The ext_authz gRPC service is a listener of its own: it must not take another's port, and it
// runs in a single process (the workers of server.workers share the HTTP port through the
// primary; the gRPC service has not been made to, so it is refused rather than left unbound).
function checkExtAuthzGrpcPort(read: Read): Issue[] {
  const grpc = read(['server', 'extAuthzGrpcPort'], isNumber)
  if (grpc === undefined || grpc === 0) return []
  const path = ['server', 'extAuthzGrpcPort']
  if (grpc === read(['server', 'port'], isNumber)) return [{ path, message: 'must differ from server.port' }]
  if (grpc === read(['server', 'managementPort'], isNumber)) return [{ path, message: 'must differ from server.managementPort' }]
  const workers = read(['server', 'workers'], (v): v is number | string => typeof v === 'number' || typeof v === 'string')
  if (workers !== undefined && workers !== 1) return [{ path, message: 'is served by a single process: use server.workers: 1 (several replicas behind a Service instead)' }]
  return []
}
