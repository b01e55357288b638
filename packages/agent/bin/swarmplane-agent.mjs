#!/usr/bin/env node
// The swarmplane worker agent is an empty shell in this release: it comes with the worker-daemon backend.
process.stderr.write("swarmplane-agent: the worker agent is not available in this release yet.\n")
process.exit(2)
