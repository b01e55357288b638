#!/usr/bin/env node
// Launcher of the swarmplane CLI: runs its TypeScript source directly (tsx's loader, registered for
// this process only), so the CLI works from a checkout without a build step.
import { register } from "tsx/esm/api"

register()
const { main } = await import("../src/main.ts")
// Exit explicitly: idle keep-alive sockets must not keep a finished command alive.
process.exit(await main(process.argv.slice(2)))
