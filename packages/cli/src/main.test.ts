/** Commands in-process against a fake API: exit codes, one-line errors, requests, waiting, output, offline validation. */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, test } from "vitest"
import { createContext, type Io } from "./context"
import { buildProgram } from "./program"
import { apiError, type Captured, fakeFetch, jobOf, type Route, run, swarmOf } from "./testing"

describe("exit codes and one-line errors", () => {
  const cases: Record<string, { status: number; code: string; exit: number; hint?: RegExp }> = {
    "not found": {
      status: 404,
      code: "swarm.not_found",
      exit: 3,
      hint: /list swarms with: swarmplane swarm list$/,
    },
    "unknown key": { status: 401, code: "auth.unauthorized", exit: 4, hint: /check SWARMPLANE_KEY/ },
    "role too weak": { status: 403, code: "auth.forbidden", exit: 4, hint: /swarmplane key create --role/ },
    "bad request": { status: 400, code: "request.invalid", exit: 5 },
    "too large": { status: 413, code: "request.too_large", exit: 5 },
    "not JSON": { status: 415, code: "request.unsupported_media_type", exit: 5 },
    "key reused": { status: 422, code: "idempotency.key_reused", exit: 5 },
    conflict: { status: 409, code: "swarm.conflict", exit: 6 },
    "server error": { status: 500, code: "internal", exit: 1 },
    "not supported": { status: 501, code: "backend.not_supported", exit: 1 },
  }
  for (const [name, tc] of Object.entries(cases))
    test(`${name} (${tc.status}) exits ${tc.exit}`, async () => {
      const res = await run(["status", "x"], {
        routes: { "GET /v1/swarms/x": () => apiError(tc.status, tc.code, "what went wrong") },
      })
      expect(res.code).toBe(tc.exit)
      expect(res.stderr).toMatch(
        new RegExp(`^swarmplane: what went wrong \\(${tc.code.replace(".", "\\.")}\\)`),
      )
      expect(res.stderr.trimEnd().split("\n")).toHaveLength(1)
      if (tc.hint) expect(res.stderr.trimEnd()).toMatch(tc.hint)
    })

  test("the brief's example, word for word", async () => {
    const res = await run(["status", "x"], {
      routes: {
        "GET /v1/swarms/x": () => apiError(404, "swarm.not_found", 'swarm "x" not found in this project'),
      },
    })
    expect(res.stderr).toBe(
      'swarmplane: swarm "x" not found in this project (swarm.not_found); list swarms with: swarmplane swarm list\n',
    )
  })

  test("an unreachable control plane names the URL and the fix", async () => {
    const res = await run(["swarm", "list"], { routes: { "GET /v1/swarms": () => "network" } })
    expect(res.code).toBe(1)
    expect(res.stderr).toMatch(
      /^swarmplane: cannot reach the control plane at http:\/\/api\.test \(connect ECONNREFUSED/,
    )
    expect(res.stderr).toContain("start it with swarmplane dev")
    expect(res.requests).toHaveLength(1)
  })

  test.each([
    [["nope"], /^swarmplane: unknown command 'nope'; see 'swarmplane --help'\n$/],
    [
      ["job", "lst"],
      /^swarmplane: unknown command 'lst' \(Did you mean one of list, ls\?\); see 'swarmplane job --help'\n$/,
    ],
    [
      ["job", "list", "--bogus"],
      /^swarmplane: unknown option '--bogus'; see 'swarmplane job list --help'\n$/,
    ],
    [["status"], /^swarmplane: missing required argument 'name'; see 'swarmplane status --help'\n$/],
    [["job", "list", "-o", "xml"], /argument 'xml' is invalid. Allowed choices are table, json, yaml; see/],
    [
      ["job", "submit", "--tasks", "2", "sh", "-c", "x"],
      /unknown option '-c'; see 'swarmplane job submit --help'; the job's own command and its flags go after --/,
    ],
    [["job", "submit", "--tasks", "2"], /^swarmplane: no command to run; put it after --/],
  ])("usage error %j exits 2 on one line", async (argv, message) => {
    const res = await run(argv)
    expect(res.code).toBe(2)
    expect(res.stderr).toMatch(message)
  })

  test("a command group without its subcommand shows its help and exits 2", async () => {
    const res = await run(["job"])
    expect(res.code).toBe(2)
    expect(res.stderr).toContain("Usage: swarmplane job")
  })

  test("--help and --version exit 0", async () => {
    expect((await run(["--help"])).stdout).toContain("Exit codes:")
    expect((await run(["job", "submit", "--help"])).stdout).toContain("Examples:")
    expect((await run(["--version"])).code).toBe(0)
  })
})

describe("requests", () => {
  test("every POST carries an Idempotency-Key, and a transient failure is retried with the same one", async () => {
    const res = await run(["job", "submit", "--tasks", "2", "--", "true"], {
      routes: {
        "POST /v1/jobs": ({ n }) =>
          n === 1 ? apiError(503, "http.503", "unavailable") : { status: 202, body: jobOf() },
      },
    })
    expect(res.code).toBe(0)
    expect(res.stdout).toBe("job-1\n")
    const posts = res.requests.filter((r) => r.method === "POST")
    expect(posts).toHaveLength(2)
    const key = posts[0]?.headers.get("idempotency-key")
    expect(key).toMatch(/^[0-9a-f-]{36}$/)
    expect(posts[1]?.headers.get("idempotency-key")).toBe(key)
    expect(posts[0]?.headers.get("authorization")).toBe("Bearer sp_test-key")
    expect(posts[0]?.body).toEqual({ tasks: 2, command: ["true"] })
  })

  test("a 429 is retried no sooner than its Retry-After asks", async () => {
    // The command tree on a context whose HTTP waits are recorded, not slept (`main` takes no sleep).
    const requests: Captured["requests"] = []
    const slept: { ms: number; afterRequests: number }[] = []
    const stdout: string[] = []
    const io: Io = {
      stdout: { write: (t) => void stdout.push(t), isTTY: false, columns: 120 },
      stderr: { write: () => {}, isTTY: false, columns: 120 },
      stdinIsTTY: false,
      readStdin: async () => "",
      prompt: async () => "",
    }
    const env = {
      SWARMPLANE_CONFIG_DIR: mkdtempSync(join(tmpdir(), "sp-cli-")),
      SWARMPLANE_API: "http://api.test",
      SWARMPLANE_KEY: "sp_test-key",
      NO_COLOR: "1",
    }
    const routes: Record<string, Route> = {
      "POST /v1/jobs": ({ n }) =>
        n === 1
          ? { ...apiError(429, "rate_limited", "slow down"), headers: { "retry-after": "2" } }
          : { status: 202, body: jobOf() },
    }
    const ctx = createContext(io, env, fakeFetch(routes, requests), async (ms) => {
      slept.push({ ms, afterRequests: requests.length })
    })
    await buildProgram(ctx).parseAsync(["job", "submit", "--", "true"], { from: "user" })
    expect(ctx.exitCode).toBe(0)
    expect(stdout.join("")).toBe("job-1\n")
    expect(requests.map((r) => r.method)).toEqual(["POST", "POST"])
    // One wait, between the 429 and the retry: the CLI's own first pause is 500 ms; the server asked for 2 s.
    expect(slept).toHaveLength(1)
    expect(slept[0]?.afterRequests).toBe(1)
    expect(slept[0]?.ms).toBeGreaterThanOrEqual(2000)
  })

  test("job submit turns flags into a JobSpec and checks it before sending", async () => {
    const res = await run(
      [
        ...[
          "job",
          "submit",
          "--swarm",
          "demo",
          "--tasks",
          "3",
          "--gpus",
          "1",
          "--cpus",
          "0.5",
          "--memory-mib",
          "512",
        ],
        ...["-e", "A=1", "-e", "B=x=y", "--priority", "interactive", "--max-retries", "2", "--name", "n"],
        ...["--idempotency-key", "k-1", "--", "sh", "-c", "echo $SHARD_ID"],
      ],
      { routes: { "POST /v1/jobs": () => ({ status: 202, body: jobOf() }) } },
    )
    expect(res.code).toBe(0)
    const post = res.requests[0]
    expect(post?.headers.get("idempotency-key")).toBe("k-1")
    expect(post?.body).toEqual({
      swarm: "demo",
      tasks: 3,
      name: "n",
      priority: "interactive",
      maxRetriesFailure: 2,
      resources: { gpu: 1, cpu: 0.5, memoryMiB: 512 },
      env: { A: "1", B: "x=y" },
      command: ["sh", "-c", "echo $SHARD_ID"],
    })
    const bad = await run(["job", "submit", "--tasks", "20000", "--", "true"])
    expect(bad.code).toBe(5)
    expect(bad.stderr).toContain("tasks: must be at most 10000")
    expect(bad.requests).toHaveLength(0)
  })
})

describe("waiting", () => {
  test("job status --watch exits 0 when the job SUCCEEDED and 8 when it FAILED", async () => {
    const ok = await run(["job", "status", "job-1", "--watch"], {
      routes: { "GET /v1/jobs/job-1": () => ({ body: jobOf() }) },
    })
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain("SUCCEEDED")
    const failed = await run(["job", "status", "job-1", "--watch"], {
      routes: {
        "GET /v1/jobs/job-1": ({ n }) =>
          n === 1
            ? { body: jobOf({ status: "RUNNING" }, ["SUCCEEDED", "RUNNING"]) }
            : { body: jobOf({ status: "FAILED", message: "1 task failed" }, ["SUCCEEDED", "FAILED"]) },
      },
    })
    expect(failed.code).toBe(8)
    expect(failed.stderr).toMatch(/job job-1: RUNNING, 1\/2 done/)
    expect(failed.stderr).toMatch(
      /swarmplane: job job-1 ended FAILED: 1 task failed; see the output of task 1 with: swarmplane job logs job-1 --task 1\n$/,
    )
  })

  test("up --wait: RUNNING exits 0, FAILED exits 8, a timeout exits 7", async () => {
    const file = "name: demo\nmodel: echo\n"
    const post = { "POST /v1/swarms": () => ({ status: 202, body: swarmOf({ phase: "PENDING" }) }) }
    const reached = await run(["up", "-f", "-", "--wait"], {
      stdin: file,
      routes: {
        ...post,
        "GET /v1/swarms/demo": () => ({ body: swarmOf(), headers: { "swarmplane-wait": "reached" } }),
      },
    })
    expect([reached.code, reached.stdout]).toEqual([0, "demo\n"])
    expect(reached.requests[1]?.path).toBe("/v1/swarms/demo?wait=RUNNING&timeoutS=2")

    const failed = await run(["up", "-f", "-", "--wait"], {
      stdin: file,
      routes: {
        ...post,
        "GET /v1/swarms/demo": () => ({
          body: swarmOf({ phase: "FAILED", message: "image not found" }),
          headers: { "swarmplane-wait": "settled" },
        }),
      },
    })
    expect(failed.code).toBe(8)
    expect(failed.stderr).toContain(
      'swarmplane: swarm "demo" ended FAILED while waiting for RUNNING: image not found',
    )

    const slow = await run(["up", "-f", "-", "--wait", "--timeout", "1"], {
      stdin: file,
      routes: {
        ...post,
        "GET /v1/swarms/demo": () => ({
          body: swarmOf({ phase: "INITIALIZING" }),
          headers: { "swarmplane-wait": "timeout" },
        }),
      },
    })
    expect(slow.code).toBe(7)
    expect(slow.stderr).toMatch(
      /timed out after 1 s waiting for swarm "demo" to be RUNNING \(it is INITIALIZING/,
    )
  })

  test("down asks on a terminal, refuses without --yes elsewhere", async () => {
    const routes = {
      "DELETE /v1/swarms/demo": () => ({ status: 202, body: swarmOf({ desired: "deleted" }) }),
    }
    const piped = await run(["down", "demo"], { routes })
    expect(piped.code).toBe(2)
    expect(piped.stderr).toBe(
      'swarmplane: refusing to delete swarm "demo" without confirmation; pass --yes to delete it\n',
    )
    expect(piped.requests).toHaveLength(0)
    const declined = await run(["down", "demo"], { routes, tty: true, answer: "n" })
    expect([declined.code, declined.requests.length]).toEqual([1, 0])
    const confirmed = await run(["down", "demo"], { routes, tty: true, answer: "y" })
    expect([confirmed.code, confirmed.requests.length]).toEqual([0, 1])
  })
})

describe("output", () => {
  test("-o json (or --json) and -o yaml print the API object; a pipe gets only the name", async () => {
    const routes = { "GET /v1/swarms/demo": () => ({ body: swarmOf() }) }
    expect(JSON.parse((await run(["status", "demo", "-o", "json"], { routes })).stdout)).toEqual(swarmOf())
    // --json is the same, and wins over -o.
    expect(JSON.parse((await run(["status", "demo", "--json"], { routes })).stdout)).toEqual(swarmOf())
    expect(JSON.parse((await run(["status", "demo", "-o", "yaml", "--json"], { routes })).stdout)).toEqual(
      swarmOf(),
    )
    expect((await run(["status", "demo", "-o", "yaml"], { routes })).stdout).toMatch(
      /^name: demo\nmodel: echo\n/,
    )
    const applied = await run(["up", "-f", "-"], {
      stdin: "name: demo\nmodel: echo\n",
      routes: {
        "POST /v1/swarms": () => ({
          status: 202,
          body: swarmOf(),
          headers: { "swarmplane-created": "true" },
        }),
      },
    })
    expect(applied.stdout).toBe("demo\n")
  })

  test("lists are arrays in JSON, with every page", async () => {
    const res = await run(["job", "list", "--all", "-o", "json"], {
      routes: {
        "GET /v1/jobs": ({ url }) =>
          url.searchParams.get("cursor")
            ? { body: { items: [jobOf({ id: "job-2" })] } }
            : { body: { items: [jobOf({ id: "job-1" })], nextCursor: "c1" } },
      },
    })
    expect(JSON.parse(res.stdout).map((j: { id: string }) => j.id)).toEqual(["job-1", "job-2"])
  })

  test("a new key prints alone when piped, with a warning on stderr", async () => {
    const res = await run(["key", "create", "--role", "read"], {
      routes: {
        "GET /v1/me": () => ({ body: { project: "default", role: "admin", keyId: "k", operator: true } }),
        "POST /v1/projects/default/keys": () => ({
          status: 201,
          body: {
            id: "key-2",
            project: "default",
            role: "read",
            prefix: "sp_abc",
            createdAt: "x",
            key: "sp_secret",
          },
        }),
      },
    })
    expect(res.stdout).toBe("sp_secret\n")
    expect(res.stderr).toMatch(/warning: .*shown only now: store it/)
  })
})

describe("config validate (offline)", () => {
  test("a broken file: every error with its path, exit 5; no API call", async () => {
    const res = await run(["config", "validate", "-f", "-"], {
      stdin: "name: demo\nmodel: echo\nreplicas: 2000\nport: 0\n",
      env: { SWARMPLANE_API: "http://127.0.0.1:1" },
    })
    expect(res.code).toBe(5)
    expect(res.stderr).toBe(
      [
        "<stdin>:3:11: replicas: must be at most 1024",
        "<stdin>:4:7: port: must be at least 1",
        "swarmplane: <stdin> is not a valid swarm file: 2 errors (above)",
        "",
      ].join("\n"),
    )
    expect(res.requests).toHaveLength(0)
  })

  test("a good file: ok, exit 0; -o json gives the normalised body", async () => {
    const good = await run(["config", "validate", "-f", "-"], { stdin: "name: demo\nmodel: echo\n" })
    expect([good.code, good.stdout]).toEqual([0, 'ok: swarm "demo"\n'])
    const json = await run(["config", "validate", "-f", "-", "-o", "json"], { stdin: "command: [x]\n" })
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, kind: "job", body: { command: ["x"] } })
  })

  test("a missing file is a usage error", async () => {
    const res = await run(["config", "validate", "-f", "/nonexistent.yaml"])
    expect(res.code).toBe(2)
    expect(res.stderr).toContain("file /nonexistent.yaml does not exist")
  })

  test("up refuses a job file, saying which command takes it", async () => {
    const res = await run(["up", "-f", "-"], { stdin: "command: [x]\n" })
    expect(res.code).toBe(5)
    expect(res.stderr).toContain("looks like a job file, not a swarm file; swarmplane up takes a swarm file")
  })
})
