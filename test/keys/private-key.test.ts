import { cli } from '../fixtures/cli.ts'
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { stringify } from 'yaml'
import { startDevProvider } from '#src/dev/provider'
import { formatEffectiveConfig } from '#src/config/mask'
import { describeFsError } from '#src/lib/fs-errors'
import { LiveGateway } from '#src/runtime/live'
import { problems, resolve } from '../fixtures/config/base.ts'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, freePort } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

// Key material never appears in a message: a value that is neither PEM nor
// JWK used to be read as a file path, and Node's ENAMETOOLONG message quoted it whole on stderr
// and in the reload's log line. Common shapes of that mistake are recognised and named instead.

const dir = mkdtempSync(join(tmpdir(), 'ogw-key-material-'))
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
const ecPem = ec.export({ format: 'pem', type: 'pkcs8' }).toString()
// The DER key in base64 on one line (what `openssl pkey -outform DER | base64 -w0` prints).
const rsaDerBase64 = rsa.export({ format: 'der', type: 'pkcs8' }).toString('base64')
// An EC key's DER in base64 (184 characters): read as a path, each '/'-separated name is shorter
// than NAME_MAX (255), so the file is simply missing (ENOENT). The RSA key's base64 would be read
// as names that are too long whenever a run of 256 characters without '/' happens to occur.
const ecDerBase64 = ec.export({ format: 'der', type: 'pkcs8' }).toString('base64')
// The RSA key in base64url: no '/', so read as a path it is one name longer than any file system's.
const rsaDerBase64Url = rsa.export({ format: 'der', type: 'pkcs8' }).toString('base64url')
// A PEM key base64-encoded once more: a Kubernetes Secret's data value put where text belongs.
const base64Pem = Buffer.from(ecPem).toString('base64')
// What `openssl pkcs12 -in bundle.p12 -nodes` writes: attribute lines before the boundary.
const bagAttributes = `Bag Attributes\n    localKeyID: 01 02 03 04\n    friendlyName: gateway\nKey Attributes: <No Attributes>\n${ecPem}`
const jwt = (clientKey: string) => ({ provider: { clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey } })

/** True when `text` holds any 16-character piece of `secret` (a key quoted whole or in part). */
function quotes(text: string, secret: string): boolean {
  const body = secret.replace(/-----[A-Z ]+-----|\s/g, '')
  for (let i = 0; i + 16 <= body.length; i += 8) if (text.includes(body.slice(i, i + 16))) return true
  return false
}

t.test('a value that is not a key is named by kind, never quoted', async (t) => {
  const cases: Record<string, [string, RegExp]> = {
    'base64url DER (read as a path: ENAMETOOLONG)': [rsaDerBase64Url, /provider\.clientKey: must be a PEM or JWK private key.*the name is too long for a path/],
    'base64 DER (read as a path: ENOENT)': [ecDerBase64, /provider\.clientKey: must be a PEM or JWK private key.*no such file/],
    'base64-encoded PEM': [base64Pem, /provider\.clientKey: is a base64-encoded PEM key: decode it once \(base64 -d\)/],
    'longer than any path': [rsaDerBase64.repeat(3), /provider\.clientKey: is neither PEM nor JWK private key text, nor the path of a file/],
    'spanning lines without a boundary': [`${rsaDerBase64.slice(0, 64)}\n${rsaDerBase64.slice(64, 128)}`, /provider\.clientKey: is neither PEM nor JWK/],
  }
  for (const [name, [value, expected]] of Object.entries(cases)) {
    const found = problems(jwt(value))
    t.equal(found.length, 1, name)
    t.match(found[0], expected, name)
    t.notOk(quotes(found.join('\n'), value), `${name}: the value is not quoted`)
  }
  const fileOfBase64Pem = join(dir, 'base64.pem')
  writeFileSync(fileOfBase64Pem, base64Pem)
  t.strictSame(problems(jwt(fileOfBase64Pem)), [
    'provider.clientKey: names a file that holds a base64-encoded PEM key: decode it once (base64 -d) and give the PEM text, which starts with -----BEGIN',
  ])
})

