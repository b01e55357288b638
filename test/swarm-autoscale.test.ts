/**
 * Autoscaling and scale to zero on a local plane with real agents: a burst of requests drives an echo
 * swarm from 1 replica to its max within the policy's delays and it returns to its min after the
 * burst, every decision with its reason; an idle swarm with `minReplicas: 0` goes to zero replicas, and
 * a request then wakes it and is answered (the wake time is printed).
 */
import { afterAll, beforeAll, expect, test } from "vitest"
import { type Plane, startPlane, stopAgents, until, workersPool } from "./support/plane"

let p: Plane
beforeAll(async () => {
  p = await startPlane()
  await workersPool(p, "pool", ["scale-a", "scale-b"])
})
afterAll(async () => {
  await stopAgents()
  await p.stop()
})

const swarmSpec = (name: string, autoscaling: object) => ({
  name,
  model: "echo",
  replicas: 1,
  cpusPerReplica: 0.5,
  memoryMiBPerReplica: 128,
  args: ["--delay-ms", "200"],
  autoscaling,
  rollout: { maxSurge: 1, maxUnavailable: 0, drainTimeoutS: 2 },
  backendId: "pool",
})
const get = async (name: string) => (await p.call("GET", `/v1/swarms/${name}`)).json
const serving = (s: { replicaSet?: { replicas: { state: string }[] } }) =>
  (s.replicaSet?.replicas ?? []).filter((r) => r.state === "serving").length
const chat = async (url: string, text: string) => {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: text }] }),
  })
  return { status: res.status, body: await res.text() }
}

test("a burst drives the swarm from 1 to its max, and it returns to its min after; every decision says why", {
  timeout: 240_000,
}, async () => {
  const policy = { minReplicas: 1, maxReplicas: 3, targetInflightPerReplica: 2, scaleDownDelayS: 10 }
  expect((await p.call("POST", "/v1/swarms", swarmSpec("burst", policy))).status).toBe(202)
  const up = await until(
    "the swarm to serve",
    async () => {
      const s = await get("burst")
      return s.phase === "RUNNING" && serving(s) === 1 && s
    },
    60_000,
  )
  const url: string = up.url

  // 12 clients, each sending its next request when the last is answered: about 12 in flight.
  let burst = true
  const statuses: number[] = []
  const clients = Array.from({ length: 12 }, async (_, i) => {
    for (let n = 0; burst; n++) statuses.push((await chat(url, `client ${i} request ${n}`)).status)
  })
  const atMax = await until(
    "the autoscaler to take the swarm to 3 serving replicas",
    async () => {
      const s = await get("burst")
      return serving(s) === 3 && s
    },
    90_000,
  )
  burst = false
  await Promise.all(clients)
  expect(statuses.filter((s) => s !== 200)).toEqual([])
  // Up in one step as a rule (12 in flight against a target of 2 each): each step raises the count,
  // and the last reaches the maximum, saying why.
  const ups = atMax.autoscaler.decisions as { from: number; to: number; reason: string }[]
  expect(ups[0]!.from).toBe(1)
  for (const d of ups) expect(d.to).toBeGreaterThan(d.from)
  const upDecision = ups.at(-1)!
  expect(upDecision.to).toBe(3)
  expect(upDecision.reason).toMatch(
    /requests in flight on average over \d+ s .* target 2 per replica: [12] → 3 \(at maxReplicas 3\)/,
  )

  const back = await until(
    "the swarm to return to 1 replica after the burst",
    async () => {
      const s = await get("burst")
      return s.autoscaler.replicas === 1 && serving(s) === 1 && s
    },
    90_000,
  )
  // Down in one step, or two when a reading straddles the burst's end (its average is then between):
  // each step lowers the count, and the last reaches the minimum, saying so.
  const after = back.autoscaler.decisions.slice(
    back.autoscaler.decisions.findIndex((d: { to: number }) => d.to === 3) + 1,
  ) as { from: number; to: number; reason: string }[]
  expect(after.length).toBeGreaterThanOrEqual(1)
  expect(after[0]!.from).toBe(3)
  for (const d of after) expect(d.to).toBeLessThan(d.from)
  const down = after.at(-1)!
  expect(down.to).toBe(1)
  expect(down.reason).toMatch(/: [23] → 1 \(at minReplicas 1\)$/)
  expect(back.url).toBe(url)
  // The decisions reach the swarm's events, with their reasons.
  const events = (await p.call("GET", "/v1/swarms/burst/events")).json.items
  const autoscaled = events.filter((e: { reason: string }) => e.reason === "autoscaled")
  expect(autoscaled.map((e: { message: string }) => e.message.split(":")[0])).toEqual(
    expect.arrayContaining([`${upDecision.from} → 3 replicas`, `${down.from} → 1 replicas`]),
  )
  console.log(
    `autoscaling decisions:\n${back.autoscaler.decisions.map((d: { at: string; reason: string }) => `  ${d.at}  ${d.reason}`).join("\n")}`,
  )
  expect((await p.call("DELETE", "/v1/swarms/burst")).status).toBe(202)
})

test("an idle swarm with minReplicas 0 goes to zero replicas; a request wakes it and is answered", {
  timeout: 240_000,
}, async () => {
  const policy = {
    minReplicas: 0,
    maxReplicas: 2,
    targetInflightPerReplica: 4,
    scaleDownDelayS: 10,
    wakeTimeoutS: 90,
  }
  expect((await p.call("POST", "/v1/swarms", swarmSpec("sleepy", policy))).status).toBe(202)
  const up = await until(
    "the swarm to serve",
    async () => {
      const s = await get("sleepy")
      return s.phase === "RUNNING" && serving(s) === 1 && s
    },
    60_000,
  )
  const url: string = up.url
  expect((await chat(url, "before sleeping")).status).toBe(200)

  const asleep = await until(
    "the idle swarm to reach zero replicas",
    async () => {
      const s = await get("sleepy")
      return s.autoscaler?.replicas === 0 && (s.replicaSet?.replicas.length ?? 1) === 0 && s
    },
    120_000,
  )
  expect(asleep).toMatchObject({
    phase: "RUNNING",
    url,
    message: "scaled to zero: the next request wakes a replica",
  })
  expect(asleep.autoscaler.decisions.at(-1)).toMatchObject({
    to: 0,
    reason: "no request for 10 s: scaled to zero",
  })

  const started = Date.now()
  const answer = await chat(url, "wake up")
  const tookS = (Date.now() - started) / 1000
  expect(answer.status).toBe(200)
  expect(answer.body).toContain("wake up")
  const woken = await until(
    "the wake time to be reported",
    async () => {
      const s = await get("sleepy")
      return s.autoscaler?.wake?.seconds !== undefined && s
    },
    30_000,
  )
  expect(woken.autoscaler.decisions.at(-1)).toMatchObject({
    from: 0,
    to: 1,
    reason: "a request arrived while scaled to zero",
  })
  expect(woken.url).toBe(url)
  console.log(
    `scale to zero: a request to the sleeping swarm was answered after ${tookS.toFixed(2)} s; the control plane's wake time (request seen → a replica serving) ${woken.autoscaler.wake.seconds.toFixed(2)} s`,
  )
})
