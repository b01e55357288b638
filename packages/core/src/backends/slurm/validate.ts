/**
 * What the generic job schema lets through but Slurm would not take: constraint values that become
 * `#SBATCH` options. Checked at the API when a job goes to a `slurm` backend (a 400 naming the field),
 * and again where the script is written.
 */
import type { JobSpec } from "../../model/job"
import { SlurmGrammarText, SlurmNamePattern, SlurmPartitionsPattern } from "../../model/slurm-grammar"
import type { FieldIssue } from "../../util/errors"

export function slurmJobIssues(spec: Pick<JobSpec, "constraints">): FieldIssue[] {
  return spec.constraints.flatMap((c, i) => {
    if (c.op !== "eq" || c.value === undefined) return []
    if (c.key === "partition" && !SlurmPartitionsPattern.test(c.value))
      return [{ path: `constraints.${i}.value`, message: `${SlurmGrammarText.partitions}, for --partition` }]
    if (c.key === "feature" && !SlurmNamePattern.test(c.value))
      return [{ path: `constraints.${i}.value`, message: `${SlurmGrammarText.name}, for --constraint` }]
    return []
  })
}
