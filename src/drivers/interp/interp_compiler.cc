#include "drivers/interp/interp_compiler.h"

#include <utility>

#include "drivers/interp/interp_executable.h"
#include "drivers/interp/interpreter.h"
#include "kiln/loop/loop.h"

namespace kiln::interp {

namespace {

// The first local declaration in `s` larger than kMaxLocalElements, or null.
const ir::LStmt* oversized_local(const ir::LStmt* s) {
  if (!s) return nullptr;
  if (s->kind == ir::LStmt::Kind::kLocalDecl && s->local_size > kMaxLocalElements) return s;
  for (const ir::LStmtRef& child : s->body) {
    if (const ir::LStmt* found = oversized_local(child.get())) return found;
  }
  return nullptr;
}

}  // namespace

Result<std::shared_ptr<cpu::HostExecutable>> InterpCompiler::compile(
    const hal::ExecutableSource& source, const void* device_tag) {
  const std::string where = "executable '" + source.label + "'";
  Result<std::vector<ir::Kernel>> parsed = ir::parse_kernels(source.source);
  if (!parsed.ok()) return parsed.status().annotate(where + ": error in the kernel text");
  std::vector<ir::Kernel>& kernels = *parsed;

  std::vector<Interpreter> interpreters;
  interpreters.reserve(source.exports.size());
  for (const hal::ExportInfo& e : source.exports) {
    ir::Kernel* kernel = nullptr;
    for (ir::Kernel& k : kernels) {
      if (k.name == e.name) kernel = &k;
    }
    if (!kernel) {
      std::string defined;
      for (const ir::Kernel& k : kernels) defined += (defined.empty() ? "" : ", ") + k.name;
      return not_found_error(where + ": export '" + e.name + "' has no kernel in the source (" +
                             (defined.empty() ? std::string("it defines none")
                                              : "it defines " + defined) +
                             ")");
    }
    if (e.binding_count != kernel->nodes.size()) {
      return invalid_argument_error(where + ": export '" + e.name + "' declares " +
                                    std::to_string(e.binding_count) +
                                    " bindings but its kernel lists " +
                                    std::to_string(kernel->nodes.size()) + " nodes");
    }
    if (e.constant_count != 2 * static_cast<uint32_t>(kernel->size_count)) {
      return invalid_argument_error(where + ": export '" + e.name + "' declares " +
                                    std::to_string(e.constant_count) + " push constants; its kernel takes " +
                                    std::to_string(2 * kernel->size_count) + " (two per size it declares)");
    }
    if (const ir::LStmt* local = oversized_local(kernel->body.get())) {
      return invalid_argument_error(where + ": kernel '" + e.name + "' declares local " +
                                    std::to_string(local->local) + " of " +
                                    std::to_string(local->local_size) +
                                    " elements; the interpreter allows at most " +
                                    std::to_string(kMaxLocalElements));
    }
    // A copy: two exports may name the same kernel.
    interpreters.emplace_back(*kernel);
  }
  return std::shared_ptr<cpu::HostExecutable>(
      std::make_shared<InterpExecutable>(device_tag, source.exports, std::move(interpreters)));
}

}  // namespace kiln::interp
