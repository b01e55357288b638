/**
 * Batch scripts for `sbatch`, sent on stdin. A submission is always an array job: a new job's
 * pending tasks go out as one array (`--array=0-N`), a retry as an array of one. Each array index
 * maps to its task's shard and attempt id, which the script exports as SHARD_ID and ATTEMPT_UID; the
 * job name carries the submission id, so a retried submit finds the job (`squeue --name`) and adopts
 * it instead of submitting twice. Output goes to `<outputDir>/<name>_<index>.out` for `job logs`.
 */
import type { BackendConfigOf } from "../../model/backend"
import type { Resources } from "../../model/common"

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
  return command[0] === "swarmplane-agent" ? [...config.agentCommand, ...command.slice(1)] : command
}

function launcher(config: SlurmConfig, image: string | undefined, command: string[]): string[] {
  if (!image || config.container.launcher === "none") return command
  if (config.container.launcher === "apptainer")
    return [
      "apptainer",
      "exec",
      ...config.container.extraArgs,
      image.includes("://") ? image : `docker://${image}`,
      ...command,
    ]
  return ["enroot", "start", ...config.container.extraArgs, image, ...command]
}

export function sbatchScript(config: SlurmConfig, sub: Submission): string {
  const r = sub.resources
  const partition =
    sub.partition ?? (r.gpu > 0 ? (config.gpuPartition ?? config.partition) : config.partition)
  const lines = [
    "#!/bin/bash",
    `#SBATCH --job-name=${sub.name}`,
    `#SBATCH --partition=${partition}`,
    `#SBATCH --array=${ranges(sub.entries.map((e) => e.index))}`,
    `#SBATCH --cpus-per-task=${Math.max(1, Math.ceil(r.cpu))}`,
    `#SBATCH --mem=${r.memoryMiB}M`,
    ...(r.gpu > 0
      ? [`#SBATCH --gres=${config.gresGpuName}:${r.gpuType ? `${r.gpuType}:` : ""}${r.gpu}`]
      : []),
    `#SBATCH --time=${sub.timeLimitS !== undefined ? slurmTime(sub.timeLimitS) : config.timeLimit}`,
    `#SBATCH --output=${outputDirOf(config)}/%x_%a.out`,
    ...(config.account ? [`#SBATCH --account=${config.account}`] : []),
    ...(config.qos ? [`#SBATCH --qos=${config.qos}`] : []),
    ...(sub.features.length ? [`#SBATCH --constraint=${sub.features.join("&")}`] : []),
    ...config.extraSbatch.map((line) => (line.startsWith("#SBATCH") ? line : `#SBATCH ${line}`)),
    "",
    'case "$SLURM_ARRAY_TASK_ID" in',
    ...sub.entries.map((e) => `  ${e.index}) export SHARD_ID=${e.shard} ATTEMPT_UID=${sh(e.attemptUid)} ;;`),
    '  *) echo "swarmplane: unknown array index $SLURM_ARRAY_TASK_ID" >&2; exit 64 ;;',
    "esac",
    `export NSHARDS=${sub.nshards}`,
    // Absolute, as the work may change folder: the output folder is relative to the submit folder.
    `export SWARMPLANE_PROGRESS_FILE=${progressVariable(config)}`,
    ...Object.entries(sub.env).map(([k, v]) => `export ${k}=${sh(v)}`),
    ...config.setup,
    `exec ${launcher(config, sub.image, agentArgv(config, sub.command)).map(sh).join(" ")}`,
    "",
  ]
  return lines.join("\n")
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
