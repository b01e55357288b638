/**
 * The worker loop: register, then heartbeat. Each heartbeat reports every attempt this worker knows
 * of and gets back the complete desired set, which the loop applies: start what is new, stop what is
 * marked `stop` or no longer listed, forget what ended once its final state was delivered and it left
 * the set. Local changes (an exit, a replica turning ready, an attempt started) bring the next
 * heartbeat forward.
 *
 * Long-poll: while the agent runs exactly what it was told (and the control plane holds heartbeats),
 * each heartbeat asks to wait (`waitS`): the answer comes when new work is placed here, an attempt is
 * to stop, or the hold ends, and the next heartbeat follows at once. A local change cuts a held
 * heartbeat short, so what changed here is reported at once too.
 */
import { randomUUID } from "node:crypto"
import { setTimeout as sleep } from "node:timers/promises"
import type { DesiredAttempt } from "@swarmplane/core/contract/worker"
import { ApiError, type ControlPlane, type RegisterBody } from "./api-client"
import {
  type Attempt,
  type AttemptContext,
  NeverStartedAttempt,
  ProcessAttempt,
  type TaskSetup,
} from "./attempt"
import { type Logger, silentLogger } from "./logger"
import { bindHostFor } from "./net"
import type { HealthWatchOptions } from "./replica-health"
import { fitLogBudget, LogBudgetChars } from "./report-budget"
import { RouterAttempt } from "./router-attempt"

export interface WorkerOptions {
  api: ControlPlane
  registration: RegisterBody
  /** Host in reported endpoints; default 127.0.0.1. */
  advertiseHost?: string
  /** Host replicas and routers listen on; loopback or all interfaces, after `advertiseHost`. */
  bindHost?: string
  log?: Logger
  /** SIGTERM → SIGKILL grace of a stop. */
  stopGraceMs?: number
  /**
   * Heartbeats never come closer together than this, however many local changes there are. Default
   * `MinHeartbeatGapMs`, or `HeldMinHeartbeatGapMs` against a control plane that holds heartbeats.
   */
  minHeartbeatGapMs?: number
  /** First and largest wait between failed calls (doubling, with jitter). */
  backoffMs?: { initial: number; max: number }
  health?: Partial<Omit<HealthWatchOptions, "url">>
  /** How task and replica processes run: sandbox, records, working folders. */
  tasks?: TaskSetup
  /**
   * Long-poll: ask the control plane to hold each heartbeat up to this many seconds until there is
   * new work (`DefaultHeartbeatWaitS`). 0: heartbeat at the interval only, as agents before it did.
   */
  heartbeatWaitS?: number
  /** Time for every wait and reading of the loop; the real one by default. Tests pass their own. */
  clock?: WorkerClock
}

/** The worker loop's time: what it reads, and how it waits (between heartbeats, before a retry). */
export interface WorkerClock {
  /** Milliseconds since the epoch. */
  now(): number
  /** Resolve after `ms`; end early (resolve or reject, either will do) once `signal` is aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>
}

const realClock: WorkerClock = {
  now: () => Date.now(),
  sleep: (ms, signal) => sleep(ms, undefined, { signal }),
}

/** What an agent asks a heartbeat to wait for at most; the control plane holds it less (its `holdS`). */
export const DefaultHeartbeatWaitS = 20

/** The least time between two heartbeats by default. */
export const MinHeartbeatGapMs = 250
/**
 * The same against a control plane that holds heartbeats (the local plane, on this machine or a
 * near one): a change here (an exit, a start) is reported 50 ms after the last heartbeat at most,
 * so a freed slot is filled in a round trip, not a quarter second.
 */
export const HeldMinHeartbeatGapMs = 50

/** A failure trying again cannot fix (a refused token, an unknown backend): the agent should exit. */
export class FatalError extends Error {}

export class WorkerAgent {
  workerId: string | undefined
  private readonly attempts = new Map<string, Attempt>()
  /**
   * Attempts that ended here and were forgotten. An attempt never runs twice: if a lagging answer
   * lists one again, it is reported as what it was instead of being started anew.
   */
  private readonly ended = new Map<string, number>()
  /** What each attempt started here was placed with (see `fits`). */
  private readonly resourcesOf = new Map<string, NonNullable<DesiredAttempt["resources"]>>()
  /** Attempts held back until stopping ones free their resources (logged once each). */
  private readonly deferred = new Set<string>()
  private readonly abort = new AbortController()
  private readonly ctx: AttemptContext
  private readonly log: Logger
  private readonly clock: WorkerClock
  private stopping = false
  private running: Promise<void> | undefined
  private intervalMs = 10_000
  private lastBeatAt = 0
  private kicked = false
  private wake: (() => void) | undefined
  private failures = 0
  /** The last failed heartbeat's `Retry-After`, ms. */
  private retryAfter: number | undefined
  private beats = 0
  /** The control plane holds heartbeats that ask to wait (its last answer had `holdS`). */
  private serverHolds = false
  /** The last desired set applied. */
  private lastDesired: DesiredAttempt[] = []
  /** Cuts the heartbeat held open now short (a local change to report). */
  private held: AbortController | undefined

