/**
 * The web dashboard in a real browser (headless Chromium driven by playwright-core) against a local
 * control plane with real agents: sign-in, the swarm, the job with its tasks, attempts and logs, and
 * screenshots under test-output/ for a human to look at.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { chromiumPath } from "./support/chromium"
import { root } from "./support/local"
import { type Plane, startAgent, startPlane, stopAgents, until } from "./support/plane"

const executablePath = chromiumPath()
const output = join(root, "test-output")
const timeout = 120_000

let p: Plane
let browser: BrowserContext
let jobId: string

beforeAll(async () => {
  if (!executablePath) return
  p = await startPlane()
  const backend = await p.call("POST", "/v1/backends", {
    id: "pool",
    config: { type: "workers", displayName: "Local pool", heartbeatIntervalS: 1, heartbeatGraceS: 5 },
  })
  expect(backend.status).toBe(201)
  startAgent(p, "pool", "pool-agent-0", { cpu: 4 })
  startAgent(p, "pool", "pool-agent-1", { cpu: 4 })
  await until("2 healthy workers", async () => {
    const items = (await p.call("GET", "/v1/workers?backendId=pool")).json.items
    return items.filter((w: { health: string }) => w.health === "healthy").length === 2
  })
  const created = await p.call("POST", "/v1/swarms", {
    name: "demo",
    model: "echo",
    replicas: 2,
    memoryMiBPerReplica: 256,
    // Autoscaled between 2 and 3: idle, it stays at 2, and its page shows the autoscaler's card.
    autoscaling: { minReplicas: 2, maxReplicas: 3 },
    backendId: "pool",
  })
  expect(created.status).toBe(202)
  const swarm = (await p.call("GET", "/v1/swarms/demo?wait=RUNNING&timeoutS=25")).json
  expect(swarm.phase).toBe("RUNNING")
  const job = await p.call("POST", "/v1/jobs", {
    name: "shards",
    swarm: "demo",
    tasks: 3,
    command: ["sh", "-c", "echo shard $SHARD_ID"],
  })
  expect(job.status).toBe(202)
  jobId = job.json.id
  await until(
    "the job to succeed",
    async () => (await p.call("GET", `/v1/jobs/${jobId}`)).json.status === "SUCCEEDED",
    60_000,
  )
  // Three samples of counters (the router's own join them): the swarm's page has windows and a chart.
  const counters = (at: number, requests: number) => ({
    at,
    replicas: [
      {
        url: "http://127.0.0.1:1",
        inFlight: 1,
        requests,
        failures: 0,
        answers5xx: 0,
        tokens: 4 * requests,
        busySeconds: requests / 10,
        firstByteBuckets: [requests, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
      },
    ],
    startedAt: 1,
    requests,
    failures: 0,
    answers: { "2xx": requests },
    tokens: 4 * requests,
    inFlight: 1,
    durationBuckets: [0, requests, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    firstByteBuckets: [requests, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
  })
  const now = Date.now()
  for (let tries = 0; ; tries++) {
    const stored = await p.plane.runtime.repos.swarms.metrics("default", "demo")
    const samples = [counters(now - 30_000, 0), counters(now - 20_000, 120), counters(now - 10_000, 150)]
    try {
      await p.plane.runtime.repos.swarms.putMetrics("default", "demo", samples, stored, now)
      break
    } catch (error) {
      if (tries > 3) throw error
    }
  }
  mkdirSync(output, { recursive: true })
  browser = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "swarmplane-chromium-")), {
    executablePath,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  })
}, timeout)

afterAll(async () => {
  await browser?.close()
  await stopAgents()
  await p?.stop()
}, timeout)

/** A fresh tab that records console errors and uncaught exceptions. */
async function open(): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage()
  const errors: string[] = []
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text())
  })
  page.on("pageerror", (e) => errors.push(e.message))
  return { page, errors }
}

async function signIn(page: Page, key: string) {
  await page.getByLabel("API key").fill(key)
  await page.getByRole("button", { name: "Sign in" }).click()
}

