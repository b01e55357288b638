/**
 * Crash anywhere: randomized runs of a few hundred small jobs (single and multi-task, failing with
 * retries, cancelled, gangs) through the control plane and the `workers` backend, with simulated
 * agents, while the store, the queue and the backend seam fail, hang and lose races, SQS delivers
 * twice and passes overlap (test/support/fault-run.ts). Then the invariants are checked
 * (test/support/fault-checks.ts). The seeds are fixed; a failure prints its seed and every fault
 * injected, and replays alone with
 *   SWARMPLANE_FAULT_SEED=<seed> [SWARMPLANE_FAULT_PROFILE=full|before|none] [SWARMPLANE_FAULT_JOBS=<n>]
 *   npx vitest run --project main test/faults.test.ts -t "seed"
 * The long variant is `runFaultSoak` (bench/faults.ts).
 */
import { BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import type { Outcome } from "@swarmplane/core/model/outcome"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime } from "@swarmplane/core/runtime"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { FakeClock } from "@swarmplane/core/util/clock"
import { silentLogger } from "@swarmplane/core/util/logger"
import { describe, expect, test } from "vitest"
import { describeRun, type FaultRunResult, type Profile, runFaultRun } from "./support/fault-run"
import { Faults, faultyStore } from "./support/faults"

/** The seeds `npm test` runs, each with every kind of fault. */
const Seeds = [20261, 4099, 77]
const replay = process.env.SWARMPLANE_FAULT_SEED
const profile = (process.env.SWARMPLANE_FAULT_PROFILE ?? "full") as Profile
const jobs = Number(process.env.SWARMPLANE_FAULT_JOBS ?? 70)

function print(r: FaultRunResult): void {
  console.log(describeRun(r))
}

/** A run with no store faults (duplicates, overlapping passes, crashing workers), made once for two tests. */
let quiet: Promise<FaultRunResult> | undefined
const quietRun = () => {
  quiet ??= runFaultRun({ seed: 5, jobs: 60, profile: "none" }).then((r) => {
    print(r)
    return r
  })
  return quiet
}

describe("crash anywhere: the workers backend under injected faults", () => {
  for (const seed of replay ? [Number(replay)] : Seeds)
    test(`seed ${seed}: every job ends as its spec and its user say, within its budgets, with nothing left running, no two attempts of a task at once, and every state change with its event`, {
      timeout: 120_000,
    }, async () => {
      const r = await runFaultRun({ seed, jobs, profile })
      print(r)
      expect(r.violations, describeRun(r)).toEqual([])
      expect(Object.values(r.byStatus).reduce((a, b) => a + b, 0)).toBe(jobs)
      if (profile !== "none") expect(r.faults.total(), "faults were injected").toBeGreaterThan(jobs / 2)
    })

  test("a task whose attempt the control plane ended while it ran (a gang member's retry, a preemption) is placed again only once its worker stopped it: no two attempts of a task run at once", {
    timeout: 120_000,
  }, async () => {
    const r = await quietRun()
    expect(r.endedWhileRunning, "the run ended attempts that still ran").toBeGreaterThan(0)
    expect(
      r.violations.filter((v) => v.invariant === "concurrent"),
      describeRun(r),
    ).toEqual([])
  })

  test("with duplicate deliveries, overlapping passes and crashing workers, every state change has exactly its event", {
    timeout: 120_000,
  }, async () => {
    const r = await quietRun()
    expect(r.faults.counts.get("queue.receive duplicate")).toBeGreaterThan(0)
    expect(r.passes.skipped, "passes overlapped").toBeGreaterThan(0)
    expect(r.violations, describeRun(r)).toEqual([])
  })

  test("with failures only before a write takes effect, every state change still has exactly its event (a sibling's failed write, a failed pass, a failed event write)", {
    timeout: 120_000,
  }, async () => {
    const r = await runFaultRun({ seed: 1, jobs: 60, profile: "before" })
    print(r)
    expect(r.faults.total(), "faults were injected").toBeGreaterThan(30)
    expect(r.violations, describeRun(r)).toEqual([])
  })
})

