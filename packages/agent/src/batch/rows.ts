/**
 * From an input record to a row of work and from a row to the request body: the id (always text, so
 * `5` and `"5"` are the same row), then either the chat `messages` (an array, or a JSON array in text,
 * used as is) or the prompt column.
 */
import { UsageError } from "../cli"
import type { InputRecord } from "./input"

export const Api = ["chat", "completions"] as const
export type Api = (typeof Api)[number]

/** The path of each API under the endpoint. */
export const ApiPath: Record<Api, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
}

export interface BatchRow {
  id: string
  /** 0-based position in the input. */
  position: number
  prompt?: string
  messages?: unknown[]
}

export interface RowColumns {
  idColumn: string
  promptColumn: string
}

/** The column that holds chat messages, used as is by the chat API when a row has it. */
export const MessagesColumn = "messages"

/** The id of a record as text; a record without one is a `UsageError` (ids are the resume key). */
export function idOf(record: InputRecord, column: string, position: number, input: string): string {
  const value = record[column]
  if (typeof value === "string" && value !== "") return value
  if (typeof value === "number" || typeof value === "bigint") return String(value)
  const columns = Object.keys(record).slice(0, 10).join(", ")
  throw new UsageError(
    `${input}: row ${position + 1} has no id in column "${column}" (its columns: ${columns}); choose the id column with --id-column`,
  )
}

/** The parts of a record the runner keeps (not the whole record: a shard's rows stay in memory). */
export function toRow(record: InputRecord, columns: RowColumns, position: number, input: string): BatchRow {
  const row: BatchRow = { id: idOf(record, columns.idColumn, position, input), position }
  const prompt = record[columns.promptColumn]
  if (typeof prompt === "string") row.prompt = prompt
  else if (typeof prompt === "number" || typeof prompt === "bigint" || typeof prompt === "boolean")
    row.prompt = String(prompt)
  const messages = messagesOf(record[MessagesColumn])
  if (messages) row.messages = messages
  return row
}

function messagesOf(value: unknown): unknown[] | undefined {
  if (Array.isArray(value)) return value
  if (typeof value !== "string" || !value.trimStart().startsWith("[")) return undefined
  try {
    const parsed: unknown = JSON.parse(value)
    return Array.isArray(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

export interface RequestOptions {
  api: Api
  model: string
  maxTokens?: number
  promptColumn: string
}

/** The body to POST for a row, or why there is none (the row is then written with that error). */
export function requestBody(
  row: BatchRow,
  options: RequestOptions,
): { body: Record<string, unknown> } | { error: string } {
  const limit = options.maxTokens === undefined ? {} : { max_tokens: options.maxTokens }
  if (options.api === "chat") {
    if (row.messages) return { body: { model: options.model, messages: row.messages, ...limit } }
    if (row.prompt === undefined)
      return { error: `no "${MessagesColumn}" array and no text in column "${options.promptColumn}"` }
    const messages = [{ role: "user", content: row.prompt }]
    return { body: { model: options.model, messages, ...limit } }
  }
  if (row.prompt === undefined) return { error: `no text in column "${options.promptColumn}"` }
  return { body: { model: options.model, prompt: row.prompt, ...limit } }
}
