import { once } from "node:events"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { type HealthEvent, HealthWatch } from "./replica-health"
import { waitFor } from "./testing/wait"

let watch: HealthWatch | undefined
afterEach(() => watch?.stop())

describe("replica health", () => {
  it("turns ready on a 200, unready when it stops answering, ready again when it is back", async () => {
    let status = 503
    const server = createServer((_req, res) => {
      res.writeHead(status)
      res.end()
    })
    server.listen(0, "127.0.0.1")
    await once(server, "listening")
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`
    const events: HealthEvent[] = []
    watch = new HealthWatch(
      { url, startIntervalMs: 20, readyIntervalMs: 20, unreadyAfterMs: 100, startTimeoutMs: 10_000 },
      (event) => events.push(event),
    )
    status = 200
    await waitFor("ready", () => watch?.ready)
    status = 500
    await waitFor("unready", () => events.includes("unready"))
    status = 200
    await waitFor("ready again", () => events.length === 3)
    expect(events).toEqual(["ready", "unready", "ready"])
    server.close()
  })

  it("times out a replica that never answers 200", async () => {
    const events: HealthEvent[] = []
    watch = new HealthWatch(
      { url: "http://127.0.0.1:9/health", startIntervalMs: 20, startTimeoutMs: 200 },
      (event) => events.push(event),
    )
    await waitFor("the timeout", () => events.includes("timeout"))
    expect(events).toEqual(["timeout"])
  })
})
