/**
 * The API on the DynamoDB adapter (dynalite), with every DynamoDB call counted: what a user's request
 * costs in calls, and the tenant and idempotency rules on the real store.
 */
import { testApi } from "@swarmplane/core/api/testing"
import { Active } from "@swarmplane/core/store/active"
import { countDynamoCalls } from "@swarmplane/core/store/counting"
import { DynamoStore, ensureTable } from "@swarmplane/core/store/dynamo"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { dynamoClient, startDynalite } from "./support/dynamo"

let stop: () => Promise<void>
let endpoint = ""
let tables = 0

beforeAll(async () => {
  const server = await startDynalite()
  stop = server.stop
  endpoint = server.endpoint
})
afterAll(() => stop())

async function api() {
  const client = dynamoClient(endpoint)
  const tableName = `api-${++tables}`
  await ensureTable(client, tableName)
  const t = await testApi({ store: DynamoStore({ client, tableName }) })
  const calls = countDynamoCalls(client)
  await t.call("POST", "/v1/backends", {
    body: {
      id: "local",
      config: {
        type: "workers",
        scaleGroups: [{ name: "local", provider: { type: "local" }, max: 2, resources: {} }],
      },
    },
  })
  calls.reset()
  return { ...t, calls }
}

describe("API on DynamoDB (dynalite)", () => {
  test("creating a 100-task job costs 4 BatchWriteItem calls and a handful of single-item calls", async () => {
    const t = await api()
    const res = await t.call("POST", "/v1/jobs", { body: { command: ["python", "shard.py"], tasks: 100 } })
    expect(res.status).toBe(202)
    const plain = { ...t.calls.counts }
    expect(plain.BatchWriteItemCommand).toBe(4)
    // 1 key lookup, 1 backend listing, 1 conditional put of the job, 1 event.
    expect(plain).toEqual({ GetItemCommand: 1, QueryCommand: 1, PutItemCommand: 2, BatchWriteItemCommand: 4 })

    t.calls.reset()
    const idem = await t.call("POST", "/v1/jobs", {
      body: { command: ["python", "shard.py"], tasks: 100 },
      headers: { "Idempotency-Key": "bench-1" },
    })
    expect(idem.status).toBe(202)
    const withKey = { ...t.calls.counts }
    // The idempotency record adds a read and a conditional put to reserve, a read and a put to store the response.
    expect(withKey).toEqual({
      GetItemCommand: 3,
      QueryCommand: 1,
      PutItemCommand: 4,
      BatchWriteItemCommand: 4,
    })

    t.calls.reset()
    const detail = await t.call("GET", `/v1/jobs/${res.json.id}`)
    expect(detail.json.tasks).toHaveLength(100)
    expect({ ...t.calls.counts }).toEqual({ GetItemCommand: 2, QueryCommand: 1 })
  })

  test("a key of one project cannot read or cancel another project's job", async () => {
    const t = await api()
    const job = (await t.call("POST", "/v1/jobs", { body: { command: ["true"], tasks: 2 } })).json
    const other = (await t.call("POST", "/v1/projects", { body: { name: "team-b" } })).json.adminKey.key
    expect((await t.call("GET", `/v1/jobs/${job.id}`, { key: other })).status).toBe(404)
    expect((await t.call("POST", `/v1/jobs/${job.id}/cancel`, { key: other })).status).toBe(404)
    expect((await t.call("GET", "/v1/jobs", { key: other })).json.items).toEqual([])
    expect((await t.call("GET", `/v1/jobs/${job.id}`)).json.status).toBe("PENDING")
  })

  test("the same Idempotency-Key twice makes one job", async () => {
    const t = await api()
    const headers = { "Idempotency-Key": "once" }
    const a = await t.call("POST", "/v1/jobs", { body: { command: ["true"] }, headers })
    const b = await t.call("POST", "/v1/jobs", { body: { command: ["true"] }, headers })
    expect(b.text).toBe(a.text)
    expect((await t.call("GET", "/v1/jobs")).json.items).toHaveLength(1)
  })

  test("cancel of a 60-task job kills every task and leaves nothing in the active index", async () => {
    const t = await api()
    const job = (await t.call("POST", "/v1/jobs", { body: { command: ["true"], tasks: 60 } })).json
    const active = () => Active(t.store).of("default", "local")
    const before = await active()
    expect(before.tasks).toHaveLength(60)
    expect([...before.jobs.keys()]).toEqual([job.id])
    const cancelled = await t.call("POST", `/v1/jobs/${job.id}/cancel`)
    expect(cancelled.json).toMatchObject({ status: "CANCELLED", counts: { KILLED: 60 } })
    expect((await active()).count).toBe(0)
  })
})
