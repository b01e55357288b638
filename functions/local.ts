/**
 * `npm start`: the local control plane (the same as `swarmplane dev`). The environment it reads is
 * documented on `runLocal` and in docs/configuration.md.
 */
import { runLocal } from "@swarmplane/core/local/main"

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
await runLocal(process.env)
