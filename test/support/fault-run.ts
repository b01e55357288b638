/**
 * One randomized fault run over the `workers` backend, in one process on a fake clock: the API (an
 * in-process app over the memory store and queue), two reconcile tickers that sometimes run two passes
 * at once, the schedule consumer, simulated users that submit a mix of jobs (and cancel some) and
 * retry with their Idempotency-Key, and simulated worker agents that run the attempts. Faults are
 * injected into the store, the queue and the backend seam for a while; then they stop, the plane is
 * given time to bring everything to rest, and the invariants (fault-checks.ts) are checked.
 *
 * A run is a pure function of its seed: `SWARMPLANE_FAULT_SEED=<seed>` replays one in the test.
 */
import { createApp } from "@swarmplane/core/api/app"
import { createBackend } from "@swarmplane/core/backends/registry"
import { reconcilePass } from "@swarmplane/core/control/reconcile"
import { handleScheduleBatch } from "@swarmplane/core/control/schedule"
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { Job } from "@swarmplane/core/model/job"
import { isFinished } from "@swarmplane/core/model/states"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime } from "@swarmplane/core/runtime"
import { Repos } from "@swarmplane/core/store/index"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { FakeClock } from "@swarmplane/core/util/clock"
import type { Logger } from "@swarmplane/core/util/logger"
import { checkInvariants, History, recordingStore, type Violation, violationLines } from "./fault-checks"
import { type Answer, call, retryable, Sim, SimWorker, Substrate } from "./fault-sim"
import { faultPlan, jobMix, type Profile } from "./fault-workload"
import { Faults, faultyBackend, faultyQueue, faultyStore, Rng } from "./faults"

export { type Profile, Profiles } from "./fault-workload"

export interface FaultRunOptions {
  seed: number
  /** Jobs submitted (default 200). */
  jobs?: number
  /** Simulated workers, 4 CPUs each (default 8). */
  workers?: number
  profile?: Profile
  /** Multiplies every fault rate (default 1). */
  scale?: number
  /** Workers crash now and then (and a new one takes each one's place). Default true. */
  crashes?: boolean
  /** Some jobs are `interactive` and preempt `batch` ones. Default false. */
  preemption?: boolean
  /** Clock time over which jobs arrive (default 0.6 s per job); faults last a minute longer. */
  arrivalMs?: number
  /** Record where every job and task write came from, and name it in an `events` violation (slower). */
  trace?: boolean
}

export interface FaultRunResult {
  seed: number
  profile: Profile
  jobs: number
  byStatus: Record<string, number>
  /** Attempts the simulated workers started. */
  runs: number
  /** Attempts the control plane ended while they ran (gang retries, preemptions, kills of running ones). */
  endedWhileRunning: number
  passes: { ran: number; skipped: number; failed: number }
  heartbeats: { ok: number; failed: number }
  /** Simulated seconds, and wall-clock milliseconds the run took. */
  simulatedS: number
  wallMs: number
  faults: Faults
  violations: Violation[]
  /** Unexpected errors the plane logged as `error` (the first few). */
  errors: string[]
  /** An entity's story (`task:<job>/<index>` or `job:<id>`): its versions as written, its events, its runs. */
  inspect(entity: string): Promise<string[]>
}

/** A logger that keeps counts and the first few errors, not every line (a soak logs millions). */
function countingLogger(): Logger & { errors: string[] } {
  const errors: string[] = []
  return {
    errors,
    debug() {},
    info() {},
    warn() {},
    error(message, fields) {
      if (errors.length < 20) errors.push(`${message} ${JSON.stringify(fields ?? {}).slice(0, 300)}`)
    },
  }
}

