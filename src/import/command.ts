// `openid-gateway import oauth2-proxy [FILE...] [--alpha-config FILE] [--public-url URL] [--out FILE]
// [-- FLAG...]`: reads oauth2-proxy's configuration in any of its forms, ranks them as oauth2-proxy
// does (flags over the environment over the file; the alpha configuration beside them), converts
// it, checks the result with the gateway's own loader (the same rules as `check`), and writes it.
// A FILE is read by its form: `.yaml`/`.yml` the alpha configuration, OAUTH2_PROXY_* lines an
// environment file, a command line (`oauth2-proxy --flag ...` or `--flag ...`) a flags file, else
// oauth2-proxy.cfg's TOML.

import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { ConfigError, parseConfig } from '../config/load.js'
import { parseAlpha } from './alpha.js'
import { convert } from './convert.js'
import { commandWords, parseEnv, parseFlags, type ParsedFlags } from './flags.js'
import { ALPHA_OWNED } from './mappings.js'
import { EXIT_IMPORT_FAILED, ImportError, type OptionMap } from './options.js'
import { parseToml } from './toml.js'
import { overlay } from './values.js'
import { renderYaml, reportLines } from './writer.js'

/** Written, with settings it could not carry (listed on stderr). */
export const EXIT_NOT_CARRIED = 1

export const IMPORT_USAGE = 'usage: openid-gateway import oauth2-proxy [FILE...] [--alpha-config FILE] [--public-url URL] [--out FILE] [-- FLAG...]'

export const IMPORT_HELP = `${IMPORT_USAGE}

Converts an oauth2-proxy v7 configuration into the gateway's YAML (stdout, or --out FILE), and lists
on stderr each variable its secrets come from and each setting it cannot carry, with why.

  FILE                 oauth2-proxy.cfg (TOML), a file holding its command line, an environment
                       file of OAUTH2_PROXY_* lines, or its alpha configuration (.yaml, .yml)
  --alpha-config FILE  its alpha configuration, whatever the file is called
  -- FLAG...           its command-line flags, as oauth2-proxy takes them (--config and
                       --alpha-config among them are read too)
  --public-url URL     the gateway's public origin, when redirect_url is not an absolute URL
  --out FILE           write the configuration there instead of stdout

Flags rank over the environment, the environment over the file, as in oauth2-proxy.

Exit codes: 0 written, every setting carried; 1 written, with settings it could not carry (on
stderr); 2 nothing written: an unreadable file, malformed input, an unknown option, settings that
contradict each other, or a result the gateway would refuse.
`

type Form = 'toml' | 'flags' | 'env' | 'alpha'

function formOf(path: string, text: string): Form {
  if (/\.ya?ml$/i.test(path)) return 'alpha'
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
  if (/\.env$/i.test(path) || lines.some((l) => /^(export\s+)?OAUTH2_PROXY_[A-Z0-9_]*=/.test(l))) return 'env'
  if (lines[0] !== undefined && /^(\S*oauth2-proxy(\s|$)|--?[A-Za-z])/.test(lines[0])) return 'flags'
  return 'toml'
}

function read(path: string, shown = path): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new ImportError(
      `${shown}: cannot be read (${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory' : code === 'EACCES' ? 'permission denied' : String(code)})`,
    )
  }
}

interface Inputs {
  file: OptionMap
  env: OptionMap
  flags: OptionMap
  alpha: OptionMap
  sources: string[]
}

/** Reads one input of the given form, and the files a command line or environment names. */
function readInput(inputs: Inputs, path: string, form: Form, shown = path): void {
  const text = read(path, shown)
  inputs.sources.push(shown)
  if (form === 'alpha') inputs.alpha = overlay(inputs.alpha, parseAlpha(text, shown))
  else if (form === 'toml') inputs.file = overlay(inputs.file, parseToml(text, shown))
  else {
    const parsed = form === 'env' ? parseEnv(text, shown) : parseFlags(commandWords(text, shown), shown)
    if (form === 'env') inputs.env = overlay(inputs.env, parsed.options)
    else inputs.flags = overlay(inputs.flags, parsed.options)
    readNamed(inputs, parsed, dirname(path))
  }
}

