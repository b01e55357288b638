import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { DesiredAttempt, ObservedAttempt } from "@swarmplane/core/contract/worker"
import { afterEach, describe, expect, it } from "vitest"
import { type ControlPlane, controlPlane } from "./api-client"
import type { TaskSetup } from "./attempt"
import { TestClock } from "./testing/clock"
import { type FakeControlPlane, startFakeControlPlane } from "./testing/fake-control-plane"
import { livingSleeps, sleepMarker, waitFor } from "./testing/wait"
import { HeldMinHeartbeatGapMs, WorkerAgent } from "./worker"

let cp: FakeControlPlane
let agent: WorkerAgent
/** Every heartbeat the agent sent, as it sent it, with the test clock's time then (if it has one). */
let sent: { at: number | undefined; attempts: ObservedAttempt[]; waitS: number | undefined }[]

interface AgentSetup {
  heartbeatIntervalS?: number
  /** The fake control plane holds heartbeats that ask to wait, up to this long. */
  holdS?: number
  heartbeatWaitS?: number
  /** Default 100 ms, or the agent's own default against a control plane that holds heartbeats. */
  minHeartbeatGapMs?: number
  health?: { startIntervalMs?: number; startTimeoutMs?: number }
  tasks?: TaskSetup
  /** The agent's clock; the real one if absent. */
  clock?: TestClock
}

async function startAgent(options: AgentSetup = {}) {
  cp = await startFakeControlPlane({
    heartbeatIntervalS: options.heartbeatIntervalS ?? 1,
    ...(options.holdS ? { holdS: options.holdS } : {}),
  })
  const api = controlPlane({ api: cp.url, token: cp.token })
  const clock = options.clock
  sent = []
  const recorded: ControlPlane = {
    ...api,
    heartbeat: (workerId, attempts, signal, waitS) => {
      sent.push({ at: clock?.now(), attempts: structuredClone(attempts), waitS })
      return api.heartbeat(workerId, attempts, signal, waitS)
    },
  }
  const minGap = options.minHeartbeatGapMs ?? (options.holdS ? undefined : 100)
  agent = new WorkerAgent({
    api: recorded,
    registration: {
      backendId: "local-workers",
      name: "test-worker",
      resources: { cpu: 2, memoryMiB: 1024, gpu: 0 },
      attributes: { zone: "a" },
    },
    ...(minGap !== undefined ? { minHeartbeatGapMs: minGap } : {}),
    backoffMs: { initial: 50, max: 200 },
    stopGraceMs: 2000,
    health: { startIntervalMs: 100, readyIntervalMs: 200, ...options.health },
    tasks: options.tasks,
    ...(options.heartbeatWaitS !== undefined ? { heartbeatWaitS: options.heartbeatWaitS } : {}),
    ...(clock ? { clock } : {}),
  })
  void agent.start()
}

afterEach(async () => {
  await agent.shutdown()
  await cp.close()
  expect(cp.violations).toEqual([])
})

/** A desired attempt, a task unless `over` says otherwise. */
function want(attemptUid: string, over: Partial<DesiredAttempt> = {}): DesiredAttempt {
  return { attemptUid, action: "run", kind: "task", jobId: "job-1", taskIndex: 0, ...over }
}

const sh = (script: string) => ["sh", "-c", script]

