/**
 * Browser module `/ui/dom.js`: element builders (text only, never HTML strings, so data from the API
 * cannot inject markup), an in-place `morphChildren` that keeps focus, scroll positions and form state
 * across refreshes, and the shared pieces of every view: badges, progress bars, tables, cards, times.
 */
// biome-ignore lint/complexity/noUselessStringRaw: every browser module is raw, so an escape added later reaches the browser as written
export const domJs = String.raw`/* swarmplane dashboard: DOM building, in-place updates, formatting. */
const SvgNs = "http://www.w3.org/2000/svg"

function setProps(el, props) {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue
    const text = Array.isArray(value) ? value.filter(Boolean).join(" ") : value === true ? "" : String(value)
    el.setAttribute(name, text)
  }
}

function addChildren(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue
    if (Array.isArray(child)) addChildren(el, child)
    else el.append(child instanceof Node ? child : String(child))
  }
}

/** An element with attributes (no event handlers: views act through data-action attributes). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag)
  setProps(el, props)
  addChildren(el, children)
  return el
}

/** An SVG element. */
export function svg(tag, props, ...children) {
  const el = document.createElementNS(SvgNs, tag)
  setProps(el, props)
  addChildren(el, children)
  return el
}

// In-place updates ----------------------------------------------------------------------------

const keyOf = (node) => (node.nodeType === 1 ? node.getAttribute("data-key") : null)

function sameKind(a, b) {
  return (
    a.nodeType === b.nodeType &&
    a.nodeName === b.nodeName &&
    keyOf(a) === keyOf(b) &&
    (a.nodeName !== "INPUT" || a.getAttribute("type") === b.getAttribute("type"))
  )
}

function morph(prev, next) {
  if (prev.nodeType !== 1) {
    if (prev.nodeValue !== next.nodeValue) prev.nodeValue = next.nodeValue
    return
  }
  const value = prev.nodeName === "SELECT" ? next.value : undefined
  for (const { name } of Array.from(prev.attributes)) if (!next.hasAttribute(name)) prev.removeAttribute(name)
  for (const { name, value: v } of Array.from(next.attributes)) if (prev.getAttribute(name) !== v) prev.setAttribute(name, v)
  morphChildren(prev, Array.from(next.childNodes))
  if (value !== undefined && prev.value !== value) prev.value = value
}

/**
 * Make parent's children look like next, reusing the existing nodes where they match (by data-key,
 * else by position among the unkeyed ones): focus, scroll, selection and open rows survive a refresh.
 */
export function morphChildren(parent, next) {
  const old = Array.from(parent.childNodes)
  const keyed = new Map()
  const loose = []
  for (const node of old) {
    const key = keyOf(node)
    if (key) keyed.set(key, node)
    else loose.push(node)
  }
  const kept = new Set()
  let li = 0
  const result = next.map((node) => {
    const key = keyOf(node)
    const prev = key ? keyed.get(key) : loose[li++]
    if (!prev || kept.has(prev) || !sameKind(prev, node)) return node
    kept.add(prev)
    morph(prev, node)
    return prev
  })
  for (const node of old) if (!kept.has(node)) node.remove()
  let cursor = parent.firstChild
  for (const node of result) {
    if (node === cursor) cursor = cursor.nextSibling
    else parent.insertBefore(node, cursor)
  }
}

// Formatting ----------------------------------------------------------------------------------

export const enc = encodeURIComponent
export const muted = (text) => h("span", { class: "muted" }, text)
export const code = (text) => h("code", {}, text)
export const dash = () => muted("—")

function span(seconds) {
  const s = Math.abs(Math.round(seconds))
  if (s < 60) return s + "s"
  if (s < 3600) return Math.floor(s / 60) + "m"
  if (s < 86400) return Math.floor(s / 3600) + "h"
  return Math.floor(s / 86400) + "d"
}

/** "12s ago", with the full local time as a tooltip. */
export function ago(iso) {
  const t = iso ? Date.parse(iso) : Number.NaN
  if (Number.isNaN(t)) return dash()
  const s = (Date.now() - t) / 1000
  const text = Math.abs(s) < 3 ? "just now" : s > 0 ? span(s) + " ago" : "in " + span(s)
  return h("time", { datetime: iso, title: new Date(t).toLocaleString() }, text)
}

/** The local time of day (or date and time when not today). */
export function clock(iso) {
  const t = iso ? Date.parse(iso) : Number.NaN
  if (Number.isNaN(t)) return dash()
  const d = new Date(t)
  const today = d.toDateString() === new Date().toDateString()
  const text = today ? d.toLocaleTimeString() : d.toLocaleString()
  return h("time", { datetime: iso, title: d.toLocaleString() }, text)
}

/** "3m 12s". */
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "—"
  const s = Math.round(ms / 1000)
  if (s < 60) return s + "s"
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s"
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m"
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h"
}

export function mib(n) {
  if (typeof n !== "number") return "—"
  if (n >= 1024) return (n / 1024).toFixed(n % 1024 ? 1 : 0) + " GiB"
  return n + " MiB"
}

/** "2 CPU · 4 GiB · 1 GPU (h100)". */
export function resources(r) {
  if (!r) return dash()
  const parts = [r.cpu + " CPU", mib(r.memoryMiB)]
  if (r.gpu) parts.push(r.gpu + " GPU" + (r.gpuType ? " (" + r.gpuType + ")" : ""))
  return parts.join(" · ")
}

// Badges and progress -------------------------------------------------------------------------

const tones = {
  ok: ["SUCCEEDED", "READY", "healthy", "current"],
  active: ["RUNNING", "ASSIGNED", "BUILDING", "INITIALIZING", "scale_up", "scale_down", "working"],
  warn: ["UNKNOWN", "PREEMPTED", "suspect", "blocked", "deleting", "cancelling", "rolling out"],
  bad: ["FAILED", "WORKER_FAILED", "UNSCHEDULABLE", "COSCHED_FAILED", "dead", "unhealthy"],
}
const toneOf = new Map(Object.entries(tones).flatMap(([tone, names]) => names.map((n) => [n, tone])))

/** A colored state badge; the tone follows the state unless given. */
export function badge(text, tone) {
  return h("span", { class: ["badge", tone || toneOf.get(text) || "idle"] }, text)
}

/** A swarm's phase: RUNNING means serving, so it is green. */
export const phaseBadge = (phase) => badge(phase, phase === "RUNNING" ? "ok" : undefined)

const groups = [
  ["succeeded", ["SUCCEEDED"]],
  ["failed", ["FAILED", "WORKER_FAILED", "PREEMPTED", "UNSCHEDULABLE", "COSCHED_FAILED"]],
  ["killed", ["KILLED"]],
  ["running", ["RUNNING", "BUILDING", "ASSIGNED"]],
  ["pending", ["PENDING"]],
]

/** Tasks per progress group: succeeded, failed, killed, running, pending. */
function tally(counts) {
  return groups.map(([name, states]) => [name, states.reduce((n, s) => n + ((counts && counts[s]) || 0), 0)])
}

/** A stacked bar (SVG, so no inline styles) of a job's tasks, with "done/total". */
export function progress(counts, total, large) {
  const parts = tally(counts)
  const sum = Math.max(total || 0, parts.reduce((n, [, c]) => n + c, 0))
  const done = parts[0][1] + parts[1][1] + parts[2][1]
  const text = parts.filter(([, c]) => c).map(([n, c]) => c + " " + n).join(", ") || "no tasks"
  let x = 0
  const rects = []
  for (const [name, c] of parts) {
    if (!c || !sum) continue
    const w = (c / sum) * 100
    rects.push(svg("rect", { class: name, x: x + "%", y: 0, width: w + "%", height: "100%" }))
    x += w
  }
  return h(
    "div",
    {
      class: ["progress", large && "large"],
      role: "progressbar",
      "aria-valuemin": 0,
      "aria-valuemax": sum,
      "aria-valuenow": done,
      "aria-valuetext": text,
      title: text,
    },
    svg(
      "svg",
      { class: "bar", "aria-hidden": "true", focusable: "false" },
      svg("rect", { class: "track", width: "100%", height: "100%" }),
      rects,
    ),
    h("span", { class: "progress-label" }, parts[0][1] + "/" + sum + " succeeded"),
  )
}

// Layout --------------------------------------------------------------------------------------

/** The title area of a view: breadcrumbs, the heading, badges, actions and a subtitle. */
export function viewHead(title, options = {}) {
  const { crumbs = [], badges = [], actions = [], sub } = options
  return h(
    "header",
    { class: "view-head", "data-key": "head" },
    crumbs.length
      ? h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("ol", {}, crumbs.map(([text, href]) => h("li", {}, h("a", { href }, text)))))
      : null,
    h("div", { class: "view-title" }, h("h1", { tabindex: "-1" }, title), badges, h("div", { class: "actions" }, actions)),
    sub ? h("p", { class: "view-sub" }, sub) : null,
  )
}

/** A card; head is a title, or [title, ...extras] shown on the same line. */
export function card(key, head, ...body) {
  const [title, ...extras] = Array.isArray(head) ? head : [head]
  const titleId = "card-" + key
  return h(
    "section",
    { class: "card", "data-key": key, id: key, "aria-labelledby": title ? titleId : null },
    title ? h("div", { class: "card-head" }, h("h2", { id: titleId }, title), extras) : null,
    body,
  )
}

/** A scrollable table; heads are labels or [label, class]. An empty table is a sentence instead. */
export function table(heads, rows, options = {}) {
  const { empty = "Nothing here yet.", label, cls } = options
  if (!rows.length) return h("p", { class: "empty" }, empty)
  return h(
    "div",
    { class: "table-wrap", role: label ? "region" : null, "aria-label": label, tabindex: label ? "0" : null },
    h(
      "table",
      { class: cls },
      h(
        "thead",
        {},
        h("tr", {}, heads.map((head) => (Array.isArray(head) ? h("th", { scope: "col", class: head[1] }, head[0]) : h("th", { scope: "col" }, head)))),
      ),
      h("tbody", {}, rows),
    ),
  )
}

/** A definition list of [label, value, wide?] items (falsy items are left out); wide ones span the row. */
export function kv(pairs) {
  return h(
    "dl",
    { class: "kv" },
    pairs.filter(Boolean).map(([k, v, wide]) => h("div", { class: wide ? "wide" : null }, h("dt", {}, k), h("dd", {}, v))),
  )
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v)

/** Whether value(v) is a block (a table or a list) that needs a whole row. */
export const isComplex = (v) => (isObject(v) && Object.keys(v).length > 0) || (Array.isArray(v) && v.some(isObject))

function inline(v) {
  if (isObject(v)) return Object.entries(v).map(([k, x]) => k + "=" + inline(x)).join(", ")
  if (Array.isArray(v)) return v.map(inline).join(", ")
  return String(v)
}

/** Any JSON value, readably: objects as definition lists, lists of objects as tables. */
export function value(v, depth = 0) {
  if (v === null || v === undefined || v === "") return dash()
  if (typeof v === "boolean") return v ? "yes" : "no"
  if (Array.isArray(v)) {
    if (!v.length) return dash()
    if (depth < 1 && v.every(isObject)) {
      const cols = [...new Set(v.flatMap((o) => Object.keys(o)))]
      return table(cols, v.map((o) => h("tr", {}, cols.map((c) => h("td", {}, value(o[c], depth + 1))))), { cls: "compact" })
    }
    return v.map(inline).join(", ")
  }
  if (isObject(v)) {
    if (depth >= 1) return inline(v)
    const entries = Object.entries(v)
    return entries.length ? kv(entries.map(([k, x]) => [k, value(x, depth + 1), isComplex(x)])) : dash()
  }
  return String(v)
}

/** An API error, readably: its message, code and field details. */
export function errorBox(error, title) {
  const details = error && Array.isArray(error.details) ? error.details : []
  return h(
    "div",
    { class: "alert error", role: "alert" },
    title ? h("strong", {}, title + " ") : null,
    (error && error.message) || String(error),
    error && error.code ? [" ", code(error.code)] : null,
    details.length
      ? h("ul", {}, details.map((d) => h("li", {}, d && d.path ? [code(d.path), " "] : null, d && d.message ? d.message : JSON.stringify(d))))
      : null,
  )
}
`
