// kiln.Program: a parsed, checked program (the IR), as the Python package holds it.
#pragma once

#include "kiln/ir/program.h"

namespace kiln::python {

struct Program {
  ir::Program program;
};

}  // namespace kiln::python
