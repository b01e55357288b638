/**
 * A discrete-event simulation on a fake clock, for the randomized fault runs: timers that resolve in
 * clock order (the clock jumps to the next one), an API client with the agent's timeout, and simulated
 * worker agents that register, heartbeat and "run" attempts for the time their job's environment says,
 * exactly as the real agent treats its desired set. The workers record every run, so the checks can
 * say whether two attempts of one task ever ran at once, or an attempt outlived its job.
 */
import type { DesiredAttempt } from "@swarmplane/core/contract/worker"
import type { FakeClock } from "@swarmplane/core/util/clock"
import type { Faults, Rng } from "./faults"

/** Timers on a fake clock: `run` moves the clock from one due time (or hang end) to the next. */
export class Sim {
  private timers: { at: number; seq: number; fire: () => void }[] = []
  private seq = 0
  constructor(
    readonly clock: FakeClock,
    readonly faults: Faults,
  ) {}

  get now(): number {
    return this.clock.now()
  }

  /** Resolves when the clock reaches `at`. */
  at(at: number): Promise<void> {
    return new Promise((fire) => {
      this.timers.push({ at: Math.max(at, this.now), seq: this.seq++, fire })
    })
  }

  wait(ms: number): Promise<void> {
    return this.at(this.now + ms)
  }

  /** Let every chain of promises that can go on go on (nothing here waits on I/O). */
  async settle(): Promise<void> {
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve))
  }

  /** Advance to the next timer or hang end and fire what is due; false when nothing is left to fire. */
  async step(limit: number): Promise<boolean> {
    const hang = this.faults.nextHangAt()
    const next = Math.min(...this.timers.map((t) => t.at), hang ?? Number.POSITIVE_INFINITY)
    if (!Number.isFinite(next) || next > limit) return false
    if (next > this.now) this.clock.advance(next - this.now)
    this.faults.releaseDue()
    const due = this.timers.filter((t) => t.at <= this.now).sort((a, b) => a.at - b.at || a.seq - b.seq)
    this.timers = this.timers.filter((t) => t.at > this.now)
    for (const t of due) t.fire()
    await this.settle()
    return true
  }

  /** Run until `done()` or the clock passes `limit`. */
  async runUntil(done: () => boolean, limit: number): Promise<void> {
    await this.settle()
    while (!done() && this.now < limit) if (!(await this.step(limit))) break
  }
}

export interface Answer {
  status: number
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  json: any
}

/** How the simulated clients reach the API (an in-process Hono app). */
export type Fetch = (path: string, init: RequestInit) => Response | Promise<Response>

