import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import t from 'tap'
import YAML from 'yaml'
import { kubeTools, runTool } from '../fixtures/kube-tools.ts'
import { type Job, needsOf, parseWorkflow, releaseWorkflowText, ROOT, type Step, type Workflow, workflowErrors } from '../fixtures/workflow.ts'

// .github/workflows/release.yml cannot run here (no registry, no OIDC token). What can be known
// without running it is checked: it is a valid workflow (the validator of @action-validator/core,
// GitHub's workflow schema), it runs on a version tag only, with no permission beyond what each
// job's pushes and signatures need, actions pinned by commit, no expression expanded inside a
// script (GitHub's "script injection" hardening advice), every output it reads declared, and it
// publishes what the chart and the docs name: the image the chart installs by default, built from
// docker/Dockerfile for linux/amd64 and linux/arm64 with an SBOM and provenance, the chart at its
// OCI reference, each signed by digest. Each rule is a function returning its violations, and
// each is shown to catch a broken copy of the workflow.

/** The names every helper uses: docs, chart and workflow agree on them. */
const OWNER = 'openid-gateway'
const IMAGE = 'ghcr.io/openid-gateway/openid-gateway'
const CHART_REF = 'oci://ghcr.io/openid-gateway/charts/openid-gateway'
const PLATFORMS = ['linux/amd64', 'linux/arm64']

const text = releaseWorkflowText()
const workflow = parseWorkflow(text)

/** The workflow's env value with the repository owner filled in, as GitHub expands it. */
function expandOwner(value: string | undefined, owner = OWNER): string {
  return (value ?? '').replaceAll('${{ github.repository_owner }}', owner)
}

const actionOf = (step: Step) => step.uses?.split('@')[0]
const stepsOf = (wf: Workflow) => Object.entries(wf.jobs).flatMap(([job, j]) => j.steps.map((step) => ({ job, step })))
const stepUsing = (job: Job, action: string) => job.steps.find((s) => actionOf(s) === action)
const signs = (job: Job) => job.steps.some((s) => /\bcosign sign\b/.test(s.run ?? ''))
const pushes = (job: Job) => job.steps.some((s) => (actionOf(s) === 'docker/build-push-action' && s.with?.push === true) || /\bhelm push\b/.test(s.run ?? ''))

/** Every action is pinned by a full commit id, with the released version it is in a comment. */
function unpinnedActions(source: string): string[] {
  return source
    .split('\n')
    .filter((line) => /^\s*(-\s+)?uses:/.test(line))
    .filter((line) => !/uses:\s+[\w.-]+\/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$/.test(line.trimEnd()))
    .map((line) => line.trim())
}

/**
 * Nothing by default; a job gets contents: read, packages: write only if it pushes, id-token: write
 * only if it signs (keyless cosign needs the OIDC token), and nothing else.
 */
function excessPermissions(wf: Workflow): string[] {
  const out: string[] = []
  if (typeof wf.permissions !== 'object' || Object.keys(wf.permissions).length > 0) out.push(`workflow: permissions ${JSON.stringify(wf.permissions)}, not {}`)
  for (const [name, job] of Object.entries(wf.jobs)) {
    if (typeof job.permissions !== 'object') {
      out.push(`${name}: permissions ${JSON.stringify(job.permissions)} (a map of scopes is required)`)
      continue
    }
    const allowed: Record<string, string> = { contents: 'read' }
    if (pushes(job)) allowed.packages = 'write'
    if (signs(job)) allowed['id-token'] = 'write'
    for (const [scope, level] of Object.entries(job.permissions)) {
      if (level !== 'none' && allowed[scope] !== level) out.push(`${name}: ${scope}: ${level}`)
    }
  }
  return out
}

/** `${{ }}` inside a script is pasted into it before bash parses it: values go through env. */
function expressionsInRun(wf: Workflow): string[] {
  return stepsOf(wf)
    .filter(({ step }) => step.run?.includes('${{'))
    .map(({ job, step }) => `${job}: ${step.name ?? step.id ?? step.run?.split('\n')[0]}`)
}

/** actions/checkout leaves no token in .git/config for later steps (persist-credentials: false). */
function checkoutsKeepingCredentials(wf: Workflow): string[] {
  return stepsOf(wf)
    .filter(({ step }) => actionOf(step) === 'actions/checkout' && step.with?.['persist-credentials'] !== false)
    .map(({ job }) => job)
}

/** needs.<job>.outputs.<name> names a needed job's declared output; steps.<id> a step of the job. */
function unresolvedReferences(wf: Workflow): string[] {
  const out: string[] = []
  for (const [name, job] of Object.entries(wf.jobs)) {
    const ids = new Set(job.steps.flatMap((s) => (s.id === undefined ? [] : [s.id])))
    const source = JSON.stringify(job)
    for (const [, needed, output] of source.matchAll(/needs\.([\w-]+)\.outputs\.([\w-]+)/g)) {
      if (!needsOf(job).includes(needed ?? '')) out.push(`${name}: needs.${needed} but the job does not need ${needed}`)
      else if (wf.jobs[needed ?? '']?.outputs?.[output ?? ''] === undefined) out.push(`${name}: ${needed} has no output ${output}`)
    }
    for (const [, id] of source.matchAll(/steps\.([\w-]+)\.outputs/g)) {
      if (!ids.has(id ?? '')) out.push(`${name}: no step ${id}`)
    }
  }
  return out
}

