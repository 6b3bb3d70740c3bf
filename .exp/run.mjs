import { fork, spawnSync, execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { loadExtAuthzServices } from '../build/ext-authz/protos.js'
import { checkRequest } from '../build-bench/test/fixtures/ext-authz-grpc.js'
import { grpcLoad, rawUnaryCaller } from '../build-bench/bench/grpc-load.js'
spawnSync('taskset', ['-p', '-c', '1', String(process.pid)])
const mode = process.argv[2]
const child = fork(new URL('./server.mjs', import.meta.url).pathname, [mode === 'http' ? 'http' : 'grpc'], { execPath: 'taskset', execArgv: ['-c', '0', process.execPath] })
const msg = () => new Promise((r) => child.once('message', r))
const { port } = await msg()
const stats = async () => { child.send('stats'); return (await msg()).cpu }
const check = loadExtAuthzServices().authorization.Check
const req = checkRequest({ method: 'GET', host: 'h', path: '/page', headers: { ':authority': 'h', ':method': 'GET', ':path': '/page', cookie: 'a=b'.repeat(100), accept: 'application/json' } })
const bytes = check.requestSerialize(req); const frame = Buffer.alloc(5 + bytes.length); frame.writeUInt32BE(bytes.length, 1); bytes.copy(frame, 5); writeFileSync('/tmp/req.bin', frame)
let run
if (mode === 'grpc-node') { const c = rawUnaryCaller(`127.0.0.1:${port}`, check, req); run = async (s) => (await grpcLoad(async () => (await c.call()).status === 0, 50, s)).requests }
else if (mode === 'grpc-h2load') run = async (s) => { const out = execFileSync('taskset', ['-c', '1', 'h2load', '-D', String(s), '-c', '1', '-m', '50', '-d', '/tmp/req.bin', '-H', 'content-type: application/grpc', '-H', 'te: trailers', `http://127.0.0.1:${port}/envoy.service.auth.v3.Authorization/Check`]).toString(); return Number(/(\d+) succeeded/.exec(out)[1]) }
else run = async (s) => { const out = execFileSync('taskset', ['-c', '1', 'h2load', '--h1', '-D', String(s), '-c', '50', '-m', '1', `http://127.0.0.1:${port}/api/v1/openid/ext-authz/page`]).toString(); return Number(/(\d+) succeeded/.exec(out)[1]) }
await run(2)
for (let i = 0; i < 2; i++) { const c0 = await stats(); const n = await run(5); const c1 = await stats(); console.log(mode, (n/5).toFixed(0), 'req/s', ((c1 - c0) / n).toFixed(1), 'µs/req') }
child.send('exit'); process.exit(0)
