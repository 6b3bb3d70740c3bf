import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import t from 'tap'
import { parseWorkflow, releaseWorkflowText, ROOT } from '../fixtures/workflow.ts'

// The release workflow's first job refuses to publish unless the tag is v<semantic version> equal
// to package.json's version and to the chart's version and appVersion. Its script is run here, as
// GitHub runs a `run:` step (bash --noprofile --norc -eo pipefail), on copies of those files: the
// repository as it is passes, each mismatch is refused, naming the file.

const workflow = parseWorkflow(releaseWorkflowText())
const script = workflow.jobs.version?.steps.find((s) => s.id === 'version')?.run ?? ''
const CHART = workflow.env.CHART ?? ''
const { version: PACKAGE_VERSION } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { version: string }

interface Run {
  status: number | null
  stderr: string
  stdout: string
  outputs: Record<string, string>
}

/** The step's script in a copy of package.json and Chart.yaml, edited by `edit`, for the tag `tag`. */
function runCheck(tag: string, options: { owner?: string; edit?: (dir: string) => void } = {}): Run {
  const dir = mkdtempSync(join(tmpdir(), 'release-version-'))
  try {
    for (const file of ['package.json', `${CHART}/Chart.yaml`]) {
      mkdirSync(dirname(join(dir, file)), { recursive: true })
      copyFileSync(join(ROOT, file), join(dir, file))
    }
    options.edit?.(dir)
    const output = join(dir, 'github-output')
    writeFileSync(output, '')
    const owner = options.owner ?? 'openid-gateway'
    const env = {
      PATH: `${dirname(process.execPath)}:/usr/bin:/bin`,
      GITHUB_REF_NAME: tag,
      GITHUB_OUTPUT: output,
      CHART,
      IMAGE: workflow.env.IMAGE?.replaceAll('${{ github.repository_owner }}', owner) ?? '',
      CHART_REPOSITORY: workflow.env.CHART_REPOSITORY?.replaceAll('${{ github.repository_owner }}', owner) ?? '',
    }
    const result = spawnSync('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', script], { cwd: dir, env, encoding: 'utf8' })
    const outputs = Object.fromEntries(
      readFileSync(output, 'utf8')
        .split('\n')
        .filter((line) => line.includes('='))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    )
    return { status: result.status, stderr: result.stderr, stdout: result.stdout, outputs }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function setChartField(field: string, value: string) {
  return (dir: string) => {
    const file = join(dir, CHART, 'Chart.yaml')
    const text = readFileSync(file, 'utf8')
    const next = text.replace(new RegExp(`^${field}:.*$`, 'm'), `${field}: ${value}`)
    if (next === text) throw new Error(`no ${field} in Chart.yaml`)
    writeFileSync(file, next)
  }
}

t.test('the step exists and reads the files the workflow packages', async (t) => {
  t.match(script, /package\.json/)
  t.match(script, /\$CHART\/Chart\.yaml/)
})

t.test('the repository as it is: the tag of its version passes', async (t) => {
  const run = runCheck(`v${PACKAGE_VERSION}`)
  t.equal(run.status, 0, run.stdout)
  t.same(run.outputs, {
    version: PACKAGE_VERSION,
    image: 'ghcr.io/openid-gateway/openid-gateway',
    'chart-repository': 'oci://ghcr.io/openid-gateway/charts',
  })
})

t.test('an owner spelled in capitals gives lower-case references', async (t) => {
  const run = runCheck(`v${PACKAGE_VERSION}`, { owner: 'OpenID-Gateway' })
  t.equal(run.status, 0, run.stdout)
  t.equal(run.outputs.image, 'ghcr.io/openid-gateway/openid-gateway')
  t.equal(run.outputs['chart-repository'], 'oci://ghcr.io/openid-gateway/charts')
})

t.test('a pre-release tag passes when every file says the same', async (t) => {
  const pre = `${PACKAGE_VERSION}-rc.1`
  const run = runCheck(`v${pre}`, {
    edit: (dir) => {
      const file = join(dir, 'package.json')
      writeFileSync(file, readFileSync(file, 'utf8').replace(`"version": "${PACKAGE_VERSION}"`, `"version": "${pre}"`))
      setChartField('version', pre)(dir)
      setChartField('appVersion', `"${pre}"`)(dir)
    },
  })
  t.equal(run.status, 0, run.stdout)
  t.equal(run.outputs.version, pre)
})

t.test('refused, publishing nothing', async (t) => {
  const refused = (what: string, run: Run, says: RegExp) => {
    t.not(run.status, 0, `${what}: the step fails`)
    t.match(run.stdout, says, `${what}: it says why`)
    t.same(run.outputs, {}, `${what}: no output for the jobs that publish`)
  }
  refused('a tag of another version', runCheck('v9.9.9'), /::error::package\.json version is '[^']+', the tag says 9\.9\.9/)
  refused(
    'a chart version behind',
    runCheck(`v${PACKAGE_VERSION}`, { edit: setChartField('version', '0.0.1') }),
    /::error::charts\/openid-gateway\/Chart\.yaml version is '0\.0\.1'/,
  )
  refused(
    'a chart appVersion behind',
    runCheck(`v${PACKAGE_VERSION}`, { edit: setChartField('appVersion', '"0.0.1"') }),
    /::error::charts\/openid-gateway\/Chart\.yaml appVersion is '0\.0\.1'/,
  )
  refused(
    'a chart version with a comment it cannot read',
    runCheck(`v${PACKAGE_VERSION}`, { edit: setChartField('version', `${PACKAGE_VERSION} # x`) }),
    /Chart\.yaml version is ''/,
  )
  for (const tag of ['v1.2', 'v01.2.3', '1.2.3', 'v1.2.3.4', 'v1.2.3+build', 'v1.2.3-', 'v1.2.3-rc..1', `v${PACKAGE_VERSION};id`]) {
    refused(`the tag ${tag}`, runCheck(tag), /::error::tag .* is not v<semantic version>/)
  }
})
