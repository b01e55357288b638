/**
 * Tasks of a job against a swarm (`spec.swarm`) wait until the swarm serves: `SWARM_ENDPOINT` must mean
 * something when they start. Shared by the delegated backends' `schedule`; each swarm is read once.
 */
import type { BackendDeps, TaskRef } from "./protocol"

export async function awaitingSwarms(
  repos: BackendDeps["repos"],
  project: string,
  pending: readonly TaskRef[],
): Promise<{ ready: TaskRef[]; pendingReasons: Map<string, string> }> {
  const pendingReasons = new Map<string, string>()
  const serving = new Map<string, boolean>()
  const ready: TaskRef[] = []
  for (const ref of pending) {
    const swarm = ref.job.spec.swarm
    if (swarm && !ref.job.serving) {
      if (!serving.has(swarm)) {
        const s = await repos.swarms.get(project, swarm)
        serving.set(swarm, s?.phase === "RUNNING" && !!s.url)
      }
      if (!serving.get(swarm)) {
        pendingReasons.set(`${ref.job.id}/${ref.task.data.index}`, `waiting for swarm ${swarm} to be RUNNING`)
        continue
      }
    }
    ready.push(ref)
  }
  return { ready, pendingReasons }
}
