#!/usr/bin/env bash
# Starts and stops a private single-node SLURM cluster for tests (Debian bookworm, Slurm 22.05).
#
#   tools/slurm/cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf` on stdout
#   tools/slurm/cluster.sh stop DIR    # never fails if nothing is running
#
# Why: `qsm batch` submits real sbatch jobs; its tests need a real slurmctld + slurmd, but the
# machines have no systemd and tests must not touch /etc/slurm. Everything (config, state, spool,
# pid files, logs, jobcomp.txt) lives in DIR; clients find it through SLURM_CONF. The recipe and
# the config are the ones measured in docs/slurm.md: proctrack/linuxproc +
# jobacct_gather OverMemoryKill (no cgroups, which would move jobs out of the sandbox's memory
# cgroup), no slurmdbd (parse DIR/jobcomp.txt for final states), MinJobAge=3600 so finished jobs
# stay visible in squeue/scontrol, sched_interval=1 so jobs start within ~1 s.
#
# Daemons are detached (setsid + nohup) so they survive the shell that started them; their
# stdout/stderr go to DIR/log/. munged is started only if none is running, and then recorded in
# DIR/munged.started so `stop` kills it too; a munged found running is left alone.
# Needs root (installs packages, runs munged as user munge, may add the hostname to /etc/hosts).
# `start` on a DIR whose cluster is still running stops that cluster first. Every start is a fresh
# cluster: DIR/state and DIR/spool are wiped (slurmctld's -i only ignores state-file errors; it
# would otherwise recover old jobs and continue their ids), so job ids restart at 1 and an old
# DIR/jobcomp.txt is moved to DIR/jobcomp.txt.old. DIR/log/ is appended to, never wiped.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
if [ "$cmd" = stop ] && [ ! -d "$2" ]; then exit 0; fi
mkdir -p "$2"
D=$(cd "$2" && pwd -P)
CONF=$D/slurm.conf
WAIT_S=${SLURM_CLUSTER_WAIT_S:-60}

log() { echo "cluster.sh: $*" >&2; }

