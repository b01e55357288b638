#!/usr/bin/env bash
# Type-checks sst.config.ts and infra/*.ts without AWS credentials and without the internet.
#
# The SST component types (sst.aws.Dynamo, CronV2, ...) are not in the `sst` npm package; they
# are TypeScript sources embedded in the SST binary, extracted to .sst/platform by
# `sst install`. Before doing anything, that binary downloads pulumi and bun from GitHub, which
# is unreachable here. So, when .sst/platform is missing or stale, this script:
#   1. fetches bun from the npm registry (@oven/bun-<platform>@$BUN_VERSION, checked against the
#      registry's integrity hash by `npm pack`) into a cache under node_modules/.cache;
#   2. writes a stub `pulumi` that only answers `pulumi version` (install never calls more);
#   3. runs `sst install --stage dev` with HOME pointed at a throwaway directory holding both,
#      so nothing is written to the real home; sst then extracts .sst/platform and lets bun
#      install its dependencies from registry.npmjs.org.
# Then it runs `tsc -p infra/tsconfig.json --noEmit`.
#
# Usage: scripts/sst-typecheck.sh [--reinstall]   (--reinstall: extract .sst/platform again)
# Network: only the npm registry (npm for bun; sst and bun for the platform's packages), and
# only when .sst/platform has to be installed. Disk: about 425 MB in .sst/ (git-ignored) and
# 100 MB for bun plus tsc's incremental state in node_modules/.cache/swarmplane-sst.
set -euo pipefail

BUN_VERSION="1.2.1"        # what sst 4.17.1 checks for in ~/.config/sst/bin
PULUMI_VERSION="v3.215.0"  # what sst 4.17.1 checks for in ~/.config/sst/bin

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cache="$root/node_modules/.cache/swarmplane-sst"
platform="$root/.sst/platform"
started=$SECONDS

log() { printf 'sst-typecheck: %s\n' "$*"; }
fail() { printf 'sst-typecheck: error: %s\n' "$*" >&2; exit 1; }

reinstall=false
case "${1:-}" in
  "") ;;
  --reinstall) reinstall=true ;;
  *) fail "unknown argument '$1' (usage: scripts/sst-typecheck.sh [--reinstall])" ;;
esac

sst="$root/node_modules/.bin/sst"
tsc="$root/node_modules/.bin/tsc"
[[ -x "$sst" && -x "$tsc" ]] || fail "sst or typescript is not installed; run 'npm ci' first"
sst_version="$(node -p 'require("./node_modules/sst/package.json").version')"

# The platform is usable when it was extracted by this sst version and bun finished installing
# the packages that config.d.ts imports.
platform_ready() {
  [[ -f "$platform/config.d.ts" ]] &&
    [[ "$(cat "$platform/version" 2>/dev/null)" == "$sst_version" ]] &&
    [[ -f "$platform/node_modules/@pulumi/aws/package.json" ]] &&
    [[ -f "$platform/node_modules/@pulumi/pulumi/package.json" ]]
}

bun_package() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo "@oven/bun-linux-x64" ;;
    Linux-aarch64 | Linux-arm64) echo "@oven/bun-linux-aarch64" ;;
    Darwin-x86_64) echo "@oven/bun-darwin-x64" ;;
    Darwin-arm64) echo "@oven/bun-darwin-aarch64" ;;
    *) fail "no bun package known for $(uname -s)-$(uname -m)" ;;
  esac
}

