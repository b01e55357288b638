/**
 * The fake Lepton workspace `SWARMPLANE_FAKE_LEPTON=1 npm start` runs beside the local plane: started
 * as a program of its own (test/support/fake-lepton/serve.ts; the plane never imports test code) that
 * stops when this process's end closes its stdin, and wired in as the `lepton` backend with its token
 * in the operator project's file secrets.
 */
import { spawn } from "node:child_process"
import { mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { LocalControlPlane } from "./control-plane"
import { agentEnv } from "./provider"

/** The fake Lepton workspace as this process runs it: a child process that stops when its stdin closes. */
export interface FakeLeptonProcess {
  url: string
  workspaceId: string
  token: string
  pid: number
  exited: Promise<number | null>
  stop(): Promise<void>
}

/** Start test/support/fake-lepton/serve.ts and read the one line it prints (its address and token). */
export async function startFakeLeptonProcess(
  program: string,
  checkout: string,
  env: NodeJS.ProcessEnv,
): Promise<FakeLeptonProcess> {
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
      void exited.then((code) =>
        reject(new Error(`the fake Lepton exited (code ${code}) before it was ready`)),
      )
      setTimeout(() => reject(new Error("the fake Lepton did not start within 60 s")), 60_000).unref()
    })
    let started: { url: string; workspaceId: string; token: string; pid: number }
    try {
      started = JSON.parse(line)
    } catch {
      // Never the line itself: it holds the token.
      throw new Error("the fake Lepton printed something other than its address")
    }
    return { ...started, exited, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

export const FakeLeptonBackend = "lepton"
export const FakeLeptonSecret = "fake-lepton-token"
/** Marks the backend this program registered, so a later start points it at the new fake. */
const FakeLeptonDisplayName = "Fake Lepton workspace (npm start)"

/**
 * Put the fake's token in the operator project's file secrets and register (or repoint) the `lepton`
 * backend on it. A `lepton` backend this program did not make is left as it is; returns whether the
 * backend is the fake's.
 */
export async function wireFakeLepton(
  plane: LocalControlPlane,
  dataDir: string,
  fake: FakeLeptonProcess,
): Promise<boolean> {
  const rt = plane.runtime
  const project = rt.operatorProject
  const secrets = join(dataDir, "secrets", project)
  await mkdir(secrets, { recursive: true, mode: 0o700 })
  await writeFile(join(secrets, FakeLeptonSecret), `${fake.token}\n`, { mode: 0o600 })
  const existing = await rt.repos.backends.get(project, FakeLeptonBackend)
  if (existing && existing.config.displayName !== FakeLeptonDisplayName) return false
  const config = BackendConfig.parse({
    type: "lepton",
    displayName: FakeLeptonDisplayName,
    workspaceId: fake.workspaceId,
    workspaceUrl: fake.url,
    tokenSecret: FakeLeptonSecret,
    nodeGroup: "fake-node-group",
    resourceShape: "cpu.small",
  })
  const { created } = await rt.repos.backends.put(project, FakeLeptonBackend, config)
  await rt.queue.send([
    {
      kind: "backend",
      project,
      id: FakeLeptonBackend,
      reason: created ? "backend.created" : "backend.updated",
    },
  ])
  return true
}
