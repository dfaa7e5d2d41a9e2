// The functions every registry starts with (Registry::global()): recv_input and send_output for
// the devices whose memory the host addresses directly (cpu, interp). The library kernels (gemm, sort, random numbers) are added here too.
#pragma once

#include "kiln/base/status.h"
#include "kiln/ral/registry.h"

namespace kiln::ral {

Status register_builtins(Registry& registry);

}  // namespace kiln::ral
