import { defineConfig } from "vitest/config"

/**
 * Two projects: everything, in parallel files; and the suites on the real Slurm cluster, one file at a
 * time, since some of them break the one cluster on purpose (a node set down, the CPUs filled).
 */
const slurm = ["test/slurm*.test.ts"]

export default defineConfig({
  test: {
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
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
