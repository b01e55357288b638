#!/usr/bin/env bash
# A one-node Slurm 22.05 "cluster" on this machine (Debian 12), reached like a real cluster: over SSH
# to a "login node" on 127.0.0.1, where sbatch/squeue/sacct/scontrol/scancel/sinfo run. It is what the
# slurm backend's tests and the local control plane talk to. No systemd needed (daemons are started
# directly), no slurmrestd, no slurmdbd (history comes from `sacct -c`, the jobcomp/filetxt log).
#
# Usage: sudo bash scripts/slurm-dev-cluster.sh <command>
#   up               install (apt) and configure if needed, start munged, slurmctld, slurmd and sshd,
#                    wait until the node is up and `squeue` works over SSH, write connection.json.
#                    Idempotent: files are rewritten only when their content changes, a changed Slurm
#                    config restarts slurmctld+slurmd, running daemons are left alone.
#   down [--purge]   cancel all jobs, wait for their slurmstepd to exit, stop the daemons `up` started.
#                    --purge also deletes Slurm state (job ids restart at 1), logs, config, keys and
#                    $SWARMPLANE_SLURM_DIR. Packages and the login user stay.
#   status           what runs (exit 0 when everything does, 3 otherwise); no root needed.
#   env              print connection.json; no root needed.
#
# The cluster: node `$(hostname -s)`, partitions `debug` (default) and `gpu`, both on that node, which
# advertises $SWARMPLANE_SLURM_CPUS CPUs (more than the hardware has, via SlurmdParameters=config_overrides,
# so several 1-CPU jobs run at once) and $SWARMPLANE_SLURM_GPUS fake GPUs (character devices made with
# mknod, like /dev/null). Memory (--mem, DefMemPerCPU) is enforced: with a cgroup v1 memory hierarchy (as
# on this machine) by task/cgroup, so a job over its limit ends OUT_OF_MEMORY like on a real cluster;
# without one by polling (JobAcctGatherParams=OverMemoryKill), where such a job ends FAILED with
# ExitCode=0:9 instead. Finished jobs stay in squeue/scontrol for MinJobAge seconds.
#
# Knobs (environment):
#   SWARMPLANE_SLURM_DIR=/var/tmp/swarmplane-slurm   connection.json, the client key, sshd files, pid files
#   SWARMPLANE_SLURM_USER=slurmuser                  the SSH login user; jobs run as this user
#   SWARMPLANE_SLURM_SSH_PORT=2222                   sshd listens on 127.0.0.1 only
#   SWARMPLANE_SLURM_CPUS=8                          configured CPUs (4-8 is sensible on a 2-core machine)
#   SWARMPLANE_SLURM_GPUS=2                          fake GPUs on the `gpu` partition (0 = none)
#   SWARMPLANE_SLURM_MIN_JOB_AGE=600                 seconds a finished job stays visible
#   SWARMPLANE_SLURM_CGROUP=auto                     auto: task/cgroup when /sys/fs/cgroup/memory is cgroup v1; off
#   SWARMPLANE_SLURM_WAIT_S=60                       bound on each wait (daemon start, node up, SSH)
set -euo pipefail

readonly DIR=${SWARMPLANE_SLURM_DIR:-/var/tmp/swarmplane-slurm}
readonly LOGIN_USER=${SWARMPLANE_SLURM_USER:-slurmuser}
readonly SSH_PORT=${SWARMPLANE_SLURM_SSH_PORT:-2222}
readonly CPUS=${SWARMPLANE_SLURM_CPUS:-8}
GPUS=${SWARMPLANE_SLURM_GPUS:-2}
readonly MIN_JOB_AGE=${SWARMPLANE_SLURM_MIN_JOB_AGE:-600}
readonly WAIT_S=${SWARMPLANE_SLURM_WAIT_S:-60}
readonly CGROUP=${SWARMPLANE_SLURM_CGROUP:-auto}

readonly RUN_DIR=$DIR/run # pid files of the daemons this script started (`down` stops only those)
readonly SSH_DIR=$DIR/ssh # sshd config, host key, known_hosts, sshd log
readonly CLIENT_KEY=$DIR/id_ed25519
readonly CONNECTION=$DIR/connection.json
readonly ETC=/etc/slurm
readonly STATE=/var/lib/slurm
readonly LOGS=/var/log/slurm
readonly JOBCOMP_LOG=$LOGS/jobcomp.log
readonly FAKE_GPU_DIR=$STATE/fakegpu
readonly PACKAGES=(munge slurmctld slurmd slurm-client openssh-server)
readonly STARTED_US=${EPOCHREALTIME/./}

