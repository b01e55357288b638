/**
 * The `slurm` backend (kind `delegated`): Slurm places the work; swarmplane reaches the cluster the
 * way a person does, by SSH to the login node. One shared connection per login while the process
 * lives, one command per reconcile pass for every attempt (squeue + scontrol/sacct fallbacks, exit
 * files, progress files) and one per swarm (`replica-set.ts`), submissions as array jobs named from
 * ids persisted before they are sent (a pass's submissions in one exec), so a retried submit adopts
 * instead of duplicating. Every contact
 * is recorded as the backend's health; no fault of the cluster escapes as a crash.
 */

import type { Backend, BackendConfigOf } from "../../model/backend"
import { iso } from "../../util/clock"
import { BackendError, VisibleError } from "../../util/errors"
import { newId } from "../../util/ids"
import type {
  BackendDeps,
  FetchesManyLogs,
  LaunchResult,
  ReconcileResult,
  ReplicaSetBackend,
  ReportsCapacity,
  ReportsHealth,
  ScheduleResult,
  TaskBackend,
  TaskRef,
} from "../protocol"
import { awaitingSwarms } from "../swarm-gate"
import { capacityOf, clusterStatus } from "./cluster"
import { logsCommand, tailsOf } from "./logs"
import { LostAfterMs, observeStopping, observeTasks, parseSubmission, parseTarget } from "./observe"
import {
  JOB_NAME_PREFIX,
  latestSacctRecords,
  parseSacctCompletion,
  parseScontrolJobs,
  parseSqueue,
  parseVersion,
  type SinfoNode,
  type SlurmVersion,
} from "./parse"
import {
  type BatchSubmission,
  cancelCommand,
  parseExitSection,
  parseProgressSection,
  parseSubmitBatch,
  reconcileCommand,
  sections,
  statusCommand,
  submitBatchCommand,
} from "./remote"
import { SlurmReplicaSet } from "./replica-set"
import { outputDirOf, outputPath, progressPath, sbatchScript, UnsafeValueError } from "./script"
import type { SshSession } from "./ssh"
import { acquireSession } from "./ssh-pool"
import { submissionOf, submitResult } from "./submission"

export { LostAfterMs, parseSubmission, parseTarget }

type SlurmConfig = BackendConfigOf<"slurm">

/** How long a new job's first submission waits for all of its tasks to be written. */
export const WholeJobWaitMs = 30_000

/** Commands longer than this are sent on stdin (the kernel's limit on one argument is 128 KiB). */
export const InlineCommandBytes = 32 * 1024

/** Submissions per exec: many jobs in one round trip, and an exec short enough to end within a pass. */
export const SubmitBatchSize = 50

