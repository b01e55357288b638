/**
 * Building blocks shared by the domain schemas: names, env, argv commands, resources, attribute
 * constraints. Every field carries a `.describe()` text (the config reference is generated from them;
 * a test fails on a field without one) and a bound from `limits.ts`.
 */

import { Limits } from "./limits"
import { oneLine, programText, SlurmGrammarText } from "./slurm-grammar"
import { z } from "./zod"

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/

/** A DNS-safe name: lowercase letters, digits and '-', starting and ending with a letter or digit. */
export const Name = z.string().min(1).max(Limits.nameLength).regex(dnsLabel, {
  message:
    "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit",
})

export const Text = z.string().max(Limits.textLength)

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * One line of text for display and logs: no newline or other control character (it could forge a log
 * line) and no lone UTF-16 surrogate (it is not text).
 */
export const LineText = (max: number) =>
  z
    .string()
    .max(max)
    .refine((text) => oneLine(text), { message: "one line of text (no newline or control characters)" })
    .refine((text) => !loneSurrogate.test(text), {
      message: "must be well-formed text (a lone surrogate is not)",
    })

/** ISO-8601 timestamp text. */
export const Timestamp = z.string().describe("ISO-8601 time (UTC).")

const envKey = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Map keys that name an object's own machinery. `__proto__` would be dropped on the way in and
 * `constructor` read back as a function, so both, and `prototype`, are refused by name in every map.
 */
export const ReservedKeys = ["__proto__", "constructor", "prototype"] as const
export const notReserved = (key: string) => !(ReservedKeys as readonly string[]).includes(key)
const reservedMessage = `is reserved ("__proto__", "constructor" and "prototype" name an object's own machinery); choose another name`

/** Environment variables: a bounded map of names to values. */
export const Env = z
  .record(
    z
      .string()
      .max(Limits.envKeyLength)
      .regex(envKey, {
        message: "environment variable names are letters, digits and '_', not starting with a digit",
      })
      .refine(notReserved, { message: reservedMessage }),
    z.string().max(Limits.envValueLength).refine(programText, { message: SlurmGrammarText.programText }),
  )
  .refine((env) => Object.keys(env).length <= Limits.envCount, {
    message: `at most ${Limits.envCount} environment variables`,
  })
  .refine(
    (env) =>
      Object.entries(env).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0) <=
      Limits.envTotalBytes,
    { message: `environment variables may total at most ${Limits.envTotalBytes} bytes` },
  )

/** A command as an argv array (no shell unless the user writes ["sh", "-c", "..."]). */
export const Command = z
  .array(
    z.string().max(Limits.commandArgLength).refine(programText, { message: SlurmGrammarText.programText }),
  )
  .min(1)
  .max(Limits.commandArgs)
  .refine((argv) => argv.reduce((n, a) => n + Buffer.byteLength(a), 0) <= Limits.commandTotalBytes, {
    message: `the command may total at most ${Limits.commandTotalBytes} bytes`,
  })

export const Image = z
  .string()
  .min(1)
  .max(Limits.imageLength)
  .refine((image) => oneLine(image) && !/\s/.test(image) && programText(image), {
    message: "an image reference, without spaces, control characters or lone surrogates",
  })

const attributeKey = z
  .string()
  .min(1)
  .max(Limits.attributeKeyLength)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._/-]*$/, {
    message: "attribute keys are letters, digits, '.', '_', '/' and '-'",
  })
  .refine(notReserved, { message: reservedMessage })
const attributeValue = z
  .string()
  .max(Limits.attributeValueLength)
  .refine((text) => oneLine(text), { message: "one line of text (no newline or control characters)" })

/** Attributes of a worker or backend, e.g. `{ accelerator: "h100", zone: "a" }`. */
export const Attributes = z
  .record(attributeKey, attributeValue)
  .refine((a) => Object.keys(a).length <= Limits.attributes, {
    message: `at most ${Limits.attributes} entries`,
  })

/** Free-form labels on an object. */
export const Labels = Attributes

/** Resources one task (or replica) needs. */
export const Resources = z
  .object({
    cpu: z.number().positive().max(1024).default(1).describe("CPU cores (fractions allowed), default 1."),
    memoryMiB: z
      .number()
      .int()
      .positive()
      .max(16 * 1024 * 1024)
      .default(1024)
      .describe("Memory in MiB, default 1024."),
    gpu: z.number().int().min(0).max(Limits.gpusPerTask).default(0).describe("Number of GPUs, default 0."),
    gpuType: z
      .string()
      .max(64)
      .regex(/^[a-z0-9][a-z0-9._-]*$/, { message: "GPU types are lowercase, e.g. h100 or a100-80gb" })
      .optional()
      .describe(
        "GPU model required, e.g. `h100` (matches the `accelerator` attribute). Any type when absent.",
      ),
  })
  .strict()
  .openapi("Resources")
export type Resources = z.infer<typeof Resources>

/** One attribute selector. */
export const Constraint = z
  .object({
    key: attributeKey.describe("Attribute name, e.g. `accelerator`, `partition`, `zone`."),
    op: z
      .enum(["eq", "ne", "exists", "not_exists", "in", "gt", "ge", "lt", "le"])
      .describe(
        "`eq`/`ne` compare with `value`; `in` matches any of `values`; `exists`/`not_exists` test the key; `gt`/`ge`/`lt`/`le` compare numbers.",
      ),
    value: attributeValue.optional().describe("Value for `eq` and `ne`."),
    values: z.array(attributeValue).min(1).max(64).optional().describe("Values for `in`."),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (["eq", "ne", "gt", "ge", "lt", "le"].includes(c.op) && c.value === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["value"],
        message: `op "${c.op}" needs a value, e.g. { "value": "h100" }`,
      })
    if (c.op === "in" && !c.values)
      ctx.addIssue({
        code: "custom",
        path: ["values"],
        message: 'op "in" needs values, e.g. { "values": ["a", "b"] }',
      })
  })
  .openapi("Constraint")
export type Constraint = z.infer<typeof Constraint>

/** A soft preference: a constraint that adds `weight` to a placement's score when it matches. */
export const Preference = z
  .object({
    constraint: Constraint.describe("What a preferred placement matches."),
    weight: z.number().int().min(1).max(100).default(10).describe("How much a match counts, 1..100."),
  })
  .strict()
  .openapi("Preference")

/** Query parameters of every listing. */
export const PageQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(Limits.pageSizeMax)
    .default(Limits.pageSizeDefault)
    .describe(`Items per page, 1..${Limits.pageSizeMax}.`),
  cursor: z.string().max(2048).optional().describe("The `nextCursor` of the previous page."),
})

/**
 * A refinement that bounds the serialised size of a whole object, so no combination of individually
 * bounded fields can exceed what one stored item holds.
 */
export function bytesAtMost(limit: number) {
  return (value: unknown, ctx: z.core.$RefinementCtx): void => {
    const bytes = Buffer.byteLength(JSON.stringify(value))
    if (bytes > limit)
      ctx.addIssue({
        code: "custom",
        path: [],
        message: `is ${Math.ceil(bytes / 1024)} KiB in all; at most ${limit / 1024} KiB: move large data (prompts, configs) to files or object storage`,
      })
  }
}
