/**
 * How API objects look in table output: swarms, jobs, tasks, events. JSON and YAML output print the
 * API objects themselves; these views are only for people.
 */
import type { Event, Job, JobDetail, Swarm, Task } from "./client"
import { age, bar, block, type Cell, clock, type Paint, state, table } from "./output"

export function swarmTable(p: Paint, swarms: Swarm[]): string {
  return table(
    p,
    ["name", "phase", "ready", "model", "backend", "url", "age"],
    swarms.map((s) => [
      s.name,
      state(p, s.desired === "deleted" && s.phase !== "STOPPED" ? `${s.phase} (deleting)` : s.phase),
      `${s.replicaStatus.ready}/${s.replicaStatus.total}`,
      s.model,
      s.backendId,
      s.url,
      age(s.createdAt),
    ]),
  )
}

export function swarmSummary(p: Paint, s: Swarm): string {
  return block(p, swarmPairs(p, s))
}

export function swarmPairs(p: Paint, s: Swarm): [string, Cell][] {
  return [
    ["Name", s.name],
    [
      "Phase",
      `${state(p, s.phase)}${s.observedGeneration !== s.generation && s.phase !== "STOPPED" ? " (applying a change)" : ""}`,
    ],
    ["Desired", s.desired],
    ["Ready", `${s.replicaStatus.ready}/${s.replicaStatus.total} replicas`],
    ["Endpoint", s.url],
    ["Model", s.model],
    ["Backend", s.backendId],
    ["Message", s.message],
    ["Last rollout step", s.replicaSet?.lastChange],
    ["Autoscaler", autoscalerLine(s)],
    [
      "Last wake",
      s.autoscaler?.wake?.seconds !== undefined
        ? `${s.autoscaler.wake.seconds.toFixed(1)} s from a request to a replica serving (${s.autoscaler.wake.requestedAt})`
        : undefined,
    ],
    ["Updated", `${s.updatedAt} (${age(s.updatedAt)} ago)`],
  ]
}

/** With `autoscaling`: the count decided, its range, the load read, and the last decision. */
function autoscalerLine(s: Swarm): string | undefined {
  const a = s.autoscaling
  if (!a) return undefined
  const st = s.autoscaler
  const ttft = (v: number | null | undefined) =>
    v === undefined ? "" : `, first token p99 ${v === null ? "> 120" : `≤ ${v}`} s`
  const reading = st?.reading
    ? `; load ${st.reading.inFlight} in flight${ttft(st.reading.ttftP99S)} (wants ${st.reading.wanted})`
    : "; no load reading yet"
  const last = st?.decisions.at(-1)
  const target =
    a.targetFirstTokenP99S !== undefined
      ? `target ${a.targetInflightPerReplica} in flight each, first token p99 under ${a.targetFirstTokenP99S} s`
      : `target ${a.targetInflightPerReplica} in flight each`
  return `${st?.replicas ?? "?"} replicas (${a.minReplicas}–${a.maxReplicas}, ${target})${reading}${last ? `; last: ${last.reason} (${last.at})` : ""}`
}

/** argv as a shell would need it typed, for display. */
export function shellLine(argv: string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(" ")
}

/** The one-line progress of a swarm while waiting. */
export function swarmLine(s: Swarm): string {
  const detail = s.message ? ` - ${s.message}` : ""
  return `swarm ${s.name}: ${s.phase}, ${s.replicaStatus.ready}/${s.replicaStatus.total} replicas ready${detail}`
}

export function replicaTable(p: Paint, s: Swarm): string {
  const set = s.replicaSet
  if (!set)
    return table(
      p,
      ["replica", "state", "url", "message"],
      s.replicaStatus.items.map((r) => [r.index, state(p, r.state), r.url, r.message]),
    )
  // Replicas swarmplane rolls itself: each with its generation and whether the router sends it requests.
  const items = new Map(s.replicaStatus.items.map((i) => [i.index, i]))
  return table(
    p,
    ["replica", "generation", "state", "router", "url", "message"],
    set.replicas.map((r) => {
      const item = items.get(r.slot)
      return [
        r.slot,
        r.generation,
        state(p, r.state === "draining" ? "STOPPING" : (item?.state ?? r.state)),
        r.state === "serving" ? "in" : r.state === "draining" ? `draining since ${r.since}` : "not yet",
        r.url ?? item?.url,
        item?.message,
      ]
    }),
  )
}

