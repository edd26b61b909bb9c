# pai_jupyter task shim: sh shim.sh TASK_DIR [OOM_FILE...]. POSIX sh and builtins only, no Python: it runs once
# per task. It runs the task's script (the environment variable PAI_JUPYTER_COMMAND, which it takes out of the
# environment: the script holds the job's secrets and never touches the disk) the way OpenPAI's runtime does: bash
# with errexit, nounset and pipefail; where the image has no bash, sh with those of them it supports, said in
# TASK_DIR/runtime. stdout/stderr go into TASK_DIR/stdout and stderr, both interleaved as they arrive into
# TASK_DIR/all; then it writes the command's status (128+N for signal N) to TASK_DIR/exit_code, after the logs
# are complete, and exits with it. It must lead its own process group (setsid / container init).
# pid and exit_code are each one write(2) of a few bytes, not temp+mv: an mv costs ~2 ms of fork/exec here.
# exit_code is read only once this shell has exited, pid is a hint (runtimes know the pid); a reader treats an
# empty file as missing. The task's start time is the pid file's mtime (a `date` would cost another exec).
# SIGTERM to the group (stop) reaches the command; the shim, its subshells and tees ignore it and record the
# outcome: the command's own status; so do they a job's own preemption signal (INT, HUP, USR1, USR2:
# docs/checkpoint.md), which would otherwise kill a tee and cut the logs, or the subshell that waits for the command
# and so end the task while the command still saves. Only the command's own process resets them, just before its
# exec. (One that comes before that is lost: sh cannot block a signal. The C shim can.)
# Once the command is done, the group gets SIGTERM so that no background child outlives it (or holds the logs).
# OOM_FILEs (a container's: its cgroup's memory.events or memory.oom_control) hold an "oom_kill N" line; once the
# command is done the shim copies N of the first readable one to TASK_DIR/oom_kills, before exit_code. The kernel
# counts a kill before it signals the victim, so the count is sure where Docker's OOMKilled may come too late.
trap '' TERM INT HUP USR1 USR2
umask 077
d=$1
shift
o=$*
c=${PAI_JUPYTER_COMMAND-}
unset PAI_JUPYTER_COMMAND
echo $$ > "$d/pid"
if [ -f "$d/cgroup" ]; then while read -r p; do echo $$ > "$p"; done < "$d/cgroup"; fi 2>>"$d/stderr"
if command -v bash >/dev/null 2>&1; then set -- bash -o errexit -o nounset -o pipefail
elif (set -o pipefail) 2>/dev/null; then
  set -- sh -o errexit -o nounset -o pipefail
  echo "[pai_jupyter] no bash here: the commands run under /bin/sh with errexit, nounset and pipefail" \
       "(OpenPAI runs them under bash)" >> "$d/runtime"
else
  set -- sh -o errexit -o nounset
  echo "[pai_jupyter] no bash here: the commands run under /bin/sh with errexit and nounset (this sh has no" \
       "pipefail; OpenPAI runs them under bash)" >> "$d/runtime"
fi
{ { (printf '%s\n' "$c" | { trap - TERM INT HUP USR1 USR2; exec "$@" /dev/fd/4 4<&0 </dev/null; }); echo $? > "$d/exit_code.tmp"
    kill -TERM 0; } 2>&1 1>&3 3>&- | tee -a "$d/all" >> "$d/stderr" 3>&-; } 3>&1 | tee -a "$d/all" >> "$d/stdout"
for f in $o; do
  if [ -r "$f" ]; then while read -r k n; do [ "$k" != oom_kill ] || echo "$n" > "$d/oom_kills"; done < "$f"; break; fi
done 2>/dev/null
read -r rc < "$d/exit_code.tmp" || exit 255
echo "$rc" > "$d/exit_code"
exit "$rc"
