/** Test support: a parsed `slurm` backend config for a login node `login`, with `extra` fields over it. */
import { BackendConfig, type BackendConfigOf } from "../../model/backend"

export function slurmConfig(extra: Record<string, unknown> = {}): BackendConfigOf<"slurm"> {
  return BackendConfig.parse({
    type: "slurm",
    loginHost: "login",
    user: "svc",
    sshKeySecret: "k",
    hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA",
    partition: "debug",
    ...extra,
  }) as BackendConfigOf<"slurm">
}
