/**
 * Parsers for what the Slurm CLI prints about jobs on a login node: `squeue`, `scontrol show job -o`
 * and `sacct -c`. Pure functions of stdout (stderr is the caller's), tested on output recorded from
 * Slurm 22.05 (fixtures/README.md says what each file shows). The format constants are the contract:
 * build commands from them, or the parsers misread. This module is the one to import: it re-exports
 * the cluster parsers (parse-cluster.ts: sinfo, queue depth, version), the field decoders
 * (parse-fields.ts) and the state mapping (parse-state.ts).
 */
import {
  expandArrayTasks,
  gpuCount,
  isNoValue,
  lines,
  parseError,
  parseExitCode,
  parseMemoryMiB,
  parseSlurmDuration,
  submissionIdOf,
} from "./parse-fields"

export * from "./parse-cluster"
export * from "./parse-fields"
export * from "./parse-state"

/**
 * `squeue -h -t all -o '<SQUEUE_FORMAT>'`: job id (`12`, `12_3`, `12_[4-7%2]`) | array master (`%F`) |
 * array task or pending range (`%K`) | name | state | reason | elapsed | time limit | partition | nodes |
 * node count | CPUs | memory | GRES asked (`%b`). squeue has no exit code: take it from
 * `scontrol show job` (`ExitCode=3:0`) or, after MinJobAge, from `sacct`.
 */
export const SQUEUE_FORMAT = "%i|%F|%K|%j|%T|%r|%M|%l|%P|%N|%D|%C|%m|%b"

/** One row of `squeue -o SQUEUE_FORMAT`. A pending array remainder is one row standing for many tasks. */
export interface SqueueRow {
  /** As printed: `87`, `82_1`, `82_[4-5%2]`. */
  jobId: string
  /** For array rows, the array's master id (what sbatch printed); `undefined` for a plain job. */
  arrayJobId?: string
  /** For one array task, its index. */
  arrayTaskId?: number
  /** For array rows, every task index the row stands for (`[1]` for one task, `[4, 5]` for `82_[4-5%2]`). */
  arrayTaskIds?: number[]
  /** The array's `%N` limit on tasks running at once, when it has one. */
  arrayThrottle?: number
  name: string
  /** The submission id when the name is `sp-<id>` (a swarmplane job), else `undefined`. */
  submissionId?: string
  /** Long state name as printed (`PENDING`, `RUNNING`, `OUT_OF_MEMORY`); see `mapSlurmState`. */
  state: string
  /** `None`, a reason code (`Resources`, `JobHeldUser`) or free text (`job requeued in held state`). */
  reason: string
  elapsedS: number
  /** `undefined` when UNLIMITED. */
  timeLimitS?: number
  partition: string
  /** Node list (`vm`, `gpu[01-04]`); `undefined` while pending. */
  nodes?: string
  nodeCount: number
  cpus: number
  /** Memory asked for, per node or per CPU as given (`--mem`, DefMemPerCPU). */
  memoryMiB?: number
  /** GRES asked for, without the `gres:` prefix (`gpu:1`); `undefined` for none. */
  gres?: string
  /** GPUs asked for per node. */
  gpus: number
}

export function parseSqueue(text: string, options: { namePrefix?: string } = {}): SqueueRow[] {
  return lines(text).map((line) => {
    const fields = line.split("|")
    if (fields.length < 14) throw parseError("squeue line", line)
    // A job name may itself hold "|": the first 3 and the last 10 fields are fixed.
    const [jobId = "", arrayJobId = "", task = ""] = fields
    const name = fields.slice(3, -10).join("|")
    const tail = fields.slice(-10)
    const [state = "", reason = "", elapsed = "", limit = "", partition = "", nodes = ""] = tail
    const [count = "", cpus = "", memory = "", gres = ""] = tail.slice(6)
    if (!/^\d+/.test(jobId) || !/^\d+$/.test(count) || !/^\d+$/.test(cpus))
      throw parseError("squeue line", line)
    const row: SqueueRow = {
      jobId,
      name,
      state,
      reason,
      elapsedS: parseSlurmDuration(elapsed) ?? 0,
      timeLimitS: parseSlurmDuration(limit),
      partition,
      nodes: nodes || undefined,
      nodeCount: Number(count),
      cpus: Number(cpus),
      memoryMiB: parseMemoryMiB(memory),
      gres: isNoValue(gres) ? undefined : gres.replace(/^gres:/, ""),
      gpus: gpuCount(gres),
      submissionId: submissionIdOf(name, options.namePrefix),
    }
    if (!isNoValue(task)) {
      const tasks = expandArrayTasks(task)
      Object.assign(row, { arrayJobId, arrayTaskIds: tasks.ids, arrayThrottle: tasks.throttle })
      if (/^\d+$/.test(task)) row.arrayTaskId = Number(task)
    }
    return row
  })
}

/** One job record of `scontrol show job -o` (one line per job). */
export interface ScontrolJob {
  /** The record's own id: an array task has its own (`JobId=86 ArrayJobId=82 ArrayTaskId=1`). */
  jobId: string
  name: string
  state: string
  /** As printed; scontrol writes spaces as `_` (`job_requeued_in_held_state`). */
  reason: string
  exitCode?: number
  signal?: number
  arrayJobId?: string
  arrayTaskId?: number
  /** For the pending remainder of an array (`JobId=82 ArrayTaskId=4-5%2`): its task indexes. */
  arrayTaskIds?: number[]
  partition?: string
  nodes?: string
  runTimeS?: number
  timeLimitS?: number
  /** How often Slurm requeued it (node failure, `scontrol requeue`). */
  restarts: number
  /** Output file, `%x`/`%j`/`%a` expanded. */
  stdOut?: string
  stdErr?: string
  /** Every `Key=Value` as printed. */
  fields: Record<string, string>
}

