/**
 * What a Slurm job state means for a swarmplane task (backend-contracts.md Part E). `mapSlurmState`
 * turns a state, its reason and exit code into a `SlurmOutcome`: still queued on the cluster
 * (`pending`, with a readable reason), `running`, a terminal kind that matches the `Outcome` kinds of
 * model/outcome.ts, or `unknown`. `toOutcome` adds the attempt id; `pending` and `unknown` give no
 * outcome (the task keeps its state; a pending message goes to `pendingReason`).
 */
import type { Outcome } from "../../model/outcome"
import type { ExitStatus } from "./parse-fields"
import { parseExitCode } from "./parse-fields"

/** Every job state of Part E: long name → squeue's short code. */
export const SlurmStateCodes = {
  PENDING: "PD",
  CONFIGURING: "CF",
  RUNNING: "R",
  COMPLETING: "CG",
  COMPLETED: "CD",
  CANCELLED: "CA",
  FAILED: "F",
  TIMEOUT: "TO",
  NODE_FAIL: "NF",
  PREEMPTED: "PR",
  OUT_OF_MEMORY: "OOM",
  BOOT_FAIL: "BF",
  DEADLINE: "DL",
  SUSPENDED: "S",
  STOPPED: "ST",
  REQUEUED: "RQ",
  REQUEUE_HOLD: "RH",
  REQUEUE_FED: "RF",
  RESV_DEL_HOLD: "RD",
  RESIZING: "RS",
  REVOKED: "RV",
  SIGNALING: "SI",
  SPECIAL_EXIT: "SE",
  STAGE_OUT: "SO",
} as const
export type SlurmState = keyof typeof SlurmStateCodes

/** Why a job failed, as `failed.reason`. */
export type SlurmFailure = "exit_code" | "signal" | "launch_failed" | "oom" | "timeout"

/** A Slurm state as swarmplane reads it. `state` is the normalised long name (or the raw text if unknown). */
export type SlurmOutcome =
  /** Queued on the cluster: not an outcome; `message` is for `pendingReason`. `blocked`: it will not start
   *  without someone acting (a hold, a down partition, a request that can never fit). */
  | { kind: "pending"; state: string; reason: string; message: string; blocked: boolean }
  /** Has an allocation. `suspended` for SUSPENDED/STOPPED (paused, not progressing; `message` says so). */
  | { kind: "running"; state: string; suspended: boolean; message?: string }
  | { kind: "succeeded"; state: string; exitCode: number }
  | {
      kind: "failed"
      state: string
      reason: SlurmFailure
      exitCode?: number
      signal?: number
      message: string
    }
  /** CANCELLED: by swarmplane's scancel or by a user or admin on the cluster. */
  | { kind: "killed"; state: string; reason: "cancelled"; message: string }
  | { kind: "preempted"; state: string; reason: "preempted"; message: string }
  /** The cluster lost it: a node failed or did not boot, or a federation sibling took it. */
  | { kind: "worker_failed"; state: string; reason: "node_fail" | "boot_fail" | "revoked"; message: string }
  | { kind: "unknown"; state: string; message: string }

const SHORT_TO_LONG = new Map(Object.entries(SlurmStateCodes).map(([long, short]) => [short, long]))

/** `CANCELLED by 1001` → CANCELLED, `CANCELLED+` → CANCELLED, `cd` → COMPLETED; `undefined` if not a state. */
export function normaliseSlurmState(text: string): SlurmState | undefined {
  const word = (text.trim().split(/\s+/)[0] ?? "").replace(/\+$/, "").toUpperCase()
  if (Object.hasOwn(SlurmStateCodes, word)) return word as SlurmState
  return SHORT_TO_LONG.get(word as never) as SlurmState | undefined
}

