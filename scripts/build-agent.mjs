#!/usr/bin/env node
/**
 * `npm run build:agent [-- OUT]`: bundles the worker agent (packages/agent) into one file that runs
 * with plain `node` (no checkout, no node_modules): what a Slurm cluster or a worker machine gets.
 * Default output: dist/swarmplane-agent.mjs. Uses esbuild (installed with tsx).
 */
import { mkdirSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

export async function buildAgent(outfile = join(root, "dist", "swarmplane-agent.mjs")) {
  mkdirSync(dirname(outfile), { recursive: true })
  await build({
    entryPoints: [join(root, "packages", "agent", "src", "standalone.ts")],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "warning",
    banner: { js: "#!/usr/bin/env node" },
  })
  return outfile
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = await buildAgent(process.argv[2] ? resolve(process.argv[2]) : undefined)
  console.log(`built ${out}`)
}
