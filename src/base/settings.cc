#include "kiln/base/settings.h"

#include <strings.h>

#include <cstring>

#include "kiln/base/env.h"

namespace kiln {

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"KILN_CACHE_DIR", "where compiled kernels are cached (default $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln); "
                         "used only while it is yours and no one else may write it"},
      {"KILN_CACHE_SHARED", "1: also use a cache directory that its group may write, whoever owns it (every user "
                            "who can write there can run code in your processes); 0: only your own (default 0)", 0, 1},
      {"KILN_CC", "the cpu device's C compiler (default cc)"},
      {"KILN_CFLAGS", "extra flags for the cpu device's C compiler"},
      {"KILN_CC_TIMEOUT", "seconds before a C compile is stopped (default 600)", 1, 86400},
      {"KILN_CC_JOBS", "C compiles of one program's kernels run side by side (default: the cores)", 1, 256},
      {"KILN_CPU_THREADS", "threads of the cpu device, OpenBLAS's included (default: the cores)", 1, 1024},
      {"KILN_CPU_AFFINITY", "spread: once a cpu device has two queues, its queue threads pinned round-robin "
                            "over the process's cores; none: where the system puts them (default none)", 0, 0,
       {"spread", "none"}},
      {"KILN_LOG", "what kiln logs to standard error (default warn)", 0, 0, {"error", "warn", "info", "debug"}},
      {"KILN_TRACE_LINES", "values logged per statement by value tracing, 0 for all (default 16)", 0, 1u << 20},
      {"KILN_OPENCL_WORK_ITEMS", "work items per OpenCL work group (default: the device's choice)", 1, 1024},
      {"KILN_OPENCL_DEVICE_WAITS", "1 hands waits between OpenCL actions to the device, 0 keeps them on the host "
                                   "(default 1 except on CPU devices)", 0, 1},
      {"KILN_OPENCL_GEMM", "where gemm runs on opencl (default clblast except on CPU devices)", 0, 0,
       {"clblast", "host"}},
      {"KILN_CUDA_LIBRARY", "the CUDA driver library to load (default libcuda.so.1)"},
      {"KILN_CUDA_BLOCK_SIZE", "threads per CUDA block (default 128)", 1, 1024},
      {"KILN_CUDA_GRAPHS", "whether cuda replays a routine's kernels as a CUDA graph (default on)", 0, 0, {"on", "off"}},
      {"KILN_CUDA_GEMM", "where gemm runs on cuda (default cublas where it starts, else host)", 0, 0, {"cublas", "host"}},
      {"KILN_CUDA_COLLECTIVES", "how collectives between processes run on cuda (default nccl where it loads, else "
                                "host)", 0, 0, {"nccl", "host"}},
      {"KILN_NCCL_LIBRARY", "the NCCL library to load (default libnccl.so.2)"},
      {"KILN_COLLECTIVE_TIMEOUT", "seconds a rank waits for the others at a collective (default 60)", 0, 86400, {},
       true},
  };
  return table;
}

namespace {

const Setting* find_setting(const char* name) {
  for (const Setting& s : settings()) {
    if (std::strcmp(s.name, name) == 0) return &s;
  }
  return nullptr;
}

}  // namespace

Result<std::optional<uint64_t>> setting_uint(const char* name) {
  const Setting* s = find_setting(name);
  if (!s || s->max == 0 || s->seconds) return internal_error(std::string(name) + " is not a numeric setting of kiln");
  return env_uint(name, s->min, s->max);
}

Result<std::optional<double>> setting_seconds(const char* name) {
  const Setting* s = find_setting(name);
  if (!s || !s->seconds) return internal_error(std::string(name) + " is not a setting of kiln in seconds");
  return env_seconds(name, static_cast<double>(s->max));
}

Result<std::optional<std::string>> setting_choice(const char* name) {
  const Setting* s = find_setting(name);
  if (!s || s->choices.empty()) return internal_error(std::string(name) + " is not a setting of kiln with choices");
  std::optional<std::string> value = env_string(name);
  if (!value) return std::optional<std::string>();
  std::string list;
  for (const std::string& choice : s->choices) {
    if (strcasecmp(value->c_str(), choice.c_str()) == 0) return std::optional<std::string>(choice);
    list += (list.empty() ? "" : ", ") + choice;
  }
  return invalid_argument_error(std::string(name) + "='" + *value + "' is not one of " + list);
}

Status check_settings() {
  for (const Setting& s : settings()) {
    if (s.seconds) {
      KILN_RETURN_IF_ERROR(setting_seconds(s.name).status());
    } else if (s.max > 0) {
      KILN_RETURN_IF_ERROR(setting_uint(s.name).status());
    }
    if (!s.choices.empty()) KILN_RETURN_IF_ERROR(setting_choice(s.name).status());
  }
  return Status();
}

}  // namespace kiln
