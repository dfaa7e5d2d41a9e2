#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (docs/fuzzing.md): for each target, first a replay of
# its seeds and of every input in tests/fuzz/regressions/<target>/, then SECONDS of fuzzing from
# the seeds. A crash, leak, timeout or out-of-memory fails the run; its input is copied into
# tests/fuzz/regressions/<target>/ (commit it with the fix) and the way to reproduce it printed.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]     (default: every target)
#
# FUZZ_JOBS targets run at once (default: the number of CPUs). Each target keeps the inputs it
# found in BUILD_DIR/fuzz/<target>/corpus, so a later run goes on from there.
set -uo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
fuzz="$root/tests/fuzz"
build="${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}"
seconds="${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}"
shift 2
build="$(cd "$build" && pwd)"
all_targets=(kiln_parse_fuzzer kiln_frontend_fuzzer npy_fuzzer loop_ir_fuzzer disk_cache_fuzzer)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
jobs="${FUZZ_JOBS:-$(nproc)}"

# The seed files of a target, one per line.
seeds_of() {
  case "$1" in
    kiln_parse_fuzzer|kiln_frontend_fuzzer)
      ls "$root"/examples/kiln/*.kiln "$fuzz"/corpus/kiln/* ;;
    npy_fuzzer) ls "$fuzz"/corpus/npy/* ;;
    loop_ir_fuzzer) ls "$root"/tests/codegen/golden_programs/*.lowered "$fuzz"/corpus/loop_ir/* ;;
    disk_cache_fuzzer) ls "$fuzz"/corpus/disk_cache/* ;;
    *) echo "run.sh: unknown target $1" >&2; return 1 ;;
  esac
}

dict_of() {
  case "$1" in
    kiln_parse_fuzzer|kiln_frontend_fuzzer) echo "-dict=$fuzz/kiln.dict" ;;
    npy_fuzzer) echo "-dict=$fuzz/npy.dict" ;;
    loop_ir_fuzzer) echo "-dict=$fuzz/loop_ir.dict" ;;
  esac
}

# Runs one target; its last line of output is "PASS ..." or "FAIL ...". Full log in work/log.
run_target() {
  local target="$1" binary="$build/tests/fuzz/$1" work="$build/fuzz/$1"
  local regressions="$fuzz/regressions/$target"
  mkdir -p "$work/corpus" "$work/seeds"
  rm -rf "$work/artifacts" && mkdir -p "$work/artifacts"
  : > "$work/log"
  if [ ! -x "$binary" ]; then
    echo "FAIL $target: $binary is not built"
    return
  fi
  local seeds
  seeds="$(seeds_of "$target")" || { echo "FAIL $target: no seeds"; return; }
  rm -f "$work/seeds"/* && while read -r f; do cp "$f" "$work/seeds/"; done <<< "$seeds"
  local replay=("$work"/seeds/*)
  [ -d "$regressions" ] && replay+=($(find "$regressions" -type f ! -name 'README*' | sort))
  # Replay: each file run once, whole (no -max_len truncation); the first failure stops it.
  if ! "$binary" -timeout=30 "${replay[@]}" >> "$work/log" 2>&1; then
    local failing
    failing="$(grep '^Running: ' "$work/log" | tail -1 | cut -d' ' -f2-)"
    echo "FAIL $target: replaying an input fails; reproduce: $binary $failing"
    return
  fi
  # Fuzzing: new inputs go to work/corpus, artifacts to work/artifacts.
  local options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192
                 -artifact_prefix="$work/artifacts/" -print_final_stats=1 $(dict_of "$target"))
  if "$binary" "${options[@]}" "$work/corpus" "$work/seeds" >> "$work/log" 2>&1; then
    echo "PASS $target: ${#replay[@]} inputs replayed, ${seconds} s fuzzed, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' | tail -1) executions"
    return
  fi
  local artifact
  artifact="$(ls "$work"/artifacts/{crash,leak,timeout,oom}-* 2>/dev/null | head -1)"
  if [ -z "$artifact" ]; then
    echo "FAIL $target: the fuzzer failed without leaving an input (log: $work/log)"
    return
  fi
  mkdir -p "$regressions"
  cp "$artifact" "$regressions/"
  local saved="tests/fuzz/regressions/$target/$(basename "$artifact")"
  echo "FAIL $target: $(basename "$artifact" | cut -d- -f1) on an input saved as $saved; reproduce: $binary $root/$saved"
}

results="$build/fuzz/results"
mkdir -p "$build/fuzz" && : > "$results"
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, ${jobs} at a time"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  ( line="$(run_target "$t")"; echo "$line" >> "$results"; echo "fuzz: $line" ) &
  running=$((running + 1))
done
wait

failed="$(grep -c '^FAIL' "$results")"
if [ "$failed" -ne 0 ]; then
  # Each failing target's report: from the sanitizer's (or the property's) first line, with the
  # stack, to its SUMMARY; the whole log is in BUILD_DIR/fuzz/<target>/log.
  for t in $(grep '^FAIL' "$results" | cut -d' ' -f2 | tr -d :); do
    log="$build/fuzz/$t/log"
    echo "==== $t ($log)"
    start="$(grep -n -m1 -E '^==[0-9]+==ERROR|fuzz property violated|runtime error:|ERROR: libFuzzer|terminate called' "$log" | cut -d: -f1)"
    if [ -n "$start" ]; then
      sed -n "${start},\$p" "$log" | awk '{ print } /^SUMMARY:/ { exit }' | head -n 45
    else
      tail -n 30 "$log"
    fi
  done
  echo "fuzz: FAILED: $failed of ${#targets[@]} targets failed (see the FAIL lines above; docs/fuzzing.md says how to reproduce and fix)"
  exit 1
fi
echo "fuzz: PASSED: ${#targets[@]} targets, ${seconds} s each, no crash, leak or timeout"
