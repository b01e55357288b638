/**
 * Scheduler benchmark on the shared workload (`bench/scheduler-workload/`, 1,000 workers and 10,000
 * pending tasks, seed 42): a naive first-fit baseline and `place()` with Iris's per-pass caps on and
 * off, each the median of several passes (building `place()`'s indexes included, converting the
 * JSON to a snapshot not). Every mode's assignments are checked by the workload's own `validate.py`,
 * and the counts and times are set against Iris's published numbers on the same input. `place()` runs
 * on two conversions of the workload: `device_variant` as a binding `deviceVariant` (swarmplane's
 * rule), and not binding (Iris's rule, which its published numbers follow); see `load.ts`.
 *
 * `npx tsx bench/scheduler.ts`, or `main()` from `bench/run.ts`. Needs python3 on PATH.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { normalize } from "@swarmplane/core/scheduling/constraints"
import { place } from "@swarmplane/core/scheduling/place"
import type { Constraint, PlaceOptions, Snapshot } from "@swarmplane/core/scheduling/types"
import { toSnapshot, type Workload } from "./scheduler-workload/load"
import { median, table } from "./util"

const here = fileURLToPath(new URL(".", import.meta.url))
const workloadDir = join(here, "scheduler-workload")
const cacheDir = join(here, ".cache")

/** Iris's scheduler on the same workload (bench/scheduler-workload/README.md), and our targets. */
const Iris = {
  capsOn: { tasks: 3884, gangs: 80, seconds: 0.203, targetSeconds: 0.04 },
  capsOff: { tasks: 8671, gangs: 80, seconds: 0.876, targetSeconds: 0.175 },
}
const CapsOn: PlaceOptions = { maxAssignmentsPerWorker: 4, maxBuildingPerWorker: 8 }

interface Result {
  assignments: { taskId: string; workerId: string }[]
  gangsPlaced: number
}

/**
 * The baseline: tasks in the given order, each on the first worker (in list order) with room whose
 * attributes pass its constraints, evaluated as written; a gang, at its first task, takes the first
 * group to collect enough fitting workers, or is skipped. No indexes, no per-job memo, no caps.
 */
function naiveFirstFit(snap: Snapshot): Result {
  const { workers } = snap
  const free = workers.map((w) => {
    const f = { ...w.capacity }
    for (const t of w.running) {
      f.cpuMillis -= t.resources.cpuMillis
      f.memoryBytes -= t.resources.memoryBytes
      f.gpu -= t.resources.gpu
      f.tpu -= t.resources.tpu
    }
    return f
  })
  const assignments: Result["assignments"] = []
  const gangsTried = new Set<string>()
  let gangsPlaced = 0
  for (const task of snap.tasks) {
    const job = snap.jobs.get(task.jobId)
    if (!job || gangsTried.has(job.id)) continue
    const r = job.resources
    const fitsOn = (i: number) => {
      const f = free[i]!
      const w = workers[i]!
      if (f.cpuMillis < r.cpuMillis || f.memoryBytes < r.memoryBytes || f.gpu < r.gpu || f.tpu < r.tpu)
        return false
      if (job.deviceVariant !== undefined) {
        const v = job.deviceVariant.toLowerCase()
        if (naiveAttr(w.attributes, "accelerator") !== v && naiveAttr(w.attributes, "device-variant") !== v)
          return false
      }
      return job.constraints.every((c) => naiveHolds(w.attributes, c))
    }
    const takeOn = (i: number, taskId: string) => {
      const f = free[i]!
      f.cpuMillis -= r.cpuMillis
      f.memoryBytes -= r.memoryBytes
      f.gpu -= r.gpu
      f.tpu -= r.tpu
      assignments.push({ taskId, workerId: workers[i]!.id })
    }
    if (job.gang) {
      gangsTried.add(job.id)
      const members = snap.tasks.filter((t) => t.jobId === job.id)
      const groups = new Map<string, number[]>()
      for (let i = 0; i < workers.length; i++) {
        if (!fitsOn(i)) continue
        const key = job.gang.groupBy === undefined ? "" : naiveAttr(workers[i]!.attributes, job.gang.groupBy)
        if (key === undefined) continue
        const g = groups.get(String(key)) ?? []
        groups.set(String(key), g)
        g.push(i)
        if (g.length === members.length) {
          for (const [k, t] of members.entries()) takeOn(g[k]!, t.id)
          gangsPlaced++
          break
        }
      }
      continue
    }
    for (let i = 0; i < workers.length; i++)
      if (fitsOn(i)) {
        takeOn(i, task.id)
        break
      }
  }
  return { assignments, gangsPlaced }
}