/** The `--config` and `--alpha-config` a command line or environment names, relative to `base`. */
function readNamed(inputs: Inputs, parsed: ParsedFlags, base: string): void {
  if (parsed.config !== undefined) readInput(inputs, resolve(base, parsed.config), 'toml', parsed.config)
  if (parsed.alphaConfig !== undefined) readInput(inputs, resolve(base, parsed.alphaConfig), 'alpha', parsed.alphaConfig)
}

export interface ImportIo {
  stdout(text: string): void
  stderr(text: string): void
  /** Values for the `${VAR}` of the result while it is checked (the real ones are not needed). */
  readonly cwd: string
}

/** Runs the subcommand with `args` (after `import`); returns the exit code. */
export function runImport(args: readonly string[], io: ImportIo): number {
  try {
    return importCommand(args, io)
  } catch (err) {
    if (!(err instanceof ImportError)) throw err
    io.stderr(`error: ${err.message}\n`)
    return EXIT_IMPORT_FAILED
  }
}

function importCommand(args: readonly string[], io: ImportIo): number {
  const split = args.indexOf('--')
  const own = split === -1 ? [...args] : args.slice(0, split)
  const flagWords = split === -1 ? undefined : args.slice(split + 1)
  let parsed
  try {
    parsed = parseArgs({
      args: own,
      options: { 'alpha-config': { type: 'string' }, 'public-url': { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
    })
  } catch (err) {
    throw new ImportError(`${(err as Error).message}\n${IMPORT_USAGE}`)
  }
  const { values, positionals } = parsed
  if (values.help === true) {
    io.stdout(IMPORT_HELP)
    return 0
  }
  const [from, ...files] = positionals
  if (from !== 'oauth2-proxy') throw new ImportError(`import reads oauth2-proxy's configuration: import oauth2-proxy ...\n${IMPORT_USAGE}`)
  if (files.length === 0 && flagWords === undefined && values['alpha-config'] === undefined) {
    throw new ImportError(`nothing to read: name a file or give the flags after --\n${IMPORT_USAGE}`)
  }
  const publicUrl = values['public-url']
  if (publicUrl !== undefined && (!URL.canParse(publicUrl) || !/^https?:$/.test(new URL(publicUrl).protocol))) {
    throw new ImportError(`--public-url ${publicUrl}: an http(s) origin, e.g. https://app.example.com`)
  }
  const inputs: Inputs = { file: new Map(), env: new Map(), flags: new Map(), alpha: new Map(), sources: [] }
  for (const file of files) readInput(inputs, resolve(io.cwd, file), formOf(file, read(resolve(io.cwd, file), file)), file)
  if (values['alpha-config'] !== undefined) readInput(inputs, resolve(io.cwd, values['alpha-config']), 'alpha', values['alpha-config'])
  if (flagWords !== undefined) {
    const parsedFlags = parseFlags(flagWords, 'flags')
    inputs.sources.push('flags')
    inputs.flags = overlay(inputs.flags, parsedFlags.options)
    readNamed(inputs, parsedFlags, io.cwd)
  }
  const legacy = overlay(overlay(inputs.file, inputs.env), inputs.flags)
  if (inputs.alpha.size > 0) {
    const owned = [...legacy.values()].find((option) => ALPHA_OWNED.has(option.name))
    if (owned !== undefined)
      throw new ImportError(`${owned.from}: not an option beside an alpha configuration (oauth2-proxy refuses it there): the alpha configuration holds it`)
  }
  const options = overlay(legacy, inputs.alpha)
  const conversion = convert(options, publicUrl === undefined ? {} : { publicUrl })
  const yaml = renderYaml(conversion, inputs.sources)
  // The gateway's own loader, as `check` runs it, with stand-ins for the secrets: a result it
  // would refuse is never written.
  const standIns = Object.fromEntries([...conversion.variables.keys()].map((name) => [name, 'stand-in-secret-of-the-converter-0123456789']))
  try {
    parseConfig(yaml, standIns, 'converted')
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    throw new ImportError(`the converted configuration would not pass check:\n${err.message}`)
  }
  if (values.out === undefined) io.stdout(yaml)
  else {
    try {
      writeFileSync(resolve(io.cwd, values.out), yaml, { mode: 0o600 })
    } catch (err) {
      throw new ImportError(`--out ${values.out}: cannot be written (${String((err as NodeJS.ErrnoException).code)})`)
    }
  }
  const report = reportLines(conversion)
  if (report.length > 0) io.stderr(`${report.join('\n')}\n`)
  return conversion.lost.length === 0 ? 0 : EXIT_NOT_CARRIED
}
