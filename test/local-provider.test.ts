/**
 * The local control plane's own workers (the `local` scale-group provider): an agent it started that
 * dies is a dead worker at once, not after the heartbeat grace.
 */
import { afterAll, beforeAll, expect, test } from "vitest"
import { commandLine, livingProcesses } from "../packages/agent/src/process-group"
import { type Plane, startPlane, until } from "./support/plane"

let p: Plane
beforeAll(async () => {
  p = await startPlane({ autoscaleEveryMs: 300 })
}, 60_000)
afterAll(() => p?.stop())

test("an agent the plane started that is killed is a dead worker within moments, not after the grace", {
  timeout: 60_000,
}, async () => {
  const registered = await p.call("POST", "/v1/backends", {
    id: "own",
    config: {
      type: "workers",
      heartbeatIntervalS: 1,
      heartbeatGraceS: 120,
      scaleGroups: [
        { name: "g", provider: { type: "local" }, min: 1, max: 1, resources: { cpu: 1, memoryMiB: 256 } },
      ],
    },
  })
  expect(registered.status).toBe(201)
  const worker = await until("the group's worker to register", async () => {
    const items = (await p.call("GET", "/v1/workers?backendId=own")).json.items
    return items.find((w: { health: string }) => w.health === "healthy")
  })
  const agent = livingProcesses((s) => commandLine(s.pid).includes(`--instance-id ${worker.instanceId}`))[0]
  expect(agent).toBeDefined()
  process.kill(agent!.pid, "SIGKILL")
  const dead = await until(
    "the worker to be dead",
    async () => {
      const items = (await p.call("GET", "/v1/workers?backendId=own")).json.items
      return items.find((w: { id: string; health: string }) => w.id === worker.id && w.health === "dead")
    },
    5_000,
  )
  expect(dead).toBeDefined()
})
