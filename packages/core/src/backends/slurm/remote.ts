/**
 * The remote shell commands the Slurm backend runs on the login node. Each is one SSH exec. The
 * reconcile command gets the state of every attempt in one round trip: one `squeue` for all of the
 * user's jobs, `scontrol show job` for swarmplane's arrays that have finished (squeue has no exit
 * codes), and `sacct -c` for submissions that have left the queue entirely.
 */
import { randomBytes } from "node:crypto"
import type { Attempt } from "../../model/job"
import { fileSafe, progressCounters } from "../../model/progress"
import { SACCT_COMPLETION_FIELDS, SINFO_FORMAT, SINFO_NODE_FORMAT, SQUEUE_FORMAT } from "./parse"
import { sh } from "./script"

export const Section = {
  scontrol: "@@swarmplane:scontrol@@",
  sacct: "@@swarmplane:sacct@@",
  exit: "@@swarmplane:exit@@",
  queue: "@@swarmplane:queue@@",
  progress: "@@swarmplane:progress@@",
  nodes: "@@swarmplane:nodes@@",
}

/**
 * The completion history of some job names, from slurmdbd (`sacct -X`) when the cluster keeps
 * accounting, else from the jobcomp log (`sacct -c`). A week back: sacct's default starts at midnight.
 * `names` is put inside double quotes: pass a shell variable (`"$names"`), never a value.
 */
export function historyCommand(names: string): string {
  const args = `--parsable2 -o ${SACCT_COMPLETION_FIELDS} -S now-7days --name="${names}"`
  // `sacct -c` ignores --name (it prints the whole log): keep the header and the names asked for.
  return `{ sacct -X ${args} 2>/dev/null || sacct -c ${args} 2>/dev/null; } | awk -F'|' -v names=",${names}," 'NR == 1 || index(names, "," $2 ",")'`
}

/** States in which a job still runs or waits: everything else is finished and has an exit code to fetch. */
const Unfinished =
  "PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|STOPPED|RESIZING|SIGNALING|STAGE_OUT|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|RESV_DEL_HOLD|SPECIAL_EXIT"

/**
 * One command for a whole reconcile pass. `names` are the job names of the live submissions: those
 * squeue no longer lists are looked up in the completion log. `arrayIds` are their Slurm array ids:
 * only those get an exit-code lookup.
 */
export function reconcileCommand(
  names: string[],
  arrayIds: string[] = [],
  progressFiles: { key: string; path: string }[] = [],
  extra: { outputDir?: string } = {},
): string {
  // Job names swarmplane made (`sp-...`): anything else is not ours to ask about.
  const wanted = names.filter((n) => /^[A-Za-z0-9_.-]+$/.test(n)).join(" ")
  const dir = sh(extra.outputDir ?? ".")
  const ours = arrayIds.filter((id) => /^\d+$/.test(id)).join(" ")
  return [
    `q=$(squeue -h -t all -u "$(id -un)" -o ${sh(SQUEUE_FORMAT)}) || exit $?`,
    `printf '%s\\n' "$q"`,
    `echo ${Section.scontrol}`,
    // squeue has no exit codes: the arrays of ours that finished are read with scontrol, one id each.
    // Only the arrays of the attempts asked about: other finished jobs of the user are not our concern.
    `for j in $(printf '%s\\n' "$q" | awk -F'|' -v ours=${sh(` ${ours} `)} 'index(ours, " " ($2 != "" ? $2 : $1) " ") && $5 !~ /^(${Unfinished})$/ {print ($2 != "" ? $2 : $1)}' | sort -u); do scontrol show job -o "$j" 2>/dev/null; done`,
    `echo ${Section.sacct}`,
    // The names squeue no longer lists, in one awk (a grep per name costs a fork each: 100 ms per 20).
    `gone=$(printf '%s\\n' "$q" | awk -F'|' -v want=${sh(wanted)} 'BEGIN { n = split(want, w, " ") } { seen[$4] = 1 } END { for (i = 1; i <= n; i++) if (!(w[i] in seen)) printf ",%s", w[i] }')`,
    `if [ -n "$gone" ]; then names="\${gone#,}"; ${historyCommand("$names")}; fi`,
    // What the tasks of submissions gone from the queue wrote when their command ended by itself.
    `echo ${Section.exit}`,
    `for n in $(printf '%s' "$gone" | tr ',' ' '); do for f in ${dir}/"$n"_*.exit; do [ -f "$f" ] && printf '%s|%s\\n' "$(basename "$f" .exit)" "$(head -c 16 "$f")"; done; done`,
    // Progress files of batch shards (after squeue, so a finished task's last counters are read too).
    ...(progressFiles.length ? [`echo ${Section.progress}`] : []),
    ...progressFiles.map(
      (f) =>
        `if [ -f ${sh(f.path)} ]; then printf '%s\\t' ${sh(f.key)}; head -c 4096 ${sh(f.path)} | tr -d '\\n'; echo; fi`,
    ),
    "true",
  ].join("\n")
}

