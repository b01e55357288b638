/**
 * The fake Lepton workspace `SWARMPLANE_FAKE_LEPTON=1 npm start` runs beside the local plane: started
 * as a program of its own (test/support/fake-lepton/serve.ts; the plane never imports test code) that
 * stops when this process's end closes its stdin, and wired in as the `lepton` backend with its token
 * in the operator project's file secrets.
 */
import { mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { LocalControlPlane } from "./control-plane"
import { type FakeProgram, startFakeProgram } from "./fake-program"

/** What the fake Lepton's one line says. */
interface FakeLeptonLine {
  url: string
  workspaceId: string
  token: string
}
export type FakeLeptonProcess = FakeProgram<FakeLeptonLine>

/** Start test/support/fake-lepton/serve.ts and read the one line it prints (its address and token). */
export const startFakeLeptonProcess = (program: string, checkout: string, env: NodeJS.ProcessEnv) =>
  startFakeProgram<FakeLeptonLine>("fake Lepton", program, checkout, env)

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
