import { Server, ServerCredentials } from '@grpc/grpc-js'
import Fastify from 'fastify'
import { loadExtAuthzServices, serverAuthorizationService } from '../build/ext-authz/protos.js'
const kind = process.argv[2]
if (kind === 'grpc') {
  const s = loadExtAuthzServices()
  const server = new Server({ 'grpc.enable_channelz': 0 })
  const resp = { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-user', value: 'alice' } }], headers_to_remove: ['x-email'] } }
  server.addService(serverAuthorizationService(s.authorization), { Check(call, cb) { cb(null, resp) } })
  server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, port) => process.send({ port }))
} else {
  const app = Fastify({ logger: false })
  app.all('/api/v1/openid/ext-authz/*', async (req, reply) => { reply.header('x-user', 'alice'); return reply.code(200).send() })
  await app.listen({ port: 0, host: '127.0.0.1' })
  process.send({ port: app.server.address().port })
}
process.on('message', (m) => { if (m === 'stats') { const c = process.cpuUsage(); process.send({ cpu: c.user + c.system }) } else process.exit(0) })
