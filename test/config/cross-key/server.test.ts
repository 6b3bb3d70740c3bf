// The cross-key rules of server (config/cross-key/server.ts): each listener on its own port, and the
// Envoy gRPC service in a single process.

import t from 'tap'
import { problems } from '../../fixtures/config/base.ts'

t.test('the listeners take ports of their own; the gRPC service one process', async (t) => {
  t.strictSame(problems({ server: { port: 8080, managementPort: 8080 } }), ['server.managementPort: must differ from server.port (0 turns the management listener off)'], 'managementPort equal to the public port')
  t.strictSame(problems({ server: { port: 8080, extAuthzGrpcPort: 8080 } }), ['server.extAuthzGrpcPort: must differ from server.port'], 'extAuthzGrpcPort equal to the public port')
  t.strictSame(problems({ server: { extAuthzGrpcPort: 9091 } }), ['server.extAuthzGrpcPort: must differ from server.managementPort'], 'extAuthzGrpcPort equal to the management port')
  t.strictSame(problems({ server: { extAuthzGrpcPort: 9001, workers: 2 } }), ['server.extAuthzGrpcPort: is served by a single process: use server.workers: 1 (several replicas behind a Service instead)'], 'extAuthzGrpcPort with workers')
})
