/**
 * The invariants a fault run must keep, checked against what the store holds and what the simulated
 * workers did:
 *   terminal    every job ends (SUCCEEDED, FAILED or CANCELLED) once the faults stop, and no task still
 *               waits for its substrate to confirm an ended attempt stopped;
 *   outcome     and ends as its spec and its user say (a task that fails fewer times than its retries
 *               allow succeeds; a cancelled job is CANCELLED); no submission made two jobs;
 *   budget      no task took more attempts than its budgets allow, every attempt a worker ran is one the
 *               control plane minted for that task, none started twice, none while an earlier one lives;
 *   concurrent  no two attempts of one task ran at once (from a start to its exit or kill);
 *   leftover    nothing runs on the substrate much longer than a heartbeat after the store ended its
 *               attempt, and what runs at the end is the current attempt of a live task of a live job;
 *   events      every state change of a job or task has its event, and every event a change: the
 *               history of each item's states (every version written, recorded under the store) against
 *               the events in the job's partition.
 */
import type { Job, Task } from "@swarmplane/core/model/job"
import { isFinished, isLive } from "@swarmplane/core/model/states"
import type { Repos } from "@swarmplane/core/store/index"
import type { StateStore, StoredItem } from "@swarmplane/core/store/port"
import type { Substrate } from "./fault-sim"

export const Invariants = ["terminal", "outcome", "budget", "concurrent", "leftover", "events"] as const
export type Invariant = (typeof Invariants)[number]

export interface Violation {
  invariant: Invariant
  /** The job, task (`<job>/<index>`) or attempt it is about. */
  subject: string
  detail: string
}

const jobIdOf = (pk: string) => pk.slice(pk.indexOf("#JOB#") + 5)

/** Every version of every job and task item written, by entity (`job:<id>`, `task:<job>/<index>`). */
export class History {
  private readonly states = new Map<string, Map<number, string>>()
  /** With `trace`: where each version was written from (`<entity>@<version>` → the core frames of its stack). */
  private readonly whence = new Map<string, string>()
  constructor(readonly trace = false) {}

  /** Where a write is called from, when traced: taken before the write's first await. */
  caller(): string | undefined {
    return this.trace ? new Error().stack : undefined
  }

  record(item: Pick<StoredItem, "pk" | "type" | "version" | "data">, stack?: string): void {
    let entity: string | undefined
    let state: string | undefined
    if (item.type === "task") {
      const task = item.data as Task
      entity = `task:${jobIdOf(item.pk)}/${task.index}`
      state = task.state
    } else if (item.type === "job") {
      const job = item.data as Job
      entity = `job:${job.id}`
      state = job.status
    }
    if (!entity || !state) return
    const versions = this.states.get(entity) ?? new Map()
    versions.set(item.version, state)
    this.states.set(entity, versions)
    if (this.trace)
      this.whence.set(
        `${entity}@${item.version}`,
        (stack ?? "")
          .split("\n")
          .filter((l) => l.includes("packages/core/src") && !l.includes("/store/"))
          .map((l) =>
            l
              .trim()
              .replace(/^at (async )?/, "")
              .replace(/ \(.*packages\/core\/src\//, " (")
              .replace(/:\d+\)$/, ")"),
          )
          .slice(0, 8)
          .join(" < "),
      )
  }

  /** Where the write that made `change` (as `changes` names it) came from, when traced. */
  from(entity: string, change: string): string | undefined {
    const versions = this.states.get(entity)
    if (!versions || !this.trace) return undefined
    const sorted = [...versions.entries()].sort((a, b) => a[0] - b[0])
    const found: string[] = []
    for (let i = 1; i < sorted.length; i++)
      if (`${sorted[i - 1]![1]}>${sorted[i]![1]}` === change)
        found.push(`v${sorted[i]![0]}: ${this.whence.get(`${entity}@${sorted[i]![0]}`)}`)
    if (change.startsWith("∅>")) found.push(`v1: ${this.whence.get(`${entity}@1`)}`)
    return found.join("; ")
  }

  /** An entity's state changes, `<from>><to>` (`∅>PENDING` for a job's creation), and any gap in its versions. */
  changes(entity: string): { changes: string[]; gap?: number } {
    const versions = this.states.get(entity)
    if (!versions) return { changes: [] }
    const sorted = [...versions.entries()].sort((a, b) => a[0] - b[0])
    const changes: string[] = []
    if (entity.startsWith("job:") && sorted[0]?.[0] === 1) changes.push(`∅>${sorted[0][1]}`)
    for (let i = 1; i < sorted.length; i++) {
      const [v, state] = sorted[i]!
      const [pv, prior] = sorted[i - 1]!
      if (v !== pv + 1) return { changes, gap: pv + 1 }
      if (state !== prior) changes.push(`${prior}>${state}`)
    }
    return { changes }
  }

