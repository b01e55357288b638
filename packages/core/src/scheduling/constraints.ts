/**
 * Attribute selectors: normalising attribute values and compiling a `Constraint` into a test on one
 * normalised value. The semantics are exactly those of the shared workload's checker
 * (`bench/scheduler-workload/validate.py`, `holds()`), which follows Iris: strings compare trimmed and
 * lowercased; `gt/ge/lt/le` compare numbers only and are false when either side is a string;
 * `not_exists` holds when the attribute is absent; every other operator is false when it is absent.
 */
import type { Constraint } from "./types"

/** A normalised attribute value; `undefined` means the worker does not have the attribute. */
export type Norm = string | number | undefined

/** Trimmed and lowercased for strings, unchanged for numbers. */
export function normalize(value: string | number | undefined): Norm {
  return typeof value === "string" ? value.trim().toLowerCase() : value
}

/**
 * One worker attribute, normalised. `Object.hasOwn` rather than indexing, because attribute names
 * come from users and `attrs["constructor"]` would otherwise find Object's prototype.
 */
export function attrOf(attrs: Record<string, string | number>, key: string): Norm {
  return Object.hasOwn(attrs, key) ? normalize(attrs[key]) : undefined
}

export interface CompiledConstraint {
  key: string
  /** Canonical text (normalised values), equal for equal constraints: a cache key. */
  id: string
  /** Human form for pending reasons, e.g. `accelerator eq h100`, `region in [a, b]`. */
  label: string
  /** Whether the constraint holds for one normalised attribute value. */
  test: (value: Norm) => boolean
}

/** Compile once per distinct constraint; `test` then does no normalisation or dispatch on `op`. */
export function compileConstraint(c: Constraint): CompiledConstraint {
  const values = c.values.map(normalize)
  const first = values[0]
  const id = `${c.key}\u0000${c.op}\u0000${values.map((v) => `${typeof v}:${v}`).join("\u0000")}`
  const label =
    c.op === "exists" || c.op === "not_exists"
      ? `${c.key} ${c.op}`
      : c.op === "in"
        ? `${c.key} in [${values.join(", ")}]`
        : `${c.key} ${c.op} ${first}`
  return { key: c.key, id, label, test: testFor(c.op, values, first) }
}

function testFor(op: Constraint["op"], values: Norm[], first: Norm): (v: Norm) => boolean {
  switch (op) {
    case "exists":
      return (v) => v !== undefined
    case "not_exists":
      return (v) => v === undefined
    case "eq":
      return (v) => v !== undefined && v === first
    case "ne":
      return (v) => v !== undefined && v !== first
    case "in": {
      const set = new Set(values)
      return (v) => v !== undefined && set.has(v)
    }
    default: {
      // Ordered comparisons: numbers only (Iris raises on strings; the checker counts that as false).
      if (typeof first !== "number") return () => false
      const cmp = ordered[op]
      return (v) => typeof v === "number" && cmp(v, first)
    }
  }
}

const ordered: Record<"gt" | "ge" | "lt" | "le", (a: number, b: number) => boolean> = {
  gt: (a, b) => a > b,
  ge: (a, b) => a >= b,
  lt: (a, b) => a < b,
  le: (a, b) => a <= b,
}

/** Whether `c` holds for a worker's attributes (uncompiled convenience, for tests and one-offs). */
export function holds(attrs: Record<string, string | number>, c: Constraint): boolean {
  return compileConstraint(c).test(attrOf(attrs, c.key))
}
