/**
 * Hostile JSON for property tests of the API: bodies as text (so `__proto__`, duplicate keys and number
 * tokens such as `1e400` reach the server as sent), hostile strings, keys and numbers, deep nesting,
 * valid bodies broken in one place, and words for paths and queries.
 */
import fc from "fast-check"

/** JSON as text, so keys such as `__proto__` and duplicates reach the server as sent. */
export type J = { raw: string } | { str: string } | J[] | { entries: [string, J][] }

export function render(j: J): string {
  if (Array.isArray(j)) return `[${j.map(render).join(",")}]`
  if ("raw" in j) return j.raw
  if ("str" in j) return JSON.stringify(j.str)
  return `{${j.entries.map(([k, v]) => `${JSON.stringify(k)}:${render(v)}`).join(",")}}`
}

export function fromValue(v: unknown): J {
  if (typeof v === "string") return { str: v }
  if (Array.isArray(v)) return v.map(fromValue)
  if (v !== null && typeof v === "object")
    return { entries: Object.entries(v).map(([k, x]) => [k, fromValue(x)]) }
  return { raw: JSON.stringify(v) }
}

/** Words that mean something to an object, a shell, a path or a parser. */
const hostileWords = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "",
  " ",
  "\0",
  "a\0b",
  "\ud800",
  "x\udc00",
  "\ud83d",
  "\n",
  "a\r\nb",
  "\u2028",
  "\u001b[31m",
  "$(touch /tmp/sp-pwned)",
  "`id`",
  "'",
  '"',
  "\\",
  "%",
  "%00",
  "..",
  "../../etc/passwd",
  "NaN",
  "1e308",
  "-0",
  "Infinity",
  "true",
  "null",
  "0x10",
  "h100",
  "gpu",
  "local",
  "default",
]

/** Field names of the schemas, so generated objects reach real fields too. */
const fieldNames = [
  "name",
  "command",
  "env",
  "tasks",
  "type",
  "config",
  "id",
  "model",
  "resources",
  "cpu",
  "memoryMiB",
  "gpu",
  "labels",
  "attributes",
  "backendId",
  "role",
  "attempts",
  "partition",
  "scaleGroups",
  "provider",
  "constraints",
  "replicas",
  "batch",
  "serving",
  "state",
  "attemptUid",
]

export const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...hostileWords) },
  { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...hostileWords), fc.constantFrom(...hostileWords))
      .map(([a, b]) => `${a}${b}`),
  },
  // Past every field's bound (16 KiB at most), and past the body's (512 KiB).
  {
    weight: 1,
    arbitrary: fc.constantFrom(257, 1025, 16 * 1024 + 1, 70_000, 600_000).map((n) => "y".repeat(n)),
  },
)

/** Number tokens as JSON text: some parse to Infinity, -0 or a double that is not the integer written. */
const hostileNumber = fc.oneof(
  fc.constantFrom(
    "1e308",
    "1e400",
    "-1e400",
    "-0",
    "0",
    "1",
    "2",
    "-1",
    "0.5",
    "1e-400",
    "9007199254740993",
    "123456789012345678901234567890",
    "65535",
    "65536",
    "1024",
    "10000",
    "10001",
  ),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
)

const hostileKey = fc.oneof(hostileString, fc.constantFrom(...fieldNames))

const leaf: fc.Arbitrary<J> = fc.oneof(
  hostileString.map((s) => ({ str: s })),
  hostileNumber.map((raw) => ({ raw })),
  fc.constantFrom("true", "false", "null").map((raw) => ({ raw })),
)

/** Nested far past anything a schema walks (JSON.parse copes; does what comes after?). */
const deep: fc.Arbitrary<J> = fc
  .tuple(fc.integer({ min: 64, max: 30_000 }), fc.boolean())
  .map(([n, arrays]) => ({
    raw: arrays ? `${"[".repeat(n)}${"]".repeat(n)}` : `${'{"a":'.repeat(n)}1${"}".repeat(n)}`,
  }))

