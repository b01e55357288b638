/**
 * Crash anywhere, on the real Slurm dev cluster: about twenty short jobs (`true`, `false`, `sleep`, a
 * task that fails once, cancelled ones) through the control plane in this process (an in-process API
 * over the memory store, two reconcile tickers that sometimes run two passes at once, the schedule
 * consumer), while the store and the Slurm backend's seam fail before and after their calls take
 * effect (a submit that reached the cluster but whose answer was lost) and hang, once past a pass's
 * (shortened) lease. Then the invariants (test/support/fault-checks.ts) are checked against what Slurm itself
 * reports: `squeue -t all` finds every array submitted under our names, `scontrol show job` when each
 * of its tasks ran. The seed is fixed; a failure prints it and every fault injected, and
 * `SWARMPLANE_FAULT_SEED=<seed>` replays the fault plan (the cluster's timing is its own).
 * Runs with the other Slurm suites, one file at a time (vitest.config.ts).
 */
import { setTimeout as sleep } from "node:timers/promises"
import { handleScheduleBatch } from "@swarmplane/core/control/schedule"
import type { Job } from "@swarmplane/core/model/job"
import { isFinished } from "@swarmplane/core/model/states"
import { systemClock } from "@swarmplane/core/util/clock"
import { afterAll, describe, expect, test } from "vitest"
import { checkInvariants, violationLines } from "./support/fault-checks"
import { type FaultPlan, Faults, Rng } from "./support/faults"
import { sessionTo, slurmConnection } from "./support/slurm"
import { backendId, project, slurmChaosPlane, slurmRuns } from "./support/slurm-chaos"

const connection = slurmConnection()
const suite = connection ? describe : describe.skip
const seed = Number(process.env.SWARMPLANE_FAULT_SEED ?? 31)

/**
 * The passes' lease: shorter than production's 60 s so that a launch hanging past it costs seconds,
 * not a minute, of the run (the expiry is what is tested, not its length).
 */
const leaseTtlMs = 20_000

/** Faults on the store and the backend seam; one launch in a dozen hangs past a pass's lease. */
function plan(seed: number): FaultPlan {
  const writes = /^store\.(create|createMany|update|delete)$/
  return {
    seed,
    rules: [
      { point: "queue.receive", kind: "duplicate", rate: 0.2 },
      { point: "backend.launch", kind: "hang", rate: 0.08, hangMs: [leaseTtlMs + 1_000, leaseTtlMs + 5_000] },
      { point: "backend.*", kind: "error", rate: 0.08 },
      { point: "backend.*", kind: "error-after", rate: 0.08 },
      { point: "backend.*", kind: "hang", rate: 0.03, hangMs: [1_000, 8_000] },
      { point: "store.*", kind: "race", rate: 0.02 },
      { point: "store.*", kind: "error", rate: 0.01 },
      { point: writes, kind: "error-after", rate: 0.005 },
      { point: "store.*", kind: "hang", rate: 0.001, hangMs: [1_000, 5_000] },
    ],
  }
}

type Kind = "ok" | "failing" | "flaky" | "cancel"
interface Planned {
  kind: Kind
  body: Record<string, unknown>
  expect: Job["status"]
  cancelAfterMs?: number
}

/** Twenty jobs: quick ones, ones that fail for good, ones that fail once then succeed, cancelled ones. */
function jobs(rng: Rng, tag: string): Planned[] {
  const kinds: Kind[] = ["ok", "ok", "ok", "ok", "ok", "failing", "failing", "flaky", "flaky", "cancel"]
  return Array.from({ length: 20 }, (_, n) => {
    const kind = kinds[n % kinds.length]!
    const base = {
      backendId,
      name: `chaos-${kind}-${n}`,
      tasks: rng.int(1, 3),
      resources: { cpu: 0.5, memoryMiB: 64 },
    }
    switch (kind) {
      case "failing":
        return {
          kind,
          expect: "FAILED",
          body: { ...base, command: ["false"], maxRetriesFailure: rng.int(0, 1) },
        }
      case "flaky": {
        // Fails its first run (a marker in the cluster user's home), succeeds on the retry.
        const mark = `$HOME/.swarmplane-chaos-${tag}-${n}-$SHARD_ID`
        const script = `if [ -e "${mark}" ]; then rm -f "${mark}"; exit 0; fi; touch "${mark}"; exit 3`
        return {
          kind,
          expect: "SUCCEEDED",
          body: { ...base, command: ["sh", "-c", script], maxRetriesFailure: 2 },
        }
      }
      case "cancel":
        return {
          kind,
          expect: "CANCELLED",
          cancelAfterMs: rng.int(3, 15) * 1000,
          body: { ...base, command: ["sleep", "120"] },
        }
      default:
        return {
          kind,
          expect: "SUCCEEDED",
          body: { ...base, command: rng.chance(0.5) ? ["true"] : ["sleep", String(rng.int(1, 3))] },
        }
    }
  })
}