  constructor(private readonly options: WorkerOptions) {
    this.log = options.log ?? silentLogger
    this.clock = options.clock ?? realClock
    const advertiseHost = options.advertiseHost ?? "127.0.0.1"
    this.ctx = {
      advertiseHost,
      bindHost: options.bindHost ?? bindHostFor(advertiseHost),
      onChange: () => this.kick(),
      log: this.log,
      stopGraceMs: options.stopGraceMs ?? 5000,
      health: options.health,
      tasks: options.tasks,
    }
  }

  /** Run until `shutdown()`; rejects with `FatalError` when registration is refused for good. */
  start(): Promise<void> {
    this.running ??= this.loop()
    return this.running
  }

  /** Heartbeat soon (at most a few per second), e.g. because an attempt ended. */
  kick(): void {
    this.kicked = true
    this.held?.abort()
    this.wake?.()
  }

  /** Stop every attempt (SIGTERM, then SIGKILL after the grace), send a last heartbeat, end `start()`. */
  async shutdown(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true
      this.abort.abort()
      this.wake?.()
    }
    await (this.running ?? this.stopAll()).catch(() => {})
  }

  /** SIGKILL every attempt's process group now, synchronously: the agent is exiting regardless. */
  killAllNow(): void {
    for (const attempt of this.attempts.values()) attempt.killNow()
  }

  /** Attempt ids this worker currently knows of (for tests and status). */
  known(): string[] {
    return [...this.attempts.keys()]
  }

  private async loop(): Promise<void> {
    try {
      while (!this.stopping) {
        if (this.workerId === undefined) {
          await this.register()
          continue
        }
        const ok = await this.beat()
        if (!this.stopping && this.workerId !== undefined) await this.waitForNext(ok)
      }
    } finally {
      await this.stopAll()
      await this.lastHeartbeat()
    }
  }

  private async register(): Promise<void> {
    // One key per registration: a retry after a lost answer gets the same worker, not a second one.
    const key = randomUUID()
    for (let failures = 1; !this.stopping; failures++) {
      try {
        const r = await this.options.api.register(this.options.registration, key, this.abort.signal)
        this.workerId = r.workerId
        this.intervalMs = this.clampInterval(r.heartbeatIntervalS)
        this.log.info(`registered as worker ${r.workerId} of backend ${this.options.registration.backendId}`)
        return
      } catch (error) {
        if (this.stopping) return
        if (error instanceof ApiError && !error.retryable)
          throw new FatalError(`registration refused: ${error.message}`)
        this.log.warn(`registration failed (try ${failures}): ${message(error)}`)
        await this.pause(this.backoff(failures, error instanceof ApiError ? error.retryAfterMs : undefined))
      }
    }
  }

