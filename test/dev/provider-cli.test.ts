import { spawn } from 'node:child_process'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { buildStandaloneApp } from '#src/runtime/process-state'
import { parseConfig } from '#src/config/load'
import { Browser } from '../fixtures/browser.ts'
import { freePort } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

// `npm run provider` as a user runs it: start it, copy what it prints into a gateway
// configuration, sign in.
// Built from the source by tap's `before` program (test/build.ts), as `npm run provider` runs it.
const CLI = new URL('../../build/dev/provider-cli.js', import.meta.url).pathname

function start(args: string[]): { output(): string; exited: Promise<number | null>; kill(signal: NodeJS.Signals): void } {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (d: Buffer) => (output += d.toString()))
  child.stderr.on('data', (d: Buffer) => (output += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve))
  return { output: () => output, exited, kill: (signal) => child.kill(signal) }
}

t.test('prints issuer, client and users; the printed configuration signs in through a gateway', async (t) => {
  const gatewayPort = await freePort()
  const gw = `http://127.0.0.1:${gatewayPort}`
  const cli = start(['--port', '0', '--gateway-url', gw])
  t.teardown(() => cli.kill('SIGKILL'))
  for (let i = 0; i < 200 && !cli.output().includes('Ctrl-C'); i++) await new Promise((r) => setTimeout(r, 100))
  const output = cli.output()

  const issuer = /Issuer {12}(\S+)/.exec(output)?.[1] ?? ''
  t.match(issuer, /^http:\/\/127\.0\.0\.1:\d+$/, 'the issuer is printed')
  t.match(output, /Client ID {9}gateway/)
  t.match(output, /Client secret {5}\S{20,}/)
  t.match(output, `Redirect URIs     ${gw}/api/v1/openid/callback`)
  t.match(output, /alice \(groups admins, staff\)/, 'who can sign in')
  const discovery = await fetch(`${issuer}/.well-known/openid-configuration`)
  t.equal(discovery.status, 200)
  t.equal(((await discovery.json()) as { issuer: string }).issuer, issuer, 'discovery answers for the printed issuer')

  // The printed snippet, as is, is the provider section of a working configuration.
  const snippet = output.slice(output.indexOf('In your gateway configuration:') + 'In your gateway configuration:'.length, output.indexOf('Ctrl-C'))
  const { provider } = parse(snippet) as { provider: Record<string, unknown> }
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const config = parseConfig(
    stringify({
      server: { host: '127.0.0.1', port: gatewayPort, publicUrl: gw },
      provider,
      cookies: { secrets: ['provider-cli-test-cookie-secret-0123456789'], secure: false },
      upstreams: [{ name: 'app', target: upstream.url }],
      log: { level: 'silent' },
    }),
    {},
  )
  const app = await buildStandaloneApp(config)
  t.teardown(() => app.close())
  await app.http.listen({ host: '127.0.0.1', port: gatewayPort })
  await app.providersReady
  const back = await new Browser().signIn(`${gw}/api/v1/openid/redirect?redirectAfter=%2Fhello`, 'alice')
  t.equal(back.status, 302, 'signed in through the printed configuration')
  t.equal(back.headers.get('location'), '/hello')

  cli.kill('SIGINT')
  t.equal(await cli.exited, 0, 'Ctrl-C stops it with exit 0')
})

t.test('a bad argument is a usage error, exit 2', async (t) => {
  for (const args of [['--port', 'x'], ['--gateway-url', 'http://x/path'], ['--nope']]) {
    const cli = start(args)
    t.equal(await cli.exited, 2, args.join(' '))
    t.match(cli.output(), /usage: npm run provider/)
  }
})