# ---------------------------------------------------------------------------------------- helpers

elapsed() { # seconds since the script started, one decimal
  local us=$((${EPOCHREALTIME/./} - STARTED_US))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}
log() { printf '[slurm-dev-cluster %5ss] %s\n' "$(elapsed)" "$*"; }
die() {
  printf '[slurm-dev-cluster %5ss] error: %s\n' "$(elapsed)" "$*" >&2
  exit 1
}
need_root() { [[ $(id -u) == 0 ]] || die "'$1' must run as root (sudo bash $0 $1)"; }

# wait_until <seconds> <command...>: poll every 0.1 s until the command succeeds; 1 if the bound passes.
wait_until() {
  local deadline=$((${EPOCHREALTIME/./} + $1 * 1000000))
  shift
  until "$@"; do
    ((${EPOCHREALTIME/./} < deadline)) || return 1
    sleep 0.1
  done
}

# A pid is running when /proc says so and it is not a zombie: PID 1 here reaps orphans late, so a
# stopped daemon lingers as state Z for a few seconds and `kill -0` alone would call it alive.
pid_running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}
pid_gone() { ! pid_running "$1"; }
# daemon_pid <name>: the pid in $RUN_DIR/<name>.pid if it is a live process whose comm is <name>.
daemon_pid() {
  local pid
  pid=$(cat "$RUN_DIR/$1.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && pid_running "$pid" && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$1" ]] || return 1
  echo "$pid"
}
# stop_daemon <name>: SIGTERM the daemon this script started, SIGKILL after 10 s.
stop_daemon() {
  local name=$1 pid
  if ! pid=$(daemon_pid "$name"); then
    rm -f "$RUN_DIR/$name.pid"
    return 0
  fi
  kill "$pid" 2>/dev/null || true
  if ! wait_until 10 pid_gone "$pid"; then
    log "$name ($pid) ignored SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
    wait_until 5 pid_gone "$pid" || true
  fi
  rm -f "$RUN_DIR/$name.pid"
  log "stopped $name (pid $pid)"
}

# put <file> <mode> <owner:group>: write stdin to the file if the content differs. 0 = changed.
put() {
  local file=$1 mode=$2 owner=$3 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [[ -f $file ]] && cmp -s "$tmp" "$file"; then
    rm -f "$tmp"
    chmod "$mode" "$file"
    chown "$owner" "$file"
    return 1
  fi
  install -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$tmp" "$file"
  rm -f "$tmp"
}

