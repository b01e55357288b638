/**
 * Cold start of the API Lambda against the floor of its stack. Builds `functions/api.ts` and the minimal
 * handler (`bench/cold-start/minimal.ts`: Hono, zod-openapi, zod, DynamoDB and SQS clients, one route)
 * with the deploy's esbuild settings (`infra/bundle.ts`, mapped to esbuild as SST does), then starts a
 * fresh `node` per run that imports the bundle and answers a Function URL `GET /health`, timed inside
 * the child: import ms, first-request ms, and their sum, the cold start. Runs alternate between the two
 * handlers so load on the machine falls on both alike. One more row has the API's first request under
 * `/v1` (`GET /v1/jobs` without a key: its route group loads, then authentication answers 401), what
 * a cold start that serves the API costs beyond `/health`. Also prints every Lambda's bundle size and
 * whether ssh2 and the SSM client load at import, are left behind a dynamic `import()`, or are absent.
 *
 * `npm run bench -- cold-start`; `COLD_START_RUNS` sets the runs per handler (default 7).
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { promisify } from "node:util"
import { build } from "esbuild"
import { bundleSettings } from "../infra/bundle"
import { allInputs, eagerInputs, eagerOutputs, entryOutput, fromPackage } from "./cold-start/metafile"
import { type NodeBundleSettings, sstEsbuildOptions } from "./cold-start/sst-esbuild"
import { median, record, table } from "./util"

const run = promisify(execFile)
const root = resolve(import.meta.dirname, "..")

/** The Lambda handlers infra/ deploys, by name. */
export const lambdaEntries: Record<string, string> = {
  api: join(root, "functions/api.ts"),
  reconcile: join(root, "functions/reconcile.ts"),
  schedule: join(root, "functions/schedule.ts"),
  autoscale: join(root, "functions/autoscale.ts"),
}
export const minimalEntry = join(root, "bench/cold-start/minimal.ts")

export interface Built {
  /** The entry file to import. */
  file: string
  /** Every output file (entry and chunks), bytes. */
  bytes: number
  /** The outputs loaded at import (entry and its static chunks), bytes. */
  eagerBytes: number
  /** Inputs loaded at import, and all inputs. */
  eager: string[]
  all: string[]
}

/** Build one handler into `outdir` with the deploy's settings. */
export async function buildHandler(
  entry: string,
  settings: NodeBundleSettings,
  outdir: string,
): Promise<Built> {
  const result = await build({ ...sstEsbuildOptions(settings, entry, outdir), absWorkingDir: root })
  const meta = result.metafile!
  const size = (path: string) => statSync(resolve(root, path)).size
  const outputs = Object.keys(meta.outputs).filter((p) => !p.endsWith(".map"))
  const entryOut = entryOutput(meta, relative(root, entry))
  return {
    file: resolve(root, entryOut),
    bytes: outputs.reduce((sum, p) => sum + size(p), 0),
    eagerBytes: eagerOutputs(meta, entryOut).reduce((sum, p) => sum + size(p), 0),
    eager: eagerInputs(meta, entryOut),
    all: allInputs(meta),
  }
}

/**
 * What infra/ deployed before infra/bundle.ts: SST's defaults, plus only what lets the bundle build at
 * all (ssh2's native add-ons external), for the row that shows what the settings buy.
 */
export const sstDefaults: NodeBundleSettings = { esbuild: { external: ["cpu-features", "*.node"] } }

/** What the API handler needs to start without AWS: SST's links as `SST_RESOURCE_*`, dummy credentials. */
export const handlerEnv: Record<string, string> = {
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "bench",
  AWS_SECRET_ACCESS_KEY: "bench",
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
  SWARMPLANE_LOG_LEVEL: "silent",
  SST_RESOURCE_State: JSON.stringify({ name: "bench", type: "sst.aws.Dynamo" }),
  SST_RESOURCE_ScheduleQueue: JSON.stringify({
    url: "https://sqs.us-east-1.amazonaws.com/000000000000/bench",
    type: "sst.aws.Queue",
  }),
  SST_RESOURCE_ApiPepper: JSON.stringify({ value: "bench-pepper", type: "sst.sst.Secret" }),
}

/** A Function URL (payload 2.0) event for `GET /health`. */
const healthEvent = {
  version: "2.0",
  routeKey: "$default",
  rawPath: "/health",
  rawQueryString: "",
  headers: { host: "abc123.lambda-url.us-east-1.on.aws", "x-forwarded-proto": "https" },
  requestContext: {
    accountId: "anonymous",
    apiId: "abc123",
    domainName: "abc123.lambda-url.us-east-1.on.aws",
    domainPrefix: "abc123",
    http: {
      method: "GET",
      path: "/health",
      protocol: "HTTP/1.1",
      sourceIp: "203.0.113.9",
      userAgent: "bench",
    },
    requestId: "00000000-0000-4000-8000-000000000001",
    routeKey: "$default",
    stage: "$default",
    time: "02/Dec/2026:00:00:00 +0000",
    timeEpoch: 1_796_169_600_000,
  },
  isBase64Encoded: false,
}