export function SlurmBackend(
  backend: Backend & { config: SlurmConfig },
  runtime: BackendDeps,
): TaskBackend & ReplicaSetBackend & ReportsHealth & ReportsCapacity & FetchesManyLogs {
  const { project, id: backendId, config } = backend
  let lease: ReturnType<typeof acquireSession> | undefined
  let version: SlurmVersion | undefined

  /** What this invocation's contacts with the login node came to (the backend's health). */
  let contact: { healthy: boolean; message?: string } | undefined

  /** The login's shared SSH session (kept across invocations); the Slurm version is read on first contact. */
  async function ssh(): Promise<SshSession> {
    if (!lease) {
      const privateKey = await runtime.secrets.get(project, config.sshKeySecret)
      lease ??= acquireSession({
        host: config.loginHost,
        port: config.port,
        user: config.user,
        privateKey,
        hostKey: config.hostKey,
        connectTimeoutS: config.connectTimeoutS,
        commandTimeoutS: config.commandTimeoutS,
      })
    }
    return lease.session
  }

  /**
   * One command on the login node; its success or failure is the backend's health. A long command (a
   * pass over a thousand tasks) goes to `sh` on stdin: sshd hands a command line to the shell as one
   * argument, which Linux caps at 128 KiB.
   */
  async function run(command: string, stdin?: string) {
    const exec = (s: SshSession, text: string) =>
      stdin === undefined && text.length > InlineCommandBytes ? s.exec("sh -s", text) : s.exec(text, stdin)
    try {
      const s = await ssh()
      let out: Awaited<ReturnType<SshSession["exec"]>>
      if (!version) {
        const first = await exec(s, `squeue --version; ${command}`)
        const [line = "", ...rest] = first.stdout.split("\n")
        version = parseVersion(line)
        if (version.major < 20)
          throw new BackendError(`Slurm ${line.trim()} is older than 20.02, which this backend needs`, false)
        out = { ...first, stdout: rest.join("\n") }
      } else out = await exec(s, command)
      if (!contact || contact.healthy) contact = { healthy: true }
      return out
    } catch (error) {
      contact = { healthy: false, message: error instanceof Error ? error.message : String(error) }
      throw error
    }
  }

  const serving = SlurmReplicaSet({
    config,
    run: (command, stdin) => run(command, stdin),
    backendId,
    project,
  })

  /** A submission's script, checked: a value Slurm would read differently from what it says is refused. */
  async function scriptOf(name: string, refs: TaskRef[]): Promise<{ script: string } | { refused: string }> {
    const swarm = refs[0]!.job.spec.swarm
    const url = swarm ? (await runtime.repos.swarms.get(project, swarm))?.url : undefined
    try {
      return { script: sbatchScript(config, submissionOf(name, refs, url)) }
    } catch (error) {
      if (error instanceof UnsafeValueError) return { refused: error.message }
      throw error
    }
  }

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

    health: () => contact,

    /**
     * Slurm places the work: every pending task gets an attempt, one submission per job's batch of them,
     * except tasks of a job against a swarm that does not serve yet (`SWARM_ENDPOINT` must mean something).
     */
    async schedule(request): Promise<ScheduleResult> {
      const byJob = new Map<string, TaskRef[]>()
      const { ready, pendingReasons } = await awaitingSwarms(runtime.repos, project, request.pending)
      for (const ref of ready) byJob.set(ref.job.id, [...(byJob.get(ref.job.id) ?? []), ref])
      const assignments: ScheduleResult["assignments"] = []
      const now = runtime.clock.now()
      for (const refs of byJob.values()) {
        // A new job's tasks are written in batches: one a pass sees half-written waits (briefly) for the
        // rest, so the job goes out as one array.
        const job = refs[0]!.job
        const fresh =
          Object.keys(job.counts).every((state) => state === "PENDING") &&
          refs.every((ref) => ref.task.data.attempts.length === 0)
        if (fresh && refs.length < job.spec.tasks && now - Date.parse(job.createdAt) < WholeJobWaitMs) {
          for (const ref of refs)
            pendingReasons.set(
              `${job.id}/${ref.task.data.index}`,
              "waiting for the job's tasks to be written",
            )
          continue
        }
        const name = `${JOB_NAME_PREFIX}${newId("s", runtime.clock.now())}`
        const ordered = refs.sort((a, b) => a.task.data.index - b.task.data.index)
        for (const [index, ref] of ordered.entries())
          assignments.push({ ref, attemptUid: request.mintAttemptUid(), submission: `${name}#${index}` })
      }
      return { assignments, preemptions: [], pendingReasons }
    },

    /**
     * Submit (or adopt) each submission. A script Slurm would run differently from what it says (a
     * hostile value) and sbatch's refusal are final; a login node that cannot be reached, or refuses
     * the login, defers the rest of the launch: those attempts are tried again with backoff, and the
     * next try adopts what a cut-off try did submit.
     */
    async launch(request): Promise<LaunchResult> {
      const bySubmission = new Map<string, TaskRef[]>()
      for (const ref of request.attempts) {
        const sub = parseSubmission(ref.task.data.attempts.at(-1)?.submission)
        if (sub) bySubmission.set(sub.name, [...(bySubmission.get(sub.name) ?? []), ref])
      }
      const result: Required<LaunchResult> = { launched: [], failed: [], deferred: [] }
      const ready: (BatchSubmission & { refs: TaskRef[] })[] = []
      for (const [name, refs] of bySubmission) {
        const checked = await scriptOf(name, refs)
        if ("refused" in checked) {
          for (const ref of refs) result.failed.push({ ref, message: checked.refused })
          continue
        }
        const firstTry = refs.every((ref) =>
          request.firstTry?.has(ref.task.data.attempts.at(-1)?.attemptUid ?? ""),
        )
        ready.push({ name, firstTry, script: checked.script, refs })
      }
      // A batch of submissions per exec: one round trip to the login node for many jobs.
      let unreachable: string | undefined
      for (let start = 0; start < ready.length; start += SubmitBatchSize) {
        const batch = ready.slice(start, start + SubmitBatchSize)
        // Past the pass's lease another pass may submit these too: leave them to it (it adopts what
        // this one did submit).
        if (!unreachable && request.deadline !== undefined && runtime.clock.now() >= request.deadline)
          unreachable = "the pass's lease ran out before this was submitted; the next pass submits it"
        let outputs: ReturnType<typeof parseSubmitBatch> | undefined
        if (!unreachable)
          try {
            outputs = parseSubmitBatch((await run(submitBatchCommand(batch, outputDirOf(config)))).stdout)
          } catch (error) {
            if (!(error instanceof BackendError || error instanceof VisibleError)) throw error
            unreachable = error.message
          }
        for (const [i, submission] of batch.entries()) {
          const out = outputs?.get(i)
          if (!out) {
            // Cut off before its turn (or after: the next try adopts what it submitted).
            const message =
              unreachable ?? "the login node's answer ended before this submission; the next pass tries again"
            for (const ref of submission.refs) result.deferred.push({ ref, message })
            continue
          }
          const outcome = submitResult(out)
          if ("refused" in outcome) {
            for (const ref of submission.refs) result.failed.push({ ref, message: outcome.refused })
            continue
          }
          if (outcome.adopted)
            runtime.logger.info(
              `${project} slurm ${backendId}: adopted job ${outcome.jobId} (${submission.name}) from an earlier submit`,
            )
          for (const ref of submission.refs) {
            const index = parseSubmission(ref.task.data.attempts.at(-1)!.submission)!.index
            result.launched.push({ ref, target: `${outcome.jobId}_${index}` })
          }
        }
      }
      return result
    },

    /**
     * One command for the whole pass: the queue, the records of what ended, exit and progress files of
     * the live attempts. No live work, no command. (Each swarm is read by its own command.)
     */
    async reconcile(request): Promise<ReconcileResult> {
      const launched = request.live.filter((ref) => parseTarget(ref.task.data.attempts.at(-1)?.target))
      const stopping = request.stopping ?? []
      if (!launched.length && !stopping.length) return { transitions: [], workers: [] }
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
      const dir = outputDirOf(config)
      const out = await run(
        reconcileCommand(names, arrayIds, progressFiles, {
          outputDir: dir,
        }),
      )
      if (out.code !== 0)
        throw new BackendError(
          `squeue failed on ${config.loginHost}: ${out.stderr.trim() || `exit ${out.code}`}`,
          true,
        )
      const parts = sections(out.stdout)
      const rows = parseSqueue(parts.main)
      const observed = observeTasks(
        launched,
        {
          rows,
          records: [...parseScontrolJobs(parts.scontrol).values()],
          sacct: latestSacctRecords(parseSacctCompletion(parts.sacct)),
          progress: parseProgressSection(parts.progress),
          exits: parseExitSection(parts.exit),
        },
        runtime.clock.now(),
      )
      // What a failed task printed last is usually why: read in one more command, only when some failed.
      const failed = (observed.transitions ?? []).filter((t) => t.outcome.kind === "failed")
      if (failed.length) {
        const tails = await this.fetchLogsMany(
          failed.map((t) => t.ref),
          2,
        ).catch(() => [])
        failed.forEach((t, i) => {
          const said = tails[i]?.lines
            .filter((l) => l.trim())
            .slice(-2)
            .join(" | ")
          if (said && t.outcome.kind === "failed")
            t.outcome = {
              ...t.outcome,
              message: `${t.outcome.message ?? t.outcome.reason}; last output: ${said.length > 600 ? `${said.slice(0, 600)}...` : said}`,
            }
        })
      }
      // What swarmplane ended and Slurm may still run, from the same squeue rows.
      const stops = observeStopping(stopping, rows)
      return {
        ...observed,
        transitions: [...(observed.transitions ?? []), ...stops.transitions],
        unstopped: stops.unstopped,
        workers: [],
      }
    },

    /**
     * The cluster as the login node shows it. Unhealthy, with the reason, when a partition the config
     * names does not exist there (every submit to it would be refused).
     */
    async status() {
      const out = await run(statusCommand())
      if (out.code !== 0)
        throw new BackendError(`sinfo failed on ${config.loginHost}: ${out.stderr.trim()}`, true)
      const status = clusterStatus(
        config,
        out.stdout,
        version ? `${version.major}.${version.minor}.${version.patch}` : undefined,
      )
      if (!status.healthy)
        contact = { healthy: false, ...(status.message ? { message: status.message } : {}) }
      return status
    },

    async resourceCapacity() {
      return capacityOf((await this.status()).detail.nodes as SinfoNode[])
    },

    async fetchLogs(ref, tail) {
      return (await this.fetchLogsMany([ref], tail))[0]!
    },

    /** The tails of many tasks' output files in one command (`job logs` of a whole job). */
    async fetchLogsMany(refs, tail) {
      const files = refs.map((ref) => {
        const attempt = ref.task.data.attempts.at(-1)
        const sub = parseSubmission(attempt?.submission)
        return {
          attemptUid: attempt?.attemptUid ?? "",
          ...(sub ? { path: outputPath(config, sub.name, sub.index) } : {}),
        }
      })
      const paths = files.flatMap((f) => (f.path ? [f.path] : []))
      const out = paths.length ? await run(logsCommand(paths, tail)) : { stdout: "" }
      return tailsOf(files, out.stdout, tail, iso(runtime.clock.now()))
    },

    async stop(effects) {
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

    async close() {
      lease?.release()
      lease = undefined
    },

    observeReplicaSet: (swarm) => serving.observeReplicaSet(swarm),
    startReplica: (swarm, replica) => serving.startReplica(swarm, replica),
    stopReplicas: (swarm, slots) => serving.stopReplicas(swarm, slots),
    runRouter: (swarm) => serving.runRouter(swarm),
    stopRouter: (swarm) => serving.stopRouter(swarm),
    route: (swarm, urls) => serving.route(swarm, urls),
  }
}
