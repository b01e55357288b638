/**
 * Test support for the randomized fault run of the `lepton` backend against the fake Lepton: the
 * control plane in this process (faults on its store and its backend's seam), seeded HTTP faults on
 * the fake itself (429 with `Retry-After`, 5xx before a request is served, 5xx after it was served: a
 * lost answer, slow answers), and what the fake's API lists as runs the invariant checks read
 * (test/support/fault-checks.ts). The Slurm counterpart is slurm-chaos.ts.
 */
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { Task } from "@swarmplane/core/model/job"
import type { Repos } from "@swarmplane/core/store/index"
import { backendId, chaosPlane, project } from "./chaos-plane"
import type { FakeLepton } from "./fake-lepton"
import type { FaultRequest } from "./fake-lepton/app"
import type { Violation } from "./fault-checks"
import { type Run, Substrate } from "./fault-sim"
import type { FaultKind, FaultRule, Faults } from "./faults"

export { backendId, project }

/** Lepton states of a job that has ended: none of its workers runs. */
export const leptonEnded: ReadonlySet<string> = new Set(["Completed", "Failed", "Stopped"])

/**
 * The point a request to the fake is known by in the fault counts: `lepton.<METHOD>:<route>`, ids
 * folded (`lepton.PATCH:/jobs/*`), so the summary groups calls of one kind.
 */
export const leptonPoint = ({ method, path }: FaultRequest) =>
  `lepton.${method}:${path.replace(/^(\/[^/]+)\/[^/]+/, "$1/*").replace(/\/replicas\/[^/]+/, "/replicas/*")}`

/** What the fake answered instead of serving, by what it did (`429`, `500`, `lost`, `slow`). */
export type HttpTally = Record<"429" | "500" | "lost" | "slow", number>

/**
 * Seeded faults on the fake's API, decided per request by `faults`' plan at `lepton.*` points: `error`
 * answers a 429 with `Retry-After: 1` or a 500 before anything happens (half and half), `error-after`
 * serves the request and then answers 500 (a create that landed, a stop that took, whose answer was
 * lost), `hang` serves it late (the rule's `hangMs`, under the client's timeout). Nothing once
 * `faults` is stopped or quiet.
 */
export function leptonFaults(fake: FakeLepton, faults: Faults): HttpTally {
  const tally: HttpTally = { "429": 0, "500": 0, lost: 0, slow: 0 }
  const decided = new WeakMap<FaultRequest, FaultRule | undefined>()
  const kinds: readonly FaultKind[] = ["error", "error-after", "hang"]
  const ruleOf = (request: FaultRequest) => {
    if (!decided.has(request)) decided.set(request, faults.decide(leptonPoint(request), [request], kinds))
    return decided.get(request)
  }
  /** A fault's `when`: this request took `kind` (and `also` accepts it); counted as `what`. */
  const answers =
    (kind: FaultKind, what: keyof HttpTally, also: (request: FaultRequest) => boolean = () => true) =>
    (request: FaultRequest) => {
      if (ruleOf(request)?.kind !== kind || !also(request)) return false
      tally[what]++
      return true
    }
  // Which of 429 and 500 an `error` is: one draw per request, made by the first of the two to ask.
  const busy = new WeakMap<FaultRequest, boolean>()
  const tooMany = (request: FaultRequest) => {
    if (!busy.has(request)) busy.set(request, faults.rng.chance(0.5))
    return busy.get(request)!
  }
  const slowFor = (request: FaultRequest) => {
    const [min, max] = ruleOf(request)?.hangMs ?? [200, 2_000]
    return faults.rng.int(min, max)
  }
  const every = Number.POSITIVE_INFINITY
  fake.injectFault({
    count: every,
    status: 429,
    retryAfterSeconds: 1,
    when: answers("error", "429", tooMany),
  })
  fake.injectFault({ count: every, status: 500, when: answers("error", "500", (r) => !tooMany(r)) })
  fake.injectFault({ count: every, status: 500, after: true, when: answers("error-after", "lost") })
  fake.injectFault({ count: every, delayMs: slowFor, when: answers("hang", "slow") })
  return tally
}