  /** One heartbeat; false when it failed and the next one should back off. */
  private async beat(): Promise<boolean> {
    const workerId = this.workerId ?? ""
    const observations = [...this.attempts.values()].map((a) => a.observe())
    fitLogBudget(
      observations.map((o) => o.report),
      LogBudgetChars,
      this.beats++,
    )
    this.lastBeatAt = this.clock.now()
    this.kicked = false
    const waitS = this.longPolls() ? this.waitS() : 0
    const held = waitS > 0 ? new AbortController() : undefined
    this.held = held
    try {
      const answer = await this.options.api.heartbeat(
        workerId,
        observations.map((o) => o.report),
        held ? AbortSignal.any([this.abort.signal, held.signal]) : this.abort.signal,
        waitS || undefined,
      )
      for (const o of observations) o.delivered()
      if (this.failures > 0) this.log.info(`heartbeats resumed after ${this.failures} failures`)
      this.failures = 0
      this.intervalMs = this.clampInterval(answer.heartbeatIntervalS)
      this.serverHolds = (answer.holdS ?? 0) > 0
      if (!this.stopping) this.apply(answer.desired)
      return true
    } catch (error) {
      if (this.stopping) return false
      // A local change cut the held heartbeat short: the next one reports it (it was applied or not, a
      // heartbeat reports everything again).
      if (held?.signal.aborted) return true
      if (error instanceof ApiError && error.workerGone) {
        this.log.warn(
          `the control plane no longer knows worker ${workerId} (${error.code}); stopping all work`,
        )
        await this.stopAll()
        this.attempts.clear()
        this.workerId = undefined
        return true
      }
      this.failures++
      this.retryAfter = error instanceof ApiError ? error.retryAfterMs : undefined
      this.log.warn(`heartbeat failed (try ${this.failures}), work goes on: ${message(error)}`)
      return false
    } finally {
      if (this.held === held) this.held = undefined
    }
  }

  private waitS(): number {
    return Math.max(0, this.options.heartbeatWaitS ?? DefaultHeartbeatWaitS)
  }

  /**
   * Whether the next heartbeat asks to wait: the control plane holds heartbeats, and after this report
   * the agent runs exactly what it was told (nothing held back, nothing to stop, no router, whose
   * upstreams change without a placement). Otherwise it heartbeats at the interval.
   */
  private longPolls(): boolean {
    if (this.waitS() === 0 || !this.serverHolds || this.deferred.size) return false
    const listed = new Set<string>()
    for (const d of this.lastDesired) {
      if (d.kind === "router" || d.action !== "run" || !this.attempts.has(d.attemptUid)) return false
      listed.add(d.attemptUid)
    }
    for (const [uid, attempt] of this.attempts) if (!attempt.finished && !listed.has(uid)) return false
    return true
  }

  /** Apply the complete desired set. */
  private apply(desired: DesiredAttempt[]): void {
    this.lastDesired = desired
    const listed = new Set<string>()
    for (const d of desired) {
      listed.add(d.attemptUid)
      const current = this.attempts.get(d.attemptUid)
      if (d.action === "run") {
        if (current) current.update(d)
        else if (this.ended.has(d.attemptUid))
          this.log.warn(`attempt ${d.attemptUid} already ended here; not starting it again`)
        else if (!this.fits(d, desired)) {
          if (!this.deferred.has(d.attemptUid))
            this.log.info(`attempt ${d.attemptUid}: waiting for stopping attempts to free their resources`)
          this.deferred.add(d.attemptUid)
        } else {
          this.deferred.delete(d.attemptUid)
          if (d.resources) this.resourcesOf.set(d.attemptUid, d.resources)
          this.attempts.set(d.attemptUid, this.create(d))
          // Started: report it RUNNING now, not at the next interval.
          this.kicked = true
        }
      } else if (current) void current.stop()
      else this.attempts.set(d.attemptUid, new NeverStartedAttempt(d.attemptUid))
    }
    for (const [uid, attempt] of this.attempts) {
      if (listed.has(uid)) continue
      if (!attempt.finished) void attempt.stop()
      // Ended and no longer wanted: forget it, but only once its final state reached the control plane.
      else if (attempt.finalDelivered) {
        attempt.forget?.()
        this.attempts.delete(uid)
        this.resourcesOf.delete(uid)
        this.ended.set(uid, this.clock.now())
      }
    }
    // Keep a day of ended ids: far longer than any answer can lag.
    const now = this.clock.now()
    for (const [uid, at] of this.ended) if (now - at > 86_400_000) this.ended.delete(uid)
  }

