/**
 * A function that never talks to EKS must not pay for the AWS SDK on a cold start: bundled as a Lambda
 * is (esbuild, ESM, with code splitting), the entry of the client and auth modules holds none of
 * `@aws-sdk/client-eks`, the credential chain or the signer; they sit in chunks loaded on first use.
 */
import { fileURLToPath } from "node:url"
import { build } from "esbuild"
import { expect, test } from "vitest"

const Lazy = [
  "@aws-sdk/client-eks",
  "@aws-sdk/credential-provider-node",
  "@smithy/signature-v4",
  "@smithy/hash-node",
]

test("the AWS SDK is loaded only when a cluster is first used", { timeout: 60_000 }, async () => {
  const entry = fileURLToPath(new URL("./auth.ts", import.meta.url))
  const client = fileURLToPath(new URL("./client.ts", import.meta.url))
  const result = await build({
    entryPoints: { auth: entry, client },
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    outdir: "/virtual",
    write: false,
    metafile: true,
    logLevel: "silent",
  })
  const outputs = Object.entries(result.metafile.outputs)
  const entries = outputs.filter(([path]) => /\/(auth|client)\.js$/.test(path))
  expect(entries).toHaveLength(2)
  const lazy = (names: string[]) =>
    names.filter((n) => Lazy.some((pkg) => n.includes(`node_modules/${pkg}/`)))
  /** The inputs an output loads before it runs: its own and those of the chunks it imports statically. */
  const statics = (path: string, seen = new Set<string>()): string[] => {
    if (seen.has(path)) return []
    seen.add(path)
    const out = result.metafile.outputs[path]!
    return [
      ...Object.keys(out.inputs),
      ...out.imports
        .filter((i) => i.kind === "import-statement" && !i.external)
        .flatMap((i) => statics(i.path, seen)),
    ]
  }
  for (const [path] of entries) expect(lazy(statics(path))).toEqual([])
  // And they are in the bundle, behind a dynamic import.
  expect(lazy(outputs.flatMap(([, out]) => Object.keys(out.inputs))).length).toBeGreaterThan(0)
})
