/**
 * The real `swarmplane` binary (`node packages/cli/bin/swarmplane.mjs`, as a child process) against a
 * real local control plane in another process, found through the `local` profile the control plane
 * writes: a swarm up, a sharded job against it, its logs, listings, a batch job's submit, the swarm
 * down; offline file validation; and the exit codes of usage, auth and not-found errors.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { freshDirs, killStarted, type LocalProcess, root, startLocal } from "./support/local"

const bin = join(root, "packages/cli/bin/swarmplane.mjs")
const scratch = mkdtempSync(join(tmpdir(), "swarmplane-cli-"))
let dirs: ReturnType<typeof freshDirs>
let local: LocalProcess

beforeAll(async () => {
  dirs = freshDirs()
  local = await startLocal(dirs)
})
afterAll(async () => {
  await local?.stop()
  killStarted()
})

interface Result {
  code: number | null
  stdout: string
  stderr: string
}

/** Run the binary as a user would, with this test's CLI config folder (and nothing from the outer env). */
function swarmplane(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const { SWARMPLANE_API: _api, SWARMPLANE_KEY: _key, SWARMPLANE_PROFILE: _profile, ...outer } = process.env
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: scratch,
    env: { ...outer, SWARMPLANE_CONFIG_DIR: dirs.SWARMPLANE_CONFIG_DIR, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })))
}

function file(name: string, text: string): string {
  const path = join(scratch, name)
  writeFileSync(path, text)
  return path
}

/** Exactly one line on stderr, and the exit code. */
function expectOneLineError(res: Result, code: number, pattern: RegExp) {
  expect(res.code, res.stderr).toBe(code)
  expect(res.stderr).toMatch(/^swarmplane: [^\n]+\n$/)
  expect(res.stderr).toMatch(pattern)
}

test("a swarm up, a sharded job against it, its logs, a batch job, and the swarm down", {
  timeout: 180_000,
}, async () => {
  const swarmFile = file("swarm.yaml", "name: cli-demo\nmodel: echo\nreplicas: 2\nmemoryMiBPerReplica: 256\n")

  // 1. Up, waiting until it serves; a pipe gets only the name, the progress goes to stderr.
  const up = await swarmplane(["up", "-f", swarmFile, "--wait", "--timeout", "120"])
  expect(up.code, up.stderr).toBe(0)
  expect(up.stdout).toBe("cli-demo\n")
  expect(up.stderr).toMatch(/swarm cli-demo: RUNNING, 2\/2 replicas ready/)

  // 2. A 3-shard job against it.
  const submit = await swarmplane([
    "job",
    "submit",
    "--swarm",
    "cli-demo",
    "--tasks",
    "3",
    "--",
    "sh",
    "-c",
    "echo shard $SHARD_ID",
  ])
  expect(submit.code, submit.stderr).toBe(0)
  const jobId = submit.stdout.trim()
  expect(jobId).toMatch(/^job-\w+$/)

  // 3. Follow it to the end: exit 0 when it SUCCEEDED, with the per-task table.
  const watch = await swarmplane(["job", "status", jobId, "--watch", "--timeout", "120"])
  expect(watch.code, watch.stderr).toBe(0)
  expect(watch.stdout).toMatch(/^Status:\s+SUCCEEDED$/m)
  expect(watch.stdout).toMatch(/^TASK\s+STATE\s+ATTEMPTS\s+EXIT\s+REASON$/m)
  expect(watch.stdout.match(/^\d+\s+SUCCEEDED\s+1\s+0\s/gm)).toHaveLength(3)

  // 4. Task 1's output.
  const logs = await swarmplane(["job", "logs", jobId, "--task", "1"])
  expect(logs.code, logs.stderr).toBe(0)
  expect(logs.stdout).toBe("shard 1\n")

  // 5. The swarm and the jobs as JSON.
  const status = await swarmplane(["status", "cli-demo", "-o", "json"])
  expect(status.code, status.stderr).toBe(0)
  expect(JSON.parse(status.stdout)).toMatchObject({
    name: "cli-demo",
    phase: "RUNNING",
    replicaStatus: { ready: 2, total: 2 },
  })
  const list = await swarmplane(["job", "list", "-o", "json"])
  expect(list.code, list.stderr).toBe(0)
  expect(JSON.parse(list.stdout)).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ id: jobId, status: "SUCCEEDED", counts: { SUCCEEDED: 3 } }),
    ]),
  )

  // 6. The batch form: the API builds the batch runner's command, with --input made absolute.
  const batch = await swarmplane([
    ...["job", "submit", "--swarm", "cli-demo", "--input", "rows.jsonl", "--output-dir", "out"],
    ...["--shards", "2", "--concurrency", "4", "-o", "json"],
  ])
  expect(batch.code, batch.stderr).toBe(0)
  const created = JSON.parse(batch.stdout)
  expect(created.spec).toMatchObject({
    tasks: 2,
    batch: { input: join(scratch, "rows.jsonl"), concurrency: 4 },
  })
  expect(created.spec.command).toEqual(
    expect.arrayContaining([
      "run-batch",
      "--input",
      join(scratch, "rows.jsonl"),
      "--output",
      join(scratch, "out"),
    ]),
  )
  expect((await swarmplane(["job", "cancel", created.id])).code).toBe(0)

  // 7. Down, waiting until it is STOPPED.
  const down = await swarmplane(["down", "cli-demo", "--yes", "--wait", "--timeout", "60"])
  expect(down.code, down.stderr).toBe(0)
  const stopped = await swarmplane(["status", "cli-demo", "-o", "json"])
  expect(JSON.parse(stopped.stdout)).toMatchObject({ phase: "STOPPED", desired: "deleted" })
})

