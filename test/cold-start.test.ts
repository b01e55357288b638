/**
 * What the cold-start work promises, pinned without timing anything: bundled with the deploy's settings
 * (infra/bundle.ts, mapped to esbuild as SST does), a Lambda loads at import neither ssh2 nor the SSM
 * client nor the dashboard's files nor the `/v1` route groups (they sit in chunks behind a dynamic
 * `import()`); the bundled API answers in a fresh process, its route groups and zod's OpenAPI extension
 * in place when a request needs them; ssh2 still runs from such a bundle without its native add-ons; and
 * the OpenAPI document is built on the first request for it, once, whole.
 */
import { execFile } from "node:child_process"
import { generateKeyPairSync } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { promisify } from "node:util"
import { build, type Metafile } from "esbuild"
import { afterAll, describe, expect, test, vi } from "vitest"
import { buildHandler, handlerEnv } from "../bench/cold-start"
import { allInputs, eagerInputs, entryOutput, fromPackage } from "../bench/cold-start/metafile"
import { sstEsbuildOptions } from "../bench/cold-start/sst-esbuild"
import { bundleSettings } from "../infra/bundle"
import { testApi } from "../packages/core/src/api/testing"

const root = resolve(import.meta.dirname, "..")
const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

async function bundle(entry: string): Promise<{ eager: string[]; all: string[] }> {
  const result = await build({
    ...sstEsbuildOptions(bundleSettings, join(root, entry), "/virtual"),
    absWorkingDir: root,
    write: false,
  })
  const meta: Metafile = result.metafile!
  return { eager: eagerInputs(meta, entryOutput(meta, entry)), all: allInputs(meta) }
}

const dashboardFiles = (inputs: string[]) =>
  inputs.filter((i) => i.includes("api/dashboard/bundle.generated"))

