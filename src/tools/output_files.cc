#include "tools/output_files.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "kiln/base/file.h"
#include "tools/cli.h"

namespace kiln::tools {

namespace {

// Where a name that does not exist yet would be created: its directory's real path and its own
// name, so that "out.npy" and "./out.npy" compare equal.
std::string created_path(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return path;
  std::filesystem::path created = std::filesystem::weakly_canonical(absolute, error);
  return error ? absolute.lexically_normal().string() : created.string();
}

}  // namespace

std::optional<Failure> check_outputs(const Options& o, const ir::Program* program) {
  struct Read {
    std::string what, node;  // node: the input's name, empty for the program
    FileIdentity identity;
  };
  std::vector<Read> read;
  auto identify = [&](const std::string& what, const std::string& node, const std::string& path) -> std::optional<Failure> {
    Result<std::optional<FileIdentity>> id = file_identity(path);
    if (!id.ok()) return runtime_failure(id.status(), what);
    if (*id) read.push_back({what, node, **id});
    return std::nullopt;
  };
  if (auto f = identify("the program", "", o.program)) return f;
  for (const auto& [name, file] : o.inputs) {
    if (auto f = identify("--input " + name + "=" + file, name, file)) return f;
  }
  auto is_param = [&](const std::string& name) {
    const ir::TensorNode* node = program ? program->find_node(name) : nullptr;
    return node && node->role == ir::Role::kParam;
  };
  std::vector<std::pair<std::string, std::string>> written;  // option text, path
  std::vector<std::string> written_node;                     // the --output's node, else empty
  for (const auto& [name, file] : o.outputs) {
    written.push_back({"--output " + name + "=" + file, file});
    written_node.push_back(name);
  }
  if (!o.trace.empty()) written.push_back({"--trace " + o.trace, o.trace});
  if (!o.trace_values.empty()) written.push_back({"--trace-values " + o.trace_values, o.trace_values});
  if (!o.out_file.empty()) written.push_back({"-o " + o.out_file, o.out_file});
  written_node.resize(written.size());
  // Each output's identity, or where it would be created; empty for a device or a FIFO, which
  // may be written twice (--output y=/dev/null --trace /dev/null).
  std::vector<std::pair<std::optional<FileIdentity>, std::string>> targets;
  for (size_t i = 0; i < written.size(); ++i) {
    const auto& [option, path] = written[i];
    Result<std::optional<FileIdentity>> id = file_identity(path);
    if (!id.ok()) return runtime_failure(id.status(), option);
    if (*id && !(*id)->regular) {
      targets.push_back({std::nullopt, ""});
      continue;
    }
    // Only a regular file is destroyed by writing it; a device (/dev/stdout) may be both.
    for (const Read& r : read) {
      if (*id && r.identity == **id) {
        if (!r.node.empty() && r.node == written_node[i] && is_param(r.node)) continue;  // in place
        return invalid_input(option + ": the output is " + r.what + " (" + path +
                             "); writing it would destroy what kiln reads");
      }
    }
    // Where the output cannot be written (a missing or read-only directory, /proc/version), say
    // so now, before compiling and running anything.
    if (Status writable = check_output_file(path); !writable.ok()) return runtime_failure(writable, option);
    targets.push_back({*id, *id ? "" : created_path(path)});
    for (size_t j = 0; j < i; ++j) {
      const bool same = *id ? targets[j].first == **id
                            : !targets[j].second.empty() && targets[j].second == targets[i].second;
      if (same) {
        return invalid_input(option + ": the output is also " + written[j].first + " (" + path +
                             "); one would overwrite the other");
      }
    }
  }
  return std::nullopt;
}

}  // namespace kiln::tools
