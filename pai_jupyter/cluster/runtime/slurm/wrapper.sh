# pai_jupyter's task wrapper on Slurm: bash wrapper.sh RDV TOTAL SHIM TASK_DIR... (one srun step per task role;
# SLURM_PROCID picks this task's directory). Runs as the task's account on its node:
#  1. reads its environment from TASK_DIR/slurm.env (NUL-separated, root's, readable by the task's group only:
#     the script and the secrets never reach a command line);
#  2. finds its node's NodeAddr (in PAI_JUPYTER_NODE_ADDRS, else from scontrol), writes "node ip gpus" to TASK_DIR/run/placement (the daemon reads it with safeio) and its IP to RDV/<role>.<index>;
#  3. waits until all TOTAL tasks of the attempt have written theirs (the rendezvous: a directory every node sees);
#  4. exports PAI_HOST_IP_<role>_<i>, the roles' host lists and its own PAI_CURRENT_CONTAINER_IP from them;
#  5. runs the commands through the shim (shim.sh: bash errexit/nounset/pipefail, logs and exit_code in run/), in
#     a process group of its own;
#  6. passes Slurm's signals on to the command (a stop: SIGTERM; a preemption: the job's own, PAI_PREEMPT_SIGNAL);
#  7. every 2 s writes that group's CPU seconds and resident bytes to TASK_DIR/run/usage (the daemon's CPU and
#     memory charts: it reads the file with safeio; Slurm's own sstat needs accounting the cluster may not have).
set -u
rdv=$1 total=$2 shim=$3
shift 3
td=${*:$((SLURM_PROCID + 1)):1}
run=$td/run
exec 2>>"$run/wrapper.log"
while IFS= read -r -d '' kv; do export "${kv?}"; done <"$td/slurm.env"
ip=
for a in ${PAI_JUPYTER_NODE_ADDRS:-}; do [ "${a%%=*}" = "${SLURMD_NODENAME:-}" ] && ip=${a#*=}; done
unset PAI_JUPYTER_NODE_ADDRS
[ -n "$ip" ] || ip=$(scontrol show node "${SLURMD_NODENAME:-}" -o 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
[ -n "$ip" ] || ip=$(hostname -I 2>/dev/null | cut -d' ' -f1)
me=$PAI_CURRENT_TASK_ROLE_NAME.$PAI_TASK_INDEX
printf '%s %s %s\n' "${SLURMD_NODENAME:-?}" "$ip" "${CUDA_VISIBLE_DEVICES:-}" >"$run/.placement"
mv -f "$run/.placement" "$run/placement"
printf '%s\n' "$ip" >"$rdv/.$me" && mv -f "$rdv/.$me" "$rdv/$me"
until [ "$(find "$rdv" -maxdepth 1 -type f ! -name '.*' | wc -l)" -ge "$total" ]; do sleep 0.05; done
for f in "$rdv"/*.*; do
  b=${f##*/} r=${b%.*} i=${b##*.}
  read -r hip <"$f"
  export "PAI_HOST_IP_${r}_${i}=$hip"
  list=PAI_TASK_ROLE_${r}_HOST_LIST
  if [ -n "${!list:-}" ]; then  # "ip:port,ip:port": this task's entry gets its node's IP
    IFS=, read -r -a hosts <<<"${!list}"
    entry=${hosts[$i]-}
    case $entry in *:*) hosts[i]=$hip:${entry#*:} ;; *) hosts[i]=$hip ;; esac
    export "$list=$(IFS=,; echo "${hosts[*]}")"
  fi
done
export PAI_CURRENT_CONTAINER_IP=$ip PAI_CONTAINER_HOST_IP=$ip PAI_SERVICE_HOST=$ip  # services: task/services.py
cd "${PAI_JUPYTER_WORKDIR:-$run}" || exit 255
unset PAI_JUPYTER_WORKDIR
# the shim leads a process group of its own (job control): the tasks of one step on one node may share the
# step's group, and the shim ends its own group once the command is done. Slurm's signals to the step (scancel,
# --time) are passed on to it.
set -m
sh "$shim" "$run" &
child=$!
usage() {  # the group's utime + stime + its reaped children's (clock ticks) and resident pages, from /proc
  local hz page p s f t r
  command -v pgrep >/dev/null || return  # no samples (no charts) rather than zeros
  hz=$(getconf CLK_TCK) page=$(getconf PAGESIZE) || return
  while kill -0 "$child" 2>/dev/null; do
    t=0 r=0
    for p in $(pgrep -g "$child"); do
      read -r s <"/proc/$p/stat" 2>/dev/null || continue
      read -r -a f <<<"${s##*) }"  # the fields after the command's name (which may hold spaces)
      t=$((t + f[11] + f[12] + f[13] + f[14])) r=$((r + f[21]))
    done
    printf '%d.%02d %d\n' $((t / hz)) $((t % hz * 100 / hz)) $((r * page)) >"$run/.usage" &&
      mv -f "$run/.usage" "$run/usage"
    sleep 2
  done
}
usage &
sampler=$!
trap 'kill -TERM -- "-$child" 2>/dev/null' TERM INT
# a preemption (Slurm's --signal, accounting.py) with a signal of the job's own other than TERM: passed on to the
# command's processes only; the shim's shells and tees ignore TERM alone (runtime/shim.sh) and must record the end
sig=${PAI_PREEMPT_SIGNAL:-TERM}
preempt() {
  local p me
  command -v pgrep >/dev/null || { kill -TERM -- "-$child" 2>/dev/null; return; }
  me=$(tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null)
  for p in $(pgrep -g "$child"); do
    [ "$p" = "$child" ] || [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = "$me" ] && continue
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = tee ] || kill -s "$sig" "$p" 2>/dev/null
  done
}
case $sig in INT | HUP | USR1 | USR2) trap preempt "$sig" ;; esac
while :; do
  wait "$child"
  rc=$?
  kill -0 "$child" 2>/dev/null || { kill -- "-$sampler" 2>/dev/null; exit "$rc"; }
done
