#!/usr/bin/env node
// First: SIGHUP is caught from the start (ops/hangups.ts).
import { hangups, type Hangups } from './ops/hangups.js'
import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { AggregatorRegistry } from 'prom-client'
import { callPrimary, onBroadcast } from './runtime/ipc.js'
import { ABORT, COMMIT, isAbortRequest, isCommitRequest, isPrepareRequest, PREPARE, type PrepareAnswer } from './runtime/reload.js'
import { EXIT_WORKER_LISTEN, runPrimary, workerCount } from './runtime/primary.js'
import { workerState } from './runtime/worker-state.js'
import { ConfigError, EXIT_CONFIG, loadConfigFile, loadConfigText, type LoadedConfig } from './config/load.js'
import { describeExposure, exposedSecretFiles } from './config/file-modes.js'
import { formatEffectiveConfig } from './config/mask.js'
import { MANAGEMENT_HOST_ENV } from './config/normalize.js'
import { startupSummary } from './config/summary.js'
import { checkProviders } from './oidc/provider-support.js'
import { readFileSync } from 'node:fs'
import { clientJwks } from './oidc/client-auth.js'
import { LiveGateway } from './runtime/live.js'
import pino from 'pino'
import { loggerOptions, stdoutDestination } from './ops/logging.js'
import { buildManagement, readiness } from './ops/management.js'
import type { EnvoyGrpcServer } from './checks/envoy-grpc/server.js'
import type { GatewayConfig } from './options/types.js'
import { runImport } from './import/command.js'

const DEFAULT_CONFIG = 'config/gateway.yaml'
const COMMANDS = ['run', 'check', 'jwks']
/** `check --online` found a provider that disagrees with the configuration (2 is an invalid file). */
const EXIT_PROVIDER_PROBLEM = 1

const USAGE = 'usage: openid-gateway [run|check|jwks] [--config PATH] [options], or import oauth2-proxy FILE...; --help for more'

const HELP = `usage: openid-gateway [command] [--config PATH] [options]

Commands:
  run (default)   serve: the gateway on server.port, the management listener on
                  server.managementPort; SIGTERM/SIGINT drain and exit 0, SIGHUP reloads the file
  check           validate the file offline and end with one OK line naming it (exit 0), or list
                  every problem by key (exit 2)
  jwks            print the public JWKS of provider.clientKey, to register for private_key_jwt
  import oauth2-proxy [FILE...] [-- FLAG...]
                  convert oauth2-proxy's configuration (oauth2-proxy.cfg, its flags, OAUTH2_PROXY_*
                  lines, its alpha YAML) into this gateway's YAML on stdout; every setting it
                  cannot carry on stderr; exit 0, 1 (some not carried) or 2 (nothing written).
                  import --help for its options

Options:
  -c, --config PATH   the configuration file (default ${DEFAULT_CONFIG})
  --online            check: also fetch each provider's discovery document and JWKS, compare them
                      with the configuration, and probe the client's credentials and redirect URI
                      (requests that grant nothing); one line per provider, exit 1 on a problem
  --print-config      check: print the effective configuration (defaults applied, secrets
                      masked) as YAML on stdout; the verdict goes to stderr
  --provider NAME     jwks: the provider whose key to print (with several clientKeys)
  -h, --help          this text
  -v, --version       the version

Environment:
  \${NAME} in the file   replaced by the variable NAME (\${NAME:-default}; $\${ for a literal \${)
  ${MANAGEMENT_HOST_ENV}
                      server.managementHost when the file does not set it (default 127.0.0.1)
  NODE_EXTRA_CA_CERTS read by Node: a private CA for https providers, Redis and upstreams

Exit codes: 0 ok, 1 check --online found a problem or the gateway failed, 2 invalid configuration
or command line.
`

/** The version of the package this build belongs to (package.json sits next to build/ and src/). */
function packageVersion(): string {
  const parsed: unknown = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
  return typeof parsed === 'object' && parsed !== null && 'version' in parsed && typeof parsed.version === 'string' ? parsed.version : 'unknown'
}

