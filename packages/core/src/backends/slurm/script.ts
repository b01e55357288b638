/**
 * Batch scripts for `sbatch`, sent on stdin. A submission is always an array job: a new job's
 * pending tasks go out as one array (`--array=0-N`), a retry as an array of one. Each array index
 * maps to its task's shard and attempt id, which the script exports as SHARD_ID and ATTEMPT_UID; the
 * job name carries the submission id, so a retried submit finds the job (`squeue --name`) and adopts
 * it instead of submitting twice. Output goes to `<outputDir>/<name>_<index>.out` for `job logs`.
 */
import type { BackendConfigOf } from "../../model/backend"
import type { Resources } from "../../model/common"
import {
  oneLine,
  programText,
  ReservedSbatchOptions,
  SbatchOptionPattern,
  SlurmGrammarText,
  SlurmNamePattern,
  SlurmPartitionsPattern,
  SlurmPathPattern,
  SlurmTimePattern,
  sbatchOptionName,
} from "../../model/slurm-grammar"
import { BackendError } from "../../util/errors"

type SlurmConfig = BackendConfigOf<"slurm">

export interface ArrayEntry {
  index: number
  shard: number
  attemptUid: string
}

export interface Submission {
  /** `sp-<submission id>`: the Slurm job name. */
  name: string
  entries: ArrayEntry[]
  nshards: number
  resources: Resources
  /** Seconds; the backend's default time limit when absent. */
  timeLimitS?: number
  env: Record<string, string>
  command: string[]
  image?: string
  /** Extra `--constraint` features and a partition chosen by the job's constraints. */
  features: string[]
  partition?: string
}

/**
 * A value that would not be what it claims in a script (a partition with a newline, an env name with a
 * space): refused where the script is written, whatever its source, so nothing of it runs. Not
 * retryable: the same value is refused again.
 */
export class UnsafeValueError extends BackendError {
  constructor(
    readonly field: string,
    value: string,
    what: string,
  ) {
    super(
      `refused to submit to Slurm: ${field} ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value)} is not ${what}`,
      false,
    )
    this.name = "UnsafeValueError"
  }
}

/** `value` when it matches Slurm's grammar for `field`, else an `UnsafeValueError`. */
export function checked(field: string, value: string, pattern: RegExp, what: string): string {
  if (!pattern.test(value)) throw new UnsafeValueError(field, value, what)
  return value
}

const EnvName = /^[A-Za-z_][A-Za-z0-9_]*$/

/** `export NAME=value` lines: names checked (they are not quoted), values quoted. */
export function exportLines(env: Record<string, string>, field: string): string[] {
  return Object.entries(env).map(
    ([k, v]) =>
      `export ${checked(`${field} name`, k, EnvName, "an environment variable name (letters, digits, '_')")}=${sh(quotable(`${field}.${k}`, v))}`,
  )
}

/** Text that travels quoted: anything a program can receive as it is (not NUL, not a lone surrogate). */
export function quotable(field: string, value: string): string {
  if (!programText(value)) throw new UnsafeValueError(field, value, SlurmGrammarText.programText)
  return value
}

/** The names swarmplane gives its Slurm jobs (`sp-<id>`, `sp-srv-<project>.<swarm>...`): one word for any shell. */
export const JobNamePattern = /^sp-[A-Za-z0-9_.-]+$/

/** The `#SBATCH` lines every script of a backend shares, each value checked against Slurm's grammar. */
export function headerLines(
  config: SlurmConfig,
  o: { name: string; partition: string; timeLimit: string; partitionField: string; timeField: string },
): string[] {
  const dir = checked("outputDir", config.outputDir, SlurmPathPattern, SlurmGrammarText.path)
  return [
    "#!/bin/bash",
    `#SBATCH --job-name=${checked("job name", o.name, JobNamePattern, "a swarmplane job name")}`,
    `#SBATCH --partition=${checked(o.partitionField, o.partition, SlurmPartitionsPattern, SlurmGrammarText.partitions)}`,
    `#SBATCH --time=${checked(o.timeField, o.timeLimit, SlurmTimePattern, SlurmGrammarText.time)}`,
    `#SBATCH --output=${outputDirOf({ outputDir: dir })}/%x_%a.out`,
    // A run Slurm starts again (a requeue) appends to the log instead of overwriting the first run's.
    "#SBATCH --open-mode=append",
    ...(config.account
      ? [`#SBATCH --account=${checked("account", config.account, SlurmNamePattern, SlurmGrammarText.name)}`]
      : []),
    ...(config.qos
      ? [`#SBATCH --qos=${checked("qos", config.qos, SlurmNamePattern, SlurmGrammarText.name)}`]
      : []),
  ]
}

