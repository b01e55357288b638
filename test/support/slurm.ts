/**
 * Test support: the dev Slurm cluster of scripts/slurm-dev-cluster.sh, as its connection file
 * describes it. Without it the Slurm suites are skipped with a message saying how to start it,
 * except under `.ci/run` (SWARMPLANE_REQUIRE_SLURM=1), where a missing cluster fails the run.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { SshSession } from "@swarmplane/core/backends/slurm/ssh"

export interface SlurmConnection {
  host: string
  port: number
  user: string
  privateKeyPath: string
  hostKey: string
  hostKeyFingerprint: string
  partition: string
  gpuPartition: string
  version: string
}

const file = join(process.env.SWARMPLANE_SLURM_DIR ?? "/var/tmp/swarmplane-slurm", "connection.json")

export function slurmConnection(): SlurmConnection | undefined {
  if (!existsSync(file)) {
    if (process.env.SWARMPLANE_REQUIRE_SLURM === "1")
      throw new Error(
        `no Slurm dev cluster (${file} is missing): start it with sudo bash scripts/slurm-dev-cluster.sh up`,
      )
    console.warn(
      `skipping the Slurm suites: no ${file}; start the dev cluster with: sudo bash scripts/slurm-dev-cluster.sh up`,
    )
    return undefined
  }
  return JSON.parse(readFileSync(file, "utf8")) as SlurmConnection
}

export const privateKeyOf = (c: SlurmConnection) => readFileSync(c.privateKeyPath, "utf8")

/** A `slurm` backend's config for the cluster, its key in the secret `sshKeySecret`. */
export const slurmConfigOf = (c: SlurmConnection, sshKeySecret = "k") => ({
  type: "slurm" as const,
  loginHost: c.host,
  port: c.port,
  user: c.user,
  sshKeySecret,
  hostKey: c.hostKey,
  partition: c.partition,
})

/** An SSH session to the cluster's login, for a test or bench to look at Slurm itself. */
export const sessionTo = (c: SlurmConnection, commandTimeoutS = 60) =>
  new SshSession({
    host: c.host,
    port: c.port,
    user: c.user,
    privateKey: privateKeyOf(c),
    hostKey: c.hostKey,
    connectTimeoutS: 10,
    commandTimeoutS,
  })
