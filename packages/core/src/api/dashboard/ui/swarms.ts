/**
 * The swarm list (phase, endpoint, replicas ready/total) and a swarm's detail (its traffic over the last
 * 1, 5 and 15 minutes, replicas, serving handle, generation against observedGeneration, the jobs that
 * call it).
 */
import { api } from "./api"
import { type Child, h, svg } from "./dom"
import { ago, badge, code, dash, enc, mib, muted, phaseBadge } from "./format"
import { jobsTable } from "./jobs"
import { card, kv, type Pair, table, viewHead } from "./layout"
import type { Job, Page, Swarm, SwarmMetrics } from "./types"
import type { View } from "./view"

function replicas(status: Swarm["replicaStatus"] | undefined): HTMLSpanElement {
  const ready = status?.ready || 0
  const total = status?.total || 0
  const tone = total > 0 && ready === total ? "ok" : ready < total ? "warn" : ""
  return h(
    "span",
    { class: ["ratio", tone], title: `${ready} of ${total} replicas ready` },
    `${ready} / ${total}`,
  )
}

function deleting(s: Swarm): Child {
  return s.desired === "deleted" && s.phase !== "STOPPED" ? [" ", badge("deleting")] : null
}

const endpoint = (url: string | undefined, missing: string): HTMLElement =>
  url ? h("code", { class: "url" }, url) : muted(missing)

export const swarmList: View<Page<Swarm>> = {
  nav: "swarms",
  title: () => "Swarms",
  head: () =>
    viewHead("Swarms", { sub: "Replicas of a model server behind one OpenAI-compatible endpoint each." }),
  load: ({ signal }) => api("/v1/swarms?limit=500", { signal }),
  render(page) {
    const rows = page.items.map((s) =>
      h(
        "tr",
        { "data-key": `swarm-${s.name}` },
        h(
          "td",
          {},
          h("a", { href: `#/swarms/${enc(s.name)}`, class: "strong" }, s.name),
          s.message ? h("div", { class: "sub" }, s.message) : null,
        ),
        h("td", { class: "nowrap" }, phaseBadge(s.phase), deleting(s)),
        h("td", {}, endpoint(s.url, "not yet")),
        h("td", { class: "num" }, replicas(s.replicaStatus)),
        h("td", {}, h("a", { href: `#/backends/${enc(s.backendId)}` }, s.backendId)),
        h("td", {}, s.model),
        h("td", { class: "nowrap" }, ago(s.updatedAt)),
      ),
    )
    return [
      card(
        "swarms",
        null,
        table(["Name", "Phase", "Endpoint", ["Replicas", "num"], "Backend", "Model", "Updated"], rows, {
          label: "Swarms",
          empty: "No swarms yet. Create one with POST /v1/swarms.",
        }),
      ),
      page.nextCursor
        ? h("p", { class: "note", "data-key": "more" }, `Showing the first ${page.items.length} swarms.`)
        : null,
    ]
  },
}

interface SwarmData {
  swarm: Swarm
  jobs: Job[]
  metrics: SwarmMetrics | undefined
}

/** Seconds as the table shows them; null is above the top bucket (120 s). */
function secs(x: number | null | undefined): string {
  if (x === undefined) return "—"
  if (x === null) return "> 120 s"
  return x < 1 ? `${(x * 1000).toFixed(0)} ms` : `${x.toFixed(1)} s`
}

/** Requests per second, step by step over the last 15 minutes: a line, its peak and its span. */
function chart(points: SwarmMetrics["series"]): HTMLElement | null {
  if (points.length < 2) return null
  const t0 = Date.parse(points[0]!.at)
  const span = Math.max(1, Date.parse(points.at(-1)!.at) - t0)
  const peak = Math.max(...points.map((p) => p.requestsPerS))
  const xy = points.map((p) => {
    const x = ((Date.parse(p.at) - t0) / span) * 600
    const y = 56 - (peak > 0 ? (p.requestsPerS / peak) * 52 : 0)
    return `${x.toFixed(1)},${y.toFixed(1)}`
  })
  const minutes = Math.round(span / 60_000)
  return h(
    "figure",
    { class: "traffic-chart", "data-key": "chart" },
    svg(
      "svg",
      {
        viewBox: "0 0 600 60",
        preserveAspectRatio: "none",
        role: "img",
        "aria-label": "Requests per second",
      },
      svg("polyline", { points: xy.join(" "), fill: "none", stroke: "currentColor", "stroke-width": 2 }),
    ),
    h(
      "figcaption",
      { class: "sub" },
      `Requests/s over the last ${minutes || "<1"} min, a point per sample; peak ${peak.toFixed(2)}.`,
    ),
  )
}

