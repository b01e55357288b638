/**
 * A heartbeat held open until its worker's desired set changes, through the control plane's own parts
 * (memory store, the real reconcile pass and heartbeat route): woken by the in-process signal when the
 * pass commits a placement, by a re-read of the store when no signal comes (the API and the pass in
 * different processes), answered with the unchanged set when the hold ends, at once for an agent that
 * does not ask to wait, and refused for a dead worker. Time is the tests' own: a clock whose sleeps end
 * only when the test says, so nothing races the wall clock.
 */
import { describe, expect, test } from "vitest"
import { createApp } from "../../api/app"
import { reconcilePass } from "../../control/reconcile"
import { BackendConfig } from "../../model/backend"
import { JobSpec } from "../../model/job"
import type { DesiredAttempt, ObservedAttempt } from "../../model/worker"
import { MemoryQueue } from "../../queue/memory"
import { createRuntime } from "../../runtime"
import { MemoryStore } from "../../store/memory"
import { type Clock, FakeClock } from "../../util/clock"
import { memoryLogger } from "../../util/logger"
import { heartbeat } from "./heartbeat"
import { holdMs, holdUntilChanged, inStep } from "./held-heartbeat"

/** A clock whose sleeps end only when `release()` is called (time moves by what each slept). */
class SteppedClock implements Clock {
  private current = Date.parse("2026-01-01T00:00:00Z")
  private readonly sleepers: { ms: number; wake: () => void }[] = []
  now(): number {
    return this.current
  }
  sleep(ms: number): Promise<void> {
    return new Promise((wake) => this.sleepers.push({ ms, wake }))
  }
  get sleeping(): number {
    return this.sleepers.length
  }
  release(): void {
    for (const s of this.sleepers.splice(0)) {
      this.current += s.ms
      s.wake()
    }
  }
}

/** Resolve once `check` holds, or fail after `ms` of wall time saying what was awaited. */
async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

async function setup(clock: Clock = new FakeClock()) {
  const rt = createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue({ clock: new FakeClock() }),
    clock,
    logger: memoryLogger(),
    pepper: "p",
    secrets: { get: async () => "" },
    heartbeatHold: true,
  })
  await rt.repos.projects.create("p")
  await rt.repos.backends.put(
    "p",
    "pool",
    BackendConfig.parse({ type: "workers", heartbeatIntervalS: 30, heartbeatGraceS: 90 }),
  )
  const { worker, credential } = await rt.repos.workers.register("p", {
    backendId: "pool",
    resources: { cpu: 4, memoryMiB: 4096, gpu: 0 },
    attributes: {},
  })
  let jobs = 0
  /** Submit a one-task job and run a pass, which places it on the worker. */
  const place = async () => {
    await rt.transitions.jobs.create("p", `job-${++jobs}`, JobSpec.parse({ command: ["true"] }), "pool")
    const pass = await reconcilePass(rt, (await rt.repos.backends.get("p", "pool"))!, "test")
    expect(pass.placed).toBe(1)
  }
  return { rt, worker, credential, place }
}

describe("holdUntilChanged", () => {
  test("a placement committed for the worker wakes the hold at once, through the in-process signal", async () => {
    const clock = new SteppedClock()
    const { rt, worker, place } = await setup(clock)
    const since = rt.assignments.mark()
    const hold = holdUntilChanged(rt, "p", worker.id, new Set(), { holdMs: 20_000, since })
    await until("the hold to wait", () => clock.sleeping > 0)
    await place()
    expect(await hold).toBe("changed")
    // No re-read round ended: the signal answered, not the store poll.
    expect(clock.now()).toBe(Date.parse("2026-01-01T00:00:00Z"))
  })

  test("a placement committed after the heartbeat's read but before the hold began still wakes it", async () => {
    const clock = new SteppedClock()
    const { rt, worker, place } = await setup(clock)
    const since = rt.assignments.mark()
    await place()
    expect(await holdUntilChanged(rt, "p", worker.id, new Set(), { holdMs: 20_000, since })).toBe("changed")
  })

  test("without a signal (the pass runs in another process) a re-read of the store finds the placement", async () => {
    const clock = new SteppedClock()
    const { rt, worker, place } = await setup(clock)
    // The API's process: the store and the clock, no signal from the pass.
    const apiSide = { repos: rt.repos, clock }
    const hold = holdUntilChanged(apiSide, "p", worker.id, new Set(), {
      holdMs: 20_000,
      since: 0,
      pollMs: 1000,
    })
    let ended: string | undefined
    void hold.then((end) => (ended = end))
    await until("the hold to wait", () => clock.sleeping > 0)
    clock.release() // a re-read with nothing new: it waits again
    await until("the hold to wait again", () => clock.sleeping > 0)
    expect(ended).toBeUndefined()
    await place()
    clock.release()
    expect(await hold).toBe("changed")
    expect(clock.now() - Date.parse("2026-01-01T00:00:00Z")).toBe(2000)
  })

  test("the hold ends with its timeout when the set does not change", async () => {
    const clock = new FakeClock()
    const { rt, worker, place } = await setup(clock)
    await place()
    const known = new Set((await heartbeat(rt, "p", worker.id, [])).desired.map((d) => d.attemptUid))
    expect(known.size).toBe(1)
    const start = clock.now()
    expect(
      await holdUntilChanged(rt, "p", worker.id, known, { holdMs: 5000, since: rt.assignments.mark() }),
    ).toBe("timeout")
    expect(clock.now() - start).toBe(5000)
  })

  test("a client that goes away releases the hold", async () => {
    const clock = new SteppedClock()
    const { rt, worker } = await setup(clock)
    const abort = new AbortController()
    const hold = holdUntilChanged(rt, "p", worker.id, new Set(), {
      holdMs: 20_000,
      since: 0,
      abort: abort.signal,
    })
    await until("the hold to wait", () => clock.sleeping > 0)
    abort.abort()
    expect(await hold).toBe("aborted")
  })
})

