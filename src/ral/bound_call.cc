#include "kiln/ral/bound_call.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "base/suggest.h"
#include "kiln/ir/call.h"
#include "kiln/ral/element_types.h"

namespace kiln::ral {

namespace {

// The memref code of a node: mNdT, T its element type's code (kiln/ral/element_types.h).
std::string memref_code(const ir::TensorNode& node) {
  return "m" + std::to_string(node.dims.size()) + "d" + std::string(dtype_code(node.dtype));
}

// Whether `name` is a function or a reduction of the language's expressions (sum, max, exp, ...),
// which a `call` statement cannot name.
bool is_expression_function(const std::string& name) {
  for (int op = 0; op <= static_cast<int>(ir::Op::kFma); ++op) {
    if (ir::op_name(static_cast<ir::Op>(op)) == name) return std::isalpha(static_cast<unsigned char>(name[0])) != 0;
  }
  for (ir::Reduce r : {ir::Reduce::kSum, ir::Reduce::kProd, ir::Reduce::kMax, ir::Reduce::kMin, ir::Reduce::kMean,
                       ir::Reduce::kArgmax, ir::Reduce::kArgmin}) {
    if (ir::reduce_name(r) == name) return true;
  }
  return false;
}

// The nicknames of the functions registered for `device`.
std::vector<std::string> nicknames_for(const Registry& registry, std::string_view device) {
  std::set<std::string> names;
  const std::string middle = "___" + std::string(device) + "___";
  for (const std::string& full : registry.full_names()) {
    const size_t at = full.find(middle);
    if (at != std::string::npos) names.insert(full.substr(0, at));
  }
  return {names.begin(), names.end()};
}

}  // namespace

Result<BoundCall> BoundCall::describe(const ir::Call& call, const ir::Program& program, int call_site,
                                      std::string_view device) {
  BoundCall bound;
  bound.function_ = call.function;
  std::string codes = "pvoid";
  auto add_tensor = [&](int node) -> Status {
    if (node < 0 || static_cast<size_t>(node) >= program.nodes.size()) {
      return internal_error("call " + call.function + " names node " + std::to_string(node) + ", which does not exist");
    }
    const ir::TensorNode& n = program.nodes[static_cast<size_t>(node)];
    bound.tensors_.push_back(node);
    bound.sizes_.push_back(n.dims);
    bound.bytes_.push_back(n.byte_size());
    codes += "_" + memref_code(n);
    return Status();
  };
  for (int node : ir::call_tensors(call)) KILN_RETURN_IF_ERROR(add_tensor(node));
  bound.output_count_ = call.outputs.size();

  auto add_scalar = [&](Scalar::Type type, double value) {
    Scalar s{type};
    s.i64 = type == Scalar::Type::kI64 ? static_cast<int64_t>(value) : 0;  // a value may be inf (clip_max's default)
    // Beyond f32's range a finite value would be undefined as a float: it is the infinity there.
    const double f32_max = std::numeric_limits<float>::max();
    s.f32 = std::isfinite(value) && std::abs(value) > f32_max ? std::copysign(std::numeric_limits<float>::infinity(), value)
                                                              : static_cast<float>(value);
    s.f64 = value;
    bound.scalars_.push_back(s);
    codes += type == Scalar::Type::kI64 ? "_i64" : type == Scalar::Type::kF32 ? "_f32" : "_f64";
  };
  if (const ir::BuiltinCall* builtin = ir::find_builtin_call(call.function)) {
    // Flags and counts are i64; values have the element type of the first output (c of gemm, r of random).
    if (call.outputs.empty()) return internal_error("call " + call.function + " has no output");
    const ir::DType element = program.nodes[static_cast<size_t>(call.outputs.front())].dtype;
    const Scalar::Type value_type = element == ir::DType::kF64 ? Scalar::Type::kF64 : Scalar::Type::kF32;
    for (const ir::CallAttribute& a : builtin->attributes) {
      const bool integer = a.rule == ir::CallAttribute::Rule::kFlag || a.rule == ir::CallAttribute::Rule::kCount;
      add_scalar(integer ? Scalar::Type::kI64 : value_type,
                 ir::call_attribute(call, a.name));
    }
    if (call.function.starts_with("random_")) add_scalar(Scalar::Type::kI64, call_site);
    bound.reads_outputs_ = call.function == "gemm" && ir::call_attribute(call, "beta") != 0;
  } else {
    for (const ir::CallArg& a : call.args) {
      if (a.node < 0) add_scalar(Scalar::Type::kF64, a.value);
    }
  }
  bound.full_name_ = call.function + "___" + std::string(device) + "___" + codes + "___void";
  return bound;
}

Result<BoundCall> BoundCall::bind(const ir::Call& call, const ir::Program& program, int call_site,
                                  std::string_view device, Registry& registry) {
  KILN_ASSIGN_OR_RETURN(BoundCall bound, describe(call, program, call_site, device));
  CallSite site{bound.full_name_, call.function, std::string(device), call.outputs.size(), {}};
  for (const ir::CallArg& a : call.args) {
    if (a.node < 0) site.attributes.push_back(a.attribute);
  }
  KILN_ASSIGN_OR_RETURN(const Function* found, registry.resolve(site));
  if (found) {
    bound.memory_ = found->memory;
    bound.collective_ = found->collective;
    if (found->takes_device_memory && bound.memory_ != Memory::kHost) {
      Result<bool> on_device = found->takes_device_memory();
      if (!on_device.ok()) return on_device.status().annotate("call " + call.function + " on " + std::string(device));
      if (!*on_device) bound.memory_ = Memory::kHost;
    }
    return bound;
  }

  // Say what is registered under the nickname, if anything: the usual mistake is a signature.
  std::string known;
  if (Result<std::vector<const Function*>> overloads = registry.find_nickname(call.function, device); overloads.ok()) {
    for (const Function* f : *overloads) known += (known.empty() ? "" : ", ") + f->full_name;
  }
  std::string hint;
  if (known.empty() && is_expression_function(call.function)) {
    hint = "; " + call.function + " is a function or reduction of expressions (y[i] = " + call.function +
           "(...)), not a function to call";
  } else if (known.empty()) {
    hint = did_you_mean(call.function, nicknames_for(registry, device));
  }
  return not_found_error("call " + call.function + ": no function '" + call.function + "' is registered for device '" +
                         std::string(device) + "' with these arguments (looked for " + bound.full_name_ + "; " +
                         (known.empty() ? std::string("nothing of that name is registered for the device")
                                        : "registered: " + known) +
                         ")" + hint);
}

std::optional<int64_t> BoundCall::multiply_adds(const ir::Program& program) const {
  const bool blocked_data = function_ == "conv2d_blocked";
  if ((function_ == "conv2d" || blocked_data) && tensors_.size() >= 4) {  // each y element sums (C / groups) · KH · KW terms
    const ir::TensorNode& w = program.nodes[static_cast<size_t>(tensors_[1])];
    const ir::TensorNode& y = program.nodes[static_cast<size_t>(tensors_.back())];
    // w's output channels: its first dimension, or its last with transpose_w=1 (the last
    // attribute); with transpose_w=16 (conv2d_blocked's only layout) blocks of 16 output
    // channels, its first dimension. conv2d_blocked's y counts the lanes past O too.
    const int64_t layout = blocked_data ? 16 : scalars_.empty() ? 0 : scalars_.back().i64;
    const size_t outs = layout == 1 && w.dims.size() == 4 ? 3 : 0;
    const int64_t outs_count = w.dims.empty() ? 0 : layout == 16 ? w.dims[0] * 16 : w.dims[outs];
    const int64_t per_point = outs_count <= 0 ? 0 : w.element_count() / outs_count;
    if (per_point == 0) return 0;
    return y.element_count() > INT64_MAX / per_point ? INT64_MAX : y.element_count() * per_point;
  }
  if (function_ != "gemm" || tensors_.size() < 3) return std::nullopt;
  const ir::TensorNode& a = program.nodes[static_cast<size_t>(tensors_.front())];
  const ir::TensorNode& c = program.nodes[static_cast<size_t>(tensors_.back())];
  const int64_t n = c.dims.empty() ? 0 : c.dims.back();
  if (n <= 0) return 0;
  return a.element_count() > INT64_MAX / n ? INT64_MAX : a.element_count() * n;
}

Status BoundCall::invoke(ExecutionContext& execution, std::span<void* const> data) const {
  if (data.size() != tensors_.size()) {
    return internal_error("call " + function_ + ": " + std::to_string(data.size()) + " data pointers for " +
                          std::to_string(tensors_.size()) + " tensors");
  }
  // A memref is the data pointer, then its sizes (kiln_ral_memref(N)): 8-byte words.
  static_assert(sizeof(void*) == sizeof(uint64_t), "the RAL ABI packs memrefs as 64-bit words");
  std::vector<std::vector<uint64_t>> memrefs(tensors_.size());
  std::vector<void*> args;
  args.reserve(1 + tensors_.size() + scalars_.size());
  kiln_ral_context_t* abi = execution.abi();
  args.push_back(&abi);
  for (size_t t = 0; t < tensors_.size(); ++t) {
    std::vector<uint64_t>& m = memrefs[t];
    m.resize(1 + sizes_[t].size());
    std::memcpy(&m[0], &data[t], sizeof(void*));
    if (!sizes_[t].empty()) std::memcpy(m.data() + 1, sizes_[t].data(), sizes_[t].size() * sizeof(int64_t));  // a scalar has none
    args.push_back(m.data());
  }
  for (const Scalar& s : scalars_) {
    args.push_back(s.type == Scalar::Type::kI64   ? static_cast<void*>(const_cast<int64_t*>(&s.i64))
                   : s.type == Scalar::Type::kF32 ? static_cast<void*>(const_cast<float*>(&s.f32))
                                                  : static_cast<void*>(const_cast<double*>(&s.f64)));
  }
  if (execution.call(full_name_.c_str(), args.data()) == 0) return Status();
  return execution.status();
}

codegen::CallKernel BoundCall::kernel(std::string name) const {
  codegen::CallKernel k;
  k.name = std::move(name);
  k.function = full_name_;
  for (size_t t = 0; t < tensors_.size(); ++t) k.tensors.push_back({sizes_[t], bytes_[t], {}});
  for (const Scalar& s : scalars_) {
    using Type = codegen::CallKernel::Scalar::Type;
    k.scalars.push_back({s.type == Scalar::Type::kI64   ? Type::kI64
                         : s.type == Scalar::Type::kF32 ? Type::kF32
                                                        : Type::kF64,
                         s.i64, s.type == Scalar::Type::kF32 ? static_cast<double>(s.f32) : s.f64});
  }
  return k;
}

}  // namespace kiln::ral
