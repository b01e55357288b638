import { describe, expect, test } from "vitest"
import { type AttemptReading, attemptOutcome, ImagePullGraceMs, readAttempt } from "./states"
import type { Condition, ContainerState, Job, Pod, Workload } from "./types"

const t0 = Date.parse("2026-08-01T10:00:00Z")
const at = (ms: number) => new Date(t0 + ms).toISOString()
const cond = (type: string, status: "True" | "False", reason?: string, message?: string): Condition => ({
  type,
  status,
  ...(reason ? { reason } : {}),
  ...(message ? { message } : {}),
})

const job = (conditions: Condition[] = [], suspend = false): Job => ({
  metadata: { name: "sp-a-1", uid: "job-uid" },
  spec: { suspend, template: { spec: { containers: [] } } },
  status: { conditions },
})
const workload = (conditions: Condition[], extra: NonNullable<Workload["status"]> = {}): Workload => ({
  metadata: { name: "job-sp-a-1-abcde" },
  spec: { queueName: "user-queue" },
  status: { conditions, ...extra },
})
const pod = (
  phase: NonNullable<Pod["status"]>["phase"],
  state?: ContainerState,
  extra: NonNullable<Pod["status"]> = {},
): Pod => ({
  metadata: { name: "sp-a-1-xyz", creationTimestamp: at(0) },
  status: {
    phase,
    startTime: at(0),
    ...(state ? { containerStatuses: [{ name: "main", ready: false, restartCount: 0, state }] } : {}),
    ...extra,
  },
})

const quotaMessage =
  "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"
const admitted = [
  cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
  cond("Admitted", "True", "Admitted", "The workload is admitted"),
]