describe("worker loop", () => {
  it("registers with what it offers, then heartbeats", async () => {
    await startAgent()
    await cp.waitForHeartbeat((b) => b.workerId === "w-1")
    expect(cp.registrations[0]?.body).toMatchObject({
      backendId: "local-workers",
      resources: { cpu: 2, memoryMiB: 1024, gpu: 0 },
      attributes: { zone: "a" },
    })
    expect(cp.registrations[0]?.idempotencyKey).toBeTruthy()
  })

  it("reports a task SUCCEEDED with exit 0 while it is desired, then forgets it", async () => {
    await startAgent()
    cp.setDesired([want("t-ok", { command: sh("echo hello from the task") })])
    const done = await cp.waitForReport("t-ok", (a) => a.state === "SUCCEEDED")
    expect(done).toMatchObject({ exitCode: 0 })
    expect(done.logTail).toContain("hello from the task")
    // Still desired: reported again, without the unchanged log.
    const again = await cp.waitForReport("t-ok", (a) => a.state === "SUCCEEDED" && a !== done)
    expect(again.logTail).toBeUndefined()
    cp.setDesired([])
    await cp.waitForHeartbeat((b) => !b.attempts.some((a) => a.attemptUid === "t-ok"))
    expect(agent.known()).toEqual([])
  })

  it("reports the counters a task writes to SWARMPLANE_PROGRESS_FILE, and removes the file once it forgets the task", async () => {
    await startAgent()
    const script =
      'echo "$SWARMPLANE_PROGRESS_FILE"; echo \'{"total": 10, "done": 7, "failed": 1, "retries": 2}\' > "$SWARMPLANE_PROGRESS_FILE"'
    cp.setDesired([want("t-progress", { command: sh(script) })])
    const done = await cp.waitForReport("t-progress", (a) => a.state === "SUCCEEDED")
    // Sent once, with whichever report first saw the file (a RUNNING one, or the final one).
    const sent = cp.heartbeats.flatMap((b) => b.attempts).filter((a) => a.attemptUid === "t-progress")
    expect(sent.find((a) => a.progress)?.progress).toEqual({ total: 10, done: 7, failed: 1, retries: 2 })
    const file = done.logTail?.trim() ?? ""
    expect(existsSync(file)).toBe(true)
    cp.setDesired([])
    await cp.waitForHeartbeat((b) => !b.attempts.some((a) => a.attemptUid === "t-progress"))
    expect(existsSync(file)).toBe(false)
  })

  it("reports a task that exits 3 as FAILED 3", async () => {
    await startAgent()
    cp.setDesired([want("t-three", { command: sh("echo failing >&2; exit 3") })])
    const failed = await cp.waitForReport("t-three", (a) => a.state !== "RUNNING")
    expect(failed).toMatchObject({ state: "FAILED", exitCode: 3 })
    expect(failed.logTail).toContain("failing")
  })

  it("passes the desired env and ATTEMPT_UID to the task", async () => {
    await startAgent()
    cp.setDesired([want("t-env", { command: sh('echo "$SHARD_ID/$ATTEMPT_UID"'), env: { SHARD_ID: "4" } })])
    const done = await cp.waitForReport("t-env", (a) => a.state === "SUCCEEDED")
    expect(done.logTail).toContain("4/t-env")
  })

  it("runs each attempt in a fresh working folder of its own, removed once it ended", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "sp-work-"))
    await startAgent({ tasks: { workRoot } })
    cp.setDesired([
      want("t-a", { command: sh("pwd; ls -A; touch left-here") }),
      want("t-b", { command: sh("pwd; ls -A") }),
    ])
    const [a, b] = await Promise.all(
      ["t-a", "t-b"].map((uid) => cp.waitForReport(uid, (r) => r.logTail?.includes("/") === true)),
    )
    const dirs = [a, b].map((r) => r?.logTail?.trim() ?? "")
    expect(new Set(dirs).size).toBe(2)
    for (const dir of dirs) expect(dir.startsWith(`${workRoot}/swarmplane-`)).toBe(true)
    await waitFor("the working folders to be removed", () => readdirSync(workRoot).length === 0)
  })

  it("keeps the working folders when told to", async () => {
    const workRoot = mkdtempSync(join(tmpdir(), "sp-work-"))
    await startAgent({ tasks: { workRoot, keepWorkDirs: true } })
    cp.setDesired([want("t-keep", { command: sh("echo kept > result") })])
    const done = await cp.waitForReport("t-keep", (r) => r.state === "SUCCEEDED")
    expect(done.state).toBe("SUCCEEDED")
    const [dir] = readdirSync(workRoot)
    expect(existsSync(join(workRoot, dir ?? "", "result"))).toBe(true)
  })

  it("kills a task marked stop (KILLED) and its whole process group", async () => {
    await startAgent()
    const marker = sleepMarker()
    cp.setDesired([want("t-stop", { command: sh(`sleep ${marker} & sleep ${marker}`) })])
    await cp.waitForReport("t-stop", (a) => a.state === "RUNNING")
    await waitFor("the sleeps", () => livingSleeps(marker).length === 2)
    cp.setDesired([want("t-stop", { action: "stop" })])
    await cp.waitForReport("t-stop", (a) => a.state === "KILLED")
    expect(livingSleeps(marker)).toEqual([])
  })

  it("stops a running task that left the desired set, then forgets it", async () => {
    await startAgent()
    const marker = sleepMarker()
    cp.setDesired([want("t-gone", { command: ["sleep", marker] })])
    await waitFor("the sleep", () => livingSleeps(marker).length === 1)
    cp.setDesired([])
    await waitFor("the sleep to be stopped", () => livingSleeps(marker).length === 0)
    await waitFor("the attempt to be forgotten", () => agent.known().length === 0)
  })

  it("holds a new attempt back until the stopping one it replaces has exited and freed its CPUs", async () => {
    await startAgent()
    // The old task takes a while to exit after SIGTERM (as a model flushing its state would).
    const slow = sh('trap "sleep 0.5; exit 143" TERM; while true; do sleep 0.05; done')
    const twoCpus = { cpu: 2, memoryMiB: 512, gpu: 0 }
    cp.setDesired([want("t-old", { command: slow, resources: twoCpus })])
    await cp.waitForReport("t-old", (a) => a.state === "RUNNING")
    // Placement moved on: the old attempt is gone from the set, a new one needs the same 2 CPUs.
    cp.setDesired([want("t-new", { command: sh("echo started"), resources: twoCpus })])
    await cp.waitForReport("t-new", (a) => a.state === "SUCCEEDED")
    const firstNew = cp.heartbeats.findIndex((b) => b.attempts.some((a) => a.attemptUid === "t-new"))
    const oldEnded = cp.heartbeats.findIndex((b) =>
      b.attempts.some((a) => a.attemptUid === "t-old" && a.state !== "RUNNING"),
    )
    expect(oldEnded).toBeGreaterThanOrEqual(0)
    expect(firstNew).toBeGreaterThanOrEqual(oldEnded)
  })

  it("starts a new attempt at once when what is stopping leaves room for it", async () => {
    await startAgent()
    const slow = sh('trap "sleep 1.5; exit 143" TERM; while true; do sleep 0.05; done')
    const oneCpu = { cpu: 1, memoryMiB: 256, gpu: 0 }
    cp.setDesired([want("t-old", { command: slow, resources: oneCpu })])
    await cp.waitForReport("t-old", (a) => a.state === "RUNNING")
    cp.setDesired([want("t-new", { command: sh("echo started"), resources: oneCpu })])
    await cp.waitForReport("t-new", (a) => a.state === "SUCCEEDED")
    // The new one ran to its end while the old one was still stopping (it takes 1.5 s to exit).
    const last = cp.heartbeats.at(-1)!.attempts.find((a) => a.attemptUid === "t-old")
    expect(last?.state).toBe("RUNNING")
  })

  it("on shutdown it stops its work, reports the final states, then leaves", async () => {
    await startAgent()
    const marker = sleepMarker()
    cp.setDesired([want("t-long", { command: ["sleep", marker] })])
    await cp.waitForReport("t-long", (a) => a.state === "RUNNING")
    await agent.shutdown()
    expect(livingSleeps(marker)).toEqual([])
    expect(cp.latest("t-long")?.state).toBe("KILLED")
    expect(cp.left).toEqual(["w-1"])
  })

  it("reports KILLED for an attempt told to stop that it never ran", async () => {
    await startAgent()
    cp.setDesired([want("t-never", { action: "stop" })])
    const report = await cp.waitForReport("t-never", () => true)
    expect(report).toMatchObject({ state: "KILLED" })
  })

  it("heartbeats at once after a local change, not at the next interval", async () => {
    // Waits up to the minimum gap (100 ms) pass on their own; the 60 s interval never does.
    const clock = new TestClock(100)
    await startAgent({ heartbeatIntervalS: 60, clock })
    cp.setDesired([want("t-fast", { command: sh("exit 0") })])
    // Registration is followed by an immediate heartbeat, which hands out the task; its start and its
    // exit bring the next heartbeats forward, so the exit is reported without waiting out the interval.
    await cp.waitForReport("t-fast", (a) => a.state === "SUCCEEDED")
    const done = sent.findIndex((b) =>
      b.attempts.some((a) => a.attemptUid === "t-fast" && a.state === "SUCCEEDED"),
    )
    expect(done).toBeGreaterThan(0)
    // It went out the minimum gap after the heartbeat before it, not the interval.
    expect((sent[done]?.at ?? 0) - (sent[done - 1]?.at ?? 0)).toBe(100)
  })

  it("never heartbeats more often than the minimum gap, however many changes", async () => {
    // Waits up to the minimum gap pass on their own; the 60 s interval only ends by a local change.
    const clock = new TestClock(300)
    await startAgent({ heartbeatIntervalS: 60, minHeartbeatGapMs: 300, clock })
    const uids = Array.from({ length: 8 }, (_, i) => `t-burst-${i}`)
    cp.setDesired(uids.map((uid, i) => want(uid, { command: ["sleep", `0.${i + 1}`] })))
    await cp.waitForHeartbeat((b) =>
      uids.every((uid) => b.attempts.some((a) => a.attemptUid === uid && a.state === "SUCCEEDED")),
    )
    // Eight starts and eight exits, over several heartbeats: every one the minimum gap or more (on the
    // agent's clock) after the one before it, so at most one per 300 ms however the changes fell.
    const times = sent.map((b) => b.at ?? Number.NaN)
    expect(times.length).toBeGreaterThan(3)
    const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0))
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(300)
    const span = (times.at(-1) ?? 0) - (times[0] ?? 0)
    expect(times.length - 1).toBeLessThanOrEqual(span / 300)
  })

  it("keeps work running while heartbeats fail, and reports again when they succeed", async () => {
    await startAgent()
    const marker = sleepMarker()
    cp.setDesired([want("t-keep", { command: ["sleep", marker] })])
    await cp.waitForReport("t-keep", (a) => a.state === "RUNNING")
    cp.failWith(503)
    await waitFor("a few failed heartbeats", () => cp.rejected >= 3)
    expect(livingSleeps(marker)).toHaveLength(1)
    cp.failWith(undefined)
    await cp.waitForReport("t-keep", (a) => a.state === "RUNNING")
    expect(livingSleeps(marker)).toHaveLength(1)
  })

  it("waits as long as a 429's Retry-After asks before the next heartbeat, longer than its own backoff", async () => {
    // Time moves only when this test moves it.
    const clock = new TestClock()
    await startAgent({ clock })
    // Before the first heartbeat (registration is still on its way).
    cp.failWith(503)
    await waitFor("a refused heartbeat", () => cp.rejected === 1)
    // Without a Retry-After: the agent's own backoff, at most 200 ms here.
    const own = await waitFor("the pause after it", () => clock.asleep)
    expect(own.ms).toBeLessThanOrEqual(200)
    cp.failWith(429, 1)
    clock.advance(own.ms)
    for (let refused = 2; refused <= 4; refused++) {
      await waitFor(`refused heartbeat ${refused}`, () => cp.rejected === refused)
      // The server asked for 1 s between tries: the next one is not sooner.
      const pause = await waitFor("the pause after it", () => clock.asleep)
      expect(pause.ms).toBeGreaterThanOrEqual(1000)
      clock.advance(pause.ms - 1)
      expect(clock.asleep).toBe(pause)
      clock.advance(1)
    }
    cp.failWith(undefined)
    await cp.waitForHeartbeat(() => true)
    // Each refused heartbeat went out the pause it asked for after the one before it.
    const times = sent.map((b) => b.at ?? Number.NaN)
    const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0))
    expect(gaps.slice(1, 4).every((gap) => gap >= 1000)).toBe(true)
    expect(cp.rejected).toBe(4)
  })

  it("on 410 worker.dead stops everything and registers again as a new worker", async () => {
    await startAgent()
    const marker = sleepMarker()
    cp.setDesired([want("t-old", { command: ["sleep", marker] })])
    await cp.waitForReport("t-old", (a) => a.state === "RUNNING")
    cp.setDesired([])
    cp.declareDead("w-1")
    const beat = await cp.waitForHeartbeat((b) => b.workerId === "w-2")
    expect(beat.attempts).toEqual([])
    expect(livingSleeps(marker)).toEqual([])
    expect(cp.registrations.map((r) => r.workerId)).toEqual(["w-1", "w-2"])
    expect(cp.registrations[1]?.idempotencyKey).not.toBe(cp.registrations[0]?.idempotencyKey)
  })

  it("runs an echo-server replica until ready, and a router over it", async () => {
    await startAgent()
    const replica = want("r-1", {
      kind: "replica",
      command: ["swarmplane-agent", "echo-server"],
      healthPath: "/health",
    })
    cp.setDesired([replica])
    const ready = await cp.waitForReport("r-1", (a) => a.ready === true)
    expect(ready.state).toBe("RUNNING")
    expect(ready.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    const chat = (base: string, text: string) =>
      fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: text }] }),
      }).then((res) => res.json())
    expect((await chat(ready.endpoint ?? "", "direct")).choices[0].message.content).toBe("echo: direct")

    // A router with no upstream yet is up but not ready; with the replica it is, and it proxies.
    cp.setDesired([replica, want("router-1", { kind: "router", upstreams: [] })])
    const idle = await cp.waitForReport("router-1", (a) => a.endpoint !== undefined)
    expect(idle.ready).toBe(false)
    cp.setDesired([replica, want("router-1", { kind: "router", upstreams: [ready.endpoint ?? ""] })])
    const routed = await cp.waitForReport("router-1", (a) => a.ready === true)
    expect((await chat(routed.endpoint ?? "", "through the router")).choices[0].message.content).toBe(
      "echo: through the router",
    )

    cp.setDesired([
      want("r-1", { ...replica, action: "stop" }),
      want("router-1", { kind: "router", action: "stop" }),
    ])
    await cp.waitForReport("r-1", (a) => a.state === "KILLED" && a.ready === false)
    await cp.waitForReport("router-1", (a) => a.state === "KILLED")
  })

  it("fails a replica that never becomes healthy", async () => {
    await startAgent({ health: { startIntervalMs: 50, startTimeoutMs: 500 } })
    const marker = sleepMarker()
    cp.setDesired([want("r-sick", { kind: "replica", command: ["sleep", marker], healthPath: "/health" })])
    const failed = await cp.waitForReport("r-sick", (a) => a.state === "FAILED")
    expect(failed.message).toContain("/health")
    expect(failed.ready).toBe(false)
    expect(livingSleeps(marker)).toEqual([])
  })
})

