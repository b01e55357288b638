/**
 * What the benchmarks share: the median of runs, a Markdown table with padded columns, and the run's
 * results file. Every table a bench prints is also kept (as rows keyed by column) under the bench that
 * printed it, with any figures it `record`s; `npm run bench` writes them all to
 * `bench/results/<time>.json` so two runs can be compared.
 */

export const median = (xs: readonly number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Tables and figures by bench name, in the order they were printed. */
const results: Record<string, { tables: Record<string, string>[][]; figures: Record<string, unknown> }> = {}
let current = "bench"

const entry = (name: string) => {
  results[name] ??= { tables: [], figures: {} }
  return results[name]
}

/** The bench whose tables and figures follow (set by `npm run bench` before each). */
export function startBench(name: string): void {
  current = name
  entry(name)
}

/** Figures of the current bench for the results file (numbers a later run compares against). */
export function record(figures: Record<string, unknown>): void {
  Object.assign(entry(current).figures, figures)
}

/** What the run kept, for the results file. */
export function recorded(): typeof results {
  return results
}

export function table(header: string[], rows: string[][]): string {
  entry(current).tables.push(rows.map((r) => Object.fromEntries(header.map((h, i) => [h, r[i] ?? ""]))))
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n")
}
