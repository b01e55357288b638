import { expect, test } from "vitest"
import { bootstrapOperator } from "./bootstrap"
import { MemoryQueue } from "./queue/memory"
import { createRuntime } from "./runtime"
import { MemoryStore } from "./store/memory"
import { silentLogger } from "./util/logger"

const runtime = () =>
  createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue(),
    logger: silentLogger,
    pepper: "p",
    secrets: { get: async () => "" },
  })

test("the first bootstrap makes the operator project and an admin key; later ones make nothing unless asked", async () => {
  const rt = runtime()
  const first = await bootstrapOperator(rt)
  expect(first.projectCreated).toBe(true)
  expect(first.adminKey?.role).toBe("admin")
  expect(await rt.repos.projects.verifyKey(first.adminKey!.key)).toMatchObject({
    project: "default",
    role: "admin",
  })

  expect(await bootstrapOperator(rt)).toEqual({ projectCreated: false })

  const again = await bootstrapOperator(rt, { newKey: true })
  expect(again.adminKey?.key).not.toBe(first.adminKey?.key)
  expect(await rt.repos.projects.listKeys("default")).toHaveLength(2)
})

test("concurrent bootstraps agree on one project", async () => {
  const rt = runtime()
  const results = await Promise.all([bootstrapOperator(rt), bootstrapOperator(rt), bootstrapOperator(rt)])
  expect(results.filter((r) => r.projectCreated)).toHaveLength(1)
})

test("a given admin key that was revoked is refused with the fix, not reused", async () => {
  const rt = runtime()
  const first = await bootstrapOperator(rt, { key: "sp_a-given-admin-key-0001" })
  await rt.repos.projects.revokeKey("default", first.adminKey!.id, Date.now())
  await expect(bootstrapOperator(rt, { key: "sp_a-given-admin-key-0001" })).rejects.toThrow(
    /is revoked \(at .*\): give another, or none to have one made/,
  )
})