test("a domyn-swarm file runs only on a backend of the type it names: none, one, or several", {
  timeout: 60_000,
}, async () => {
  // As domyn-swarm's README writes them: a Slurm swarm and a Lepton swarm.
  const slurmFile = file(
    "domyn-slurm.yaml",
    [
      "model: Qwen/Qwen2.5-0.5B-Instruct",
      "name: qwen-slurm",
      "replicas: 1",
      "gpus_per_replica: 1",
      "backend:",
      "  type: slurm",
      "  partition: gpu",
      "  time_limit: '01:00:00'",
    ].join("\n"),
  )
  const leptonFile = file(
    "domyn-lepton.yaml",
    [
      "model: Qwen/Qwen2.5-0.5B-Instruct",
      "name: qwen-lepton",
      "replicas: 1",
      "backend:",
      "  type: lepton",
      "  resource_shape: gpu.1xh100-80gb",
    ].join("\n"),
  )
  // The project has only its local workers: neither file may land there.
  for (const [path, type] of [
    [slurmFile, "slurm"],
    [leptonFile, "lepton"],
  ]) {
    const res = await swarmplane(["up", "-f", path!])
    expect(res.code, res.stderr).toBe(5)
    expect(res.stderr).toMatch(
      new RegExp(`no ${type} backend is registered in this project \\(it has local: workers\\)`),
    )
    expect(res.stderr).toMatch(/swarmplane backend add/)
  }
  expect((await swarmplane(["status", "qwen-slurm"])).code).toBe(3)

  // One Slurm backend: the file goes there, without naming it.
  const slurmBackend = (id: string) =>
    file(
      `${id}.yaml`,
      [
        `id: ${id}`,
        "config:",
        "  type: slurm",
        "  loginHost: login.invalid",
        "  user: svc",
        "  sshKeySecret: no-such-key",
        "  hostKey: SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "  partition: gpu",
      ].join("\n"),
    )
  expect((await swarmplane(["backend", "add", "-f", slurmBackend("hpc-a")])).code).toBe(0)
  const up = await swarmplane(["up", "-f", slurmFile, "-o", "json"])
  expect(up.code, up.stderr).toBe(0)
  expect(JSON.parse(up.stdout)).toMatchObject({
    name: "qwen-slurm",
    backendId: "hpc-a",
    backendType: "slurm",
  })

  // Two: the error names both and the flag that picks one; the flag works.
  expect((await swarmplane(["backend", "add", "-f", slurmBackend("hpc-b")])).code).toBe(0)
  const two = await swarmplane(["up", "-f", slurmFile, "--name", "qwen-two"])
  expect(two.code).toBe(5)
  expect(two.stderr).toMatch(
    /2 slurm backends \(hpc-a, hpc-b\); name one with backendId \(CLI: --backend ID\)/,
  )
  const picked = await swarmplane([
    "up",
    "-f",
    slurmFile,
    "--name",
    "qwen-two",
    "--backend",
    "hpc-b",
    "-o",
    "json",
  ])
  expect(picked.code, picked.stderr).toBe(0)
  expect(JSON.parse(picked.stdout)).toMatchObject({ backendId: "hpc-b" })
  // A backend of another type is refused by name.
  const wrong = await swarmplane(["up", "-f", slurmFile, "--name", "qwen-wrong", "--backend", "local"])
  expect(wrong.code).toBe(5)
  expect(wrong.stderr).toMatch(/backend "local" is a workers backend, but this asks for slurm/)
  for (const name of ["qwen-slurm", "qwen-two"]) await swarmplane(["down", name, "--yes"])
})