const cases: {
  name: string
  job?: Job
  workload?: Workload
  pods?: Pod[]
  now?: number
  want: Partial<AttemptReading> & { kind: AttemptReading["kind"] }
  message?: RegExp
}[] = [
  {
    name: "no Workload yet: waiting for Kueue",
    job: job([], true),
    want: { kind: "waiting" },
    message: /waiting for Kueue to make the Job's Workload/,
  },
  {
    name: "QuotaReserved=False/Pending: waiting, with Kueue's message",
    job: job([], true),
    workload: workload([cond("QuotaReserved", "False", "Pending", quotaMessage)]),
    want: { kind: "waiting", message: `Kueue: ${quotaMessage}` },
  },
  {
    name: "QuotaReserved=False/Inadmissible: waiting, with Kueue's message",
    job: job([], true),
    workload: workload([
      cond("QuotaReserved", "False", "Inadmissible", "LocalQueue user-queue doesn't exist"),
    ]),
    want: { kind: "waiting", message: "Kueue: LocalQueue user-queue doesn't exist" },
  },
  {
    name: "Admitted, no pod yet: starting (ASSIGNED)",
    workload: workload(admitted, { admission: { clusterQueue: "cq" } }),
    want: { kind: "starting" },
    message: /admitted in ClusterQueue cq/,
  },
  {
    name: "quota reserved, admission checks pending: starting",
    workload: workload([
      cond("QuotaReserved", "True"),
      cond("Admitted", "False", "UnsatisfiedChecks", "checks"),
    ]),
    want: { kind: "starting" },
    message: /not admitted yet: checks/,
  },
  {
    name: "pod Pending, unschedulable: starting, with the scheduler's words",
    workload: workload(admitted),
    pods: [
      pod("Pending", undefined, {
        conditions: [cond("PodScheduled", "False", "Unschedulable", "0/3 nodes are available")],
      }),
    ],
    want: { kind: "starting" },
    message: /Unschedulable: 0\/3 nodes are available/,
  },
  {
    name: "pod Pending, ContainerCreating: starting",
    workload: workload(admitted),
    pods: [pod("Pending", { waiting: { reason: "ContainerCreating" } })],
    want: { kind: "starting" },
    message: /ContainerCreating/,
  },
  {
    name: "ImagePullBackOff within the grace period: starting, with the reason",
    workload: workload(admitted),
    pods: [
      pod("Pending", { waiting: { reason: "ImagePullBackOff", message: 'Back-off pulling image "bad:1"' } }),
    ],
    now: t0 + ImagePullGraceMs - 1,
    want: { kind: "starting" },
    message: /ImagePullBackOff: Back-off pulling image "bad:1"/,
  },
  {
    name: "ErrImagePull past the grace period: failed, with the reason",
    workload: workload(admitted),
    pods: [pod("Pending", { waiting: { reason: "ErrImagePull", message: "not found" } })],
    now: t0 + ImagePullGraceMs,
    want: { kind: "failed", reason: "image_pull" },
    message: /cannot start: ErrImagePull: not found/,
  },
  {
    name: "CreateContainerConfigError past the grace period: failed",
    workload: workload(admitted),
    pods: [
      pod("Pending", { waiting: { reason: "CreateContainerConfigError", message: "secret x not found" } }),
    ],
    now: t0 + ImagePullGraceMs + 5,
    want: { kind: "failed", reason: "container_config" },
  },
  {
    name: "pod Running: running",
    workload: workload(admitted),
    pods: [pod("Running", { running: { startedAt: at(1) } })],
    want: { kind: "running" },
  },
  {
    name: "pod Succeeded: succeeded",
    workload: workload(admitted),
    pods: [pod("Succeeded", { terminated: { exitCode: 0, reason: "Completed" } })],
    want: { kind: "succeeded", exitCode: 0 },
  },
  {
    name: "Job Complete=True (its pod gone): succeeded",
    job: job([cond("Complete", "True", "CompletionsReached")]),
    want: { kind: "succeeded", exitCode: 0 },
  },
  {
    name: "OOMKilled: failed with exit code 137 and the reason",
    job: job([cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]),
    workload: workload(admitted),
    pods: [pod("Failed", { terminated: { exitCode: 137, reason: "OOMKilled" } })],
    want: { kind: "failed", reason: "oom_killed", exitCode: 137 },
    message: /OOMKilled/,
  },
  {
    name: "non-zero exit: failed with the exit code",
    workload: workload(admitted),
    pods: [pod("Failed", { terminated: { exitCode: 3, reason: "Error" } })],
    want: { kind: "failed", reason: "exit_code", exitCode: 3 },
    message: /exited with code 3 \(Error\)/,
  },
  {
    name: "Job Failed with no pod left: failed with the Job's condition",
    job: job([cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified")]),
    want: { kind: "failed", reason: "job_failed" },
    message: /DeadlineExceeded: Job was active longer/,
  },
  {
    name: "Workload Evicted=True/Preempted: preempted, with Kueue's message",
    job: job([], true),
    workload: workload([
      cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
      cond("QuotaReserved", "False", "Pending", "Preempted to accommodate a workload"),
    ]),
    want: { kind: "preempted", reason: "preempted" },
    message: /Preempted: Preempted to accommodate a workload/,
  },
  {
    name: "Workload readmitted after an eviction (its pods were removed): still preempted",
    workload: workload(
      [
        ...admitted,
        cond("Evicted", "False", "QuotaReserved", "Previously: x"),
        cond("Requeued", "True", "Preempted", "was preempted"),
      ],
      { schedulingStats: { evictions: [{ reason: "Preempted", count: 1 }] } },
    ),
    pods: [pod("Running", { running: {} })],
    want: { kind: "preempted", reason: "preempted" },
  },
  {
    name: "Evicted for node failures: preempted (evicted)",
    workload: workload([cond("Evicted", "True", "NodeFailures", "node gone")]),
    want: { kind: "preempted", reason: "evicted" },
  },
  {
    name: "pod Evicted by the kubelet: preempted",
    workload: workload(admitted),
    pods: [pod("Failed", undefined, { reason: "Evicted", message: "The node was low on resource: memory." })],
    want: { kind: "preempted", reason: "evicted" },
    message: /Evicted: The node was low on resource/,
  },
  {
    name: "Job failed on its backoff limit with no pod left (deleted before it ended): lost",
    job: job([cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]),
    workload: workload(admitted),
    pods: [],
    want: { kind: "lost" },
    message: /pod of Job sp-a-1 was deleted before it ended/,
  },
  {
    name: "Job failed on its backoff limit with its failed pod listed: the pod's failure, not lost",
    job: job([cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]),
    workload: workload(admitted),
    pods: [pod("Failed", { terminated: { exitCode: 2, reason: "Error" } })],
    want: { kind: "failed", reason: "exit_code", exitCode: 2 },
  },
  {
    name: "Job failed on its deadline with no pod left: failed with the Job's reason",
    job: job([cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")]),
    workload: workload(admitted),
    pods: [],
    want: { kind: "failed", reason: "job_failed" },
    message: /DeadlineExceeded/,
  },
  {
    name: "pod in an unknown phase: unknown, with the raw name",
    workload: workload(admitted),
    pods: [pod("Unknown")],
    want: { kind: "unknown", state: "Unknown" },
    message: /unknown phase "Unknown"/,
  },
]

describe("readAttempt", () => {
  for (const c of cases)
    test(c.name, () => {
      const reading = readAttempt({
        job: c.job ?? job(),
        workload: c.workload,
        pods: c.pods ?? [],
        now: c.now ?? t0 + 1000,
      })
      expect(reading).toMatchObject(c.want)
      if (c.message) expect((reading as { message: string }).message).toMatch(c.message)
    })
})

test("the image pull grace is the backend's: a shorter one fails the attempt sooner", () => {
  const pulling = {
    job: job(),
    workload: workload(admitted),
    pods: [pod("Pending", { waiting: { reason: "ErrImagePull", message: "not found" } })],
  }
  expect(readAttempt({ ...pulling, now: t0 + 5_000 }).kind).toBe("starting")
  expect(readAttempt({ ...pulling, now: t0 + 5_000, imagePullGraceMs: 5_000 })).toMatchObject({
    kind: "failed",
    reason: "image_pull",
  })
})

describe("attemptOutcome", () => {
  test("waiting, starting and unknown change nothing", () => {
    for (const reading of [
      { kind: "waiting", message: "m" },
      { kind: "starting", message: "m" },
      { kind: "unknown", state: "X", message: "m" },
    ] as AttemptReading[])
      expect(attemptOutcome(reading, "a1", "job")).toBeUndefined()
  })

  test("running, succeeded, failed and preempted become outcomes; a preempted Job is stopped after", () => {
    expect(attemptOutcome({ kind: "running" }, "a1", "job")).toEqual({
      kind: "running",
      attemptUid: "a1",
      target: "job",
    })
    expect(attemptOutcome({ kind: "succeeded", exitCode: 0 }, "a1", "job")).toEqual({
      kind: "succeeded",
      attemptUid: "a1",
      exitCode: 0,
    })
    expect(
      attemptOutcome(
        { kind: "failed", reason: "oom_killed", message: "OOMKilled", exitCode: 137 },
        "a1",
        "job",
      ),
    ).toEqual({ kind: "failed", attemptUid: "a1", reason: "oom_killed", message: "OOMKilled", exitCode: 137 })
    expect(attemptOutcome({ kind: "lost", message: "gone" }, "a1", "job")).toEqual({
      kind: "worker_failed",
      attemptUid: "a1",
      reason: "pod_lost",
      message: "gone",
    })
    expect(attemptOutcome({ kind: "preempted", reason: "preempted", message: "m" }, "a1", "job")).toEqual({
      kind: "preempted",
      attemptUid: "a1",
      reason: "preempted",
      message: "m",
      stop: true,
    })
  })
})
