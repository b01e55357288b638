import { describe, expect, test } from "vitest"
import { BackendConfig, type BackendConfigOf } from "../../model/backend"
import { outputPath, progressPath, sbatchScript, sh, slurmTime } from "./script"
import { slurmConfig } from "./testing"

const config = slurmConfig({
  gpuPartition: "gpu",
  account: "ml",
  extraSbatch: ["--exclusive"],
  setup: ["module load cuda/12.4"],
})

const base = {
  name: "sp-s-01abc",
  entries: [
    { index: 0, shard: 0, attemptUid: "a-1" },
    { index: 1, shard: 1, attemptUid: "a-2" },
    { index: 2, shard: 3, attemptUid: "a-4" },
  ],
  nshards: 4,
  resources: { cpu: 1.5, memoryMiB: 2048, gpu: 0 },
  env: { MODEL: "it's 'quoted'" },
  command: ["python", "infer.py", "--in", "a b"],
  features: [],
}

describe("sbatch scripts", () => {
  test("an array of the pending tasks, each index exporting its shard and attempt", () => {
    const script = sbatchScript(config, base)
    expect(script).toContain("#SBATCH --job-name=sp-s-01abc")
    expect(script).toContain("#SBATCH --array=0-2")
    expect(script).toContain("#SBATCH --cpus-per-task=2")
    expect(script).toContain("#SBATCH --mem=2048M")
    expect(script).toContain("#SBATCH --partition=debug")
    expect(script).toContain("#SBATCH --account=ml")
    expect(script).toContain("#SBATCH --exclusive")
    expect(script).toContain("#SBATCH --time=01:00:00")
    expect(script).toContain("#SBATCH --output=.swarmplane/jobs/%x_%a.out")
    expect(script).toContain("  2) export SHARD_ID=3 ATTEMPT_UID=a-4 ;;")
    expect(script).toContain("export NSHARDS=4")
    expect(script).toContain(`export MODEL='it'\\''s '\\''quoted'\\'''`)
    expect(script).toContain("module load cuda/12.4")
    expect(script).toContain("\npython infer.py --in 'a b'\ncode=$?")
    expect(script).not.toContain("--gres")
  })

  test("each task gets a progress file next to its output, absolute, which the reconcile command reads", () => {
    const file = "$" + "{SLURM_JOB_NAME}_$" + "{SLURM_ARRAY_TASK_ID}.progress.json"
    expect(sbatchScript(config, base)).toContain(
      `export SWARMPLANE_PROGRESS_FILE="$SLURM_SUBMIT_DIR/.swarmplane/jobs/${file}"`,
    )
    const shared = { ...config, outputDir: "/shared/sp" }
    expect(sbatchScript(shared, base)).toContain(`export SWARMPLANE_PROGRESS_FILE="/shared/sp/${file}"`)
    expect(progressPath(config, "sp-s-01abc", 2)).toBe(".swarmplane/jobs/sp-s-01abc_2.progress.json")
  })

  test("GPUs go to the GPU partition with gres; a time limit in minutes; features as a constraint", () => {
    const script = sbatchScript(config, {
      ...base,
      entries: [{ index: 0, shard: 0, attemptUid: "a-1" }],
      resources: { cpu: 1, memoryMiB: 1024, gpu: 2, gpuType: "h100" },
      timeLimitS: 90,
      features: ["ib", "nvlink"],
    })
    expect(script).toContain("#SBATCH --partition=gpu")
    expect(script).toContain("#SBATCH --gres=gpu:h100:2")
    expect(script).toContain("#SBATCH --time=2")
    expect(script).toContain("#SBATCH --constraint=ib&nvlink")
    expect(script).toContain("#SBATCH --array=0")
  })

  test("a leading swarmplane-agent runs as the cluster's agentCommand (a batch job's runner)", () => {
    const command = ["swarmplane-agent", "run-batch", "--input", "in.jsonl"]
    expect(sbatchScript(config, { ...base, command })).toContain(
      "\nswarmplane-agent run-batch --input in.jsonl",
    )
    const built = BackendConfig.parse({
      ...config,
      agentCommand: ["node", "/shared/swarmplane agent.mjs"],
    }) as BackendConfigOf<"slurm">
    expect(sbatchScript(built, { ...base, command })).toContain(
      "\nnode '/shared/swarmplane agent.mjs' run-batch --input in.jsonl",
    )
    expect(sbatchScript(built, base)).toContain("\npython infer.py --in 'a b'\ncode=$?")
  })

  test("images run through the configured launcher", () => {
    const apptainer = BackendConfig.parse({
      ...config,
      container: { launcher: "apptainer", extraArgs: ["--nv"] },
    }) as BackendConfigOf<"slurm">
    expect(sbatchScript(apptainer, { ...base, image: "vllm/vllm-openai:v0.6" })).toContain(
      "\napptainer exec --nv docker://vllm/vllm-openai:v0.6 python infer.py --in 'a b'",
    )
  })

  test("helpers", () => {
    expect(sh("plain-word_1.2")).toBe("plain-word_1.2")
    expect(sh("has space")).toBe("'has space'")
    expect(sh("$HOME")).toBe("'$HOME'")
    expect(slurmTime(1)).toBe("1")
    expect(slurmTime(3600)).toBe("60")
    expect(outputPath(config, "sp-x", 3)).toBe(".swarmplane/jobs/sp-x_3.out")
  })
})