/** A runtime over a memory store with these fault rules, on a fake clock. */
function faulty(rules: ConstructorParameters<typeof Faults>[0]["rules"]) {
  const clock = new FakeClock()
  const faults = new Faults({ seed: 1, rules }, clock)
  const rt = createRuntime({
    store: faultyStore(MemoryStore(), faults),
    queue: MemoryQueue({ clock }),
    clock,
    logger: silentLogger,
    pepper: "p",
    secrets: { get: async () => "" },
  })
  return { rt, faults }
}

const isTask = (sk: string) => (args: readonly unknown[]) =>
  (args[0] as { sk?: string }).sk?.endsWith(sk) === true

/** Bugs the fault runs found that are fixed, each pinned by a small test of its own. */
describe("fixed: found by the fault runs", () => {
  test("a task write whose answer was lost is known for the write it was: the change gets its event, once", async () => {
    let lost = 1
    const { rt, faults } = faulty([
      {
        point: "store.update",
        kind: "error-after",
        rate: 1,
        when: ({ args }) => isTask("TASK#00000")(args) && lost-- > 0,
      },
    ])
    await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
    const job = await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"] }), "pool")
    const applied = await rt.transitions.jobs.applyReports(job, [
      { index: 0, outcome: { kind: "assigned", attemptUid: "a-0", workerId: "w" } },
    ])
    expect(faults.total()).toBe(1)
    expect(applied.moved).toBe(1)
    const events = (await rt.repos.events.ofJob("p", "job-1")).items
    expect(events.filter((e) => e.to === "ASSIGNED").map((e) => e.entity.id)).toEqual(["job-1/0"])
  })

  test("a submission retried after its first try created the job but failed before the event records `created` once", async () => {
    let failing = 1
    const { rt } = faulty([
      {
        point: "store.create",
        kind: "error",
        rate: 1,
        when: ({ args }) => (args[0] as { type?: string }).type === "event" && failing-- > 0,
      },
    ])
    await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
    const spec = JobSpec.parse({ command: ["true"] })
    // The event write is tried again at once (its id is made once): the first call already records it.
    await rt.transitions.jobs.create("p", "job-1", spec, "pool")
    await rt.transitions.jobs.create("p", "job-1", spec, "pool")
    const created = (await rt.repos.events.ofJob("p", "job-1")).items.filter((e) => e.reason === "created")
    expect(created).toHaveLength(1)
  })

  test("a task write that fails in a batch does not drop the events of the writes that landed, and the call fails", async () => {
    let failing = 1
    const { rt } = faulty([
      {
        point: "store.update",
        kind: "error",
        rate: 1,
        when: ({ args }) => isTask("TASK#00001")(args) && failing-- > 0,
      },
    ])
    await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
    const job = await rt.transitions.jobs.create(
      "p",
      "job-1",
      JobSpec.parse({ command: ["true"], tasks: 2 }),
      "pool",
    )
    await expect(
      rt.transitions.jobs.applyReports(
        job,
        [0, 1].map((index) => ({
          index,
          outcome: { kind: "assigned" as const, attemptUid: `a-${index}`, workerId: "w" },
        })),
      ),
    ).rejects.toThrow()
    const tasks = (await rt.repos.jobs.load("p", "job-1"))!.tasks.map((t) => t.data.state)
    expect(tasks).toEqual(["ASSIGNED", "PENDING"])
    const events = (await rt.repos.events.ofJob("p", "job-1")).items.filter((e) => e.to === "ASSIGNED")
    expect(events.map((e) => e.entity.id)).toEqual(["job-1/0"])
  })

  test("two passes that recount a job at the same moment record its end once (the one that lost the race records nothing)", async () => {
    const clock = new FakeClock()
    const rt = createRuntime({
      store: MemoryStore(),
      queue: MemoryQueue({ clock }),
      clock,
      logger: silentLogger,
      pepper: "p",
      secrets: { get: async () => "" },
    })
    await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
    const job = await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"] }), "pool")
    // The task ended, and the job was not recounted yet (its pass stopped before it could).
    const [task] = (await rt.repos.jobs.load("p", "job-1"))!.tasks
    await rt.repos.jobs.writeTasks(job, [{ task: { ...task!.data, state: "SUCCEEDED" }, prior: task! }])
    await Promise.all([
      rt.transitions.jobs.refresh("p", "job-1", "tasks_changed"),
      rt.transitions.jobs.refresh("p", "job-1", "tasks_changed"),
    ])
    expect((await rt.repos.jobs.get("p", "job-1"))?.status).toBe("SUCCEEDED")
    const ended = (await rt.repos.events.ofJob("p", "job-1")).items.filter((e) => e.to === "SUCCEEDED")
    expect(ended.map((e) => `${e.from} → ${e.to}`)).toEqual(["PENDING → SUCCEEDED"])
  })

  test("two cancels of a job at the same moment record one cancel request", async () => {
    const clock = new FakeClock()
    const rt = createRuntime({
      store: MemoryStore(),
      queue: MemoryQueue({ clock }),
      clock,
      logger: silentLogger,
      pepper: "p",
      secrets: { get: async () => "" },
    })
    await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
    await rt.transitions.jobs.create("p", "job-1", JobSpec.parse({ command: ["true"], tasks: 2 }), "pool")
    await Promise.all([rt.transitions.jobs.cancel("p", "job-1"), rt.transitions.jobs.cancel("p", "job-1")])
    const events = (await rt.repos.events.ofJob("p", "job-1")).items
    expect(events.filter((e) => e.reason === "cancel_requested")).toHaveLength(1)
    expect((await rt.repos.jobs.get("p", "job-1"))?.status).toBe("CANCELLED")
  })

  test.each([
    { kind: "independent tasks", gang: {} },
    { kind: "a gang", gang: { coscheduling: {} } },
  ])(
    "with no fault at all, a lost race on one task of a batch ($kind) keeps the events and the stops of the tasks whose writes landed",
    async ({ gang }) => {
      // Another writer changes task 1 once, just before the batch writes it (a heartbeat, say).
      let races = 1
      const { rt, faults } = faulty([
        {
          point: "store.update",
          kind: "race",
          rate: 1,
          when: ({ args }) => isTask("TASK#00001")(args) && races-- > 0,
        },
      ])
      await rt.repos.backends.put("p", "pool", BackendConfig.parse({ type: "workers" }))
      const job = await faults.quiet(() =>
        rt.transitions.jobs.create(
          "p",
          "job-1",
          JobSpec.parse({ command: ["true"], tasks: 2, ...gang }),
          "pool",
        ),
      )
      const both = (outcome: (index: number) => Outcome) =>
        [0, 1].map((index) => ({ index, outcome: outcome(index) }))
      await faults.quiet(() =>
        rt.transitions.jobs.applyReports(
          job,
          both((i) => ({ kind: "assigned", attemptUid: `a-${i}`, workerId: "w" })),
        ),
      )
      const killed = await rt.transitions.jobs.applyReports(
        job,
        both(() => ({ kind: "killed", reason: "cancelled" })),
      )
      expect(faults.total()).toBe(1)
      const kills = (await rt.repos.events.ofJob("p", "job-1")).items.filter((e) => e.to === "KILLED")
      expect(kills.map((e) => e.entity.id).sort()).toEqual(["job-1/0", "job-1/1"])
      expect(killed.stop.sort()).toEqual(["a-0", "a-1"])
      expect(killed.moved).toBe(2)
      // The job's recount saw the whole batch: both tasks ended.
      expect((await rt.repos.jobs.get("p", "job-1"))?.counts.KILLED).toBe(2)
    },
  )
})