/** Requests/s, errors, latency, first token and tokens/s per window, from the router's counters. */
function traffic(m: SwarmMetrics | undefined): Child {
  const windows = (["1m", "5m", "15m"] as const).flatMap((w) => {
    const f = m?.windows[w]
    return f ? [[w, f] as const] : []
  })
  if (!windows.length)
    return h(
      "p",
      { class: "empty" },
      m?.sampledAt
        ? "No traffic figures yet: the router's next sample (within 10 s) starts the first window."
        : "No figures: they come from the swarm's router on workers and slurm backends, sampled every 10 s at most.",
    )
  const rows = table(
    [
      "Window",
      ["Req/s", "num"],
      ["Errors", "num"],
      "Latency p50 / p99",
      "First token p50 / p99",
      "Queue wait p50 / p99",
      ["Tokens/s", "num"],
    ],
    windows.map(([w, f]) =>
      h(
        "tr",
        { "data-key": `window-${w}` },
        h("td", {}, w),
        h("td", { class: "num" }, f.requestsPerS.toFixed(2)),
        h("td", { class: "num" }, f.errorRate === undefined ? "—" : `${(f.errorRate * 100).toFixed(1)}%`),
        h("td", {}, `${secs(f.latencyP50S)} / ${secs(f.latencyP99S)}`),
        h("td", {}, `${secs(f.ttftP50S)} / ${secs(f.ttftP99S)}`),
        h("td", {}, `${secs(f.queueWaitP50S)} / ${secs(f.queueWaitP99S)}`),
        h("td", { class: "num" }, f.tokensPerS.toFixed(1)),
      ),
    ),
    { label: "Traffic", empty: "" },
  )
  const each = m?.replicas ?? []
  const perReplica = each.length
    ? [
        h("p", { class: "sub" }, `Per replica, over the last ${Math.round(each[0]!.seconds)} s:`),
        table(
          [
            ["Slot", "num"],
            "Replica",
            ["In flight", "num"],
            ["Req/s", "num"],
            ["Errors", "num"],
            "First token p50 / p99",
            ["Tokens/s", "num"],
          ],
          each.map((r) =>
            h(
              "tr",
              { "data-key": `replica-${r.url}` },
              h("td", { class: "num" }, r.slot === undefined ? "—" : String(r.slot)),
              h("td", {}, code(r.url)),
              h("td", { class: "num" }, String(r.inFlight)),
              h("td", { class: "num" }, r.requestsPerS.toFixed(2)),
              h(
                "td",
                { class: "num" },
                r.errorRate === undefined ? "—" : `${(r.errorRate * 100).toFixed(1)}%`,
              ),
              h("td", {}, `${secs(r.ttftP50S)} / ${secs(r.ttftP99S)}`),
              h("td", { class: "num" }, r.tokensPerS.toFixed(1)),
            ),
          ),
          { label: "Per replica", empty: "" },
        ),
      ]
    : []
  return [rows, perReplica, chart(m?.series ?? [])]
}

function overview(s: Swarm): HTMLElement {
  const current = s.observedGeneration === s.generation
  const perReplica = [`${s.cpusPerReplica} CPU`, mib(s.memoryMiBPerReplica)]
  if (s.gpusPerReplica) perReplica.push(`${s.gpusPerReplica} GPU`)
  const sizing: Pair = s.autoscaling
    ? ["Autoscaling", `${s.autoscaling.minReplicas}–${s.autoscaling.maxReplicas} replicas`]
    : ["Replicas asked for", String(s.replicas)]
  return kv([
    ["Phase", [phaseBadge(s.phase), deleting(s)]],
    ["Desired", s.desired],
    ["Endpoint", endpoint(s.url, "not yet known")],
    ["Replicas ready", replicas(s.replicaStatus)],
    [
      "Generation",
      [
        String(s.generation),
        " ",
        muted(`(observed ${s.observedGeneration})`),
        " ",
        badge(current ? "current" : "rolling out"),
      ],
    ],
    ["Backend", h("a", { href: `#/backends/${enc(s.backendId)}` }, s.backendId)],
    ["Per replica", perReplica.join(" · ")],
    ["Port and health check", [String(s.port), " ", code(s.healthPath)]],
    ["Image", s.image || muted("backend default")],
    sizing,
    ["Created", ago(s.createdAt)],
    ["Updated", ago(s.updatedAt)],
  ])
}

