// Translation units of a C executable source (kiln/kernel_abi.h, KILN_UNIT_BOUNDARY): the text
// common to every unit, the units, and how they are grouped into the sources the CPU driver
// compiles side by side and links into one shared object.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cpu {

struct CUnits {
  std::string_view common;             // before the first boundary: in every unit
  std::vector<std::string_view> units;  // each from a boundary line up to the next
};

// Splits `source` at lines that are exactly KILN_UNIT_BOUNDARY. A source without one is all
// common text and no units.
CUnits split_units(std::string_view source);

// The sources to compile: at most `jobs`, each the common text followed by some units in their
// order in `source`, and no more sources than give each at least `min_bytes` of units (a
// small program stays one source: every source parses the common text again). Units are dealt
// to the smallest source so far, largest first, so the compiles end at about the same time.
// One source (the whole text) when there is nothing to split.
std::vector<std::string> group_units(std::string_view source, size_t jobs, size_t min_bytes);

}  // namespace kiln::cpu