/** The child: import the bundle, answer one request, report both times (ms) on stdout. */
const childScript = `
const cpuMs = (u) => (u.user + u.system) / 1000
const started = performance.now()
const cpu0 = process.cpuUsage()
const mod = await import(process.argv[2])
const imported = performance.now()
const cpu1 = process.cpuUsage()
const res = await mod.handler(JSON.parse(process.argv[3]), { awsRequestId: "bench", getRemainingTimeInMillis: () => 30000 })
const answered = performance.now()
const cpu2 = process.cpuUsage()
const want = Number(process.argv[4] ?? 200)
if (res.statusCode !== want) { console.error("the request answered " + res.statusCode + ", not " + want + ": " + res.body); process.exit(1) }
process.stdout.write(JSON.stringify({
  importMs: imported - started,
  requestMs: answered - imported,
  cpuMs: cpuMs(cpu2) - cpuMs(cpu0),
}))
process.exit(0)
`

export interface Sample {
  importMs: number
  requestMs: number
  /** CPU time of import and first request together (user + system): steadier than wall time on a busy machine. */
  cpuMs: number
}

/** A first request other than `GET /health`: its path and the status it must get. */
export interface FirstRequest {
  path: string
  status: number
}

/** The Function URL event for `GET path`. */
function getEvent(path: string) {
  return {
    ...healthEvent,
    rawPath: path,
    requestContext: { ...healthEvent.requestContext, http: { ...healthEvent.requestContext.http, path } },
  }
}

/** One fresh process importing `file` and answering `GET /health` (or `request`). */
export async function coldStart(file: string, childFile: string, request?: FirstRequest): Promise<Sample> {
  const event = request ? getEvent(request.path) : healthEvent
  const args = [childFile, file, JSON.stringify(event), String(request?.status ?? 200)]
  const { stdout } = await run(process.execPath, args, {
    env: { PATH: process.env.PATH ?? "", ...handlerEnv },
    timeout: 60_000,
  })
  return JSON.parse(stdout) as Sample
}

export interface Figures {
  importMin: number
  importMedian: number
  requestMin: number
  requestMedian: number
  totalMin: number
  totalMedian: number
  cpuMin: number
  cpuMedian: number
}

export function figures(samples: readonly Sample[]): Figures {
  const imports = samples.map((s) => s.importMs)
  const requests = samples.map((s) => s.requestMs)
  const totals = samples.map((s) => s.importMs + s.requestMs)
  const cpus = samples.map((s) => s.cpuMs)
  return {
    importMin: Math.min(...imports),
    importMedian: median(imports),
    requestMin: Math.min(...requests),
    requestMedian: median(requests),
    totalMin: Math.min(...totals),
    totalMedian: median(totals),
    cpuMin: Math.min(...cpus),
    cpuMedian: median(cpus),
  }
}

/** A handler to measure: its entry file and the settings it is bundled with. */
export interface Candidate {
  entry: string
  settings: NodeBundleSettings
  request?: FirstRequest
}

