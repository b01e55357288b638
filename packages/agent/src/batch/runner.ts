/**
 * The batch runner of one shard: select its rows, skip those earlier attempts finished, send the rest
 * to the endpoint with at most `concurrency` requests in flight, write a part every `checkpointEvery`
 * finished rows, then merge every part into `shard-<ID>.jsonl` and write `done.json`, all in the
 * output store (a local folder or an S3 prefix, see output-store.ts).
 *
 * Steps: 1. read the parts to skip done rows (first, so an output that cannot be read fails before a
 * large input is read); 2. select the shard's rows; 3. resolve the model; 4. run the pool,
 * checkpointing; 5. merge, write done.json and the final progress.
 */

import { UsageError } from "../cli"
import { type Logger, silentLogger } from "../logger"
import {
  listParts,
  mergeParts,
  nextSeq,
  PartWriter,
  type ResultRow,
  readParts,
  runIdOf,
  shardDir,
} from "./checkpoint"
import { endpointClient, type RetryPolicy, StoppedError } from "./client"
import { differences, fingerprintOf, readFingerprint, writeFingerprint } from "./fingerprint"
import { type InputFormat, openSource } from "./input"
import type { OutputStore } from "./output-port"
import { openOutput } from "./output-store"
import {
  type BatchProgress,
  type ProgressState,
  progressPrinter,
  readProgress,
  writeProgress,
} from "./progress"
import { type Api, ApiPath, type BatchRow, MessagesColumn, requestBody } from "./rows"
import { selectShard } from "./select"
import type { ShardBy } from "./shard"

/** How often the progress document is written between checkpoints while rows are sent. */
export const ProgressEveryMs = 2_000

export interface BatchConfig {
  input: string
  format: InputFormat
  /** A local folder or `s3://bucket/prefix`. */
  output: string
  idColumn: string
  promptColumn: string
  shardBy: ShardBy
  shardId: number
  nshards: number
  endpoint: string
  token?: string
  api: Api
  /** Default: the first model of `GET /v1/models`. */
  model?: string
  maxTokens?: number
  concurrency: number
  requestTimeoutS: number
  retry: RetryPolicy
  checkpointEvery: number
  /** Names this run's parts; a random id when absent. */
  attemptUid?: string
  /** Also write the progress document here (`SWARMPLANE_PROGRESS_FILE`). */
  progressFile?: string
  /** Also print each changed progress document to stdout as a line (`SWARMPLANE_PROGRESS_STDOUT=1`). */
  progressStdout?: boolean
  /** Start the shard over when its output holds results of another input or request (see fingerprint.ts). */
  overwrite?: boolean
  /** Test hook: stop like a crash right after the checkpoint that reaches this many done rows. */
  failAfter?: number
}

export interface RunOptions {
  log?: Logger
  /** Abort to stop: rows in flight are dropped, finished ones written, nothing merged. */
  signal?: AbortSignal
  env?: NodeJS.ProcessEnv
  random?: () => number
  /** Where progress lines go when `progressStdout` is set; stdout by default. */
  print?: (line: string) => void
}

/**
 * How the run ended: `succeeded` (exit 0), `failed` (some rows failed for good; exit 1), `stopped`
 * by the signal, or `injected` (the `failAfter` hook fired; exit 3).
 */
export interface BatchResult {
  outcome: "succeeded" | "failed" | "stopped" | "injected"
  progress: BatchProgress
  /** Where the merged output is (a path or an `s3://` URL), when the run got that far. */
  merged?: string
}

export async function runBatch(config: BatchConfig, options: RunOptions = {}): Promise<BatchResult> {
  const store = await openOutput(config.output, options.env ?? process.env)
  try {
    return await runShard(config, store, options)
  } finally {
    store.close()
  }
}

