// Files that hold the gateway's private keys or secrets, readable by other users of the machine.
// ssh refuses such a private key ("Permissions 0644 for 'id_ed25519' are too open ... It is
// required that your private key files are NOT accessible by others", ssh(1) FILES): a key any
// local account can read is a key any local account can sign with. The gateway warns instead of
// refusing, in `check` and at `run`: an operator may have reasons (a group made for the purpose),
// and a refusal at a restart would take a working site down.

import { readFileSync, statSync } from 'node:fs'
import { isInlineKey } from '../keys/private-key.js'
import type { GatewayConfig } from '../options/types.js'
import { configSecrets, providerKey } from './mask.js'

/** Group- or world-readable. */
const READABLE_BY_OTHERS = 0o044

export interface ExposedFile {
  /** The configuration key naming the file, or `(configuration file)`. */
  key: string
  path: string
  /** The permission bits, in octal (`0644`). */
  mode: string
  /** Of the configuration file: the keys whose secrets are written in it (never their values). */
  secrets?: string[]
}

export function isReadableByOthers(mode: number): boolean {
  return (mode & READABLE_BY_OTHERS) !== 0
}

/** Every key file and, when it holds a secret itself, the configuration file, readable by others. */
export function exposedSecretFiles(config: GatewayConfig, configPath: string): ExposedFile[] {
  const files: Array<[key: string, path: string, secrets?: string[]]> = []
  config.providers.forEach((provider, index) => {
    if (provider.clientKey !== undefined && !isInlineKey(provider.clientKey)) files.push([`${providerKey(config, index)}.clientKey`, provider.clientKey.trim()])
    const serviceAccount = provider.claimSources?.googleGroups?.serviceAccountKeyFile
    if (serviceAccount !== undefined) files.push([`${providerKey(config, index)}.claimSources.googleGroups.serviceAccountKeyFile`, serviceAccount])
  })
  config.assertions.signingKeys?.forEach((key, index) => {
    if (!isInlineKey(key)) files.push([`assertions.signingKeys[${index}]`, key.trim()])
  })
  config.upstreams.forEach((upstream, index) => {
    if (upstream.forwardBasicAuth?.passwordFile !== undefined) files.push([`upstreams[${index}].forwardBasicAuth.passwordFile`, upstream.forwardBasicAuth.passwordFile])
  })
  const written = secretsWrittenIn(config, configPath)
  if (written.length > 0) files.push(['(configuration file)', configPath, written])
  return files.flatMap(([key, path, secrets]) => {
    const mode = modeOf(path)
    if (mode === undefined || !isReadableByOthers(mode)) return []
    return [{ key, path, mode: `0${(mode & 0o777).toString(8)}`, ...(secrets === undefined ? {} : { secrets }) }]
  })
}

/** The warning for `check` (stderr) and `run` (the log), naming the keys, never the content. */
export function describeExposure(file: ExposedFile): string {
  if (file.key === '(configuration file)') {
    const keys = file.secrets === undefined || file.secrets.length === 0 ? '' : ` (${file.secrets.join(', ')})`
    return `the configuration file ${file.path} holds secrets written in it${keys} and is readable by group or others (mode ${file.mode}); let only the gateway's user read it (chmod 0400), as ssh requires of private keys, or give the secrets through \${VAR} from the environment`
  }
  return `${file.key}: the file ${file.path} is readable by group or others (mode ${file.mode}); let only the gateway's user read it (chmod 0400), as ssh requires of private keys`
}

function modeOf(path: string): number | undefined {
  try {
    return statSync(path).mode
  } catch {
    // Unreadable files are refused by validation already; nothing more to say here.
    return undefined
  }
}

// A secret written in the file itself rather than through `${VAR}`: the file is then as secret as
// the value. A line of each secret found in the text is enough (YAML may fold a PEM block).
// Returns the keys of the secrets found, each once.
function secretsWrittenIn(config: GatewayConfig, configPath: string): string[] {
  let text: string
  try {
    text = readFileSync(configPath, 'utf8')
  } catch {
    return []
  }
  const keys = configSecrets(config)
    .filter(({ value }) =>
      value
        .split('\n')
        .map((line) => line.trim())
        .some((line) => line.length >= 6 && !line.startsWith('-----') && text.includes(line)),
    )
    .map(({ key }) => key)
  return [...new Set(keys)]
}