/** Every `cosign sign` names its artifact by digest (`<ref>@<digest variable>`), never by tag. */
function signaturesByTag(wf: Workflow): string[] {
  return stepsOf(wf).flatMap(({ job, step }) =>
    [...(step.run ?? '').matchAll(/cosign sign\b([^\n]*)/g)].filter((m) => !/\s--yes\s+"[^"]*@\$\{?\w+\}?"\s*$/.test(m[1] ?? '')).map((m) => `${job}: ${m[0]}`),
  )
}

const RULES = { excessPermissions, expressionsInRun, checkoutsKeepingCredentials, unresolvedReferences, signaturesByTag }

t.test('the workflow is valid for GitHub (@action-validator/core)', async (t) => {
  t.same(workflowErrors(text), [])
})

t.test('it runs on a version tag, and only then', async (t) => {
  t.same(Object.keys(workflow.on), ['push'], 'no other event (no pull_request, no workflow_dispatch)')
  t.same(workflow.on.push, { tags: ['v*.*.*'] }, 'push of a tag v*.*.*, no branch')
})

t.test('the rules hold', async (t) => {
  t.same(unpinnedActions(text), [], 'unpinnedActions')
  for (const [name, rule] of Object.entries(RULES)) t.same(rule(workflow), [], name)
})

t.test('what it publishes is what the chart installs', async (t) => {
  t.equal(expandOwner(workflow.env.IMAGE), IMAGE, 'the image ghcr.io/<owner>/openid-gateway')
  const chartDir = workflow.env.CHART ?? ''
  const chart = YAML.parse(readFileSync(`${ROOT}${chartDir}/Chart.yaml`, 'utf8')) as { name: string; version: string; appVersion: string }
  t.equal(`${expandOwner(workflow.env.CHART_REPOSITORY)}/${chart.name}`, CHART_REF, 'the chart oci://ghcr.io/<owner>/charts/<chart name>')
  t.equal(chartDir, `charts/${chart.name}`, 'the chart directory is named after the chart')
  const values = YAML.parse(readFileSync(`${ROOT}${chartDir}/values.yaml`, 'utf8')) as { image?: { repository?: string } }
  t.equal(values.image?.repository, IMAGE, "the chart's default image repository is the image pushed")
})

t.test('the image: docker/Dockerfile, two platforms, SBOM and provenance, signed', async (t) => {
  const job = workflow.jobs.image
  if (job === undefined) throw new Error('no job image')
  t.ok(existsSync(`${ROOT}${workflow.env.DOCKERFILE}`), `${workflow.env.DOCKERFILE} exists`)
  const build = stepUsing(job, 'docker/build-push-action')
  const at = (action: string) => job.steps.findIndex((s) => actionOf(s) === action)
  t.equal(build?.with?.file, '${{ env.DOCKERFILE }}', 'built from env.DOCKERFILE')
  t.equal(build?.with?.context, '.', 'with the repository as its context')
  t.same(String(build?.with?.platforms).split(','), PLATFORMS, 'for linux/amd64 and linux/arm64')
  t.ok(
    at('docker/setup-qemu-action') >= 0 && at('docker/setup-qemu-action') < at('docker/build-push-action'),
    'QEMU is set up before (arm64 on an amd64 runner)',
  )
  t.ok(at('docker/setup-buildx-action') >= 0 && at('docker/setup-buildx-action') < at('docker/build-push-action'), 'and buildx')
  t.equal(build?.with?.push, true, 'pushed')
  t.equal(build?.with?.sbom, true, 'with an SBOM attestation')
  t.match(String(build?.with?.provenance), /^(true|mode=(min|max))$/, 'and a provenance attestation')
  const meta = stepUsing(job, 'docker/metadata-action')
  t.equal(meta?.with?.images, '${{ needs.version.outputs.image }}', 'tags of the checked, lower-cased image name')
  t.same(String(meta?.with?.tags).trim().split('\n'), ['type=semver,pattern={{version}}', 'type=semver,pattern={{major}}.{{minor}}'], 'tagged X.Y.Z and X.Y')
  t.match(String(meta?.with?.flavor), /^latest=false$/m, 'never latest')
  t.ok(signs(job), 'signed')
  t.ok(
    job.steps.some((s) => s.env?.DIGEST === '${{ steps.build.outputs.digest }}' && /cosign sign/.test(s.run ?? '')),
    'by the digest the build pushed',
  )
})

