/**
 * Runs one attempt's process: argv without a shell, in its own process group (in the agent's sandbox,
 * when it has one), with the attempt's environment and nothing of the agent's own but a few harmless
 * variables, its output kept in a bounded tail, and a stop that reaches the whole process tree.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { constants } from "node:os"
import { fileURLToPath } from "node:url"
import { LogRing } from "./log-ring"
import { groupAlive, signalGroup } from "./process-group"
import { programIssue } from "./program"
import { GateWord, NotRunExitCode, plainSandbox, type Sandbox } from "./sandbox"
import type { TaskUser } from "./task-user"

/** How long an attempt's outcome waits, after its process exits, for its output pipes to close. */
const PipesCloseWaitMs = 3000

/** How an attempt's process ended, in the terms of `ObservedAttempt`. */
export interface ProcessOutcome {
  state: "SUCCEEDED" | "FAILED" | "KILLED"
  exitCode?: number
  message?: string
}

export interface ProcessSpec {
  attemptUid: string
  argv: string[]
  /** The attempt's own environment, from the desired attempt. */
  env?: Record<string, string>
  /** Variables the agent sets before `env` (so the attempt may override them), e.g. `HOST`. */
  defaults?: Record<string, string>
  /** For replicas: the port it must serve on, passed as `PORT`. */
  port?: number
  /** Where the work may write its progress counters (`SWARMPLANE_PROGRESS_FILE`). */
  progressFile?: string
  cwd?: string
  /** How it runs (default: as the agent's user, with only the gate in front). */
  sandbox?: Sandbox
  /**
   * Record the group before it is let run (see `GroupRecords`); returns what forgets it once the group
   * is gone. When it throws, the group is killed before it ran and the attempt fails.
   */
  track?: (pgid: number) => () => void
  /** Names of the agent's variables passed on besides `PassedVariables` (`NAME`, or a prefix `NAME_*`). */
  passEnv?: readonly string[]
  /** Run as this user (the agent is root), with its `HOME`, `USER` and `LOGNAME`. */
  user?: TaskUser
}

/** The program name that stands for this agent in a command. */
export const AgentProgram = "swarmplane-agent"

/**
 * The file where an attempt may keep its progress, as JSON `{ total?, done, failed?, retries? }`
 * (the batch runner does): the agent reads it on each heartbeat and reports the counters.
 */
export const ProgressVariable = "SWARMPLANE_PROGRESS_FILE"

/** The variable that carries the agent's API token; it never reaches the work the agent runs. */
export const TokenVariable = "SWARMPLANE_TOKEN"

/**
 * The agent's own variables an attempt gets: where programs and libraries are, who and where it is,
 * its locale and time zone. Nothing else of the agent's environment (its token, the control plane's
 * keys, cloud credentials): what an attempt needs besides is in its job's `env`.
 */
export const PassedVariables = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "LC_*",
  "TZ",
  "TMPDIR",
  "TERM",
  "LD_LIBRARY_PATH",
  "CUDA_VISIBLE_DEVICES",
  "NVIDIA_VISIBLE_DEVICES",
] as const

/** This agent's launcher, which `swarmplane-agent` in a command runs. */
export const agentBin = fileURLToPath(new URL("../bin/swarmplane-agent.mjs", import.meta.url))

/**
 * The argv to spawn: a first element `swarmplane-agent` becomes this Node and the agent's launcher,
 * so replicas like `["swarmplane-agent", "echo-server"]` work on a checkout without anything on PATH.
 * The launcher registers its own TypeScript loader, so no `execArgv` has to be passed on.
 */
export function resolveArgv(argv: readonly string[]): string[] {
  const [program, ...rest] = argv
  if (program === AgentProgram) return [process.execPath, agentBin, ...rest]
  return [...argv]
}

/** Whether `name` is one of `patterns` (`NAME`, or `PREFIX_*`). */
export function matchesVariable(name: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => (p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : name === p))
}

/**
 * The environment of an attempt: the agent's `PassedVariables` (and `passEnv`), never its token, then
 * the agent's defaults, the attempt's `env`, and last what the attempt cannot override
 * (`ATTEMPT_UID`, `PORT`).
 */
export function attemptEnv(base: NodeJS.ProcessEnv, spec: ProcessSpec): Record<string, string> {
  const env: Record<string, string> = {}
  const passed = [...PassedVariables, ...(spec.passEnv ?? [])]
  for (const [key, value] of Object.entries(base))
    if (value !== undefined && key !== TokenVariable && matchesVariable(key, passed)) env[key] = value
  if (spec.user) Object.assign(env, { HOME: spec.user.home, USER: spec.user.name, LOGNAME: spec.user.name })
  Object.assign(env, spec.defaults, spec.env)
  env.ATTEMPT_UID = spec.attemptUid
  if (spec.progressFile) env[ProgressVariable] = spec.progressFile
  if (spec.port !== undefined) env.PORT = String(spec.port)
  return env
}