/** The exit section: `<name>_<index>|<code>` lines → the exit code of each. */
export function parseExitSection(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split("\n")) {
    const m = /^(.+_\d+)\|(\d+)\s*$/.exec(line)
    if (m) out.set(m[1]!, Number(m[2]))
  }
  return out
}

/** Submit the script on stdin, unless a job of that name exists already (a retried submit adopts it). */
export function submitOrAdoptCommand(
  name: string,
  outputDir: string,
  options: { firstTry?: boolean } = {},
): string {
  // Nothing can have submitted an attempt placed this very pass: no lookup (the history one reads the
  // whole completion log where accounting is off, which grows with every job the cluster ran).
  if (options.firstTry) return `mkdir -p ${sh(outputDir)} && sbatch --parsable`
  return [
    // In a variable: the history command puts its names in double quotes, where only a variable stays data.
    `name=${sh(name)}`,
    `existing=$(squeue -h -t all -u "$(id -un)" --name="$name" -o %F | head -n 1)`,
    // Gone from the queue already (it ran to the end while nobody watched): its history knows the id.
    `[ -n "$existing" ] || existing=$(${historyCommand("$name")} | awk -F'|' 'NR > 1 && $1 ~ /^[0-9]/ {sub(/_.*/, "", $1); print $1}' | sort -n | head -n 1)`,
    `if [ -n "$existing" ]; then cat >/dev/null; echo "adopted $existing"; exit 0; fi`,
    `mkdir -p ${sh(outputDir)} && sbatch --parsable`,
  ].join("\n")
}

/** One submission of a batch: its job name, whether it was placed this pass, and its script. */
export interface BatchSubmission {
  name: string
  firstTry: boolean
  script: string
}

/** Marks between the submissions of a batch's output. */
const BatchMark = "@@swarmplane:submit"

/**
 * Several submit-or-adopts in one exec: each in a subshell (an adopt `exit`s), its script a quoted
 * here-document (nothing in it is expanded), its stdout, stderr and exit code printed between marks
 * (`parseSubmitBatch`). `delimiter` ends each here-document: a line no script contains (by default
 * a random one, drawn again while a script holds it).
 */
export function submitBatchCommand(
  submissions: BatchSubmission[],
  outputDir: string,
  delimiter = freshDelimiter(submissions.map((s) => s.script)),
): string {
  if (!/^[A-Za-z0-9_]+$/.test(delimiter)) throw new Error(`bad here-document delimiter ${delimiter}`)
  const lines = ["e=$(mktemp) || exit 1", `trap 'rm -f "$e"' EXIT`]
  for (const [i, s] of submissions.entries()) {
    if (s.script.split("\n").includes(delimiter))
      throw new Error(`the script of ${s.name} contains the here-document delimiter`)
    lines.push(
      `echo ${BatchMark}:begin:${i}`,
      `( ${submitOrAdoptCommand(s.name, outputDir, { firstTry: s.firstTry })}\n) 2>"$e" <<'${delimiter}'`,
      s.script.endsWith("\n") ? s.script.slice(0, -1) : s.script,
      delimiter,
      `c=$?`,
      `echo ${BatchMark}:stderr:${i}`,
      `head -c 4096 "$e"`,
      `echo`,
      `echo ${BatchMark}:exit:${i}:$c`,
    )
  }
  lines.push("true")
  return lines.join("\n")
}

