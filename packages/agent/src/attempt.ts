/**
 * One attempt on this worker, as the heartbeat loop sees it: something it can start, update from the
 * desired set, stop, and observe. Tasks and replicas are processes (this module); routers are router
 * processes the agent supervises behind a port it holds (`router-attempt.ts`).
 */
import { chownSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  type DesiredAttempt,
  fileSafe,
  type ObservedAttempt,
  progressCounters,
} from "@swarmplane/core/contract/worker"
import type { GroupRecords } from "./group-records"
import type { Logger } from "./logger"
import { freePort, httpUrl } from "./net"
import { type ProcessOutcome, ProcessRun } from "./process-runner"
import { HealthWatch, type HealthWatchOptions } from "./replica-health"
import type { Sandbox } from "./sandbox"
import type { TaskUser } from "./task-user"

/** Bounds of the report fields (`ObservedAttempt` in the control plane's model). */
export const ReportLimits = { message: 4096, logTail: 32 * 1024 } as const

export interface AttemptContext {
  /** Host in the endpoints this worker reports. */
  advertiseHost: string
  /** Host that replicas and routers listen on (`HOST` for replicas). */
  bindHost: string
  /** Called on every change the control plane should learn of soon (exit, readiness). */
  onChange: () => void
  log: Logger
  stopGraceMs: number
  /** Overrides of the readiness probing of replicas (timeouts, periods). */
  health?: Partial<Omit<HealthWatchOptions, "url">>
  /** How task and replica processes are set up (default: `TaskSetup`'s defaults). */
  tasks?: TaskSetup
}

/** How the agent runs task and replica processes. */
export interface TaskSetup {
  /** Namespaces with hidden paths, or none (default: none, only the gate). */
  sandbox?: Sandbox
  /** Where each group is recorded before it runs, for a restarted agent to reap (default: nowhere). */
  records?: GroupRecords
  /** The folder each attempt gets a fresh working folder in (default: the OS temporary folder). */
  workRoot?: string
  /** Keep each attempt's working folder once it ended (default: removed). */
  keepWorkDirs?: boolean
  /** The agent's variables passed on besides `PassedVariables`. */
  passEnv?: readonly string[]
  /** Run attempts as this user (`--task-user`; the agent is root). */
  user?: TaskUser
}

/**
 * A report, and how to mark it as delivered once the heartbeat that carried it succeeded. The caller
 * may delete `report.logTail` before sending (to bound the heartbeat); `delivered` then keeps the log
 * pending for the next heartbeat.
 */
export interface Observation {
  report: ObservedAttempt
  delivered(): void
}

export interface Attempt {
  readonly uid: string
  /** True once the final state is known. */
  readonly finished: boolean
  /** True once a heartbeat that succeeded carried the final state. */
  readonly finalDelivered: boolean
  observe(): Observation
  /** Apply a newer desired record with `action: run` (e.g. new upstreams of a router). */
  update(desired: DesiredAttempt): void
  /** Stop it; resolves once it has ended. Idempotent. */
  stop(): Promise<void>
  /** Kill at once, synchronously (the agent is exiting). */
  killNow(): void
  /** The agent no longer tracks it: remove what it kept on disk. */
  forget?(): void
}

/** A task (runs to completion) or a replica (serves on `PORT`, probed for readiness). */
export class ProcessAttempt implements Attempt {
  readonly uid: string
  private run: ProcessRun | undefined
  private health: HealthWatch | undefined
  private port: number | undefined
  private ready = false
  private outcome: ProcessOutcome | undefined
  /** Why the agent itself ended it (a replica that never became healthy); wins over the exit code. */
  private failure: ProcessOutcome | undefined
  private stopRequested = false
  private sentLogVersion = -1
  private sentProgress = ""
  /** Where the attempt may write its progress (`SWARMPLANE_PROGRESS_FILE`); removed when it is forgotten. */
  private readonly progressFile: string
  /** Its fresh working folder; removed once it ended (unless the agent keeps them). */
  private workDir: string | undefined
  private markEnded!: () => void
  private readonly ended = new Promise<void>((resolve) => {
    this.markEnded = resolve
  })
  finalDelivered = false

  constructor(
    private readonly desired: DesiredAttempt,
    private readonly ctx: AttemptContext,
  ) {
    this.uid = desired.attemptUid
    this.progressFile = join(tmpdir(), `swarmplane-progress-${fileSafe(desired.attemptUid)}.json`)
    // Nothing in start() is expected to throw; if it does, the attempt fails rather than the agent.
    this.start().catch((error: unknown) =>
      this.end({ state: "FAILED", message: `agent error: ${String(error)}` }),
    )
  }

  get finished(): boolean {
    return this.outcome !== undefined
  }

  private get isReplica(): boolean {
    return this.desired.kind === "replica"
  }

