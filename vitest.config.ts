import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["packages/*/src/**/*.test.ts", "functions/**/*.test.ts", "test/**/*.test.ts"],
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
})