export async function runFaultRun(options: FaultRunOptions): Promise<FaultRunResult> {
  const wallStart = Date.now()
  const { seed } = options
  const profile = options.profile ?? "full"
  const count = options.jobs ?? 200
  const rng = new Rng(seed ^ 0x5eed)
  const clock = new FakeClock()
  const start = clock.now()
  const faults = new Faults(faultPlan(seed, profile, options.scale), clock)
  const history = new History(options.trace ?? false)
  const base = MemoryStore()
  const logger = countingLogger()
  const store = faultyStore(recordingStore(base, history), faults)
  const queue = faultyQueue(MemoryQueue({ clock }), faults)
  const rt = createRuntime({
    store,
    queue,
    clock,
    logger,
    pepper: "fault-pepper",
    secrets: { get: async () => "" },
  })
  const app = createApp(rt)
  const fetch = (path: string, init: RequestInit) => app.request(path, init)
  const project = "default"
  const { key } = await faults.quiet(async () => {
    await rt.repos.projects.create(project)
    await rt.repos.backends.put(project, "pool", BackendConfig.parse({ type: "workers" }))
    return rt.repos.projects.createKey(project, "admin")
  })

  const sim = new Sim(clock, faults)
  const substrate = new Substrate()
  const workers: SimWorker[] = []
  let live = true
  const fatal: string[] = []
  const spawn = (name: string) => {
    const worker = new SimWorker({ sim, rng, fetch, key, backendId: "pool", substrate, name, cpu: 4 })
    workers.push(worker)
    void worker.loop().catch((e) => fatal.push(`${name}: ${e instanceof Error ? e.message : e}`))
    return worker
  }
  for (let i = 0; i < (options.workers ?? 8); i++) spawn(`w${i}`)

  // Two tickers (two cron invocations that overlap), each sometimes running two passes at once.
  const passes = { ran: 0, skipped: 0, failed: 0 }
  const pass = async (owner: string) => {
    try {
      for (const record of await rt.repos.backends.listAll()) {
        const backend = faultyBackend(await createBackend(record, rt), faults)
        const report = await reconcilePass(rt, record, owner, backend).finally(() => backend.close())
        if (!report.ran) passes.skipped++
        else if (report.error) passes.failed++
        else passes.ran++
      }
    } catch {
      passes.failed++
    }
  }
  let owners = 0
  const ticker = async (phase: number) => {
    await sim.wait(phase)
    while (live) {
      if (rng.chance(0.2)) await Promise.all([pass(`tick-${owners++}`), pass(`tick-${owners++}`)])
      else await pass(`tick-${owners++}`)
      await sim.wait(2_000 + rng.int(0, 500))
    }
  }
  void ticker(0)
  void ticker(1_100)
  // The schedule consumer, as the local plane runs it: receive, handle, delete what need not be retried.
  void (async () => {
    while (live) {
      await sim.wait(1_000 + rng.int(0, 200))
      try {
        const messages = await queue.receive({ max: 10, visibilityS: 30 })
        if (!messages.length) continue
        const { retry } = await handleScheduleBatch(rt, messages)
        await queue.delete(messages.filter((m) => !retry.includes(m.id)).map((m) => m.receipt))
      } catch {}
    }
  })()

  // Users: submit with an Idempotency-Key, retried until answered; cancel some a while later.
  const arrivalMs = options.arrivalMs ?? count * 600
  const planned = jobMix(rng, count, arrivalMs, options.preemption ?? false)
  const expected = new Map<string, Job["status"] | undefined>()
  let answered = 0
  const until = async (what: () => Promise<Answer>) => {
    for (let tries = 1; ; tries++) {
      const a = await what()
      if (!retryable(a) || !live) return a
      await sim.wait(Math.min(30_000, 500 * 2 ** Math.min(tries, 6)) + rng.int(0, 500))
    }
  }
  for (const job of planned)
    void (async () => {
      await sim.at(start + job.arrivalMs)
      const idem = `submit-${seed}-${job.n}`
      const a = await until(() =>
        call(sim, fetch, key, "POST", "/v1/jobs", job.body, { "Idempotency-Key": idem }),
      )
      answered++
      if (a.status !== 202) {
        fatal.push(`job ${job.n}: submission answered ${a.status} ${JSON.stringify(a.json)}`)
        return
      }
      const id = (a.json as { id: string }).id
      expected.set(id, job.expect)
      if (job.cancelAfterMs === undefined) return
      await sim.wait(job.cancelAfterMs)
      const c = await until(() => call(sim, fetch, key, "POST", `/v1/jobs/${id}/cancel`))
      if (c.status !== 202 && c.status !== 200) fatal.push(`job ${id}: cancel answered ${c.status}`)
    })()

  // Workers crash now and then while the faults last; a new one starts in each one's place.
  const faultUntil = start + arrivalMs + 60_000
  if (options.crashes ?? true)
    void (async () => {
      let replacements = 0
      for (;;) {
        await sim.wait(rng.int(20_000, 90_000))
        if (sim.now > faultUntil) return
        const alive = workers.filter((w) => !w.crashed && !w.stopped)
        rng.pick(alive).crash()
        await sim.wait(rng.int(5_000, 40_000))
        spawn(`r${replacements++}`)
      }
    })()

  // Faults while jobs arrive and a minute after; then none, and time for the plane to finish.
  await sim.runUntil(() => fatal.length > 0, faultUntil)
  faults.stop()
  const clean = Repos(base, clock, logger, "fault-pepper")
  let done = false
  void (async () => {
    while (!done) {
      await sim.wait(10_000)
      if (answered < count || faults.hanging()) continue
      const statuses = await Promise.all([...expected.keys()].map((id) => clean.jobs.get(project, id)))
      const ended = statuses.every((j) => j && isFinished(j.status))
      // At rest: every job ended, and no worker still runs anything (stops were delivered).
      if (ended && workers.every((w) => w.crashed || w.runningRuns().length === 0)) done = true
    }
  })()
  await sim.runUntil(() => done || fatal.length > 0, sim.now + 30 * 60_000)
  // A little longer at rest, so every stop and last report has been through a heartbeat.
  await sim.runUntil(() => fatal.length > 0, sim.now + 30_000)
  live = false
  for (const w of workers) w.stopped = true

  const violations = await checkInvariants({
    repos: clean,
    project,
    history,
    substrate,
    expected,
    submissions: count,
    now: sim.now,
    leftoverGraceMs: 60_000,
  })
  for (const f of fatal) violations.push({ invariant: "outcome", subject: "simulation", detail: f })
  const jobs = await clean.jobs.list(project, { limit: 1000 })
  const byStatus: Record<string, number> = {}
  for (const j of jobs.items) byStatus[j.status] = (byStatus[j.status] ?? 0) + 1
  // Attempts the control plane ended while their run went on (the substrate stopped them after).
  let endedWhileRunning = 0
  for (const j of jobs.items)
    for (const t of (await clean.jobs.load(project, j.id))?.tasks ?? [])
      endedWhileRunning += t.data.attempts.filter(
        (a) => a.reason === "gang_retry" || a.state === "PREEMPTED" || (a.state === "KILLED" && a.startedAt),
      ).length
  return {
    endedWhileRunning,
    seed,
    profile,
    jobs: count,
    byStatus,
    runs: substrate.runs.length,
    passes,
    heartbeats: workers.reduce((s, w) => ({ ok: s.ok + w.beats.ok, failed: s.failed + w.beats.failed }), {
      ok: 0,
      failed: 0,
    }),
    simulatedS: Math.round((sim.now - start) / 1000),
    wallMs: Date.now() - wallStart,
    faults,
    violations,
    errors: logger.errors,
    async inspect(entity) {
      const [kind, id = ""] = entity.split(":")
      const jobId = id.split("/")[0]!
      const events = (await clean.events.ofJob(project, jobId, { limit: 1000 })).items
        .filter((e) => e.entity.kind === kind && e.entity.id === id)
        .map(
          (e) =>
            `event ${e.at.slice(11, 23)} ${e.from ?? "∅"} → ${e.to} (${e.reason}${e.message ? `: ${e.message}` : ""})`,
        )
      const runs = substrate.runs
        .filter((r) => kind === "task" && `${r.jobId}/${r.index}` === id)
        .map(
          (r) =>
            `run ${r.attemptUid} on ${r.workerId} ${new Date(r.startedAt).toISOString().slice(11, 23)}–${r.endedAt === undefined ? "" : new Date(r.endedAt).toISOString().slice(11, 23)} ${r.how ?? "running"}${r.exitCode ? ` exit ${r.exitCode}` : ""}`,
        )
      const job = await clean.jobs.load(project, jobId)
      const task = job?.tasks.find((t) => `${jobId}/${t.data.index}` === id)?.data
      const attempts = (task?.attempts ?? []).map(
        (a) => `attempt ${a.attemptUid} ${a.state} on ${a.workerId}${a.reason ? ` (${a.reason})` : ""}`,
      )
      return [
        `${job?.job.data.spec.name ?? ""}`,
        ...history.versions(entity),
        ...events,
        ...attempts,
        ...runs,
      ]
    },
  }
}

/** A run's result in a few lines: what ran, what was injected, what broke. */
export function describeRun(r: FaultRunResult): string {
  const status = Object.entries(r.byStatus)
    .map(([s, n]) => `${n} ${s}`)
    .join(", ")
  const lines = [
    `seed ${r.seed} (${r.profile}): ${r.jobs} jobs (${status}), ${r.runs} attempts run, ${r.passes.ran} passes (${r.passes.skipped} found the lease taken, ${r.passes.failed} failed), ${r.heartbeats.ok} heartbeats (${r.heartbeats.failed} failed), ${r.simulatedS} s simulated in ${r.wallMs} ms`,
    r.faults.summary(),
  ]
  if (r.violations.length)
    lines.push(
      `${r.violations.length} invariant violations (replay: SWARMPLANE_FAULT_SEED=${r.seed} SWARMPLANE_FAULT_PROFILE=${r.profile}):`,
      ...violationLines(r.violations),
    )
  return lines.join("\n")
}
