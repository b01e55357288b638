/**
 * Turns a zod issue into a message that names what to send, e.g. `must be at most 65535` or
 * `must be one of "slurm", "lepton", "eks", "workers"`. Pure: the API words its `request.invalid`
 * details with it, and the CLI its offline checks of spec files (through the contract).
 */
import type { z } from "@hono/zod-openapi"

type Issue = z.core.$ZodIssue

const article = (type: string) => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`)

function bound(issue: Issue & { code: "too_big" | "too_small" }): string {
  const limit = String(issue.code === "too_big" ? issue.maximum : issue.minimum)
  const inclusive = issue.inclusive !== false
  const word =
    issue.code === "too_big" ? (inclusive ? "at most" : "less than") : inclusive ? "at least" : "more than"
  switch (issue.origin) {
    case "string":
      return `must be ${word} ${limit} characters long`
    case "array":
    case "set":
      return `must have ${word} ${limit} items`
    case "object":
    case "record":
      return `must have ${word} ${limit} entries`
    default:
      return `must be ${word} ${limit}`
  }
}

export function friendlyMessage(issue: Issue): string {
  switch (issue.code) {
    case "invalid_type": {
      const received = /received (\w+)/.exec(issue.message)?.[1]
      if (received === "undefined") return `is required: send ${article(issue.expected)}`
      return `must be ${article(issue.expected)}${received ? `, not ${article(received)}` : ""}`
    }
    case "unrecognized_keys":
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}: remove ${issue.keys.length > 1 ? "them" : "it"} (the fields are listed at /docs)`
    case "invalid_union": {
      const options = (issue as { options?: unknown[] }).options
      if (Array.isArray(options) && options.length)
        return `must be one of ${options.map((o) => JSON.stringify(o)).join(", ")}`
      return "does not match any allowed form"
    }
    case "invalid_value":
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`
    case "too_big":
    case "too_small":
      return bound(issue)
    case "not_multiple_of":
      return `must be a multiple of ${String(issue.divisor)}`
    case "invalid_format":
      return issue.message.startsWith("Invalid") ? `must be a valid ${issue.format}` : issue.message
    case "invalid_key": {
      // A map key that breaks its rule: say which rule, not just that the key is wrong.
      const inner = (issue as { issues?: Issue[] }).issues?.[0]
      if (!inner) return "is not an allowed key"
      const said = friendlyMessage(inner)
      // "this key must be …" reads; a rule in words of its own reads after a colon.
      return /^(must|is|may|cannot)\b/.test(said) ? `this key ${said}` : `is not an allowed key: ${said}`
    }
    default:
      return issue.message
  }
}
