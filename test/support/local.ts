/**
 * Test support: the local control plane as a real process (`functions/local.ts`, what `npm start`
 * runs after its install step, or `swarmplane dev`), on a free port. Resolves once it prints its URL.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const root = join(import.meta.dirname, "..", "..")

export interface LocalProcess {
  child: ChildProcess
  url: string
  /** Everything it printed so far (stdout and stderr). */
  output(): string
  /** The exit code, once all its output is read. */
  exit: Promise<number | null>
  /** SIGTERM (or `signal`), then the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

const started: ChildProcess[] = []

/** Fresh data and CLI config folders. */
export function freshDirs(): { SWARMPLANE_DATA_DIR: string; SWARMPLANE_CONFIG_DIR: string } {
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-local-"))
  return { SWARMPLANE_DATA_DIR: join(dir, "data"), SWARMPLANE_CONFIG_DIR: join(dir, "config") }
}

/** The program `npm start` runs, from the repository root. */
const npmStart = { args: ["--import", "tsx", "functions/local.ts"], cwd: root }

/** `how`: node's arguments and the working folder (default: what `npm start` runs). */
export function startLocal(
  env: Record<string, string>,
  how: { args: string[]; cwd: string } = npmStart,
): Promise<LocalProcess> {
  const child = spawn(process.execPath, how.args, {
    cwd: how.cwd,
    env: { ...process.env, SWARMPLANE_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  started.push(child)
  let out = ""
  // Once its output is all read: after it exits and whatever it started that shares its output does too.
  const exit = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)))
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      // The whole ready line: a chunk may end inside it (in the port, or before the store it names).
      const url = /control plane on (http:\/\/[\d.]+:\d+)[^\n]*\n/.exec(out)?.[1]
      if (url)
        resolve({
          child,
          url,
          output: () => out,
          exit,
          stop: (signal: NodeJS.Signals = "SIGTERM") => {
            child.kill(signal)
            return exit
          },
        })
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    void exit.then((code) => reject(new Error(`exited with ${code} before it was ready:\n${out}`)))
  })
}

/** Kill whatever a test left running. */
export function killStarted(): void {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL")
}