json_string() { # a JSON string literal
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

node_name() { hostname -s; }
node_state() { sinfo -h -n "$(node_name)" -o '%t' 2>/dev/null | head -1; }
ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
live_stepds() {
  local pid
  for pid in $(pgrep -x slurmstepd || true); do pid_running "$pid" && printf '%s ' "$pid"; done
  return 0
}
no_stepds() { [[ -z $(live_stepds) ]]; }
munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ssh_works() { ssh_login "squeue -h -o %i" >/dev/null 2>&1; }
ssh_login() { # ssh_login <command>: run a command as the login user over the cluster's own sshd
  ssh -i "$CLIENT_KEY" -p "$SSH_PORT" -o BatchMode=yes -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes \
    -o UserKnownHostsFile="$SSH_DIR/known_hosts" -o ConnectTimeout=5 -o LogLevel=ERROR \
    "$LOGIN_USER@127.0.0.1" "$1"
}

# -------------------------------------------------------------------------------------- up: steps

install_packages() {
  local missing=() pkg policy_added=0
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    log "packages already installed"
    return
  fi
  log "installing ${missing[*]} (apt, log in $DIR/apt.log)"
  # Keep maintainer scripts from starting munge, slurm or an sshd on port 22 (sysv or systemd).
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  local ok=1
  {
    DEBIAN_FRONTEND=noninteractive apt-get update -q -o DPkg::Lock::Timeout=180 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=180 -o Dpkg::Use-Pty=0 "${missing[@]}"
  } >"$DIR/apt.log" 2>&1 || ok=0
  ((policy_added)) && rm -f /usr/sbin/policy-rc.d
  if ((!ok)); then
    tail -n 20 "$DIR/apt.log" >&2
    die "apt-get failed; see $DIR/apt.log"
  fi
  log "packages installed"
}

setup_user() {
  if ! id -u "$LOGIN_USER" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$LOGIN_USER"
    log "created user $LOGIN_USER"
  fi
  # useradd locks the password ('!'), and with UsePAM no sshd refuses even key logins to a locked
  # account; '*' means "no password" without "locked".
  [[ $(getent shadow "$LOGIN_USER" | cut -d: -f2) == '*' ]] || usermod -p '*' "$LOGIN_USER"
  # `sacct -c` opens the jobcomp log read-write, so the user needs group write on it.
  id -nG "$LOGIN_USER" | tr ' ' '\n' | grep -qx slurm || usermod -aG slurm "$LOGIN_USER"
}

setup_dirs() {
  install -d -m 755 "$DIR" "$RUN_DIR" "$SSH_DIR" "$ETC"
  install -d -o munge -g munge -m 755 /run/munge # systemd's RuntimeDirectory would make it
  install -d -m 755 /run/sshd                    # sshd's privilege separation directory
  install -d -o slurm -g slurm -m 755 "$STATE" "$STATE/slurmctld" "$STATE/slurmd" "$LOGS"
  [[ -e $JOBCOMP_LOG ]] || install -m 664 -o slurm -g slurm /dev/null "$JOBCOMP_LOG"
  chown slurm:slurm "$JOBCOMP_LOG"
  chmod 664 "$JOBCOMP_LOG"
  if [[ ! -s /etc/munge/munge.key ]]; then # munge's postinst makes one; this covers a removed key
    install -d -o munge -g munge -m 700 /etc/munge
    (umask 277 && head -c 1024 /dev/urandom >/etc/munge/munge.key)
    chown munge:munge /etc/munge/munge.key
  fi
}

# Fake GPUs: gres/gpu drops GPUs without a File=, and a regular file logs errors, so make character
# devices with /dev/null's numbers. Without CAP_MKNOD the cluster comes up without GPUs.
setup_fake_gpus() {
  ((GPUS > 0)) || return 0
  install -d -m 755 "$FAKE_GPU_DIR"
  local i dev
  for ((i = 0; i < GPUS; i++)); do
    dev=$FAKE_GPU_DIR/gpu$i
    [[ -c $dev ]] && continue
    rm -f "$dev"
    if ! mknod -m 666 "$dev" c 1 3 2>/dev/null; then
      log "warning: mknod is not permitted here; the gpu partition has no GPUs"
      GPUS=0
      return 0
    fi
  done
}

# Memory enforcement by task/cgroup needs a cgroup v1 memory hierarchy: 22.05's cgroup/v2 wants systemd
# (over D-Bus) to create its scope, which this script does not assume.
cgroup_v1_memory() {
  [[ $CGROUP != off && $(stat -f -c %T /sys/fs/cgroup/memory 2>/dev/null) == cgroupfs ]]
}

# Writes slurm.conf, gres.conf and cgroup.conf; sets SLURM_CONFIG_CHANGED=1 when any changed.
SLURM_CONFIG_CHANGED=0
write_slurm_config() {
  local node hw mem def_mem gres_types="" gres_node="" memory_lines changed=0
  node=$(node_name)
  hw=$(slurmd -C | head -1) # NodeName=x CPUs=2 Boards=1 ... RealMemory=24105
  [[ $hw =~ RealMemory=([0-9]+) ]] || die "cannot read RealMemory from 'slurmd -C': $hw"
  mem=${BASH_REMATCH[1]}
  def_mem=$((mem / CPUS))
  ((def_mem > 1024)) && def_mem=1024 # without DefMemPerCPU a job takes the whole node's memory
  if ((GPUS > 0)); then
    gres_types="GresTypes=gpu"
    gres_node="Gres=gpu:fake:$GPUS"
  fi
  if cgroup_v1_memory; then
    memory_lines="TaskPlugin=task/cgroup"
  else # slurmstepd samples usage every second and kills a step over its limit
    memory_lines="TaskPlugin=task/none
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill"
  fi
  put "$ETC/slurm.conf" 644 root:root <<EOF && changed=1
# Generated by scripts/slurm-dev-cluster.sh 'up'; edits are overwritten.
ClusterName=swarmplane-dev
SlurmctldHost=$node(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
JobAcctGatherType=jobacct_gather/linux
$memory_lines
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$def_mem
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP_LOG
MinJobAge=$MIN_JOB_AGE
KillWait=5
SlurmdTimeout=30
SlurmdParameters=config_overrides
$gres_types
NodeName=$node NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem $gres_node State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$node Default=NO MaxTime=INFINITE State=UP
EOF
  if cgroup_v1_memory; then
    put "$ETC/cgroup.conf" 644 root:root <<EOF && changed=1
CgroupPlugin=cgroup/v1
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
EOF
  elif [[ -e $ETC/cgroup.conf ]]; then
    # Without task/cgroup none is needed (and 22.05 has no CgroupPlugin=disabled to write into one).
    rm -f "$ETC/cgroup.conf"
    changed=1
  fi
  if ((GPUS > 0)); then
    put "$ETC/gres.conf" 644 root:root <<EOF && changed=1
NodeName=$node Name=gpu Type=fake File=$FAKE_GPU_DIR/gpu[0-$((GPUS - 1))]
EOF
  elif [[ -e $ETC/gres.conf ]]; then
    rm -f "$ETC/gres.conf"
    changed=1
  fi
  SLURM_CONFIG_CHANGED=$changed
}

start_munged() {
  if munge_works; then
    log "munged already running"
    return
  fi
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged
  wait_until "$WAIT_S" test -s /run/munge/munged.pid || die "munged did not start; see /var/log/munge/munged.log"
  cp /run/munge/munged.pid "$RUN_DIR/munged.pid"
  wait_until "$WAIT_S" munge_works || die "munge credentials do not work"
  log "munged started (pid $(cat "$RUN_DIR/munged.pid"))"
}

# start_slurm_daemon <slurmctld|slurmd>: start it unless this script's copy already runs.
start_slurm_daemon() {
  local name=$1 pid
  if pid=$(daemon_pid "$name"); then
    log "$name already running (pid $pid)"
    return
  fi
  if [[ -s /run/$name.pid ]] && pid=$(cat "/run/$name.pid") && pid_running "$pid" &&
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]]; then
    die "$name (pid $pid) runs but was not started by this script; stop it first"
  fi
  rm -f "/run/$name.pid"
  "/usr/sbin/$name"
  wait_until "$WAIT_S" test -s "/run/$name.pid" || die "$name did not start; see $LOGS/$name.log"
  cp "/run/$name.pid" "$RUN_DIR/$name.pid"
  log "$name started (pid $(cat "$RUN_DIR/$name.pid"))"
}