function replicasTable(s: Swarm): HTMLElement {
  const set = s.replicaSet
  if (set) {
    // Replicas swarmplane rolls itself: each with its generation and whether the router sends it requests.
    const items = new Map(s.replicaStatus.items.map((i) => [i.index, i]))
    return table(
      [["#", "num idx"], "Generation", "State", "Router", "URL", "Message"],
      set.replicas.map((r) => {
        const item = items.get(r.slot)
        return h(
          "tr",
          { "data-key": `replica-${r.slot}` },
          h("td", { class: "num idx" }, r.slot),
          h("td", { class: "num" }, r.generation),
          h("td", {}, badge(r.state === "draining" ? "STOPPING" : (item?.state ?? r.state.toUpperCase()))),
          h(
            "td",
            {},
            r.state === "serving" ? "in" : r.state === "draining" ? ["draining, ", ago(r.since)] : "not yet",
          ),
          h("td", {}, r.url ? h("code", { class: "url" }, r.url) : dash()),
          h("td", { class: "msg" }, item?.message || dash()),
        )
      }),
      {
        label: "Replicas",
        empty:
          s.autoscaler?.replicas === 0
            ? "Scaled to zero: the next request wakes a replica."
            : "No replica yet.",
      },
    )
  }
  return table(
    [["#", "num idx"], "State", "URL", "Message"],
    s.replicaStatus.items.map((r) =>
      h(
        "tr",
        { "data-key": `replica-${r.index}` },
        h("td", { class: "num idx" }, r.index),
        h("td", {}, badge(r.state)),
        h("td", {}, r.url ? h("code", { class: "url" }, r.url) : dash()),
        h("td", { class: "msg" }, r.message || dash()),
      ),
    ),
    { label: "Replicas", empty: "No replica has reported yet." },
  )
}

/** The autoscaler: the count it decided, the load it read, the last wake, and its decisions. */
function autoscalerCard(s: Swarm): HTMLElement | null {
  const a = s.autoscaling
  if (!a) return null
  const st = s.autoscaler
  const facts = kv([
    ["Replicas decided", st ? String(st.replicas) : muted("not yet")],
    [
      "Range",
      `${a.minReplicas}–${a.maxReplicas}, target ${a.targetInflightPerReplica} in flight per replica${a.targetFirstTokenP99S !== undefined ? `, first token p99 under ${a.targetFirstTokenP99S} s` : ""}`,
    ],
    [
      "Load",
      st?.reading
        ? `${st.reading.inFlight} in flight on average over ${st.reading.seconds} s, ${st.reading.requests} requests${st.reading.ttftP99S !== undefined ? `, first token p99 ${st.reading.ttftP99S === null ? "> 120" : `≤ ${st.reading.ttftP99S}`} s` : ""}: wants ${st.reading.wanted}`
        : muted("no reading yet: the router's counters come every 10 s"),
    ],
    [
      "Last wake",
      st?.wake?.seconds !== undefined
        ? `${st.wake.seconds.toFixed(1)} s from a request to a replica serving`
        : dash(),
    ],
  ])
  const decisions = table(
    ["When", ["Replicas", "num"], "Why"],
    [...(st?.decisions ?? [])]
      .reverse()
      .map((d) =>
        h(
          "tr",
          { "data-key": `decision-${d.at}` },
          h("td", {}, ago(d.at)),
          h("td", { class: "num" }, `${d.from} → ${d.to}`),
          h("td", { class: "msg" }, d.reason),
        ),
      ),
    { label: "Autoscaling decisions", empty: "No decision yet." },
  )
  return card("autoscaler", "Autoscaler", [facts, decisions])
}

function handle(s: Swarm): HTMLElement {
  if (!s.handle)
    return h(
      "p",
      { class: "empty" },
      "No deployment yet: the handle appears once the backend has created it.",
    )
  return kv([
    ["ID", code(s.handle.id)],
    ["URL", s.handle.url ? h("code", { class: "url" }, s.handle.url) : dash()],
    ...Object.entries(s.handle.meta || {}).map(
      ([k, v]): Pair => [k, Array.isArray(v) ? v.join(", ") : String(v)],
    ),
  ])
}

export const swarmDetail: View<SwarmData> = {
  nav: "swarms",
  title: ({ params }) => params[0] ?? "",
  head(ctx, data) {
    const s = data?.swarm
    return viewHead(ctx.params[0] ?? "", {
      crumbs: [["Swarms", "#/swarms"]],
      badges: s ? [phaseBadge(s.phase), deleting(s)] : [],
      sub: s ? s.model : null,
    })
  },
  async load({ params, signal }) {
    const name = enc(params[0])
    const [swarm, jobs, metrics] = await Promise.all([
      api<Swarm>(`/v1/swarms/${name}`, { signal }),
      api<Page<Job>>(`/v1/jobs?limit=10&swarm=${name}`, { signal }),
      // Figures are an extra: the page shows without them.
      api<SwarmMetrics>(`/v1/swarms/${name}/metrics`, { signal }).catch(() => undefined),
    ])
    return { swarm, jobs: jobs.items, metrics }
  },
  render({ swarm: s, jobs, metrics }) {
    return [
      s.message ? h("div", { class: "alert info alert-slot", "data-key": "message" }, s.message) : null,
      card("overview", "Overview", overview(s)),
      card("traffic", "Traffic", traffic(metrics)),
      autoscalerCard(s),
      card("replicas", "Replicas", replicasTable(s)),
      card("handle", "Serving handle", handle(s)),
      card(
        "jobs",
        [
          "Recent jobs",
          h("span", { class: "spacer" }),
          h("a", { href: `#/jobs?swarm=${enc(s.name)}` }, `All jobs against ${s.name}`),
        ],
        jobsTable(jobs, "No jobs have called this swarm yet."),
      ),
    ]
  },
}
