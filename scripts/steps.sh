# Sourced by the scripts that take minutes (bench.sh, test.sh): `step <name> <usual> <command...>`
# names a step before it starts, with how long it usually takes on a 2-core machine, runs it,
# and says how long it took; `steps_summary <script>` prints the breakdown as its last line.
STEP_TIMES=()
STEPS_START=$SECONDS
step() { # step <name> <usual time> <command...>
  local name=$1 usual=$2 start=$SECONDS
  shift 2
  echo "${0##*/}: [$name] starting (usually $usual)"
  "$@"
  echo "${0##*/}: [$name] done in $((SECONDS - start)) s"
  STEP_TIMES+=("$name $((SECONDS - start)) s")
}
steps_summary() {
  local IFS=,
  echo "${0##*/}: $((SECONDS - STEPS_START)) s in all:${STEP_TIMES[*]/#/ }"
}