node_usable() {
  case $(node_state) in
  idle | mix | alloc | comp) return 0 ;;
  *) return 1 ;;
  esac
}

wait_for_node() {
  wait_until "$WAIT_S" ctld_up || die "slurmctld does not answer 'scontrol ping'; see $LOGS/slurmctld.log"
  local node state
  node=$(node_name)
  # A drain/down left by an earlier run (a killed job, an old gres mismatch) is persisted in the
  # controller's state; resume it once. INVAL cannot be resumed: the config itself is wrong.
  wait_until 5 node_usable || case $(node_state) in
  drain* | drng* | down*)
    log "node $node is $(node_state); resuming it"
    scontrol update nodename="$node" state=resume || true
    ;;
  esac
  wait_until "$WAIT_S" node_usable || {
    scontrol show node "$node" >&2 || true
    die "node $node is not usable (state '$(node_state)'); see $LOGS/slurmd.log"
  }
  state=$(node_state)
  log "node $node is $state; partitions: $(sinfo -h -o '%P' | tr '\n' ' ')"
}

setup_sshd() {
  local changed=0 home pid
  [[ -s $SSH_DIR/ssh_host_ed25519_key ]] ||
    ssh-keygen -q -t ed25519 -N '' -C swarmplane-slurm-host -f "$SSH_DIR/ssh_host_ed25519_key"
  [[ -s $CLIENT_KEY ]] || ssh-keygen -q -t ed25519 -N '' -C swarmplane-slurm-client -f "$CLIENT_KEY"
  home=$(getent passwd "$LOGIN_USER" | cut -d: -f6)
  install -d -m 700 -o "$LOGIN_USER" -g "$LOGIN_USER" "$home/.ssh"
  put "$home/.ssh/authorized_keys" 600 "$LOGIN_USER:$LOGIN_USER" <"$CLIENT_KEY.pub" || true
  put "$SSH_DIR/known_hosts" 644 root:root <<<"[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$SSH_DIR/ssh_host_ed25519_key.pub")" || true
  put "$SSH_DIR/sshd_config" 644 root:root <<EOF && changed=1
