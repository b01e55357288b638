/**
 * Small pieces every view shows: muted text and code, relative and local times, durations, sizes and
 * resources, state badges (the tone follows the state) and a job's stacked progress bar.
 */
import { h, svg } from "./dom"

/** A URL part, encoded (an id, a name). */
export const enc = (part: string | number | undefined): string => encodeURIComponent(String(part))
export const muted = (text: string): HTMLSpanElement => h("span", { class: "muted" }, text)
export const code = (text: string): HTMLElement => h("code", {}, text)
export const dash = (): HTMLSpanElement => muted("—")

function span(seconds: number): string {
  const s = Math.abs(Math.round(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m`
  if (s < 86400) return `${Math.floor(s / 3600)}h`
  return `${Math.floor(s / 86400)}d`
}

/** "12s ago", with the full local time as a tooltip. */
export function ago(iso: string | undefined): HTMLElement {
  const t = iso ? Date.parse(iso) : Number.NaN
  if (Number.isNaN(t)) return dash()
  const s = (Date.now() - t) / 1000
  const text = Math.abs(s) < 3 ? "just now" : s > 0 ? `${span(s)} ago` : `in ${span(s)}`
  return h("time", { datetime: iso, title: new Date(t).toLocaleString() }, text)
}

/** The local time of day (or date and time when not today). */
export function clock(iso: string | undefined): HTMLElement {
  const t = iso ? Date.parse(iso) : Number.NaN
  if (Number.isNaN(t)) return dash()
  const d = new Date(t)
  const today = d.toDateString() === new Date().toDateString()
  const text = today ? d.toLocaleTimeString() : d.toLocaleString()
  return h("time", { datetime: iso, title: d.toLocaleString() }, text)
}

/** "3m 12s". */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—"
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`
}

export function mib(n: number | undefined): string {
  if (typeof n !== "number") return "—"
  if (n >= 1024) return `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} GiB`
  return `${n} MiB`
}

/** Resources as the API gives them (a task's, a worker's, a backend's capacity). */
export interface ResourcesLike {
  cpu: number
  memoryMiB: number
  gpu?: number
  gpuType?: string
}

/** "2 CPU · 4 GiB · 1 GPU (h100)". */
export function resources(r: ResourcesLike | undefined): string | HTMLElement {
  if (!r) return dash()
  const parts = [`${r.cpu} CPU`, mib(r.memoryMiB)]
  if (r.gpu) parts.push(`${r.gpu} GPU${r.gpuType ? ` (${r.gpuType})` : ""}`)
  return parts.join(" · ")
}

// Badges and progress -------------------------------------------------------------------------

const tones = {
  ok: ["SUCCEEDED", "READY", "healthy", "current"],
  active: ["RUNNING", "ASSIGNED", "BUILDING", "INITIALIZING", "scale_up", "scale_down", "working"],
  warn: ["UNKNOWN", "PREEMPTED", "suspect", "blocked", "deleting", "cancelling", "rolling out"],
  bad: ["FAILED", "WORKER_FAILED", "UNSCHEDULABLE", "COSCHED_FAILED", "dead", "unhealthy"],
}
const toneOf = new Map(Object.entries(tones).flatMap(([tone, names]) => names.map((n) => [n, tone] as const)))

/** A colored state badge; the tone follows the state unless given. */
export function badge(text: string, tone?: string): HTMLSpanElement {
  return h("span", { class: ["badge", tone || toneOf.get(text) || "idle"] }, text)
}

/** A swarm's phase: RUNNING means serving, so it is green. */
export const phaseBadge = (phase: string): HTMLSpanElement =>
  badge(phase, phase === "RUNNING" ? "ok" : undefined)

const groups = [
  ["succeeded", ["SUCCEEDED"]],
  ["failed", ["FAILED", "WORKER_FAILED", "PREEMPTED", "UNSCHEDULABLE", "COSCHED_FAILED"]],
  ["killed", ["KILLED"]],
  ["running", ["RUNNING", "BUILDING", "ASSIGNED"]],
  ["pending", ["PENDING"]],
] as const

type Group = (typeof groups)[number][0]

/** Tasks per state, as a job's `counts`. */
export type Counts = Partial<Record<string, number>>

/** Tasks per progress group: succeeded, failed, killed, running, pending. */
function tally(counts: Counts | undefined): [Group, number][] {
  return groups.map(([name, states]) => [name, states.reduce((n, s) => n + (counts?.[s] || 0), 0)])
}

/** A stacked bar (SVG, so no inline styles) of a job's tasks, with "done/total". */
export function progress(
  counts: Counts | undefined,
  total: number | undefined,
  large?: boolean,
): HTMLDivElement {
  const parts = tally(counts)
  const n = Object.fromEntries(parts) as Record<Group, number>
  const sum = Math.max(
    total || 0,
    parts.reduce((sofar, [, c]) => sofar + c, 0),
  )
  const done = n.succeeded + n.failed + n.killed
  const text =
    parts
      .filter(([, c]) => c)
      .map(([name, c]) => `${c} ${name}`)
      .join(", ") || "no tasks"
  let x = 0
  const rects: SVGRectElement[] = []
  for (const [name, c] of parts) {
    if (!c || !sum) continue
    const w = (c / sum) * 100
    rects.push(svg("rect", { class: name, x: `${x}%`, y: 0, width: `${w}%`, height: "100%" }))
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
    h("span", { class: "progress-label" }, `${n.succeeded}/${sum} succeeded`),
  )
}