  /**
   * Can `d` start now? Not while attempts this agent is stopping (no longer desired to run, not yet
   * exited) hold resources it needs: the scheduler freed them when it placed `d`, but the process may
   * take up to the stop grace to exit, and two processes on one GPU is what placement exists to avoid.
   * Without stopping attempts it always starts: placement decided, and this is no second scheduler.
   */
  private fits(d: DesiredAttempt, desired: DesiredAttempt[]): boolean {
    if (!d.resources) return true
    const running = new Set(desired.filter((x) => x.action === "run").map((x) => x.attemptUid))
    const live = [...this.attempts.entries()].filter(([, a]) => !a.finished)
    if (!live.some(([uid]) => !running.has(uid))) return true
    const offered = this.options.registration.resources
    const used = { cpu: 0, memoryMiB: 0, gpu: 0 }
    for (const [uid] of live) {
      const r = this.resourcesOf.get(uid)
      if (!r) continue
      used.cpu += r.cpu
      used.memoryMiB += r.memoryMiB
      used.gpu += r.gpu
    }
    // What the registration left out is not limited here.
    const within = (used: number, more: number, offer: number | undefined) =>
      offer === undefined || used + more <= offer + 1e-9
    return (
      within(used.cpu, d.resources.cpu, offered.cpu) &&
      within(used.memoryMiB, d.resources.memoryMiB, offered.memoryMiB) &&
      within(used.gpu, d.resources.gpu, offered.gpu)
    )
  }

  private create(d: DesiredAttempt): Attempt {
    this.log.info(`attempt ${d.attemptUid}: ${d.kind} of job ${d.jobId} task ${d.taskIndex} assigned`)
    return d.kind === "router" ? new RouterAttempt(d, this.ctx) : new ProcessAttempt(d, this.ctx)
  }

  /**
   * Wait for the interval, or less after a local change or when the next heartbeat is held by the
   * control plane (never under the minimum gap), or back off.
   */
  private async waitForNext(ok: boolean): Promise<void> {
    if (!ok) return this.pause(this.backoff(this.failures, this.retryAfter))
    const minGap = this.minGap()
    while (!this.stopping) {
      const now = this.clock.now()
      const soon = this.kicked || this.longPolls()
      const due = soon ? this.lastBeatAt + minGap : this.lastBeatAt + this.intervalMs
      if (now >= due) return
      // A kick (or the shutdown) ends the wait early; the loop then works out the next due time.
      const woken = new AbortController()
      this.wake = () => woken.abort()
      await this.pause(due - now, woken.signal)
      this.wake = undefined
    }
  }

  private async stopAll(): Promise<void> {
    await Promise.all([...this.attempts.values()].map((a) => a.stop()))
  }

  /** Report the final states, then leave: no new work is placed here, and nothing waits for a grace. */
  private async lastHeartbeat(): Promise<void> {
    if (this.workerId === undefined) return
    try {
      await this.options.api.heartbeat(
        this.workerId,
        [...this.attempts.values()].map((a) => a.observe().report),
      )
    } catch (error) {
      this.log.warn(`last heartbeat failed: ${message(error)}`)
    }
    try {
      await this.options.api.leave(this.workerId)
      this.log.info(`worker ${this.workerId} left the backend`)
    } catch (error) {
      this.log.warn(
        `could not leave (the control plane will judge this worker dead after its grace): ${message(error)}`,
      )
    }
  }

  private minGap(): number {
    return (
      this.options.minHeartbeatGapMs ??
      (this.serverHolds && this.waitS() > 0 ? HeldMinHeartbeatGapMs : MinHeartbeatGapMs)
    )
  }

  private clampInterval(seconds: number): number {
    return Math.min(Math.max(seconds * 1000, this.options.minHeartbeatGapMs ?? MinHeartbeatGapMs), 300_000)
  }

  /** The pause before the next try: backoff with jitter, never sooner than the server's `Retry-After`. */
  private backoff(failures: number, retryAfter?: number): number {
    const { initial, max } = this.options.backoffMs ?? { initial: 500, max: 30_000 }
    const base = Math.min(max, initial * 2 ** Math.min(failures - 1, 20))
    // Jitter, so a fleet that lost the control plane together does not come back in lockstep.
    const jittered = base / 2 + Math.random() * (base / 2)
    return Math.max(jittered, retryAfter ?? 0)
  }

  /** Wait `ms` on the clock, less once the agent stops (or `woken` is aborted). */
  private async pause(ms: number, woken?: AbortSignal): Promise<void> {
    const signal = woken ? AbortSignal.any([this.abort.signal, woken]) : this.abort.signal
    await this.clock.sleep(ms, signal).catch(() => {})
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