export const { json } = fc.letrec<{ json: J }>((tie) => ({
  json: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("json"), { maxLength: 4 }),
    fc.array(fc.tuple(hostileKey, tie("json")), { maxLength: 5 }).map((entries) => ({ entries })),
    deep,
  ),
}))

/** A whole body: mostly an object, sometimes anything at all. */
export const anyBody: fc.Arbitrary<J> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.array(fc.tuple(hostileKey, json), { maxLength: 6 }).map((entries) => ({ entries })),
  },
  { weight: 1, arbitrary: json },
)

/** Every path of a JSON value: objects' keys and arrays' indexes, dot-joined as the API names them. */
export function paths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (v === null || typeof v !== "object") return [at]
  const children = Array.isArray(v)
    ? v.map((x, i) => paths(x, [...at, i]))
    : Object.entries(v).map(([k, x]) => paths(x, [...at, k]))
  return [at, ...children.flat()]
}

export type Mutation = { kind: "set"; value: J } | { kind: "delete" } | { kind: "add"; key: string; value: J }

/** The example with one place changed: a value replaced, a field removed, or a key added beside it. */
export function mutate(v: unknown, at: (string | number)[], m: Mutation): J {
  const [head, ...rest] = at
  if (head === undefined) {
    if (m.kind === "set") return m.value
    const base = fromValue(v)
    if (m.kind === "add" && !Array.isArray(base) && "entries" in base)
      return { entries: [...base.entries, [m.key, m.value]] }
    if (m.kind === "add" && Array.isArray(base)) return [...base, m.value]
    return base
  }
  if (Array.isArray(v)) {
    const items = v.map((x, i) => (i === head ? mutate(x, rest, m) : fromValue(x)))
    return m.kind === "delete" && rest.length === 0 ? items.filter((_, i) => i !== head) : items
  }
  const entries = Object.entries(v as object).flatMap(([k, x]): [string, J][] => {
    if (k !== head) return [[k, fromValue(x)]]
    if (m.kind === "delete" && rest.length === 0) return []
    return [[k, mutate(x, rest, m)]]
  })
  return { entries }
}

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 4, arbitrary: json.map((value) => ({ kind: "set" as const, value })) },
  { weight: 1, arbitrary: fc.constant({ kind: "delete" as const }) },
  {
    weight: 1,
    arbitrary: fc.tuple(hostileKey, json).map(([key, value]) => ({ kind: "add" as const, key, value })),
  },
)

/** Near misses of a valid value: a hostile word around or inside a string, a number just out of range. */
export function nearMiss(valid: unknown): fc.Arbitrary<Mutation> {
  const set = (value: J): Mutation => ({ kind: "set", value })
  if (typeof valid === "string")
    return fc
      .tuple(
        hostileString.filter((h) => h.length < 100),
        fc.nat(valid.length),
      )
      .map(([h, at]) => set({ str: `${valid.slice(0, at)}${h}${valid.slice(at)}` }))
  if (typeof valid === "number")
    return fc
      .constantFrom(valid + 1, valid - 1, -valid, valid * 1e6, valid + 0.5, 0, -1)
      .map((n) => set({ raw: JSON.stringify(n) }))
  return mutation
}

export function valueAt(v: unknown, at: (string | number)[]): unknown {
  return at.reduce<unknown>((x, k) => (x as Record<string | number, unknown>)[k], v)
}

/** Percent-encoding of any string (a lone surrogate becomes U+FFFD, as a client's UTF-8 would make it). */
const encode = (s: string) =>
  [...new TextEncoder().encode(s)]
    .map((b) =>
      /[A-Za-z0-9_.~-]/.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).padStart(2, "0")}`,
    )
    .join("")

/** A path or query word as sent: encoded, or raw and malformed (`%`, `%zz`, an overlong NUL). */
export const urlWord = fc.oneof(
  { weight: 3, arbitrary: hostileString.filter((s) => s.length < 2000).map(encode) },
  {
    weight: 1,
    arbitrary: fc.constantFrom("%", "%zz", "%c0%80", "%ff%fe", "%e0%a4%a", "..", "%2e%2e", "%2F", "a%00b"),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom("1", "0", "-1", "500", "501", "1e3", "true", "RUNNING", "s", "local"),
  },
)
