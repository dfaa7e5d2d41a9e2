// The half-moons data set, generated in code (no download).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/base/random.h"
#include "trainer.h"

namespace kiln::moons {

DataSet make_moons(int count, double noise, uint64_t seed) {
  Random random(seed * 0x9e3779b97f4a7c15ull + 12345);
  std::vector<float> x(2 * count), y(count);
  const double pi = std::acos(-1.0);
  for (int i = 0; i < count; ++i) {
    const bool upper = i % 2 == 0;
    const double t = pi * random.uniform();
    const double px = upper ? std::cos(t) : 1 - std::cos(t);
    const double py = upper ? std::sin(t) : 0.5 - std::sin(t);
    // Centred near the origin, so that tanh units start in their linear range.
    x[2 * i] = static_cast<float>(px - 0.5 + random.normal(0, noise));
    x[2 * i + 1] = static_cast<float>(py - 0.25 + random.normal(0, noise));
    y[i] = upper ? 0.0f : 1.0f;
  }
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  for (int i = count - 1; i > 0; --i) {
    std::swap(order[i], order[random.next_u64() % static_cast<uint64_t>(i + 1)]);
  }
  DataSet data;
  data.x.resize(2 * count);
  data.y.resize(count);
  for (int i = 0; i < count; ++i) {
    data.x[2 * i] = x[2 * order[i]];
    data.x[2 * i + 1] = x[2 * order[i] + 1];
    data.y[i] = y[order[i]];
  }
  return data;
}

}  // namespace kiln::moons