async function runShard(config: BatchConfig, store: OutputStore, options: RunOptions): Promise<BatchResult> {
  const log = options.log ?? silentLogger
  const dir = shardDir(config.shardId)
  const runId = runIdOf(config.attemptUid)
  const label = `shard ${config.shardId}/${config.nshards}`

  // 1. What the output holds already: the question it answers (and, below, the parts that answer it).
  const found = await readFingerprint(store, dir)

  // 2. The shard's rows.
  const columns = { idColumn: config.idColumn, promptColumn: config.promptColumn }
  const source = await openSource(config.input, config.format, [...Object.values(columns), MessagesColumn], {
    env: options.env,
  })
  const { rows, inputRows } = await selectShard(
    source,
    config.shardBy,
    { shardId: config.shardId, nshards: config.nshards },
    columns,
  ).finally(() => source.close())
  // The same question resumes; another one refuses, unless told to start over (then the parts there
  // are set aside, and this run's retries resume from its own).
  const now = fingerprintOf(config, rows)
  let superseded = found?.superseded ?? []
  if (found && found.fingerprint !== now.fingerprint) {
    if (!config.overwrite)
      throw new UsageError(
        `the output holds results of another input or request for shard ${config.shardId}: pass --overwrite to start it over there, or choose another --output (${differences(found, now)}; in ${store.where(dir)})`,
      )
    superseded = [...new Set([...superseded, ...(await listParts(store, dir))])]
    log.warn(`${label}: --overwrite: ${superseded.length} parts of another input or request set aside`)
  }
  if (!found || found.fingerprint !== now.fingerprint)
    await writeFingerprint(store, dir, { ...now, superseded })
  const skip = new Set(superseded)
  // What earlier attempts finished (rows with an error are tried again).
  const earlier = await readParts(store, dir, { skip })
  const todo = rows.filter((r) => !earlier.winners.get(r.id)?.ok)
  // Rows an earlier attempt had sent but not checkpointed when it ended: this attempt sends them again.
  const before = await readProgress(store, dir)
  const skipped = rows.length - todo.length
  const resent =
    before && before.runId !== runId
      ? Math.max(0, Math.min(todo.length, (before.sent ?? before.done ?? 0) - skipped))
      : 0
  const progress: BatchProgress = {
    shardId: config.shardId,
    nshards: config.nshards,
    runId,
    state: "running",
    total: rows.length,
    done: rows.length - todo.length,
    failed: 0,
    retries: 0,
    skipped,
    sent: skipped,
    resent,
    updatedAt: new Date().toISOString(),
  }
  const print = config.progressStdout
    ? progressPrinter(options.print ?? ((line) => void process.stdout.write(line)))
    : undefined
  const report = async (state: ProgressState) => {
    progress.state = state
    progress.updatedAt = new Date().toISOString()
    await writeProgress(store, dir, progress, config.progressFile)
    print?.(progress)
  }
  log.info(
    `${label}: ${rows.length} of ${inputRows} rows (${config.shardBy}), ${progress.skipped} done by earlier attempts, ${todo.length} to do${resent ? ` (${resent} sent before but not checkpointed: sent again)` : ""}; run ${runId}`,
  )
  await report("running")

  // 3–4. The requests.
  const stop = new AbortController()
  const onAbort = () => stop.abort()
  options.signal?.addEventListener("abort", onAbort, { once: true })
  let injected = false
  let closeClient = () => {}
  let stopTicker = () => {}
  let ended = false
  try {
    if (todo.length > 0) {
      const client = endpointClient({
        endpoint: config.endpoint,
        token: config.token,
        timeoutMs: config.requestTimeoutS * 1000,
        policy: config.retry,
        signal: stop.signal,
        onRetry: () => progress.retries++,
        random: options.random,
      })
      closeClient = () => client.close()
      const model = config.model ?? (await client.models())[0]
      if (!model) throw new Error(`${config.endpoint} lists no model; pass --model`)
      log.info(`${label}: ${config.api} API of ${config.endpoint}, model ${model}`)
      const writer = new PartWriter(store, dir, runId, nextSeq(earlier.parts, runId))
      const send = async (row: BatchRow): Promise<ResultRow> => {
        const built = requestBody(row, { ...config, model })
        const finished = (r: Omit<ResultRow, "id" | "finishedAt">): ResultRow => ({
          id: row.id,
          ...r,
          finishedAt: new Date().toISOString(),
        })
        if ("error" in built)
          return finished({
            request: null,
            response: null,
            usage: null,
            error: { message: built.error, attempts: 0 },
          })
        const r = await client.post(ApiPath[config.api], built.body)
        return r.ok
          ? finished({ request: built.body, response: r.response, usage: usageOf(r.response), error: null })
          : finished({ request: built.body, response: null, usage: null, error: r.error })
      }
      const buffer: ResultRow[] = []
      let flushing = Promise.resolve()
      const flush = async () => {
        if (injected || buffer.length === 0) return
        const batch = buffer.splice(0)
        const name = await writer.write(batch)
        const before = progress.done
        for (const r of batch)
          if (r.error === null) progress.done++
          else progress.failed++
        await report("running")
        log.info(
          `${label}: ${name}: done ${progress.done}/${progress.total}, failed ${progress.failed}, retries ${progress.retries}`,
        )
        const n = config.failAfter
        if (n !== undefined && before < n && progress.done >= n) {
          log.warn(`${label}: SWARMPLANE_BATCH_FAIL_AFTER=${n} reached: stopping as if crashed`)
          injected = true
          stop.abort()
        }
      }
      const checkpoint = () => {
        flushing = flushing.then(flush)
        return flushing
      }
      let next = 0
      const worker = async () => {
        while (!stop.signal.aborted && next < todo.length) {
          const row = todo[next++] as BatchRow
          progress.sent++
          let result: ResultRow
          try {
            result = await send(row)
          } catch (error) {
            if (error instanceof StoppedError) return
            throw error
          }
          buffer.push(result)
          if (buffer.length >= config.checkpointEvery) await checkpoint()
        }
      }
      // Between checkpoints too, so what was sent is known within a couple of seconds after a crash.
      const ticker = setInterval(() => {
        flushing = flushing.then(() =>
          ended || injected || stop.signal.aborted ? undefined : report("running"),
        )
      }, ProgressEveryMs)
      ticker.unref()
      stopTicker = () => clearInterval(ticker)
      const workers = Array.from({ length: Math.min(config.concurrency, todo.length) }, () =>
        worker().catch((error: unknown) => {
          stop.abort()
          throw error
        }),
      )
      await Promise.all(workers)
      ended = true
      stopTicker()
      await checkpoint()
    }
  } catch (error) {
    // A stop while the model was being looked up; anything else is the run's failure.
    if (!(error instanceof StoppedError)) throw error
  } finally {
    stopTicker()
    options.signal?.removeEventListener("abort", onAbort)
    closeClient()
  }
  if (injected) return { outcome: "injected", progress }
  if (stop.signal.aborted) {
    await report("stopped")
    log.warn(`${label}: stopped; ${progress.done}/${progress.total} rows done, the next attempt resumes`)
    return { outcome: "stopped", progress }
  }

  // 5. Merge every part (this attempt's and earlier ones'), then record the end.
  const merged = await mergeParts(
    store,
    config.shardId,
    rows.map((r) => r.id),
    skip,
  )
  progress.done = merged.done
  progress.failed = merged.failed
  const outcome = merged.done === rows.length ? "succeeded" : "failed"
  const doneJson = {
    shardId: config.shardId,
    nshards: config.nshards,
    runId,
    state: outcome,
    total: rows.length,
    done: merged.done,
    failed: merged.failed,
    output: merged.name,
    finishedAt: new Date().toISOString(),
  }
  await store.write(`${dir}/done.json`, `${JSON.stringify(doneJson, null, 2)}\n`)
  await report(outcome)
  log.info(
    `${label}: merged ${merged.rows} rows into ${merged.where}: ${merged.done} done, ${merged.failed} failed`,
  )
  return { outcome, progress, merged: merged.where }
}

function usageOf(response: unknown): unknown {
  return typeof response === "object" && response !== null && "usage" in response ? response.usage : null
}
