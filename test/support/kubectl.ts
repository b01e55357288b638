/**
 * Test support: the machine's kubectl, for the checks that a real Kubernetes client reads the fake
 * cluster. Without it those checks are skipped with a line saying how to install it, except under
 * `.ci/run` (SWARMPLANE_REQUIRE_KUBECTL=1), where a missing kubectl fails the run.
 */
import { spawnSync } from "node:child_process"

export function hasKubectl(): boolean {
  if (spawnSync("kubectl", ["version", "--client"], { stdio: "ignore" }).status === 0) return true
  if (process.env.SWARMPLANE_REQUIRE_KUBECTL === "1")
    throw new Error(
      "no kubectl for the fake cluster's kubectl checks: install it with sudo apt-get install kubernetes-client",
    )
  console.warn(
    "skipping the kubectl checks of the fake cluster: no kubectl; install it with sudo apt-get install kubernetes-client",
  )
  return false
}