describe("held heartbeats (long-poll)", () => {
  // Holds of 300 s and an interval of 30 s the agent's clock never reaches (waits of up to 1 s pass
  // on their own): what is reported came from a held answer or a local change, not from either ending.
  const held = { heartbeatIntervalS: 30, holdS: 300, heartbeatWaitS: 300 }

  it("work set while the agent's heartbeat is held starts at once, not at the next interval", async () => {
    const clock = new TestClock(1000)
    await startAgent({ ...held, clock })
    // The first answer says the control plane holds heartbeats; the next one asks to wait.
    await cp.waitForHeartbeat((b) => b.waitS === 300)
    const before = cp.heartbeats.length
    cp.setDesired([want("t-now", { command: sh("exit 0") })])
    // The held answer brought the work; its start and its exit brought the reports.
    const done = await cp.waitForReport("t-now", (a) => a.state === "SUCCEEDED")
    expect(done.exitCode).toBe(0)
    expect(cp.heartbeats.length).toBeGreaterThan(before)
    // Between heartbeats it never asked to wait more than the held minimum gap.
    expect(clock.sleeps.length).toBeGreaterThan(0)
    expect(Math.max(...clock.sleeps.map((s) => s.ms))).toBeLessThanOrEqual(HeldMinHeartbeatGapMs)
  })

  it("an attempt that ends while the heartbeat is held is reported at once (the hold is cut short)", async () => {
    const clock = new TestClock(1000)
    await startAgent({ ...held, clock })
    // The task runs until the test lets it end.
    const go = join(mkdtempSync(join(tmpdir(), "sp-go-")), "go")
    cp.setDesired([want("t-ends", { command: sh(`while [ ! -e '${go}' ]; do sleep 0.02; done`) })])
    // In step once it reported the task running: that heartbeat waits for new work, held.
    const running = await cp.waitForHeartbeat((b) =>
      b.attempts.some((a) => a.attemptUid === "t-ends" && a.state === "RUNNING"),
    )
    expect(running.waitS).toBe(300)
    writeFileSync(go, "")
    const ended = await cp.waitForReport("t-ends", (a) => a.state === "SUCCEEDED")
    expect(ended.exitCode).toBe(0)
    // The report went out the held minimum gap (50 ms) after the held heartbeat it cut short.
    const i = sent.findIndex((b) =>
      b.attempts.some((a) => a.attemptUid === "t-ends" && a.state === "SUCCEEDED"),
    )
    const cut = sent[i - 1]
    expect(cut?.waitS).toBe(300)
    expect(cut?.attempts.find((a) => a.attemptUid === "t-ends")?.state).toBe("RUNNING")
    expect((sent[i]?.at ?? 0) - (cut?.at ?? 0)).toBeLessThanOrEqual(HeldMinHeartbeatGapMs)
  })

  it("never asks to wait a control plane that does not hold heartbeats, nor when told not to", async () => {
    await startAgent({ heartbeatIntervalS: 1 })
    await cp.waitForHeartbeat(() => cp.heartbeats.length >= 3)
    expect(cp.heartbeats.filter((b) => b.waitS !== undefined)).toEqual([])
    await agent.shutdown()
    await cp.close()
    await startAgent({ heartbeatIntervalS: 1, holdS: 20, heartbeatWaitS: 0 })
    await cp.waitForHeartbeat(() => cp.heartbeats.length >= 3)
    expect(cp.heartbeats.filter((b) => b.waitS !== undefined)).toEqual([])
  })
})
