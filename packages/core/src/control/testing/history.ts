/**
 * Planes for measuring what a reconcile pass reads, for tests and benchmarks: a workers backend with
 * running work (`busyPlane`), churn in it between passes (`failSome`), and a long finished history
 * beside it (`seedHistory`). The history is the items real finished jobs leave: one job is run to the
 * end through the transitions and a pass, and its items are copied under other job ids and written in
 * batches, so 100,000 finished tasks take seconds rather than 100,000 real runs.
 */
import { type Backend, BackendConfig } from "../../model/backend"
import { JobSpec } from "../../model/job"
import type { Runtime } from "../../runtime"
import { countingStore } from "../../store/counting"
import { MemoryStore } from "../../store/memory"
import type { Key, NewItem, StateStore, StoredItem } from "../../store/port"
import { FakeClock } from "../../util/clock"
import { type PassReport, reconcilePass } from "../reconcile"
import { memoryRuntime } from "./runtime"

export const Project = "p"
export const BackendId = "pool"
export const TasksPerJob = 10

/** A reconcile pass: this one, or an older one a benchmark compares it with. */
export type Pass = (rt: Runtime, backend: Backend, owner: string) => Promise<PassReport>

export interface BusyPlane {
  rt: Runtime
  clock: FakeClock
  /** Counts what goes through the runtime's store (the base store is written around it). */
  counter: ReturnType<typeof countingStore<StateStore>>
  running: { jobId: string; index: number; attemptUid: string }[]
  /** The base store, for writes that should not be counted (seeding history). */
  base: StateStore
}

function runtimeOver(store: StateStore, clock: FakeClock): Runtime {
  return memoryRuntime({ store, clock }).rt
}

const spec = JobSpec.parse({
  command: ["true"],
  tasks: TasksPerJob,
  resources: { cpu: 1, memoryMiB: 1 },
  maxRetriesFailure: 100,
})

async function startWorkers(rt: Runtime, n: number): Promise<void> {
  await rt.repos.backends.put(Project, BackendId, BackendConfig.parse({ type: "workers" }))
  for (let w = 0; w < n; w++)
    await rt.repos.workers.register(Project, {
      backendId: BackendId,
      resources: { cpu: 1000, memoryMiB: 1_000_000, gpu: 0 },
      attributes: {},
    })
}

/**
 * A workers backend with `tasks` tasks in jobs of `TasksPerJob`, all RUNNING (one worker per 100),
 * after passes that left nothing to settle. `pass` is the pass to set it up with (the bench compares
 * an older one).
 */
export async function busyPlane(
  base: StateStore,
  tasks: number,
  pass: Pass = (rt, backend, owner) => reconcilePass(rt, backend, owner),
  jobPrefix = "job",
): Promise<BusyPlane> {
  const counter = countingStore(base)
  const clock = new FakeClock()
  const rt = runtimeOver(counter.store, clock)
  await startWorkers(rt, Math.ceil(tasks / 100))
  for (let j = 0; j < tasks / TasksPerJob; j++)
    await rt.transitions.jobs.create(Project, `${jobPrefix}-${j}`, spec, BackendId)
  const backend = async () => (await rt.repos.backends.get(Project, BackendId))!
  await pass(rt, await backend(), "setup")
  // Every placed task starts, as its worker's first heartbeat says.
  const running: BusyPlane["running"] = []
  for (let j = 0; j < tasks / TasksPerJob; j++) {
    const { job, tasks: items } = (await rt.repos.jobs.load(Project, `${jobPrefix}-${j}`))!
    const reports = items.map((t) => ({
      index: t.data.index,
      outcome: { kind: "running" as const, attemptUid: t.data.attempts.at(-1)!.attemptUid },
    }))
    await rt.transitions.jobs.applyReports(job.data, reports)
    for (const t of items)
      running.push({
        jobId: job.data.id,
        index: t.data.index,
        attemptUid: t.data.attempts.at(-1)!.attemptUid,
      })
  }
  await pass(rt, await backend(), "setup")
  return { rt, clock, counter, running, base }
}

