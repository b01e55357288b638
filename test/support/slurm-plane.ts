/**
 * Test support: a local control plane that talks to the dev Slurm cluster, with the cluster's SSH key
 * as its `slurm-key` secret, and the helpers every Slurm suite uses (register a backend, submit, wait
 * for the end, run a command on the login node).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { expect } from "vitest"
import { type Plane, startPlane, until } from "./plane"
import { privateKeyOf, type SlurmConnection, sessionTo, slurmConfigOf } from "./slurm"

export interface SlurmPlane {
  p: Plane
  /** A slurm backend config for the dev cluster, with `extra` fields over it. */
  config(extra?: Record<string, unknown>): Record<string, unknown>
  register(id: string, extra?: Record<string, unknown>): Promise<void>
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  job(id: string): Promise<any>
  submit(backendId: string, spec: Record<string, unknown>): Promise<string>
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary response shapes
  finished(id: string, timeoutMs?: number): Promise<any>
  /** Run a command on the login node as the cluster user. */
  login(command: string, stdin?: string): Promise<{ code: number; stdout: string; stderr: string }>
  /** `<id>|<state>` of every job of that name. */
  squeue(name: string): Promise<string[]>
  stop(): Promise<void>
}

export async function slurmPlane(c: SlurmConnection): Promise<SlurmPlane> {
  const p = await startPlane()
  const secrets = join(p.dir, "data", "secrets", "default")
  mkdirSync(secrets, { recursive: true })
  writeFileSync(join(secrets, "slurm-key"), privateKeyOf(c), { mode: 0o600 })
  const session = sessionTo(c)
  const config = (extra: Record<string, unknown> = {}) => ({
    ...slurmConfigOf(c, "slurm-key"),
    gpuPartition: c.gpuPartition,
    timeLimit: "00:10:00",
    ...extra,
  })
  const job = async (id: string) => (await p.call("GET", `/v1/jobs/${id}`)).json
  const login = (command: string, stdin?: string) => session.exec(command, stdin)
  return {
    p,
    config,
    async register(id, extra) {
      const res = await p.call("POST", "/v1/backends", { id, config: config(extra) })
      expect([200, 201], JSON.stringify(res.json)).toContain(res.status)
    },
    job,
    async submit(backendId, spec) {
      const res = await p.call("POST", "/v1/jobs", { backendId, ...spec })
      expect(res.status, JSON.stringify(res.json)).toBe(202)
      return res.json.id as string
    },
    finished: (id, timeoutMs = 60_000) =>
      until(
        `job ${id} to finish`,
        async () => {
          const j = await job(id)
          return ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.status) && j
        },
        timeoutMs,
      ),
    login,
    async squeue(name) {
      const out = await login(`squeue -h -t all -u "$(id -un)" --name=${name} -o '%i|%T'`)
      return out.stdout.trim().split("\n").filter(Boolean)
    },
    async stop() {
      session.close()
      await p.stop()
    },
  }
}
