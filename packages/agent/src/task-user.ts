/**
 * `--task-user`: an agent running as root runs its attempts as another user, who cannot read the
 * agent's files (its state, a token file) or the control plane's (modes 0600/0700) even where no
 * namespace hides them, and cannot signal or trace the agent.
 */
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"

export interface TaskUser {
  name: string
  uid: number
  gid: number
  home: string
}

/** The user named (or numbered) `spec`, from the system's user database; a message when there is none. */
export function lookUpUser(spec: string): TaskUser | string {
  const entry = passwdEntry(spec)
  if (!entry)
    return `--task-user: there is no user "${spec}" on this machine; give an existing user's name or uid`
  const [name = "", , uid = "", gid = "", , home = "/"] = entry.split(":")
  return { name, uid: Number(uid), gid: Number(gid), home: home || "/" }
}

function passwdEntry(spec: string): string | undefined {
  const got = spawnSync("getent", ["passwd", spec], { encoding: "utf8" })
  if (!got.error) return got.status === 0 ? got.stdout.split("\n")[0] : undefined
  // No getent: the file itself.
  try {
    return readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .find((line) => {
        const [name, , uid] = line.split(":")
        return name === spec || uid === spec
      })
  } catch {
    return undefined
  }
}