function freshDelimiter(scripts: string[]): string {
  for (;;) {
    const delimiter = `SWARMPLANE_EOF_${randomBytes(8).toString("hex")}`
    if (!scripts.some((script) => script.split("\n").includes(delimiter))) return delimiter
  }
}

/** Each submission's stdout, stderr and exit code from a batch's output; one cut off is missing. */
export function parseSubmitBatch(
  stdout: string,
): Map<number, { code: number; stdout: string; stderr: string }> {
  const out = new Map<number, { code: number; stdout: string; stderr: string }>()
  let index: number | undefined
  let part: "stdout" | "stderr" = "stdout"
  let text = { stdout: [] as string[], stderr: [] as string[] }
  for (const line of stdout.split("\n")) {
    const mark = line.startsWith(BatchMark)
      ? /^@@swarmplane:submit:(begin|stderr|exit):(\d+)(?::(\d+))?$/.exec(line)
      : null
    if (!mark) {
      if (index !== undefined) text[part].push(line)
      continue
    }
    const i = Number(mark[2])
    if (mark[1] === "begin") {
      index = i
      part = "stdout"
      text = { stdout: [], stderr: [] }
    } else if (mark[1] === "stderr" && i === index) part = "stderr"
    else if (mark[1] === "exit" && i === index) {
      out.set(i, {
        code: Number(mark[3] ?? 1),
        stdout: text.stdout.join("\n"),
        stderr: text.stderr.join("\n").trim(),
      })
      index = undefined
    }
  }
  return out
}

/** Cancel, then make sure: scancel exits 0 for unknown ids, so what is still queued or running is listed. */
export function cancelCommand(ids: string[]): string {
  const list = ids.map(sh).join(" ")
  return [
    `scancel ${list} 2>/dev/null`,
    `for i in 1 2 3 4 5 6 7 8 9 10; do left=$(squeue -h -t PENDING,RUNNING,CONFIGURING,SUSPENDED -j ${ids.map(sh).join(",")} -o %i 2>/dev/null); [ -z "$left" ] && break; scancel ${list} 2>/dev/null; sleep 0.3; done`,
    `printf '%s\\n' "$left"`,
  ].join("\n")
}

/** Partitions, nodes (each once, for capacity) and queue depth for `status()`: one exec. */
export function statusCommand(): string {
  return [
    `sinfo -h -o ${sh(SINFO_FORMAT)}`,
    `echo ${Section.nodes}`,
    `sinfo -h -N -o ${sh(SINFO_NODE_FORMAT)} | sort -u`,
    `echo ${Section.queue}`,
    `squeue -h -o '%P|%T|%r' | sort | uniq -c`,
  ].join("\n")
}

/** Split a command's output at the section markers. */
export function sections(stdout: string): Record<"main" | keyof typeof Section, string> {
  const out = { main: "", scontrol: "", sacct: "", exit: "", queue: "", progress: "", nodes: "" }
  let current: keyof typeof out = "main"
  for (const line of stdout.split("\n")) {
    const marker = Object.entries(Section).find(([, m]) => line === m)
    if (marker) current = marker[0] as keyof typeof out
    else out[current] += `${line}\n`
  }
  return out
}

/**
 * The progress section: `key<TAB>document` lines → the document of each key (the last one wins). Lines
 * that do not parse as a JSON object are skipped: a file caught mid-write is read again next pass.
 */
export function parseProgressSection(text: string): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>()
  for (const line of text.split("\n")) {
    const tab = line.indexOf("\t")
    if (tab <= 0) continue
    try {
      const doc: unknown = JSON.parse(line.slice(tab + 1))
      if (typeof doc === "object" && doc !== null && !Array.isArray(doc))
        out.set(line.slice(0, tab), doc as Record<string, unknown>)
    } catch {}
  }
  return out
}

/**
 * The counters of a progress document, if it is this attempt's: the file is the shard's, shared by its
 * attempts, and a new attempt has not replaced its predecessor's until it writes its own (`runId` is
 * the attempt uid, as the runner makes it file-safe).
 */
export function progressOf(
  doc: Record<string, unknown> | undefined,
  attemptUid: string,
): NonNullable<Attempt["progress"]> | undefined {
  if (!doc || doc.runId !== fileSafe(attemptUid)) return undefined
  return progressCounters(doc)
}
