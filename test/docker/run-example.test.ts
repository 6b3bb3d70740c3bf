import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { CLI } from '../fixtures/cli.ts'

// The documented `docker run` commands work as written: the image's configuration
// (config/gateway.yaml) passes `check` with exactly the variables each example sets, and nothing
// else from the environment. No container engine runs here, so the command's configuration is
// what is tested; the shell evaluates the values as it would for `docker run`.

const ROOT = new URL('../../', import.meta.url).pathname

/** The `docker run` commands in `text` that use the image's own configuration. */
function dockerRuns(text: string, commentPrefix: RegExp | undefined): string[] {
  const lines = text.split('\n').map((line) => (commentPrefix === undefined ? line : line.replace(commentPrefix, '')))
  const runs: string[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*docker run /.test(lines[i] ?? '')) continue
    let command = ''
    for (; i < lines.length; i++) {
      const line = lines[i] ?? ''
      command += `${line.replace(/\\$/, '')} `
      if (!line.trimEnd().endsWith('\\')) break
    }
    // A mount of the repository's own config/gateway.yaml is the image's file; any other is the user's.
    const mounts = [...command.matchAll(/\s-v\s+"?([^:"\s]+):/g)].map((m) => m[1] ?? '')
    if (mounts.every((source) => source.endsWith('/config/gateway.yaml'))) runs.push(command)
  }
  return runs
}

/** Each `-e NAME=value` word, verbatim (quotes and command substitutions included). */
function variables(command: string): string[] {
  return [...command.matchAll(/\s-e\s+([A-Z_][A-Z0-9_]*=(?:"[^"]*"|\S+))/g)].map((m) => m[1] ?? '')
}

function check(assignments: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // `env -i`: only what the example passes, plus PATH for the shell and NODE_ENV as the image sets
  // it; the built CLI, as the image runs it.
  const script = `exec env -i PATH="$PATH" NODE_ENV=production ${assignments.join(' ')} "$0" "$@" check --print-config --config config/gateway.yaml`
  const child = spawn('bash', ['-c', script, process.execPath, CLI], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
}

const sources: Array<[file: string, prefix: RegExp | undefined]> = [
  ['docker/Dockerfile', /^#\s?/],
  ['docker/README.md', undefined],
]

for (const [file, prefix] of sources) {
  t.test(`the docker run example in ${file} passes check`, async (t) => {
    const runs = dockerRuns(readFileSync(ROOT + file, 'utf8'), prefix)
    t.ok(runs.length > 0, 'there is an example')
    for (const run of runs) {
      const assignments = variables(run)
      const result = await check(assignments)
      t.equal(result.code, 0, `check passes: ${result.stderr}`)
      t.match(result.stdout, 'publicUrl: https://app.example.com')
      t.notMatch(result.stdout, 'change-me', 'the secret is masked')
    }
  })
}

t.test('without a required variable, check names it (the test can fail)', async (t) => {
  const runs = dockerRuns(readFileSync(`${ROOT}docker/Dockerfile`, 'utf8'), /^#\s?/)
  const assignments = variables(runs[0] ?? '').filter((a) => !a.startsWith('OIDC_ISSUER='))
  const result = await check(assignments)
  t.equal(result.code, 2)
  t.match(result.stderr, 'OIDC_ISSUER')
})