  /** Every version of an entity: `v<n> <state>` and, when traced, where it was written from. */
  versions(entity: string): string[] {
    return [...(this.states.get(entity)?.entries() ?? [])]
      .sort((a, b) => a[0] - b[0])
      .map(([v, state]) => `v${v} ${state}${this.trace ? ` [${this.whence.get(`${entity}@${v}`)}]` : ""}`)
  }

  entities(): string[] {
    return [...this.states.keys()]
  }
}

/** The store as written: every successful write of a job or task is recorded, with its version. */
export function recordingStore(store: StateStore, history: History): StateStore {
  return {
    get: (key, options) => store.get(key, options),
    getMany: (keys) => store.getMany(keys),
    query: (pk, options) => store.query(pk, options),
    queryIndex: (index, pk, options) => store.queryIndex(index, pk, options),
    delete: (key, version) => store.delete(key, version),
    async create(item) {
      const stack = history.caller()
      const stored = await store.create(item)
      history.record(stored, stack)
      return stored
    },
    async createMany(items) {
      const stack = history.caller()
      await store.createMany(items)
      for (const item of items) history.record({ ...item, version: 1 }, stack)
    },
    async update(item) {
      const stack = history.caller()
      const stored = await store.update(item)
      history.record(stored, stack)
      return stored
    },
  }
}

/** Every item of an index partition or partition, following cursors. */
async function all<T>(page: (cursor?: string) => Promise<{ items: T[]; cursor?: string }>): Promise<T[]> {
  const out: T[] = []
  let cursor: string | undefined
  do {
    const p = await page(cursor)
    out.push(...p.items)
    cursor = p.cursor
  } while (cursor)
  return out
}

export interface CheckInput {
  repos: Repos
  project: string
  history: History
  /** What ran on the substrate: the simulated workers' runs, or what Slurm reports. */
  substrate: Substrate
  /** The jobs the simulated users submitted (id → the status they must end in; undefined: any end). */
  expected: ReadonlyMap<string, Job["status"] | undefined>
  /** Jobs the users meant to submit (a submission that made no job, or two, breaks `outcome`). */
  submissions: number
  /** Clock time of the check. */
  now: number
  /** How long after the store ended an attempt its run may go on (its worker learns at a heartbeat). */
  leftoverGraceMs: number
}

export async function checkInvariants(input: CheckInput): Promise<Violation[]> {
  const { repos, project, history, substrate } = input
  const out: Violation[] = []
  const v = (invariant: Invariant, subject: string, detail: string) =>
    out.push({ invariant, subject, detail })
  const jobs = await all((cursor) => repos.jobs.list(project, { limit: 100, ...(cursor ? { cursor } : {}) }))
  if (jobs.length !== input.submissions)
    v("outcome", project, `${input.submissions} jobs submitted, ${jobs.length} in the store`)
  const tasksOf = new Map<string, StoredItem<Task>[]>()
  /** Events of jobs and tasks that record a change, by entity, as `<from>><to>`. */
  const recorded = new Map<string, string[]>()
  for (const job of jobs) {
    const loaded = await repos.jobs.load(project, job.id)
    const tasks = loaded?.tasks ?? []
    tasksOf.set(job.id, tasks)
    if (!isFinished(job.status))
      v("terminal", job.id, `still ${job.status} (${JSON.stringify(job.counts)}), tasks ${states(tasks)}`)
    if (!input.expected.has(job.id)) v("outcome", job.id, "a job no user submission answered with")
    const want = input.expected.get(job.id)
    if (want && job.status !== want)
      v("outcome", job.id, `ended ${job.status}, expected ${want}; tasks ${states(tasks)}`)
    if (tasks.length !== job.spec.tasks)
      v("outcome", job.id, `${tasks.length} tasks stored of ${job.spec.tasks}`)
    for (const t of tasks) budget(job, t.data, v)
    for (const t of tasks)
      if (t.data.stopping)
        v(
          "terminal",
          `${job.id}/${t.data.index}`,
          `still waits for its substrate to confirm attempt ${t.data.stopping.attemptUid} stopped (since ${t.data.stopping.since}; task ${t.data.state})`,
        )
    const list = await all((c) =>
      repos.events.ofJob(project, job.id, { limit: 200, ...(c ? { cursor: c } : {}) }),
    )
    for (const e of list) {
      if ((e.entity.kind !== "job" && e.entity.kind !== "task") || e.from === e.to) continue
      const key = `${e.entity.kind}:${e.entity.id}`
      recorded.set(key, [...(recorded.get(key) ?? []), `${e.from ?? "∅"}>${e.to}`])
    }
  }
  for (const entity of new Set([...history.entities(), ...recorded.keys()])) {
    const { changes, gap } = history.changes(entity)
    if (gap) v("events", entity, `version ${gap} was written without the store seeing it`)
    const missing = [...changes]
    const extra: string[] = []
    for (const e of recorded.get(entity) ?? []) {
      const i = missing.indexOf(e)
      if (i >= 0) missing.splice(i, 1)
      else extra.push(e)
    }
    if (missing.length)
      v(
        "events",
        entity,
        `state changes without an event: ${missing.map((m) => (history.trace ? `${m} [${history.from(entity, m)}]` : m)).join(", ")}`,
      )
    if (extra.length) v("events", entity, `events without a state change: ${extra.join(", ")}`)
  }

  // Runs the workers made, against the tasks as stored.
  for (const uid of substrate.startedTwice) v("budget", uid, "an attempt was started twice")
  for (const run of substrate.runs) {
    const task = tasksOf.get(run.jobId)?.find((t) => t.data.index === run.index)?.data
    const attempt = task?.attempts.find((a) => a.attemptUid === run.attemptUid)
    if (!attempt)
      v(
        "budget",
        `${run.jobId}/${run.index}`,
        `worker ${run.workerId} ran ${run.attemptUid}, not an attempt of this task`,
      )
    // Once the store has ended an attempt (its job ended, it was killed, preempted, retried), the
    // substrate stops it soon (a worker at its next heartbeat, Slurm in the pass's stops), and what
    // still runs at the end is the current attempt of a live task of a job that goes on.
    const job = jobs.find((j) => j.id === run.jobId)
    const current = task && isLive(task.state) ? task.attempts.at(-1)?.attemptUid : undefined
    const ended = attempt?.finishedAt ? Date.parse(attempt.finishedAt) : undefined
    const late = ended !== undefined && (run.endedAt ?? input.now) - ended > input.leftoverGraceMs
    const stray = run.endedAt === undefined && (!job || isFinished(job.status) || current !== run.attemptUid)
    if (late || stray)
      out.push({
        invariant: "leftover",
        subject: `${run.jobId}/${run.index}`,
        detail: `attempt ${run.attemptUid} ${run.endedAt === undefined ? "still runs" : "ran"} on ${run.workerId}${ended !== undefined ? ` ${Math.round(((run.endedAt ?? input.now) - ended) / 1000)} s after the store ended it ${attempt?.state} (${attempt?.reason ?? ""})` : ""} (job ${job?.status}, task ${task?.state})`,
      })
  }
  for (const o of substrate.overlaps) {
    const [jobId = "", index] = o.task.split("/")
    const attempts = tasksOf.get(jobId)?.find((t) => String(t.data.index) === index)?.data.attempts ?? []
    const earlier = attempts.filter((a) => o.uids.slice(0, -1).includes(a.attemptUid))
    out.push({
      invariant: "concurrent",
      subject: o.task,
      detail: `attempts ${o.uids.join(" and ")} ran at once (from ${new Date(o.at).toISOString()}; the earlier ended ${earlier.map((a) => `${a.state} ${a.reason ?? ""}`).join(", ")})`,
    })
  }
  return out
}

function states(tasks: StoredItem<Task>[]): string {
  return tasks.map((t) => `${t.data.index}:${t.data.state}`).join(" ")
}

function budget(job: Job, task: Task, v: (i: Invariant, s: string, d: string) => void): void {
  const subject = `${job.id}/${task.index}`
  const { maxRetriesFailure, maxRetriesPreemption } = job.spec
  if (task.failureCount > maxRetriesFailure + 1)
    v("budget", subject, `failed ${task.failureCount} times with maxRetriesFailure ${maxRetriesFailure}`)
  if (task.preemptionCount > maxRetriesPreemption + 1)
    v(
      "budget",
      subject,
      `preempted ${task.preemptionCount} times with maxRetriesPreemption ${maxRetriesPreemption}`,
    )
  const failed = task.attempts.filter((a) => a.state === "FAILED").length
  if (task.attempts.length < 50 && failed !== task.failureCount)
    v("budget", subject, `${failed} attempts ended FAILED, failureCount says ${task.failureCount}`)
  for (const a of task.attempts.slice(0, -1))
    if (a.state === "ASSIGNED" || a.state === "BUILDING" || a.state === "RUNNING")
      v("budget", subject, `attempt ${a.attemptUid} is still ${a.state} while a later one exists`)
  const uids = new Set(task.attempts.map((a) => a.attemptUid))
  if (uids.size !== task.attempts.length) v("budget", subject, "an attemptUid appears twice in its attempts")
}

/**
 * Violations as lines, `[invariant] subject: detail`: all of them but events, then the
 * first few events and how many more (under store faults they are many, and all the same bug).
 */
export function violationLines(violations: readonly Violation[], events = 8): string[] {
  const line = (v: Violation) => `  [${v.invariant}] ${v.subject}: ${v.detail}`
  const other = violations.filter((v) => v.invariant !== "events")
  const missing = violations.filter((v) => v.invariant === "events")
  return [
    ...other.slice(0, 60).map(line),
    ...(other.length > 60 ? [`  ... and ${other.length - 60} more`] : []),
    ...missing.slice(0, events).map(line),
    ...(missing.length > events ? [`  ... and ${missing.length - events} more events violations`] : []),
  ]
}
