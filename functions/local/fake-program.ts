/**
 * A fake substrate the local plane runs on request (`SWARMPLANE_FAKE_LEPTON`, `SWARMPLANE_FAKE_EKS`):
 * test code the plane never imports, started as a program of its own (`node --import tsx <program>`)
 * that prints one JSON line (its addresses and credentials) when it is ready, and stops when its stdin
 * closes, so it ends with this process however this one ends.
 */
import { spawn } from "node:child_process"
import { agentEnv } from "./provider"

/** A running fake: what its line said, with its pid and how to stop it. */
export type FakeProgram<T> = T & {
  pid: number
  exited: Promise<number | null>
  stop(): Promise<void>
}

/** Start `program` and read the line it prints; `what` names it in errors (never the line: it holds secrets). */
export async function startFakeProgram<T extends object>(
  what: string,
  program: string,
  checkout: string,
  env: NodeJS.ProcessEnv,
): Promise<FakeProgram<T>> {
  const child = spawn(process.execPath, ["--import", "tsx", program], {
    cwd: checkout,
    // What its workers start from: no keys or credentials of this environment.
    env: agentEnv(env),
    // stdin stays open while this process lives: when it ends, however it ends, the fake stops too.
    stdio: ["pipe", "pipe", "inherit"],
  })
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => resolve(code))
    child.once("error", () => resolve(null))
  })
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    // It stops its processes and exits at once; a fake that hangs is killed rather than waited on.
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
    await exited
    clearTimeout(timer)
  }
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = ""
      const onData = (chunk: Buffer) => {
        out += chunk.toString("utf8")
        const end = out.indexOf("\n")
        if (end < 0) return
        child.stdout?.off("data", onData)
        child.stdout?.resume()
        resolve(out.slice(0, end))
      }
      child.stdout?.on("data", onData)
      void exited.then((code) => reject(new Error(`the ${what} exited (code ${code}) before it was ready`)))
      setTimeout(() => reject(new Error(`the ${what} did not start within 60 s`)), 60_000).unref()
    })
    let started: T & { pid: number }
    try {
      started = JSON.parse(line)
    } catch {
      throw new Error(`the ${what} printed something other than its address`)
    }
    return { ...started, exited, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
