# A toy trainer in POSIX sh (a busybox container has no Python) that keeps the platform's checkpoint contract the
# way pai_jupyter.checkpoint does: run with `set -- STEPS EVERY STEP_SECONDS` before it. A checkpoint is
# `step=<n> total=<sum of steps> sum=<sha256 of the rest>`, written to a temporary file and renamed into place, then
# the `latest` pointer the same way; progress lines go to $PAI_CHECKPOINT_DIR/progress/<attempt>.log; on the
# preemption signal it saves at once and exits 143.
steps=$1 every=$2 step_s=$3
dir=${PAI_CHECKPOINT_DIR%/}
attempt=$(echo "$PAI_CONTAINER_ID" | sed -n 's/.*\.a\([0-9]*\)\..*/\1/p')
mkdir -p "$dir/progress"
log="$dir/progress/${attempt:-0}.log"
stop=0
# the signal reaches every process of the task, a command substitution's subshell too: $sum is set in this shell,
# and a sha256sum the signal killed is asked again
checksum() { sum=; while [ ${#sum} -ne 64 ]; do sum=$(echo "$1" | sha256sum | cut -d' ' -f1) || true; done; }
trap 'stop=1' "${PAI_PREEMPT_SIGNAL:-TERM}"
step=-1 total=0
if [ -f "$dir/latest" ]; then
  name=$(cat "$dir/latest")
  line=$(cat "$dir/$name")
  body=${line% sum=*}
  checksum "$body"
  [ "sum=$sum" = "${line##* }" ] || { echo "corrupt checkpoint $name: $line" >&2; exit 3; }
  step=$(echo "$body" | sed 's/step=\([0-9]*\) .*/\1/')
  total=$(echo "$body" | sed 's/.*total=\([0-9]*\)/\1/')
fi
echo "resume $step" >> "$log"
saved=$step
save() {
  body="step=$step total=$total"
  name=$step
  while [ ${#name} -lt 12 ]; do name=0$name; done  # (no subshell here either)
  name=ckpt-$name
  checksum "$body"
  echo "$body sum=$sum" > "$dir/.tmp-$name"
  mv "$dir/.tmp-$name" "$dir/$name"
  echo "$name" > "$dir/.tmp-latest"
  mv "$dir/.tmp-latest" "$dir/latest"
  saved=$step
  echo "saved $step" >> "$log"
  for old in $(ls "$dir" | grep '^ckpt-' | sort | sed '$d' | sed '$d'); do rm -f "$dir/$old"; done
}
while [ $((step + 1)) -lt "$steps" ]; do
  sleep "$step_s" || true
  step=$((step + 1))
  total=$((total + step))
  echo "$step 0" >> "$log"
  if [ $(((step + 1) % every)) -eq 0 ] || [ "$stop" = 1 ]; then save; fi
  if [ "$stop" = 1 ]; then echo "preempted $saved" >> "$log"; exit 143; fi
done
echo DONE
