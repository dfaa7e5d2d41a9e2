#!/bin/sh
# Checks that every public header (include/kiln) compiles alone with only include/ on the include
# path, and that its quoted includes name headers under include/: an installed kiln has no src/.
# Usage: public_headers.sh SOURCE_DIR CXX
set -u
source_dir=$1
cxx=$2
cd "$source_dir/include" || exit 2
failures=$(mktemp)
trap 'rm -f "$failures"' EXIT

for header in $(find kiln -name '*.h' | sort); do
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$header" |
    while read -r included; do
      [ -f "$included" ] || echo "$header: includes \"$included\", which is not under include/" >>"$failures"
    done
done

# Two at a time: -fsyntax-only of a header costs about a second, mostly the standard library.
find kiln -name '*.h' | sort | xargs -P 2 -I HEADER \
  sh -c 'out=$("$1" -std=c++20 -I. -fsyntax-only -x c++ "$2" 2>&1) ||
         echo "$2: does not compile alone: $(echo "$out" | grep -m 1 "error")" >>"$3"' \
  sh "$cxx" HEADER "$failures"

if [ -s "$failures" ]; then
  sort "$failures"
  exit 1
fi
echo "$(find kiln -name '*.h' | wc -l) public headers compile alone"