/** The backend's `extraSbatch` lines, each one sbatch option on one line and none swarmplane sets itself. */
export function extraLines(config: SlurmConfig): string[] {
  return config.extraSbatch.map((line, i) => {
    const field = `extraSbatch[${i}]`
    checked(field, line, SbatchOptionPattern, SlurmGrammarText.sbatchOption)
    if (ReservedSbatchOptions.includes(sbatchOptionName(line) ?? ""))
      throw new UnsafeValueError(field, line, "an option swarmplane leaves to the user")
    return line.startsWith("#SBATCH") ? line : `#SBATCH ${line}`
  })
}

/** The backend's `setup` lines: shell by design, but each exactly one line. */
export function setupLines(config: SlurmConfig): string[] {
  return config.setup.map((line, i) => {
    if (!oneLine(line, { tab: true }))
      throw new UnsafeValueError(`setup[${i}]`, line, SlurmGrammarText.shellLine)
    return line
  })
}

/** Quote one word for a POSIX shell. */
export function sh(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`
}

/** The output folder as sbatch sees it: `~/x` is relative to the home directory sbatch runs in. */
export function outputDirOf(config: Pick<SlurmConfig, "outputDir">): string {
  return config.outputDir.replace(/^~\/?/, "") || "."
}

export function outputPath(config: Pick<SlurmConfig, "outputDir">, name: string, index: number): string {
  return `${outputDirOf(config)}/${name}_${index}.out`
}

/**
 * Where an array task may keep its progress counters (`SWARMPLANE_PROGRESS_FILE`, which the batch
 * runner writes), next to its output; the reconcile command reads it. Relative to the login shell's
 * folder, as the output is.
 */
export function progressPath(config: Pick<SlurmConfig, "outputDir">, name: string, index: number): string {
  return `${outputDirOf(config)}/${name}_${index}.progress.json`
}

/** Slurm `--time` from seconds: whole minutes, at least one. */
export function slurmTime(seconds: number): string {
  return String(Math.max(1, Math.ceil(seconds / 60)))
}

function ranges(indexes: number[]): string {
  const sorted = [...indexes].sort((a, b) => a - b)
  const out: string[] = []
  for (let i = 0; i < sorted.length; ) {
    let j = i
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`)
    i = j + 1
  }
  return out.join(",")
}

/** A command with a leading `swarmplane-agent` replaced by how the cluster runs the agent. */
export function agentArgv(config: SlurmConfig, command: string[]): string[] {
  if (command[0] !== "swarmplane-agent") return command
  return [...config.agentCommand.map((w, i) => quotable(`agentCommand[${i}]`, w)), ...command.slice(1)]
}

function launcher(config: SlurmConfig, image: string | undefined, command: string[]): string[] {
  if (!image || config.container.launcher === "none") return command
  const extraArgs = config.container.extraArgs.map((w, i) => quotable(`container.extraArgs[${i}]`, w))
  if (config.container.launcher === "apptainer")
    return [
      "apptainer",
      "exec",
      ...extraArgs,
      image.includes("://") ? image : `docker://${image}`,
      ...command,
    ]
  return ["enroot", "start", ...extraArgs, image, ...command]
}

