/**
 * `swarmplane-agent run-batch`: flags and environment to a `BatchConfig`, with one-line errors that
 * name the flag or variable and the fix (a `UsageError`, exit code 2). Pure: reads only `env`.
 */
import { number, parse, required, str, UsageError } from "../cli"
import { ProgressVariable } from "../process-runner"
import type { RetryPolicy } from "./client"
import { formatOf, InputFormat } from "./input"
import { ProgressStdoutVariable } from "./progress"
import { Api } from "./rows"
import type { BatchConfig } from "./runner"
import { parseS3Prefix } from "./s3"
import { ShardBy } from "./shard"

/** The test hook's variable: exit 3 right after the checkpoint that reaches N done rows. */
export const FailAfterVariable = "SWARMPLANE_BATCH_FAIL_AFTER"

export const runBatchHelp = `swarmplane-agent run-batch: run one shard of a batch inference job against $SWARM_ENDPOINT

Options:
  --input PATH|s3://B/K     JSONL, CSV (header row) or Parquet; local or on S3 (required)
  --output DIR|s3://B/P     folder (created if missing) or S3 prefix for parts and results (required)
  --format F                jsonl | csv | parquet (default: from the extension)
  --id-column C             the id column (default id); ids must be unique
  --prompt-column C         the prompt column (default prompt); for chat, a "messages" array wins
  --shard-by S              hash (default: FNV-1a 32 of the id, mod NSHARDS) | range (by position)
  --api A                   chat (/v1/chat/completions, default) | completions (/v1/completions)
  --model M                 default: the first model of GET /v1/models
  --max-tokens N            max_tokens of each request
  --concurrency N           requests in flight (default 8)
  --request-timeout-s S     per request (default 600)
  --max-retries N           on 408, 429, 5xx, timeouts, connection errors (default 8)
  --backoff-initial-ms MS   first backoff, doubled per retry, with jitter (default 500)
  --backoff-max-ms MS       backoff cap (default 30000); Retry-After is honoured
  --checkpoint-every N      rows per checkpoint part (default 100)
  --overwrite               start the shard over when its output holds results of another input or
                            request (without it, that refuses; the same input and request resume)
  --endpoint URL            overrides $SWARM_ENDPOINT

Environment:
  SWARM_ENDPOINT, SWARM_API_TOKEN (sent as a Bearer token), SHARD_ID and NSHARDS (default 0 and 1),
  ATTEMPT_UID (names the parts), ${ProgressVariable} (a local copy of progress.json, also with
  an S3 output), ${ProgressStdoutVariable}=1 (also print progress to stdout as
  "@@swarmplane:progress@@ {...}" lines, for a backend that reads the log), AWS_REGION, AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (S3 input and output),
  ${FailAfterVariable} (tests)

Output (in DIR, or under the S3 prefix; a retried shard resumes from the parts there):
  shard-<ID>/part-<ATTEMPT_UID>-<seq>.jsonl   checkpoints: {id, request, response, usage, error, finishedAt}
  shard-<ID>/fingerprint.json                 the input and request its parts answer
  shard-<ID>/progress.json                    {total, done, failed, retries, skipped, sent, resent, ...}
  shard-<ID>/done.json                        written at the end
  shard-<ID>.jsonl                            every row of the shard, in input order

Exit: 0 every row has a response, 1 some rows failed for good (written with their error), 2 bad usage.

Example:
  SWARM_ENDPOINT=http://127.0.0.1:8000 SHARD_ID=0 NSHARDS=4 \\
    swarmplane-agent run-batch --input prompts.jsonl --output out --concurrency 32
`