/**
 * Fail `n` running tasks, spread over the jobs, as their workers' heartbeats would report it; then
 * let their retry backoff pass (the workers heartbeat meanwhile), so the next pass places them again.
 */
export async function failSome(p: BusyPlane, n: number): Promise<void> {
  if (n) {
    const step = Math.max(1, Math.floor(p.running.length / n))
    const picked = p.running.filter((_, i) => i % step === 0).slice(0, n)
    p.running = p.running.filter((t) => !picked.includes(t))
    for (const t of picked) {
      const job = (await p.rt.repos.jobs.get(Project, t.jobId))!
      await p.rt.transitions.jobs.applyReports(job, [
        {
          index: t.index,
          outcome: { kind: "failed", attemptUid: t.attemptUid, reason: "exit_code", exitCode: 1 },
        },
      ])
    }
  }
  p.clock.advance(3_000)
  for (const w of await p.rt.repos.workers.list(Project, BackendId))
    await p.rt.repos.workers.heartbeat(Project, w.id)
}

const TemplateId = "job-history-template"

/**
 * The items one job of `TasksPerJob` tasks leaves when it has run to the end (each task ASSIGNED,
 * RUNNING, SUCCEEDED as its worker reported it, the job settled by a pass): the job, its tasks and
 * their events, as stored. Run on a store of its own.
 */
export async function finishedJobItems(): Promise<StoredItem[]> {
  const written = new Map<string, Key>()
  const note = (item: Key) => written.set(`${item.pk}\n${item.sk}`, { pk: item.pk, sk: item.sk })
  const memory = MemoryStore()
  const watched: StateStore = {
    ...memory,
    create(item) {
      note(item)
      return memory.create(item)
    },
    createMany(items) {
      for (const item of items) note(item)
      return memory.createMany(items)
    },
    update(item) {
      note(item)
      return memory.update(item)
    },
  }
  const clock = new FakeClock()
  const rt = runtimeOver(watched, clock)
  await startWorkers(rt, 1)
  await rt.transitions.jobs.create(Project, TemplateId, spec, BackendId)
  const pass = async () => reconcilePass(rt, (await rt.repos.backends.get(Project, BackendId))!, "template")
  await pass()
  for (const kind of ["running", "succeeded"] as const) {
    const { job, tasks } = (await rt.repos.jobs.load(Project, TemplateId))!
    await rt.transitions.jobs.applyReports(
      job.data,
      tasks.map((t) => {
        const attemptUid = t.data.attempts.at(-1)!.attemptUid
        return {
          index: t.data.index,
          outcome: kind === "running" ? { kind, attemptUid } : { kind, attemptUid, exitCode: 0 },
        }
      }),
    )
    clock.advance(1_000)
  }
  await pass()
  const items = (await memory.getMany([...written.values()])).filter((i) =>
    JSON.stringify(i).includes(TemplateId),
  )
  const left = items.filter((i) => i.active)
  if (left.length) throw new Error(`a finished job left ${left.length} items in the active index`)
  return items
}

/**
 * Write `jobs` finished jobs (ids `<prefix>-<n>`) into `store`, copies of `template` in batches: the
 * history a pass must not read.
 */
export async function seedHistory(
  store: StateStore,
  template: readonly StoredItem[],
  jobs: number,
  prefix: string,
): Promise<number> {
  const text = template.map(({ version: _, ...item }) => JSON.stringify(item))
  const PerCall = 250
  let written = 0
  for (let from = 0; from < jobs; from += PerCall) {
    const batch: NewItem[] = []
    for (let n = from; n < Math.min(jobs, from + PerCall); n++)
      for (const t of text) batch.push(JSON.parse(t.replaceAll(TemplateId, `${prefix}-${n}`)))
    await store.createMany(batch)
    written += batch.length
  }
  return written
}
