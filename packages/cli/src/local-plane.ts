/**
 * `swarmplane dev`: the local control plane as a child process, the program `npm start` runs
 * (functions/local.ts, by tsx's loader). The CLI imports none of it, so it depends on the wire contract
 * only. The plane gets the CLI's environment and working folder and writes straight to its terminal.
 *
 * Signals reach the plane exactly once: it runs in its own process group, so a Ctrl-C goes to the CLI
 * alone, which passes it on (as it does SIGTERM and SIGHUP). A second Ctrl-C thus still means "exit
 * now" to the plane, as with `npm start`. Should the CLI be killed without a chance to pass anything on,
 * the plane sees its IPC channel close and stops too.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { constants } from "node:os"
import { fileURLToPath } from "node:url"
import { CliError } from "./errors"

const Forwarded = ["SIGINT", "SIGTERM", "SIGHUP"] as const

/** Run the plane until it exits; resolves to its exit code (128 + N when signal N ended it). */
export async function runLocalPlane(env: Record<string, string | undefined>): Promise<number> {
  const entry = fileURLToPath(new URL("../../../functions/local.ts", import.meta.url))
  if (!existsSync(entry))
    throw new CliError(
      "the local control plane (functions/local.ts) is not beside this CLI",
      undefined,
      "run swarmplane dev from a swarmplane checkout, or npm start in one",
    )
  const child = spawn(process.execPath, ["--import", import.meta.resolve("tsx"), entry], {
    env,
    // The IPC channel is only a lifeline: the plane stops when it closes (the CLI killed outright).
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    // Its own group (and session): the terminal's Ctrl-C reaches only the CLI, which forwards it.
    detached: process.platform !== "win32",
  })
  const forward = (signal: NodeJS.Signals) => void child.kill(signal)
  for (const signal of Forwarded) process.on(signal, forward)
  try {
    return await new Promise<number>((resolve, reject) => {
      child.once("error", (error) =>
        reject(new CliError(`could not start the local control plane: ${error.message}`)),
      )
      child.once("exit", (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)))
    })
  } finally {
    for (const signal of Forwarded) process.off(signal, forward)
  }
}
