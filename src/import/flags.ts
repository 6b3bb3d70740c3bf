// oauth2-proxy's command line (pflag: `--name=value`, `--name value`, a boolean as `--name` or
// `--name=false`, a list flag repeated or comma-separated) and its environment
// (`OAUTH2_PROXY_<CFG NAME>`, pkg/apis/options/load.go: viper's prefix, and the `cfg` name
// upper-cased). The flags come after `--` on the converter's own command line, or from a file that
// holds them as a shell would (one command line, `\` continuing a line, quotes, `#` comments),
// e.g. a container's `args:`; the environment from a file of `NAME=value` lines (`export`
// allowed), e.g. a `docker run --env-file`. An unknown flag or OAUTH2_PROXY_ name is refused, as
// oauth2-proxy refuses it.

import { mappingOfCfg, mappingOfFlag, META_FLAGS } from './mappings.js'
import { ImportError, type OptionMap } from './options.js'
import { putOption } from './values.js'

/** What a command line names besides options: the files oauth2-proxy would read (`--config`, `--alpha-config`). */
export interface ParsedFlags {
  readonly options: OptionMap
  readonly config?: string
  readonly alphaConfig?: string
}

/** The options of a command line's words (without the program name). `where` names the source in messages. */
export function parseFlags(words: readonly string[], where: string): ParsedFlags {
  const options: OptionMap = new Map()
  const files: { config?: string; alphaConfig?: string } = {}
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? ''
    const m = /^--?([A-Za-z0-9][A-Za-z0-9-]*)(?:=([\s\S]*))?$/.exec(word)
    if (m === null) throw new ImportError(`${where}: unexpected argument ${JSON.stringify(word)}: oauth2-proxy takes flags only`)
    const name = m[1] ?? ''
    let value: string | undefined = m[2]
    const mapping = mappingOfFlag(name)
    if (mapping === undefined && !META_FLAGS.has(name)) throw new ImportError(`${where}: unknown flag --${name}: oauth2-proxy v7.15 has no such setting`)
    const isBool = mapping?.kind === 'bool' || name === 'convert-config-to-alpha' || name === 'version' || name === 'config-test'
    if (value === undefined) {
      if (isBool) value = 'true'
      else {
        value = words[++i]
        if (value === undefined) throw new ImportError(`${where}: --${name} needs a value`)
      }
    }
    if (name === 'config') files.config = value
    else if (name === 'alpha-config') files.alphaConfig = value
    else if (mapping === undefined) throw new ImportError(`${where}: --${name} is an action of oauth2-proxy, not a setting`)
    else putOption(options, name, mapping.kind === 'list' ? splitList(value) : value, `${where} --${name}`)
  }
  return { options, ...files }
}

/** A list flag's value: pflag's StringSlice splits at commas. */
function splitList(value: string): string[] {
  return value.split(',').filter((v) => v !== '')
}

/** The words of a file holding an oauth2-proxy command line, as a POSIX shell splits them; the program name dropped. */
export function commandWords(text: string, file: string): string[] {
  const words: string[] = []
  let word: string | undefined
  let quote: '"' | "'" | undefined
  for (let i = 0; i < text.length; i++) {
    const c = text[i] ?? ''
    if (quote !== undefined) {
      if (c === quote) quote = undefined
      else if (c === '\\' && quote === '"' && /["\\$`\n]/.test(text[i + 1] ?? '')) word = (word ?? '') + (text[++i] === '\n' ? '' : text[i])
      else word = (word ?? '') + c
      continue
    }
    if (c === '\\') {
      const next = text[++i]
      if (next !== undefined && next !== '\n') word = (word ?? '') + next
      continue
    }
    if (c === '"' || c === "'") {
      quote = c
      word ??= ''
      continue
    }
    if (c === '#' && word === undefined) {
      while (i < text.length && text[i] !== '\n') i++
      continue
    }
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word)
      word = undefined
      continue
    }
    word = (word ?? '') + c
  }
  if (quote !== undefined) throw new ImportError(`${file}: an unterminated ${quote} quote`)
  if (word !== undefined) words.push(word)
  // The program: `oauth2-proxy` or a path to it.
  if (words[0] !== undefined && /(^|\/)oauth2-proxy$/.test(words[0])) words.shift()
  return words
}

const ENV_PREFIX = 'OAUTH2_PROXY_'

/** The options of an environment file: OAUTH2_PROXY_* lines, the others (the rest of a container's environment) left alone. */
export function parseEnv(text: string, file: string): ParsedFlags {
  const options: OptionMap = new Map()
  const files: { config?: string; alphaConfig?: string } = {}
  for (const [index, line] of text.split('\n').entries()) {
    const trimmed = line.trim()
    if (trimmed === '' || trimmed.startsWith('#')) continue
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(trimmed)
    if (m === null) throw new ImportError(`${file}:${index + 1}: not a NAME=value line`)
    const name = m[1] ?? ''
    if (!name.startsWith(ENV_PREFIX)) continue
    const value = unquote(m[2] ?? '')
    const cfg = name.slice(ENV_PREFIX.length).toLowerCase()
    const where = `${file}:${index + 1} ${name}`
    if (cfg === 'config') files.config = value
    else if (cfg === 'alpha_config') files.alphaConfig = value
    else {
      const mapping = mappingOfCfg(cfg)
      if (mapping === undefined) throw new ImportError(`${where}: unknown option: oauth2-proxy v7.15 has no such setting`)
      // viper reads a list from the environment split at spaces; commas split it too here.
      putOption(options, mapping.flag, mapping.kind === 'list' ? value.split(/[\s,]+/).filter((v) => v !== '') : value, where)
    }
  }
  return { options, ...files }
}

function unquote(value: string): string {
  const m = /^(["'])([\s\S]*)\1$/.exec(value)
  return m === null ? value : (m[2] ?? '')
}