/** Pending reasons with a readable text; `true` marks those that need someone to act. */
const REASONS: Record<string, [string, boolean?]> = {
  None: ["submitted; the scheduler has not looked at it yet"],
  Resources: ["waiting for resources"],
  Priority: ["waiting behind higher-priority jobs"],
  Dependency: ["waiting for a job it depends on"],
  DependencyNeverSatisfied: ["a job it depends on failed; it can never start", true],
  BeginTime: ["waiting for its start time (also after a requeue)"],
  JobHeldUser: ["held by its user (scontrol release)", true],
  JobHeldAdmin: ["held by a cluster administrator", true],
  "job requeued in held state": ["requeued and held (scontrol release)", true],
  JobArrayTaskLimit: ["waiting for the array's limit on tasks running at once"],
  Licenses: ["waiting for licenses"],
  Reservation: ["waiting for its reservation"],
  ReqNodeNotAvail: ["the nodes it needs are not available (down, drained or reserved)"],
  "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions": [
    "the nodes it needs are down, drained or reserved for higher-priority partitions",
  ],
  PartitionDown: ["its partition is down", true],
  PartitionInactive: ["its partition is inactive", true],
  PartitionNodeLimit: ["asks for more nodes than its partition allows", true],
  PartitionTimeLimit: ["asks for more time than its partition allows", true],
  NodeDown: ["a node it needs is down"],
  BadConstraints: ["its constraints can never be satisfied", true],
  AssociationJobLimit: ["waiting on its account's job limit"],
  AssociationResourceLimit: ["waiting on its account's resource limit"],
  AssociationTimeLimit: ["its account's time limit is used up", true],
  QOSJobLimit: ["waiting on its QOS job limit"],
  QOSResourceLimit: ["waiting on its QOS resource limit"],
  QOSTimeLimit: ["its QOS time limit is used up", true],
  QOSUsageThreshold: ["waiting until its QOS usage falls below the threshold"],
  InvalidAccount: ["its account is invalid", true],
  InvalidQOS: ["its QOS is invalid", true],
  Cleaning: ["waiting while an earlier run is cleaned up"],
  Prolog: ["running its prolog"],
  FrontEndDown: ["no front end node is available"],
  InactiveLimit: ["reached the system inactive limit"],
  JobLaunchFailure: ["could not be launched; requeued"],
  NonZeroExitCode: ["exited non-zero; requeued"],
  SystemFailure: ["a Slurm, file system or network failure; requeued"],
  TimeLimit: ["hit its time limit; requeued"],
  WaitingForScheduling: ["waiting for the scheduler"],
}

/** `QOSMaxJobsPerUserLimit` → `max jobs per user`. */
const words = (camel: string) =>
  camel
    .replace(/Limit$/, "")
    .split(/(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])/)
    .map((word) => (/^[A-Z]+$/.test(word) && word.length > 1 ? word : word.toLowerCase()))
    .join(" ")

/** One pending reason (spaces or scontrol's underscores) → readable text and whether it is blocked. */
function reasonText(raw: string): [string, boolean] {
  const known = REASONS[raw] ?? REASONS[raw.replaceAll("_", " ")]
  if (known) return [known[0], known[1] ?? false]
  const limit = /^(QOS|Assoc)(Grp|Max)(\w+)$/.exec(raw)
  if (limit)
    return [
      `waiting on ${limit[1] === "QOS" ? "a QOS" : "an account"} limit: ${limit[2] === "Grp" ? "group" : "max"} ${words(limit[3]!)} (${raw})`,
      false,
    ]
  return [`waiting: ${raw}`, false]
}

/**
 * Readable text for squeue's `%r` / scontrol's `Reason=`. Several reasons come comma-joined
 * (`Nodes required for job are DOWN, DRAINED or ...,BeginTime`; the free text has ", " inside).
 */
export function pendingReasonMessage(reason: string): { message: string; blocked: boolean } {
  const parts = reason.trim() === "" ? ["None"] : reason.split(/,(?=\S)/)
  const texts = parts.map((part) => reasonText(part.trim()))
  return { message: texts.map(([text]) => text).join("; "), blocked: texts.some(([, blocked]) => blocked) }
}

const PENDING_STATES: Partial<Record<SlurmState, string>> = {
  CONFIGURING: "allocated; its nodes are being prepared",
  REQUEUED: "requeued; waiting to run again",
  REQUEUE_HOLD: "requeued and held (scontrol release)",
  REQUEUE_FED: "requeued by the federation",
  RESV_DEL_HOLD: "held: its reservation was deleted",
  SPECIAL_EXIT: "requeued in a special state and held (scontrol release)",
}

/**
 * Map a job state (long name, short code, or sacct's `CANCELLED by <uid>`), its reason (squeue `%r`,
 * scontrol `Reason=`) and exit code (`3:0`, or parsed) to what it means for the task.
 */
