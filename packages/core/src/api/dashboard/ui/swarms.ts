/**
 * The swarm list (phase, endpoint, replicas ready/total) and a swarm's detail (replicas, serving
 * handle, generation against observedGeneration, the jobs that call it).
 */
import { api } from "./api"
import { type Child, h } from "./dom"
import { ago, badge, code, dash, enc, mib, muted, phaseBadge } from "./format"
import { jobsTable } from "./jobs"
import { card, kv, type Pair, table, viewHead } from "./layout"
import type { Job, Page, Swarm } from "./types"
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
    const [swarm, jobs] = await Promise.all([
      api<Swarm>(`/v1/swarms/${name}`, { signal }),
      api<Page<Job>>(`/v1/jobs?limit=10&swarm=${name}`, { signal }),
    ])
    return { swarm, jobs: jobs.items }
  },
  render({ swarm: s, jobs }) {
    return [
      s.message ? h("div", { class: "alert info alert-slot", "data-key": "message" }, s.message) : null,
      card("overview", "Overview", overview(s)),
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
