#!/bin/bash
# A real two-node Slurm cluster on this machine, for development and CI:
#   tests/slurm/cluster.sh start|stop|env DIR [--accounting]   (or PAI_SLURM_ACCOUNTING=1 for --accounting)
#
# start: munged (its own key and socket under DIR), slurmctld and two slurmd (n1, n2), each started with setsid and
# its pid saved under DIR/run; as root where network namespaces work, each slurmd in its own namespace with its own
# IP on a bridge made here, else both on loopback with a port each. Waits until both nodes are idle; prints the env
# to use. Several clusters run side by side (in different DIRs): each takes a free slot N (1-64), held by a small
# holder process's flock on $SLOTS/N.lock while the cluster lives, and with it a bridge paislurmN, namespaces
# paislurmNn1 and paislurmNn2, the subnet 10.203.N.0/24 (n1 .11, n2 .12, the controller .1; a slot whose subnet
# this machine already routes is skipped) and ports 20000+4N.. (controller; slurmd; slurmdbd at +3). DIR/run/network says which
# (slot=, bridge=, netns=, subnet=, port=); tests read the nodes' addresses from the cluster itself (sinfo %o).
# A slot whose holder died (a cluster killed without stop) is taken over, its leftover bridge and namespaces removed.
# start refuses a DIR whose cluster is running (stop it first).
# stop: ends exactly the daemons it started (by their saved pids), removes the namespaces and the bridge, and frees
# the slot. env: prints `export SLURM_CONF=...` for a cluster started in DIR. Two fake GPUs per node (gres, /dev/null
# nodes).
# --accounting: also MariaDB (its own datadir under DIR/db, a unix socket only, no TCP port) and slurmdbd (the
# slot's fourth port), both started by pid like the rest and ended by stop; slurm.conf then has fair share
# (priority/multifactor) and QOS preemption (preempt/qos): QOS crit, prod, test, oppo, each preempting the classes
# below it (PreemptMode=REQUEUE: a requeueable job is requeued, the daemon's --no-requeue jobs are cancelled),
# GraceTime PAI_SLURM_GRACE seconds (30), and an account "pai" for the users (docs/slurm.md, "Preemption and fair
# share on Slurm"). Without it (the default): no slurmdbd, priority/basic, no preemption, as before (it costs
# about a second more to start, measured there).
set -euo pipefail
usage="usage: cluster.sh start|stop|env DIR [--accounting]"
cmd=${1:?$usage} dir=${2:?$usage}
accounting=${PAI_SLURM_ACCOUNTING:-0}
[ "${3:-}" = --accounting ] && accounting=1
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
SLOTS=${TMPDIR:-/tmp}/pai-slurm-slots-$(id -u)
conf=$dir/etc/slurm.conf

started() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  if started "$dir/run/slurmctld.fg.pid"; then  # end the jobs first: their steps would outlive the slurmd
    SLURM_CONF=$conf scancel --partition=debug 2>/dev/null || true
    for _ in $(seq 100); do [ -z "$(SLURM_CONF=$conf squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.05; done
  fi
  for f in "$dir"/run/slurmd-n*.fg.pid "$dir"/run/slurmctld.fg.pid "$dir"/run/slurmdbd.fg.pid \
    "$dir"/run/mariadbd.fg.pid "$dir"/run/munged.fg.pid; do
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
  if [ -f "$dir/run/network" ]; then
    local slot; slot=$(sed -n 's/^slot=//p' "$dir/run/network")
    if started "$dir/run/slot.pid" && grep -q sleep "/proc/$(cat "$dir/run/slot.pid")/cmdline" 2>/dev/null; then
      pid=$(cat "$dir/run/slot.pid")
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    fi
    # the network only while the slot is free (another cluster may have taken a slot whose holder died)
    if [ -f "$dir/run/netns" ] && [ -n "$slot" ] && mkdir -p "$SLOTS" && exec 9>"$SLOTS/$slot.lock" && flock -n 9; then
      unplug "$slot"
    fi
    exec 9>&-
    rm -f "$dir/run/netns" "$dir/run/network" "$dir/run/slot.pid"
  fi
}

unplug() {  # slot N's bridge, veths and namespaces, if there
  local br=paislurm$1
  for i in 1 2; do ip link del "${br}v$i" 2>/dev/null || true; ip netns del "${br}n$i" 2>/dev/null || true; done
  ip link del "$br" 2>/dev/null || true
}