describe.skipIf(!executablePath)("the dashboard in a browser", () => {
  test(
    "a wrong key shows the API's error and stays on the sign-in form",
    async () => {
      const { page } = await open()
      await page.goto(p.plane.url)
      await signIn(page, "sp_not-a-real-key")
      await page.locator("#signin-message", { hasText: "not recognised" }).waitFor()
      expect(await page.locator("#signin-form").isVisible()).toBe(true)
      expect(await page.locator("#topbar").isVisible()).toBe(false)
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
      await page.close()
    },
    timeout,
  )

  test(
    "signs in, shows the running swarm and the job with its tasks, attempts and logs",
    async () => {
      const { page, errors } = await open()
      const res = await page.goto(p.plane.url)
      const csp = (await res!.allHeaders())["content-security-policy"]
      expect(csp).toContain("default-src 'self'")

      await signIn(page, p.plane.adminKey)
      await page.locator("#who", { hasText: "default" }).waitFor()
      expect(await page.locator("#who").textContent()).toContain("admin")
      expect(page.url()).not.toContain(p.plane.adminKey)
      expect(await page.evaluate(() => sessionStorage.getItem("swarmplane.apiKey"))).toBe(p.plane.adminKey)

      // Swarms: the list, then the swarm's detail with both replicas.
      await page.locator('tr[data-key="swarm-demo"]', { hasText: "RUNNING" }).waitFor()
      await page.screenshot({ path: join(output, "dashboard-swarms.png") })
      await page.getByRole("link", { name: "demo", exact: true }).click()
      await page.locator("#replicas tbody tr").nth(1).waitFor()
      expect(await page.locator("#overview").textContent()).toContain("current")
      // Each replica with its generation, in the router; the autoscaler's count and range.
      expect(await page.locator("#replicas thead").textContent()).toContain("Generation")
      expect(await page.locator("#replicas tbody tr", { hasText: "READY" }).count()).toBe(2)
      const autoscaler = await page.locator("#autoscaler").textContent()
      expect(autoscaler).toContain("Replicas decided2")
      expect(autoscaler).toContain("2–3, target 32 in flight per replica")
      // Its traffic from the router's counters: a row per window, and the requests/s chart.
      await page.locator('#traffic tr[data-key="window-1m"]').waitFor()
      expect(await page.locator("#traffic figure svg polyline").count()).toBe(1)
      // Per replica, between the last two samples (the swarm's own router may have added one since).
      await page.locator('#traffic tr[data-key^="replica-http://"]').first().waitFor()
      expect(await page.locator("#traffic").textContent()).toContain("Per replica, over the last")
      expect(await page.locator("#traffic figcaption").textContent()).toMatch(/Requests\/s over the last/)
      await page.screenshot({ path: join(output, "dashboard-swarm.png"), fullPage: true })

      // Jobs: the list, then the job's detail.
      await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Jobs" }).click()
      await page.locator(`tr[data-key="job-${jobId}"]`, { hasText: "SUCCEEDED" }).waitFor()
      await page.getByLabel("Status", { exact: true }).selectOption("FAILED")
      await page.getByText("No jobs match this filter.").waitFor()
      expect(page.url()).toContain("#/jobs?status=FAILED")
      await page.getByLabel("Status", { exact: true }).selectOption("")
      await page.locator(`tr[data-key="job-${jobId}"]`).waitFor()
      await page.getByRole("link", { name: "shards" }).click()
      await page.getByRole("heading", { name: "shards", level: 1 }).waitFor()
      const tasks = page.locator('#tasks tr[data-key^="task-"]')
      await tasks.nth(2).waitFor()
      expect(await tasks.count()).toBe(3)
      for (const text of await tasks.allTextContents()) expect(text).toContain("SUCCEEDED")
      await page.locator("pre.logs", { hasText: "shard 0" }).waitFor()

      // Expand the attempts of task 1 and show its logs; both survive the next refreshes.
      await page.getByRole("button", { name: "Show the attempts of task 1" }).click()
      await page.locator("#attempts-1 tbody tr").first().waitFor()
      expect(await page.locator("#attempts-1").textContent()).toContain("SUCCEEDED")
      await page.getByRole("button", { name: "Show the output of task 1" }).click()
      await page.locator("pre.logs", { hasText: "shard 1" }).waitFor()
      await page.locator("#live-text", { hasText: "Updated" }).waitFor()
      const refreshed = await page.locator("#live-text").textContent()
      await page.waitForFunction(
        (before) => document.getElementById("live-text")?.textContent !== before,
        refreshed,
      )
      expect(await page.locator("#attempts-1").isVisible()).toBe(true)
      expect(await page.locator("#events tbody tr").count()).toBeGreaterThan(3)
      await page.evaluate(() => window.scrollTo(0, 0))
      await page.screenshot({ path: join(output, "dashboard.png"), fullPage: true })

      // Workers and autoscaler, and the backends list.
      await page.getByRole("link", { name: "Workers" }).click()
      await page.locator('#pool-pool tr[data-key^="worker-"]').nth(1).waitFor()
      await page.screenshot({ path: join(output, "dashboard-workers.png"), fullPage: true })
      await page.getByRole("link", { name: "Backends" }).click()
      await page.locator('tr[data-key="backend-pool"]').waitFor()

      expect(errors).toEqual([])

      await page.getByRole("button", { name: "Sign out" }).click()
      await page.locator("#signin-form").waitFor()
      expect(await page.evaluate(() => sessionStorage.getItem("swarmplane.apiKey"))).toBeNull()
      await page.close()
    },
    timeout,
  )

  test(
    "a batch job's page shows each shard's rows",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "swarmplane-dashboard-batch-"))
      const rows = Array.from({ length: 40 }, (_, i) => `{"id": "r${i}", "prompt": "p ${i}"}\n`).join("")
      writeFileSync(join(dir, "rows.jsonl"), rows)
      const batch = await p.call("POST", "/v1/jobs", {
        name: "batch",
        swarm: "demo",
        tasks: 2,
        batch: { input: join(dir, "rows.jsonl"), output: join(dir, "out") },
      })
      expect(batch.status).toBe(202)
      const id = batch.json.id
      const done = await until("the batch job to succeed", async () => {
        const j = (await p.call("GET", `/v1/jobs/${id}`)).json
        return j.status === "SUCCEEDED" && j
      })
      const totals = done.tasks.map(
        (t: { attempts: { progress: { total: number } }[] }) => t.attempts[0]!.progress.total,
      )
      expect(totals[0] + totals[1]).toBe(40)

      const { page, errors } = await open()
      await page.goto(`${p.plane.url}/#/jobs/${id}`)
      await signIn(page, p.plane.adminKey)
      await page.getByRole("heading", { name: "batch", level: 1 }).waitFor()
      await page.locator("#tasks th", { hasText: "Rows" }).waitFor()
      expect(await page.locator("main").textContent()).toContain(`${join(dir, "out")}/shard-<n>.jsonl`)
      const shards = page.locator('#tasks tr[data-key^="task-"]')
      await shards.nth(1).waitFor()
      const texts = await shards.allTextContents()
      for (const [i, total] of totals.entries()) expect(texts[i]).toContain(`${total}/${total}`)
      expect(errors).toEqual([])
      await page.close()
    },
    timeout,
  )

  test(
    "a write key cancels a running job from its page; a read key gets no cancel button",
    async () => {
      const sleeper = await p.call("POST", "/v1/jobs", { name: "sleeper", command: ["sleep", "300"] })
      expect(sleeper.status).toBe(202)
      const id = sleeper.json.id
      await until(
        "the sleeper to run",
        async () => (await p.call("GET", `/v1/jobs/${id}`)).json.status === "RUNNING",
      )
      const reader = await p.call("POST", "/v1/projects/default/keys", {
        role: "read",
        name: "dashboard-test",
      })
      expect(reader.status).toBe(201)

      const { page: readPage } = await open()
      await readPage.goto(`${p.plane.url}/#/jobs/${id}`)
      await signIn(readPage, reader.json.key)
      await readPage.getByRole("heading", { name: "sleeper", level: 1 }).waitFor()
      await readPage.locator("#tasks .badge", { hasText: "RUNNING" }).waitFor()
      expect(await readPage.getByRole("button", { name: "Cancel job" }).count()).toBe(0)
      await readPage.close()

      const { page, errors } = await open()
      await page.goto(`${p.plane.url}/#/jobs/${id}`)
      await signIn(page, p.plane.adminKey)
      await page.getByRole("button", { name: "Cancel job" }).click()
      await page.getByRole("button", { name: "Yes, cancel it" }).click()
      await page.locator(".view-head .badge", { hasText: "CANCELLED" }).waitFor()
      await page.locator("#tasks .badge", { hasText: "KILLED" }).waitFor()
      expect(await page.getByRole("button", { name: "Cancel job" }).count()).toBe(0)
      expect(errors).toEqual([])
      await page.close()
    },
    timeout,
  )
})
