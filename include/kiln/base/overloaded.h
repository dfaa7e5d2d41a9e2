// Overloaded{lambdas...}: one visitor for std::visit out of several lambdas.
#pragma once

namespace kiln {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

}  // namespace kiln