export function sbatchScript(config: SlurmConfig, sub: Submission): string {
  const r = sub.resources
  const partition =
    sub.partition ?? (r.gpu > 0 ? (config.gpuPartition ?? config.partition) : config.partition)
  const gpuType = r.gpuType
    ? `${checked("resources.gpuType", r.gpuType, SlurmNamePattern, SlurmGrammarText.name)}:`
    : ""
  const lines = [
    ...headerLines(config, {
      name: sub.name,
      partition,
      partitionField: sub.partition !== undefined ? "constraint partition" : "partition",
      timeLimit: sub.timeLimitS !== undefined ? slurmTime(sub.timeLimitS) : config.timeLimit,
      timeField: sub.timeLimitS !== undefined ? "timeLimitS" : "timeLimit",
    }),
    `#SBATCH --array=${ranges(sub.entries.map((e) => e.index))}`,
    `#SBATCH --cpus-per-task=${Math.max(1, Math.ceil(r.cpu))}`,
    `#SBATCH --mem=${Math.ceil(r.memoryMiB)}M`,
    // swarmplane retries a task as a new attempt (its own name and log): Slurm must not run it again.
    "#SBATCH --no-requeue",
    ...(r.gpu > 0
      ? [
          `#SBATCH --gres=${checked("gresGpuName", config.gresGpuName, SlurmNamePattern, SlurmGrammarText.name)}:${gpuType}${r.gpu}`,
        ]
      : []),
    ...(sub.features.length
      ? [
          `#SBATCH --constraint=${sub.features.map((f) => checked("constraint feature", f, SlurmNamePattern, SlurmGrammarText.name)).join("&")}`,
        ]
      : []),
    ...extraLines(config),
    "",
    'case "$SLURM_ARRAY_TASK_ID" in',
    ...sub.entries.map(
      (e) =>
        `  ${e.index}) export SHARD_ID=${e.shard} ATTEMPT_UID=${sh(quotable("attemptUid", e.attemptUid))} ;;`,
    ),
    '  *) echo "swarmplane: unknown array index $SLURM_ARRAY_TASK_ID" >&2; exit 64 ;;',
    "esac",
    `export NSHARDS=${sub.nshards}`,
    // Absolute, as the work may change folder: the output folder is relative to the submit folder.
    `export SWARMPLANE_PROGRESS_FILE=${progressVariable(config)}`,
    ...exportLines(sub.env, "env"),
    ...setupLines(config),
    // Not exec: the shell stays to write the exit code where the reconcile command finds it even
    // after Slurm has forgotten the job (MinJobAge) and without accounting. A run cut short by a
    // signal (cancel, time limit, node failure) writes nothing: Slurm's own record tells that story.
    launcher(
      config,
      sub.image === undefined ? undefined : quotable("image", sub.image),
      agentArgv(
        config,
        sub.command.map((w, i) => quotable(`command[${i}]`, w)),
      ),
    )
      .map(sh)
      .join(" "),
    "code=$?",
    `printf '%s\\n' "$code" > ${exitVariable(config)}.tmp && mv ${exitVariable(config)}.tmp ${exitVariable(config)}`,
    'exit "$code"',
    "",
  ]
  return lines.join("\n")
}

/** Where an array task writes its command's exit code: next to its output, absolute. */
function exitVariable(config: Pick<SlurmConfig, "outputDir">): string {
  const dir = outputDirOf(config)
  const file = `${dir}/\${SLURM_JOB_NAME}_\${SLURM_ARRAY_TASK_ID}.exit`
  return dir.startsWith("/") ? `"${file}"` : `"$SLURM_SUBMIT_DIR/${file}"`
}

function progressVariable(config: Pick<SlurmConfig, "outputDir">): string {
  const dir = outputDirOf(config)
  const file = `${dir}/\${SLURM_JOB_NAME}_\${SLURM_ARRAY_TASK_ID}.progress.json`
  return dir.startsWith("/") ? `"${file}"` : `"$SLURM_SUBMIT_DIR/${file}"`
}

/** The command that submits a script given on stdin, making the output folder first. */
export function submitCommand(config: Pick<SlurmConfig, "outputDir">): string {
  return `mkdir -p ${sh(outputDirOf(config))} && sbatch --parsable`
}
