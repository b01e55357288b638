/**
 * Hostile values in every field that reaches a Slurm script, bypassing the API's validation (as an old
 * stored item or a direct store write would): each is refused where the script is written, or quoted
 * so that bash runs the script with the value as data. Scripts are run here by a real bash, with fake
 * `apptainer`/`curl` on the PATH, and nothing may create the marker file.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, test } from "vitest"
import type { BackendConfigOf } from "../../model/backend"
import { SwarmSpec } from "../../model/swarm"
import { type Submission, sbatchScript, UnsafeValueError } from "./script"
import { replicaScript } from "./serving"
import { slurmConfig } from "./testing"

type SlurmConfig = BackendConfigOf<"slurm">

const work = mkdtempSync(join(tmpdir(), "swarmplane-hostile-"))
const marker = join(work, "PWNED")
const bin = join(work, "bin")
mkdirSync(bin)
// Fakes that print their argv, one word a line, so the test sees what bash passed them.
for (const name of ["apptainer", "curl"]) {
  writeFileSync(
    join(bin, name),
    `#!/bin/sh\nprintf '%s\\n' "$@" >> ${JSON.stringify(join(work, `${name}.args`))}\n`,
  )
  chmodSync(join(bin, name), 0o755)
}

/** Values that would run `touch MARKER` if they reached a shell unquoted, or end an #SBATCH line. */
const hostile = [
  `x\ntouch ${marker}`,
  `x; touch ${marker}`,
  `$(touch ${marker})`,
  `\`touch ${marker}\``,
  `x' ; touch ${marker}; '`,
  `x" ; touch ${marker}; "`,
  "x\0y",
  `x\r\ntouch ${marker}`,
  "y".repeat(5000),
]

const config = slurmConfig({ outputDir: work })

const submission: Submission = {
  name: "sp-s-01hostile",
  entries: [{ index: 0, shard: 0, attemptUid: "a-1" }],
  nshards: 1,
  resources: { cpu: 1, memoryMiB: 64, gpu: 0 },
  env: {},
  command: ["printf", "%s\\n", "ok"],
  features: [],
}

/** Run a task script as Slurm would start array task 0, with the fakes first on the PATH. */
function runTask(script: string): string {
  return execFileSync("bash", ["-c", script], {
    encoding: "utf8",
    env: {
      PATH: `${bin}:${process.env.PATH}`,
      SLURM_ARRAY_TASK_ID: "0",
      SLURM_SUBMIT_DIR: work,
      SLURM_JOB_NAME: submission.name,
    },
  })
}

/** Fields of a task submission (and of the backend config) and how a hostile value gets there. */
const taskFields: Record<
  string,
  (v: string) => { config?: Partial<SlurmConfig>; sub?: Partial<Submission> }
> = {
  partition: (v) => ({ config: { partition: v } }),
  account: (v) => ({ config: { account: v } }),
  qos: (v) => ({ config: { qos: v } }),
  timeLimit: (v) => ({ config: { timeLimit: v } }),
  gresGpuName: (v) => ({ config: { gresGpuName: v }, sub: { resources: { cpu: 1, memoryMiB: 64, gpu: 1 } } }),
  outputDir: (v) => ({ config: { outputDir: v } }),
  "extraSbatch[0]": (v) => ({ config: { extraSbatch: [`--comment=${v}`] } }),
  "constraint partition": (v) => ({ sub: { partition: v } }),
  "constraint feature": (v) => ({ sub: { features: [v] } }),
  "resources.gpuType": (v) => ({ sub: { resources: { cpu: 1, memoryMiB: 64, gpu: 1, gpuType: v } } }),
  "env name": (v) => ({ sub: { env: { [v]: "1" } } }),
  attemptUid: (v) => ({ sub: { entries: [{ index: 0, shard: 0, attemptUid: v }] } }),
  // Quoted data: the value reaches the program as one argument, literally.
  env: (v) => ({ sub: { env: { VALUE: v }, command: ["sh", "-c", 'printf "%s\\n" "$VALUE"'] } }),
  command: (v) => ({ sub: { command: ["printf", "%s\\n", v] } }),
  image: (v) => ({
    config: { container: { launcher: "apptainer", extraArgs: [] } },
    sub: { image: v, command: ["true"] },
  }),
  "container.extraArgs": (v) => ({
    config: { container: { launcher: "apptainer", extraArgs: [v] } },
    sub: { image: "img", command: ["true"] },
  }),
  agentCommand: (v) => ({
    config: { agentCommand: ["printf", "%s\\n", v] },
    sub: { command: ["swarmplane-agent"] },
  }),
}