/** One running (or finished) attempt process. */
export class ProcessRun {
  readonly logs = new LogRing()
  readonly pid: number | undefined
  /** Settles once the process has ended (or could not start); never rejects. */
  readonly done: Promise<ProcessOutcome>
  private outcome: ProcessOutcome | undefined
  private stopRequested = false
  /** The first process has exited (its outcome follows once its output is read). */
  private exited = false
  private stopping: Promise<ProcessOutcome> | undefined
  private readonly stragglerGraceMs = 5000
  private settle!: (outcome: ProcessOutcome) => void
  /** Kills the attempt's group if the agent dies without stopping it (see `watch`). */
  private watcher: ChildProcess | undefined
  /** Forgets the group's record (see `ProcessSpec.track`) once it is gone. */
  private forget: (() => void) | undefined
  /** In namespaces: pid 1 there reports a death by signal n as an exit with 128+n. */
  private readonly sandboxed: boolean
  /** Why the gate stayed shut (the attempt never ran). */
  private notRun: string | undefined

  constructor(spec: ProcessSpec, base: NodeJS.ProcessEnv = process.env) {
    this.done = new Promise((resolve) => {
      this.settle = resolve
    })
    const sandbox = spec.sandbox ?? plainSandbox("no sandbox")
    this.sandboxed = sandbox.isolation !== "none"
    const env = attemptEnv(base, spec)
    const argv = resolveArgv(spec.argv)
    // A missing program is found here, as spawn would have: behind the sandbox's shell it would only
    // be an exit code.
    const missing = programIssue(argv[0] ?? "", env.PATH ?? "", spec.cwd)
    if (missing) {
      this.pid = undefined
      this.cannotStart(spec, missing)
      return
    }
    const [file, ...args] = sandbox.wrap(argv)
    let child: ChildProcess | undefined
    try {
      child = spawn(file ?? "", args, {
        env,
        cwd: spec.cwd,
        // Its own process group, so a stop can signal every process the attempt started.
        detached: true,
        // stdin is the gate: the attempt runs once the agent writes `GateWord` (its own stdin is /dev/null).
        stdio: ["pipe", "pipe", "pipe"],
        ...(spec.user ? { uid: spec.user.uid, gid: spec.user.gid } : {}),
      })
    } catch (error) {
      // A malformed argv or env (a NUL byte) throws here instead of emitting "error".
      this.cannotStart(spec, error)
    }
    this.pid = child?.pid
    if (!child) return
    child.stdin?.on("error", () => undefined)
    for (const stream of [child.stdout, child.stderr]) {
      stream?.setEncoding("utf8")
      stream?.on("data", (text: string) => this.logs.write(text))
    }
    child.on("error", (error) => {
      // Only a failure to start ends the attempt here; a later error (a failed signal) changes nothing.
      if (child.pid === undefined) this.cannotStart(spec, error)
    })
    child.once("exit", (code, signal) => this.onExit(child, code, signal))
    if (child.pid === undefined) return
    // 1. The watcher, then 2. the record, and only then 3. the gate opens: nothing runs that the
    // agent's death would leave running.
    this.watcher = watch(child.pid)
    try {
      this.forget = spec.track?.(child.pid)
    } catch (error) {
      this.notRun = `could not record the attempt's process group: ${error instanceof Error ? error.message : String(error)}`
      this.logs.note(this.notRun)
      signalGroup(child.pid, "SIGKILL")
      child.stdin?.destroy()
      return
    }
    child.stdin?.end(`${GateWord}\n`)
  }

  /** The outcome once ended, else undefined. */
  get result(): ProcessOutcome | undefined {
    return this.outcome
  }

  /**
   * Stop the attempt: SIGTERM to its group, SIGKILL after `graceMs` to whatever is left. Resolves once
   * no process of the group lives. Idempotent; a process that already ended keeps its own outcome.
   */
  stop(graceMs = 5000): Promise<ProcessOutcome> {
    this.stopping ??= this.terminate(graceMs, !this.exited)
    return this.stopping
  }

  /** SIGKILL the whole group now, synchronously (for an agent that is about to exit). */
  killNow(): void {
    // A group that is gone must not be signalled: its id could in principle belong to another by now.
    if (this.pid === undefined || (this.exited && !groupAlive(this.pid))) return
    this.stopRequested ||= !this.exited
    signalGroup(this.pid, "SIGKILL")
    this.unwatch()
  }

