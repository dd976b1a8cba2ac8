# Sourced by the benchmarks (needs ROOT). bench_apt installs Debian packages a benchmark needs
# (idempotent); bench_venv makes the Python venv their peers run in, once and shared —
# Debian's python3 (for its python3-gi; the PATH's python3 may be another interpreter without
# gi), numpy and the pinned openvino wheel from .deps/wheels.
# Usage: bench_venv NAME   (NAME prefixes messages); sets VENV and PY. Needs ROOT.
bench_venv() {
  local name=$1
  VENV=.deps/bench-venv
  local sys_py=/usr/bin/python3 wheel check stamp
  wheel=$(ls .deps/wheels/openvino-2026.4.1-*.whl 2>/dev/null | head -n1 || true)
  [ -n "$wheel" ] || { echo "$name: .deps/wheels/openvino-2026.4.1-*.whl missing (run make setup)" >&2; exit 1; }
  check='import gi; gi.require_version("Gst", "1.0"); gi.require_version("GstApp", "1.0"); gi.require_version("GstVideo", "1.0"); from gi.repository import Gst, GstApp, GstVideo; import numpy, openvino'
  stamp="$VENV/.bench-ready-$(basename "$wheel")"
  if [ ! -f "$stamp" ] || ! "$VENV/bin/python" -c "$check" >/dev/null 2>&1; then
    [ -x "$sys_py" ] || { echo "$name: $sys_py (Debian's python3) missing" >&2; exit 1; }
    "$sys_py" -c 'import gi' 2>/dev/null || { echo "$name: $sys_py cannot import gi (apt python3-gi)" >&2; exit 1; }
    echo "$name: making $VENV (numpy, $(basename "$wheel"))" >&2
    rm -rf "$VENV"
    "$sys_py" -m venv --system-site-packages "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check 'numpy<2.6' "$wheel" >&2
    "$VENV/bin/python" -c "$check" || { echo "$name: $VENV cannot import gi, numpy and openvino" >&2; exit 1; }
    touch "$stamp"
  fi
  PY="$ROOT/$VENV/bin/python"
}

# Usage: bench_apt NAME PACKAGE…   installs the packages not installed yet (apt log on failure).
bench_apt() {
  local name=$1; shift
  local missing=() p apt_log
  for p in "$@"; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "$name: apt-get install ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp "/tmp/$name-apt.XXXXXX")
  if ! { apt-get install -y -q --no-install-recommends "${missing[@]}" >"$apt_log" 2>&1 \
         || { apt-get update -q >>"$apt_log" 2>&1 && apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$apt_log" 2>&1; }; }; then
    echo "$name: apt-get install ${missing[*]} failed:" >&2
    tail -n 15 "$apt_log" | sed 's/^/    /' >&2
    rm -f "$apt_log"
    exit 1
  fi
  rm -f "$apt_log"
}

# The median of the numbers on stdin ("" for none), and of the numbers in $TMP/NAME.
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print ""; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
med() { [ -f "$TMP/$1" ] && median <"$TMP/$1" || true; }

# --- Machine-readable figures, for bench/report.py (`make bench`) ---
# Every benchmark prints its own table as before and also writes what it measured, one
# "key<TAB>value" a line, to $BENCH_RESULTS/NAME.tsv (default out/bench/results; a relative path
# is taken from the repository's root, since the benchmarks run from different folders).
# Lists (one figure per run, in run order) are space-separated; the report computes the medians
# and every ratio from them itself. Why TSV and not JSON: the benchmarks are bash, and flat
# key/value lines need no quoting there. results_open starts the file anew, so a file left by an
# earlier run is never read as this run's; results_close ends it with the "status" line, so a
# file without one is a benchmark that stopped part-way. BENCH_RUN_ID (set by bench/all.sh) marks
# the files of one `make bench`; run alone, a benchmark writes "standalone".
BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RESULTS_FILE=${RESULTS_FILE:-}

# Usage: results_open NAME [SETTING=VALUE…]   sets RESULTS_FILE; records the settings used.
results_open() {
  local dir=${BENCH_RESULTS:-out/bench/results} kv
  [[ $dir = /* ]] || dir=$BENCH_ROOT/$dir
  mkdir -p "$dir"
  RESULTS_FILE=$dir/$1.tsv
  : >"$RESULTS_FILE"
  result bench "$1"
  result run_id "${BENCH_RUN_ID:-standalone}"
  result started "$(date -Iseconds)"
  result load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
  shift
  for kv in "$@"; do result "setting.${kv%%=*}" "${kv#*=}"; done
}

# Usage: result KEY VALUE…   one line; the values joined by spaces (tabs and newlines flattened).
result() {
  [ -n "$RESULTS_FILE" ] || return 0
  local key=$1; shift
  printf '%s\t%s\n' "$key" "$(printf '%s' "$*" | tr '\t\n' '  ')" >>"$RESULTS_FILE"
}

# Usage: result_list KEY FILE   the numbers in FILE (one a line) as one space-separated list.
result_list() { result "$1" "$([ -f "$2" ] && tr '\n' ' ' <"$2" | sed 's/ *$//' || true)"; }

# Usage: results_close STATUS   (the benchmark's exit code)
results_close() {
  result ended "$(date -Iseconds)"
  result load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
  result status "$1"
}

# Usage: bench_plot_venv NAME   bench_venv plus matplotlib (for bench/report.py's chart), added to
# the same venv with pip when it is missing (not part of bench_venv's check: a venv made before
# it is kept as is, not rebuilt under a benchmark that may be using it).
bench_plot_venv() {
  bench_venv "$1"
  if ! "$PY" -c 'import matplotlib' >/dev/null 2>&1; then
    echo "$1: adding matplotlib to $VENV" >&2
    "$PY" -m pip install -q --disable-pip-version-check 'matplotlib>=3.8,<3.11' >&2
    "$PY" -c 'import matplotlib' || { echo "$1: $VENV cannot import matplotlib" >&2; exit 1; }
  fi
}

# Usage: bench_mediapipe_venv NAME   the venv bench-detect's MediaPipe peer runs in
# (tools/mediapipe-venv.sh: mediapipe==0.10.21 and its pinned imports, made once). Sets MP_PY.
# Needs ROOT.
bench_mediapipe_venv() {
  "$ROOT/tools/mediapipe-venv.sh" || { echo "$1: cannot make .deps/mediapipe-venv" >&2; exit 1; }
  MP_PY="$ROOT/.deps/mediapipe-venv/bin/python"
}
