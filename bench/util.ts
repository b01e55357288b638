/** What the benchmarks share: the median of runs, and a Markdown table with padded columns. */

export const median = (xs: readonly number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n")
}
