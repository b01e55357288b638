/**
 * The batch/v1 Job swarmplane sends an EKS cluster for one task attempt (backend-contracts.md Part C.1),
 * built from its own models, and the one Indexed Job of a gang (`gangJobObject`). Pure: an attempt (or
 * a gang's attempts) and the backend's config give a Job.
 *
 * The Job's name is deterministic (from the attempt's id), so a pass that crashed after creating it is
 * answered 409 AlreadyExists on the next try and adopts it instead of making a second. It is labelled
 * for the backend's Kueue LocalQueue and created suspended: Kueue admits it against the ClusterQueue's
 * quota and unsuspends it. Every Job and its pods carry swarmplane's labels, which a reconcile pass
 * lists by (`selectorOf`).
 */
import { createHash } from "node:crypto"
import type { BackendConfigOf } from "../../model/backend"
import type { Constraint } from "../../model/common"
import type { JobSpec, Job as SwarmplaneJob } from "../../model/job"
import type { FieldIssue } from "../../util/errors"
import { ProgressStdoutVariable } from "../progress-log"
import type { Job, Toleration } from "./types"

export type EksConfig = BackendConfigOf<"eks">

/** A DNS-1123 label: a Job's name is one (its pods' `job-name` label holds it whole). */
export const MaxNameLength = 63
/** The image of a job that names none. */
export const DefaultJobImage = "nvcr.io/nvidia/pytorch:25.08-py3"
/** The one container of a task's pod. */
export const ContainerName = "main"
/** How long a finished Job stays for a late pass to read before Kubernetes removes it. */
export const JobTtlSeconds = 3600

export const QueueLabel = "kueue.x-k8s.io/queue-name"
export const PriorityClassLabel = "kueue.x-k8s.io/priority-class"
/** swarmplane's labels, on each Job and its pods. */
export const Labels = {
  project: "swarmplane.dev/project",
  backend: "swarmplane.dev/backend",
  job: "swarmplane.dev/job",
  task: "swarmplane.dev/task",
  attempt: "swarmplane.dev/attempt",
  /** On a gang's Job and pods: how many members it has. */
  gang: "swarmplane.dev/gang",
} as const

const hash = (text: string, length: number) =>
  createHash("sha256").update(text).digest("hex").slice(0, length)

/** `text` as lowercase letters, digits and single dashes, with no dash at either end. */
function dnsSafe(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
}

/**
 * The Job of a task attempt: `sp-<attempt id>-<hash of it>`, at most `MaxNameLength`. The hash keeps
 * two ids apart that differ only in case or are cut alike.
 */
export function jobName(attemptUid: string): string {
  const tag = hash(attemptUid, 8)
  const room = MaxNameLength - "sp-".length - tag.length - 1
  const middle = dnsSafe(attemptUid).slice(0, room).replace(/-+$/, "")
  return middle ? `sp-${middle}-${tag}` : `sp-${tag}`
}

/** A label value Kubernetes takes (≤ 63, alphanumerics and `-_.` inside): as is, else a digest. */
export function labelValue(text: string): string {
  if (text.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(text)) return text
  return `h-${hash(text, 40)}`
}

/** The label selector of every Job (and pod) of this backend: what one pass lists. */
export const selectorOf = (project: string, backendId: string) =>
  `${Labels.project}=${labelValue(project)},${Labels.backend}=${labelValue(backendId)}`

/**
 * A job's command with a leading `swarmplane-agent` replaced by how the image runs the agent
 * (`config.agentCommand`): a batch job's shards run `swarmplane-agent run-batch ...`.
 */
export function agentArgv(config: Pick<EksConfig, "agentCommand">, command: readonly string[]): string[] {
  if (command[0] !== "swarmplane-agent") return [...command]
  return [...config.agentCommand, ...command.slice(1)]
}

