/**
 * Bootstrap a deployed stage: create the operator project and print its first admin key, once.
 *
 *   npx sst shell --stage <stage> -- npx tsx scripts/bootstrap.ts            first key
 *   npx sst shell --stage <stage> -- npx tsx scripts/bootstrap.ts --new-key  another admin key (lost the first)
 *
 * `sst shell` provides the linked resources (table, queue, pepper) and AWS credentials.
 */
import { bootstrapOperator } from "@swarmplane/core/bootstrap"
import { runtime } from "../functions/deps"

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
process.env.SWARMPLANE_LOG_LEVEL ??= "warn"

const rt = runtime()
const result = await bootstrapOperator(rt, { newKey: process.argv.includes("--new-key") })
if (result.projectCreated) console.log(`created the operator project "${rt.operatorProject}"`)
if (result.adminKey) {
  console.log(
    `admin key of "${rt.operatorProject}" (shown once; store it now):\n\n  ${result.adminKey.key}\n`,
  )
} else {
  console.log(
    `"${rt.operatorProject}" exists already; nothing to do. Use --new-key to mint another admin key.`,
  )
}
// The SDK clients' keep-alive sockets would hold the process open.
process.exit(0)