# Written by scripts/slurm-dev-cluster.sh: the dev cluster's "login node".
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $SSH_DIR/ssh_host_ed25519_key
PidFile $RUN_DIR/sshd.pid
AllowUsers $LOGIN_USER
PermitRootLogin no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
  if ((changed)); then stop_daemon sshd; fi
  if pid=$(daemon_pid sshd); then
    log "sshd already running on 127.0.0.1:$SSH_PORT (pid $pid)"
  else
    /usr/sbin/sshd -t -f "$SSH_DIR/sshd_config" || die "sshd rejects $SSH_DIR/sshd_config"
    /usr/sbin/sshd -f "$SSH_DIR/sshd_config" -E "$SSH_DIR/sshd.log"
    wait_until "$WAIT_S" test -s "$RUN_DIR/sshd.pid" || die "sshd did not start; see $SSH_DIR/sshd.log"
    log "sshd started on 127.0.0.1:$SSH_PORT (pid $(cat "$RUN_DIR/sshd.pid"))"
  fi
  wait_until "$WAIT_S" ssh_works ||
    die "'squeue' over SSH as $LOGIN_USER fails: $(ssh_login 'squeue -h -o %i' 2>&1 | tail -1); see $SSH_DIR/sshd.log"
  log "ssh $LOGIN_USER@127.0.0.1:$SSH_PORT runs squeue"
}

write_connection() {
  local host_key fingerprint version
  host_key=$(cut -d' ' -f1,2 "$SSH_DIR/ssh_host_ed25519_key.pub")
  fingerprint=$(ssh-keygen -l -E sha256 -f "$SSH_DIR/ssh_host_ed25519_key.pub" | cut -d' ' -f2)
  version=$(slurmctld -V | cut -d' ' -f2) # `sinfo --version` needs a readable config; slurmctld -V does not
  put "$CONNECTION" 644 root:root <<EOF || true
{
  "host": "127.0.0.1",
  "port": $SSH_PORT,
  "user": $(json_string "$LOGIN_USER"),
  "privateKeyPath": $(json_string "$CLIENT_KEY"),
  "hostKey": $(json_string "$host_key"),
  "hostKeyFingerprint": $(json_string "$fingerprint"),
  "partition": "debug",
  "gpuPartition": "gpu",
  "version": $(json_string "$version")
}
EOF
  # Run through sudo, the caller is who connects: the client key (0600) belongs to them, else to root.
  local owner=0:0
  [[ -n ${SUDO_UID:-} ]] && owner=$SUDO_UID:${SUDO_GID:-$SUDO_UID}
  chown "$owner" "$CLIENT_KEY" "$CLIENT_KEY.pub"
  chmod 600 "$CLIENT_KEY"
  [[ $version == 22.05.* ]] || log "warning: Slurm $version; this script and the parsers were checked with 22.05"
}

