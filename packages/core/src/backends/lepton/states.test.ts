/**
 * Every deployment and job state name of the contract (Part A.5, A.6), plus Lepton's own unknown `""`
 * and a name it does not list, mapped to swarm phases and task outcomes.
 */
import { describe, expect, test } from "vitest"
import { type DeploymentView, deploymentPhase, jobOutcome, readJob } from "./states"
import { LeptonDeploymentStates, LeptonJob, LeptonJobStates, type Readiness } from "./types"

const ready = (...ids: string[]): Readiness =>
  Object.fromEntries(ids.map((id) => [id, [{ reason: "Ready", message: "" }]]))
const waiting = (reason: string, message: string, ...ids: string[]): Readiness =>
  Object.fromEntries(ids.map((id) => [id, [{ reason, message }]]))

describe("a deployment's swarm phase", () => {
  const cases: Record<string, [DeploymentView, string, RegExp | undefined]> = {
    "Ready, health 200": [
      { state: "Ready", readiness: ready("r1", "r2"), healthy: true, replicas: 2 },
      "RUNNING",
      undefined,
    ],
    "Ready, no health yet": [
      { state: "Ready", readiness: ready("r1", "r2"), healthy: false, replicas: 2 },
      "INITIALIZING",
      /health check has not answered 200/,
    ],
    "Not Ready, some ready": [
      {
        state: "Not Ready",
        readiness: { ...ready("r1"), ...waiting("InProgress", "pulling", "r2") },
        replicas: 2,
      },
      "INITIALIZING",
      /1\/2 replicas ready/,
    ],
    "Not Ready, ConfigError": [
      {
        state: "Not Ready",
        readiness: waiting("ConfigError", "image not found: nvcr.io/x", "r1"),
        replicas: 1,
      },
      "FAILED",
      /ConfigError: image not found: nvcr.io\/x/,
    ],
    "Not Ready, SystemError": [
      { state: "Not Ready", readiness: waiting("SystemError", "node lost", "r1"), replicas: 1 },
      "FAILED",
      /SystemError: node lost/,
    ],
    "Not Ready, NoCapacity": [
      { state: "Not Ready", readiness: waiting("NoCapacity", "no free gpu.8xh100-80gb", "r1"), replicas: 1 },
      "PENDING",
      /capacity.*NoCapacity: no free gpu.8xh100-80gb/,
    ],
    "Starting, none ready": [{ state: "Starting", readiness: {}, replicas: 2 }, "PENDING", /Starting \(0\/2/],
    "Starting, none ready, no capacity": [
      { state: "Starting", readiness: waiting("NoCapacity", "quota", "r1"), replicas: 1 },
      "PENDING",
      /NoCapacity: quota/,
    ],
    "Updating, some ready": [
      { state: "Updating", readiness: ready("r1"), replicas: 2 },
      "INITIALIZING",
      /Updating \(1\/2/,
    ],
    "Scaling, none ready": [{ state: "Scaling", replicas: 3 }, "PENDING", /Scaling/],
    "Scaling, some ready": [
      { state: "Scaling", readiness: ready("r1", "r2"), replicas: 3 },
      "INITIALIZING",
      /2\/3/,
    ],
    "Migrating, none ready": [{ state: "Migrating", replicas: 1 }, "PENDING", /Migrating/],
    "Restarting, some ready": [
      { state: "Restarting", readiness: ready("r1"), replicas: 1 },
      "INITIALIZING",
      /Restarting/,
    ],
    Stopping: [
      { state: "Stopping", replicas: 1 },
      "FAILED",
      /stopping the deployment, not through swarmplane/,
    ],
    Stopped: [{ state: "Stopped", replicas: 1 }, "FAILED", /stopped the deployment, not through swarmplane/],
    Deleting: [
      { state: "Deleting", replicas: 1 },
      "FAILED",
      /deleting the deployment, not through swarmplane/,
    ],
    Error: [
      { state: "Error", readiness: waiting("SystemError", "crash loop", "r1"), replicas: 1 },
      "FAILED",
      /Error: SystemError: crash loop/,
    ],
    "Deleting, asked by swarmplane": [
      { state: "Deleting", replicas: 1, deleteRequested: true },
      "STOPPED",
      /Deleting/,
    ],
    "Stopped, asked by swarmplane": [
      { state: "Stopped", replicas: 1, deleteRequested: true },
      "STOPPED",
      undefined,
    ],
    "Stopped, the swarm asks for 0 replicas": [
      { state: "Stopped", readiness: {}, replicas: 0, scaledToZero: true },
      "STOPPED",
      /Stopped; the swarm asks for 0 replicas/,
    ],
    "Stopping, the swarm asks for 0 replicas": [
      { state: "Stopping", readiness: ready("r1"), replicas: 0, scaledToZero: true },
      "STOPPED",
      /Stopping; the swarm asks for 0 replicas/,
    ],
    "Deleting, the swarm asks for 0 replicas (deleted elsewhere)": [
      { state: "Deleting", replicas: 0, scaledToZero: true },
      "FAILED",
      /deleting the deployment, not through swarmplane/,
    ],
    "Stopped, an autoscaled swarm at 0 (not asked to stop)": [
      { state: "Stopped", replicas: 0 },
      "FAILED",
      /stopped the deployment, not through swarmplane/,
    ],
    '"" (Lepton\'s unknown)': [{ state: "", replicas: 1 }, "UNKNOWN", /unknown deployment state ""/],
    "absent state": [{ state: undefined, replicas: 1 }, "UNKNOWN", /unknown deployment state ""/],
    "a name Lepton does not list": [{ state: "Hibernating", replicas: 1 }, "UNKNOWN", /"Hibernating"/],
  }
  for (const [name, [view, phase, detail]] of Object.entries(cases))
    test(name, () => {
      const got = deploymentPhase(view)
      expect(got.phase).toBe(phase)
      if (detail) expect(got.detail).toMatch(detail)
      else expect(got.detail).toBeUndefined()
    })

  test("every state name of the contract is mapped to a known phase (none falls to UNKNOWN)", () => {
    for (const state of LeptonDeploymentStates)
      expect(deploymentPhase({ state, replicas: 1 }).phase, state).not.toBe("UNKNOWN")
  })

  test("replica counts come from readiness: ready is the replicas whose first entry is Ready", () => {
    const readiness: Readiness = {
      r2: [{ reason: "InProgress", message: "pulling" }, { reason: "Ready" }],
      r1: [{ reason: "Ready", message: "" }],
      r3: null,
    }
    const got = deploymentPhase({ state: "Not Ready", readiness, replicas: 3 })
    expect(got.replicas.ready).toBe(1)
    expect(got.replicas.total).toBe(3)
    expect(got.replicas.items.map((i) => [i.index, i.state])).toEqual([
      [0, "Ready"],
      [1, "InProgress"],
      [2, "Unknown"],
    ])
    expect(got.replicas.items[1]!.message).toBe("r2: pulling")
  })

  test("a teardown swarmplane asked for is idle only once Lepton has stopped it", () => {
    expect(deploymentPhase({ state: "Stopped", replicas: 1, deleteRequested: true }).idle).toBe(true)
    expect(deploymentPhase({ state: "Stopping", replicas: 1, deleteRequested: true }).idle).toBe(false)
  })

  test("a swarm scaled to 0 is idle once Lepton has stopped its deployment, and shows 0 of 0 ready", () => {
    const stopped = deploymentPhase({ state: "Stopped", readiness: {}, replicas: 0, scaledToZero: true })
    expect(stopped.idle).toBe(true)
    expect(stopped.replicas).toMatchObject({ ready: 0, total: 0 })
    expect(
      deploymentPhase({ state: "Stopping", readiness: ready("r1"), replicas: 0, scaledToZero: true }).idle,
    ).toBe(false)
  })
})

const job = (status: Record<string, unknown>) => LeptonJob.parse({ metadata: { id: "sp-a-1" }, status })

describe("a job's meaning for its attempt", () => {
  const cases: Record<string, [Record<string, unknown>, boolean, string, RegExp | string | undefined]> = {
    Starting: [{ state: "Starting" }, false, "waiting", /starting/],
    Queueing: [{ state: "Queueing" }, false, "waiting", /capacity or quota/],
    Awaiting: [{ state: "Awaiting" }, false, "waiting", /awaiting/],
    PendingRetry: [{ state: "PendingRetry" }, false, "waiting", /retry/],
    Restarting: [{ state: "Restarting" }, false, "waiting", /restarting/],
    "Running, 1 of 2 ready": [
      { state: "Running", ready: 1, active: 2 },
      false,
      "starting",
      "Lepton: 1 of 2 workers ready",
    ],
    "Running, all ready": [{ state: "Running", ready: 2, active: 2 }, false, "running", undefined],
    Completed: [{ state: "Completed", succeeded: 1 }, false, "succeeded", undefined],
    "Failed, with a message": [
      { state: "Failed", failed: 1, message: "exit code 3" },
      false,
      "failed",
      "Lepton job sp-a-1 failed: exit code 3 (1 worker failed)",
    ],
    "Failed, words from the history": [
      {
        state: "Failed",
        failed: 2,
        job_history: [
          { state: "Failed", reason: "OOMKilled", message: "worker 0 ran out of memory" },
          { state: "Failed" },
        ],
      },
      false,
      "failed",
      /failed: OOMKilled: worker 0 ran out of memory \(2 workers failed\)/,
    ],
    "Stopped, not by swarmplane": [
      { state: "Stopped" },
      false,
      "failed",
      /Stopped on Lepton, not through swarmplane/,
    ],
    "Stopping, not by swarmplane": [{ state: "Stopping" }, false, "failed", /Stopping on Lepton/],
    "Deleting, not by swarmplane": [{ state: "Deleting" }, false, "failed", /Deleting on Lepton/],
    "Deleted, not by swarmplane": [{ state: "Deleted" }, false, "failed", /Deleted on Lepton/],
    "Terminating, not by swarmplane": [{ state: "Terminating" }, false, "failed", /Terminating on Lepton/],
    "Stopped by swarmplane": [{ state: "Stopped" }, true, "stopped", undefined],
    "Deleted by swarmplane": [{ state: "Deleted" }, true, "stopped", undefined],
    "Stopping by swarmplane": [{ state: "Stopping" }, true, "stopping", /Stopping/],
    "Archived after completing": [
      { state: "Archived", job_history: [{ state: "Running" }, { state: "Completed" }] },
      false,
      "succeeded",
      undefined,
    ],
    "Archived after failing": [
      { state: "Archived", job_history: [{ state: "Failed", message: "bad input" }] },
      false,
      "failed",
      /bad input/,
    ],
    "Archived with no history": [{ state: "Archived" }, false, "unknown", /Archived with no history/],
    '"" (Lepton\'s unknown)': [{ state: "" }, false, "unknown", /unknown state ""/],
    "a name Lepton does not list": [{ state: "Suspended" }, false, "unknown", /unknown state "Suspended"/],
  }
  for (const [name, [status, stopRequested, kind, message]] of Object.entries(cases))
    test(name, () => {
      const got = readJob(job(status), stopRequested)
      expect(got.kind).toBe(kind)
      if (message === undefined) expect("message" in got ? got.message : undefined).toBeUndefined()
      else if (typeof message === "string") expect("message" in got && got.message).toBe(message)
      else expect("message" in got && got.message).toMatch(message)
    })

  test("every job state name of the contract is mapped (none falls to unknown, bar an Archived without history)", () => {
    for (const state of LeptonJobStates)
      if (state !== "Archived") expect(readJob(job({ state })).kind, state).not.toBe("unknown")
  })

  test("outcomes: waiting, starting and unknown change nothing; the rest are outcomes of the attempt", () => {
    const uid = "a-1"
    expect(jobOutcome(readJob(job({ state: "Queueing" })), uid)).toBeUndefined()
    expect(jobOutcome(readJob(job({ state: "Running", ready: 0, active: 1 })), uid)).toBeUndefined()
    expect(jobOutcome(readJob(job({ state: "Hibernating" })), uid)).toBeUndefined()
    expect(jobOutcome(readJob(job({ state: "Running", ready: 1, active: 1 })), uid, "sp-a-1")).toEqual({
      kind: "running",
      attemptUid: uid,
      target: "sp-a-1",
    })
    expect(jobOutcome(readJob(job({ state: "Completed" })), uid)).toEqual({
      kind: "succeeded",
      attemptUid: uid,
      exitCode: 0,
    })
    expect(jobOutcome(readJob(job({ state: "Stopped" })), uid)).toMatchObject({
      kind: "failed",
      attemptUid: uid,
      reason: "stopped_on_lepton",
    })
    expect(jobOutcome(readJob(job({ state: "Failed" })), uid)).toMatchObject({
      kind: "failed",
      reason: "job_failed",
      message: "Lepton job sp-a-1 failed",
    })
    expect(jobOutcome(readJob(job({ state: "Deleted" }), true), uid)).toEqual({
      kind: "stopped",
      attemptUid: uid,
    })
  })

  test("a status with unknown fields and nulls parses, and an absent status is unknown", () => {
    const parsed = LeptonJob.parse({
      metadata: { id: "j", created_at: null, extra: { a: 1 } },
      status: { state: "Running", ready: null, active: null, surprise: true },
      brand_new: [],
    })
    expect(readJob(parsed).kind).toBe("running")
    expect(readJob(LeptonJob.parse({ metadata: { id: "j" } })).kind).toBe("unknown")
  })
})
