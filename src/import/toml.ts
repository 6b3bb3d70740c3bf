// oauth2-proxy's configuration file (`--config oauth2-proxy.cfg`): TOML (TOML 1.0, read with
// smol-toml) whose keys are the options' `cfg` names (`cookie_secret`, `email_domains`), as in its
// contrib/oauth2-proxy.cfg.example. oauth2-proxy refuses a key it does not know (viper's
// UnmarshalExact in pkg/apis/options/load.go), and so does this parser: a misspelt option would
// otherwise be dropped without a word.

import { parse, TomlError } from 'smol-toml'
import { mappingOfCfg } from './mappings.js'
import { ImportError, type OptionMap } from './options.js'
import { putOption } from './values.js'

/** The options of the TOML text `text` read from `file`. */
export function parseToml(text: string, file: string): OptionMap {
  let table: Record<string, unknown>
  try {
    table = parse(text)
  } catch (err) {
    if (err instanceof TomlError) throw new ImportError(`${file}:${err.line}:${err.column}: not TOML: ${err.message.split('\n')[0] ?? ''}`)
    throw err
  }
  const map: OptionMap = new Map()
  for (const [key, value] of Object.entries(table)) {
    const mapping = mappingOfCfg(key)
    if (mapping === undefined) throw new ImportError(`${file}: unknown option ${key}: oauth2-proxy v7.15 has no such setting`)
    putOption(map, mapping.flag, value, `${file} ${key}`)
  }
  return map
}
