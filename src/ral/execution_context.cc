#include "kiln/ral/execution_context.h"

#include <cstdlib>
#include <string>

namespace kiln::ral {

namespace {

// The ABI's call function: compiled code's one way into the runtime.
int call_from_compiled_code(kiln_ral_context_t* abi, const char* name, void** args) {
  return ExecutionContext::from_abi(abi).call(name, args);
}

}  // namespace

void ExecutionContext::AlignedFree::operator()(void* p) const { std::free(p); }

ExecutionContext::ExecutionContext(Context& context, uint64_t seed, uint64_t run)
    : abi_{&call_from_compiled_code, KILN_RAL_ABI_VERSION, 0, this}, context_(context), seed_(seed), run_(run) {
  context_.execution_started(*this);
}

ExecutionContext::~ExecutionContext() { finish().ignore(); }

int ExecutionContext::call(const char* full_name, void** args) {
  const Function* function = full_name ? context_.registry().lookup(full_name) : nullptr;
  if (!function) {
    Result<const Function*> missing = context_.registry().find(full_name ? full_name : "(null)");
    fail(missing.status());
    return 1;
  }
  Status status = function->invoke(*function, *this, args);
  if (status.ok() || status.code() == StatusCode::kDeferred) return 0;
  fail(status.annotate("RAL function '" + function->nickname + "' on device '" + function->device + "'"));
  return 1;
}

void ExecutionContext::set_input(int64_t index, kiln_ral_buffer_t buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  inputs_[index] = buffer;
}

Result<kiln_ral_buffer_t> ExecutionContext::recv_input(int64_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = inputs_.find(index);
  if (it == inputs_.end()) {
    return out_of_range_error("recv_input: the execution has no input " + std::to_string(index));
  }
  return it->second;
}

Status ExecutionContext::send_output(int64_t index, kiln_ral_buffer_t buffer) {
  if (buffer.rank < 0 || buffer.rank > 8 || (buffer.rank > 0 && !buffer.sizes)) {
    return invalid_argument_error("send_output " + std::to_string(index) + ": rank " +
                                  std::to_string(buffer.rank) + " is not 0 to 8, or sizes are missing");
  }
  Output output{buffer, std::vector<int64_t>(buffer.sizes, buffer.sizes + buffer.rank)};
  for (int64_t s : output.sizes) {
    if (s < 0) return invalid_argument_error("send_output " + std::to_string(index) + ": a negative size");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (outputs_.count(index)) {
    return already_exists_error("send_output: output " + std::to_string(index) + " was sent already");
  }
  auto [it, inserted] = outputs_.emplace(index, std::move(output));
  it->second.buffer.sizes = it->second.sizes.data();
  return Status();
}

Result<ExecutionContext::Output> ExecutionContext::output(int64_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = outputs_.find(index);
  if (it == outputs_.end()) {
    return not_found_error("the execution sent no output " + std::to_string(index));
  }
  Output copy = it->second;
  copy.buffer.sizes = copy.sizes.data();
  return copy;
}

Result<void*> ExecutionContext::workspace(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded < bytes) return resource_exhausted_error("workspace of " + std::to_string(bytes) + " bytes");
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (!p) {
    return resource_exhausted_error("cannot allocate a workspace of " + std::to_string(bytes) + " bytes");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  workspace_.emplace_back(p);
  return p;
}

uint64_t ExecutionContext::take_random_blocks(uint64_t blocks) {
  return random_blocks_.fetch_add(blocks, std::memory_order_relaxed);
}

void ExecutionContext::offer_completion(Completion completion) {
  std::lock_guard<std::mutex> lock(mutex_);
  completion_ = std::move(completion);
}

std::optional<ExecutionContext::Completion> ExecutionContext::take_completion() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<Completion> taken = std::move(completion_);
  completion_.reset();
  return taken;
}

void ExecutionContext::fail(Status status) {
  if (status.ok()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_error_.ok()) first_error_ = std::move(status);
}

Status ExecutionContext::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_error_;
}

Status ExecutionContext::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return *finished_;
  }
  fail(context_.execution_finished(*this));
  std::unordered_map<std::string, std::unique_ptr<Resource>> resources;
  std::vector<std::unique_ptr<void, AlignedFree>> workspace;
  std::lock_guard<std::mutex> lock(mutex_);
  resources.swap(resources_);
  workspace.swap(workspace_);
  finished_ = first_error_;
  return first_error_;
}

}  // namespace kiln::ral
