# Sourced by demo.sh and test.sh. `phase NAME` closes the previous phase with its time and
# opens the next one, on stderr, so a long build shows where it is; `phase ""` closes the last.
# `clock SECONDS` formats a duration; `t0` is when the script began.
t0=$SECONDS
phase_t0=$SECONDS
phase_name=""
clock() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
phase() {
  if [ -n "$phase_name" ]; then
    echo "   (took $(clock $((SECONDS - phase_t0))))" >&2
  fi
  phase_name=$1
  phase_t0=$SECONDS
  [ -n "$1" ] && echo "== [$(clock $((SECONDS - t0)))] $1" >&2
  return 0
}