describe("Lambda bundles with the deploy's settings", () => {
  test("the API loads ssh2, the SSM client and the dashboard only on the paths that use them", {
    timeout: 60_000,
  }, async () => {
    const api = await bundle("functions/api.ts")
    for (const pkg of ["ssh2", "@aws-sdk/client-ssm"]) {
      expect(fromPackage(api.eager, pkg), `${pkg} at import`).toBe(false)
      expect(fromPackage(api.all, pkg), `${pkg} in a lazy chunk`).toBe(true)
    }
    expect(dashboardFiles(api.eager)).toEqual([])
    expect(dashboardFiles(api.all)).not.toEqual([])
    // Each backend's code is loaded with its first use, not at import.
    const backendFiles = (inputs: string[]) =>
      inputs.filter((i) => /backends\/(workers|slurm|lepton|eks)\/backend\.ts$/.test(i)).sort()
    expect(backendFiles(api.eager)).toEqual([])
    expect(backendFiles(api.all)).toHaveLength(4)
    // So is each /v1 route group, and the backend config schemas (model/backend.ts).
    const lazy = (inputs: string[]) =>
      inputs.filter((i) => /api\/routes\/[\w-]+\.ts$|model\/backend\.ts$/.test(i)).sort()
    expect(lazy(api.eager)).toEqual([])
    expect(lazy(api.all)).toHaveLength(7)
    // What a request needs is there at import.
    for (const pkg of ["@aws-sdk/client-dynamodb", "@aws-sdk/client-sqs", "hono"])
      expect(fromPackage(api.eager, pkg), pkg).toBe(true)
  })

  test("the bundled API answers /health, loads a route group on its first request, and serves the whole OpenAPI document", {
    timeout: 90_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-api-bundle-"))
    dirs.push(dir)
    const built = await buildHandler(join(root, "functions/api.ts"), bundleSettings, join(dir, "api"))
    // A fresh process, as Lambda starts one: each request as the Function URL sends it.
    const script = `
      const { handler } = await import(process.argv[1])
      const event = (path) => ({ version: "2.0", routeKey: "$default", rawPath: path, rawQueryString: "",
        headers: { host: "abc.lambda-url.us-east-1.on.aws" },
        requestContext: { accountId: "anonymous", apiId: "abc", domainName: "abc.lambda-url.us-east-1.on.aws",
          domainPrefix: "abc", http: { method: "GET", path, protocol: "HTTP/1.1", sourceIp: "203.0.113.9",
          userAgent: "test" }, requestId: "r", routeKey: "$default", stage: "$default", time: "x", timeEpoch: 1 },
        isBase64Encoded: false })
      const out = []
      for (const path of ["/health", "/v1/jobs", "/v1/swarms/x", "/openapi.json"]) {
        const res = await handler(event(path), { awsRequestId: "r", getRemainingTimeInMillis: () => 30000 })
        out.push({ path, status: res.statusCode, body: JSON.parse(res.body) })
      }
      process.stdout.write(JSON.stringify(out))
    `
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--input-type=module", "-e", script, built.file],
      {
        env: { PATH: process.env.PATH ?? "", ...handlerEnv },
      },
    )
    type Answer = { path: string; status: number; body: { paths?: Record<string, unknown> } }
    const [health, jobs, swarm, doc] = JSON.parse(stdout) as Answer[]
    expect(health).toMatchObject({ status: 200, body: { status: "ok" } })
    // Without a key: the group's routes are there, and authentication answers.
    expect(jobs).toMatchObject({ status: 401, body: { error: { code: "auth.unauthorized" } } })
    expect(swarm).toMatchObject({ status: 401 })
    expect(doc!.status).toBe(200)
    expect(Object.keys(doc!.body.paths ?? {})).toEqual(
      expect.arrayContaining([
        "/health",
        "/v1/jobs",
        "/v1/backends",
        "/v1/swarms/{name}",
        "/v1/workers/register",
        "/v1/me",
      ]),
    )
  })

  test("the reconcile tick loads neither ssh2 nor the SSM client at import", {
    timeout: 60_000,
  }, async () => {
    const reconcile = await bundle("functions/reconcile.ts")
    expect(fromPackage(reconcile.eager, "ssh2")).toBe(false)
    expect(fromPackage(reconcile.eager, "@aws-sdk/client-ssm")).toBe(false)
  })

  test("ssh2 bundled without its native add-ons still completes a handshake", {
    timeout: 60_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-ssh2-bundle-"))
    dirs.push(dir)
    const entry = join(dir, "entry.ts")
    const options = sstEsbuildOptions(bundleSettings, entry, dir)
    await build({
      ...options,
      entryPoints: undefined,
      stdin: {
        contents: `export const load = () => import("ssh2")`,
        resolveDir: root,
        loader: "ts",
        sourcefile: relative(root, entry),
      },
      outdir: dir,
      entryNames: "entry",
    })
    const { load } = (await import(pathToFileURL(join(dir, "entry.mjs")).href)) as {
      load: () => Promise<typeof import("ssh2") & { default?: typeof import("ssh2") }>
    }
    const loaded = await load()
    const ssh2 = loaded.default ?? loaded
    const hostKey = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    }).privateKey
    expect(ssh2.utils.parseKey(hostKey)).not.toBeInstanceOf(Error)
    const server = new ssh2.Server({ hostKeys: [hostKey] }, (client) => {
      client.on("authentication", (ctx) => ctx.accept())
      client.on("error", () => {})
    })
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
    const port = (server.address() as { port: number }).port
    try {
      const ready = await new Promise<boolean>((done, fail) => {
        const conn = new ssh2.Client()
        conn.on("ready", () => {
          conn.end()
          done(true)
        })
        conn.on("error", fail)
        conn.connect({ host: "127.0.0.1", port, username: "bench", password: "x", readyTimeout: 30_000 })
      })
      expect(ready).toBe(true)
    } finally {
      server.close()
    }
  })
})

describe("the OpenAPI document", () => {
  test("is built on the first request for it, once, and served whole to every later one", async () => {
    const api = await testApi()
    const generate = vi.spyOn(api.app, "getOpenAPI31Document")
    expect(generate).not.toHaveBeenCalled()
    const first = await api.call("GET", "/openapi.json", { key: null })
    const second = await api.call("GET", "/openapi.json", { key: null })
    const docs = await api.call("GET", "/docs", { key: null })
    expect(generate).toHaveBeenCalledTimes(1)
    expect(first.status).toBe(200)
    expect(second.text).toBe(first.text)
    expect(Object.keys(first.json.paths)).toEqual(
      expect.arrayContaining(["/health", "/v1/jobs", "/v1/backends"]),
    )
    expect(docs.status).toBe(200)
  })
})
