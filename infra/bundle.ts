/**
 * How every Lambda in infra/ is bundled: SST's `nodejs` settings, one object for all functions. Plain
 * data (no `sst` globals), so the cold-start bench (`bench/cold-start.ts`) and its test build with
 * exactly what the deploy ships.
 *
 * Each choice against SST 4's default, from `npm run bench -- cold-start` and the interleaved runs
 * behind it when each was chosen (API handler, fresh `node` per run, CPU ms of import + first
 * `GET /health`, min/median of 9 on a shared, busy 2-core machine, so read them as rough; the README's
 * Performance table has the current figures):
 * - `format: "esm"` (SST's default, stated): a CommonJS bundle cannot be split, loads all 2.1 MB at
 *   once and took 720/917 ms against 351/470 ms for the split ESM one.
 * - `splitting: true` (default off): code behind a dynamic `import()` (ssh2 in the Slurm backend, the
 *   SSM client, the EKS SDK, the dashboard's files) goes to chunks that load on first use. The code
 *   loaded at import falls from 4.2 MB to 2.1 MB; 546/595 → 402/507 ms.
 * - `minify: true`: SST builds unminified unless told (its runtime reads the flag as a plain boolean,
 *   so unset means off). Half the bytes to parse: 2.1 MB → 1.1 MB at import; 402/507 → 370/469 ms.
 * - `esbuild.keepNames: false` (SST's default is true): keeping names wraps every function and class in
 *   a `__name()` call at load time: 5% of the bytes; 370/469 → 351/470 ms, within noise, so chosen for
 *   the smaller bundle. Nothing here reads a constructor's or function's `name` (error classes set
 *   `name` themselves; the SDK's errors carry theirs from the response).
 * - `esbuild.external`: only ssh2's optional native add-ons (`cpu-features`, `*.node`), which esbuild
 *   cannot bundle ("No loader is configured for .node files"); ssh2 catches their absence and uses its
 *   JavaScript crypto. The AWS SDK stays bundled and pinned: left external and loaded from node_modules
 *   (as the Lambda runtime's own copy would be) it took 540/571 ms against 343/362 ms bundled, and the
 *   runtime's copy changes version under us.
 * Source maps keep SST's default (built and uploaded beside the bundle, not loaded by Lambda).
 */
export const bundleSettings = {
  format: "esm" as const,
  splitting: true,
  minify: true,
  esbuild: {
    keepNames: false,
    external: ["cpu-features", "*.node"],
  },
}

/**
 * The Lambda runtime of every function, pinned rather than SST's default (24) so an SST upgrade cannot
 * move it, and the nearest Lambda runtime to the Node 20 the project is developed and tested on. The
 * bundle tests build for it (esbuild's target follows it, as SST's does).
 */
export const lambdaRuntime = "nodejs22.x" as const
