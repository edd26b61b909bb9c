#!/bin/bash
# A real two-node Slurm cluster on this machine, for development and CI: tests/slurm/cluster.sh start|stop|env DIR
#
# start: munged (its own key and socket under DIR), slurmctld and two slurmd (n1, n2), each started with setsid and
# its pid saved under DIR/run; as root where network namespaces work, each slurmd in its own namespace with its own
# IP on a bridge made here (10.203.0.0/24, the test range: n1 10.203.0.11, n2 10.203.0.12, the controller
# 10.203.0.1), else both on loopback with a port each. Waits until both nodes are idle; prints the env to use.
# stop: ends exactly the daemons it started (by their saved pids) and removes the namespaces and the bridge.
# env: prints `export SLURM_CONF=...` for a cluster started in DIR. Two fake GPUs per node (gres, /dev/null nodes).
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop|env DIR} dir=${2:?usage: cluster.sh start|stop|env DIR}
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
BR=${PAI_SLURM_BRIDGE:-paislurm0} NS=${PAI_SLURM_NETNS:-paislurm-n}
conf=$dir/etc/slurm.conf

started() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  if started "$dir/run/slurmctld.fg.pid"; then  # end the jobs first: their steps would outlive the slurmd
    SLURM_CONF=$conf scancel --partition=debug 2>/dev/null || true
    for _ in $(seq 100); do [ -z "$(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.05; done
  fi
  for f in "$dir"/run/slurmd-n*.fg.pid "$dir"/run/slurmctld.fg.pid "$dir"/run/munged.fg.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  for pid in $(pgrep -x slurmstepd || true); do  # steps of this cluster left behind (their env names its conf)
    { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$conf" && kill -KILL "$pid" 2>/dev/null
  done
  if [ -f "$dir/run/netns" ]; then
    for i in 1 2; do ip link del "${BR}v$i" 2>/dev/null || true; ip netns del "$NS$i" 2>/dev/null || true; done
    ip link del "$BR" 2>/dev/null || true
    rm -f "$dir/run/netns"
  fi
}

netns() {  # the bridge and two namespaces, or nothing (loopback) where this cannot be done
  [ "$(id -u)" = 0 ] && [ "${PAI_SLURM_LOOPBACK:-}" != 1 ] || return 1
  touch "$dir/run/netns"
  for i in 1 2; do ip link del "${BR}v$i" 2>/dev/null || true; done  # a veth outlives its namespace a moment
  ip link add "$BR" type bridge 2>/dev/null || return 1
  ip addr add 10.203.0.1/24 dev "$BR" && ip link set "$BR" up || return 1
  for i in 1 2; do
    ip netns add "$NS$i" && ip link add "${BR}v$i" type veth peer name eth0 netns "$NS$i" || return 1
    ip link set "${BR}v$i" master "$BR" && ip link set "${BR}v$i" up
    ip -n "$NS$i" addr add "10.203.0.1$i/24" dev eth0 && ip -n "$NS$i" link set eth0 up
    ip -n "$NS$i" link set lo up && ip -n "$NS$i" route add default via 10.203.0.1
  done
}

start() {
  mkdir -p "$dir"/{etc,run,log,state,munge,dev,jobs}
  stop
  # munge: a key and a socket of this cluster's own (no system munged needed, none disturbed)
  [ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0700 "$dir/munge" && chmod 0400 "$dir/munge/munge.key"
  # the socket where every account reaches it (as /run/munge): a task's srun runs as the task's account
  mkdir -p "$dir/munge-socket" && chmod 0755 "$dir/munge-socket"
  setsid /usr/sbin/munged -F --force --socket="$dir/munge-socket/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" \
    </dev/null >>"$dir/log/munged.out" 2>&1 & echo $! >"$dir/run/munged.fg.pid"
  for i in 1 2; do [ -e "$dir/dev/fgpu$((2 * i - 2))" ] || { mknod "$dir/dev/fgpu$((2 * i - 2))" c 1 3; \
    mknod "$dir/dev/fgpu$((2 * i - 1))" c 1 3; } 2>/dev/null || true; done
  local ctl nodes
  if netns; then
    ctl="SlurmctldHost=$(hostname)(10.203.0.1)"
    nodes="NodeName=n1 NodeAddr=10.203.0.11 NodeHostname=$(hostname) Port=16818 $res
NodeName=n2 NodeAddr=10.203.0.12 NodeHostname=$(hostname) Port=16818 $res"
  else
    stop; mkdir -p "$dir/run"
    setsid /usr/sbin/munged -F --force --socket="$dir/munge-socket/munge.socket" --key-file="$dir/munge/munge.key" \
      --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" \
      </dev/null >>"$dir/log/munged.out" 2>&1 & echo $! >"$dir/run/munged.fg.pid"
    ctl="SlurmctldHost=localhost(127.0.0.1)"
    nodes="NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=16821 $res
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=16822 $res"
  fi
  local me; me=$(id -un)
  cat >"$conf" <<CONF
ClusterName=paitest
$ctl
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=$me
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge-socket/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/run/spool-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,bf_interval=1,sched_min_interval=0
DefMemPerCPU=100
KillWait=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
GresTypes=gpu
MpiParams=ports=17000-17999
$nodes
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
  printf 'AutoDetect=off\nNodeName=n1 Name=gpu File=%s/dev/fgpu[0-1]\nNodeName=n2 Name=gpu File=%s/dev/fgpu[2-3]\n' \
    "$dir" "$dir" >"$dir/etc/gres.conf"
  export SLURM_CONF=$conf
  for _ in $(seq 100); do [ -S "$dir/munge-socket/munge.socket" ] && break; sleep 0.05; done
  setsid /usr/sbin/slurmctld -D -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 & echo $! >"$dir/run/slurmctld.fg.pid"
  for i in 1 2; do
    if [ -f "$dir/run/netns" ]; then
      setsid nsenter --net="/var/run/netns/$NS$i" /usr/sbin/slurmd -D -N "n$i" </dev/null \
        >>"$dir/log/slurmd-n$i.out" 2>&1 & echo $! >"$dir/run/slurmd-n$i.fg.pid"
    else
      setsid /usr/sbin/slurmd -D -N "n$i" </dev/null >>"$dir/log/slurmd-n$i.out" 2>&1 &
      echo $! >"$dir/run/slurmd-n$i.fg.pid"
    fi
  done
  for _ in $(seq 400); do
    sinfo -h -N -o '%N %t' 2>/dev/null | tr '\n' ' ' | grep -q 'n1 idle n2 idle' && { echo "export SLURM_CONF=$conf"; return 0; }
    sleep 0.05
  done
  echo "cluster.sh: the nodes did not come up idle in 20 s; see $dir/log" >&2
  sinfo -N >&2 || true
  exit 1
}

res="CPUs=2 RealMemory=4000 Gres=gpu:2 State=UNKNOWN"
case $cmd in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: cluster.sh start|stop|env DIR" >&2; exit 2 ;;
esac