die() {
  log "error: $*"
  local f
  for f in "$D"/log/*; do
    [ -f "$f" ] || continue
    echo "----- tail of $f -----" >&2
    tail -n 25 "$f" >&2 || true
  done
  [ "${STARTING:-0}" = 0 ] || stop_cluster
  exit 1
}

# pid_of FILE COMM: the PID in FILE if that process is alive and its name is COMM.
pid_of() {
  local pid
  [ -r "$1" ] || return 1
  pid=$(tr -dc '0-9' <"$1")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}

# still_alive COMM PID...: the PIDs that are still a COMM process (in ALIVE).
still_alive() {
  local comm=$1 pid
  shift
  ALIVE=()
  for pid in "$@"; do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] && ALIVE+=("$pid")
  done
  [ ${#ALIVE[@]} -gt 0 ]
}

# wait_gone TENTHS COMM PID...: true once none of the PIDs is a COMM process, within TENTHS × 0.1 s.
wait_gone() {
  local tenths=$1 i
  shift
  for ((i = 0; i < tenths; i++)); do
    still_alive "$@" || return 0
    sleep 0.1
  done
  return 1
}

# stop_daemon COMM FILE...: TERM the live COMM process named by any FILE, wait (bounded), then KILL.
stop_daemon() {
  local comm=$1 f pid pids=()
  shift
  for f in "$@"; do
    if pid=$(pid_of "$f" "$comm") && [[ " ${pids[*]} " != *" $pid "* ]]; then pids+=("$pid"); fi
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  log "stopping $comm (pid ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait_gone 150 "$comm" "${pids[@]}" && return 0 # 15 s
  log "$comm did not exit after SIGTERM; sending SIGKILL"
  kill -KILL "${ALIVE[@]}" 2>/dev/null || true
  wait_gone 50 "$comm" "${pids[@]}" && return 0
  log "warning: $comm (pid ${ALIVE[*]}) is still alive"
}

stop_cluster() {
  stop_daemon slurmd "$D/slurmd.pid" "$D/slurmd.launch.pid"
  stop_daemon slurmctld "$D/slurmctld.pid" "$D/slurmctld.launch.pid"
  if [ -f "$D/munged.started" ]; then
    stop_daemon munged "$D/munged.started" /run/munge/munged.pid
    stop_daemon runuser "$D/munged.launch.pid"
    rm -f "$D/munged.started" "$D/munged.launch.pid"
  fi
  rm -f "$D/slurmd.pid" "$D/slurmd.launch.pid" "$D/slurmctld.pid" "$D/slurmctld.launch.pid"
}

munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

install_packages() {
  local p missing=()
  for p in slurmctld slurmd slurm-client munge; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
}

start_munged() {
  local i
  if munge_ok; then
    return 0
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    install -d -o munge -g munge -m 0700 /etc/munge
    runuser -u munge -- /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key >&2
  fi
  log "starting munged"
  setsid nohup runuser -u munge -- /usr/sbin/munged --foreground \
    </dev/null >>"$D/log/munged.out" 2>&1 &
  echo $! >"$D/munged.launch.pid" # runuser, munged's parent
  : >"$D/munged.started"          # ours: stop kills the munged in /run/munge/munged.pid
  for ((i = 0; i < WAIT_S * 10; i++)); do
    if munge_ok && pid_of /run/munge/munged.pid munged >/dev/null; then
      pid_of /run/munge/munged.pid munged >"$D/munged.started"
      return 0
    fi
    sleep 0.1
  done
  die "munged did not come up within ${WAIT_S}s"
}

write_conf() {
  local node=$1 mem cpus
  mem=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.8 }' /proc/meminfo)
  cpus=$(nproc)
  cat >"$CONF" <<EOF
# Written by tools/slurm/cluster.sh; a private single-node test cluster.
ClusterName=qsmci
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/jobcomp.txt
MinJobAge=3600
SchedulerParameters=sched_interval=1,bf_interval=1
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

start_cluster() {
  local node i state=""
  [ "$(id -u)" = 0 ] || { log "error: start needs root"; exit 1; }
  stop_cluster
  STARTING=1
  install_packages
  node=$(hostname -s)
  if ! getent hosts "$node" >/dev/null; then
    log "adding '127.0.0.1 $node' to /etc/hosts"
    echo "127.0.0.1 $node" >>/etc/hosts
  fi
  rm -rf "$D/state" "$D/spool" # a fresh cluster: no recovered jobs, job ids restart at 1
  mkdir -p "$D/state" "$D/spool" "$D/log"
  [ ! -f "$D/jobcomp.txt" ] || mv -f "$D/jobcomp.txt" "$D/jobcomp.txt.old"
  write_conf "$node"
  export SLURM_CONF=$CONF
  start_munged
  log "starting slurmctld and slurmd (SLURM_CONF=$CONF)"
  setsid nohup /usr/sbin/slurmctld -D -i </dev/null >>"$D/log/slurmctld.out" 2>&1 &
  echo $! >"$D/slurmctld.launch.pid"
  setsid nohup /usr/sbin/slurmd -D </dev/null >>"$D/log/slurmd.out" 2>&1 &
  echo $! >"$D/slurmd.launch.pid"
  for ((i = 0; i < WAIT_S * 5; i++)); do
    state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    if ((i > 5)); then # give the pid files a moment to appear
      pid_of "$D/slurmctld.pid" slurmctld >/dev/null ||
        pid_of "$D/slurmctld.launch.pid" slurmctld >/dev/null || die "slurmctld exited"
      pid_of "$D/slurmd.pid" slurmd >/dev/null ||
        pid_of "$D/slurmd.launch.pid" slurmd >/dev/null || die "slurmd exited"
    fi
    sleep 0.2
  done
  [ "$state" = idle ] || die "node $node not idle after ${WAIT_S}s (state '${state}')"
  log "node $node idle"
  echo "export SLURM_CONF=$CONF"
}

case $cmd in
start) start_cluster ;;
stop) stop_cluster ;;
*) usage ;;
esac