in_use() {  # is this port listened on, or this subnet (10.203.N.0/24) routed here (other than by the default route)?
  local port=$1 net=$2
  [ -n "$(ss -Htln "sport = :$port" 2>/dev/null)" ] && return 0
  [ -n "$net" ] || return 1
  [ -n "$(ip -4 route show match "$net.1" 2>/dev/null | grep -v '^default')" ] ||
    [ -n "$(ip -4 route show root "$net.0/24" 2>/dev/null)" ] ||
    [ -n "$(ip -4 -o addr show to "$net.0/24" 2>/dev/null)" ]
}

claim() {  # take a free slot: sets slot, net (the subnet's first three parts, or empty on loopback) and port
  local netns_mode=$1 n
  mkdir -p "$SLOTS" && chmod 0700 "$SLOTS"
  for n in $(seq 1 64); do
    exec 9>"$SLOTS/$n.lock"
    flock -n 9 || { exec 9>&-; continue; }
    [ "$netns_mode" = 1 ] && unplug "$n"  # left by a cluster of this slot that was killed without stop
    slot=$n port=$((20000 + 4 * n)) net=
    [ "$netns_mode" = 1 ] && net=10.203.$n
    if in_use "$port" "$net" || in_use $((port + 1)) "" || in_use $((port + 2)) "" || in_use $((port + 3)) ""; then
      exec 9>&-
      continue
    fi
    # the slot is this cluster's for as long as its holder lives (it keeps the lock: fd 9, inherited)
    setsid sleep infinity </dev/null >/dev/null 2>&1 & echo $! >"$dir/run/slot.pid"
    exec 9>&-
    printf 'slot=%s\nport=%s\n' "$slot" "$port" >"$dir/run/network"  # (what stop frees, should start fail)
    return 0
  done
  echo "cluster.sh: no free slot (64 clusters running, or their ports and subnets 10.203.1-64.0/24 in use)" >&2
  exit 1
}

netns() {  # the bridge and two namespaces of the slot, or nothing (loopback) where this cannot be done
  local br=paislurm$slot
  touch "$dir/run/netns"
  ip link add "$br" type bridge 2>/dev/null || return 1
  ip addr add "$net.1/24" dev "$br" && ip link set "$br" up || return 1
  for i in 1 2; do
    ip netns add "${br}n$i" && ip link add "${br}v$i" type veth peer name eth0 netns "${br}n$i" || return 1
    ip link set "${br}v$i" master "$br" && ip link set "${br}v$i" up
    ip -n "${br}n$i" addr add "$net.1$i/24" dev eth0 && ip -n "${br}n$i" link set eth0 up
    ip -n "${br}n$i" link set lo up && ip -n "${br}n$i" route add default via "$net.1"
  done
}

QOS_CLASSES="crit prod test oppo"
# the QOS of each priority class: its priority (the daemon's own ranks, core/queue.py; oppo 0) and whom it preempts
QOS_PRIORITY="crit=120 prod=100 test=10 oppo=0"
QOS_PREEMPTS="crit=prod,test,oppo prod=test,oppo test=oppo oppo="

accounting_conf() {  # slurm.conf's lines for accounting, fair share and QOS preemption (or none of them)
  if [ "$accounting" != 1 ]; then
    printf 'AccountingStorageType=accounting_storage/none\n'
    return
  fi
  cat <<ACCT
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$((port + 3))
AccountingStoragePass=$dir/munge-socket/munge.socket
AccountingStorageEnforce=associations,qos
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightQOS=10000
PriorityWeightAge=0
PriorityWeightJobSize=0
PriorityWeightPartition=0
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=1
PreemptType=preempt/qos
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
ACCT
}

