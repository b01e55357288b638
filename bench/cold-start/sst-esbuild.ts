/**
 * SST 4's esbuild call for a Node function, as data: what `sst deploy` passes to esbuild for a
 * function's `nodejs` settings (`pkg/runtime/node/build.go` in the SST source). The cold-start bench and
 * its test build with this, so what they measure is what the deploy ships.
 *
 * What SST does with each setting, and its default when unset:
 * - `format`: `"esm"` unless `"cjs"`; ESM gets a banner defining `require`, `__filename`, `__dirname`.
 * - `minify`: minifies only when `true` (the flag is a plain boolean in the Go runtime, so unset means
 *   not minified, whatever the component's doc comment says).
 * - `splitting`: off unless `true`; on, dynamic imports become chunks next to the entry.
 * - `esbuild.keepNames`: `true` unless set to `false`.
 * - `esbuild.external`, `install`: added to the always-external `sharp` and `pg-native`.
 * - `esbuild.target`: defaults to the runtime's (`nodejs22.x` → ES2023).
 * - `loader`: only file, binary, text, json, base64, dataurl and the source loaders are passed on.
 */
import type { BuildOptions } from "esbuild"
import { lambdaRuntime } from "../../infra/bundle"

/** The subset of an SST function's `nodejs` settings that changes the bundle. */
export interface NodeBundleSettings {
  format?: "esm" | "cjs"
  minify?: boolean
  splitting?: boolean
  install?: readonly string[]
  loader?: Readonly<Record<string, "file" | "binary" | "text" | "json" | "base64" | "dataurl">>
  esbuild?: {
    keepNames?: boolean
    external?: readonly string[]
    target?: string
  }
}

const runtimeTarget: Record<string, string> = {
  "nodejs24.x": "es2024",
  "nodejs22.x": "es2023",
  "nodejs20.x": "es2023",
}

/** SST's own banner for ESM bundles: CommonJS code inside them still finds `require` and `__dirname`. */
const esmBanner = [
  `import { createRequire as topLevelCreateRequire } from 'module';`,
  `const require = topLevelCreateRequire(import.meta.url);`,
  `import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from "url"`,
  `const __filename = topLevelFileUrlToPath(import.meta.url)`,
  `const __dirname = topLevelFileUrlToPath(new topLevelURL(".", import.meta.url))`,
].join("\n")

/** The esbuild options `sst deploy` uses for one handler file built into `outdir`. */
export function sstEsbuildOptions(
  settings: NodeBundleSettings,
  entry: string,
  outdir: string,
  /** The Lambda runtime: by default the one every function in infra/ runs on. */
  runtime: string = lambdaRuntime,
): BuildOptions {
  const esm = settings.format !== "cjs"
  const minify = settings.minify === true
  return {
    entryPoints: { bundle: entry },
    bundle: true,
    platform: "node",
    format: esm ? "esm" : "cjs",
    target: settings.esbuild?.target ?? runtimeTarget[runtime] ?? "esnext",
    mainFields: esm ? ["module", "main"] : ["main"],
    keepNames: settings.esbuild?.keepNames ?? true,
    splitting: settings.splitting === true,
    external: ["sharp", "pg-native", ...(settings.install ?? []), ...(settings.esbuild?.external ?? [])],
    ...(settings.loader ? { loader: { ...settings.loader } } : {}),
    minifyWhitespace: minify,
    minifySyntax: minify,
    minifyIdentifiers: minify,
    banner: esm ? { js: esmBanner } : {},
    outdir,
    outExtension: { ".js": esm ? ".mjs" : ".cjs" },
    metafile: true,
    logLevel: "silent",
  }
}