function naiveAttr(attrs: Record<string, string | number>, key: string) {
  return Object.hasOwn(attrs, key) ? normalize(attrs[key]) : undefined
}

/** validate.py's `holds()`, interpreted on every call. */
function naiveHolds(attrs: Record<string, string | number>, c: Constraint): boolean {
  const a = naiveAttr(attrs, c.key)
  const vals = c.values.map(normalize)
  if (c.op === "exists") return a !== undefined
  if (c.op === "not_exists") return a === undefined
  if (a === undefined) return false
  const v = vals[0]
  if (c.op === "eq") return a === v
  if (c.op === "ne") return a !== v
  if (c.op === "in") return vals.includes(a)
  if (typeof a !== "number" || typeof v !== "number") return false
  return c.op === "gt" ? a > v : c.op === "ge" ? a >= v : c.op === "lt" ? a < v : a <= v
}

interface Mode {
  name: string
  label: string
  run: () => Result
  /** Untimed passes first (JIT warm-up), then timed ones. */
  warmups: number
  passes: number
}

/**
 * Medians per mode, with passes taken round-robin across modes so that a burst of load on a shared
 * machine lands on every mode alike rather than on whichever happened to be running.
 */
function timeAll(modes: Mode[]): { result: Result; ms: number }[] {
  const times: number[][] = modes.map(() => [])
  const results: Result[] = modes.map((m) => m.run())
  const rounds = Math.max(...modes.map((m) => m.warmups + m.passes))
  for (let r = 0; r < rounds; r++)
    modes.forEach((m, i) => {
      if (r >= m.warmups + m.passes) return
      const t0 = performance.now()
      results[i] = m.run()
      if (r >= m.warmups) times[i]!.push(performance.now() - t0)
    })
  return modes.map((_, i) => ({ result: results[i]!, ms: median(times[i]!) }))
}

/** Runs validate.py; returns its summary lines (it exits 1 on INVALID, which is still an answer). */
function validate(workloadFile: string, result: Result, name: string, extra: string[]): string {
  const file = join(cacheDir, `assignments-${name}.json`)
  writeFileSync(file, JSON.stringify({ assignments: result.assignments.map((a) => [a.taskId, a.workerId]) }))
  const args = [join(workloadDir, "validate.py"), workloadFile, file, ...extra]
  try {
    return execFileSync("python3", args, { encoding: "utf8" }).trim()
  } catch (err) {
    const out = (err as { stdout?: string }).stdout
    return out?.trim() || `validate.py failed: ${(err as Error).message}`
  }
}

