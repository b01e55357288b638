/** The batch form of `job submit`: the request it sends, and the mistakes it stops before sending. */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { describe, expect, test } from "vitest"
import { jobOf, run } from "../testing"
import { location } from "./job-batch"

const accepted = { "POST /v1/jobs": () => ({ status: 202, body: jobOf({ id: "job-9" }) }) }
const submit = (...args: string[]) => run(["job", "submit", ...args], { routes: accepted })

describe("the request", () => {
  test("every batch flag lands in batch; --shards is the task count; task flags are kept", async () => {
    const res = await submit(
      ...["--swarm", "demo", "--input", "rows.jsonl", "--output-dir", "s3://bucket/out/", "--shards", "4"],
      ...["--input-format", "jsonl", "--id-column", "key", "--prompt-column", "text"],
      ...["--openai-api", "completions", "--model", "m1", "--max-tokens", "64", "--concurrency", "16"],
      ...["--checkpoint-every", "50", "--shard-by", "range", "--request-retries", "3", "--overwrite"],
      ...["--max-retries", "2", "--name", "nightly", "--cpus", "0.5", "--backend", "local"],
    )
    expect(res.code, res.stderr).toBe(0)
    expect(res.stdout).toBe("job-9\n")
    expect(res.requests[0]?.body).toEqual({
      swarm: "demo",
      tasks: 4,
      name: "nightly",
      backendId: "local",
      maxRetriesFailure: 2,
      resources: { cpu: 0.5 },
      batch: {
        input: resolve("rows.jsonl"),
        output: "s3://bucket/out/",
        format: "jsonl",
        idColumn: "key",
        promptColumn: "text",
        api: "completions",
        model: "m1",
        maxTokens: 64,
        concurrency: 16,
        checkpointEvery: 50,
        shardBy: "range",
        maxRetries: 3,
        overwrite: true,
      },
    })
  })

  test("--output DIR names the results folder of a batch job; --output json stays the format", async () => {
    const res = await submit("--swarm", "demo", "--input", "in.jsonl", "--output", "results", "--shards", "4")
    expect(res.code, res.stderr).toBe(0)
    expect(res.stdout).toBe("job-9\n")
    expect(res.requests[0]?.body).toMatchObject({
      tasks: 4,
      batch: { input: resolve("in.jsonl"), output: resolve("results") },
    })
    const json = await submit(
      "--swarm",
      "demo",
      "--input",
      "in.jsonl",
      "--output-dir",
      "r",
      "--output",
      "json",
    )
    expect(JSON.parse(json.stdout)).toMatchObject({ id: "job-9" })
  })

  test("the least: input, output and swarm; the API fills in the rest; -o json prints the job", async () => {
    const res = await submit(
      "--swarm",
      "demo",
      "--input",
      "/data/in.csv",
      "--output-dir",
      "out",
      "-o",
      "json",
    )
    expect(res.code, res.stderr).toBe(0)
    expect(JSON.parse(res.stdout)).toMatchObject({ id: "job-9" })
    expect(res.requests[0]?.body).toEqual({
      swarm: "demo",
      batch: { input: "/data/in.csv", output: resolve("out") },
    })
  })

  test("--shards alone, with a command, is --tasks", async () => {
    const res = await submit("--shards", "3", "--", "true")
    expect(res.requests[0]?.body).toEqual({ tasks: 3, command: ["true"] })
  })
})

describe("mistakes stop before anything is sent", () => {
  const cases: Record<string, { args: string[]; code: number; stderr: string }> = {
    "--input with a command": {
      args: ["--swarm", "demo", "--input", "in.jsonl", "--output-dir", "out", "--", "python", "infer.py"],
      code: 2,
      stderr:
        "swarmplane: a batch job (--input) takes no command: each task runs the batch runner; drop the command after -- (or command in the job file), or drop --input and the batch flags\n",
    },
    "--input without --output": {
      args: ["--swarm", "demo", "--input", "in.jsonl"],
      code: 2,
      stderr:
        "swarmplane: --input needs --output DIR; add --output DIR (or --output-dir DIR): the folder for the shard-<n>.jsonl results, where the tasks run\n",
    },
    "--input without --swarm": {
      args: ["--input", "in.jsonl", "--output-dir", "out"],
      code: 2,
      stderr:
        "swarmplane: --input needs --swarm NAME; add --swarm NAME: the swarm whose endpoint serves the rows (see swarmplane swarm list)\n",
    },
    "a batch flag without --input": {
      args: ["--swarm", "demo", "--concurrency", "4", "--", "python", "infer.py"],
      code: 2,
      stderr:
        "swarmplane: --concurrency is a batch flag and needs --input FILE; add --input FILE --output-dir DIR (the rows, and where the results go), or drop --concurrency\n",
    },
    "--shards and --tasks": {
      args: ["--shards", "4", "--tasks", "4", "--", "true"],
      code: 2,
      stderr: "swarmplane: --shards and --tasks are the same: give one; e.g. --shards 4\n",
    },
    "--output that is not a format, without --input": {
      args: ["--swarm", "demo", "--output", "results", "--", "python", "x.py"],
      code: 2,
      stderr:
        'swarmplane: -o/--output "results" is not one of table, json, yaml; choose an output format; a batch job\'s results folder goes with --input FILE --output DIR\n',
    },
    "--output and --output-dir both": {
      args: ["--swarm", "demo", "--input", "in.jsonl", "--output", "a", "--output-dir", "b"],
      code: 2,
      stderr:
        'swarmplane: --output "a" and --output-dir "b" both name the results folder; give one of them\n',
    },
    "a batch field out of bounds, named by its flag": {
      args: ["--swarm", "demo", "--input", "in.jsonl", "--output-dir", "out", "--concurrency", "5000"],
      code: 5,
      stderr:
        "swarmplane job submit: --concurrency: must be at most 1024\nswarmplane: the job is not valid: 1 error (above)\n",
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, async () => {
      const res = await submit(...tc.args)
      expect([res.code, res.stderr]).toEqual([tc.code, tc.stderr])
      expect(res.requests).toHaveLength(0)
    })
})

test("--input with a job file that has a command: the same one-line error", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "sp-batch-")), "job.yaml")
  writeFileSync(file, "swarm: demo\ntasks: 2\ncommand: [python, infer.py]\n")
  const res = await submit("-f", file, "--input", "in.jsonl", "--output-dir", "out")
  expect(res.code).toBe(2)
  expect(res.stderr).toMatch(/^swarmplane: a batch job \(--input\) takes no command: [^\n]*\n$/)
  expect(res.requests).toHaveLength(0)
})

test("a job file with a batch block and no command is a batch job; flags override its fields", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "sp-batch-")), "job.yaml")
  writeFileSync(file, "swarm: demo\ntasks: 4\nbatch:\n  input: s3://b/rows.jsonl\n  output: /shared/out\n")
  const res = await submit("-f", file, "--concurrency", "32")
  expect(res.code, res.stderr).toBe(0)
  expect(res.requests[0]?.body).toEqual({
    swarm: "demo",
    tasks: 4,
    batch: { input: "s3://b/rows.jsonl", output: "/shared/out", concurrency: 32 },
  })
})

test.each([
  ["a relative path", "data/in.jsonl", "/home/me/data/in.jsonl"],
  ["a parent folder", "../in.jsonl", "/home/in.jsonl"],
  ["an absolute path", "/srv/in.jsonl", "/srv/in.jsonl"],
  ["an s3 URL", "s3://bucket/key.parquet", "s3://bucket/key.parquet"],
])("location: %s", (_name, value, want) => {
  expect(location(value, "/home/me")).toBe(want)
})