/** One call, given up after `timeoutMs` of clock time as the agent does (status 0); the call goes on. */
export async function call(
  sim: Sim,
  fetch: Fetch,
  key: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<Answer> {
  const request = (async (): Promise<Answer> => {
    const res = await fetch(path, {
      method,
      headers: {
        Authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    return { status: res.status, json: text ? JSON.parse(text) : undefined }
  })()
  return Promise.race([request, sim.wait(timeoutMs).then(() => ({ status: 0, json: undefined }))])
}

/** Whether an answer means "try again later": no answer, a server error, a conflict in progress, 429. */
export const retryable = (a: Answer) =>
  a.status === 0 || a.status >= 500 || [408, 409, 429].includes(a.status)

/** One run of an attempt on a simulated worker: from its start to its exit or kill. */
export interface Run {
  attemptUid: string
  jobId: string
  index: number
  workerId: string
  startedAt: number
  /** When the process ended (exit or kill); undefined while it runs. */
  endedAt?: number
  exitCode?: number
  how?: "exited" | "stopped" | "worker_crashed" | "worker_declared_dead"
  /** The final state reached the control plane in a heartbeat's answer. */
  delivered: boolean
}

/** What every simulated worker shares: the runs, which attempts run now, and the checks' findings. */
export class Substrate {
  readonly runs: Run[] = []
  /** Running attempts by task (`<jobId>/<index>`). */
  readonly running = new Map<string, Set<Run>>()
  /** Attempts started twice (by uid), and two attempts of one task at once. */
  readonly overlaps: { task: string; uids: string[]; at: number }[] = []
  readonly startedTwice: string[] = []
  /** Failed runs per task so far (a flaky task fails its first N). */
  readonly failedRuns = new Map<string, number>()
  private readonly started = new Set<string>()

  start(run: Run): void {
    const task = `${run.jobId}/${run.index}`
    if (this.started.has(run.attemptUid)) this.startedTwice.push(run.attemptUid)
    this.started.add(run.attemptUid)
    const now = this.running.get(task) ?? new Set()
    if (now.size)
      this.overlaps.push({
        task,
        uids: [...now].map((r) => r.attemptUid).concat(run.attemptUid),
        at: run.startedAt,
      })
    now.add(run)
    this.running.set(task, now)
    this.runs.push(run)
  }

  end(run: Run, at: number, how: NonNullable<Run["how"]>, exitCode?: number): void {
    if (run.endedAt !== undefined) return
    run.endedAt = at
    run.how = how
    if (exitCode !== undefined) run.exitCode = exitCode
    this.running.get(`${run.jobId}/${run.index}`)?.delete(run)
  }
}

interface Known {
  run: Run
  /** Final state delivered and forgotten only after it left the desired set. */
  finalDelivered: boolean
}

export interface WorkerOptions {
  sim: Sim
  rng: Rng
  fetch: Fetch
  key: string
  backendId: string
  substrate: Substrate
  name: string
  cpu: number
}

/**
 * A simulated worker agent, as `packages/agent/src/worker.ts` behaves: it registers (one idempotency
 * key per registration), heartbeats every interval or soon after an attempt ended, starts what the
 * desired set adds (never an attempt that already ended here), stops what leaves it, keeps working
 * when a heartbeat fails, and stops everything and registers again when told it was declared dead.
 * A crash kills its attempts at once (the watcher kills each process group) and ends the agent.
 */
export class SimWorker {
  id: string | undefined
  private credential = ""
  private readonly known = new Map<string, Known>()
  private readonly ended = new Set<string>()
  private failures = 0
  private intervalMs = 5_000
  private wake: (() => void) | undefined
  crashed = false
  stopped = false
  beats = { ok: 0, failed: 0 }

  constructor(readonly o: WorkerOptions) {}

  /** Attempts running here now. */
  runningRuns(): Run[] {
    return [...this.known.values()].map((k) => k.run).filter((r) => r.endedAt === undefined)
  }

  async loop(): Promise<void> {
    while (!this.crashed && !this.stopped) {
      if (!this.id) {
        await this.register()
        continue
      }
      const ok = await this.beat()
      if (this.crashed || this.stopped) return
      const wait = ok ? this.intervalMs : this.backoff()
      await Promise.race([this.o.sim.wait(wait), new Promise<void>((r) => (this.wake = r))])
      this.wake = undefined
    }
  }

  /** The machine dies: its processes are killed with it, nothing more is reported. */
  crash(): void {
    this.crashed = true
    for (const run of this.runningRuns()) this.o.substrate.end(run, this.o.sim.now, "worker_crashed")
    this.wake?.()
  }

  private backoff(): number {
    const base = Math.min(30_000, 500 * 2 ** Math.min(this.failures - 1, 20))
    return base / 2 + this.o.rng.next() * (base / 2)
  }

  private async register(): Promise<void> {
    const key = `reg-${this.o.name}-${this.o.rng.int(0, 1e9)}`
    for (;;) {
      if (this.crashed || this.stopped) return
      const a = await call(
        this.o.sim,
        this.o.fetch,
        this.o.key,
        "POST",
        "/v1/workers/register",
        {
          backendId: this.o.backendId,
          name: this.o.name,
          resources: { cpu: this.o.cpu, memoryMiB: this.o.cpu * 1024, gpu: 0 },
        },
        { "Idempotency-Key": key },
      )
      if (a.status === 201) {
        this.id = a.json.worker.id
        this.credential = a.json.credential
        this.intervalMs = a.json.heartbeatIntervalS * 1000
        this.failures = 0
        return
      }
      if (!retryable(a)) throw new Error(`registration refused: ${a.status} ${JSON.stringify(a.json)}`)
      this.failures++
      await this.o.sim.wait(this.backoff())
    }
  }

  private observe(k: Known) {
    const { run } = k
    if (run.endedAt === undefined) return { attemptUid: run.attemptUid, state: "RUNNING" as const }
    if (run.how === "exited")
      return run.exitCode === 0
        ? { attemptUid: run.attemptUid, state: "SUCCEEDED" as const, exitCode: 0 }
        : {
            attemptUid: run.attemptUid,
            state: "FAILED" as const,
            exitCode: run.exitCode,
            logTail: `shard ${run.index}: exiting with ${run.exitCode}\n`,
          }
    return { attemptUid: run.attemptUid, state: "KILLED" as const }
  }

  /** One heartbeat; false when it failed (the agent backs off and keeps its work going). */
  private async beat(): Promise<boolean> {
    const sent = [...this.known.values()].map((k) => ({ k, report: this.observe(k) }))
    const a = await call(
      this.o.sim,
      this.o.fetch,
      this.o.key,
      "POST",
      `/v1/workers/${this.id}/heartbeat`,
      { attempts: sent.map((s) => s.report) },
      { "Swarmplane-Worker-Credential": this.credential },
    )
    if (this.crashed || this.stopped) return false
    if (a.status === 200) {
      this.beats.ok++
      this.failures = 0
      for (const { k, report } of sent)
        if (report.state !== "RUNNING") {
          k.finalDelivered = true
          k.run.delivered = true
        }
      this.intervalMs = a.json.heartbeatIntervalS * 1000
      this.apply(a.json.desired as DesiredAttempt[])
      return true
    }
    this.beats.failed++
    if (a.status === 410 || (a.status === 404 && a.json?.error?.code === "worker.not_found")) {
      // Declared dead: its attempts were requeued elsewhere. Stop them all, register anew.
      for (const run of this.runningRuns()) this.o.substrate.end(run, this.o.sim.now, "worker_declared_dead")
      for (const uid of this.known.keys()) this.ended.add(uid)
      this.known.clear()
      this.id = undefined
      return true
    }
    if (!retryable(a)) throw new Error(`heartbeat refused: ${a.status} ${JSON.stringify(a.json)}`)
    this.failures++
    return false
  }

  private apply(desired: DesiredAttempt[]): void {
    const listed = new Set<string>()
    for (const d of desired) {
      listed.add(d.attemptUid)
      if (d.action !== "run" || this.known.has(d.attemptUid) || this.ended.has(d.attemptUid)) continue
      this.start(d)
    }
    for (const [uid, k] of this.known) {
      if (listed.has(uid)) continue
      if (k.run.endedAt === undefined) {
        this.o.substrate.end(k.run, this.o.sim.now, "stopped")
        this.wake?.()
      } else if (k.finalDelivered) {
        this.known.delete(uid)
        this.ended.add(uid)
      }
    }
  }

  private start(d: DesiredAttempt): void {
    if (d.kind !== "task" || d.jobId === undefined) return
    const env = d.env ?? {}
    const run: Run = {
      attemptUid: d.attemptUid,
      jobId: d.jobId,
      index: d.taskIndex,
      workerId: this.id!,
      startedAt: this.o.sim.now,
      delivered: false,
    }
    this.o.substrate.start(run)
    this.known.set(d.attemptUid, { run, finalDelivered: false })
    const task = `${run.jobId}/${run.index}`
    const failing = (this.o.substrate.failedRuns.get(task) ?? 0) < Number(env.SIM_FAIL_RUNS ?? 0)
    void this.o.sim.wait(Number(env.SIM_MS ?? 1000)).then(() => {
      if (run.endedAt !== undefined) return
      const code = failing ? Number(env.SIM_EXIT ?? 1) : 0
      if (code) this.o.substrate.failedRuns.set(task, (this.o.substrate.failedRuns.get(task) ?? 0) + 1)
      this.o.substrate.end(run, this.o.sim.now, "exited", code)
      // An exit brings the next heartbeat forward (the agent's minimum gap is 250 ms).
      void this.o.sim.wait(250).then(() => this.wake?.())
    })
  }
}
