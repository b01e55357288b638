/**
 * Reading an esbuild metafile for what a cold start pays for: the inputs an entry loads before its
 * handler runs (its own and those of every chunk it imports statically), as against the chunks behind
 * a dynamic `import()` that load on first use.
 */
import type { Metafile } from "esbuild"

/** The inputs an output loads at import: its own and those of the chunks it imports statically. */
export function eagerInputs(metafile: Metafile, output: string, seen = new Set<string>()): string[] {
  if (seen.has(output)) return []
  seen.add(output)
  const out = metafile.outputs[output]
  if (!out) return []
  return [
    ...Object.keys(out.inputs),
    ...out.imports
      .filter((i) => i.kind === "import-statement" && !i.external)
      .flatMap((i) => eagerInputs(metafile, i.path, seen)),
  ]
}

/** The outputs an entry loads at import (itself and its static chunks). */
export function eagerOutputs(metafile: Metafile, output: string, seen = new Set<string>()): string[] {
  if (seen.has(output)) return []
  seen.add(output)
  const out = metafile.outputs[output]
  if (!out) return []
  return [
    output,
    ...out.imports
      .filter((i) => i.kind === "import-statement" && !i.external)
      .flatMap((i) => eagerOutputs(metafile, i.path, seen)),
  ]
}

/** Every input of the build, in any output. */
export const allInputs = (metafile: Metafile): string[] =>
  Object.values(metafile.outputs).flatMap((o) => Object.keys(o.inputs))

/** Whether any of `inputs` comes from the npm package `name`. */
export const fromPackage = (inputs: readonly string[], name: string): boolean =>
  inputs.some((i) => i.includes(`node_modules/${name}/`))

/**
 * The output of the entry point `entry` (as the metafile names inputs: relative to the working
 * directory). With code splitting, each chunk behind a dynamic `import()` is an entry point of its own.
 */
export function entryOutput(metafile: Metafile, entry: string): string {
  const found = Object.entries(metafile.outputs).find(([, o]) => o.entryPoint === entry)
  if (!found) throw new Error(`the build has no output for entry ${entry}`)
  return found[0]
}