t.test("a file-system error is described by its code, never by Node's message (which quotes the path)", async (t) => {
  const error = Object.assign(new Error(`ENAMETOOLONG: name too long, open '${rsaDerBase64}'`), { code: 'ENAMETOOLONG' })
  t.equal(describeFsError(error), 'the name is too long for a path')
  const unknown = Object.assign(new Error(`EWEIRD: open '${rsaDerBase64}'`), { code: 'EWEIRD' })
  t.equal(describeFsError(unknown), 'error EWEIRD')
  t.equal(describeFsError(new Error(rsaDerBase64)), 'unreadable')
})

t.test('PEM with attribute lines before its boundary is accepted, inline and in a file (RFC 7468 section 2)', async (t) => {
  t.strictSame(problems(jwt(bagAttributes)), [], 'inline')
  const file = join(dir, 'bundle.pem')
  writeFileSync(file, bagAttributes)
  t.strictSame(problems(jwt(file)), [], 'file')
  const printed = formatEffectiveConfig(resolve(jwt(bagAttributes)))
  t.match(printed, /clientKey: '\*{8}'/, 'masked by check like any inline key')
  t.notOk(quotes(printed, ecPem))
})

t.test('check and run refuse a base64url DER key naming the key, without printing it', async (t) => {
  const path = join(mkdtempSync(join(tmpdir(), 'ogw-key-cli-')), 'gateway.yaml')
  writeFileSync(
    path,
    stringify({
      server: { host: '127.0.0.1', port: 1, publicUrl: 'http://127.0.0.1:1', managementPort: 0 },
      provider: { issuer: 'http://127.0.0.1:9', clientId: 'gw', clientAuthMethod: 'private_key_jwt', clientKey: '${KEY}', allowInsecureHttp: true },
      cookies: { secrets: [COOKIE_SECRET], secure: false },
      upstreams: [{ name: 'app', target: 'http://127.0.0.1:9', auth: 'none' }],
    }),
  )
  for (const command of [['check'], ['run']]) {
    const run = await cli([...command, '--config', path], { KEY: rsaDerBase64Url }).done
    t.equal(run.code, 2, `${command[0]}: exit 2`)
    t.match(run.stderr, /provider\.clientKey: .*the name is too long for a path/, `${command[0]}: names the key`)
    t.notOk(quotes(run.stdout + run.stderr, rsaDerBase64Url), `${command[0]}: the key is not printed`)
  }
})

async function liveGateway(t: Test): Promise<{ live: LiveGateway; path: string; base: Record<string, unknown>; lines: string[] }> {
  const port = await freePort()
  const gw = `http://127.0.0.1:${port}`
  const provider = await startDevProvider({ clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${gw}/api/v1/openid/callback`] }] })
  t.teardown(() => provider.close())
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const base = {
    server: { host: '127.0.0.1', port, publicUrl: gw, managementPort: 0 },
    provider: { issuer: provider.issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, allowInsecureHttp: true, timeoutMs: 2000 },
    cookies: { secrets: [COOKIE_SECRET], secure: false },
    upstreams: [{ name: 'app', target: upstream.url }],
    log: { level: 'info' },
  }
  const path = join(mkdtempSync(join(tmpdir(), 'ogw-key-live-')), 'gateway.yaml')
  writeFileSync(path, stringify(base))
  const lines: string[] = []
  const live = await LiveGateway.start({ path, env: {}, logStream: { write: (line: string) => void lines.push(line) } })
  t.teardown(() => live.close(1000))
  await live.app.providersReady
  return { live, path, base, lines }
}

t.test('a reload refused for a key-shaped value logs the key name, not the value', async (t) => {
  const { live, path, base, lines } = await liveGateway(t)
  const provider = base.provider as Record<string, unknown>
  for (const value of [rsaDerBase64Url, base64Pem]) {
    writeFileSync(path, stringify({ ...base, provider: { ...provider, clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey: value } }))
    t.equal(await live.reload('SIGHUP'), false, 'refused')
    const logged = lines.join('\n')
    t.match(logged, /provider\.clientKey: /, 'the log names the key')
    t.notOk(quotes(logged, value), 'the log does not quote the value')
  }
})