const failedStates = new Set(["FAILED", "WORKER_FAILED", "PREEMPTED", "UNSCHEDULABLE", "COSCHED_FAILED"])
const runningStates = new Set(["ASSIGNED", "BUILDING", "RUNNING"])

export interface Tally {
  total: number
  done: number
  failed: number
  killed: number
  running: number
  pending: number
}

export function tally(job: Job): Tally {
  const t: Tally = { total: job.spec.tasks ?? 0, done: 0, failed: 0, killed: 0, running: 0, pending: 0 }
  for (const [name, n] of Object.entries(job.counts)) {
    const count = n ?? 0
    if (name === "SUCCEEDED") t.done += count
    else if (name === "KILLED") t.killed += count
    else if (failedStates.has(name)) t.failed += count
    else if (runningStates.has(name)) t.running += count
    else t.pending += count
  }
  return t
}

export function tallyText(t: Tally): string {
  const parts = [
    `${t.done}/${t.total} done`,
    `${t.failed} failed`,
    `${t.running} running`,
    `${t.pending} pending`,
  ]
  if (t.killed) parts.push(`${t.killed} killed`)
  return parts.join(", ")
}

/** The one-line progress of a job: status, and a bar on a terminal. */
export function jobLine(p: Paint, job: Job, withBar: boolean): string {
  const t = tally(job)
  return `job ${job.id}: ${job.status}${withBar ? ` ${bar(p, t)}` : ","} ${tallyText(t)}`
}

export function jobTable(p: Paint, jobs: Job[]): string {
  return table(
    p,
    ["id", "name", "status", "tasks", "swarm", "backend", "age"],
    jobs.map((j) => {
      const t = tally(j)
      return [
        j.id,
        j.spec.name,
        state(p, j.status),
        `${t.done}/${t.total}`,
        j.spec.swarm,
        j.backendId,
        age(j.createdAt),
      ]
    }),
  )
}

/** Most tasks shown in a job's table; the rest are summed up (JSON output has them all). */
const TaskRows = 50

export function jobStatus(p: Paint, job: JobDetail, terminal: boolean): string {
  const t = tally(job)
  const summary = block(p, [
    ["Job", `${job.id} (${job.spec.name})`],
    [
      "Status",
      `${state(p, job.status)}${job.cancelRequested && job.status !== "CANCELLED" ? " (cancel requested)" : ""}`,
    ],
    ["Tasks", terminal ? `${bar(p, t)} ${tallyText(t)}` : tallyText(t)],
    ["Swarm", job.spec.swarm],
    ["Backend", job.backendId],
    ["Command", shellLine(job.spec.command)],
    // A batch job: where its rows come from and where each shard's results go.
    ["Input", job.spec.batch?.input],
    ["Results", job.spec.batch ? `${job.spec.batch.output.replace(/\/+$/, "")}/shard-<n>.jsonl` : undefined],
    ["Message", job.message],
    ["Submitted", `${job.createdAt} (${age(job.createdAt)} ago)`],
    ["Finished", job.finishedAt],
  ])
  const interesting =
    job.tasks.length > TaskRows ? job.tasks.filter((task) => task.state !== "SUCCEEDED") : job.tasks
  const shown = interesting.slice(0, TaskRows)
  const hidden = job.tasks.length - shown.length + (job.tasksNextCursor ? t.total - job.tasks.length : 0)
  return `${summary}\n${taskTable(p, shown)}${hidden > 0 ? p.dim(`... ${hidden} more tasks not shown (-o json shows the first 1000)\n`) : ""}`
}

export function taskTable(p: Paint, tasks: Task[]): string {
  return table(
    p,
    ["task", "state", "attempts", "exit", "reason"],
    tasks.map((task) => {
      const last = task.attempts.at(-1)
      // Why it waits (not placed yet, or queued on the cluster it was submitted to), else how it ended.
      const waiting = task.state === "PENDING" || task.state === "ASSIGNED"
      // How it ended says what the cluster said, when it said something (e.g. sbatch's refusal).
      const ended = last?.reason && last.message ? `${last.reason}: ${last.message}` : last?.reason
      const reason = waiting ? (task.pendingReason ?? ended) : ended
      return [task.index, state(p, task.state), task.attempts.length, last?.exitCode, reason]
    }),
  )
}

export function eventTable(p: Paint, events: Event[]): string {
  return table(
    p,
    ["time", "object", "from", "to", "reason", "message"],
    events.map((e) => [
      clock(e.at),
      `${e.entity.kind} ${e.entity.id}`,
      e.from,
      state(p, e.to),
      e.reason,
      e.message,
    ]),
  )
}
