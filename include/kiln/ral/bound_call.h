// BoundCall: a `call` statement bound to the registered function that runs it on one device,
// with its arguments packed the way the ABI wants them (kiln/ral/abi.h).
//
// Argument order (docs/ral.md, "Calls from a program"): the context, the tensor arguments as
// memrefs, the outputs as memrefs, then the attributes. A built-in's attributes are all of its
// attributes in its own order (defaults filled in) with their declared types, and the random
// functions get the call site last; a host function's attributes are the ones written, in
// order, each as f64. The full name follows from those types, so binding is a lookup of one
// name (Registry::resolve, which makes it from a generic function where one covers the call);
// a miss is NOT_FOUND naming the function and the device.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/status.h"
#include "kiln/codegen/call_kernel.h"
#include "kiln/ir/program.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/registry.h"

namespace kiln::ral {

class BoundCall {
 public:
  // `call_site` keys the random functions' streams (ir::LoweredCall::call_site).
  static Result<BoundCall> bind(const ir::Call& call, const ir::Program& program, int call_site,
                                std::string_view device, Registry& registry);
  // The same packing and full name without looking the function up (for code generated before
  // the program is linked; linking binds it).
  static Result<BoundCall> describe(const ir::Call& call, const ir::Program& program, int call_site,
                                    std::string_view device);

  const std::string& function() const { return function_; }
  const std::string& full_name() const { return full_name_; }
  // The nodes passed, in order: tensor arguments, then outputs (the last `output_count()`).
  const std::vector<int>& tensors() const { return tensors_; }
  size_t output_count() const { return output_count_; }
  // Whether tensors()[t] is an output.
  bool is_output(size_t t) const { return t + output_count_ >= tensors_.size(); }
  // Whether the function reads its outputs' old values too (gemm with beta != 0).
  bool reads_outputs() const { return reads_outputs_; }
  // Where the function wants its memrefs to point (Function::memory; kHost until bound).
  Memory memory() const { return memory_; }
  // Whether the function is a collective (Function::collective; false until bound).
  bool collective() const { return collective_; }

  // The multiply-adds the call does at `program`'s shapes (the program it was bound for, or that
  // program at its sizes) where kiln knows the function's work: gemm's op(a) (M x K) times op(b)
  // (K x N), batched, is a's elements times N; conv2d's is y's elements times a window's
  // (C / groups) · KH · KW. nullopt for every other function (a custom
  // function's work is the caller's to know).
  std::optional<int64_t> multiply_adds(const ir::Program& program) const;

  // Runs the function in `execution` with one data pointer per tensor (tensors() order). OK, or
  // the function's error annotated with the function and the device; the execution keeps the
  // first error too.
  Status invoke(ExecutionContext& execution, std::span<void* const> data) const;

  // The call as a CPU kernel named `name` that makes the same call through its RAL context
  // (codegen/call_kernel.h): binding i is tensors()[i].
  codegen::CallKernel kernel(std::string name) const;

 private:
  // An attribute's value as the function takes it.
  struct Scalar {
    enum class Type { kI64, kF32, kF64 } type;
    int64_t i64 = 0;
    float f32 = 0;
    double f64 = 0;
  };

  std::string function_;
  std::string full_name_;
  std::vector<int> tensors_;
  size_t output_count_ = 0;
  bool reads_outputs_ = false;
  Memory memory_ = Memory::kHost;
  bool collective_ = false;
  std::vector<std::vector<int64_t>> sizes_;  // per tensor
  std::vector<int64_t> bytes_;               // per tensor
  std::vector<Scalar> scalars_;
};

}  // namespace kiln::ral
