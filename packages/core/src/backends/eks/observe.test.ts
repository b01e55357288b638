import { describe, expect, test } from "vitest"
import { JobSpec } from "../../model/job"
import type { TaskRef } from "../protocol"
import { indexNamespace, LostAfterMs, observeNamespace } from "./observe"
import type { Job, Pod, Workload } from "./types"

const t0 = "2026-08-01T10:00:00.000Z"
const now = Date.parse(t0) + 1000

function ref(
  uid: string,
  state: "ASSIGNED" | "RUNNING" | "KILLED",
  options: { target?: string; stopping?: boolean } = {},
): TaskRef {
  return {
    job: {
      id: "j1",
      project: "p",
      spec: JobSpec.parse({ command: ["true"] }),
      backendId: "k8s",
      status: "RUNNING",
      counts: {},
      cancelRequested: false,
      createdAt: t0,
      updatedAt: t0,
    },
    task: {
      pk: "p#job#j1",
      sk: `task#${uid}`,
      type: "task",
      version: 1,
      data: {
        index: 0,
        state,
        attempts: [
          {
            attemptUid: uid,
            state,
            submission: `sp-${uid}`,
            ...(options.target ? { target: options.target } : {}),
            createdAt: t0,
          },
        ],
        failureCount: 0,
        preemptionCount: 0,
        updatedAt: t0,
        ...(options.stopping ? { stopping: { attemptUid: uid, since: t0 } } : {}),
      },
    },
  }
}

const kubeJob = (name: string, conditions: Job["status"] = {}): Job => ({
  metadata: { name, uid: `uid-${name}` },
  status: conditions,
})
const workloadOf = (job: string, conditions: NonNullable<Workload["status"]>["conditions"]): Workload => ({
  metadata: {
    name: `job-${job}-abcde`,
    ownerReferences: [
      { apiVersion: "batch/v1", kind: "Job", name: job, uid: `uid-${job}`, controller: true },
    ],
  },
  status: { conditions },
})
const podOf = (job: string, phase: "Running" | "Pending"): Pod => ({
  metadata: { name: `${job}-x`, labels: { "batch.kubernetes.io/job-name": job }, creationTimestamp: t0 },
  status: {
    phase,
    containerStatuses: [{ name: "main", ready: true, restartCount: 0, state: { running: {} } }],
  },
})

describe("indexNamespace", () => {
  test("Workloads join their Job by its uid, pods by the job-name label; others' objects are left out", () => {
    const index = indexNamespace(
      [kubeJob("sp-a")],
      [podOf("sp-a", "Running"), podOf("someone-else", "Running")],
      [workloadOf("sp-a", []), workloadOf("someone-else", [])],
    )
    expect([...index.workloads.keys()]).toEqual(["sp-a"])
    expect([...index.pods.keys()]).toEqual(["sp-a"])
  })
})

describe("observeNamespace", () => {
  test("waiting, running, already running, lost and not yet lost; stopping gone, ended and still running", () => {
    const queued = ref("q", "ASSIGNED", { target: "sp-q" })
    const starts = ref("r", "ASSIGNED", { target: "sp-r" })
    const still = ref("s", "RUNNING", { target: "sp-s" })
    const lost = ref("l", "RUNNING", { target: "sp-l" })
    const young = ref("y", "ASSIGNED", { target: "sp-y" })
    const stoppedGone = ref("g", "KILLED", { target: "sp-g", stopping: true })
    const stoppedEnded = ref("e", "KILLED", { target: "sp-e", stopping: true })
    const stoppedRunning = ref("u", "KILLED", { target: "sp-u", stopping: true })
    const index = indexNamespace(
      [
        kubeJob("sp-q"),
        kubeJob("sp-r"),
        kubeJob("sp-s"),
        kubeJob("sp-e", { conditions: [{ type: "Failed", status: "True" }] }),
        kubeJob("sp-u"),
      ],
      [podOf("sp-r", "Running"), podOf("sp-s", "Running"), podOf("sp-u", "Running")],
      [
        workloadOf("sp-q", [
          { type: "QuotaReserved", status: "False", reason: "Pending", message: "no quota" },
        ]),
      ],
    )
    const seen = observeNamespace(
      [queued, starts, still, lost],
      [stoppedGone, stoppedEnded, stoppedRunning],
      index,
      now + LostAfterMs,
    )
    expect(seen.waiting).toEqual([{ ref: queued, reason: "Kueue: no quota" }])
    expect(seen.transitions).toEqual([
      { ref: starts, outcome: { kind: "running", attemptUid: "r", target: "sp-r" } },
      {
        ref: lost,
        outcome: expect.objectContaining({ kind: "worker_failed", attemptUid: "l", reason: "lost" }),
      },
      { ref: stoppedGone, outcome: { kind: "stopped", attemptUid: "g" } },
      { ref: stoppedEnded, outcome: { kind: "stopped", attemptUid: "e" } },
    ])
    expect(seen.unstopped).toEqual([{ ref: stoppedRunning, target: "sp-u" }])
    // Not listed, but made only a moment ago: not lost yet.
    expect(observeNamespace([young], [], index, now).transitions).toEqual([])
  })
})

