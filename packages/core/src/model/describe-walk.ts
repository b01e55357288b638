/**
 * Walks zod schemas to find object fields without a `.describe()` text. Used by the model test (every
 * public field must be described, because the config reference and OpenAPI document come from them)
 * and by the config reference generator.
 */
import type { z } from "@hono/zod-openapi"

type Schema = z.ZodType
interface Def {
  type: string
  innerType?: Schema
  in?: Schema
  out?: Schema
  element?: Schema
  options?: Schema[]
  keyType?: Schema
  valueType?: Schema
  left?: Schema
  right?: Schema
  getter?: () => Schema
  shape?: Record<string, Schema>
}

const def = (schema: Schema): Def => (schema as unknown as { def: Def }).def

/** The schema with optional/default/nullable/readonly/pipe wrappers removed, and each layer's description. */
export function unwrap(schema: Schema): { base: Schema; description?: string } {
  let current = schema
  let description = current.description
  for (let i = 0; i < 20; i++) {
    const d = def(current)
    const next =
      d.type === "optional" ||
      d.type === "nullable" ||
      d.type === "default" ||
      d.type === "prefault" ||
      d.type === "readonly" ||
      d.type === "catch" ||
      d.type === "nonoptional"
        ? d.innerType
        : d.type === "pipe"
          ? d.in
          : d.type === "lazy"
            ? d.getter?.()
            : undefined
    if (!next) break
    current = next
    description ??= current.description
  }
  return { base: current, description }
}

/** Paths (e.g. `SwarmSpec.serving.slurm.partition`) of object fields that have no description. */
export function undescribedFields(name: string, root: Schema): string[] {
  const missing: string[] = []
  const seen = new Set<Schema>()
  const visit = (schema: Schema, path: string): void => {
    const { base } = unwrap(schema)
    if (seen.has(base)) return
    seen.add(base)
    const d = def(base)
    switch (d.type) {
      case "object": {
        const shape = (base as unknown as { shape: Record<string, Schema> }).shape
        for (const [key, field] of Object.entries(shape)) {
          if (!unwrap(field).description) missing.push(`${path}.${key}`)
          visit(field, `${path}.${key}`)
        }
        return
      }
      case "array":
        if (d.element) visit(d.element, `${path}[]`)
        return
      case "union":
        for (const [i, option] of (d.options ?? []).entries()) visit(option, `${path}<${i}>`)
        return
      case "record":
        if (d.valueType) visit(d.valueType, `${path}{}`)
        return
      case "intersection":
        if (d.left) visit(d.left, path)
        if (d.right) visit(d.right, path)
        return
      default:
        return
    }
  }
  visit(root, name)
  return missing
}
