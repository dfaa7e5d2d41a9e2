#!/bin/sh
# The demo across 2 processes, one core each, against 1 process on one core (README, "Scaling
# out"): the median time per epoch of each over ROUNDS alternating runs, the scaling, and from a
# traced run of the 2 ranks the share of rank 0's training time spent in collectives (the
# trace's "collective" events, on their own track: from a collective's start until every rank
# has taken part) and in their routine (`allreduce_merged`: the allreduces and their copies back).
#
#   bench/moons_ranks.sh [BUILD=build] [EPOCHS=200] [ROUNDS=5]
#
# As root, Open MPI wants OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (set here).
set -eu
build=${1:-build}
epochs=${2:-200}
rounds=${3:-5}
demo=$build/examples/train_moons/train_moons
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The "N ms per epoch" of rank 0's summary line.
per_epoch() { sed -n 's/^accuracy [0-9.]*%, \([0-9.]*\) ms per epoch.*/\1/p'; }

for round in $(seq "$rounds"); do
  taskset -c 0 "$demo" --streams 1 --epochs "$epochs" | per_epoch >>"$work/one"
  mpiexec -np 2 --bind-to core "$demo" --ranks --streams 1 --epochs "$epochs" | per_epoch >>"$work/two"
done
mpiexec -np 2 --bind-to core "$demo" --ranks --streams 1 --epochs "$epochs" \
  --trace "$work/trace.{rank}.json" | per_epoch >"$work/traced"

python3 - "$work" "$epochs" <<'EOF'
import json, statistics, sys
work, epochs = sys.argv[1], int(sys.argv[2])
one = [float(v) for v in open(f"{work}/one").read().split()]
two = [float(v) for v in open(f"{work}/two").read().split()]
m1, m2 = statistics.median(one), statistics.median(two)
print(f"1 process, 1 core:       {m1:.3f} ms per epoch (median of {len(one)}: {one})")
print(f"2 processes, 1 core each: {m2:.3f} ms per epoch (median of {len(two)}: {two})")
print(f"scaling: {m1 / m2:.2f}x faster (ideal 2x)")
events = json.load(open(f"{work}/trace.0.json"))
events = events["traceEvents"] if isinstance(events, dict) else events
spans = [e for e in events if e.get("ph") == "X"]
# Training ends with the last update; the evaluation after it is not part of an epoch.
end = max(e["ts"] + e["dur"] for e in spans if e["name"] == "update")
start = min(e["ts"] for e in spans)
traced = float(open(f"{work}/traced").read())
def covered(intervals):
    """The time covered by the intervals (collectives started together overlap)."""
    total, reach = 0.0, None
    for begin, stop in sorted(intervals):
        if reach is None or begin > reach:
            total, reach = total + stop - begin, stop
        elif stop > reach:
            total, reach = total + stop - reach, stop
    return total
for what, pick in (("collectives", lambda e: e.get("cat") == "collective"),
                   ("allreduce_merged", lambda e: e["name"] == "allreduce_merged")):
    spent = covered([(e["ts"], e["ts"] + e["dur"]) for e in spans if pick(e) and e["ts"] < end])
    per = spent / 1e3 / epochs
    print(f"traced run: {traced:.3f} ms per epoch; rank 0 in {what} {per:.3f} ms per epoch, "
          f"{100 * spent / (end - start):.1f}% of its traced training, {100 * per / m2:.1f}% of the untraced epoch")
EOF
