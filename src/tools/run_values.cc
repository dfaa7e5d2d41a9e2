#include "tools/run_values.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>

#include "base/suggest.h"
#include "kiln/base/random.h"
#include "kiln/loop/op_eval.h"
#include "kiln/runtime/transfer.h"

namespace kiln::tools {

namespace {

// The seed's values of an input that no --input gives, drawn in element order from a stream
// named after the input: uniform in [-1, 1) for floats (rounded to the type), integers in
// [-8, 8] for signed types and [0, 16] for unsigned ones, false or true for bool.
void fill_random(const ir::TensorNode& node, uint64_t seed, std::span<std::byte> out) {
  Random random = Random::for_name(seed, "input:" + node.name);
  const int64_t n = node.element_count();
  const size_t size = ir::dtype_size(node.dtype);
  for (int64_t i = 0; i < n; ++i) {
    ir::Scalar v;
    if (ir::is_float_type(node.dtype)) v.f = random.uniform(-1, 1);
    else if (node.dtype == ir::DType::kBool) v.i = static_cast<int64_t>(random.next_u64() % 2);
    else if (ir::is_unsigned_type(node.dtype)) v.i = static_cast<int64_t>(random.next_u64() % 17);
    else v.i = static_cast<int64_t>(random.next_u64() % 17) - 8;
    ir::store_scalar(node.dtype, v, &out[static_cast<size_t>(i) * size]);
  }
}

Status fill_input(RunInput& input, uint64_t seed, std::span<std::byte> out) {
  if (!input.file) {
    fill_random(*input.node, seed, out);
    return Status();
  }
  KILN_RETURN_IF_ERROR(input.file->read_data_into(out));
  if (input.node->dtype == ir::DType::kBool) return check_npy_bools(out, input.file->path());
  return Status();
}

// Host memory for a tensor's bytes: a status, not an exception, when there is none.
Result<std::vector<std::byte>> host_buffer(const ir::TensorNode& node) {
  const auto bytes = static_cast<size_t>(node.byte_size());
  try {
    return std::vector<std::byte>(bytes);
  } catch (const std::exception&) {  // bad_alloc, length_error
    return resource_exhausted_error("no host memory for the " + std::to_string(bytes) + " bytes of '" +
                                    node.name + "'");
  }
}

// `context`'s array of `name` in place, where it has one and the device's memory is host memory;
// nullopt where the values go through the host copy instead.
Result<std::optional<runtime::HostView>> view_in_place(const runtime::ContextRef& context, const std::string& name) {
  if (!context->has_array(name)) return std::optional<runtime::HostView>();  // no routine being run uses it
  Result<runtime::HostView> view = runtime::host_view(context, name);
  if (view.ok()) return std::optional<runtime::HostView>(std::move(*view));
  if (view.status().code() == StatusCode::kUnimplemented) return std::optional<runtime::HostView>();
  return view.status();
}

}  // namespace

Result<RunInput> open_run_input(const ir::TensorNode& node, const std::string& file) {
  KILN_ASSIGN_OR_RETURN(NpyReader reader, NpyReader::open(file));
  return run_input(node, std::move(reader));
}

Result<RunInput> run_input(const ir::TensorNode& node, NpyReader reader) {
  const std::string& file = reader.path();
  if (!npy_holds(reader.header().dtype, node.dtype) || reader.header().shape != node.dims) {
    return invalid_argument_error(file + " holds " + describe(reader.header().dtype, reader.header().shape) +
                                  ", but " + std::string(ir::role_name(node.role)) + " '" + node.name + "' is " +
                                  describe(node.dtype, node.dims));
  }
  KILN_RETURN_IF_ERROR(reader.check_file_size());
  return RunInput{&node, std::move(reader)};
}

Result<ParamFiles> param_files(const ir::Program& program, const std::string& program_path, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return invalid_argument_error("--params " + dir + ": not a folder");
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".npy") names.push_back(entry.path().stem().string());
  }
  if (error) return errno_error(error.value(), "reading --params " + dir);
  std::sort(names.begin(), names.end());
  std::vector<std::string> params;
  for (const ir::TensorNode& n : program.nodes) {
    if (n.role == ir::Role::kParam) params.push_back(n.name);
  }
  ParamFiles files;
  for (const std::string& name : names) {
    if (std::find(params.begin(), params.end(), name) == params.end()) {
      return invalid_argument_error("--params " + dir + ": " + name + ".npy names no param of " + program_path +
                                    did_you_mean(name, params));
    }
    files.push_back({name, (fs::path(dir) / (name + ".npy")).string()});
  }
  return files;
}

Status set_run_inputs(std::vector<RunInput>& inputs, uint64_t seed, runtime::NodeTable& nodes,
                      std::span<const runtime::ContextRef> contexts) {
  for (RunInput& input : inputs) {
    const std::string& name = input.node->name;
    KILN_ASSIGN_OR_RETURN(std::optional<runtime::HostView> first, view_in_place(contexts.front(), name));
    if (first) {
      KILN_RETURN_IF_ERROR(fill_input(input, seed, first->bytes));
      for (const runtime::ContextRef& context : contexts.subspan(1)) {
        KILN_ASSIGN_OR_RETURN(runtime::HostView view, runtime::host_view(context, name));
        if (view.bytes.data() != first->bytes.data()) std::memcpy(view.bytes.data(), first->bytes.data(), view.bytes.size());
      }
      continue;
    }
    // Device memory, or no array (only the host copy is set): through the host copy, uploaded to
    // every context's array.
    KILN_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, host_buffer(*input.node));
    KILN_RETURN_IF_ERROR(fill_input(input, seed, bytes));
    KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, nodes.tensor(name));
    KILN_RETURN_IF_ERROR(tensor.write(bytes));
    for (const runtime::ContextRef& context : contexts) {
      if (context->has_array(name)) KILN_RETURN_IF_ERROR(runtime::from_host(context, name).status());
    }
  }
  return Status();
}

Status with_run_output(const runtime::ContextRef& context, runtime::NodeTable& nodes, const ir::TensorNode& node,
                       const std::function<Status(std::span<const std::byte>)>& use) {
  KILN_ASSIGN_OR_RETURN(std::optional<runtime::HostView> view, view_in_place(context, node.name));
  if (view) return use(view->bytes);
  if (context->has_array(node.name)) KILN_RETURN_IF_ERROR(runtime::to_host(context, node.name).status());
  KILN_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, host_buffer(node));
  KILN_ASSIGN_OR_RETURN(runtime::HostTensor tensor, nodes.tensor(node.name));
  KILN_RETURN_IF_ERROR(tensor.read(bytes));
  return use(bytes);
}

}  // namespace kiln::tools
