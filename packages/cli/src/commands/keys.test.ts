/** `swarmplane key create|list|revoke` (also `keys`): expiry, the worker role, revoking, and what a revoked key is told. */
import { describe, expect, test } from "vitest"
import { apiError, run } from "../testing"

const me = () => ({ body: { project: "team-a", role: "admin", keyId: "key-me", operator: false } })
const info = {
  id: "key-01",
  project: "team-a",
  role: "worker",
  prefix: "sp_abcdefg",
  createdAt: "2026-01-01T00:00:00.000Z",
}

describe("key create", () => {
  test("--role worker --expires-in-days 30 sends both; `keys` is the same command", async () => {
    const res = await run(
      ["keys", "create", "--role", "worker", "--name", "agents", "--expires-in-days", "30"],
      {
        routes: {
          "GET /v1/me": me,
          "POST /v1/projects/team-a/keys": ({ body }) => ({
            status: 201,
            body: { ...info, ...(body as object), key: "sp_secret-worker-key" },
          }),
        },
      },
    )
    expect(res.code).toBe(0)
    expect(res.requests.at(-1)?.body).toEqual({ role: "worker", name: "agents", expiresInDays: 30 })
    expect(res.stdout.trim()).toBe("sp_secret-worker-key")
  })

  test("--expires-at is sent as given; --expires-in-days out of range is refused before any request", async () => {
    const at = await run(["key", "create", "--role", "read", "--expires-at", "2027-01-31T00:00:00Z"], {
      routes: {
        "GET /v1/me": me,
        "POST /v1/projects/team-a/keys": () => ({ status: 201, body: { ...info, key: "sp_x" } }),
      },
    })
    expect(at.requests.at(-1)?.body).toEqual({ role: "read", expiresAt: "2027-01-31T00:00:00Z" })
    const bad = await run(["key", "create", "--role", "read", "--expires-in-days", "0"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/from 1 to 3650/)
    expect(bad.requests).toHaveLength(0)
  })
})

describe("key revoke", () => {
  test("revokes by id; -o json prints the revoked key", async () => {
    const revoked = { ...info, revokedAt: "2026-01-02T00:00:00.000Z" }
    const res = await run(["key", "revoke", "key-01", "-o", "json"], {
      routes: { "GET /v1/me": me, "DELETE /v1/projects/team-a/keys/key-01": () => ({ body: revoked }) },
    })
    expect(res.code).toBe(0)
    expect(JSON.parse(res.stdout)).toEqual(revoked)
    expect(res.requests.at(-1)).toMatchObject({ method: "DELETE", path: "/v1/projects/team-a/keys/key-01" })
  })

  test("--self asks for ?self=true; without it the API's refusal says to add --self", async () => {
    const routes = {
      "GET /v1/me": me,
      "DELETE /v1/projects/team-a/keys/key-me": ({ url }: { url: URL }) =>
        url.searchParams.get("self") === "true"
          ? { body: { ...info, id: "key-me", revokedAt: "2026-01-02T00:00:00.000Z" } }
          : apiError(400, "key.self_revoke", 'key "key-me" is the key you are calling with'),
    }
    const refused = await run(["key", "revoke", "key-me"], { routes })
    expect(refused.code).toBe(5)
    expect(refused.stderr).toMatch(/\(key\.self_revoke\); add --self/)
    const self = await run(["key", "revoke", "key-me", "--self"], { routes })
    expect(self.code).toBe(0)
    expect(self.requests.at(-1)?.path).toBe("/v1/projects/team-a/keys/key-me?self=true")
    expect(self.stdout).toContain("revoked key key-me")
  })

  test("a revoked or expired key is told to ask for a new one", async () => {
    for (const code of ["auth.key_revoked", "auth.key_expired"]) {
      const res = await run(["swarm", "list"], {
        routes: { "GET /v1/swarms": () => apiError(401, code, "this API key was revoked") },
      })
      expect(res.code).toBe(4)
      expect(res.stderr).toContain("ask an admin of the project for a new key")
    }
  })
})
