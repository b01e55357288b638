/**
 * Field decoders shared by the Slurm output parsers (parse.ts): durations, exit codes, memory sizes,
 * array task ranges, GRES strings, and the submission id in a job name. Pure. "No value" spellings
 * (`N/A`, `UNLIMITED`, `(null)`, ...) decode to `undefined`; anything else unreadable throws a
 * non-retryable `BackendError`, so a reconcile never acts on output it misread.
 */
import { BackendError } from "../../util/errors"

/** The error every Slurm parser throws for output it cannot read. */
export function parseError(what: string, text: string): BackendError {
  return new BackendError(`slurm: cannot parse ${what}: ${JSON.stringify(text.slice(0, 200))}`, false)
}

const NO_VALUE = new Set(["", "N/A", "NONE", "(NULL)", "UNLIMITED", "INFINITE", "NOT_SET", "UNKNOWN"])

/** True for Slurm's spellings of "no value": `N/A`, `(null)`, `UNLIMITED`, `infinite`, `NOT_SET`, ... */
export function isNoValue(text: string): boolean {
  return NO_VALUE.has(text.trim().toUpperCase())
}

/** Non-empty lines of a command's stdout (trailing whitespace dropped). */
export function lines(text: string): string[] {
  return text
    .split("\n")
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== "")
}

/**
 * Seconds from a Slurm duration (squeue `%M`/`%l`, scontrol `RunTime`/`TimeLimit`, sinfo `%l`): `M`
 * (a bare number is minutes, as in `--time=5`), `M:SS`, `H:MM:SS`, `D-H`, `D-H:MM`, `D-H:MM:SS`.
 * `undefined` for `UNLIMITED`, `infinite`, `N/A`, `NOT_SET`.
 */
export function parseSlurmDuration(text: string): number | undefined {
  const value = text.trim()
  if (isNoValue(value)) return undefined
  const match = /^(?:(\d+)-)?(\d+(?::\d+){0,2})$/.exec(value)
  if (!match) throw parseError("duration", value)
  const parts = match[2]!.split(":").map(Number)
  let [hours, minutes, seconds] = [0, 0, 0]
  if (match[1] !== undefined) [hours = 0, minutes = 0, seconds = 0] = parts
  else if (parts.length === 3) [hours = 0, minutes = 0, seconds = 0] = parts
  else [minutes = 0, seconds = 0] = parts
  return Number(match[1] ?? 0) * 86_400 + hours * 3600 + minutes * 60 + seconds
}

/** Slurm's `ExitCode=<code>:<signal>`: `3:0` is exit 3, `0:15` is killed by SIGTERM. */
export interface ExitStatus {
  exitCode: number
  signal: number
}

/** `3:0` → `{ exitCode: 3, signal: 0 }`; `undefined` for an empty or `N/A` field. */
export function parseExitCode(text: string): ExitStatus | undefined {
  const value = text.trim()
  if (isNoValue(value)) return undefined
  const match = /^(\d+):(\d+)$/.exec(value)
  if (!match) throw parseError("exit code", value)
  return { exitCode: Number(match[1]), signal: Number(match[2]) }
}

const MIB_PER_UNIT: Record<string, number> = { K: 1 / 1024, M: 1, G: 1024, T: 1024 ** 2, P: 1024 ** 3 }

/** MiB from a Slurm memory size (`1G`, `64M`, `500K`, `1000`; a bare number is MB). Rounded up. */
export function parseMemoryMiB(text: string): number | undefined {
  const value = text.trim()
  if (isNoValue(value) || value === "0") return undefined
  // Older releases append `n` (per node) or `c` (per CPU).
  const match = /^(\d+(?:\.\d+)?)([KMGTP]?)[nc]?$/i.exec(value)
  if (!match) throw parseError("memory size", value)
  return Math.ceil(Number(match[1]) * (MIB_PER_UNIT[(match[2] || "M").toUpperCase()] ?? 1))
}

/** The task indexes an array range stands for, and its `%N` limit of tasks running at once. */
export interface ArrayTasks {
  ids: number[]
  throttle?: number
}

/** Upper bound on expanded indexes (Slurm's MaxArraySize defaults to 1001). */
export const MAX_ARRAY_TASKS = 100_000

/** `4-5%2` → `{ ids: [4, 5], throttle: 2 }`; also `3`, `1,3,5-7`, `0-15:4` (a step), with or without `[ ]`. */
export function expandArrayTasks(text: string): ArrayTasks {
  const value = text.trim().replace(/^\[(.*)\]$/, "$1")
  const [list = "", throttle] = value.split("%")
  const ids: number[] = []
  for (const part of list.split(",")) {
    const match = /^(\d+)(?:-(\d+)(?::(\d+))?)?$/.exec(part)
    if (!match) throw parseError("array task range", text)
    const first = Number(match[1])
    const last = match[2] === undefined ? first : Number(match[2])
    const step = match[3] === undefined ? 1 : Number(match[3])
    if (last < first || step < 1 || ids.length + (last - first) / step >= MAX_ARRAY_TASKS)
      throw parseError("array task range", text)
    for (let id = first; id <= last; id += step) ids.push(id)
  }
  if (throttle !== undefined && !/^\d+$/.test(throttle)) throw parseError("array task range", text)
  return throttle === undefined ? { ids } : { ids, throttle: Number(throttle) }
}

/**
 * GPUs in a GRES or TRES string: `gres:gpu:2` (squeue `%b`), `gpu:fake:2` and `gpu:a100:4(S:0-1)` (sinfo
 * `%G`), `gres/gpu=1` (scontrol `TRES=`). Other GRES (`mps:100`) do not count.
 */
export function gpuCount(text: string): number {
  let total = 0
  for (const match of text.matchAll(/(?:^|,)(?:gres[:/])?gpu(?::[^:,=(]+)?[:=](\d+)/g))
    total += Number(match[1])
  return total
}

/** The job-name prefix of jobs swarmplane submits: `sp-<submission id>` (see script.ts). */
export const JOB_NAME_PREFIX = "sp-"

/** The submission id a job name carries (`sp-s-01kb...` → `s-01kb...`), or `undefined` for other jobs. */
export function submissionIdOf(name: string, prefix = JOB_NAME_PREFIX): string | undefined {
  return name.startsWith(prefix) && name.length > prefix.length ? name.slice(prefix.length) : undefined
}
