# A toy trainer in POSIX sh (a busybox container has no Python) that keeps the platform's checkpoint contract the
# way pai_jupyter.checkpoint does: run it with `set -- --steps N --every K --step-seconds S` (or `set -- N K S`)
# before it. A checkpoint is one line, `step=<n> total=<sum of the steps> sum=<sha256 of the rest>`, written to a
# temporary file and renamed into place; then the `latest` pointer the same way. Progress lines go to stdout and to
# $PAI_CHECKPOINT_DIR/progress/<attempt>.log as in train.py; on the preemption signal it saves at once and exits
# 128 + the signal's number. The attempt is the `.a<n>.` of $PAI_CONTAINER_ID.
steps=100 every=5 step_s=0.1
case "$1" in
  --*)
    while [ $# -gt 1 ]; do
      case "$1" in
        --steps) steps=$2 ;;
        --every) every=$2 ;;
        --step-seconds) step_s=$2 ;;
      esac
      shift 2
    done
    ;;
  ?*) steps=$1 every=$2 step_s=$3 ;;
esac
dir=${PAI_CHECKPOINT_DIR:-checkpoints}
dir=${dir%/}
# (builtins only until the trap is set: the signal may come at once, and kills what the shell forks)
attempt=${PAI_CONTAINER_ID%.*.*.t*}  # user~job.a<attempt>.<role>.<index>.t<n>
attempt=${attempt##*.a}
case "$attempt" in '' | *[!0-9]*) attempt=0 ;; esac
sig=${PAI_PREEMPT_SIGNAL:-TERM}
sig=${sig#SIG}
case "$sig" in HUP) code=129 ;; INT) code=130 ;; USR1) code=138 ;; USR2) code=140 ;; *) code=143 ;; esac
stop=0
trap 'stop=1' "$sig"
# The signal reaches every process of the task: a command substitution's subshell, sha256sum, date, mv die of it.
# So the state is read with builtins, a checksum is asked again until whole, and a rename is tried again until its
# source is gone (a mv killed before its rename(2) left it; one killed after did the rename).
log="$dir/progress/$attempt.log"
n=0
while [ ! -d "$dir/progress" ] && [ $n -lt 20 ]; do mkdir -p "$dir/progress" || n=$((n + 1)); done
say() { echo "$1" >> "$log"; echo "$1"; }
checksum() { sum=; while [ ${#sum} -ne 64 ]; do sum=$(echo "$1" | sha256sum | cut -d' ' -f1) || true; done; }
rename() { n=0; while [ -e "$1" ] && [ $n -lt 20 ]; do mv -f "$1" "$2" || n=$((n + 1)); done; }
step=-1 total=0
if [ -f "$dir/latest" ]; then
  read -r name < "$dir/latest"
  read -r line < "$dir/$name" || true
  body=${line% sum=*}
  checksum "$body"
  [ "sum=$sum" = "${line##* }" ] || { echo "corrupt checkpoint $name: $line" >&2; exit 3; }
  total=${body##*total=}
  step=${body%% total=*}
  step=${step#step=}
fi
say "resume $step"
saved=$step
save() {
  body="step=$step total=$total"
  name=$step
  while [ ${#name} -lt 12 ]; do name=0$name; done
  name=ckpt-$name
  checksum "$body"
  echo "$body sum=$sum" > "$dir/.tmp-$name"
  rename "$dir/.tmp-$name" "$dir/$name"
  echo "$name" > "$dir/.tmp-latest"
  rename "$dir/.tmp-latest" "$dir/latest"
  saved=$step
  say "saved $step"
  # sorted, so a listing cut short by the signal only ever names older ones
  for old in $(ls "$dir" | grep '^ckpt-' | sort | sed '$d' | sed '$d'); do rm -f "$dir/$old"; done
}
while [ $((step + 1)) -lt "$steps" ]; do
  sleep "$step_s" || true
  step=$((step + 1))
  total=$((total + step))
  now=$(date +%s) || true
  say "$attempt $step ${now:--} 0"
  if [ $(((step + 1) % every)) -eq 0 ] || [ "$stop" = 1 ]; then save; fi
  if [ "$stop" = 1 ]; then say "preempted $saved"; exit "$code"; fi
done
echo DONE