describe("hostile values in a task's script", () => {
  for (const [field, place] of Object.entries(taskFields))
    test(`${field}: refused or passed as data, never run`, () => {
      for (const value of hostile) {
        const { config: c = {}, sub = {} } = place(value)
        let script: string
        try {
          script = sbatchScript({ ...config, ...c }, { ...submission, ...sub })
        } catch (error) {
          expect(error, `${field} = ${JSON.stringify(value)}`).toBeInstanceOf(UnsafeValueError)
          expect((error as Error).message).toContain(field.replace(/\[0\]$/, "[0]"))
          continue
        }
        // What follows an #SBATCH option on its line is sbatch's to read, not bash's: run it and see.
        runTask(script)
        expect(existsSync(marker), `${field} = ${JSON.stringify(value)} ran a command`).toBe(false)
      }
    })

  test("quoted values reach the program literally", () => {
    const value = `$(touch ${marker}) \`id\` 'q' "d"; x`
    const out = runTask(sbatchScript(config, { ...submission, command: ["printf", "%s\\n", value] }))
    expect(out).toBe(`${value}\n`)
    const env = runTask(
      sbatchScript(config, {
        ...submission,
        env: { VALUE: value },
        command: ["sh", "-c", 'printf "%s\\n" "$VALUE"'],
      }),
    )
    expect(env).toBe(`${value}\n`)
    expect(existsSync(marker)).toBe(false)
    // The task's exit code is written next to its output for the reconcile command.
    expect(readFileSync(join(work, `${submission.name}_0.exit`), "utf8")).toBe("0\n")
  })
})

describe("hostile values in a swarm's scripts", () => {
  const swarm = (spec: Record<string, unknown>) => ({
    ...SwarmSpec.parse({ name: "s", model: "echo" }),
    ...spec,
    project: "p",
    phase: "PENDING" as const,
    desired: "running" as const,
    generation: 1,
    replicaStatus: { ready: 0, total: 1, items: [] },
    createdAt: "2026-12-01T00:00:00.000Z",
    updatedAt: "2026-12-01T00:00:00.000Z",
  })
  const fields: Record<string, (v: string) => Record<string, unknown>> = {
    "serving.slurm.partition": (v) => ({ serving: { slurm: { partition: v } } }),
    "serving.slurm.timeLimit": (v) => ({ serving: { slurm: { timeLimit: v } } }),
    "env name": (v) => ({ env: { [v]: "1" } }),
  }
  for (const [field, place] of Object.entries(fields))
    test(`${field}: refused`, () => {
      for (const value of hostile.filter((v) => !/^y+$/.test(v)))
        expect(() => replicaScript(config, swarm(place(value)) as never, "sp-srv-p.s.abc-g1")).toThrow(
          UnsafeValueError,
        )
    })

  test("healthPath and model travel quoted: the health check asks for the path as given", () => {
    const path = `/health$(touch ${marker})`
    const script = replicaScript(
      config,
      swarm({ healthPath: path, model: `m$(touch ${marker})` }) as never,
      "sp-srv-p.s.abc-g1",
    )
    // Run the health-check loop alone, with the fake curl (which succeeds at once).
    const loop = script.split("\n").find((l) => l.startsWith("until curl"))!
    execFileSync("bash", ["-c", `PORT=1; server=$$; ${loop}`], {
      env: { PATH: `${bin}:${process.env.PATH}` },
    })
    expect(readFileSync(join(work, "curl.args"), "utf8")).toContain(`http://127.0.0.1:1${path}`)
    expect(script).toContain(`MODEL='m$(touch ${marker})'`)
    expect(existsSync(marker)).toBe(false)
  })
})