/** `Key=Value` pairs of one line; a value runs to the next ` Key=` (so `TRES=cpu=1,mem=1G` stays whole). */
function keyValues(line: string): Record<string, string> {
  const starts = [...line.matchAll(/(?:^|\s)([A-Za-z][\w/:.-]*)=/g)]
  const fields: Record<string, string> = {}
  starts.forEach((match, i) => {
    const valueStart = (match.index ?? 0) + match[0].length
    fields[match[1]!] = line.slice(valueStart, starts[i + 1]?.index ?? line.length).trim()
  })
  return fields
}

const value = (text: string | undefined) => (text === undefined || isNoValue(text) ? undefined : text)

/**
 * Jobs by their `JobId`. Give it `scontrol show job -o` (all jobs) or one `scontrol show job -o <id>`
 * per id: scontrol takes one id at a time (`12,13` is an "Invalid job id"); an array master id shows
 * every record of that array. Jobs past MinJobAge are gone (`slurm_load_jobs error: Invalid job id
 * specified`, exit 1).
 */
export function parseScontrolJobs(text: string): Map<string, ScontrolJob> {
  const jobs = new Map<string, ScontrolJob>()
  for (const line of lines(text)) {
    if (line.trim() === "No jobs in the system") continue
    const fields = keyValues(line)
    const jobId = fields.JobId
    if (!jobId || !/^\d+$/.test(jobId) || fields.JobState === undefined)
      throw parseError("scontrol line", line)
    const exit = parseExitCode(fields.ExitCode ?? "")
    const task = value(fields.ArrayTaskId)
    const job: ScontrolJob = {
      jobId,
      name: fields.JobName ?? "",
      state: fields.JobState,
      reason: fields.Reason ?? "None",
      exitCode: exit?.exitCode,
      signal: exit?.signal,
      partition: value(fields.Partition),
      nodes: value(fields.NodeList),
      runTimeS: parseSlurmDuration(fields.RunTime ?? ""),
      timeLimitS: parseSlurmDuration(fields.TimeLimit ?? ""),
      restarts: Number(fields.Restarts ?? 0),
      stdOut: value(fields.StdOut),
      stdErr: value(fields.StdErr),
      fields,
    }
    if (task !== undefined) {
      job.arrayJobId = fields.ArrayJobId
      if (/^\d+$/.test(task)) job.arrayTaskId = Number(task)
      else job.arrayTaskIds = expandArrayTasks(task).ids
    }
    jobs.set(jobId, job)
  }
  return jobs
}

/** `sacct -c --parsable2 -o <SACCT_COMPLETION_FIELDS>`: history without slurmdbd (jobcomp/filetxt). */
export const SACCT_COMPLETION_FIELDS = "jobid,jobname,state,exitcode,end"

/** One record of `sacct --parsable2`: `-c` writes one per run, so a requeued job has several. */
export interface SacctRecord {
  /** As printed: `80` (`sacct -c` prints an array task's own id), `82_1` (slurmdbd `sacct -X`). */
  jobId: string
  /** Only when the id says so (`82_1`); `sacct -c` cannot relate a task to its array. */
  arrayJobId?: string
  arrayTaskId?: number
  name: string
  /** First word, `+` dropped: `CANCELLED by 1001` → `CANCELLED`. */
  state: string
  /** The uid in `CANCELLED by <uid>` (slurmdbd sacct), when printed. */
  cancelledBy?: string
  exitCode?: number
  signal?: number
  /** End time as printed (local time, `2026-11-29T16:44:29`); `undefined` for `Unknown`. */
  end?: string
}

/**
 * Records in file order (completion order). Reads the header for the column order (or assumes
 * `SACCT_COMPLETION_FIELDS` with `-n`), skips `sacct: error: ...` noise if stderr was merged in, and
 * skips job steps (`82.batch`): use `-X` with slurmdbd.
 */
export function parseSacctCompletion(text: string): SacctRecord[] {
  let columns = SACCT_COMPLETION_FIELDS.split(",")
  const records: SacctRecord[] = []
  for (const line of lines(text)) {
    if (/^sacct: /.test(line)) continue
    const cells = line.split("|")
    if (/^jobid$/i.test(cells[0] ?? "")) {
      columns = cells.map((cell) => cell.toLowerCase())
      continue
    }
    const cell = (name: string) => cells[columns.indexOf(name)] ?? ""
    const id = cell("jobid")
    const match = /^(\d+)(?:_(\d+))?$/.exec(id)
    if (!match) {
      if (/^\d+(_\S+)?\.\S+$/.test(id) || /^\d+_\[/.test(id)) continue // a step, or a pending array range
      throw parseError("sacct line", line)
    }
    const [state = "", , by] = cell("state").split(" ")
    const exit = parseExitCode(cell("exitcode"))
    const end = cell("end")
    records.push({
      jobId: id,
      ...(match[2] === undefined ? {} : { arrayJobId: match[1], arrayTaskId: Number(match[2]) }),
      name: cell("jobname"),
      state: state.replace(/\+$/, ""),
      ...(by ? { cancelledBy: by.replace(/\+$/, "") } : {}),
      exitCode: exit?.exitCode,
      signal: exit?.signal,
      end: isNoValue(end) ? undefined : end,
    })
  }
  return records
}

/** The last record per job id: the current one for a job that was requeued and ran again. */
export function latestSacctRecords(records: SacctRecord[]): Map<string, SacctRecord> {
  return new Map(records.map((record) => [record.jobId, record]))
}
