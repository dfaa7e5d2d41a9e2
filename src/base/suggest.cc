#include "base/suggest.h"

#include <algorithm>

namespace kiln {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Rows i-2, i-1 and i of the dynamic programme over prefixes of a and b.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);  // "ab" for "ba"
      }
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    const size_t longer = std::max(word.size(), c.size());
    if (d == 0 || d > 2 || 2 * d >= longer) continue;
    if (!best || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view quote) {
  std::optional<std::string> best = closest_name(word, candidates);
  if (!best) return "";
  return "; did you mean " + std::string(quote) + *best + std::string(quote) + "?";
}

}  // namespace kiln