export function parseRunBatch(args: string[], env: NodeJS.ProcessEnv): BatchConfig | "help" {
  const v = parse("run-batch", args, {
    input: { type: "string" },
    output: { type: "string" },
    format: { type: "string" },
    "id-column": { type: "string" },
    "prompt-column": { type: "string" },
    "shard-by": { type: "string" },
    api: { type: "string" },
    model: { type: "string" },
    "max-tokens": { type: "string" },
    concurrency: { type: "string" },
    "request-timeout-s": { type: "string" },
    "max-retries": { type: "string" },
    "backoff-initial-ms": { type: "string" },
    "backoff-max-ms": { type: "string" },
    "checkpoint-every": { type: "string" },
    overwrite: { type: "boolean" },
    endpoint: { type: "string" },
  })
  if (!v) return "help"
  const input = required(v.input, "--input", "a JSONL, CSV or Parquet file, or s3://bucket/key")
  const output = required(
    v.output,
    "--output",
    "a folder or s3://bucket/prefix for the results, e.g. --output out",
  )
  if (output.startsWith("s3://") && !parseS3Prefix(output))
    throw new UsageError(`--output: "${output}" is not an s3://bucket/prefix URL`)
  const format = oneOf(str(v.format) ?? formatOf(input), InputFormat, "--format")
  if (!format)
    throw new UsageError(
      `--format: cannot tell the format of "${input}" from its name; add --format jsonl|csv|parquet`,
    )
  const endpoint = str(v.endpoint) ?? str(env.SWARM_ENDPOINT)
  if (!endpoint)
    throw new UsageError("no endpoint: set SWARM_ENDPOINT (a job on a swarm gets it) or pass --endpoint URL")
  if (!URL.canParse(endpoint) || !/^https?:$/.test(new URL(endpoint).protocol))
    throw new UsageError(`endpoint "${endpoint}" is not an http(s) URL`)
  const nshards = number(str(env.NSHARDS), "NSHARDS", { min: 1 }) ?? 1
  const shardId = number(str(env.SHARD_ID), "SHARD_ID", { min: 0 }) ?? 0
  if (shardId >= nshards) throw new UsageError(`SHARD_ID ${shardId} must be less than NSHARDS ${nshards}`)
  const retry: RetryPolicy = {
    maxRetries: number(v["max-retries"], "--max-retries", { min: 0 }) ?? 8,
    initialMs: number(v["backoff-initial-ms"], "--backoff-initial-ms", { min: 0 }) ?? 500,
    maxMs: number(v["backoff-max-ms"], "--backoff-max-ms", { min: 0 }) ?? 30_000,
  }
  const failAfter = number(str(env[FailAfterVariable]), FailAfterVariable, { min: 1 })
  const config: BatchConfig = {
    input,
    format,
    output,
    idColumn: str(v["id-column"]) ?? "id",
    promptColumn: str(v["prompt-column"]) ?? "prompt",
    shardBy: oneOf(str(v["shard-by"]), ShardBy, "--shard-by") ?? "hash",
    shardId,
    nshards,
    endpoint,
    api: oneOf(str(v.api), Api, "--api") ?? "chat",
    concurrency: number(v.concurrency, "--concurrency", { min: 1 }) ?? 8,
    requestTimeoutS: positive(v["request-timeout-s"], "--request-timeout-s") ?? 600,
    retry,
    checkpointEvery: number(v["checkpoint-every"], "--checkpoint-every", { min: 1 }) ?? 100,
  }
  const optional = {
    token: str(env.SWARM_API_TOKEN),
    model: str(v.model),
    maxTokens: number(v["max-tokens"], "--max-tokens", { min: 1 }),
    attemptUid: str(env.ATTEMPT_UID),
    progressFile: str(env[ProgressVariable]),
    progressStdout: env[ProgressStdoutVariable] === "1" ? true : undefined,
    failAfter,
    overwrite: v.overwrite === true ? true : undefined,
  }
  for (const [key, value] of Object.entries(optional))
    if (value !== undefined) Object.assign(config, { [key]: value })
  return config
}

function oneOf<T extends string>(
  value: string | undefined,
  allowed: readonly T[],
  flag: string,
): T | undefined {
  if (value === undefined) return undefined
  if ((allowed as readonly string[]).includes(value)) return value as T
  throw new UsageError(`${flag}: "${value}" must be one of ${allowed.join(", ")}`)
}

function positive(value: unknown, name: string): number | undefined {
  const s = str(value)
  if (s === undefined) return undefined
  const n = Number(s)
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${name}: "${s}" must be a number above 0`)
  return n
}
