#!/usr/bin/env bash
# A one-node Slurm cluster on loopback, for trying srun and sbatch on one machine (and for
# tools/slurm/slurm_test.sh): Debian's slurmctld and slurmd, one node named localhost at
# 127.0.0.1 with 4 CPUs declared (config_overrides: a 2-core machine still takes `srun -n 4`),
# no authentication (auth/none: only this machine's loopback can reach it).
#
#   tools/slurm/one_node_cluster.sh up DIR     # config, state and logs in DIR; prints SLURM_CONF=...
#   export SLURM_CONF=DIR/slurm.conf; srun -n 4 hostname; sbatch ...
#   tools/slurm/one_node_cluster.sh down DIR
#
# Needs root (the daemons run as root, so jobs do too) and the packages slurmctld, slurmd and
# slurm-client (DISTLM_WITH_SLURM=1 tools/setup.sh installs them). Ports: SLURM_TEST_PORT and
# the next one (default 16817-16818), so it does not meet a real Slurm on 6817-6818.
set -euo pipefail

usage() {
  echo "usage: $0 up|down DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
conf=$dir/slurm.conf

stop() {
  for daemon in slurmd slurmctld; do
    local pidfile=$dir/$daemon.pid
    if [ -f "$pidfile" ]; then
      local pid
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
  # slurmctld's script helper, and any step left behind, by the config file they were given.
  pkill -9 -f -- "-f $conf" 2>/dev/null || true
  if [ -f "$dir/spool_path" ]; then
    case "$(cat "$dir/spool_path")" in /tmp/distlm-slurmd.*) rm -rf "$(cat "$dir/spool_path")" ;; esac
    rm -f "$dir/spool_path"
  fi
}

case "$action" in
  down)
    stop
    echo "one_node_cluster: down ($dir)"
    ;;
  up)
    [ "$(id -u)" -eq 0 ] || { echo "one_node_cluster: needs root (slurmd runs jobs as their user)" >&2; exit 3; }
    for tool in slurmctld slurmd srun sinfo; do
      command -v "$tool" >/dev/null || {
        echo "one_node_cluster: $tool is not installed (DISTLM_WITH_SLURM=1 tools/setup.sh installs Slurm)" >&2
        exit 3
      }
    done
    stop
    port=${SLURM_TEST_PORT:-16817}
    rm -rf "$dir/state" "$dir/log"
    mkdir -p "$dir/state" "$dir/log"
    # slurmd's spool holds Unix sockets, whose paths must stay under 108 bytes: a short folder
    # of its own in /tmp, not under DIR (a test's folder is far deeper).
    spool=$(mktemp -d /tmp/distlm-slurmd.XXXXXX)
    echo "$spool" >"$dir/spool_path"
    cat >"$conf" <<CONF
# Written by tools/slurm/one_node_cluster.sh: one node, loopback only, no authentication.
ClusterName=distlm
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
    slurmctld -c -f "$conf"
    slurmd -f "$conf" -N localhost
    for _ in $(seq 100); do
      if [ "$(SLURM_CONF=$conf sinfo -h -o %t 2>/dev/null)" = idle ]; then
        echo "SLURM_CONF=$conf"
        exit 0
      fi
      sleep 0.2
    done
    echo "one_node_cluster: the node did not become idle in 20 s; last lines of the logs:" >&2
    tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    stop
    exit 1
    ;;
  *) usage ;;
esac