suite("crash anywhere on the real Slurm cluster", () => {
  const c = connection!
  const session = sessionTo(c)
  const names = new Set<string>()
  afterAll(async () => {
    // scancel takes one name at a time (squeue takes a list).
    if (names.size)
      await session.exec([...names].map((n) => `scancel --name=${n}`).join("; ")).catch(() => undefined)
    session.close()
  })

  test(`seed ${seed}: every job ends as it should, each attempt is submitted once and runs alone, nothing is left on the cluster, and every state change has its event`, {
    timeout: 420_000,
  }, async () => {
    const rng = new Rng(seed ^ 0x51)
    const faults = new Faults(plan(seed), systemClock, { realTime: true })
    const { rt, queue, clean, history, callApi, pass, passes } = await slurmChaosPlane(c, faults, leaseTtlMs)
    let live = true
    const loops = [0, 500].map(async (phase) => {
      await sleep(phase)
      while (live) {
        await (rng.chance(0.2) ? Promise.all([pass(), pass()]) : pass())
        await sleep(1_000 + rng.int(0, 300))
      }
    })
    loops.push(
      (async () => {
        while (live) {
          await sleep(700)
          const messages = await queue.receive({ max: 10, visibilityS: 30 }).catch(() => [])
          if (!messages.length) continue
          const { retry } = await handleScheduleBatch(rt, messages).catch(() => ({ retry: [] as string[] }))
          await queue
            .delete(messages.filter((m) => !retry.includes(m.id)).map((m) => m.receipt))
            .catch(() => {})
        }
      })(),
    )

    // Users: submit over the first ten seconds, cancel some a little later.
    const tag = `${seed}-${Date.now().toString(36)}`
    const planned = jobs(rng, tag)
    const expected = new Map<string, Job["status"] | undefined>()
    await Promise.all(
      planned.map(async (job, n) => {
        await sleep(n * 500)
        const res = await callApi("POST", "/v1/jobs", job.body, `chaos-${tag}-${n}`)
        expect(res.status, JSON.stringify(res.json)).toBe(202)
        expected.set(res.json.id, job.expect)
        if (job.cancelAfterMs === undefined) return
        await sleep(job.cancelAfterMs)
        expect((await callApi("POST", `/v1/jobs/${res.json.id}/cancel`)).status).toBeLessThan(300)
      }),
    )

    // Faults for a while longer, then none until every job has ended.
    await sleep(25_000)
    faults.stop()
    const deadline = Date.now() + 240_000
    for (;;) {
      const all = await Promise.all([...expected.keys()].map((id) => clean.jobs.get(project, id)))
      if (all.every((j) => j && isFinished(j.status))) break
      if (Date.now() > deadline) break
      await sleep(2_000)
    }
    // Stops run after the pass's commit: give them a moment, then look at the cluster.
    await sleep(10_000)
    live = false
    await Promise.all(loops)

    // What Slurm ran: every array under a name our attempts were submitted with, and when each ran.
    const seen = await slurmRuns(session, clean, project, [...expected.keys()])
    for (const name of seen.names) names.add(name)
    const { substrate, violations } = seen
    violations.push(
      ...(await checkInvariants({
        repos: clean,
        project,
        history,
        substrate,
        expected,
        submissions: planned.length,
        now: Date.now(),
        leftoverGraceMs: 30_000,
      })),
    )
    const report = [
      `seed ${seed}: ${planned.length} jobs, ${seen.attempts} attempts, ${substrate.runs.length} Slurm runs in ${seen.submissions} submissions, ${passes.ran} passes (${passes.skipped} found the lease taken, ${passes.failed} failed)`,
      faults.summary(),
      ...violationLines(violations),
      `replay the fault plan: SWARMPLANE_FAULT_SEED=${seed}`,
    ].join("\n")
    console.log(report)
    expect(violations, report).toEqual([])
    // How many faults land depends on how long Slurm takes (real time); some must have.
    expect(faults.total()).toBeGreaterThan(0)
  })

  test("a kill committed while every scancel fails is carried out by a later pass: the task waits for Slurm to confirm its attempt stopped, and each pass cancels it again until then", {
    timeout: 180_000,
  }, async () => {
    // Every scancel fails while the kill is committed; then no faults: any later pass could stop it.
    const faults = new Faults(
      { seed, rules: [{ point: "backend.stop", kind: "error", rate: 1 }] },
      systemClock,
      { realTime: true },
    )
    const { clean, callApi, pass } = await slurmChaosPlane(c, faults)
    const submitted = await callApi("POST", "/v1/jobs", {
      backendId,
      name: "chaos-stop",
      command: ["sleep", "120"],
    })
    const id: string = submitted.json.id
    const task = async () => (await clean.jobs.load(project, id))!.tasks[0]!.data
    const until = async (what: string, done: () => Promise<boolean>) => {
      const deadline = Date.now() + 60_000
      while (!(await done())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
        await pass()
        await sleep(1_000)
      }
    }
    await until("the task to run", async () => (await task()).state === "RUNNING")
    const attempt = (await task()).attempts.at(-1)!
    names.add(attempt.submission!.split("#")[0]!)
    expect((await callApi("POST", `/v1/jobs/${id}/cancel`)).status).toBeLessThan(300)
    await until(
      "the job to be cancelled",
      async () => (await clean.jobs.get(project, id))?.status === "CANCELLED",
    )
    expect(faults.counts.get("backend.stop error")).toBeGreaterThan(0)
    faults.stop()
    for (let i = 0; i < 10; i++) {
      await pass()
      await sleep(1_000)
    }
    const left = (await session.exec(`squeue -h -j ${attempt.target} -o %T`)).stdout.trim()
    expect(left, `${attempt.target} of a job cancelled 10 s ago`).not.toBe("RUNNING")
    // Slurm said so, and the task no longer waits for it.
    expect((await task()).stopping).toBeUndefined()
  })
})