/**
 * `argv` as Kubernetes must be given it to run it as written: it expands `$(VAR)` in a container's
 * command and args and turns `$$` into `$`, so every `$` is doubled (a shell's `$HOME` or `$$` then
 * reaches the shell unchanged, as on every other backend).
 */
export const literalArgv = (argv: readonly string[]) => argv.map((arg) => arg.replaceAll("$", "$$$$"))

/** Kubernetes' quantity of `cpu` cores: whole cores as they are, fractions in millicores. */
export const cpuQuantity = (cpu: number) =>
  Number.isInteger(cpu) ? String(cpu) : `${Math.ceil(cpu * 1000)}m`

/** Kubernetes' node affinity operators, by constraint op (`ge`/`le` on integers become `Gt`/`Lt` by one). */
function matchExpression(c: Constraint): { key: string; operator: string; values?: string[] } {
  const value = c.value === undefined ? undefined : String(c.value)
  const shifted = (by: number) => {
    const n = Number(value)
    return Number.isInteger(n) ? String(n + by) : String(value)
  }
  switch (c.op) {
    case "eq":
      return { key: c.key, operator: "In", values: [value!] }
    case "ne":
      return { key: c.key, operator: "NotIn", values: [value!] }
    case "in":
      return { key: c.key, operator: "In", values: (c.values ?? []).map(String) }
    case "exists":
      return { key: c.key, operator: "Exists" }
    case "not_exists":
      return { key: c.key, operator: "DoesNotExist" }
    case "gt":
      return { key: c.key, operator: "Gt", values: [value!] }
    case "ge":
      return { key: c.key, operator: "Gt", values: [shifted(-1)] }
    case "lt":
      return { key: c.key, operator: "Lt", values: [value!] }
    case "le":
      return { key: c.key, operator: "Lt", values: [shifted(1)] }
  }
}

/**
 * Where the pod may go: `eq` constraints (and the config's `nodeSelector`) as a node selector, the
 * others as required node affinity.
 */
export function placementOf(
  constraints: readonly Constraint[],
  config: Pick<EksConfig, "nodeSelector">,
): { nodeSelector?: Record<string, string>; affinity?: Record<string, unknown> } {
  const nodeSelector: Record<string, string> = { ...(config.nodeSelector ?? {}) }
  const expressions: ReturnType<typeof matchExpression>[] = []
  for (const c of constraints) {
    if (c.op === "eq" && c.value !== undefined) nodeSelector[c.key] = String(c.value)
    else expressions.push(matchExpression(c))
  }
  return {
    ...(Object.keys(nodeSelector).length ? { nodeSelector } : {}),
    ...(expressions.length
      ? {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [{ matchExpressions: expressions }],
              },
            },
          },
        }
      : {}),
  }
}

export interface JobInput {
  project: string
  backendId: string
  job: Pick<SwarmplaneJob, "id" | "spec">
  taskIndex: number
  attemptUid: string
  config: EksConfig
  /** The URL of the swarm the job calls (`job.spec.swarm`), once it serves. */
  swarmUrl?: string
}

/**
 * The Job of one task attempt: one pod (`parallelism = completions = 1`; a task is one process),
 * suspended for Kueue, never retried by Kubernetes (`backoffLimit: 0`, `restartPolicy: Never`: a failed
 * attempt is retried by swarmplane as a new attempt, under its failure budget, with a Job of its own).
 * `SHARD_ID`, `NSHARDS`, `ATTEMPT_UID` and `SWARM_ENDPOINT` are set as every backend sets them, after
 * the job's own environment (they win on a clash), and for a batch job `SWARMPLANE_PROGRESS_STDOUT=1`
 * (its runner prints its progress to its log, where a pass reads it). Requests equal limits (quota is
 * counted on requests).
 */
