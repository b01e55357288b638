/**
 * The fake Lepton's local processes: every replica and job worker is a real child process started in a
 * process group of its own, so stopping it (or all of them, in `stop()`) also ends whatever it started
 * (a `/bin/bash -c` command's children), and nothing outlives the fake.
 */
import { type ChildProcess, spawn } from "node:child_process"

/** Output kept per process: the log endpoint serves the newest bytes only. */
const maxLogChars = 256 * 1024

export interface LocalProcess {
  readonly pid: number | undefined
  /** The process's stdout and stderr, interleaved, as the replica log endpoint shows it. */
  log(): string
  /** Resolves with the exit code (a signal counts as 128 + its number, as a shell reports it). */
  readonly exited: Promise<number>
  isAlive(): boolean
  /** Signal the whole process group; already gone is fine. */
  kill(signal?: NodeJS.Signals): void
  /** SIGTERM the group, then SIGKILL it if it is still running after the grace period (as Kubernetes does). */
  terminate(graceMs?: number): void
  /** Called with each chunk of stdout (the echo server prints its URL there). */
  onStdout(listener: (text: string) => void): void
  /** Called with each chunk of stdout and stderr as the log gains it, until the returned stop is called. */
  onOutput(listener: (text: string) => void): () => void
}

export interface ProcessRunner {
  start(command: string[], env: Record<string, string>, cwd?: string): LocalProcess
  /** Pids of the processes still running. */
  livePids(): number[]
  /** Kill every process group and wait for the exits. */
  stopAll(): Promise<void>
}

const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }

export function processRunner(): ProcessRunner {
  const live = new Set<LocalProcess>()
  // A test process that exits without calling stop() (a crash, a timeout) still ends the groups.
  const onExit = () => {
    for (const p of live) p.kill("SIGKILL")
  }
  process.once("exit", onExit)
  return {
    start(command, env, cwd) {
      const p = startProcess(command, env, cwd)
      live.add(p)
      void p.exited.then(() => live.delete(p))
      return p
    },
    livePids: () => [...live].flatMap((p) => (p.pid === undefined ? [] : [p.pid])),
    async stopAll() {
      process.removeListener("exit", onExit)
      const all = [...live]
      for (const p of all) p.kill("SIGKILL")
      await Promise.all(all.map((p) => p.exited))
    },
  }
}

function startProcess(command: string[], env: Record<string, string>, cwd?: string): LocalProcess {
  const [file, ...args] = command
  let output = ""
  let running = true
  const listeners: ((text: string) => void)[] = []
  const followers = new Set<(text: string) => void>()
  const append = (chunk: Buffer) => {
    const text = chunk.toString("utf8")
    output = (output + text).slice(-maxLogChars)
    for (const f of followers) f(text)
  }
  const child: ChildProcess = spawn(file ?? "/bin/false", args, {
    env,
    cwd,
    detached: true, // its own process group: kill(-pid) reaches the command's children too
    stdio: ["ignore", "pipe", "pipe"],
  })
  child.stdout?.on("data", (chunk: Buffer) => {
    append(chunk)
    for (const l of listeners) l(chunk.toString("utf8"))
  })
  child.stderr?.on("data", append)
  const exited = new Promise<number>((resolve) => {
    child.once("error", (error) => {
      append(Buffer.from(`failed to start ${file}: ${error.message}\n`))
      running = false
      resolve(127)
    })
    child.once("exit", (code, signal) => {
      running = false
      resolve(code ?? 128 + (signal ? (signalNumbers[signal] ?? 0) : 0))
    })
  })
  return {
    pid: child.pid,
    log: () => output,
    exited,
    isAlive: () => running,
    kill(signal = "SIGTERM") {
      if (!running || child.pid === undefined) return
      try {
        process.kill(-child.pid, signal)
      } catch {
        // the group is already gone
      }
    },
    terminate(graceMs = 5_000) {
      this.kill("SIGTERM")
      setTimeout(() => this.kill("SIGKILL"), graceMs).unref()
    },
    onStdout: (listener) => void listeners.push(listener),
    onOutput(listener) {
      followers.add(listener)
      return () => void followers.delete(listener)
    },
  }
}
