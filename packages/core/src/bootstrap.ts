/**
 * Bootstrapping a control plane: the operator project and its first admin key. The local control
 * plane does it on every start; a deployment runs `scripts/bootstrap.ts` once (through `sst shell`),
 * which prints the key. An operator with access to the deployment can mint another admin key
 * (`--new-key`) when the first is lost.
 */
import type { ApiKeyInfo } from "./model/project"
import type { Repos } from "./store"

export interface BootstrapResult {
  projectCreated: boolean
  /** The new admin key, when one was made (shown once). */
  adminKey?: ApiKeyInfo & { key: string }
}

export async function bootstrapOperator(
  rt: { repos: Repos; operatorProject: string },
  options: { newKey?: boolean; key?: string; keyName?: string } = {},
): Promise<BootstrapResult> {
  const { projects } = rt.repos
  let projectCreated = false
  if (!(await projects.get(rt.operatorProject))) {
    try {
      await projects.create(rt.operatorProject, "Operators")
      projectCreated = true
    } catch (error) {
      // Another bootstrap won the race: the project exists, which is all that matters.
      if (!(await projects.get(rt.operatorProject))) throw error
    }
  }
  if (!projectCreated && !options.newKey && !options.key) return { projectCreated }
  const adminKey = await projects.createKey(rt.operatorProject, "admin", {
    name: options.keyName ?? "operator admin key",
    ...(options.key ? { key: options.key } : {}),
  })
  // A given key that exists already comes back as it is: one revoked stays revoked, so say so rather
  // than start a control plane whose admin key is refused.
  if (adminKey.revokedAt || adminKey.role !== "admin")
    throw new Error(
      `the admin key given (${adminKey.id}) is ${adminKey.revokedAt ? `revoked (at ${adminKey.revokedAt})` : `a "${adminKey.role}" key`}: give another, or none to have one made`,
    )
  return { projectCreated, adminKey }
}
