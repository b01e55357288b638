/**
 * Test support for the randomized fault run on the real Slurm cluster: the control plane in this
 * process (faults on its store and its backend's seam), and what Slurm itself says ran, as runs the
 * invariant checks read (test/support/fault-checks.ts).
 */
import type { SshSession } from "@swarmplane/core/backends/slurm/ssh"
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { Task } from "@swarmplane/core/model/job"
import type { Repos } from "@swarmplane/core/store/index"
import { backendId, chaosPlane, project } from "./chaos-plane"
import type { Violation } from "./fault-checks"
import { type Run, Substrate } from "./fault-sim"
import type { Faults } from "./faults"
import { privateKeyOf, type SlurmConnection } from "./slurm"

export { backendId, project }

/** `key=value` fields of one `scontrol show job -o` line. */
function fields(line: string): Record<string, string> {
  return Object.fromEntries(
    line
      .split(" ")
      .map((f) => f.split("="))
      .filter((kv) => kv.length >= 2)
      .map(([k, ...v]) => [k!, v.join("=")]),
  )
}

/** The shared chaos plane (chaos-plane.ts) with the Slurm backend `chaos` on the dev cluster. */
export function slurmChaosPlane(c: SlurmConnection, faults: Faults, leaseTtlMs?: number) {
  return chaosPlane(faults, {
    config: BackendConfig.parse({
      type: "slurm",
      loginHost: c.host,
      port: c.port,
      user: c.user,
      sshKeySecret: "slurm-key",
      hostKey: c.hostKey,
      partition: c.partition,
      gpuPartition: c.gpuPartition,
      timeLimit: "00:10:00",
      commandTimeoutS: 30,
    }),
    secret: () => privateKeyOf(c),
    ...(leaseTtlMs === undefined ? {} : { leaseTtlMs }),
  })
}

/**
 * What Slurm ran for these jobs: every array `squeue -t all` lists under a name their attempts were
 * submitted with (two arrays of one name: submitted twice), and each array task `scontrol show job`
 * knows, with when it ran (or that it still waits), as runs of the attempt it belongs to. Two runs of
 * one task whose times overlap are recorded as ran at once.
 */
export async function slurmRuns(
  session: SshSession,
  clean: Repos,
  project: string,
  jobIds: readonly string[],
): Promise<{
  substrate: Substrate
  violations: Violation[]
  names: string[]
  attempts: number
  submissions: number
}> {
  const names = new Set<string>()
  const attempts = new Map<string, { jobId: string; task: Task; attempt: Task["attempts"][number] }>()
  for (const id of jobIds)
    for (const t of (await clean.jobs.load(project, id))?.tasks ?? [])
      for (const a of t.data.attempts) {
        const name = a.submission?.split("#")[0]
        if (name) names.add(name)
        attempts.set(a.attemptUid, { jobId: id, task: t.data, attempt: a })
      }
  const listed = names.size
    ? (await session.exec(`squeue -h -t all --name=${[...names].join(",")} -o '%F|%j'`)).stdout
    : ""
  const arrays = new Map<string, Set<string>>()
  for (const line of listed.trim().split("\n").filter(Boolean)) {
    const [arrayId = "", name = ""] = line.split("|")
    arrays.set(name, (arrays.get(name) ?? new Set()).add(arrayId))
  }
  const violations: Violation[] = []
  for (const [name, ids] of arrays)
    if (ids.size > 1)
      violations.push({
        invariant: "budget",
        subject: name,
        detail: `submitted ${ids.size} times: arrays ${[...ids].join(", ")}`,
      })
  const ids = [...new Set([...arrays.values()].flatMap((s) => [...s]))]
  const shown = ids.length
    ? (await session.exec(ids.map((id) => `scontrol show job -o ${id}`).join("; "))).stdout
    : ""
  const byTarget = new Map([...attempts.values()].map((a) => [a.attempt.target, a]))
  const bySubmission = new Map([...attempts.values()].map((a) => [a.attempt.submission, a]))
  const runs: Run[] = []
  for (const line of shown.trim().split("\n").filter(Boolean)) {
    const f = fields(line)
    const target = `${f.ArrayJobId}_${f.ArrayTaskId}`
    const start = Date.parse(f.StartTime ?? "")
    const end = Date.parse(f.EndTime ?? "")
    const state = f.JobState ?? ""
    // The record of an array's pending rest that was cancelled (every index of it one by one:
    // `ArrayTaskId=4294967294`, or all at once: a range) stands for tasks that never ran.
    const single = /^\d+$/.test(f.ArrayTaskId ?? "") && Number(f.ArrayTaskId) < 4294967294
    if (!single && state === "CANCELLED") continue
    const owner = byTarget.get(target) ?? bySubmission.get(`${f.JobName}#${f.ArrayTaskId}`)
    if (!owner) {
      violations.push({
        invariant: "budget",
        subject: target,
        detail: `Slurm ran ${f.JobName} task ${f.ArrayTaskId}, which no attempt was submitted as`,
      })
      continue
    }
    // Still waiting in the queue counts as left on the cluster; cancelled while it waited never ran.
    const pending = state === "PENDING" || !Number.isFinite(start)
    if (!pending && state === "CANCELLED" && start === end) continue
    // An attempt whose submission landed but whose Slurm id the store never learned (a launch that
    // failed after taking effect, then the job ended before a pass adopted it) ran as itself: what is
    // wrong there is that nothing stops it, which the leftover check reports (known: stop-lost).
    if (owner.attempt.target !== undefined && owner.attempt.target !== target)
      violations.push({
        invariant: "budget",
        subject: `${owner.jobId}/${owner.task.index}`,
        detail: `attempt ${owner.attempt.attemptUid} ran as ${target} besides its own ${owner.attempt.target}`,
      })
    runs.push({
      attemptUid: owner.attempt.attemptUid,
      jobId: owner.jobId,
      index: owner.task.index,
      workerId: pending ? "the queue" : (f.NodeList ?? ""),
      startedAt: pending ? Date.now() : start,
      ...(pending || ["RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"].includes(state)
        ? {}
        : { endedAt: end }),
      delivered: true,
    })
  }
  // Two attempts of a task ran at once when their times overlap (Slurm reports whole seconds).
  const substrate = new Substrate()
  substrate.runs.push(...runs)
  for (const [i, a] of runs.entries())
    for (const b of runs.slice(i + 1))
      if (
        a.jobId === b.jobId &&
        a.index === b.index &&
        a.attemptUid !== b.attemptUid &&
        a.startedAt < (b.endedAt ?? Number.POSITIVE_INFINITY) &&
        b.startedAt < (a.endedAt ?? Number.POSITIVE_INFINITY)
      )
        substrate.overlaps.push({
          task: `${a.jobId}/${a.index}`,
          uids: [a, b].sort((x, y) => x.startedAt - y.startedAt).map((r) => r.attemptUid),
          at: Math.max(a.startedAt, b.startedAt),
        })
  return { substrate, violations, names: [...names], attempts: attempts.size, submissions: arrays.size }
}
