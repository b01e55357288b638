/**
 * Label and field selectors as the apiserver parses them: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
 * `k notin (a,b)`, `k`, `!k`, comma = AND. A malformed selector is a 400, as on a real cluster.
 */
import { badRequest, isObject, type JsonObject } from "./resources"

interface Requirement {
  key: string
  op: "=" | "!=" | "in" | "notin" | "exists" | "!exists"
  values: string[]
}

export type Selector = (labels: Record<string, string>) => boolean

const key = "[A-Za-z0-9][-A-Za-z0-9_./]*"
const value = "[-A-Za-z0-9_.]*"
const forms: [RegExp, (m: RegExpExecArray) => Requirement][] = [
  [new RegExp(`^!\\s*(${key})$`), (m) => ({ key: m[1] ?? "", op: "!exists", values: [] })],
  [
    new RegExp(`^(${key})\\s+(in|notin)\\s*\\(([^)]*)\\)$`),
    (m) => ({
      key: m[1] ?? "",
      op: m[2] as "in" | "notin",
      values: (m[3] ?? "").split(",").map((v) => v.trim()),
    }),
  ],
  [
    new RegExp(`^(${key})\\s*(==|=|!=)\\s*(${value})$`),
    (m) => ({ key: m[1] ?? "", op: m[2] === "!=" ? "!=" : "=", values: [m[3] ?? ""] }),
  ],
  [new RegExp(`^(${key})$`), (m) => ({ key: m[1] ?? "", op: "exists", values: [] })],
]

/** Split on the commas that separate requirements (not those inside `in (a,b)`). */
function requirements(selector: string): string[] {
  const parts: string[] = []
  let depth = 0
  let current = ""
  for (const ch of selector) {
    if (ch === "(") depth++
    if (ch === ")") depth--
    if (ch === "," && depth === 0) {
      parts.push(current)
      current = ""
    } else current += ch
  }
  parts.push(current)
  return parts.map((p) => p.trim()).filter((p) => p !== "")
}

export function parseLabelSelector(selector: string | undefined): Selector {
  const reqs = requirements(selector ?? "").map((part) => {
    for (const [pattern, build] of forms) {
      const m = pattern.exec(part)
      if (m) return build(m)
    }
    throw badRequest(`unable to parse requirement: found '${part}', expected: valid label selector`)
  })
  return (labels) =>
    reqs.every((r) => {
      const has = Object.hasOwn(labels, r.key)
      const v = labels[r.key]
      switch (r.op) {
        case "=":
          return v === r.values[0]
        case "!=":
          return v !== r.values[0]
        case "in":
          return has && r.values.includes(v ?? "")
        case "notin":
          return !has || !r.values.includes(v ?? "")
        case "exists":
          return has
        case "!exists":
          return !has
      }
      return false
    })
}

/** A field selector over the few fields clients use: `metadata.name`, `metadata.namespace`, `status.phase`, `spec.nodeName`. */
export function parseFieldSelector(selector: string | undefined): (o: JsonObject) => boolean {
  const reqs = requirements(selector ?? "").map((part) => {
    const m = /^([a-zA-Z.]+)\s*(==|=|!=)\s*(.*)$/.exec(part)
    if (!m?.[1]) throw badRequest(`invalid selector: '${part}'; can't understand '${part}'`)
    return { path: m[1].split("."), negate: m[2] === "!=", value: m[3] ?? "" }
  })
  return (o) =>
    reqs.every((r) => {
      let v: unknown = o
      for (const p of r.path) v = isObject(v) ? v[p] : undefined
      const equal = String(v ?? "") === r.value
      return r.negate ? !equal : equal
    })
}
