/**
 * Hostile input, generated: every route of the OpenAPI document that takes a body, a query or a path
 * parameter gets arbitrary JSON (hostile keys, NUL, lone surrogates, huge strings, deep nesting, numbers
 * past what a double holds) and valid bodies broken one field at a time. Whatever comes in: never a 5xx;
 * a 4xx has the error shape, names the field it refuses and writes nothing; a 2xx made exactly what it
 * answered, readable back. fast-check prints the seed and the shrunk case of a failure.
 */
import fc from "fast-check"
import { describe, expect, test } from "vitest"
import { sbatchScript } from "../backends/slurm/script"
import { replicaScript, routerScript, servingFiles } from "../backends/slurm/serving"
import { placement } from "../backends/slurm/submission"
import { BackendConfig, type BackendConfigOf } from "../model/backend"
import type { JobSpec } from "../model/job"
import type { Swarm } from "../model/swarm"
import {
  anyBody,
  hostileString,
  mutate,
  mutation,
  nearMiss,
  paths,
  render,
  valueAt,
} from "./testing/hostile-json"
import {
  expectSafe,
  get,
  operations,
  reuse,
  runs,
  slurmBackendConfig,
  type World,
  type Worlds,
  world,
} from "./testing/hostile-world"

/** Each property makes a few hundred requests: room for a busy machine. */
const propertyTimeout = 120_000

/** What the API answered: its JSON is whatever the route returns. */
type Answer = Awaited<ReturnType<World["call"]>>

/** A valid body of each route that takes one, and where its 2xx can be read back. */
interface BodyRoute {
  path: (w: World) => string
  examples: Record<string, unknown>[]
  headers?: (w: World) => Record<string, string>
  /** What the route made, read back with GET, to compare with what was sent; undefined when nothing is. */
  readBack?: (
    w: World,
    res: Answer,
    sent: Answer["json"],
  ) => Promise<{ got: unknown; want: unknown } | undefined>
}

