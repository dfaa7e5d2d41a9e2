#!/bin/sh
# The phases of `make test` and their times (make prints them at the end, README has the total).
#   timed.sh LOG NAME COMMAND...   runs COMMAND; appends "NAME SECONDS" to LOG; exits as COMMAND did
#   timed.sh LOG --report          prints each phase and the total
set -u
log=$1
shift
if [ "$1" = "--report" ]; then
  [ -f "$log" ] || exit 0
  awk '{ printf "  %-24s %6d s  %5.1f min\n", $1, $2, $2 / 60; total += $2 }
       END { printf "  %-24s %6d s  %5.1f min\n", "total", total, total / 60 }' "$log"
  exit 0
fi
name=$1
shift
mkdir -p "$(dirname "$log")"
start=$(date +%s)
"$@"
status=$?
echo "$name $(( $(date +%s) - start ))" >> "$log"
exit $status
