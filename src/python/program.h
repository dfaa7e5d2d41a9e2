// kiln.Program: a parsed, checked program (the IR), as the Python package holds it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>

#include "kiln/ir/program.h"

namespace kiln::python {

struct Program {
  ir::Program program;
  // The values params start from in every compile() (Program.set_param_value), in the order
  // set: what CompiledProgram::set takes, checked by it when compile() sets a copy.
  std::vector<std::pair<std::string, nanobind::object>> param_values;
};

}  // namespace kiln::python