# 1. bun from npm, cached across runs. npm's own cache goes to the scratch cache as well, so
#    the real ~/.npm is not touched.
ensure_bun() {
  local bun="$cache/bin/bun"
  if [[ -x "$bun" && "$("$bun" --version 2>/dev/null)" == "$BUN_VERSION" ]]; then
    log "bun $BUN_VERSION: cached in ${cache#"$root"/}/bin"
    return
  fi
  local pkg tmp
  pkg="$(bun_package)@$BUN_VERSION"
  tmp="$(mktemp -d "$cache/pack.XXXXXX")"
  log "bun $BUN_VERSION: fetching $pkg from the npm registry (about 38 MB)"
  npm_config_cache="$cache/npm-cache" npm pack "$pkg" --pack-destination "$tmp" --loglevel=error >/dev/null ||
    fail "could not fetch $pkg from the npm registry (see npm's message above)"
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/bin/bun
  mkdir -p "$cache/bin"
  mv "$tmp/package/bin/bun" "$bun"
  chmod +x "$bun"
  rm -rf "$tmp" "$cache/npm-cache"
  [[ "$("$bun" --version)" == "$BUN_VERSION" ]] ||
    fail "the bun from $pkg does not run on this machine (a CPU without AVX2 needs the -baseline build)"
}

# 2. The pulumi stub. sst only asks it for its version during `install`; anything else means a
#    command that really needs Pulumi (deploy, diff, dev), which cannot work offline anyway.
ensure_pulumi_stub() {
  mkdir -p "$cache/bin"
  cat >"$cache/bin/pulumi" <<EOF
#!/bin/sh
# Stub written by scripts/sst-typecheck.sh; only \`pulumi version\` is supported.
if [ "\$1" = "version" ]; then echo "$PULUMI_VERSION"; exit 0; fi
echo "pulumi stub: '\$*' needs the real Pulumi CLI, which is not available offline" >&2
exit 1
EOF
  chmod +x "$cache/bin/pulumi"
}

# 3. `sst install` in a throwaway HOME. Bun's package cache (about 400 MB) lives in it too and
#    is deleted on exit.
install_platform() {
  local home
  home="$(mktemp -d "${TMPDIR:-/tmp}/swarmplane-sst-home.XXXXXX")"
  # shellcheck disable=SC2064  # expand $home now: it is local
  trap "rm -rf '$home'" EXIT
  mkdir -p "$home/.config/sst/bin" "$home/tmp"
  ln -s "$cache/bin/bun" "$home/.config/sst/bin/bun"
  ln -s "$cache/bin/pulumi" "$home/.config/sst/bin/pulumi"
  log "sst $sst_version: extracting .sst/platform and installing its packages (HOME=$home)"
  # TMPDIR: sst writes a log file per run there (/tmp/sst-<time>.log otherwise).
  if ! env -u XDG_CONFIG_HOME -u XDG_CACHE_HOME -u XDG_DATA_HOME -u XDG_STATE_HOME \
    HOME="$home" TMPDIR="$home/tmp" BUN_INSTALL_CACHE_DIR="$home/.bun/install/cache" \
    SST_TELEMETRY_DISABLED=1 AWS_EC2_METADATA_DISABLED=true \
    "$sst" install --stage dev; then
    cat "$home"/tmp/sst-*.log >"$cache/sst-install.log" 2>/dev/null || true
    fail "sst install failed; its log is in ${cache#"$root"/}/sst-install.log"
  fi
  platform_ready || fail "sst install finished but .sst/platform is incomplete"
  rm -rf "$home"
  trap - EXIT
}

mkdir -p "$cache"
exec 9>"$cache/lock"
if command -v flock >/dev/null; then flock 9; fi  # two runs must not extract at the same time

if [[ "$reinstall" == false ]] && platform_ready; then
  log "platform: .sst/platform (sst $sst_version) is installed"
else
  if [[ "$reinstall" == true ]]; then
    log "platform: --reinstall given; removing .sst/platform"
    rm -rf "$platform"
  elif [[ -d "$platform" ]]; then
    log "platform: .sst/platform is incomplete or from another sst version; installing again"
  else
    log "platform: .sst/platform is missing; installing it"
  fi
  ensure_bun
  ensure_pulumi_stub
  install_platform
  log "platform: installed in $((SECONDS - started)) s"
fi

log "tsc: checking sst.config.ts and infra/*.ts"
tsc_started=$SECONDS
if "$tsc" -p infra/tsconfig.json --noEmit; then
  log "tsc: OK in $((SECONDS - tsc_started)) s (total $((SECONDS - started)) s)"
else
  fail "tsc found errors in the infrastructure code (above)"
fi
