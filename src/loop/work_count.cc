// The lowering work counter (work_count.h).
#include "loop/work_count.h"

#include <atomic>

namespace kiln::ir {

namespace {
std::atomic<uint64_t> g_work{0};
}  // namespace

uint64_t lowering_work() { return g_work.load(std::memory_order_relaxed); }
void count_lowering_work(uint64_t units) { g_work.fetch_add(units, std::memory_order_relaxed); }

}  // namespace kiln::ir