database() {  # MariaDB (own datadir, socket only) and slurmdbd, then the cluster, its QOS and account in it
  local db=$dir/db sock=$dir/run/mariadb.sock
  local fresh=0  # a start in the same DIR keeps the database, as slurmctld keeps its state (the jobs' QOS ids)
  if [ ! -d "$db/data/mysql" ]; then
    fresh=1
    rm -rf "$db" && mkdir -p "$db"
    mariadb-install-db --no-defaults --datadir="$db/data" --user=root --auth-root-authentication-method=normal \
      --skip-test-db --skip-name-resolve --innodb-log-file-size=8M >"$dir/log/mariadb-install.log" 2>&1
  fi
  setsid /usr/sbin/mariadbd --no-defaults --datadir="$db/data" --user=root --socket="$sock" --skip-networking \
    --pid-file="$dir/run/mariadbd.pid" --log-error="$dir/log/mariadbd.log" --skip-name-resolve \
    --innodb-buffer-pool-size=16M --innodb-log-file-size=8M --innodb-flush-log-at-trx-commit=0 \
    </dev/null >>"$dir/log/mariadbd.out" 2>&1 & echo $! >"$dir/run/mariadbd.fg.pid"
  # slurmdbd reads slurmdbd.conf beside slurm.conf; it must be SlurmUser's and private (it could hold a password)
  (umask 077 && cat >"$dir/etc/slurmdbd.conf" <<DBD
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$((port + 3))
SlurmUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$dir/munge-socket/munge.socket
PidFile=$dir/run/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
DBD
  )
  for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
  # the MySQL client library finds a socket named by MYSQL_UNIX_PORT (slurmdbd.conf has no socket option)
  MYSQL_UNIX_PORT=$sock setsid /usr/sbin/slurmdbd -D </dev/null >>"$dir/log/slurmdbd.out" 2>&1 &
  echo $! >"$dir/run/slurmdbd.fg.pid"
  for _ in $(seq 200); do ss -Htln "sport = :$((port + 3))" 2>/dev/null | grep -q . && break; sleep 0.05; done
  [ "$fresh" = 1 ] || return 0
  sacctmgr -i add cluster paitest >/dev/null
  sacctmgr -i add qos "${QOS_CLASSES// /,}" >/dev/null
  local q
  for q in $QOS_CLASSES; do
    local prio=${QOS_PRIORITY#*"$q="} preempts=${QOS_PREEMPTS#*"$q="}
    prio=${prio%% *} preempts=${preempts%% *}
    sacctmgr -i modify qos "$q" set Priority="$prio" GraceTime="${PAI_SLURM_GRACE:-30}" \
      ${preempts:+Preempt="$preempts"} >/dev/null
  done
  # every association inherits the classes from the cluster's root account (default: test, OpenPAI's default)
  sacctmgr -i modify account root set qos="normal,${QOS_CLASSES// /,}" defaultqos=test >/dev/null
  sacctmgr -i add account pai Description="pai_jupyter users" Organization=pai >/dev/null
}

start() {
  mkdir -p "$dir"/{etc,run,log,state,munge,dev,jobs}
  if started "$dir/run/slurmctld.fg.pid"; then
    echo "cluster.sh: a cluster already runs in $dir ($(tr '\n' ' ' <"$dir/run/network" 2>/dev/null)); stop it first:" \
      "tests/slurm/cluster.sh stop $dir" >&2
    exit 1
  fi
  stop
  local netns_mode=0
  [ "$(id -u)" = 0 ] && [ "${PAI_SLURM_LOOPBACK:-}" != 1 ] && netns_mode=1
  local slot port net
  claim "$netns_mode"
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
  if [ "$netns_mode" = 1 ] && netns; then
    ctl="SlurmctldHost=$(hostname)($net.1)"
    nodes="NodeName=n1 NodeAddr=$net.11 NodeHostname=$(hostname) Port=$((port + 1)) $res
NodeName=n2 NodeAddr=$net.12 NodeHostname=$(hostname) Port=$((port + 1)) $res"
    printf 'slot=%s\nbridge=paislurm%s\nnetns=paislurm%sn1 paislurm%sn2\nsubnet=%s.0/24\nport=%s\n' \
      "$slot" "$slot" "$slot" "$slot" "$net" "$port" >"$dir/run/network"
  else
    [ -f "$dir/run/netns" ] && unplug "$slot" && rm -f "$dir/run/netns"
    ctl="SlurmctldHost=localhost(127.0.0.1)"
    nodes="NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 1)) $res
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + 2)) $res"
    printf 'slot=%s\nsubnet=loopback\nport=%s\n' "$slot" "$port" >"$dir/run/network"
  fi
  local me; me=$(id -un)
  cat >"$conf" <<CONF
ClusterName=paitest
$ctl
SlurmctldPort=$port
SlurmdPort=$((port + 1))
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
$(accounting_conf)
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
  [ "$accounting" = 1 ] && database
  setsid /usr/sbin/slurmctld -D -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 & echo $! >"$dir/run/slurmctld.fg.pid"
  for i in 1 2; do
    if [ -f "$dir/run/netns" ]; then
      setsid nsenter --net="/var/run/netns/paislurm${slot}n$i" /usr/sbin/slurmd -D -N "n$i" </dev/null \
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
  *) echo "$usage" >&2; exit 2 ;;
esac
