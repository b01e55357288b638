/**
 * The `slurm` backend (kind `delegated`): Slurm places the work; swarmplane reaches the cluster the
 * way a person does, by SSH to the login node. One connection per invocation, one command per
 * reconcile pass for every attempt (squeue + scontrol/sacct fallbacks), submissions as array jobs
 * named from ids persisted before they are sent, so a retried submit adopts instead of duplicating.
 */
import type { Backend, BackendConfigOf } from "../../model/backend"
import type { Runtime } from "../../runtime"
import { iso } from "../../util/clock"
import { BackendError, NotSupportedError } from "../../util/errors"
import { newId } from "../../util/ids"
import type {
  LaunchResult,
  ReconcileResult,
  ScheduleResult,
  ServingBackend,
  TaskBackend,
  TaskRef,
} from "../protocol"
import {
  JOB_NAME_PREFIX,
  latestSacctRecords,
  mapSlurmState,
  parseQueueDepth,
  parseSacctCompletion,
  parseScontrolJobs,
  parseSinfo,
  parseSqueue,
  parseVersion,
  type SlurmVersion,
  toOutcome,
} from "./parse"
import {
  cancelCommand,
  parseProgressSection,
  progressOf,
  reconcileCommand,
  sections,
  statusCommand,
  submitOrAdoptCommand,
} from "./remote"
import { outputDirOf, outputPath, progressPath, type Submission, sbatchScript, sh } from "./script"
import { SlurmServing } from "./serving"
import { SshSession } from "./ssh"

type SlurmConfig = BackendConfigOf<"slurm">

/** An attempt unseen on the cluster this long after it was submitted counts as lost. */
export const LostAfterMs = 120_000

/** `<name>#<index>` of an attempt's submission. */
export function parseSubmission(text: string | undefined): { name: string; index: number } | undefined {
  const m = /^(.+)#(\d+)$/.exec(text ?? "")
  return m ? { name: m[1]!, index: Number(m[2]) } : undefined
}

/** `<array job id>_<index>`, what Slurm shows for an array task. */
export function parseTarget(text: string | undefined): { jobId: string; index: number } | undefined {
  const m = /^(\d+)_(\d+)$/.exec(text ?? "")
  return m ? { jobId: m[1]!, index: Number(m[2]) } : undefined
}

