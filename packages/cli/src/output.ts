/**
 * Rendering: compact tables (cli-table3, kubectl-style, no borders), key/value blocks, JSON (2-space)
 * and YAML, durations and colours. Colour only on a terminal and never with NO_COLOR set.
 */
import Table from "cli-table3"
import { stringify } from "yaml"
import { UsageError } from "./errors"

export const Formats = ["table", "json", "yaml"] as const
export type Format = (typeof Formats)[number]

export function parseFormat(value: string | undefined): Format {
  const format = value ?? "table"
  if ((Formats as readonly string[]).includes(format)) return format as Format
  throw new UsageError(
    `output format "${format}" is not one of ${Formats.join(", ")}`,
    "use -o table|json|yaml",
  )
}

/** Whether to colour what goes to a stream. */
export function colorEnabled(isTTY: boolean, env: Record<string, string | undefined>): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0") return true
  return isTTY && env.TERM !== "dumb"
}

export interface Paint {
  enabled: boolean
  bold(text: string): string
  dim(text: string): string
  red(text: string): string
  green(text: string): string
  yellow(text: string): string
  cyan(text: string): string
}

export function paint(enabled: boolean): Paint {
  const sgr = (open: number, close: number) => (text: string) =>
    enabled && text ? `\x1b[${open}m${text}\x1b[${close}m` : text
  return {
    enabled,
    bold: sgr(1, 22),
    dim: sgr(2, 22),
    red: sgr(31, 39),
    green: sgr(32, 39),
    yellow: sgr(33, 39),
    cyan: sgr(36, 39),
  }
}

const good = new Set(["RUNNING", "SUCCEEDED", "READY", "healthy", "true", "scale_up"])
const bad = new Set([
  "FAILED",
  "CANCELLED",
  "KILLED",
  "WORKER_FAILED",
  "PREEMPTED",
  "UNSCHEDULABLE",
  "COSCHED_FAILED",
  "dead",
  "false",
  "blocked",
])
const waiting = new Set(["PENDING", "INITIALIZING", "ASSIGNED", "BUILDING", "UNKNOWN", "suspect"])

/** A state word in the colour of what it means. */
export function state(p: Paint, value: string): string {
  if (good.has(value)) return p.green(value)
  if (bad.has(value)) return p.red(value)
  if (waiting.has(value)) return p.yellow(value)
  return value
}

export type Cell = string | number | boolean | undefined | null

const noBorders = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "   ",
}

/** A compact table: upper-case header, columns three spaces apart, empty cells as `-`. */
export function table(p: Paint, head: string[], rows: Cell[][]): string {
  const t = new Table({
    head: head.map((h) => p.bold(h.toUpperCase())),
    chars: noBorders,
    style: { "padding-left": 0, "padding-right": 0, head: [], border: [], compact: true },
  })
  for (const row of rows)
    t.push(row.map((cell) => (cell === undefined || cell === null || cell === "" ? "-" : String(cell))))
  return `${t
    .toString()
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")}\n`
}

/** `Label:  value` lines, labels aligned; undefined values are left out. */
export function block(p: Paint, pairs: [string, Cell][]): string {
  const shown = pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
  const width = Math.max(0, ...shown.map(([label]) => label.length)) + 2
  return shown
    .map(([label, value]) => `${p.bold(`${label}:`)}${" ".repeat(width - label.length - 1)}${value}\n`)
    .join("")
}

const isScalar = (v: unknown): v is Cell => v === null || typeof v !== "object"
const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * A backend's free-form status detail (a cluster, its queues, its partitions) for a person: nested
 * `key: value` lines, a list of flat records as a table, a list of words on one line.
 */
export function detailText(p: Paint, detail: Record<string, unknown>, indent = ""): string {
  let text = ""
  for (const [key, value] of Object.entries(detail)) {
    if (value === undefined) continue
    if (isScalar(value)) text += `${indent}${key}: ${value ?? "-"}\n`
    else if (Array.isArray(value)) {
      if (!value.length) text += `${indent}${key}: (none)\n`
      else if (value.every(isScalar)) text += `${indent}${key}: ${value.join(", ")}\n`
      else if (value.every((v) => isRecord(v) && Object.values(v).every(isScalar))) {
        const rows = value as Record<string, Cell>[]
        const head = [...new Set(rows.flatMap((r) => Object.keys(r)))]
        const shown = table(
          p,
          head,
          rows.map((r) => head.map((h) => r[h])),
        )
        text += `${indent}${key}:\n${shown
          .trimEnd()
          .split("\n")
          .map((line) => `${indent}  ${line}`)
          .join("\n")}\n`
      } else
        text += `${indent}${key}:\n${value.map((v) => `${indent}  - ${isScalar(v) ? v : JSON.stringify(v)}`).join("\n")}\n`
    } else if (isRecord(value)) text += `${indent}${key}:\n${detailText(p, value, `${indent}  `)}`
  }
  return text
}

export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`
}

export function yaml(value: unknown): string {
  return stringify(value, { lineWidth: 0 })
}

/** Render an API object (or list) in `format`; `render` draws the table form. */
export function formatted(format: Format, value: unknown, render: () => string): string {
  if (format === "json") return json(value)
  if (format === "yaml") return yaml(value)
  return render()
}

/** A short duration: `45s`, `3m`, `2h5m`, `4d`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m${s % 60 && m < 10 ? `${s % 60}s` : ""}`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h}h${m % 60 ? `${m % 60}m` : ""}`
  return `${Math.floor(h / 24)}d`
}

/** How long ago an ISO time was, e.g. `3m`; `-` when absent. */
export function age(iso: string | undefined, now = Date.now()): string {
  if (!iso) return "-"
  const t = Date.parse(iso)
  return Number.isNaN(t) ? "-" : duration(now - t)
}

/** A local time for event listings: `15:04:05`, with the date when not today. */
export function clock(iso: string, now = new Date()): string {
  const t = new Date(iso)
  if (Number.isNaN(t.getTime())) return iso
  const time = t.toTimeString().slice(0, 8)
  return t.toDateString() === now.toDateString() ? time : `${t.toISOString().slice(0, 10)} ${time}`
}

/** A bar of `width` cells: done, failed, running, the rest empty. */
export function bar(
  p: Paint,
  counts: { done: number; failed: number; running: number; total: number },
  width = 24,
): string {
  const total = Math.max(1, counts.total)
  const cells = (n: number) => Math.round((n / total) * width)
  const done = cells(counts.done)
  const failed = Math.min(width - done, cells(counts.failed))
  const running = Math.min(width - done - failed, cells(counts.running))
  const rest = width - done - failed - running
  return `[${p.green("█".repeat(done))}${p.red("█".repeat(failed))}${p.cyan("▒".repeat(running))}${"░".repeat(rest)}]`
}
