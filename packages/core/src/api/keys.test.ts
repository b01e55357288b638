/** API keys: revocation (at once, listed, never of the calling key by mistake) and expiry (on the clock). */
import { describe, expect, test } from "vitest"
import { testApi } from "./testing"

const dayMs = 86_400_000

async function team() {
  const api = await testApi()
  const admin = (await api.call("POST", "/v1/projects", { body: { name: "team-a" } })).json.adminKey
  const create = async (body: Record<string, unknown>) =>
    api.call("POST", "/v1/projects/team-a/keys", { key: admin.key, body })
  const list = async () =>
    (await api.call("GET", "/v1/projects/team-a/keys", { key: admin.key })).json.items as {
      id: string
      revokedAt?: string
      expiresAt?: string
    }[]
  return { api, admin: admin as { id: string; key: string }, create, list }
}

describe("revoking a key", () => {
  test("the key stops working at once (401 auth.key_revoked) and stays listed with revokedAt", async () => {
    const { api, admin, create, list } = await team()
    const ci = (await create({ role: "write", name: "ci" })).json
    expect((await api.call("GET", "/v1/jobs", { key: ci.key })).status).toBe(200)

    api.clock.advance(5000)
    const revoked = await api.call("DELETE", `/v1/projects/team-a/keys/${ci.id}`, { key: admin.key })
    expect(revoked.status).toBe(200)
    expect(revoked.json).toMatchObject({ id: ci.id, role: "write", revokedAt: "2026-01-01T00:00:05.000Z" })
    expect(revoked.json.key).toBeUndefined()

    const refused = await api.call("GET", "/v1/jobs", { key: ci.key })
    expect(refused.status).toBe(401)
    expect(refused.json.error.code).toBe("auth.key_revoked")
    expect(refused.json.error.message).toContain("revoked at 2026-01-01T00:00:05.000Z")
    expect(refused.json.error.message).toContain("POST /v1/projects/team-a/keys")
    expect((await list()).find((k) => k.id === ci.id)?.revokedAt).toBe("2026-01-01T00:00:05.000Z")

    // Again: the same answer, the first revokedAt kept, nothing written.
    api.clock.advance(5000)
    const before = api.store.writes()
    const again = await api.call("DELETE", `/v1/projects/team-a/keys/${ci.id}`, { key: admin.key })
    expect(again.json.revokedAt).toBe("2026-01-01T00:00:05.000Z")
    expect(api.store.writes()).toBe(before)
  })

  test("the calling key is revoked only with ?self=true", async () => {
    const { api, admin } = await team()
    const before = api.store.writes()
    const refused = await api.call("DELETE", `/v1/projects/team-a/keys/${admin.id}`, { key: admin.key })
    expect(refused.status).toBe(400)
    expect(refused.json.error).toMatchObject({ code: "key.self_revoke", details: [{ path: "query.self" }] })
    expect(refused.json.error.message).toContain("?self=true")
    expect(api.store.writes()).toBe(before)
    expect((await api.call("GET", "/v1/me", { key: admin.key })).status).toBe(200)

    const self = await api.call("DELETE", `/v1/projects/team-a/keys/${admin.id}?self=true`, {
      key: admin.key,
    })
    expect(self.status).toBe(200)
    expect((await api.call("GET", "/v1/me", { key: admin.key })).status).toBe(401)
  })

  test("a key id of another project, or of none, is 404 key.not_found through one's own project", async () => {
    const { api, create } = await team()
    const theirs = (await create({ role: "read" })).json
    const other = (await api.call("POST", "/v1/projects", { body: { name: "team-b" } })).json.adminKey.key
    for (const id of [theirs.id, "key-nope"]) {
      const res = await api.call("DELETE", `/v1/projects/team-b/keys/${id}`, { key: other })
      expect([res.status, res.json.error.code]).toEqual([404, "key.not_found"])
    }
    expect((await api.call("GET", "/v1/me", { key: theirs.key })).status).toBe(200)
  })

  test("the operator may revoke a key of any project", async () => {
    const { api, create } = await team()
    const theirs = (await create({ role: "read" })).json
    const res = await api.call("DELETE", `/v1/projects/team-a/keys/${theirs.id}`)
    expect(res.status).toBe(200)
    expect((await api.call("GET", "/v1/me", { key: theirs.key })).json.error.code).toBe("auth.key_revoked")
  })
})

