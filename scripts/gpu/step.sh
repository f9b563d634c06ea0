# step.sh, sourced by the GPU evidence scripts (perf.sh, procs.sh).
# step NAME COMMAND...: runs the command under timeout (STEP_TIMEOUT
# seconds, else the script's step_timeout), appends its whole output to
# $OUT/$step_log-$part.log and prints its last $step_tail non-empty lines
# here (the device tool returns only a tail); a failure sets rc=1 and the
# script goes on to the next step (steps and fails count them). Needs OUT,
# tmp, part, rc.
step() {
  local name=$1 log="$OUT/$step_log-$part.log"; shift
  echo "== $name: $*" | tee -a "$log"
  steps=$((${steps:-0} + 1))
  timeout "${STEP_TIMEOUT:-$step_timeout}" "$@" >"$tmp/step.log" 2>&1 || { echo "   exit $?" | tee -a "$log"; rc=1; fails=$((${fails:-0} + 1)); }
  cat "$tmp/step.log" >> "$log"
  grep -vE '^\s*$' "$tmp/step.log" | tail -"$step_tail" | cut -c1-200
}
