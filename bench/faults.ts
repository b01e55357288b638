/**
 * The long variant of the crash-anywhere test (test/faults.test.ts): many seeds of many jobs through
 * the control plane and the `workers` backend under injected store, queue and backend faults,
 * duplicate deliveries and overlapping passes, each checked against the invariants. Prints a table
 * (one row per seed: jobs, faults injected, simulated time, violations by invariant) and the faults
 * by kind over every run.
 *
 * `npm run soak` runs it first (bench/soak.ts); alone: `npx tsx bench/faults.ts --seeds 10
 * --jobs 500 [--first 1000] [--scale 2] [--profile full|before|none] [--preemption true]`.
 *
 * A run fails (`ok: false`) on any violation.
 */
import { fileURLToPath } from "node:url"
import { type Invariant, Invariants, type Violation } from "../test/support/fault-checks"
import { describeRun, type Profile, Profiles, runFaultRun } from "../test/support/fault-run"
import { table } from "./util"

export interface FaultSoakOptions {
  /** How many seeds (runs); default 8. */
  seeds?: number
  /** The first seed; the others follow it. Default 1. */
  first?: number
  /** Jobs per run; default 400. */
  jobs?: number
  /** Simulated workers per run; default 12. */
  workers?: number
  profile?: Profile
  /** Multiplies every fault rate; default 1. */
  scale?: number
  /** Some jobs are `interactive` and preempt `batch` ones (default false). */
  preemption?: boolean
  /** Where the table and each failing run's story go; default the console. */
  log?: (text: string) => void
}

export interface FaultSoakRun {
  seed: number
  jobs: number
  faults: number
  simulatedS: number
  wallMs: number
  violations: Record<Invariant, number>
  /** Every violation of the run. */
  unexpected: Violation[]
}

export interface FaultSoakResult {
  ok: boolean
  runs: FaultSoakRun[]
  /** Totals over every run. */
  jobs: number
  faults: number
  faultsByKind: Record<string, number>
  unexpected: number
  /** The printed table. */
  table: string
}

export async function runFaultSoak(options: FaultSoakOptions = {}): Promise<FaultSoakResult> {
  const log = options.log ?? ((text: string) => console.log(text))
  const profile = options.profile ?? "full"
  const runs: FaultSoakRun[] = []
  const faultsByKind: Record<string, number> = {}
  for (let i = 0; i < (options.seeds ?? 8); i++) {
    const seed = (options.first ?? 1) + i
    const r = await runFaultRun({
      seed,
      jobs: options.jobs ?? 400,
      workers: options.workers ?? 12,
      profile,
      ...(options.scale !== undefined ? { scale: options.scale } : {}),
      ...(options.preemption ? { preemption: true } : {}),
    })
    for (const [key, n] of r.faults.counts) {
      const kind = key.split(" ")[1]!
      faultsByKind[kind] = (faultsByKind[kind] ?? 0) + n
    }
    const violations = Object.fromEntries(Invariants.map((inv) => [inv, 0])) as Record<Invariant, number>
    for (const v of r.violations) violations[v.invariant]++
    const unexpected = r.violations
    // A line per run as it ends (a soak takes a while); the whole story of a run that broke something.
    log(unexpected.length ? describeRun(r) : describeRun(r).split("\n")[0]!)
    runs.push({
      seed,
      jobs: r.jobs,
      faults: r.faults.total(),
      simulatedS: r.simulatedS,
      wallMs: r.wallMs,
      violations,
      unexpected,
    })
  }
  const text = [
    table(
      ["seed", "jobs", "faults", "simulated s", "wall s", ...Invariants, "violations"],
      runs.map((r) => [
        String(r.seed),
        String(r.jobs),
        String(r.faults),
        String(r.simulatedS),
        (r.wallMs / 1000).toFixed(1),
        ...Invariants.map((inv) => String(r.violations[inv])),
        String(r.unexpected.length),
      ]),
    ),
    `faults by kind: ${Object.entries(faultsByKind)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(", ")}`,
  ].join("\n")
  log(text)
  const unexpected = runs.reduce((n, r) => n + r.unexpected.length, 0)
  return {
    ok: unexpected === 0,
    runs,
    jobs: runs.reduce((n, r) => n + r.jobs, 0),
    faults: runs.reduce((n, r) => n + r.faults, 0),
    faultsByKind,
    unexpected,
    table: text,
  }
}

/** `--name value` options; an unknown one is refused with the list of known ones. */
function parse(argv: string[]): FaultSoakOptions {
  const out: FaultSoakOptions = {}
  const numbers = ["seeds", "first", "jobs", "workers", "scale"] as const
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]!.replace(/^--/, "")
    const value = argv[i + 1] ?? ""
    if (name === "profile" && (Profiles as readonly string[]).includes(value)) out.profile = value as Profile
    else if (name === "preemption" && ["true", "false"].includes(value)) out.preemption = value === "true"
    else if ((numbers as readonly string[]).includes(name) && Number.isFinite(Number(value)))
      out[name as (typeof numbers)[number]] = Number(value)
    else
      throw new Error(
        `unknown or malformed option ${argv[i]} ${value}: use --seeds, --first, --jobs, --workers, --scale (numbers), --profile ${Profiles.join("|")} or --preemption true|false`,
      )
  }
  return out
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let options: FaultSoakOptions
  try {
    options = parse(process.argv.slice(2))
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error))
    process.exit(2)
  }
  const result = await runFaultSoak(options)
  console.log(
    `${result.jobs} jobs, ${result.faults} faults injected, ${result.unexpected} unexpected violations: ${result.ok ? "ok" : "FAILED"}`,
  )
  process.exit(result.ok ? 0 : 1)
}
