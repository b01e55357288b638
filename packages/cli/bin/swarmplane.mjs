#!/usr/bin/env node
// The swarmplane CLI is an empty shell in this release: its commands come with the CLI work.
// Until then, every operation is available through the HTTPS API (see README.md and /docs).
process.stderr.write(
  "swarmplane: the command-line interface is not available in this release yet.\n" +
    "Use the HTTPS API instead: see README.md, or open /docs on your control plane (http://127.0.0.1:8787/docs locally).\n",
)
process.exit(2)