export function mapSlurmState(state: string, reason = "None", exit?: string | ExitStatus): SlurmOutcome {
  const name = normaliseSlurmState(state)
  const status = typeof exit === "string" ? parseExitCode(exit) : exit
  const code = status ? { exitCode: status.exitCode, signal: status.signal } : {}
  switch (name) {
    case undefined:
      return { kind: "unknown", state, message: `unknown Slurm job state "${state}" (reason ${reason})` }
    case "PENDING":
      return { kind: "pending", state: name, reason, ...pendingReasonMessage(reason) }
    case "CONFIGURING":
    case "REQUEUED":
    case "REQUEUE_HOLD":
    case "REQUEUE_FED":
    case "RESV_DEL_HOLD":
    case "SPECIAL_EXIT":
      return {
        kind: "pending",
        state: name,
        reason,
        message: PENDING_STATES[name]!,
        blocked: /HOLD|SPECIAL/.test(name),
      }
    case "RUNNING":
    case "COMPLETING":
    case "RESIZING":
    case "SIGNALING":
    case "STAGE_OUT":
      return { kind: "running", state: name, suspended: false }
    case "SUSPENDED":
      return {
        kind: "running",
        state: name,
        suspended: true,
        message: "suspended by the cluster; its CPUs are released",
      }
    case "STOPPED":
      return {
        kind: "running",
        state: name,
        suspended: true,
        message: "stopped (SIGSTOP); it keeps its CPUs",
      }
    case "COMPLETED":
      return { kind: "succeeded", state: name, exitCode: status?.exitCode ?? 0 }
    case "FAILED": {
      if (/JobLaunchFailure/.test(reason))
        return {
          kind: "failed",
          state: name,
          reason: "launch_failed",
          ...code,
          message: "the job could not be launched",
        }
      if (status && status.exitCode === 0 && status.signal !== 0)
        return {
          kind: "failed",
          state: name,
          reason: "signal",
          ...code,
          message: `killed by signal ${status.signal}`,
        }
      const exitText = status ? `exited with code ${status.exitCode}` : "failed"
      return { kind: "failed", state: name, reason: "exit_code", ...code, message: exitText }
    }
    case "OUT_OF_MEMORY":
      return {
        kind: "failed",
        state: name,
        reason: "oom",
        ...code,
        message: "ran out of memory (over its --mem)",
      }
    case "TIMEOUT":
      return { kind: "failed", state: name, reason: "timeout", ...code, message: "hit its time limit" }
    case "DEADLINE":
      return {
        kind: "failed",
        state: name,
        reason: "timeout",
        ...code,
        message: "could not finish before its deadline",
      }
    case "CANCELLED": {
      const by = /\bby (\S+)/.exec(state)?.[1]?.replace(/\+$/, "")
      return {
        kind: "killed",
        state: name,
        reason: "cancelled",
        message: by ? `cancelled by uid ${by}` : "cancelled",
      }
    }
    case "PREEMPTED":
      return {
        kind: "preempted",
        state: name,
        reason: "preempted",
        message: "preempted by a higher-priority job",
      }
    case "NODE_FAIL":
      return { kind: "worker_failed", state: name, reason: "node_fail", message: "a node it ran on failed" }
    case "BOOT_FAIL":
      return { kind: "worker_failed", state: name, reason: "boot_fail", message: "its node failed to boot" }
    case "REVOKED":
      return {
        kind: "worker_failed",
        state: name,
        reason: "revoked",
        message: "revoked: a federation sibling runs it",
      }
  }
}

/** The `Outcome` for an attempt; `undefined` while pending on the cluster and for an unknown state. */
export function toOutcome(slurm: SlurmOutcome, attemptUid: string): Outcome | undefined {
  switch (slurm.kind) {
    case "pending":
    case "unknown":
      return undefined
    case "running":
      return { kind: "running", attemptUid }
    case "succeeded":
      return { kind: "succeeded", attemptUid, exitCode: slurm.exitCode }
    case "failed":
      return {
        kind: "failed",
        attemptUid,
        exitCode: slurm.exitCode,
        reason: slurm.reason,
        message: slurm.message,
      }
    case "killed":
      return { kind: "killed", reason: slurm.reason, message: slurm.message }
    case "preempted":
      return { kind: "preempted", attemptUid, reason: slurm.reason, message: slurm.message }
    case "worker_failed":
      return { kind: "worker_failed", attemptUid, reason: slurm.reason, message: slurm.message }
  }
}
