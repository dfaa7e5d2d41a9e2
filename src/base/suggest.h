// "Did you mean ...?": the known name closest to a misspelt one (an option, a command, a
// routine, a driver), by edit distance.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Edit distance (optimal string alignment): insertions, deletions and substitutions of one byte
// and transpositions of two neighbours ("stpe" is one edit from "step") each count one.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, when it is close enough to be a likely typo: at most 2 edits
// away and fewer edits than half the longer name (so that "--bogus" suggests nothing).
// Ties go to the first candidate.
std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& candidates);

// "; did you mean 'X'?" (with `quote` around X, e.g. "'" or ""), or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view quote = "'");

}  // namespace kiln
