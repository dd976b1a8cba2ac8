#!/usr/bin/env bash
# Runs built tests a suite at a time, WORKERS (2) suites at once, each suite in its own process
# with its tests one after another: `make test` and tools/sanitize.sh.
# Usage: tools/run-suites.sh BUILD_PATH FILTER [SKIP]
#   BUILD_PATH  the folder `swift build --build-tests` wrote into (.build/debug, .build-asan/debug)
#   FILTER      an extended regular expression over test IDs ("Module.Suite/test(…)"), as
#               `swift test --filter` takes; SKIP (optional) one for those left out.
#
# Why: most of our tests wait on something real (a pipeline, a server, a browser), so one at a time
# leaves a core idle most of the run; two suites at once is "one core kept busy", the condition
# every test must already pass under (README, Testing). A suite keeps its tests in series, as the
# tests were written for; suites share nothing but the machine (each test takes free ports and its
# own scratch folder).
#
# The longest suites start first (seconds from the previous run in BUILD_PATH/suite-seconds, else
# SoakTests first: three minutes that the other worker fills with everything else). Each suite's
# output is printed whole when it ends; the last line sums them up, and the status is non-zero if
# any suite failed.
set -uo pipefail
build=${1:?usage: tools/run-suites.sh BUILD_PATH FILTER [SKIP]}; filter=${2:?a filter}; skip=${3:-}
workers=${WORKERS:-2}
bundle=$(ls -d "$build"/*PackageTests.xctest 2>/dev/null | head -n1)
[ -x "$bundle" ] || { echo "run-suites: no test bundle in $build (swift build --build-tests first)" >&2; exit 1; }
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
times="$build/suite-seconds"

# The tests chosen, grouped by suite: one line per suite, "Module.Suite<TAB>filter".
"$bundle" --testing-library swift-testing --list-tests 2>/dev/null | grep -E "$filter" \
  | { if [ -n "$skip" ]; then grep -vE "$skip"; else cat; fi; } >"$logs/chosen"
[ -s "$logs/chosen" ] || { echo "run-suites: no test matches '$filter'" >&2; exit 1; }
# A test ID as a regular expression that matches it alone (Swift Testing matches from the start).
escape() { sed -e 's/[][\.*^$()+?{}|]/\\&/g'; }
awk -F/ '{print $1}' "$logs/chosen" | sort -u | while read -r suite; do
  ids=$(awk -F/ -v s="$suite" '$1 == s' "$logs/chosen" | escape | sed 's/^/^/' | paste -sd'|')
  printf '%s\t%s\n' "$suite" "$ids"
done >"$logs/jobs"

# Longest first.
order() {
  if [ -s "$times" ]; then
    awk -F'\t' 'NR==FNR {s[$1]=$2; next} {print (($1 in s) ? s[$1] : 0) "\t" $0}' "$times" "$logs/jobs" | sort -t$'\t' -k1,1 -rn | cut -f2-
  else
    { grep -E '\.SoakTests	' "$logs/jobs"; grep -vE '\.SoakTests	' "$logs/jobs"; }
  fi
}

run_one() {  # suite, filter
  local suite=$1 ids=$2 log="$logs/${1//\//_}.log" start status
  start=$(date +%s)
  "$bundle" --testing-library swift-testing --no-parallel --filter "$ids" >"$log" 2>&1; status=$?
  local took=$(( $(date +%s) - start ))
  printf '%s\t%s\n' "$suite" "$took" >>"$logs/seconds"
  [ "$status" -eq 0 ] || echo "$suite" >>"$logs/failed"
  {
    flock 9
    echo "── $suite: $( [ "$status" -eq 0 ] && echo passed || echo "FAILED (status $status)" ) in ${took} s"
    cat "$log"
  } 9>"$logs/print.lock"
  return 0
}
export -f run_one; export bundle logs

start=$(date +%s)
order | tr '\t' '\n' | xargs -d '\n' -n 2 -P "$workers" bash -c 'run_one "$1" "$2"' _
took=$(( $(date +%s) - start ))
# The seconds of the suites that ran replace theirs; the others' are kept (a run of a few suites
# leaves the order of the next whole run as it was).
if [ -s "$logs/seconds" ]; then
  { cat "$logs/seconds"; [ -s "$times" ] && cat "$times"; } | awk -F'\t' '!seen[$1]++' >"$logs/merged" && cp "$logs/merged" "$times" 2>/dev/null || true
fi

tests=$(wc -l <"$logs/chosen"); suites=$(wc -l <"$logs/jobs")
if [ -s "$logs/failed" ]; then
  echo "run-suites: $(wc -l <"$logs/failed") of $suites suites FAILED in ${took} s ($workers at once): $(paste -sd' ' "$logs/failed")"
  exit 1
fi
echo "run-suites: $tests test$([ "$tests" = 1 ] || echo s) in $suites suite$([ "$suites" = 1 ] || echo s) passed in ${took} s ($workers at once)"