const bodyRoutes: Record<string, BodyRoute> = {
  "POST /v1/jobs": {
    path: () => "/v1/jobs",
    examples: [
      {
        name: "infer",
        command: ["python", "-c", "print(1)"],
        backendId: "local",
        tasks: 3,
        env: { MODEL: "m", QUOTE: "it's" },
        resources: { cpu: 1, memoryMiB: 256 },
        constraints: [{ key: "zone", op: "eq", value: "a" }],
        labels: { team: "ml" },
        maxRetriesFailure: 1,
        timeLimitS: 600,
      },
      {
        command: ["srun", "hostname"],
        backendId: "hpc",
        tasks: 2,
        image: "nvcr.io/nvidia/pytorch:24.01",
        env: { A_B: "x y" },
        constraints: [
          { key: "partition", op: "eq", value: "debug" },
          { key: "feature", op: "eq", value: "ib" },
        ],
        resources: { cpu: 2, memoryMiB: 1024, gpu: 1, gpuType: "h100" },
      },
      { swarm: "s", batch: { input: "/data/in.jsonl", output: "/data/out" }, tasks: 2 },
      {
        swarm: "t",
        batch: {
          input: "s3://b/in.parquet",
          output: "/scratch/out",
          idColumn: "id",
          model: "m",
          maxTokens: 64,
        },
        tasks: 2,
      },
    ],
    readBack: async (w, res, sent) => {
      const job = await get(w, `/v1/jobs/${res.json.id}`)
      expect(job.spec).toEqual(res.json.spec)
      let tasks = 0
      let cursor: string | undefined
      do {
        const page = await get(
          w,
          `/v1/jobs/${res.json.id}/tasks?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        )
        tasks += page.items.length
        cursor = page.nextCursor
      } while (cursor)
      expect(tasks, "a job answered 202 has all of its tasks").toBe(job.spec.tasks)
      if (job.backendId === "hpc") expectSlurmTakes(await slurmBackendConfigOf(w), job.spec)
      return { got: job.spec, want: sent }
    },
  },
  "POST /v1/swarms": {
    path: () => "/v1/swarms",
    examples: [
      {
        name: "llama",
        model: "meta-llama/Llama-3.1-8B-Instruct",
        backendId: "local",
        replicas: 2,
        args: ["--max-model-len", "4096"],
        env: { HF_HOME: "/cache" },
        healthPath: "/health",
        labels: { team: "ml" },
        autoscaling: { minReplicas: 1, maxReplicas: 3 },
      },
      {
        name: "big",
        model: "m",
        backendId: "hpc",
        gpusPerReplica: 1,
        image: "vllm/vllm-openai:latest",
        command: ["vllm", "serve", "m"],
        serving: { slurm: { partition: "debug", timeLimit: "2-00:00:00", routerPort: 8080 } },
      },
    ],
    readBack: async (w, res, sent) => {
      const swarm = await get(w, `/v1/swarms/${res.json.name}`)
      if (swarm.backendId === "hpc") {
        const config = await slurmBackendConfigOf(w)
        // What the API took, the Slurm backend writes: no late refusal of a swarm answered 202.
        replicaScript(config, swarm as Swarm, "sp-srv-default.t.abc123-r0")
        routerScript(
          config,
          swarm as Swarm,
          "sp-srv-default.t.abc123-router-g1",
          servingFiles(config, "default", swarm as Swarm),
        )
      }
      return { got: swarm, want: sent }
    },
  },
  "POST /v1/backends": {
    path: () => "/v1/backends",
    examples: [
      { id: "hpc2", config: slurmBackendConfig },
      {
        id: "pool",
        config: {
          type: "workers",
          displayName: "Pool",
          attributes: { accelerator: "h100" },
          scaleGroups: [
            {
              name: "g",
              provider: { type: "local" },
              min: 0,
              max: 3,
              resources: { cpu: 2, memoryMiB: 1024 },
            },
          ],
          heartbeatIntervalS: 5,
          heartbeatGraceS: 30,
        },
      },
      {
        id: "lep",
        config: {
          type: "lepton",
          workspaceId: "ws1",
          tokenSecret: "t",
          nodeGroup: "ng",
          resourceShape: "gpu.1xh100",
        },
      },
      {
        id: "kube",
        config: { type: "eks", clusterName: "c", region: "us-west-2", localQueue: "q" },
      },
    ],
    readBack: async (w, res, sent) => ({ got: await get(w, `/v1/backends/${res.json.id}`), want: sent }),
  },
  "POST /v1/workers/register": {
    path: () => "/v1/workers/register",
    examples: [
      {
        backendId: "local",
        scaleGroup: "cpu",
        name: "host-1",
        address: "10.0.0.1:9000",
        resources: { cpu: 4, memoryMiB: 2048, gpu: 1, gpuType: "h100" },
        attributes: { accelerator: "h100" },
        agentVersion: "1.0.0",
        instanceId: "i-1",
      },
    ],
    readBack: async (w, res, sent) => {
      const { items } = await get(w, "/v1/workers?backendId=local")
      return { got: items.find((x: { id: string }) => x.id === res.json.worker.id), want: sent }
    },
  },
  "POST /v1/workers/{id}/heartbeat": {
    path: (w) => `/v1/workers/${w.workerId}/heartbeat`,
    headers: (w) => ({ "Swarmplane-Worker-Credential": w.credential }),
    examples: [
      {
        attempts: [
          {
            attemptUid: "a-1",
            state: "RUNNING",
            progress: { total: 10, done: 1, failed: 0 },
            logTail: "line 1\nline 2\n",
          },
        ],
      },
    ],
  },
  "POST /v1/projects": {
    path: () => "/v1/projects",
    examples: [{ name: "team-b", displayName: "Team B" }],
    readBack: async (w, res, sent) => {
      const me = await get(w, "/v1/me", res.json.adminKey.key)
      expect(me.project).toBe(res.json.project.name)
      // An empty display name is none.
      const { displayName, ...rest } = sent
      return { got: res.json.project, want: { ...rest, ...(displayName ? { displayName } : {}) } }
    },
  },
  "POST /v1/projects/{project}/keys": {
    path: () => "/v1/projects/default/keys",
    examples: [
      { role: "read", name: "ci" },
      { role: "write", name: "ci", expiresInDays: 30 },
    ],
    readBack: async (w, res, sent) => {
      const me = await get(w, "/v1/me", res.json.key)
      expect(me.role).toBe(res.json.role)
      const { items } = await get(w, "/v1/projects/default/keys")
      const listed = items.find((k: { id: string }) => k.id === res.json.id)
      // An empty name is no name: the key is listed without one.
      const { expiresInDays: _, name, ...rest } = sent
      return { got: listed, want: { ...rest, ...(name ? { name } : {}) } }
    },
  },
}

async function slurmBackendConfigOf(w: World): Promise<BackendConfigOf<"slurm">> {
  return BackendConfig.parse((await get(w, "/v1/backends/hpc")).config) as BackendConfigOf<"slurm">
}

/** A job the API took for a Slurm backend is one the backend can write a script for: no late refusal. */
function expectSlurmTakes(config: BackendConfigOf<"slurm">, spec: JobSpec): void {
  sbatchScript(config, {
    name: "sp-s-01abc",
    entries: [{ index: 0, shard: 0, attemptUid: "att-01abc" }],
    nshards: spec.tasks,
    resources: spec.resources,
    ...(spec.timeLimitS !== undefined ? { timeLimitS: spec.timeLimitS } : {}),
    env: { ...spec.env, SWARM_ENDPOINT: "http://10.0.0.1:8000" },
    command: spec.command,
    ...(spec.image ? { image: spec.image } : {}),
    ...placement(spec.constraints),
  })
}

/** `want` is part of `got`: every field sent comes back as sent (JSON equality; defaults may add fields). */
function expectSubset(got: unknown, want: unknown, path = "body"): void {
  if (want === null || typeof want !== "object") {
    // As JSON: a -0 sent is the 0 JSON has.
    expect(JSON.stringify(got), path).toBe(JSON.stringify(want))
    return
  }
  if (Array.isArray(want)) {
    expect(Array.isArray(got), `${path} is an array`).toBe(true)
    expect((got as unknown[]).length, `${path}.length`).toBe(want.length)
    for (const [i, w] of want.entries()) expectSubset((got as unknown[])[i], w, `${path}[${i}]`)
    return
  }
  expect(got !== null && typeof got === "object", `${path} is an object`).toBe(true)
  for (const [k, v] of Object.entries(want)) {
    expect(Object.hasOwn(got as object, k), `${path}.${k} is kept`).toBe(true)
    expectSubset((got as Record<string, unknown>)[k], v, `${path}.${k}`)
  }
}

describe("every body route: arbitrary JSON and broken valid bodies", async () => {
  const all = await operations()

  test("each route with a body in the OpenAPI document has a valid example here", () => {
    const withBody = all.filter((o) => o.body).map((o) => o.route)
    expect(withBody.sort()).toEqual(Object.keys(bodyRoutes).sort())
  })

  for (const [name, route] of Object.entries(bodyRoutes)) {
    const method = name.split(" ")[0]!

    test(`${name}: the examples are accepted and read back as sent`, async () => {
      for (const example of route.examples) {
        const w = await world()
        const { res, what } = await expectSafe(w, method, route.path(w), {
          text: JSON.stringify(example),
          headers: route.headers?.(w),
        })
        expect(res.status, what).toBeLessThan(300)
        const back = await route.readBack?.(w, res, example)
        if (back) expectSubset(back.got, back.want)
      }
    })

    test(
      `${name}: arbitrary JSON is refused cleanly or made as sent`,
      async () => {
        const worlds = reuse()
        await fc.assert(
          fc.asyncProperty(anyBody, async (body) => {
            const w = await worlds.get()
            const text = render(body)
            const { res } = await expectSafe(w, method, route.path(w), { text, headers: route.headers?.(w) })
            if (res.status < 300) await expectMade(worlds, w, route, res, text)
          }),
          runs(60),
        )
      },
      propertyTimeout,
    )

    test(
      `${name}: a valid body broken in one field is refused naming it, or made as sent`,
      async () => {
        const worlds = reuse()
        const cases = fc
          .constantFrom(...route.examples)
          .chain((example) =>
            fc
              .constantFrom(...paths(example))
              .chain((at) =>
                fc.tuple(
                  fc.constant(example),
                  fc.constant(at),
                  fc.oneof(mutation, nearMiss(valueAt(example, at))),
                ),
              ),
          )
        await fc.assert(
          fc.asyncProperty(cases, async ([example, at, m]) => {
            const w = await worlds.get()
            const text = render(mutate(example, at, m))
            // An item added to an array is at its end; a key added to an object is under its name.
            const target = valueAt(example, at)
            const added = Array.isArray(target) ? target.length : m.kind === "add" ? m.key : ""
            const mutated = (m.kind === "add" ? [...at, added] : at).join(".")
            const { res } = await expectSafe(w, method, route.path(w), {
              text,
              mutated,
              headers: route.headers?.(w),
            })
            if (res.status < 300) await expectMade(worlds, w, route, res, text)
          }),
          runs(150),
        )
      },
      propertyTimeout,
    )

    test(
      `${name}: with an Idempotency-Key, hostile or not: refused keeping nothing, or made once`,
      async () => {
        const worlds = reuse()
        const key = fc.oneof(
          fc.uuid(),
          // What a client can send in a header: one line of Latin-1, which may still be refused.
          hostileString.filter((h) => /^[\x20-\x7e\xa0-\xff]*$/.test(h) && h.trim() === h && h.length < 400),
        )
        const body = fc.oneof(
          anyBody.map(render),
          fc.constantFrom(...route.examples).map((e) => JSON.stringify(e)),
        )
        await fc.assert(
          fc.asyncProperty(key, body, async (k, text) => {
            const w = await worlds.get()
            const headers = { ...route.headers?.(w), "Idempotency-Key": k }
            const first = await expectSafe(w, method, route.path(w), { text, headers })
            if (first.res.status >= 300) return
            await expectMade(worlds, w, route, first.res, text)
            // The same request again is the first answer, replayed: nothing is made twice.
            const before = w.shadow.snapshot()
            const again = await expectSafe(w, method, route.path(w), { text, headers })
            expect(again.res.status, again.what).toBe(first.res.status)
            expect(again.res.headers.get("Idempotent-Replayed"), again.what).toBe("true")
            expect(again.res.json, again.what).toEqual(first.res.json)
            expect(w.shadow.snapshot(), `${again.what}: a replay wrote`).toBe(before)
          }),
          runs(30),
        )
      },
      propertyTimeout,
    )
  }
})

/** A 2xx made what it answered: read back, every field sent is there as sent. The next run gets a new world. */
async function expectMade(worlds: Worlds, w: World, route: BodyRoute, res: Answer, text: string) {
  worlds.spoil()
  const back = await route.readBack?.(w, res, JSON.parse(text))
  if (back) expectSubset(back.got, back.want)
}

/** What these properties found, shrunk, kept as fixed cases: each was answered 2xx before its fix. */
describe("found by the properties above: refused with the field, nothing written", () => {
  const cases: Record<string, { path: string; body: unknown; field: string }> = {
    "a batch output with a lone surrogate (the Slurm script refused it after a 202)": {
      path: "/v1/jobs",
      body: { swarm: "t", batch: { input: "s3://b/in.parquet", output: "\ud83d/scratch/out" }, tasks: 2 },
      field: "batch.output",
    },
    "an env value with a lone surrogate (the process would get U+FFFD)": {
      path: "/v1/jobs",
      body: { command: ["true"], backendId: "hpc", env: { A: "x\ud83d" } },
      field: "env.A",
    },
    "a command word with a lone surrogate": {
      path: "/v1/jobs",
      body: { command: ["echo", "\udc00"], backendId: "local" },
      field: "command.1",
    },
    "a swarm model with a lone surrogate": {
      path: "/v1/swarms",
      body: { name: "u", model: "m\ud800", backendId: "hpc" },
      field: "model",
    },
    "an extra sbatch option followed by one swarmplane owns": {
      path: "/v1/backends",
      body: { id: "hpc3", config: { ...slurmBackendConfig, extraSbatch: ["--exclusive --array=0-99"] } },
      field: "config.extraSbatch.0",
    },
  }
  for (const [name, c] of Object.entries(cases))
    test(name, async () => {
      const w = await world()
      const { res, what } = await expectSafe(w, "POST", c.path, { text: JSON.stringify(c.body) })
      expect(res.status, what).toBe(400)
      expect(
        res.json.error.details.map((d: { path: string }) => d.path),
        what,
      ).toContain(c.field)
    })

  test("a __proto__ key in an array item is named as the schemas name places: attempts.0..., not attempts[0]", async () => {
    const w = await world()
    const text =
      '{"attempts":[{"attemptUid":"a-1","state":"RUNNING","progress":{"done":1,"failed":{"__proto__":1e308}}}]}'
    const { res, what } = await expectSafe(w, "POST", `/v1/workers/${w.workerId}/heartbeat`, {
      text,
      headers: { "Swarmplane-Worker-Credential": w.credential },
    })
    expect(res.status, what).toBe(400)
    expect(
      res.json.error.details.map((d: { path: string }) => d.path),
      what,
    ).toEqual(["attempts.0.progress.failed.__proto__"])
  })
})