t.test("the chart: the helm the tests run, packaged at the tag's version, pushed and signed", async (t) => {
  const job = workflow.jobs.chart
  if (job === undefined) throw new Error('no job chart')
  const helm = stepUsing(job, 'azure/setup-helm')
  t.equal(helm?.with?.version, '${{ env.HELM_VERSION }}', 'setup-helm installs env.HELM_VERSION')
  t.equal(workflow.env.HELM_VERSION, runTool('helm', ['version', '--template', '{{.Version}}']).trim(), "which is test/fixtures/kube-tools.ts's helm")
  const script = job.steps.map((s) => s.run ?? '').join('\n')
  t.match(script, /helm push "dist\/\$\{name\}-\$\{VERSION\}\.tgz" "\$REPOSITORY"/, 'pushed to the chart repository')
  // The packaging step runs here as GitHub runs it, with the helm of the chart tests: every
  // example lints strictly, and the archive is the one the push step names.
  const packaging = job.steps.find((s) => s.id === 'package')?.run ?? ''
  const version = '9.8.7-rc.1'
  const dir = mkdtempSync(join(tmpdir(), 'release-chart-'))
  try {
    const run = spawnSync('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', packaging], {
      cwd: dir,
      encoding: 'utf8',
      env: { PATH: `${dirname(kubeTools().helm)}:/usr/bin:/bin`, CHART: `${ROOT}${workflow.env.CHART}`, VERSION: version, HOME: dir },
    })
    t.equal(run.status, 0, `the packaging step succeeds: ${run.stderr}`)
    t.match(run.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, 'the chart lints strictly')
    const archive = join(dir, 'dist', `openid-gateway-${version}.tgz`)
    t.ok(existsSync(archive), 'dist/<chart name>-<version>.tgz, which the push step pushes')
    const chart = YAML.parse(runTool('helm', ['show', 'chart', archive])) as { version: string; appVersion: string }
    t.same([chart.version, chart.appVersion], [version, version], "its version and appVersion are the tag's")
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  t.ok(signs(job), 'signed')
  t.same(needsOf(job), ['version', 'image'], 'after the version check and the image')
  t.same(needsOf(workflow.jobs.image ?? { steps: [] }), ['version'], 'the image after the version check')
})

t.test('each rule catches a broken workflow', async (t) => {
  const broken = (edit: (wf: Workflow & Record<string, unknown>) => void): Workflow => {
    const copy = structuredClone(workflow) as Workflow & Record<string, unknown>
    edit(copy)
    return copy
  }
  const job = (wf: Workflow, name: string) => wf.jobs[name] as Job & { permissions: Record<string, string> }
  t.not(workflowErrors(text.replace('runs-on: ubuntu-24.04', 'runs_on: ubuntu-24.04')).length, 0, 'the validator: a misspelled runs-on')
  t.not(workflowErrors(text.replace('permissions: {}', 'permissions: all')).length, 0, 'the validator: an unknown permissions value')
  t.not(unpinnedActions(text.replace(/@[0-9a-f]{40} # (v[\d.]+)/, '@$1')).length, 0, 'unpinnedActions: an action by tag')
  t.not(excessPermissions(broken((wf) => Object.assign(wf, { permissions: 'write-all' }))).length, 0, 'excessPermissions: write-all')
  t.not(
    excessPermissions(broken((wf) => (job(wf, 'version').permissions['id-token'] = 'write'))).length,
    0,
    'excessPermissions: id-token for a job that signs nothing',
  )
  t.not(excessPermissions(broken((wf) => (job(wf, 'chart').permissions.contents = 'write'))).length, 0, 'excessPermissions: contents: write')
  t.not(
    expressionsInRun(broken((wf) => Object.assign(job(wf, 'version').steps[1] ?? {}, { run: 'echo ${{ github.ref_name }}' }))).length,
    0,
    'expressionsInRun',
  )
  t.not(checkoutsKeepingCredentials(broken((wf) => Object.assign(job(wf, 'image').steps[0] ?? {}, { with: {} }))).length, 0, 'checkoutsKeepingCredentials')
  t.not(unresolvedReferences(broken((wf) => Object.assign(job(wf, 'image'), { needs: [] }))).length, 0, 'unresolvedReferences: an output of a job not needed')
  t.not(unresolvedReferences(broken((wf) => delete job(wf, 'version').outputs?.image)).length, 0, 'unresolvedReferences: an undeclared output')
  t.not(
    signaturesByTag(broken((wf) => Object.assign(job(wf, 'image').steps.at(-1) ?? {}, { run: 'cosign sign --yes "${IMAGE}:latest"' }))).length,
    0,
    'signaturesByTag',
  )
})

t.test('docs/deploy/release.md says what the workflow publishes', async (t) => {
  const page = readFileSync(`${ROOT}docs/deploy/release.md`, 'utf8')
  t.match(page, `\`${IMAGE}\``, 'the image')
  t.match(page, `\`${CHART_REF}\``, 'the chart')
  for (const platform of PLATFORMS) t.match(page, `\`${platform}\``, platform)
  t.match(page, /tags `0\.1\.0` and `0\.1`/, 'the two tags X.Y.Z and X.Y')
  t.match(page, /there is no `latest`/, 'and no latest')
  t.match(page, /SBOM/)
  t.match(page, /provenance/)
  t.match(page, '/.github/workflows/release.yml@refs/tags/v$VERSION', 'the signing identity: this workflow at the tag')
  t.match(page, 'https://token.actions.githubusercontent.com', 'issued by GitHub Actions')
})
