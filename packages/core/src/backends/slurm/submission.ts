/**
 * A submission, from the attempts persisted for it: the array entries (index → shard and attempt), the
 * job's resources, environment and command, and its constraints as Slurm placement. Pure; the backend
 * writes the script from it (script.ts) and sends it with submit-or-adopt (remote.ts).
 */
import type { TaskRef } from "../protocol"
import { parseSubmission } from "./observe"
import type { Submission } from "./script"

/** The submission `name` of these attempts (the tasks of one job), against a swarm at `swarmUrl`. */
export function submissionOf(name: string, refs: TaskRef[], swarmUrl: string | undefined): Submission {
  const job = refs[0]!.job
  return {
    name,
    entries: refs.map((ref) => {
      const attempt = ref.task.data.attempts.at(-1)!
      return {
        index: parseSubmission(attempt.submission)!.index,
        shard: ref.task.data.index,
        attemptUid: attempt.attemptUid,
      }
    }),
    nshards: job.spec.tasks,
    resources: job.spec.resources,
    ...(job.spec.timeLimitS !== undefined ? { timeLimitS: job.spec.timeLimitS } : {}),
    env: { ...job.spec.env, ...(swarmUrl ? { SWARM_ENDPOINT: swarmUrl } : {}) },
    command: job.spec.command,
    ...(job.spec.image ? { image: job.spec.image } : {}),
    ...placement(job.spec.constraints),
  }
}

/** A job's constraints as Slurm placement: `partition` picks the partition, `feature` adds `--constraint`. */
export function placement(constraints: TaskRef["job"]["spec"]["constraints"]): {
  partition?: string
  features: string[]
} {
  const partition = constraints.find((c) => c.key === "partition" && c.op === "eq")?.value
  const features = constraints
    .filter((c) => c.key === "feature" && c.op === "eq" && c.value)
    .map((c) => c.value!)
  return { ...(partition ? { partition } : {}), features }
}

/** What submit-or-adopt printed: the Slurm job id (submitted or adopted), or sbatch's refusal. */
export function submitResult(out: {
  code: number
  stdout: string
  stderr: string
}): { jobId: string; adopted: boolean } | { refused: string } {
  const text = out.stdout.trim()
  const adopted = /^adopted (\d+)/.exec(text)?.[1]
  const jobId = adopted ?? /^(\d+)(;\S+)?$/.exec(text)?.[1]
  if (out.code !== 0 || !jobId)
    return {
      refused: `sbatch refused the job: ${(out.stderr || out.stdout).trim().split("\n").at(-1) || `exit ${out.code}`}`,
    }
  return { jobId, adopted: !!adopted }
}