export function jobObject({
  project,
  backendId,
  job,
  taskIndex,
  attemptUid,
  config,
  swarmUrl,
}: JobInput): Job {
  const name = jobName(attemptUid)
  const labels: Record<string, string> = {
    [Labels.project]: labelValue(project),
    [Labels.backend]: labelValue(backendId),
    [Labels.job]: labelValue(job.id),
    [Labels.task]: String(taskIndex),
    [Labels.attempt]: labelValue(attemptUid),
  }
  const { resources } = job.spec
  const quantities: Record<string, string> = {
    cpu: cpuQuantity(resources.cpu),
    memory: `${resources.memoryMiB}Mi`,
    ...(resources.gpu > 0 ? { [config.gpuResourceName]: String(resources.gpu) } : {}),
  }
  const env = {
    ...job.spec.env,
    SHARD_ID: String(taskIndex),
    NSHARDS: String(job.spec.tasks),
    ATTEMPT_UID: attemptUid,
    ...(swarmUrl ? { SWARM_ENDPOINT: swarmUrl } : {}),
    ...(job.spec.batch ? { [ProgressStdoutVariable]: "1" } : {}),
  }
  const tolerations: Toleration[] = config.tolerations.map((t) => ({ ...t }))
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name,
      namespace: config.namespace,
      labels: {
        ...labels,
        [QueueLabel]: config.localQueue,
        ...(config.workloadPriorityClass ? { [PriorityClassLabel]: config.workloadPriorityClass } : {}),
      },
    },
    spec: {
      parallelism: 1,
      completions: 1,
      backoffLimit: 0,
      suspend: true,
      ttlSecondsAfterFinished: JobTtlSeconds,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: "Never",
          ...(config.serviceAccount ? { serviceAccountName: config.serviceAccount } : {}),
          ...placementOf(job.spec.constraints, config),
          ...(tolerations.length ? { tolerations } : {}),
          ...(config.imagePullSecrets.length
            ? { imagePullSecrets: config.imagePullSecrets.map((s) => ({ name: s })) }
            : {}),
          containers: [
            {
              name: ContainerName,
              image: job.spec.image ?? DefaultJobImage,
              command: literalArgv(agentArgv(config, job.spec.command)),
              env: Object.entries(env).map(([k, value]) => ({ name: k, value })),
              resources: { requests: quantities, limits: { ...quantities } },
            },
          ],
        },
      },
    },
  }
}

/** One member of a gang: its task and the attempt that runs at its completion index. */
export interface GangMember {
  taskIndex: number
  attemptUid: string
}

/** The label Kubernetes puts on an Indexed Job's pods: which completion index each runs. */
export const CompletionIndexLabel = "batch.kubernetes.io/job-completion-index"

/**
 * A gang attempt's `submission` (and `target`): its Job's name and the member's completion index,
 * `<job>#<index>` (a Job's name has no `#`). A single attempt's is the Job's name alone.
 */
export const gangSubmission = (name: string, index: number) => `${name}#${index}`

/** The Job's name and, for a gang member, its completion index, from a `submission` or `target`. */
export function parseSubmission(text: string): { name: string; index?: number } {
  const at = text.lastIndexOf("#")
  if (at < 0) return { name: text }
  const index = Number(text.slice(at + 1))
  return Number.isInteger(index) && index >= 0 ? { name: text.slice(0, at), index } : { name: text }
}

/** `text` as one word of a POSIX shell, single-quoted. */
const shellWord = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

/**
 * The shell prologue that gives a gang member's pod its own `SHARD_ID` and `ATTEMPT_UID`: an Indexed
 * Job's pods share one template and differ only by `JOB_COMPLETION_INDEX`, so the member is looked up
 * by it, and the job's command then runs as written (`exec "$@"`). An index with no member exits 97.
 */
export function gangPrologue(members: readonly GangMember[]): string {
  const cases = members.map(
    (m, index) => `${index}) SHARD_ID=${m.taskIndex} ATTEMPT_UID=${shellWord(m.attemptUid)} ;;`,
  )
  return [
    `case "$JOB_COMPLETION_INDEX" in`,
    ...cases,
    `*) echo "swarmplane: no gang member at completion index $JOB_COMPLETION_INDEX" >&2; exit 97 ;;`,
    "esac",
    "export SHARD_ID ATTEMPT_UID",
    'exec "$@"',
  ].join("\n")
}