/** Runs `step`; a configuration error ends the process with exit code 2 and its message (then `verdict`). */
async function configured<T>(step: () => T | Promise<T>, verdict?: string): Promise<T> {
  try {
    return await step()
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n${verdict === undefined ? '' : `${verdict}\n`}`)
      process.exit(EXIT_CONFIG)
    }
    throw err
  }
}

async function run(loaded: LoadedConfig, path: string, hangups: Hangups): Promise<void> {
  const { config } = loaded
  const count = workerCount(config.server.workers)
  if (count > 1 && cluster.isPrimary) return runPrimary(loaded, count, path, hangups)
  const worker = cluster.isWorker ? workerState(config.session.maxAgeSeconds) : undefined
  const gateway = await configured(() => LiveGateway.start({ path, ...(worker === undefined ? {} : { worker }) }, loaded))
  let draining = false
  let grpc: EnvoyGrpcServer | undefined
  const metrics = gateway.app.management.metrics
  if (worker !== undefined) {
    // The primary serves the management listener: it asks each worker whether it is ready, and
    // prom-client's aggregator collects this registry (the same one across reloads).
    AggregatorRegistry.setRegistries([metrics])
    // prom-client answers the primary's requests once an aggregator exists in the worker.
    new AggregatorRegistry()
    onBroadcast('ready', async () => (await readiness(gateway.probes, draining)).status === 'ready')
    serveReloads(gateway)
  }
  const management =
    config.server.managementPort === 0 || worker !== undefined
      ? undefined
      : await buildManagement({ metrics, probes: gateway.probes, draining: () => draining, config: () => gateway.state })
  const stop = (signal: string): void => {
    if (draining) return
    draining = true
    const started = Date.now()
    const { shutdownTimeoutMs } = gateway.config.server
    gateway.log.info({ signal, shutdownTimeoutMs }, 'draining in-flight requests')
    // The server stops accepting connections and waits for in-flight requests; past the bound the
    // remaining connections are cut so that the process ends before Kubernetes kills it. The
    // management listener closes last: /readyz answers 503 throughout the drain.
    gateway
      .close(shutdownTimeoutMs)
      .then(() => grpc?.close())
      .then(() => management?.close())
      .then(
        () => {
          gateway.log.info({ signal, ms: Date.now() - started }, 'stopped')
          process.exit(0)
        },
        (err: unknown) => {
          gateway.log.error({ err }, 'shutdown failed')
          process.exit(1)
        },
      )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  // A worker reloads when its primary says so (runtime/reload.ts), never on a signal of its own.
  hangups.handle(() => {
    if (worker !== undefined) gateway.log.info('SIGHUP to a worker is ignored: send it to the primary, which reloads every worker')
    else if (!draining) void gateway.reload('SIGHUP')
  })
  await gateway.listen().catch((err: unknown) => {
    // Under a primary, a worker that cannot listen says so and exits with the code that stops the
    // gateway (runtime/primary.ts); one process exits 1 from main's catch.
    if (worker === undefined) throw err
    process.stderr.write(`openid-gateway: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(EXIT_WORKER_LISTEN)
  })
  grpc = await startGrpc(gateway, () => draining)
  if (management !== undefined) {
    const address = await management.listen({ host: config.server.managementHost, port: config.server.managementPort })
    gateway.log.info({ address }, 'management listener (/healthz, /readyz, /metrics, /config)')
  }
}

/**
 * The Envoy ext_authz gRPC service (server.extAuthzGrpcPort): each call asks the app running at
 * that moment (its Envoy check, its readiness probes) and the drain.
 */
async function startGrpc(gateway: LiveGateway, draining: () => boolean): Promise<EnvoyGrpcServer | undefined> {
  const { host, extAuthzGrpcPort } = gateway.config.server
  if (extAuthzGrpcPort === 0) return undefined
  // gRPC (@grpc/grpc-js, proto-loader, protobufjs) is loaded only when the service is on.
  const { startEnvoyGrpcListener } = await import('./runtime/envoy-grpc-listener.js')
  const grpc = await startEnvoyGrpcListener({ host, port: extAuthzGrpcPort, gateway, draining, log: gateway.log })
  gateway.log.info({ port: grpc.port }, 'ext_authz gRPC service (envoy.service.auth.v3.Authorization, grpc.health.v1)')
  return grpc
}

/** A worker's part in the primary's two-phase reload (runtime/reload.ts). */
function serveReloads(gateway: LiveGateway): void {
  onBroadcast(PREPARE, async (args): Promise<PrepareAnswer> => {
    if (!isPrepareRequest(args)) return { ok: false, problems: ['a malformed reload request'], reason: 'internal error' }
    const refusal = await gateway.prepare(args.text)
    return refusal === undefined ? { ok: true } : { ok: false, ...refusal }
  })
  onBroadcast(COMMIT, (args) => (isCommitRequest(args) ? gateway.commit(args.hash) : false))
  onBroadcast(ABORT, (args) => (isAbortRequest(args) ? gateway.abort(args) : undefined))
}

/** A worker runs the file its primary runs (it may have changed since, in a refused reload). */
async function workerConfig(path: string): Promise<LoadedConfig> {
  return loadConfigText(await callPrimary('config.text', null), path)
}

/** The JWKS of the provider with a clientKey: the only one, or the one `--provider` names. */
async function providerJwks(config: GatewayConfig, name: string | undefined): Promise<{ keys: unknown[] }> {
  const keyed = config.providers.filter((p) => p.clientKey !== undefined)
  const chosen = name === undefined ? keyed : keyed.filter((p) => p.name === name)
  const [provider] = chosen
  if (chosen.length === 1 && provider !== undefined) return (await clientJwks(provider)) ?? { keys: [] }
  if (name !== undefined) throw new ConfigError([`--provider ${name}: no provider of that name has a clientKey`])
  if (chosen.length === 0) {
    throw new ConfigError(['provider.clientKey is not set: jwks prints the public key of provider.clientAuthMethod: private_key_jwt'])
  }
  throw new ConfigError([`several providers have a clientKey (${chosen.map((p) => p.name).join(', ')}): name one with --provider`])
}

