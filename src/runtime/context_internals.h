// Members of Context that only the runtime uses: private there, so that they are not part of the
// API, and reached through here by the runtime's code that Context does not befriend.
#pragma once

#include <memory>
#include <string_view>

#include "kiln/base/status.h"
#include "kiln/runtime/context.h"

namespace kiln::runtime {

struct ContextInternals {
  // Under the scheduling mutex. FAILED_PRECONDITION when the context or an ancestor was
  // finalized; NOT_FOUND when no context of the tree has the node.
  static Result<std::shared_ptr<DeviceArray>> find_array(const Context& context, std::string_view node) {
    return context.find_array(node);
  }
  static Status check_usable(const Context& context) { return context.check_usable(); }
};

}  // namespace kiln::runtime