  private async start(): Promise<void> {
    const d = this.desired
    if (!d.command?.length)
      return this.end({ state: "FAILED", message: "the desired attempt has no command" })
    if (this.isReplica) this.port = await freePort(this.ctx.bindHost).catch(() => undefined)
    if (this.stopRequested) return this.end({ state: "KILLED", message: "stopped before it started" })
    if (this.isReplica && this.port === undefined)
      return this.end({ state: "FAILED", message: "no free port for the replica" })
    const tasks = this.ctx.tasks ?? {}
    const root = tasks.workRoot ?? tmpdir()
    try {
      this.workDir = mkdtempSync(join(root, `swarmplane-${fileSafe(d.attemptUid)}-`))
      if (tasks.user) chownSync(this.workDir, tasks.user.uid, tasks.user.gid)
    } catch (error) {
      return this.end({
        state: "FAILED",
        message: `no working folder in ${root}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      })
    }
    const records = tasks.records
    const run = new ProcessRun({
      attemptUid: d.attemptUid,
      argv: d.command,
      env: d.env,
      defaults: this.isReplica ? { HOST: this.ctx.bindHost } : undefined,
      port: this.port,
      ...(this.isReplica ? {} : { progressFile: this.progressFile }),
      cwd: this.workDir,
      sandbox: tasks.sandbox,
      passEnv: tasks.passEnv,
      user: tasks.user,
      ...(records ? { track: (pgid: number) => records.track(pgid, d.attemptUid) } : {}),
    })
    this.run = run
    this.ctx.log.info(
      `attempt ${d.attemptUid}: started ${d.kind} (pid ${run.pid ?? "none"}): ${d.command.join(" ")}`,
    )
    if (this.isReplica && run.pid !== undefined) this.watchHealth(d.healthPath ?? "/health")
    const outcome = await run.done
    this.health?.stop()
    this.ready = false
    this.end(this.failure ?? outcome)
  }

  private watchHealth(path: string): void {
    const url = `${httpUrl("127.0.0.1", this.port ?? 0)}${path.startsWith("/") ? path : `/${path}`}`
    const startTimeoutMs = this.ctx.health?.startTimeoutMs ?? 300_000
    this.health = new HealthWatch({ ...this.ctx.health, url, startTimeoutMs }, (event) => {
      if (event === "timeout") {
        this.failure = { state: "FAILED", message: `no 200 from ${path} within ${startTimeoutMs / 1000} s` }
        this.run?.logs.note(this.failure.message ?? "")
        void this.run?.stop(this.ctx.stopGraceMs)
        return
      }
      this.ready = event === "ready"
      this.ctx.log.info(`attempt ${this.uid}: replica ${event} at ${this.endpoint()}`)
      this.ctx.onChange()
    })
  }

  private end(outcome: ProcessOutcome): void {
    if (this.outcome) return
    this.outcome = outcome
    this.markEnded()
    const dir = this.workDir
    if (dir && !this.ctx.tasks?.keepWorkDirs)
      void rm(dir, { recursive: true, force: true, maxRetries: 2 }).catch((error: unknown) =>
        this.ctx.log.warn(
          `attempt ${this.uid}: could not remove its working folder ${dir}: ${String(error)}`,
        ),
      )
    const code = outcome.exitCode === undefined ? "" : ` (exit ${outcome.exitCode})`
    this.ctx.log.info(
      `attempt ${this.uid}: ${outcome.state}${code}${outcome.message ? `: ${outcome.message}` : ""}`,
    )
    this.ctx.onChange()
  }

  private endpoint(): string | undefined {
    return this.port === undefined ? undefined : httpUrl(this.ctx.advertiseHost, this.port)
  }

  observe(): Observation {
    const outcome = this.outcome
    const report: ObservedAttempt = { attemptUid: this.uid, state: outcome?.state ?? "RUNNING" }
    if (outcome?.exitCode !== undefined) report.exitCode = outcome.exitCode
    if (outcome?.message) report.message = outcome.message.slice(0, ReportLimits.message)
    if (this.isReplica) {
      const endpoint = this.endpoint()
      if (endpoint) report.endpoint = endpoint
      report.ready = !outcome && this.ready
    }
    const progress = this.isReplica ? undefined : readProgress(this.progressFile)
    if (progress && JSON.stringify(progress) !== this.sentProgress) report.progress = progress
    const logs = this.run?.logs
    const version = logs?.version ?? -1
    const final = outcome !== undefined
    // A final state carries the tail even when an earlier heartbeat sent it: the control plane quotes
    // the last lines in why the attempt failed, from the report that says it failed.
    if (logs && (version !== this.sentLogVersion || (final && !this.finalDelivered)))
      report.logTail = logs.text(ReportLimits.logTail)
    return {
      report,
      delivered: () => {
        // The heartbeat may have left the tail out (its size budget); then it is still to be sent,
        // and a final state without its last output does not count as delivered yet.
        if (report.logTail !== undefined) this.sentLogVersion = version
        if (report.progress) this.sentProgress = JSON.stringify(report.progress)
        if (final && this.sentLogVersion === version) this.finalDelivered = true
      },
    }
  }

  update(): void {
    // A running process cannot take a new command or env; a changed spec is a new attempt.
  }

  async stop(): Promise<void> {
    this.stopRequested = true
    this.health?.stop()
    await this.run?.stop(this.ctx.stopGraceMs)
    await this.ended
  }

  forget(): void {
    rmSync(this.progressFile, { force: true })
  }

  killNow(): void {
    this.stopRequested = true
    this.health?.stop()
    this.run?.killNow()
  }
}

/**
 * An attempt the control plane told this worker to stop before the worker ever saw it run (assigned
 * and cancelled between two heartbeats): reported KILLED so the control plane does not wait for it.
 */
export class NeverStartedAttempt implements Attempt {
  readonly finished = true
  finalDelivered = false

  constructor(readonly uid: string) {}

  observe(): Observation {
    return {
      report: { attemptUid: this.uid, state: "KILLED", message: "stopped before it started" },
      delivered: () => {
        this.finalDelivered = true
      },
    }
  }

  update(): void {}
  async stop(): Promise<void> {}
  killNow(): void {}
}

/** Progress counters an attempt wrote (see `ProgressVariable`), or undefined when there are none (yet). */
export function readProgress(file: string): ObservedAttempt["progress"] | undefined {
  try {
    return progressCounters(JSON.parse(readFileSync(file, "utf8")))
  } catch {
    return undefined
  }
}