describe("config validate, offline", () => {
  test("a broken file: every error with its path and position, exit 5", async () => {
    const broken = file(
      "broken.yaml",
      ["name: Bad_Name", "model: echo", "replicas: 5000", "port: 0", "colour: blue"].join("\n"),
    )
    const res = await swarmplane(["config", "validate", "-f", broken], {
      SWARMPLANE_API: "http://127.0.0.1:1",
    })
    expect(res.code).toBe(5)
    expect(res.stdout).toBe("")
    expect(res.stderr.trimEnd().split("\n")).toEqual([
      expect.stringMatching(/broken\.yaml:1:7: name: must be a DNS label/),
      `${broken}:3:11: replicas: must be at most 1024`,
      `${broken}:4:7: port: must be at least 1`,
      `${broken}:5:1: unknown field "colour": remove it (the fields are listed at /docs)`,
      `swarmplane: ${broken} is not a valid swarm file: 4 errors (above)`,
    ])
  })

  test("a good file: ok, exit 0", async () => {
    const good = file("good.yaml", "name: demo\nmodel: echo\nreplicas: 2\n")
    const res = await swarmplane(["config", "validate", "-f", good])
    expect([res.code, res.stdout]).toEqual([0, 'ok: swarm "demo"\n'])
  })

  test("a domyn-swarm config validates as a swarm", async () => {
    const domyn = file(
      "domyn.yaml",
      [
        "model: meta-llama/Llama-3.1-8B-Instruct",
        "name: llama",
        "replicas: 2",
        "gpus_per_replica: 4",
        "cpus_per_task: 8",
        "mem_per_cpu: 8G",
        'args: "--max-model-len 8192"',
        "port: 8000",
        "env:",
        "  HF_HOME: /shared/hf",
        "backend:",
        "  type: slurm",
        "  partition: gpu",
        "  time_limit: '04:00:00'",
        "  endpoint:",
        "    port: 9000",
      ].join("\n"),
    )
    const res = await swarmplane(["config", "validate", "-f", domyn, "-o", "json"])
    expect(res.code, res.stderr).toBe(0)
    expect(JSON.parse(res.stdout)).toMatchObject({
      ok: true,
      kind: "swarm",
      name: "llama",
      body: {
        gpusPerReplica: 4,
        cpusPerReplica: 8,
        memoryMiBPerReplica: 65536,
        args: ["--max-model-len", "8192"],
        serving: { slurm: { partition: "gpu", timeLimit: "04:00:00", routerPort: 9000 } },
      },
    })
  })
})

describe("exit codes", () => {
  test("an unknown command or flag exits 2 with one line", async () => {
    expectOneLineError(await swarmplane(["swarms"]), 2, /unknown command 'swarms'.*see 'swarmplane --help'/)
    expectOneLineError(await swarmplane(["job", "list", "--colour"]), 2, /unknown option '--colour'/)
  })

  test("a wrong key exits 4", async () => {
    expectOneLineError(
      await swarmplane(["swarm", "list"], { SWARMPLANE_KEY: "sp_not-a-real-key-000" }),
      4,
      /API key not recognised.*\(auth\.unauthorized\); check SWARMPLANE_KEY/,
    )
  })

  test("an unknown job id exits 3", async () => {
    expectOneLineError(
      await swarmplane(["job", "status", "job-doesnotexist"]),
      3,
      /job "job-doesnotexist" not found in this project \(job\.not_found\); list jobs with: swarmplane job list/,
    )
  })

  test("an unreachable control plane exits 1 and says how to start one", async () => {
    expectOneLineError(
      await swarmplane(["swarm", "list"], { SWARMPLANE_API: "http://127.0.0.1:9", SWARMPLANE_KEY: "x" }),
      1,
      /cannot reach the control plane at http:\/\/127\.0\.0\.1:9 .*start it with swarmplane dev/,
    )
  })
})