export function SlurmBackend(backend: Backend & { config: SlurmConfig }): TaskBackend & ServingBackend {
  const { project, id: backendId, config } = backend
  let runtime: Runtime | undefined
  let session: SshSession | undefined
  let version: SlurmVersion | undefined
  const rt = () => {
    if (!runtime) throw new Error("bindRuntime() first")
    return runtime
  }
  const unsupported = (what: string) => async (): Promise<never> => {
    throw new NotSupportedError("slurm", what)
  }

  /** The invocation's one SSH session; the Slurm version is read on first contact. */
  async function ssh(): Promise<SshSession> {
    if (!session) {
      const privateKey = await rt().secrets.get(project, config.sshKeySecret)
      session = new SshSession({
        host: config.loginHost,
        port: config.port,
        user: config.user,
        privateKey,
        hostKey: config.hostKey,
        connectTimeoutS: config.connectTimeoutS,
        commandTimeoutS: config.commandTimeoutS,
      })
    }
    return session
  }

  async function run(command: string, stdin?: string) {
    const s = await ssh()
    if (!version) {
      const out = await s.exec(`squeue --version; ${command}`, stdin)
      const [first = "", ...rest] = out.stdout.split("\n")
      version = parseVersion(first)
      if (version.major < 20)
        throw new BackendError(`Slurm ${first.trim()} is older than 20.02, which this backend needs`, false)
      return { ...out, stdout: rest.join("\n") }
    }
    return s.exec(command, stdin)
  }

  const serving = SlurmServing({
    config,
    run: (command, stdin) => run(command, stdin),
    rt,
    backendId,
    project,
  })

  return {
    descriptor: {
      backendId,
      kind: "delegated",
      advertisedAttributes: {
        partition: [...new Set([config.partition, ...(config.gpuPartition ? [config.gpuPartition] : [])])],
        ...Object.fromEntries(Object.entries(config.attributes ?? {}).map(([k, v]) => [k, [v]])),
      },
      scaleGroups: [],
      displayName: config.displayName ?? backendId,
    },

    bindRuntime(r) {
      runtime = r
    },

    /**
     * Slurm places the work: every pending task gets an attempt, one submission per job's batch of them,
     * except tasks of a job against a swarm that does not serve yet (`SWARM_ENDPOINT` must mean something).
     */
    async schedule(request): Promise<ScheduleResult> {
      const byJob = new Map<string, TaskRef[]>()
      const pendingReasons = new Map<string, string>()
      const serving = new Map<string, boolean>()
      for (const ref of request.pending) {
        const swarm = ref.job.spec.swarm
        if (swarm && !ref.job.serving) {
          if (!serving.has(swarm)) {
            const s = await rt().repos.swarms.get(project, swarm)
            serving.set(swarm, s?.phase === "RUNNING" && !!s.url)
          }
          if (!serving.get(swarm)) {
            pendingReasons.set(
              `${ref.job.id}/${ref.task.data.index}`,
              `waiting for swarm ${swarm} to be RUNNING`,
            )
            continue
          }
        }
        byJob.set(ref.job.id, [...(byJob.get(ref.job.id) ?? []), ref])
      }
      const assignments: ScheduleResult["assignments"] = []
      for (const refs of byJob.values()) {
        const name = `${JOB_NAME_PREFIX}${newId("s", rt().clock.now())}`
        const ordered = refs.sort((a, b) => a.task.data.index - b.task.data.index)
        for (const [index, ref] of ordered.entries())
          assignments.push({ ref, attemptUid: request.mintAttemptUid(), submission: `${name}#${index}` })
      }
      return { assignments, preemptions: [], pendingReasons }
    },

    async launch(request): Promise<LaunchResult> {
      const bySubmission = new Map<string, TaskRef[]>()
      for (const ref of request.attempts) {
        const sub = parseSubmission(ref.task.data.attempts.at(-1)?.submission)
        if (sub) bySubmission.set(sub.name, [...(bySubmission.get(sub.name) ?? []), ref])
      }
      const result: LaunchResult = { launched: [], failed: [] }
      for (const [name, refs] of bySubmission) {
        const job = refs[0]!.job
        const entries = refs.map((ref) => {
          const attempt = ref.task.data.attempts.at(-1)!
          return {
            index: parseSubmission(attempt.submission)!.index,
            shard: ref.task.data.index,
            attemptUid: attempt.attemptUid,
          }
        })
        const swarm = job.spec.swarm ? await rt().repos.swarms.get(project, job.spec.swarm) : undefined
        const sub: Submission = {
          name,
          entries,
          nshards: job.spec.tasks,
          resources: job.spec.resources,
          ...(job.spec.timeLimitS !== undefined ? { timeLimitS: job.spec.timeLimitS } : {}),
          env: { ...job.spec.env, ...(swarm?.url ? { SWARM_ENDPOINT: swarm.url } : {}) },
          command: job.spec.command,
          ...(job.spec.image ? { image: job.spec.image } : {}),
          ...placement(job.spec.constraints),
        }
        const out = await run(submitOrAdoptCommand(name, outputDirOf(config)), sbatchScript(config, sub))
        const adopted = /^adopted (\d+)/.exec(out.stdout.trim())?.[1]
        const submitted = /^(\d+)(;\S+)?$/.exec(out.stdout.trim())?.[1]
        const jobId = adopted ?? submitted
        if (out.code !== 0 || !jobId) {
          const message = `sbatch refused the job: ${(out.stderr || out.stdout).trim().split("\n").at(-1) ?? `exit ${out.code}`}`
          for (const ref of refs) result.failed.push({ ref, message })
          continue
        }
        if (adopted)
          rt().logger.info(
            `${project} slurm ${backendId}: adopted job ${jobId} (${name}) from an earlier submit`,
          )
        for (const [i, ref] of refs.entries())
          result.launched.push({ ref, target: `${jobId}_${entries[i]!.index}` })
      }
      return result
    },

    async reconcile(request): Promise<ReconcileResult> {
      const launched = request.live.filter((ref) => parseTarget(ref.task.data.attempts.at(-1)?.target))
      if (!launched.length) return { transitions: [], workers: [] }
      const names = [
        ...new Set(
          launched
            .map((ref) => parseSubmission(ref.task.data.attempts.at(-1)?.submission)?.name)
            .filter((n): n is string => !!n),
        ),
      ]
      const arrayIds = [
        ...new Set(launched.map((ref) => parseTarget(ref.task.data.attempts.at(-1)?.target)!.jobId)),
      ]
      // What each task wrote to SWARMPLANE_PROGRESS_FILE (batch shards do), read in the same command.
      const progressFiles = launched.flatMap((ref) => {
        const attempt = ref.task.data.attempts.at(-1)!
        const sub = parseSubmission(attempt.submission)
        return sub ? [{ key: attempt.attemptUid, path: progressPath(config, sub.name, sub.index) }] : []
      })
      const out = await run(reconcileCommand(names, arrayIds, progressFiles))
      if (out.code !== 0)
        throw new BackendError(
          `squeue failed on ${config.loginHost}: ${out.stderr.trim() || `exit ${out.code}`}`,
          true,
        )
      const parts = sections(out.stdout)
      const rows = parseSqueue(parts.main)
      const records = [...parseScontrolJobs(parts.scontrol).values()]
      const sacct = latestSacctRecords(parseSacctCompletion(parts.sacct))
      const now = rt().clock.now()
      const transitions: ReconcileResult["transitions"] = []
      const progress: NonNullable<ReconcileResult["progress"]> = []
      const waiting: NonNullable<ReconcileResult["waiting"]> = []
      const documents = parseProgressSection(parts.progress)
      for (const ref of launched) {
        const attemptUid = ref.task.data.attempts.at(-1)!.attemptUid
        const counters = progressOf(documents.get(attemptUid), attemptUid)
        if (counters) progress.push({ ref, progress: counters })
      }
      for (const ref of launched) {
        const attempt = ref.task.data.attempts.at(-1)!
        const target = parseTarget(attempt.target)!
        const row = rows.find(
          (r) =>
            (r.arrayJobId ?? r.jobId) === target.jobId &&
            (r.arrayTaskId === target.index || r.arrayTaskIds?.includes(target.index)),
        )
        const record = records.find((r) => r.arrayJobId === target.jobId && r.arrayTaskId === target.index)
        let slurm = row
          ? mapSlurmState(
              row.state,
              row.reason,
              record ? { exitCode: record.exitCode ?? 0, signal: record.signal ?? 0 } : undefined,
            )
          : undefined
        if (row && record && slurm?.kind !== "pending" && slurm?.kind !== "running")
          slurm = mapSlurmState(record.state, record.reason, {
            exitCode: record.exitCode ?? 0,
            signal: record.signal ?? 0,
          })
        if (!row) {
          // Gone from the queue: the completion log knows a one-task submission for sure.
          const sub = parseSubmission(attempt.submission)
          const matches = [...sacct.values()].filter((r) => r.name === sub?.name)
          if (
            matches.length === 1 &&
            launched.filter((r) => r.task.data.attempts.at(-1)?.submission?.startsWith(`${sub?.name}#`))
              .length === 1
          )
            slurm = mapSlurmState(matches[0]!.state, "None", {
              exitCode: matches[0]!.exitCode ?? 0,
              signal: matches[0]!.signal ?? 0,
            })
          else if (now - Date.parse(attempt.createdAt) > LostAfterMs)
            transitions.push({
              ref,
              outcome: {
                kind: "worker_failed",
                attemptUid: attempt.attemptUid,
                reason: "lost",
                message: `job ${attempt.target} left the queue before its end was seen`,
              },
            })
          if (!slurm) continue
        }
        if (!slurm) continue
        if (slurm.kind === "pending") waiting.push({ ref, reason: `Slurm: ${slurm.message}` })
        const outcome = toOutcome(slurm, attempt.attemptUid)
        if (outcome && !(outcome.kind === "running" && ref.task.data.state === "RUNNING"))
          transitions.push({ ref, outcome })
      }
      return { transitions, workers: [], progress, waiting }
    },

    async autoscale() {
      return { groups: [] }
    },

    async status() {
      const out = await run(statusCommand())
      if (out.code !== 0)
        throw new BackendError(`sinfo failed on ${config.loginHost}: ${out.stderr.trim()}`, true)
      const parts = sections(out.stdout)
      return {
        healthy: true,
        detail: {
          version: version ? `${version.major}.${version.minor}.${version.patch}` : undefined,
          partitions: parseSinfo(parts.main),
          queue: parseQueueDepth(parts.queue),
        },
      }
    },

    async autoscalerStatus() {
      return { groups: [] }
    },

    async resourceCapacity() {
      const status = await this.status()
      const partitions = (status.detail.partitions ?? []) as ReturnType<typeof parseSinfo>
      const cpu = partitions.reduce((n, p) => n + p.cpus.total, 0)
      const free = partitions.reduce((n, p) => n + p.cpus.idle, 0)
      const gpu = partitions.reduce((n, p) => n + p.gpus, 0)
      return { total: { cpu, memoryMiB: 0, gpu }, free: { cpu: free, memoryMiB: 0, gpu } }
    },

    runtimeImage: () => undefined,

    async getProcessStatus(target) {
      const t = parseTarget(target.attemptUid) ?? undefined
      if (!t) throw new NotSupportedError("slurm", "process status by attempt id (give the Slurm job id)")
      const out = await run(`scontrol show job -o ${sh(`${t.jobId}_${t.index}`)}`)
      return { ...(parseScontrolJobs(out.stdout).values().next().value?.fields ?? {}) }
    },

    profileTask: unsupported("profiling"),
    execInContainer: unsupported("exec"),

    async fetchLogs(ref, tail) {
      const attempt = ref.task.data.attempts.at(-1)
      const sub = parseSubmission(attempt?.submission)
      if (!attempt || !sub) return { attemptUid: attempt?.attemptUid ?? "", lines: [], truncated: false }
      const out = await run(
        `tail -n ${tail + 1} ${sh(outputPath(config, sub.name, sub.index))} 2>/dev/null || true`,
      )
      const lines = out.stdout
        .replace(/\n$/, "")
        .split("\n")
        .filter((l, i, all) => l !== "" || i < all.length - 1)
      return {
        attemptUid: attempt.attemptUid,
        lines: lines.slice(-tail),
        truncated: lines.length > tail,
        updatedAt: iso(rt().clock.now()),
      }
    },

    // No worker store: Slurm tracks its nodes.
    async seedLiveness() {},

    async runTeardown(effects) {
      const ids = effects.flatMap((e) => (e.kind === "stop" && parseTarget(e.target) ? [e.target!] : []))
      if (!ids.length) return
      const out = await run(cancelCommand(ids))
      const left = out.stdout.trim()
      if (left)
        throw new BackendError(
          `scancel left ${left.split("\n").join(", ")} running on ${config.loginHost}`,
          true,
        )
    },

    async teardown() {},
    async pruneDeadWorkers() {
      return 0
    },

    async close() {
      session?.close()
      session = undefined
    },

    createOrUpdate: (swarm) => serving.createOrUpdate(swarm),
    servingStatus: (swarm) => serving.status(swarm),
    delete: (swarm) => serving.delete(swarm),
  }
}

/** A job's constraints as Slurm placement: `partition` picks the partition, `feature` adds `--constraint`. */
function placement(constraints: TaskRef["job"]["spec"]["constraints"]): {
  partition?: string
  features: string[]
} {
  const partition = constraints.find((c) => c.key === "partition" && c.op === "eq")?.value
  const features = constraints
    .filter((c) => c.key === "feature" && c.op === "eq" && c.value)
    .map((c) => c.value!)
  return { ...(partition ? { partition } : {}), features }
}