/** The `check` command: the verdict on the file, one line naming it; the effective configuration with --print-config. */
async function checkCommand(loaded: LoadedConfig, path: string, options: { online: boolean; printConfig: boolean }): Promise<void> {
  const { config } = loaded
  const verdicts = options.printConfig ? process.stderr : process.stdout
  if (options.printConfig) process.stdout.write(formatEffectiveConfig(config))
  const counts = `${config.providers.length} provider${config.providers.length === 1 ? '' : 's'}, ${config.upstreams.length} upstream${config.upstreams.length === 1 ? '' : 's'}`
  if (!options.online) {
    verdicts.write(`OK: ${path} is a valid configuration (${counts}; offline: --online also asks the providers)\n`)
    return
  }
  const results = await checkProviders(config, pino({ level: 'silent' }))
  for (const result of results) {
    verdicts.write(`provider ${result.provider} (${result.issuer})\n`)
    // WARNING: the provider's answer did not tell (client-probe.ts); not a problem.
    for (const v of result.verdicts) verdicts.write(`  ${!v.ok ? 'PROBLEM' : v.cannotTell === true ? 'WARNING' : 'ok     '} ${v.item}: ${v.said}\n`)
  }
  for (const result of results) {
    const problems = result.verdicts.filter((v) => !v.ok).map((v) => v.item)
    const unchecked = result.verdicts.filter((v) => v.ok && v.cannotTell === true).map((v) => v.item)
    const unsure = unchecked.length === 0 ? '' : `; could not check: ${unchecked.join(', ')}`
    verdicts.write(
      `${result.ok ? 'OK' : 'PROBLEM'}: provider ${result.provider}: ${result.ok ? `${result.issuer} supports this configuration (${path})${unsure}` : problems.join(', ')}\n`,
    )
  }
  if (results.some((r) => !r.ok)) process.exitCode = EXIT_PROVIDER_PROBLEM
}

async function main(argv: string[]): Promise<void> {
  // import has options of its own (import/command.ts).
  if (argv[0] === 'import') {
    process.exitCode = runImport(argv.slice(1), {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
      cwd: process.cwd(),
    })
    return
  }
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        config: { type: 'string', short: 'c' },
        provider: { type: 'string' },
        online: { type: 'boolean' },
        'print-config': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      allowPositionals: true,
    })
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`)
    process.exit(EXIT_CONFIG)
  }
  const { values, positionals } = parsed
  if (values.help) {
    process.stdout.write(HELP)
    return
  }
  if (values.version) {
    process.stdout.write(`openid-gateway ${packageVersion()}\n`)
    return
  }
  const command = positionals[0] ?? 'run'
  if (positionals.length > 1 || !COMMANDS.includes(command)) {
    process.stderr.write(`${USAGE}\n`)
    process.exit(EXIT_CONFIG)
  }
  if ((values.online || values['print-config']) && command !== 'check') {
    process.stderr.write(`--online and --print-config belong to check\n${USAGE}\n`)
    process.exit(EXIT_CONFIG)
  }
  const path = values.config ?? DEFAULT_CONFIG
  // `check` names the file it read, above all when the default was taken.
  const loaded = await configured(
    () => (cluster.isWorker && command === 'run' ? workerConfig(path) : loadConfigFile(path)),
    command === 'check' ? `FAILED: ${path} is not a valid configuration` : undefined,
  )
  const { config } = loaded
  // Key files readable by others: a warning on stderr for `check`, in the log for `run` (once,
  // from the process that reads the file first: the primary of workers).
  const exposed = exposedSecretFiles(config, path)
  if (command === 'check') {
    for (const warning of loaded.warnings) process.stderr.write(`warning: ${warning}\n`)
    for (const file of exposed) process.stderr.write(`warning: ${describeExposure(file)}\n`)
    return checkCommand(loaded, path, { online: values.online === true, printConfig: values['print-config'] === true })
  }
  if (command === 'run' && cluster.isPrimary) {
    const log = pino(loggerOptions(config.log), stdoutDestination())
    for (const warning of loaded.warnings) log.warn(warning)
    for (const file of exposed) log.warn({ key: file.key, path: file.path, mode: file.mode }, describeExposure(file))
    // Once per start, from the primary: what to register at each provider and what will be served.
    for (const line of startupSummary(config)) log.info(line.fields, line.msg)
  }
  if (command === 'jwks') {
    const jwks = await configured(() => providerJwks(config, values.provider))
    process.stdout.write(`${JSON.stringify(jwks, null, 2)}\n`)
    return
  }
  await run(loaded, path, hangups)
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`openid-gateway: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