describe("which heartbeats are held, and for how long", () => {
  const task = (uid: string): DesiredAttempt => ({
    attemptUid: uid,
    action: "run",
    kind: "task",
    jobId: "j",
    taskIndex: 0,
  })
  const running = (uid: string) => ({ attemptUid: uid, state: "RUNNING" as const })
  const cases: Record<string, { desired: DesiredAttempt[]; observed: ObservedAttempt[]; held: boolean }> = {
    "runs exactly its set": { desired: [task("a")], observed: [running("a")], held: true },
    "an ended attempt reported beside its set": {
      desired: [],
      observed: [{ attemptUid: "a", state: "SUCCEEDED" }],
      held: true,
    },
    "a new attempt to start": { desired: [task("a"), task("b")], observed: [running("a")], held: false },
    "an attempt to stop": { desired: [], observed: [running("a")], held: false },
    "a router (its upstreams change with no placement)": {
      desired: [{ ...task("r"), kind: "router" }],
      observed: [running("r")],
      held: false,
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(`${name}: ${tc.held ? "held" : "answered at once"}`, () => {
      expect(inStep(tc.desired, tc.observed)).toBe(tc.held)
    })

  test("a hold is at most 20 s and a third of the grace, so a held worker never looks silent", () => {
    expect(holdMs(25, 90)).toBe(20_000)
    expect(holdMs(20, 15)).toBe(5000)
    expect(holdMs(0, 90)).toBe(0)
  })
})

describe("POST /v1/workers/{id}/heartbeat?waitS", () => {
  async function api(clock: Clock, heartbeatHold = true) {
    const s = await setup(clock)
    const { key } = await s.rt.repos.projects.createKey("p", "worker")
    const app = createApp({ ...s.rt, rateLimit: false, heartbeatHold })
    const beat = async (query: string, attempts: unknown[] = []) => {
      const res = await app.request(`/v1/workers/${s.worker.id}/heartbeat${query}`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${key}`,
          "Content-Type": "application/json",
          "Swarmplane-Worker-Credential": s.credential,
        },
        body: JSON.stringify({ attempts }),
      })
      return { status: res.status, json: await res.json() }
    }
    return { ...s, beat }
  }

  test("an agent that does not ask to wait is answered at once, and told the server holds heartbeats", async () => {
    const clock = new SteppedClock()
    const { beat } = await api(clock)
    const res = await beat("")
    expect(res.status).toBe(200)
    expect(res.json).toEqual({ desired: [], heartbeatIntervalS: 30, holdS: 20 })
    expect(clock.sleeping).toBe(0)
  })

  test("a control plane that does not hold heartbeats (the deployed default) answers a waiting one at once, without holdS", async () => {
    const clock = new SteppedClock()
    const { beat } = await api(clock, false)
    const res = await beat("?waitS=20")
    expect(res.status).toBe(200)
    expect(res.json).toEqual({ desired: [], heartbeatIntervalS: 30 })
    expect(clock.sleeping).toBe(0)
  })

  test("a held heartbeat is answered with the new attempt when a pass places work on the worker", async () => {
    const clock = new SteppedClock()
    const { beat, place } = await api(clock)
    const answer = beat("?waitS=20")
    await until("the heartbeat to be held", () => clock.sleeping > 0)
    await place()
    const res = await answer
    expect(res.status).toBe(200)
    expect(res.json.desired).toHaveLength(1)
    expect(res.json.desired[0]).toMatchObject({ action: "run", kind: "task", command: ["true"] })
  })

  test("a held heartbeat with nothing new is answered with the unchanged set when the hold ends", async () => {
    const clock = new FakeClock()
    const { beat, place } = await api(clock)
    await place()
    const [running] = (await beat("")).json.desired
    const start = clock.now()
    const res = await beat("?waitS=20", [{ attemptUid: running.attemptUid, state: "RUNNING" }])
    expect(res.json.desired.map((d: { attemptUid: string }) => d.attemptUid)).toEqual([running.attemptUid])
    expect(clock.now() - start).toBe(20_000)
  })

  test("a worker with an attempt it has not started yet is not held", async () => {
    const clock = new SteppedClock()
    const { beat, place } = await api(clock)
    await place()
    const res = await beat("?waitS=20")
    expect(res.json.desired).toHaveLength(1)
    expect(clock.sleeping).toBe(0)
  })

  test("a dead worker is refused as without waiting", async () => {
    const clock = new SteppedClock()
    const { rt, worker, beat } = await api(clock)
    await rt.repos.workers.leave("p", worker.id)
    const res = await beat("?waitS=20")
    expect(res.status).toBe(410)
    expect(res.json.error.code).toBe("worker.dead")
  })
})
