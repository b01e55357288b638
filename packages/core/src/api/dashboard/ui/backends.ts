/**
 * The backends list (type, kind, what the control loop last saw) and a backend's page: its workers and
 * autoscaler or its cluster's report (infra.ts), and its config, which names secrets but never holds them.
 */
import { api } from "./api"
import { h } from "./dom"
import { ago, badge, code, dash, enc } from "./format"
import { clusterCard, health, poolCard, type StatusAnswer, status, typeNames } from "./infra"
import { card, isComplex, kv, type Pair, table, value, viewHead } from "./layout"
import type { Backend, Page, Worker } from "./types"
import type { View } from "./view"

export const backendList: View<Backend[]> = {
  nav: "backends",
  title: () => "Backends",
  head: () =>
    viewHead("Backends", {
      sub: "The clusters and worker pools this project runs on, and what the control loop last saw.",
    }),
  load: async ({ signal }) => (await api<Page<Backend>>("/v1/backends", { signal })).items,
  render(items) {
    const rows = items.map((b) =>
      h(
        "tr",
        { "data-key": `backend-${b.id}` },
        h("td", {}, h("a", { href: `#/backends/${enc(b.id)}`, class: "strong" }, b.id)),
        h("td", {}, code(b.config.type)),
        h("td", {}, badge(b.kind, "idle plain")),
        h("td", {}, b.config.displayName || dash()),
        h("td", {}, health(b)),
        h("td", { class: "msg" }, b.status?.message || dash()),
        h("td", { class: "nowrap" }, ago(b.status?.checkedAt)),
      ),
    )
    return [
      card(
        "backends",
        null,
        table(["ID", "Type", "Kind", "Display name", "Last tick", "Message", "Checked"], rows, {
          label: "Backends",
          empty: "No backends yet. An admin registers one with POST /v1/backends.",
        }),
      ),
    ]
  },
}

interface BackendData {
  backend: Backend
  status: StatusAnswer
  workers: Worker[]
}

function config(b: Backend): HTMLElement {
  const rest = Object.entries(b.config).filter(([k]) => k !== "type" && k !== "displayName")
  return kv([
    ["Type", code(b.config.type)],
    ["Kind", b.kind],
    ["Registered", ago(b.createdAt)],
    ["Config changed", ago(b.updatedAt)],
    ...rest.map(([k, v]): Pair => [k, value(v), isComplex(v)]),
  ])
}

export const backendDetail: View<BackendData> = {
  nav: "backends",
  title: ({ params }) => params[0] ?? "",
  head(ctx, data) {
    const b = data?.backend
    const type = b?.config.type ?? ""
    return viewHead(b ? b.config.displayName || b.id : (ctx.params[0] ?? ""), {
      crumbs: [["Backends", "#/backends"]],
      badges: b ? [badge(typeNames[type] || type, "idle plain"), badge(b.kind, "idle plain"), health(b)] : [],
      sub: b?.config.displayName ? h("span", { class: "mono" }, b.id) : null,
    })
  },
  async load({ params, signal }) {
    const backend = await api<Backend>(`/v1/backends/${enc(params[0])}`, { signal })
    const workerDaemon = backend.kind === "worker-daemon"
    const [st, workers] = await Promise.all([
      status(backend.id, signal),
      workerDaemon
        ? api<Page<Worker>>(`/v1/workers?backendId=${enc(backend.id)}`, { signal }).then((r) => r.items)
        : [],
    ])
    return { backend, status: st, workers }
  },
  render({ backend: b, status: st, workers }) {
    return [
      b.kind === "worker-daemon"
        ? poolCard(b, st, workers, "Workers and autoscaler")
        : clusterCard(b, st, "Cluster"),
      card(
        "config",
        ["Config", h("span", { class: "card-note" }, "names secrets, never holds them")],
        config(b),
      ),
    ]
  },
}
