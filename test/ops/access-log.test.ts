import t from 'tap'
import fc from 'fast-check'
import { mkdtempSync, openSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { AccessLog } from '#src/ops/access-log'
import { bufferedDestination, LOG_FLUSH_MS, loggerOptions } from '#src/ops/logging'

function collect(): { lines: string[]; write(line: string): void } {
  const lines: string[] = []
  return { lines, write: (line) => void lines.push(line) }
}

t.test('the request line has the shape pino gives the same fields, and one line per write', async (t) => {
  const own = collect()
  new AccessLog(own, 'info').write({
    reqId: 'r-1',
    method: 'GET',
    url: '/page?q=1',
    status: 200,
    ms: 1.5,
    ip: '127.0.0.1',
    sub: 'alice',
    fields: { extAuthz: { outcome: 'pass', upstream: 'app' } },
  })
  const viaPino = collect()
  pino(loggerOptions({ level: 'info' } as never), viaPino)
    .child({ reqId: 'r-1' })
    .info({ method: 'GET', url: '/page?q=1', status: 200, ms: 1.5, ip: '127.0.0.1', sub: 'alice', extAuthz: { outcome: 'pass', upstream: 'app' } }, 'request')
  t.equal(own.lines.length, 1)
  t.ok(own.lines[0]?.endsWith('}\n'), 'a whole line')
  const ours = JSON.parse(own.lines[0] ?? '') as Record<string, unknown>
  const theirs = JSON.parse(viaPino.lines[0] ?? '') as Record<string, unknown>
  t.type(ours.time, 'number')
  delete ours.time
  delete theirs.time
  t.same(Object.keys(ours), Object.keys(theirs), 'the same fields in the same order')
  t.same(ours, theirs, 'with the same values')
})

t.test('the target is redacted, absent fields are left out, strings are escaped', async (t) => {
  const out = collect()
  new AccessLog(out, 'info').write({
    method: 'GET',
    url: '/api/v1/openid/callback?code=secret-code&state=s"t',
    grpc: 'Authorization/Check',
    status: 302,
    ms: 0.1,
    fields: { skipped: undefined, note: 'a "quoted"\nvalue' },
  })
  const line = JSON.parse(out.lines[0] ?? '') as Record<string, unknown>
  t.notOk(out.lines[0]?.includes('secret-code'), 'no code')
  t.equal(line.url, '/api/v1/openid/callback?code=[redacted]&state=[redacted]')
  t.equal(line.grpc, 'Authorization/Check')
  t.notOk('reqId' in line || 'ip' in line || 'sub' in line || 'skipped' in line, 'nothing undefined is written')
  t.equal(line.note, 'a "quoted"\nvalue')
  const timed = collect()
  new AccessLog(timed, 'info').write({ method: 'GET', url: '/', status: 200, ms: 12.3456 })
  t.equal((JSON.parse(timed.lines[0] ?? '') as { ms: number }).ms, 12.3, 'the duration to a tenth of a millisecond')
  t.equal(out.lines[0]?.split('\n').length, 2, 'one line, whatever the values hold')
})

t.test('property: every string field reads back as written, one line, whatever it holds', async (t) => {
  // The plain ones are quoted as they are, the others through JSON.stringify (quote in access-log.ts).
  const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('a"b', 'a\\b', '\u2028', 'é', '\ud800', '/p?x=1'))
  fc.assert(
    fc.property(text, text, text, text, (reqId, method, ip, sub) => {
      const out = collect()
      new AccessLog(out, 'info').write({ reqId, method, url: '/page', status: 200, ms: 1, ip, sub, fields: { [`f${sub}`]: method } })
      const written = out.lines[0] ?? ''
      const line = JSON.parse(written) as Record<string, unknown>
      return (
        written.split('\n').length === 2 && line[`f${sub}`] === method && line.reqId === reqId && line.method === method && line.ip === ip && line.sub === sub
      )
    }),
  )
  t.pass('checked')
})

t.test('below info, no request line', async (t) => {
  for (const level of ['warn', 'error', 'fatal', 'silent'] as const) {
    const out = collect()
    const log = new AccessLog(out, level)
    log.write({ method: 'GET', url: '/', status: 200, ms: 1 })
    t.equal(log.enabled, false, level)
    t.same(out.lines, [], level)
  }
  for (const level of ['info', 'debug', 'trace'] as const) {
    const out = collect()
    new AccessLog(out, level).write({ method: 'GET', url: '/', status: 200, ms: 1 })
    t.equal(out.lines.length, 1, level)
  }
})

t.test('bufferedDestination writes whole lines, at most PIPE_BUF bytes at a time, and holds a short tail until flushed', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ogw-log-'))
  const file = join(dir, 'log')
  const fd = openSync(file, 'w')
  const destination = bufferedDestination(fd)
  // Closes the file too.
  t.teardown(() => destination.destroy())
  // Lines of several lengths, long ones included: a batch never grows past PIPE_BUF by a line.
  const lines = Array.from({ length: 100 }, (_, n) => `${JSON.stringify({ msg: 'request', n, pad: 'x'.repeat(n % 3 === 0 && n < 96 ? 2000 : 180) })}\n`)
  const ends = new Set<number>([0])
  lines.reduce((end, line) => (ends.add(end + line.length), end + line.length), 0)
  const total = lines.join('').length
  let size = 0
  for (const line of lines) {
    destination.write(line)
    const now = statSync(file).size
    t.ok(now - size <= 4096, 'a write is at most PIPE_BUF bytes')
    t.ok(ends.has(now), 'of whole lines')
    size = now
  }
  t.ok(size > 0, 'lines are written as batches fill')
  t.ok(size < total, 'the tail waits')
  destination.flushSync()
  t.equal(readFileSync(file, 'utf8'), lines.join(''), 'flushSync writes the rest')
})

t.test('bufferedDestination writes a lone line within LOG_FLUSH_MS, and a line longer than PIPE_BUF whole', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ogw-log-'))
  const file = join(dir, 'log')
  const destination = bufferedDestination(openSync(file, 'w'))
  t.teardown(() => destination.destroy())
  const written = Date.now()
  destination.write('{"msg":"alone"}\n')
  t.equal(statSync(file).size, 0, 'held at first')
  // Real time is what is tested here: the periodic write.
  while (statSync(file).size === 0 && Date.now() - written < 5 * LOG_FLUSH_MS) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(readFileSync(file, 'utf8'), '{"msg":"alone"}\n', 'written by the periodic flush')
  t.ok(Date.now() - written < 3 * LOG_FLUSH_MS, 'about LOG_FLUSH_MS later')
  const long = `${JSON.stringify({ msg: 'long', pad: 'x'.repeat(5000) })}\n`
  destination.write('{"msg":"before"}\n')
  destination.write(long)
  destination.flushSync()
  t.equal(readFileSync(file, 'utf8'), `{"msg":"alone"}\n{"msg":"before"}\n${long}`, 'in order, the long line whole')
})
