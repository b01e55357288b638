/**
 * The shared layout of every view: its title area, cards, tables, definition lists, any JSON value
 * shown readably, and an API error with its code and field details.
 */
import { type Child, h } from "./dom"
import { code, dash } from "./format"

export interface ViewHeadOptions {
  /** Breadcrumbs: [text, href]. */
  crumbs?: [string, string][]
  badges?: Child[]
  actions?: Child[]
  sub?: Child
}

/** The title area of a view: breadcrumbs, the heading, badges, actions and a subtitle. */
export function viewHead(title: string, options: ViewHeadOptions = {}): HTMLElement {
  const { crumbs = [], badges = [], actions = [], sub } = options
  return h(
    "header",
    { class: "view-head", "data-key": "head" },
    crumbs.length
      ? h(
          "nav",
          { class: "crumbs", "aria-label": "Breadcrumb" },
          h(
            "ol",
            {},
            crumbs.map(([text, href]) => h("li", {}, h("a", { href }, text))),
          ),
        )
      : null,
    h(
      "div",
      { class: "view-title" },
      h("h1", { tabindex: "-1" }, title),
      badges,
      h("div", { class: "actions" }, actions),
    ),
    sub ? h("p", { class: "view-sub" }, sub) : null,
  )
}

/** A card; head is a title, or [title, ...extras] shown on the same line. */
export function card(key: string, head: Child, ...body: Child[]): HTMLElement {
  const [title, ...extras] = Array.isArray(head) ? head : [head]
  const titleId = `card-${key}`
  return h(
    "section",
    { class: "card", "data-key": key, id: key, "aria-labelledby": title ? titleId : null },
    title ? h("div", { class: "card-head" }, h("h2", { id: titleId }, title), extras) : null,
    body,
  )
}

/** A column head: a label, or [label, class]. */
export type Head = string | [string, string]

export interface TableOptions {
  /** The sentence shown instead of an empty table. */
  empty?: string
  /** Names the scrollable region for screen readers (and makes it focusable). */
  label?: string
  cls?: string
}

/** A scrollable table; heads are labels or [label, class]. An empty table is a sentence instead. */
export function table(heads: Head[], rows: Child[], options: TableOptions = {}): HTMLElement {
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
        h(
          "tr",
          {},
          heads.map((head) =>
            Array.isArray(head)
              ? h("th", { scope: "col", class: head[1] }, head[0])
              : h("th", { scope: "col" }, head),
          ),
        ),
      ),
      h("tbody", {}, rows),
    ),
  )
}

/** One item of a definition list: [label, value, wide?]. */
export type Pair = [string, Child, boolean?]

/** A definition list of [label, value, wide?] items (falsy items are left out); wide ones span the row. */
export function kv(pairs: (Pair | null | undefined | false)[]): HTMLElement {
  return h(
    "dl",
    { class: "kv" },
    pairs
      .filter((pair): pair is Pair => Boolean(pair))
      .map(([k, v, wide]) => h("div", { class: wide ? "wide" : null }, h("dt", {}, k), h("dd", {}, v))),
  )
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** Whether value(v) is a block (a table or a list) that needs a whole row. */
export const isComplex = (v: unknown): boolean =>
  (isObject(v) && Object.keys(v).length > 0) || (Array.isArray(v) && v.some(isObject))

function inline(v: unknown): string {
  if (isObject(v))
    return Object.entries(v)
      .map(([k, x]) => `${k}=${inline(x)}`)
      .join(", ")
  if (Array.isArray(v)) return v.map(inline).join(", ")
  return String(v)
}

/** Any JSON value, readably: objects as definition lists, lists of objects as tables. */
export function value(v: unknown, depth = 0): Child {
  if (v === null || v === undefined || v === "") return dash()
  if (typeof v === "boolean") return v ? "yes" : "no"
  if (Array.isArray(v)) {
    if (!v.length) return dash()
    if (depth < 1 && v.every(isObject)) {
      const cols = [...new Set(v.flatMap((o) => Object.keys(o)))]
      const rows = v.map((o) =>
        h(
          "tr",
          {},
          cols.map((c) => h("td", {}, value(o[c], depth + 1))),
        ),
      )
      return table(cols, rows, { cls: "compact" })
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

interface ErrorFields {
  message?: string
  code?: string
  details?: unknown
}

interface DetailFields {
  path?: string
  message?: string
}

/** An API error, readably: its message, code and field details. */
export function errorBox(error: unknown, title?: string): HTMLElement {
  const e: ErrorFields = typeof error === "object" && error !== null ? error : {}
  const details: unknown[] = Array.isArray(e.details) ? e.details : []
  return h(
    "div",
    { class: "alert error", role: "alert" },
    title ? h("strong", {}, `${title} `) : null,
    e.message || String(error),
    e.code ? [" ", code(e.code)] : null,
    details.length
      ? h(
          "ul",
          {},
          details.map((detail) => {
            const d = detail as DetailFields | null
            return h(
              "li",
              {},
              d?.path ? [code(d.path), " "] : null,
              d?.message ? d.message : JSON.stringify(d),
            )
          }),
        )
      : null,
  )
}
