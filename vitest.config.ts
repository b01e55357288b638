import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

/**
 * Two projects: everything, in parallel files; and the suites on the real Slurm cluster, one file at a
 * time, since some of them break the one cluster on purpose (a node set down, the CPUs filled).
 *
 * One test file per core (vitest's default leaves one core free, which on a 2-core machine runs the
 * files one by one): most of the end-to-end files wait on processes, clusters and timers, not on the
 * CPU, so two at once on 2 cores finish the suite in far less time.
 */
const slurm = ["test/slurm*.test.ts"]

export default defineConfig({
  test: {
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: Math.max(2, availableParallelism()),
    projects: [
      {
        extends: true,
        test: {
          name: "main",
          include: ["packages/*/src/**/*.test.ts", "functions/**/*.test.ts", "test/**/*.test.ts"],
          exclude: ["**/node_modules/**", ...slurm],
        },
      },
      { extends: true, test: { name: "slurm", include: slurm, fileParallelism: false } },
    ],
  },
})
