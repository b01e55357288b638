/**
 * Crash anywhere, on Lepton: about twenty short jobs (`true`, `false`, `sleep`, a task that fails
 * once, cancelled ones) through the control plane in this process (an in-process API over the memory
 * store, two reconcile tickers that sometimes run two passes at once, the schedule consumer) with the
 * `lepton` backend on the fake Lepton, while the store and the backend's seam fail before and after
 * their calls take effect and hang (an observation now and then past a pass's shortened lease), and
 * the fake itself answers some requests with a 429 and `Retry-After`, a 500 before serving, a 500
 * after serving (a created job whose answer was lost) or late. Then the invariants
 * (test/support/fault-checks.ts) are checked against what the fake's API lists: every Lepton job was
 * created under an attempt's name at most once, none is left running, and no process of the fake
 * lives on. The seed is fixed; a failure prints it and every fault injected, and
 * `SWARMPLANE_FAULT_SEED=<seed>` replays the fault plan (the timing of the processes is their own).
 * A second test holds the fix of a bug the run found: a launch that went on after its pass's lease
 * lapsed created an attempt's Lepton job a second time (a launch now stops at its lease).
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import type { LaunchRequest, TaskBackend } from "@swarmplane/core/backends/protocol"
import type { Job } from "@swarmplane/core/model/job"
import { isFinished } from "@swarmplane/core/model/states"
import { systemClock } from "@swarmplane/core/util/clock"
import { afterAll, expect, test } from "vitest"
import { type FakeLepton, startFakeLepton } from "./support/fake-lepton"
import { checkInvariants, violationLines } from "./support/fault-checks"
import { type Call, type FaultPlan, Faults, Rng } from "./support/faults"
import {
  backendId,
  leptonChaosPlane,
  leptonEnded,
  leptonFaults,
  leptonJobs,
  leptonRuns,
  project,
} from "./support/lepton-chaos"

const seed = Number(process.env.SWARMPLANE_FAULT_SEED ?? 14)

/**
 * The passes' lease: far shorter than production's 60 s, so that a launch hanging past it costs
 * seconds of the run (the expiry is what is tested, not its length); a pass acts only while its lease
 * has 5 s left, so this leaves it 5 s.
 */
const leaseTtlMs = 10_000

/**
 * Whether a store call is about an API request's Idempotency-Key record. Those are left alone: a
 * reservation whose answer was lost stays "in progress" for a minute (`StaleAfterMs`), a user's retry
 * waits that long, and the Slurm run covers it; this run is about the backend.
 */
const idempotency = (call: Call) => {
  const [first] = call.args
  const item = (Array.isArray(first) ? first[0] : first) as { pk?: string; type?: string } | undefined
  return item?.type === "idempotency" || Boolean(item?.pk?.includes("#IDEM#"))
}