  /** The group is gone (or stopped for good): its watcher has nothing left to do. */
  private unwatch(): void {
    this.watcher?.kill("SIGKILL")
    this.watcher = undefined
    try {
      this.forget?.()
    } catch {}
    this.forget = undefined
  }

  private async terminate(graceMs: number, markKilled: boolean): Promise<ProcessOutcome> {
    if (markKilled) this.stopRequested = true
    const pgid = this.pid
    if (pgid !== undefined && (!this.exited || groupAlive(pgid))) {
      signalGroup(pgid, "SIGTERM")
      const deadline = Date.now() + graceMs
      while (Date.now() < deadline && (!this.exited || groupAlive(pgid))) await pause(50)
      if (!this.exited || groupAlive(pgid)) {
        this.logs.note(`still running ${graceMs} ms after SIGTERM; sending SIGKILL`)
        signalGroup(pgid, "SIGKILL")
      }
    }
    return this.done
  }

  private cannotStart(spec: ProcessSpec, error: unknown): void {
    const code = (error as NodeJS.ErrnoException | undefined)?.code
    const text = error instanceof Error ? error.message : String(error)
    const message = `could not start ${JSON.stringify(spec.argv[0] ?? "")}: ${text}`
    this.logs.note(message)
    this.finish({ state: "FAILED", exitCode: code === "EACCES" ? 126 : 127, message })
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = true
    const exitCode = code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0)
    let outcome: ProcessOutcome
    if (this.notRun) outcome = { state: "FAILED", exitCode: NotRunExitCode, message: this.notRun }
    else if (this.stopRequested) outcome = { state: "KILLED", exitCode, message: "stopped by the agent" }
    else if (code === 0) outcome = { state: "SUCCEEDED", exitCode: 0 }
    else
      outcome = {
        state: "FAILED",
        exitCode,
        message: signal ? `killed by ${signal}` : `exited with code ${exitCode}${this.asSignal(exitCode)}`,
      }
    // The attempt owns its group: processes it left behind would hold resources the scheduler now
    // counts as free, so they are stopped too (the outcome above stays as it is).
    const pgid = this.pid
    if (pgid !== undefined && !this.stopRequested && groupAlive(pgid)) {
      this.logs.note("the command exited but left processes behind; stopping them")
      this.stopping ??= this.terminate(this.stragglerGraceMs, false)
    }
    // "exit" can come before the last output is read; wait for the pipes to close, so the final log
    // tail (what a retried task's message quotes) is complete. Bounded, since a straggler may hold the
    // pipes until it is stopped; on a busy machine the last reads can trail the exit by a second.
    const closed = new Promise<void>((resolve) => {
      child.once("close", () => resolve())
      setTimeout(resolve, PipesCloseWaitMs).unref()
    })
    void closed.then(() => this.finish(outcome))
  }

  /** In namespaces a death by signal n reads as exit 128+n: say which signal that would be. */
  private asSignal(exitCode: number): string {
    if (!this.sandboxed || exitCode <= 128) return ""
    const name = Object.entries(constants.signals).find(([, n]) => n === exitCode - 128)?.[0]
    return name ? `, as when killed by ${name}` : ""
  }

  private finish(outcome: ProcessOutcome): void {
    if (this.outcome) return
    this.outcome = outcome
    this.settle(outcome)
    // Once what the attempt left behind is stopped too, nothing of its group is left to watch.
    void Promise.resolve(this.stopping).then(() => this.unwatch())
  }
}

/**
 * An attempt must not outlive its agent: were the agent killed outright (`kill -9`, an OOM kill), its
 * attempts' groups would run on while the control plane requeues them elsewhere, and a task would run
 * twice at once. A small watcher, in a session of its own (so it survives the agent and the agent's
 * group), blocks reading a pipe whose other end only the agent holds; when the agent dies the kernel
 * closes that end, the read returns, and the watcher kills the attempt's whole group. The agent kills
 * the watcher itself once the group has ended.
 */
function watch(pgid: number): ChildProcess | undefined {
  try {
    const watcher = spawn(
      "sh",
      ["-c", 'read -r _ ; kill -s KILL -- "-$1" 2>/dev/null', "swarmplane-watch", String(pgid)],
      {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"],
        // Nothing of the agent's environment (its token) in a process outside the attempt's sandbox.
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      },
    )
    watcher.on("error", () => undefined)
    watcher.stdin?.on("error", () => undefined)
    // Neither the watcher nor its pipe keeps the agent's event loop alive.
    watcher.unref()
    ;(watcher.stdin as unknown as { unref?: () => void } | null)?.unref?.()
    return watcher
  } catch {
    return undefined
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}
