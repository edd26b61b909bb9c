# pai_jupyter task shim: sh shim.sh TASK_DIR. POSIX sh and builtins only, no Python: it runs once per task.
# It runs TASK_DIR/command.sh with stdout/stderr into TASK_DIR/stdout and stderr, both interleaved as they
# arrive into TASK_DIR/all, then writes the command's status (128+N for signal N) to TASK_DIR/exit_code, after
# the logs are complete, and exits with it. It must lead its own process group (setsid / container init).
# pid and exit_code are each one write(2) of a few bytes, not temp+mv: an mv costs ~2 ms of fork/exec here.
# exit_code is read only once this shell has exited, pid is a hint (runtimes know the pid); a reader treats an
# empty file as missing. The task's start time is the pid file's mtime (a `date` would cost another exec).
# SIGTERM to the group (stop) reaches the command; the shim and tees ignore it and record the outcome. (One that
# comes before the command's subshell has reset the trap is lost: sh cannot block a signal. The C shim can.)
# Once the command is done, the group gets SIGTERM so that no background child outlives it (or holds the logs).
trap '' TERM
d=$1
echo $$ > "$d/pid"
if [ -f "$d/cgroup" ]; then while read -r p; do echo $$ > "$p"; done < "$d/cgroup"; fi 2>>"$d/stderr"
{ { (trap - TERM; exec /bin/sh "$d/command.sh"); echo $? > "$d/exit_code.tmp"; kill -TERM 0; } 2>&1 1>&3 3>&- |
    tee -a "$d/all" >> "$d/stderr" 3>&-; } 3>&1 | tee -a "$d/all" >> "$d/stdout"
read -r rc < "$d/exit_code.tmp" || exit 255
echo "$rc" > "$d/exit_code"
exit "$rc"
