// User requests of memory modes (kiln/ir/memory_mode.h).
#include "kiln/ir/memory_mode.h"

#include <string>

namespace kiln::ir {

namespace {

// Why `mode` cannot be the mode of `node` (its role alone), or "" if it can.
std::string role_refuses(const TensorNode& node, MemoryMode mode) {
  switch (node.role) {
    case Role::kInput:
    case Role::kOutput:
    case Role::kParam:
      if (mode != MemoryMode::kHosted && mode != MemoryMode::kOnDevice) {
        return "it is " + std::string(role_name(node.role)) +
               ", and inputs, outputs and params are always stored (@device or @hosted: the host sets or reads them)";
      }
      return "";
    case Role::kConst:
      if (mode == MemoryMode::kLocal) return "a const cannot be a local array (nothing writes it)";
      if (mode == MemoryMode::kVirtual && node.init.kind != Init::Kind::kValue) {
        return "only a const with a plain value can be virtual (folded into the code); this one is random";
      }
      return "";
    case Role::kTensor:
      return "";
  }
  return "unknown role";
}

Status refused(const TensorNode& node, MemoryMode mode, const std::string& why) {
  return invalid_argument_error("tensor '" + node.name + "' cannot be " +
                                std::string(memory_mode_name(mode)) + ": " + why);
}

}  // namespace

Status check_memory_mode_request(const TensorNode& node, MemoryMode mode) {
  if (mode == MemoryMode::kUnset) {
    return invalid_argument_error("tensor '" + node.name + "': 'unset' is not a memory mode to request");
  }
  if (std::string why = role_refuses(node, mode); !why.empty()) return refused(node, mode, why);
  if (node.memory != MemoryMode::kUnset && node.memory != mode) {
    return refused(node, mode, "it was already requested " + std::string(memory_mode_name(node.memory)));
  }
  return Status();
}

Status set_memory_mode(Program& program, std::string_view node, MemoryMode mode) {
  for (TensorNode& n : program.nodes) {
    if (n.name != node) continue;
    KILN_RETURN_IF_ERROR(check_memory_mode_request(n, mode));
    n.memory = mode;
    return Status();
  }
  return not_found_error("set_memory_mode: the program has no tensor named '" + std::string(node) + "'");
}

Status check_memory_modes(const Program& program) {
  for (const TensorNode& n : program.nodes) {
    if (n.memory == MemoryMode::kUnset) continue;
    if (std::string why = role_refuses(n, n.memory); !why.empty()) return refused(n, n.memory, why);
  }
  return Status();
}

}  // namespace kiln::ir