export interface GangJobInput extends Omit<JobInput, "taskIndex" | "attemptUid"> {
  /** The gang's members in completion-index order (member `i` runs at index `i`). */
  members: readonly GangMember[]
}

/**
 * The Job of a gang: one Indexed Job (`completionMode: Indexed`, `parallelism = completions =
 * members`), so Kueue admits its one Workload (a pod set of all members) whole or not at all. Named from
 * its first member's attempt, as a single attempt's Job is, so a lost create is adopted. Otherwise as
 * `jobObject`: suspended for Kueue, `backoffLimit: 0` (one member's failure fails the Job and stops the
 * rest: swarmplane retries the gang whole), and each pod's command prefixed by `gangPrologue`.
 */
export function gangJobObject({ members, ...input }: GangJobInput): Job {
  const first = members[0]
  if (!first) throw new Error("a gang has at least one member")
  const base = jobObject({ ...input, taskIndex: first.taskIndex, attemptUid: first.attemptUid })
  const { [Labels.task]: _task, [Labels.attempt]: _attempt, ...labels } = base.metadata.labels ?? {}
  const spec = base.spec!
  const template = spec.template!
  const container = template.spec!.containers[0]!
  const command = [
    "sh",
    "-c",
    gangPrologue(members),
    "sh",
    ...agentArgv(input.config, input.job.spec.command),
  ]
  return {
    ...base,
    metadata: { ...base.metadata, labels: { ...labels, [Labels.gang]: String(members.length) } },
    spec: {
      ...spec,
      completionMode: "Indexed",
      parallelism: members.length,
      completions: members.length,
      template: {
        ...template,
        metadata: {
          labels: {
            ...Object.fromEntries(
              Object.entries(template.metadata?.labels ?? {}).filter(
                ([k]) => k !== Labels.task && k !== Labels.attempt,
              ),
            ),
            [Labels.gang]: String(members.length),
          },
        },
        spec: {
          ...template.spec!,
          containers: [
            {
              ...container,
              command: literalArgv(command),
              env: (container.env ?? []).filter((e) => e.name !== "SHARD_ID" && e.name !== "ATTEMPT_UID"),
            },
          ],
        },
      },
    },
  }
}

const LabelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/

/**
 * What the generic job schema lets through but this backend cannot honour, checked at the API (a 400
 * naming the field): a gang placed by a shared attribute (`coscheduling.groupBy`: a gang is one Indexed
 * Job Kueue admits whole, but this backend does not ask Kueue to keep its pods on one attribute value),
 * and constraint values a node selector or node affinity cannot carry (a label value; an integer for
 * `gt`/`ge`/`lt`/`le`).
 */
export function eksJobIssues(spec: Pick<JobSpec, "constraints" | "coscheduling">): FieldIssue[] {
  const issues: FieldIssue[] = []
  if (spec.coscheduling?.groupBy !== undefined)
    issues.push({
      path: "coscheduling.groupBy",
      message:
        "eks backends admit a gang whole (one Indexed Job) but cannot keep its tasks on one attribute value",
    })
  spec.constraints.forEach((c, i) => {
    const values =
      c.op === "in" ? (c.values ?? []).map(String) : c.value === undefined ? [] : [String(c.value)]
    values.forEach((value) => {
      if (["gt", "ge", "lt", "le"].includes(c.op) && !/^-?\d+$/.test(value))
        issues.push({
          path: `constraints.${i}.value`,
          message: `"${c.op}" on eks compares integers (node affinity Gt/Lt)`,
        })
      else if (value.length > 63 || !LabelValue.test(value))
        issues.push({
          path: c.op === "in" ? `constraints.${i}.values` : `constraints.${i}.value`,
          message:
            "a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        })
    })
  })
  return issues
}
