# Sourced by the scripts that take minutes (bench.sh, test.sh): `step <name> <usual> <command...>`
# names a step before it starts, with how long it usually takes on a 2-core machine, runs it,
# and says how long it took; `steps_summary <script>` prints the breakdown as its last line.
# `step_beside <name> <usual> <command...>` starts a step that runs beside the next ones (its
# output goes to target/steps/<name>.log, printed when it fails); `step_wait <name>` waits for it.
STEP_TIMES=()
STEPS_START=$SECONDS
declare -A STEP_PIDS STEP_STARTS STEP_LOGS
step() { # step <name> <usual time> <command...>
  local name=$1 usual=$2 start=$SECONDS
  shift 2
  echo "${0##*/}: [$name] starting (usually $usual)"
  "$@"
  echo "${0##*/}: [$name] done in $((SECONDS - start)) s"
  STEP_TIMES+=("$name $((SECONDS - start)) s")
}
step_beside() { # step_beside <name> <usual time> <command...>
  local name=$1 usual=$2
  shift 2
  mkdir -p target/steps
  local log="target/steps/${name//[^A-Za-z0-9_-]/_}.log"
  echo "${0##*/}: [$name] starting beside the next steps (usually $usual; output in $log)"
  "$@" >"$log" 2>&1 &
  STEP_PIDS[$name]=$!
  # A step that fails before this one ends stops it too.
  trap 'kill $(jobs -pr) 2>/dev/null || true' EXIT
  STEP_STARTS[$name]=$SECONDS
  STEP_LOGS[$name]=$log
}
step_wait() { # step_wait <name>
  local name=$1
  if ! wait "${STEP_PIDS[$name]}"; then
    echo "${0##*/}: [$name] failed; the end of ${STEP_LOGS[$name]}:" >&2
    tail -n 40 "${STEP_LOGS[$name]}" >&2
    exit 1
  fi
  echo "${0##*/}: [$name] done in $((SECONDS - STEP_STARTS[$name])) s (beside the steps above)"
  STEP_TIMES+=("$name $((SECONDS - STEP_STARTS[$name])) s (beside)")
}
steps_summary() {
  local IFS=,
  echo "${0##*/}: $((SECONDS - STEPS_START)) s in all:${STEP_TIMES[*]/#/ }"
}