cmd_up() {
  need_root up
  install -d -m 755 "$DIR"
  log "up: Slurm dev cluster in $DIR"
  install_packages
  setup_user
  setup_dirs
  setup_fake_gpus
  write_slurm_config
  if ((SLURM_CONFIG_CHANGED)); then
    log "slurm config written; (re)starting slurmctld and slurmd"
    # Both, so every setting applies; slurmctld alone leaves the node 'unknown' until slurmd re-registers.
    stop_daemon slurmd
    stop_daemon slurmctld
  else
    log "slurm config unchanged"
  fi
  start_munged
  start_slurm_daemon slurmctld
  wait_until "$WAIT_S" ctld_up || die "slurmctld does not answer 'scontrol ping'; see $LOGS/slurmctld.log"
  start_slurm_daemon slurmd
  wait_for_node
  # slurmctld (re)creates the jobcomp log 0644 when it opens it: make it group-writable again for
  # `sacct -c` (it opens the file read-write), or the completion history is unreadable to the user.
  chmod 664 "$JOBCOMP_LOG"
  setup_sshd
  write_connection
  log "ready in $(elapsed)s: Slurm $(slurmctld -V | cut -d' ' -f2), $CPUS CPUs, $GPUS GPUs," \
    "memory enforced by $(grep -q '^TaskPlugin=task/cgroup' "$ETC/slurm.conf" && echo cgroup || echo polling)"
  log "connection details: $CONNECTION"
}

# ------------------------------------------------------------------------------------------- down

no_active_jobs() { [[ -z $(squeue -h -t R,CG,CF,S,ST -o %A 2>/dev/null) && -z $(live_stepds) ]]; }

cmd_down() {
  need_root down
  local purge=0 ids
  case ${1:-} in
  "") ;;
  --purge) purge=1 ;;
  *) die "unknown option '$1' (usage: down [--purge])" ;;
  esac
  log "down${1:+ $1}"
  # Jobs first: their slurmstepd and user processes would outlive slurmd.
  if daemon_pid slurmctld >/dev/null && ctld_up; then
    ids=$(squeue -h -o %A 2>/dev/null | sort -un | tr '\n' ' ')
    if [[ -n ${ids// /} ]]; then
      log "cancelling jobs: $ids"
      # shellcheck disable=SC2086 # one argument per id
      scancel $ids 2>/dev/null || true
    fi
    # KillWait=5: a job ignoring SIGTERM gets SIGKILL 5 s later.
    wait_until 30 no_active_jobs || log "warning: jobs still active: $(squeue -h -t R,CG,S,ST -o %A | tr '\n' ' ')"
  fi
  stop_daemon sshd
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  wait_until 10 no_stepds || log "warning: slurmstepd still running: $(live_stepds)"
  if ((purge)); then
    local home
    home=$(getent passwd "$LOGIN_USER" | cut -d: -f6 || true)
    rm -rf "${STATE:?}/slurmctld/"* "${STATE:?}/slurmd/"* "$FAKE_GPU_DIR" "$LOGS"/*.log \
      "$ETC/slurm.conf" "$ETC/gres.conf" "$ETC/cgroup.conf" "$DIR"
    [[ -n $home ]] && rm -f "$home/.ssh/authorized_keys"
    log "purged Slurm state, logs, config, keys and $DIR"
  fi
  log "down in $(elapsed)s"
}

# ----------------------------------------------------------------------------------- status, env

cmd_status() {
  local name pid all=1
  for name in munged slurmctld slurmd sshd; do
    if pid=$(daemon_pid "$name"); then
      printf '%-10s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-10s stopped\n' "$name"
      all=0
    fi
  done
  if command -v scontrol >/dev/null && ctld_up; then
    echo
    sinfo -o '%10P %.5a %.6D %.8t %.14C %G' 2>/dev/null || true
    echo
    printf 'jobs: %s\n' "$(squeue -h -t all -o %T 2>/dev/null | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1} END {if (NR == 0) printf "none"}')"
  fi
  echo
  if [[ -s $CONNECTION ]]; then echo "connection: $CONNECTION"; else echo "connection: none (run 'up')"; fi
  ((all)) || return 3
}

cmd_env() {
  [[ -s $CONNECTION ]] || die "no $CONNECTION; run 'sudo bash $0 up' first"
  cat "$CONNECTION"
}

usage() {
  cat <<EOF
usage: sudo bash $0 up | down [--purge] | status | env
  up               install and start a one-node Slurm cluster with an SSH login node on 127.0.0.1:$SSH_PORT
  down [--purge]   cancel jobs and stop it; --purge also deletes its state, config and keys
  status           what runs (exit 3 when something does not)
  env              print $CONNECTION
EOF
}

main() {
  local cmd=${1:-}
  shift || true
  case $cmd in
  up) cmd_up ;;
  down) cmd_down "$@" ;;
  status) cmd_status ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *)
    usage >&2
    exit 2
    ;;
  esac
}

main "$@"