/** Faults on the store, the backend seam and the fake's API; one observation in twenty-five hangs past a lease. */
function plan(seed: number): FaultPlan {
  const writes = /^store\.(create|createMany|update|delete)$/
  const when = (call: Call) => !idempotency(call)
  return {
    seed,
    rules: [
      { point: "queue.receive", kind: "duplicate", rate: 0.2 },
      // Past a pass's lease: its reads go on after the lease lapsed (its writes are fenced), and a
      // launch that goes on creates nothing (it stops at its lease; another pass creates the jobs).
      {
        point: /^backend\.(reconcile|launch)$/,
        kind: "hang",
        rate: 0.04,
        hangMs: [leaseTtlMs + 500, leaseTtlMs + 2_000],
      },
      { point: "backend.*", kind: "error", rate: 0.08 },
      { point: "backend.*", kind: "error-after", rate: 0.08 },
      { point: "backend.*", kind: "hang", rate: 0.03, hangMs: [500, 3_000] },
      { point: "lepton.*", kind: "error", rate: 0.08 },
      { point: "lepton.*", kind: "error-after", rate: 0.06 },
      { point: "lepton.*", kind: "hang", rate: 0.06, hangMs: [200, 2_000] },
      { point: "store.*", kind: "race", rate: 0.02, when },
      { point: "store.*", kind: "error", rate: 0.01, when },
      { point: writes, kind: "error-after", rate: 0.005, when },
      { point: "store.*", kind: "hang", rate: 0.001, hangMs: [500, 2_000], when },
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
function jobs(rng: Rng, marks: string): Planned[] {
  const kinds: Kind[] = ["ok", "ok", "ok", "ok", "failing", "failing", "flaky", "flaky", "cancel", "cancel"]
  return Array.from({ length: 20 }, (_, n) => {
    const kind = kinds[n % kinds.length]!
    const base = { backendId, name: `chaos-${kind}-${n}`, tasks: rng.int(1, 3) }
    switch (kind) {
      case "failing":
        return {
          kind,
          expect: "FAILED",
          body: { ...base, command: ["false"], maxRetriesFailure: rng.int(0, 1) },
        }
      case "flaky":
        // Fails its first run (it makes a marker), succeeds on the retry (the marker is there).
        return {
          kind,
          expect: "SUCCEEDED",
          body: {
            ...base,
            env: { MARK: join(marks, String(n)) },
            command: ["sh", "-c", 'if mkdir "$MARK-$SHARD_ID" 2>/dev/null; then exit 3; fi'],
            maxRetriesFailure: 2,
          },
        }
      case "cancel":
        return {
          kind,
          expect: "CANCELLED",
          cancelAfterMs: rng.int(15, 50) * 100,
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

/** Wait for `done` (checked every half second) until `ms` pass; whether it came. */
async function waitFor(done: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!(await done())) {
    if (Date.now() > deadline) return false
    await sleep(500)
  }
  return true
}

const fakes: FakeLepton[] = []
afterAll(async () => {
  await Promise.all(fakes.map((f) => f.stop()))
})

test(`seed ${seed}: with the store, the backend seam and Lepton's API failing, every job ends as it should, each attempt is created on Lepton once and runs alone, nothing is left running on Lepton, and every state change has its event`, {
  timeout: 150_000,
}, async () => {
  const started = Date.now()
  const fake = await startFakeLepton({ workerReadyMs: 50 })
  fakes.push(fake)
  const rng = new Rng(seed ^ 0x51)
  const faults = new Faults(plan(seed), systemClock, { realTime: true })
  const http = leptonFaults(fake, faults)
  const { queue, clean, history, callApi, pass, passes } = await leptonChaosPlane(fake, faults, leaseTtlMs)
  let live = true
  const loops = [0, 300].map(async (phase) => {
    await sleep(phase)
    while (live) {
      await (rng.chance(0.2) ? Promise.all([pass(), pass()]) : pass())
      await sleep(500 + rng.int(0, 300))
    }
  })
  // The schedule consumer: a request runs a pass over its backend now, as `scheduleOne` does, but
  // under the run's shortened lease and faulty seam (`scheduleOne` takes production's 60 s lease, so
  // one lost release of it would hold the backend for most of the run).
  loops.push(
    (async () => {
      while (live) {
        await sleep(300)
        const messages = await queue.receive({ max: 10, visibilityS: 30 }).catch(() => [])
        if (!messages.length) continue
        await pass()
        await queue.delete(messages.map((m) => m.receipt)).catch(() => {})
      }
    })(),
  )

  // Users: submit over the first ten seconds, cancel some a little later.
  const planned = jobs(rng, mkdtempSync(join(tmpdir(), "lepton-chaos-")))
  const expected = new Map<string, Job["status"] | undefined>()
  await Promise.all(
    planned.map(async (job, n) => {
      await sleep(n * 500)
      const res = await callApi("POST", "/v1/jobs", job.body, `chaos-${seed}-${n}`)
      expect(res.status, JSON.stringify(res.json)).toBe(202)
      expected.set(res.json.id, job.expect)
      if (job.cancelAfterMs === undefined) return
      await sleep(job.cancelAfterMs)
      expect((await callApi("POST", `/v1/jobs/${res.json.id}/cancel`)).status).toBeLessThan(300)
    }),
  )

  // Faults for a while longer, then none until every job has ended and Lepton runs nothing of ours.
  await sleep(8_000)
  faults.stop()
  const quietAt = Date.now()
  await waitFor(async () => {
    const all = await Promise.all([...expected.keys()].map((id) => clean.jobs.get(project, id)))
    return all.every((j) => j && isFinished(j.status))
  }, 60_000)
  // Stops run after the pass's commit: the passes go on until Lepton has ended every job.
  await waitFor(
    async () =>
      fake.livePids().length === 0 &&
      (await leptonJobs(fake)).every((j) => leptonEnded.has(j.status?.state ?? "")),
    20_000,
  )
  const settled = Date.now()
  live = false
  await Promise.all(loops)

  const seen = await leptonRuns(fake, clean, project, [...expected.keys()])
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
      leftoverGraceMs: 20_000,
    })),
  )
  for (const pid of fake.livePids())
    violations.push({
      invariant: "leftover",
      subject: `pid ${pid}`,
      detail: "a process of the fake still runs",
    })
  const report = [
    `seed ${seed}: ${planned.length} jobs, ${seen.attempts} attempts, ${seen.created} Lepton jobs, ${passes.ran} passes (${passes.skipped} found the lease taken, ${passes.failed} failed); faults for ${Math.round((quietAt - started) / 1000)} s, settled ${Math.round((settled - quietAt) / 1000)} s later, ${Math.round((Date.now() - started) / 1000)} s in all`,
    faults.summary(),
    `  the fake answered: ${Object.entries(http)
      .map(([what, n]) => `${what} ${n}`)
      .join(", ")}`,
    ...violationLines(violations),
    `replay the fault plan: SWARMPLANE_FAULT_SEED=${seed}`,
  ].join("\n")
  console.log(report)
  expect(violations, report).toEqual([])
  // A run in which nothing failed proves nothing: faults landed on every side.
  expect(faults.total(), report).toBeGreaterThan(0)
  expect(http["429"] + http["500"] + http.lost, report).toBeGreaterThan(0)
})

/**
 * Found by the run above (seed 14, while a launch could hang past its pass's lease): the lepton
 * backend stops calling Lepton at its invocation budget (45 s after it was made), not when its pass's
 * lease lapses. Production's lease (60 s, acted on until 5 s before it ends) happens to outlast that
 * budget; a shorter one (`PassOptions.leaseTtlMs`, or a budget raised past it) lets a launch that goes
 * on after its lease lapsed list the workspace before the next holder's create lands, and create the
 * same attempt's job again. Shown here deterministically: pass A's launch starts late (a pause, a slow
 * connection) once pass B, holding the lease after A's lapsed, is creating the job (Lepton answers B's
 * create late). This asserts the bug as it is; once the pass's lease bounds the backend's calls it
 * fails: then it should say one job, no violations, and the launch hang past a lease should go back
 * into the plan above.
 */
test("a launch that goes on after its pass's lease lapsed creates nothing: the attempt's one Lepton job is the next lease holder's", {
  timeout: 90_000,
}, async () => {
  const fake = await startFakeLepton({ workerReadyMs: 50 })
  fakes.push(fake)
  const faults = new Faults({ seed, rules: [] }, systemClock, { realTime: true })
  const { clean, callApi, pass } = await leptonChaosPlane(fake, faults, leaseTtlMs)
  const submitted = await callApi("POST", "/v1/jobs", { backendId, name: "lapsed", command: ["true"] })
  expect(submitted.status).toBe(202)
  fake.injectFault({ method: "POST", path: "/jobs", delayMs: 3_000 })
  const creating = () => fake.requests.some((r) => r.method === "POST" && r.path === "/jobs")
  let bCreating!: () => void
  const untilBCreates = new Promise<void>((resolve) => {
    bCreating = resolve
  })
  const late = (backend: TaskBackend): TaskBackend =>
    new Proxy(backend, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver)
        if (name !== "launch") return typeof value === "function" ? value.bind(target) : value
        return async (request: LaunchRequest) => {
          await untilBCreates
          return target.launch(request)
        }
      },
    })
  const a = pass(late)
  // B: passes until one takes the lease (once A's lapsed) and launches the same attempt.
  const b = (async () => {
    const deadline = Date.now() + 45_000
    while (Date.now() < deadline) {
      const report = await pass()
      if (report?.ran) return report
      await sleep(300)
    }
  })()
  expect(await waitFor(creating, 45_000), "a pass creates the job").toBe(true)
  bCreating()
  await Promise.all([a, b])
  const seen = await leptonRuns(fake, clean, project, [submitted.json.id])
  const [job] = await clean.jobs.load(project, submitted.json.id).then((l) => l?.tasks ?? [])
  const name = job?.data.attempts[0]?.submission
  const created = (await leptonJobs(fake)).filter((j) => j.metadata.name === name)
  expect(job?.data.attempts, "one attempt, placed by pass A").toHaveLength(1)
  expect(created, `Lepton jobs named ${name}`).toHaveLength(1)
  expect(seen.violations.map((v) => v.detail)).toEqual([])
})
