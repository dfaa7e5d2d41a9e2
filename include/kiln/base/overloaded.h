// Overloaded{lambdas...}: one visitor for std::visit out of several lambdas.
#pragma once

namespace kiln {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
// Needed by compilers without aggregate deduction (Clang before 17).
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace kiln