export async function main(): Promise<void> {
  mkdirSync(cacheDir, { recursive: true })
  const workloadFile = join(cacheDir, "workload-seed42.json")
  if (!existsSync(workloadFile))
    execFileSync("python3", [join(workloadDir, "gen_workload.py"), "--seed", "42", "--out", workloadFile], {
      stdio: "inherit",
    })
  const doc = JSON.parse(readFileSync(workloadFile, "utf8")) as Workload
  const snap = toSnapshot(doc)
  // Iris's own rule: `device_variant` does not filter workers (see load.ts); same scheduler otherwise.
  const irisSnap = toSnapshot(doc, { bindDeviceVariant: false })

  // The very first call in this process: what a cold function instance pays, JIT warm-up included.
  const cold = performance.now()
  place(snap, {})
  const coldMs = performance.now() - cold

  const fromPlace = (s: Snapshot, options: PlaceOptions) => (): Result => {
    const p = place(s, options)
    return { assignments: p.assignments, gangsPlaced: p.stats.gangsPlaced }
  }
  const iv = "device_variant not binding"
  const modes: Mode[] = [
    {
      name: "baseline",
      label: "naive first-fit (baseline, no caps)",
      run: () => naiveFirstFit(snap),
      warmups: 1,
      passes: 7,
    },
    { name: "caps-off", label: "place(), caps off", run: fromPlace(snap, {}), warmups: 20, passes: 25 },
    {
      name: "caps-on",
      label: "place(), caps on (4 new, 8 building)",
      run: fromPlace(snap, CapsOn),
      warmups: 20,
      passes: 25,
    },
    {
      name: "caps-off-iris",
      label: `place(), caps off, ${iv}`,
      run: fromPlace(irisSnap, {}),
      warmups: 20,
      passes: 25,
    },
    {
      name: "caps-on-iris",
      label: `place(), caps on, ${iv}`,
      run: fromPlace(irisSnap, CapsOn),
      warmups: 20,
      passes: 25,
    },
  ]
  const timings = timeAll(modes)
  const results = modes.map((m, i) => ({ ...m, ...timings[i]! }))
  const base = results[0]!.ms

  console.log(
    `\nScheduling the shared workload (${snap.workers.length} workers, ${snap.tasks.length} pending tasks, ` +
      `${snap.jobs.size} jobs; median ms per pass after warm-up; ratio = baseline time / variant time)\n`,
  )
  console.log(
    table(
      ["variant", "tasks placed", "gangs placed", "median ms per pass", "× vs baseline"],
      results.map((r) => [
        r.label,
        String(r.result.assignments.length),
        String(r.result.gangsPlaced),
        r.ms.toFixed(2),
        (base / r.ms).toFixed(1),
      ]),
    ),
  )

  console.log(`\nFirst place() call in this process (cold JIT, caps off): ${coldMs.toFixed(1)} ms`)

  const vsIris = (name: string, ref: (typeof Iris)["capsOn"]) => {
    const r = results.find((x) => x.name === name)!
    const placed = r.result.assignments.length
    const ok = placed >= ref.tasks && r.result.gangsPlaced >= ref.gangs && r.ms / 1000 <= ref.targetSeconds
    return [
      name,
      `${ref.tasks} / ${ref.gangs} in ${ref.seconds} s`,
      `${placed} / ${r.result.gangsPlaced} in ${(r.ms / 1000).toFixed(4)} s`,
      (ref.seconds / (r.ms / 1000)).toFixed(1),
      name.endsWith("-iris")
        ? `${ok ? "met" : "MISSED"} (≥${ref.tasks} tasks, ≥${ref.gangs} gangs, ≤${ref.targetSeconds} s)`
        : `stricter rule than Iris's (${ok ? "meets" : "not comparable to"} its count)`,
    ]
  }
  console.log(
    "\nAgainst Iris's scheduler on the same workload (Python 3.11, 2 cores; README.md). Iris does not filter on" +
      "\ndevice_variant; with it binding, the h100-named GPU jobs that accept a100 lose the a100 workers.\n",
  )
  console.log(
    table(
      ["mode", "Iris tasks / gangs / time", "ours", "× faster than Iris", "target"],
      [
        vsIris("caps-on", Iris.capsOn),
        vsIris("caps-off", Iris.capsOff),
        vsIris("caps-on-iris", Iris.capsOn),
        vsIris("caps-off-iris", Iris.capsOff),
      ],
    ),
  )

  console.log("\nvalidate.py verdicts\n")
  for (const r of results) {
    const extra = r.name.startsWith("caps-on") ? ["--max-building", "8", "--max-assignments", "4"] : []
    const verdict = validate(workloadFile, r.result, r.name, extra)
    console.log(`${r.label} [${extra.join(" ") || "no caps"}]:\n  ${verdict.split("\n").join("\n  ")}`)
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