describe("gangs", () => {
  /** Member `index` of gang Job `name`, as its attempt records it (`<job>#<index>`). */
  const member = (uid: string, name: string, index: number, state: "ASSIGNED" | "RUNNING" = "RUNNING") => {
    const r = ref(uid, state, { target: `${name}#${index}` })
    r.task.data.attempts[0]!.submission = `${name}#${index}`
    return r
  }
  const indexedPod = (
    job: string,
    index: number,
    phase: "Running" | "Failed" | "Succeeded",
    exitCode = 0,
  ): Pod => ({
    metadata: {
      name: `${job}-${index}-x`,
      labels: {
        "batch.kubernetes.io/job-name": job,
        "batch.kubernetes.io/job-completion-index": String(index),
      },
      creationTimestamp: t0,
    },
    status: {
      phase,
      containerStatuses: [
        {
          name: "main",
          ready: phase === "Running",
          restartCount: 0,
          state:
            phase === "Running"
              ? { running: {} }
              : { terminated: { exitCode, reason: exitCode ? "Error" : "Completed" } },
        },
      ],
    },
  })

  test("each member reads its own completion index's pod; a failed member fails alone, its gang-mates wait to be stopped", () => {
    const failedJob = kubeJob("sp-g", {
      conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded" }],
    })
    const index = indexNamespace([failedJob], [indexedPod("sp-g", 1, "Failed", 3)], [])
    const seen = observeNamespace([member("a0", "sp-g", 0), member("a1", "sp-g", 1)], [], index, now)
    expect(seen.transitions).toHaveLength(1)
    expect(seen.transitions[0]!.outcome).toMatchObject({ kind: "failed", attemptUid: "a1", exitCode: 3 })
    expect(seen.waiting.map((w) => w.ref.task.data.attempts[0]!.attemptUid)).toEqual(["a0"])
  })

  test("a running member's outcome names its Job and index; a stopping member is stopped once the Job is gone", () => {
    const index = indexNamespace(
      [kubeJob("sp-g")],
      [indexedPod("sp-g", 0, "Succeeded"), indexedPod("sp-g", 1, "Running")],
      [],
    )
    const seen = observeNamespace(
      [member("a0", "sp-g", 0), member("a1", "sp-g", 1, "ASSIGNED")],
      [],
      index,
      now,
    )
    expect(seen.transitions.map((t) => t.outcome)).toEqual([
      { kind: "succeeded", attemptUid: "a0", exitCode: 0 },
      { kind: "running", attemptUid: "a1", target: "sp-g#1" },
    ])
    const stopping = member("a2", "sp-g", 2)
    stopping.task.data.stopping = { attemptUid: "a2", since: t0 }
    expect(observeNamespace([], [stopping], index, now).unstopped).toEqual([
      { ref: stopping, target: "sp-g#2" },
    ])
    expect(observeNamespace([], [stopping], indexNamespace([], [], []), now).transitions[0]!.outcome).toEqual(
      {
        kind: "stopped",
        attemptUid: "a2",
      },
    )
  })
})
