/**
 * Secrets stay where they belong. A run creates keys of every role, registers workers, submits a job
 * with a secret in its environment, places it, heartbeats, revokes, and misuses keys and credentials;
 * everything is captured (every response, every item written to the store, every log entry), and each
 * secret is looked for in all of it.
 */
import { expect, test } from "vitest"
import { reconcilePass } from "../control/reconcile"
import { MemoryStore } from "../store/memory"
import type { StateStore } from "../store/port"
import { type CallOptions, testApi } from "./testing"

/** A store that keeps a copy of every item written to it, as text. */
function recording(store: StateStore) {
  const written: { type: string; text: string }[] = []
  const keep = <T extends { type: string }>(item: T): T => {
    written.push({ type: item.type, text: JSON.stringify(item) })
    return item
  }
  const wrapped: StateStore = {
    ...store,
    get: store.get.bind(store),
    getMany: store.getMany.bind(store),
    query: store.query.bind(store),
    queryIndex: store.queryIndex.bind(store),
    delete: store.delete.bind(store),
    create: (item) => store.create(keep(item)),
    createMany: (items) => store.createMany(items.map(keep)),
    update: (item) => store.update(keep(item)),
  }
  return { store: wrapped, written }
}

test("no key, credential or secret env value appears anywhere but the one response that hands it out", async () => {
  const { store, written } = recording(MemoryStore())
  const api = await testApi({ store })
  const responses: { label: string; text: string }[] = []
  const call = async (label: string, method: string, path: string, opts: CallOptions = {}) => {
    const res = await api.call(method, path, opts)
    responses.push({ label, text: `${JSON.stringify(Object.fromEntries(res.headers))}\n${res.text}` })
    return res
  }

  // 1. Keys of every role; one made twice with the same Idempotency-Key (the replay is the same answer).
  const admin = (await call("project team-a", "POST", "/v1/projects", { body: { name: "team-a" } })).json
    .adminKey
  const foreign = (await call("project team-b", "POST", "/v1/projects", { body: { name: "team-b" } })).json
    .adminKey
  const keyOf = async (role: string, extra: CallOptions = {}) =>
    (
      await call(`key ${role}`, "POST", "/v1/projects/team-a/keys", {
        key: admin.key,
        body: { role },
        ...extra,
      })
    ).json
  const read = await keyOf("read")
  const write = await keyOf("write", { body: { role: "write", expiresInDays: 30 } })
  const idem = { headers: { "Idempotency-Key": "make-worker-key" } }
  const worker = await keyOf("worker", { body: { role: "worker" }, ...idem })
  const replay = await call("key worker (replay)", "POST", "/v1/projects/team-a/keys", {
    key: admin.key,
    body: { role: "worker" },
    ...idem,
  })
  expect(replay.json.key).toBe(worker.key)

  // 2. Workers register; a job with a secret in its environment is submitted and placed.
  await call("backend", "POST", "/v1/backends", {
    key: admin.key,
    body: { id: "pool", config: { type: "workers", heartbeatGraceS: 600 } },
  })
  const register = async (name: string) =>
    (
      await call(`register ${name}`, "POST", "/v1/workers/register", {
        key: worker.key,
        body: { backendId: "pool", name, resources: { cpu: 2, memoryMiB: 4096 } },
      })
    ).json
  const w1 = await register("w1")
  const w2 = await register("w2")
  const secretEnv = "hf_s3cr3t-token-value-123"
  const job = (
    await call("submit", "POST", "/v1/jobs", {
      key: write.key,
      body: { command: ["true"], env: { HF_TOKEN: secretEnv } },
    })
  ).json
  const backend = await api.deps.repos.backends.get("team-a", "pool")
  await reconcilePass(api.deps, backend!, "test")
  const beat = (label: string, w: { worker: { id: string } }, credential: string) =>
    call(label, "POST", `/v1/workers/${w.worker.id}/heartbeat`, {
      key: worker.key,
      body: { attempts: [] },
      headers: { "Swarmplane-Worker-Credential": credential },
    })
  const b1 = await beat("heartbeat w1", w1, w1.credential)
  const b2 = await beat("heartbeat w2", w2, w2.credential)
  const placedOn = [b1, b2].findIndex((b) => b.json.desired.length === 1)
  expect(placedOn).toBeGreaterThanOrEqual(0)
  expect([b1, b2][placedOn]!.json.desired[0].env.HF_TOKEN).toBe(secretEnv)

  // 3. Reads by the project, and misuse: another worker's credential, a foreign key, an unknown key,
  //    a revoked key, keys in the wrong places.
  await call("get job", "GET", `/v1/jobs/${job.id}`, { key: read.key })
  await call("job events", "GET", `/v1/jobs/${job.id}/events`, { key: read.key })
  await call("job tasks", "GET", `/v1/jobs/${job.id}/tasks`, { key: read.key })
  await call("list keys", "GET", "/v1/projects/team-a/keys", { key: admin.key })
  await call("list workers", "GET", "/v1/workers", { key: read.key })
  await call("me", "GET", "/v1/me", { key: worker.key })
  await beat("w1 with w2's credential", w1, w2.credential)
  await call("foreign reads the job", "GET", `/v1/jobs/${job.id}`, { key: foreign.key })
  await call("foreign heartbeats w1", "POST", `/v1/workers/${w1.worker.id}/heartbeat`, {
    key: foreign.key,
    body: { attempts: [] },
    headers: { "Swarmplane-Worker-Credential": w1.credential },
  })
  await call("unknown key", "GET", "/v1/me", { key: "sp_this-key-does-not-exist-000" })
  await call("credential as a key", "GET", "/v1/me", { key: w1.credential })
  await call("key in a body", "POST", "/v1/jobs", {
    key: write.key,
    body: { command: ["true"], key: read.key },
  })
  await call("revoke write", "DELETE", `/v1/projects/team-a/keys/${write.id}`, { key: admin.key })
  await call("revoked key", "GET", "/v1/jobs", { key: write.key })
  await call("w2 leaves", "POST", `/v1/workers/${w2.worker.id}/leave`, {
    key: worker.key,
    headers: { "Swarmplane-Worker-Credential": w2.credential },
  })

  // 4. Look for each secret everywhere.
  const logs = api.logger.entries.map((e) => JSON.stringify(e))
  const where = (secret: string) => ({
    responses: responses.filter((r) => r.text.includes(secret)).map((r) => r.label),
    events: written.filter((w) => w.type === "event" && w.text.includes(secret)).length,
    stored: written.filter((w) => w.text.includes(secret)).map((w) => w.type),
    logs: logs.filter((l) => l.includes(secret)).length,
  })
  const handedOutOnce = (label: string) => ({ responses: [label], events: 0, stored: [], logs: 0 })
  expect(where(admin.key)).toEqual(handedOutOnce("project team-a"))
  expect(where(foreign.key)).toEqual(handedOutOnce("project team-b"))
  expect(where(read.key)).toEqual(handedOutOnce("key read"))
  expect(where(write.key)).toEqual(handedOutOnce("key write"))
  expect(where(worker.key)).toEqual({
    ...handedOutOnce("key worker"),
    responses: ["key worker", "key worker (replay)"],
  })
  expect(where(w1.credential)).toEqual(handedOutOnce("register w1"))
  expect(where(w2.credential)).toEqual(handedOutOnce("register w2"))
  expect(where(api.adminKey)).toEqual({ responses: [], events: 0, stored: [], logs: 0 })
  expect(where("test-pepper")).toEqual({ responses: [], events: 0, stored: [], logs: 0 })
  // The secret env value is the job's: in the stored job (which delivers it), its owner's views of the
  // job and the heartbeat of the worker it runs on. Never an event, a log line, another worker or
  // another project.
  expect(where(secretEnv)).toEqual({
    responses: ["submit", `heartbeat w${placedOn + 1}`, "get job"],
    events: 0,
    stored: ["job", "job"],
    logs: 0,
  })
})