/** Build the named handlers and time `runs` fresh processes of each, interleaved. */
export async function measure(
  candidates: Record<string, Candidate>,
  runs: number,
  /** Where to build; the default, a fresh temporary folder, has no node_modules above it, as in Lambda. */
  parent = tmpdir(),
): Promise<Record<string, { built: Built; figures: Figures }>> {
  const dir = mkdtempSync(join(parent, "swarmplane-cold-start-"))
  try {
    const childFile = join(dir, "child.mjs")
    writeFileSync(childFile, childScript)
    const built: Record<string, Built> = {}
    for (const [name, { entry, settings }] of Object.entries(candidates))
      built[name] = await buildHandler(entry, settings, join(dir, name.replace(/\W+/g, "-")))
    const samples: Record<string, Sample[]> = Object.fromEntries(Object.keys(candidates).map((n) => [n, []]))
    // One warm-up each (the disk cache), not counted.
    const requestOf = (name: string) => candidates[name]!.request
    for (const [name, b] of Object.entries(built)) await coldStart(b.file, childFile, requestOf(name))
    for (let i = 0; i < runs; i++)
      for (const [name, b] of Object.entries(built))
        samples[name]!.push(await coldStart(b.file, childFile, requestOf(name)))
    return Object.fromEntries(
      Object.entries(built).map(([name, b]) => [name, { built: b, figures: figures(samples[name]!) }]),
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const kb = (bytes: number) => (bytes / 1024).toFixed(0)
const ms = (x: number) => x.toFixed(0)

/** Where a package sits in a bundle: loaded at import, behind a dynamic import, or not in it. */
function placement(b: Built, pkg: string): string {
  if (fromPackage(b.eager, pkg)) return "at import"
  return fromPackage(b.all, pkg) ? "lazy chunk" : "absent"
}

export async function main(): Promise<void> {
  const runs = Number(process.env.COLD_START_RUNS ?? 7)
  const results = await measure(
    {
      api: { entry: lambdaEntries.api!, settings: bundleSettings },
      minimal: { entry: minimalEntry, settings: bundleSettings },
      "api, SST defaults": { entry: lambdaEntries.api!, settings: sstDefaults },
      // A first request under /v1: its route group (here the jobs routes and their schemas) loads
      // with it; no key, so it ends at authentication without a store call.
      "api, first GET /v1/jobs (401)": {
        entry: lambdaEntries.api!,
        settings: bundleSettings,
        request: { path: "/v1/jobs", status: 401 },
      },
    },
    runs,
  )
  const api = results.api!
  const minimal = results.minimal!
  const before = results["api, SST defaults"]!
  const ratio = api.figures.totalMedian / minimal.figures.totalMedian
  const cpuRatio = api.figures.cpuMedian / minimal.figures.cpuMedian
  console.log(
    `\n## Cold start: API Lambda vs the minimal stack handler (infra/bundle.ts settings; then the API with SST's defaults, and the API whose first request is under /v1), ${runs} fresh processes each, min / median ms\n`,
  )
  console.log(
    table(
      [
        "handler",
        "bundle KB",
        "loaded at import KB",
        "import ms",
        "first request ms",
        "cold start ms",
        "CPU ms",
      ],
      Object.entries(results).map(([name, r]) => [
        name,
        kb(r.built.bytes),
        kb(r.built.eagerBytes),
        `${ms(r.figures.importMin)} / ${ms(r.figures.importMedian)}`,
        `${ms(r.figures.requestMin)} / ${ms(r.figures.requestMedian)}`,
        `${ms(r.figures.totalMin)} / ${ms(r.figures.totalMedian)}`,
        `${ms(r.figures.cpuMin)} / ${ms(r.figures.cpuMedian)}`,
      ]),
    ),
  )
  console.log(
    `\nAPI / minimal, median cold start: ${ratio.toFixed(2)}× wall, ${cpuRatio.toFixed(2)}× CPU (target ≤ 1.3×)`,
  )
  record({
    apiBundleKb: Math.round(api.built.bytes / 1024),
    apiEagerKb: Math.round(api.built.eagerBytes / 1024),
    apiImportMsMin: api.figures.importMin,
    apiImportMsMedian: api.figures.importMedian,
    apiFirstRequestMsMin: api.figures.requestMin,
    apiFirstRequestMsMedian: api.figures.requestMedian,
    apiColdStartMsMedian: api.figures.totalMedian,
    minimalBundleKb: Math.round(minimal.built.bytes / 1024),
    minimalImportMsMin: minimal.figures.importMin,
    minimalImportMsMedian: minimal.figures.importMedian,
    minimalFirstRequestMsMin: minimal.figures.requestMin,
    minimalFirstRequestMsMedian: minimal.figures.requestMedian,
    minimalColdStartMsMedian: minimal.figures.totalMedian,
    apiCpuMsMedian: api.figures.cpuMedian,
    minimalCpuMsMedian: minimal.figures.cpuMedian,
    ratio,
    cpuRatio,
    sstDefaultsApiBundleKb: Math.round(before.built.bytes / 1024),
    sstDefaultsApiColdStartMsMedian: before.figures.totalMedian,
    sstDefaultsApiCpuMsMedian: before.figures.cpuMedian,
    v1FirstRequestColdStartMsMedian: results["api, first GET /v1/jobs (401)"]!.figures.totalMedian,
    v1FirstRequestCpuMsMedian: results["api, first GET /v1/jobs (401)"]!.figures.cpuMedian,
  })

  const dir = mkdtempSync(join(tmpdir(), "swarmplane-bundles-"))
  try {
    const bundles: [string, Built][] = []
    for (const [name, entry] of Object.entries(lambdaEntries))
      bundles.push([name, await buildHandler(entry, bundleSettings, join(dir, name))])
    console.log("\n## Lambda bundles (infra/bundle.ts settings)\n")
    console.log(
      table(
        ["function", "bundle KB", "loaded at import KB", "ssh2", "@aws-sdk/client-ssm"],
        bundles.map(([name, b]) => [
          name,
          kb(b.bytes),
          kb(b.eagerBytes),
          placement(b, "ssh2"),
          placement(b, "@aws-sdk/client-ssm"),
        ]),
      ),
    )
    record({ bundleKb: Object.fromEntries(bundles.map(([name, b]) => [name, Math.round(b.bytes / 1024)])) })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