/** The shared chaos plane (chaos-plane.ts) with the lepton backend `chaos` on the fake. */
export function leptonChaosPlane(fake: FakeLepton, faults: Faults, leaseTtlMs?: number) {
  return chaosPlane(faults, {
    config: BackendConfig.parse({
      type: "lepton",
      workspaceId: fake.workspaceId,
      workspaceUrl: fake.url,
      tokenSecret: "lepton-token",
      nodeGroup: "fake-node-group",
      resourceShape: "cpu.small",
    }),
    secret: () => fake.token,
    maxRetryWaitMs: 2_000,
    ...(leaseTtlMs === undefined ? {} : { leaseTtlMs }),
  })
}

interface ListedJob {
  metadata: { id: string; name?: string; created_at?: number }
  status?: { state?: string; creation_time?: number; completion_time?: number | null; active?: number }
}

/** Every job the fake's workspace has, live and archived, as a user of Lepton lists them (every page). */
export async function leptonJobs(fake: FakeLepton): Promise<ListedJob[]> {
  const all: ListedJob[] = []
  for (let page = 1; ; page++) {
    const res = await fetch(`${fake.url}/jobs?job_query_mode=alive_and_archive&page=${page}&page_size=100`, {
      headers: { authorization: `Bearer ${fake.token}` },
    })
    if (!res.ok) throw new Error(`the fake's GET /jobs answered ${res.status}: ${await res.text()}`)
    const { jobs } = (await res.json()) as { jobs: ListedJob[] }
    if (!jobs.length) return all
    all.push(...jobs)
  }
}

/**
 * What the fake ran for these jobs: every Lepton job it lists, as a run of the attempt whose name it
 * was created under (from its creation to its completion; Lepton gives the completion in whole
 * seconds, so a run's end is read at most a second early). Besides the runs, what breaks the
 * invariants on Lepton's side: a job created twice under one attempt's name, a job under a name no
 * attempt was given, an attempt that ran as another job than the one the store knows.
 */
export async function leptonRuns(
  fake: FakeLepton,
  clean: Repos,
  project: string,
  jobIds: readonly string[],
): Promise<{ substrate: Substrate; violations: Violation[]; attempts: number; created: number }> {
  const attempts = new Map<string, { jobId: string; task: Task; attempt: Task["attempts"][number] }>()
  for (const id of jobIds)
    for (const t of (await clean.jobs.load(project, id))?.tasks ?? [])
      for (const a of t.data.attempts)
        if (a.submission) attempts.set(a.submission, { jobId: id, task: t.data, attempt: a })
  const listed = await leptonJobs(fake)
  const violations: Violation[] = []
  const byName = new Map<string, ListedJob[]>()
  for (const job of listed) {
    const name = job.metadata.name ?? job.metadata.id
    byName.set(name, [...(byName.get(name) ?? []), job])
  }
  for (const [name, jobs] of byName)
    if (jobs.length > 1)
      violations.push({
        invariant: "budget",
        subject: name,
        detail: `created ${jobs.length} times on Lepton: jobs ${jobs.map((j) => `${j.metadata.id} (${j.status?.state})`).join(", ")}`,
      })
  const runs: Run[] = []
  for (const job of listed) {
    const name = job.metadata.name ?? job.metadata.id
    const owner = attempts.get(name)
    if (!owner) {
      violations.push({
        invariant: "budget",
        subject: job.metadata.id,
        detail: `Lepton ran job ${job.metadata.id} under the name ${name}, which no attempt was given`,
      })
      continue
    }
    if (owner.attempt.target !== undefined && owner.attempt.target !== job.metadata.id)
      violations.push({
        invariant: "budget",
        subject: `${owner.jobId}/${owner.task.index}`,
        detail: `attempt ${owner.attempt.attemptUid} ran as Lepton job ${job.metadata.id} besides its own ${owner.attempt.target}`,
      })
    const state = job.status?.state ?? ""
    const startedAt = job.metadata.created_at ?? (job.status?.creation_time ?? 0) * 1000
    const completed = job.status?.completion_time
    runs.push({
      attemptUid: owner.attempt.attemptUid,
      jobId: owner.jobId,
      index: owner.task.index,
      workerId: `lepton job ${job.metadata.id} (${state})`,
      startedAt,
      ...(leptonEnded.has(state) ? { endedAt: Math.max(startedAt, (completed ?? 0) * 1000) } : {}),
      delivered: true,
    })
  }
  // Two attempts of a task ran at once when their times overlap.
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
  return { substrate, violations, attempts: attempts.size, created: listed.length }
}
