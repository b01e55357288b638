/**
 * Test support: the local processes the fake substrates (fake-lepton/, fake-kube/) run what they are
 * given as. Each is a real child process in a process group of its own, so stopping it (or all of
 * them, in `stopAll()`) also ends what its command started, and nothing outlives the fake. A process
 * counts as exited only once its output is drained (the stdio `close`, or shortly after `exit` when a
 * grandchild keeps the pipes open), so a replica or pod reported ended already serves its whole log.
 */
import { type ChildProcess, spawn } from "node:child_process"

/** Output kept per container run: the log endpoint serves the newest bytes only. */
const maxLogChars = 256 * 1024
/** How long to wait for the pipes after the process itself exited. */
const drainMs = 500
const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }

export interface LocalProcess {
  readonly pid: number | undefined
  /** stdout and stderr, interleaved, as a replica's log or `kubectl logs` shows them. */
  log(): string
  /** Resolves with the exit code (a signal counts as 128 + its number, as a shell reports it). */
  readonly exited: Promise<number>
  isAlive(): boolean
  kill(signal?: NodeJS.Signals): void
  /** SIGTERM the group, then SIGKILL it after the grace period, as the kubelet does. */
  terminate(graceMs?: number): void
  /** Called with each chunk of stdout (an echo server prints its URL there). */
  onStdout(listener: (text: string) => void): void
  /** Called with each chunk of stdout and stderr as the log gains it, until the returned stop is called. */
  onOutput(listener: (text: string) => void): () => void
}

export interface ProcessRunner {
  start(command: string[], env: Record<string, string>, cwd?: string): LocalProcess
  livePids(): number[]
  /** Kill every process group and wait for the exits. */
  stopAll(): Promise<void>
}

export function processRunner(): ProcessRunner {
  const live = new Set<LocalProcess>()
  // A test process that exits without calling stop() still ends the groups.
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
  const stdoutListeners: ((text: string) => void)[] = []
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
    for (const l of stdoutListeners) l(chunk.toString("utf8"))
  })
  child.stderr?.on("data", append)
  const exited = new Promise<number>((resolve) => {
    let code: number | undefined
    child.once("error", (error) => {
      append(Buffer.from(`failed to start ${file}: ${error.message}\n`))
      running = false
      resolve(127)
    })
    child.once("exit", (c, signal) => {
      code = c ?? 128 + (signal ? (signalNumbers[signal] ?? 0) : 0)
      setTimeout(() => {
        running = false
        resolve(code ?? 1)
      }, drainMs).unref()
    })
    child.once("close", (c, signal) => {
      running = false
      resolve(code ?? c ?? 128 + (signal ? (signalNumbers[signal] ?? 0) : 0))
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
    onStdout: (listener) => void stdoutListeners.push(listener),
    onOutput(listener) {
      followers.add(listener)
      return () => void followers.delete(listener)
    },
  }
}
