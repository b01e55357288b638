/**
 * The house's import rules (docs/architecture.md): each layer of packages/core imports only the layers
 * below it, nothing imports in a circle, and the CLI and the agent reach core only through its wire
 * contract. `npm run lint` runs this; a new back-edge fails it. There are no exceptions.
 */
const core = "^packages/core/src/"
const testCode = "(\\.test\\.ts$|/testing(\\.ts$|/))"

/** Each layer of core, lowest first, with the layers it may import (besides itself). */
const layers = {
  util: [],
  model: ["util"],
  contract: ["model", "util"],
  rules: ["model", "util"],
  scheduling: ["model", "util"],
  store: ["model", "util"],
  queue: ["model", "util"],
  secrets: ["model", "util"],
  providers: ["model", "util"],
  transitions: ["rules", "store", "model", "util"],
  backends: ["transitions", "rules", "scheduling", "store", "queue", "secrets", "providers", "model", "util"],
  control: [
    "backends",
    "transitions",
    "rules",
    "scheduling",
    "store",
    "queue",
    "secrets",
    "providers",
    "model",
    "util",
  ],
  "bootstrap\\.ts": ["store", "model", "util"],
  api: [
    "control",
    "backends",
    "bootstrap\\.ts",
    "transitions",
    "rules",
    "scheduling",
    "store",
    "queue",
    "secrets",
    "providers",
    "contract",
    "model",
    "util",
  ],
  // The composition of the core (what an entry point builds once per process from the ports'
  // adapters); no layer imports it, only entry points and tests.
  "runtime\\.ts": ["transitions", "store", "queue", "secrets", "providers", "model", "util"],
}

const layerRules = Object.entries(layers).map(([layer, allowed]) => ({
  name: `layer-${layer.replace("\\.ts", "")}`,
  comment: `${layer.replace("\\", "")} may import only: ${allowed.map((a) => a.replace("\\", "")).join(", ") || "itself"}`,
  severity: "error",
  // Tests and their helpers (beside the code) compose the system under test; the rules bind the code.
  from: { path: `${core}${layer}`, pathNot: testCode },
  to: { path: core, pathNot: [`${core}${layer}`, ...allowed.map((a) => `${core}${a}`)] },
}))

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "Nothing imports in a circle.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: "core-not-from-edge",
      comment: "packages/core never imports the edge (functions/), the CLI, the agent, tests or benchmarks.",
      severity: "error",
      from: { path: "^packages/core/" },
      to: { path: "^(functions|packages/cli|packages/agent|test|bench|scripts)/" },
    },
    {
      name: "clients-through-contract",
      comment:
        "The CLI and the agent reach core only through its wire contract (packages/core/src/contract).",
      severity: "error",
      from: { path: "^packages/(cli|agent)/" },
      to: { path: core, pathNot: `${core}contract` },
    },
    {
      name: "cli-agent-apart",
      comment: "The CLI and the agent do not import each other.",
      severity: "error",
      from: { path: "^packages/cli/" },
      to: { path: "^packages/agent/" },
    },
    {
      name: "agent-cli-apart",
      severity: "error",
      from: { path: "^packages/agent/" },
      to: { path: "^packages/cli/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: ["node_modules", "\\.sst", "test-output", "bundle\\.generated\\.ts$"] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    combinedDependencies: true,
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".mjs", ".js", ".json"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
}