describe("key expiry", () => {
  test("expiresInDays: listed with expiresAt; works until then, then 401 auth.key_expired saying when and how to get a new one", async () => {
    const { api, create, list } = await team()
    const made = await create({ role: "read", expiresInDays: 30 })
    expect(made.status).toBe(201)
    expect(made.json.expiresAt).toBe("2026-01-31T00:00:00.000Z")
    expect((await list()).find((k) => k.id === made.json.id)?.expiresAt).toBe("2026-01-31T00:00:00.000Z")

    api.clock.advance(30 * dayMs - 1)
    expect((await api.call("GET", "/v1/jobs", { key: made.json.key })).status).toBe(200)
    api.clock.advance(1)
    const expired = await api.call("GET", "/v1/jobs", { key: made.json.key })
    expect(expired.status).toBe(401)
    expect(expired.json.error.code).toBe("auth.key_expired")
    expect(expired.json.error.message).toContain("expired at 2026-01-31T00:00:00.000Z")
    expect(expired.json.error.message).toContain("POST /v1/projects/team-a/keys")
  })

  test("expiresAt: an ISO time in the future", async () => {
    const { api, create } = await team()
    const made = await create({ role: "read", expiresAt: "2026-01-01T01:00:00+01:00" })
    expect(made.status).toBe(400)
    const later = await create({ role: "read", expiresAt: "2026-03-01T12:00:00Z" })
    expect(later.json.expiresAt).toBe("2026-03-01T12:00:00.000Z")
    api.clock.advance(60 * dayMs)
    expect((await api.call("GET", "/v1/me", { key: later.json.key })).json.error.code).toBe(
      "auth.key_expired",
    )
  })

  const bad: Record<string, { body: Record<string, unknown>; field: string; says: RegExp }> = {
    "zero days": { body: { expiresInDays: 0 }, field: "expiresInDays", says: /at least 1/ },
    "more than ten years": { body: { expiresInDays: 3651 }, field: "expiresInDays", says: /3650/ },
    "a fraction of a day": {
      body: { expiresInDays: 1.5 },
      field: "expiresInDays",
      says: /must be an int/,
    },
    "a time in the past": { body: { expiresAt: "2025-12-31T00:00:00Z" }, field: "expiresAt", says: /future/ },
    now: { body: { expiresAt: "2026-01-01T00:00:00Z" }, field: "expiresAt", says: /future/ },
    "not a time": { body: { expiresAt: "next tuesday" }, field: "expiresAt", says: /ISO-8601/ },
    "past ten years": { body: { expiresAt: "2040-01-01T00:00:00Z" }, field: "expiresAt", says: /3650 days/ },
    both: {
      body: { expiresInDays: 3, expiresAt: "2026-02-01T00:00:00Z" },
      field: "expiresAt",
      says: /not both/,
    },
    "an unknown role": { body: { role: "root" }, field: "role", says: /worker/ },
  }
  for (const [name, tc] of Object.entries(bad))
    test(`refused, naming the field, nothing written: ${name}`, async () => {
      const { api, create } = await team()
      const before = api.store.writes()
      const res = await create({ role: "read", ...tc.body })
      expect(res.status).toBe(400)
      expect(res.json.error.details).toEqual([expect.objectContaining({ path: tc.field })])
      expect(res.json.error.message).toMatch(tc.says)
      expect(api.store.writes()).toBe(before)
    })
})
