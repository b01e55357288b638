/**
 * Entry of the standalone agent (`npm run build:agent` → one .mjs file): the same program as the bin,
 * without tsx, for machines that have Node.js but not this checkout (a cluster's compute nodes).
 */
import { main } from "./main"

process.exit(await main(process.argv.slice(2)))
