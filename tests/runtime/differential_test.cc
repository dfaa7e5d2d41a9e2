// Differential testing of the compiler: random valid `.kiln` programs run on the reference
// interpreter (`interp`, with every intermediate stored and no optimization passes:
// LowerOptions::inline_virtual and optimize off) and on the CPU (`cpu`, generated C, default
// lowering with single-use intermediates inlined and the kernels optimized), and every
// output and param must agree: integers and bool exactly, f32 and f64 within a tolerance
// (relative 1e-4 plus absolute 1e-5), f16 and bf16 within one unit in the last place of their
// type (or 1e-5: narrow_close).
// The reference also runs one kernel per statement (fusion, collapsing of leading dims and local
// arrays off), the CPU the default grouping; the generator writes "row blocks" for fusion to find
// (statements sharing a leading dim, intermediates read row by row, small rows).
// The CPU side is the real `cpu` driver at the flags it uses for every program (the test opens it
// with default options: no compiler or flags of its own). Every KILN_DIFF_OPENCL_EVERY-th program
// of a shard (0: none) also runs on `opencl` and `cuda` where they are present: every 8th by default,
// every 4th in sanitizer builds (which check fewer programs); PoCL's build costs ~2 s a program.
// The CPU and OpenCL sides run the program as `kiln compile --emit ir` prints it, parsed again
// (which must also be structurally equal to the original); the reference runs the original.
//
// The generator is seeded and deterministic: program number N of a run uses seed
// KILN_DIFF_SEED + N (default base 1), so a failure report's seed reproduces the one program with
//   KILN_DIFF_SEED=<seed> KILN_DIFF_COUNT=1 ./kiln_runtime_test --gtest_filter='DifferentialTest.*'
// KILN_DIFF_COUNT sets how many programs a run checks in all (spread over the shards below).
//
// Programs are valid by construction (1-3 routines of 2-6 statements; tensors of rank 0-3 with
// dims 1-7, now and then 8 or 16, and row blocks of 64-71 rows, where the C dialect writes
// vector loops and products run in register tiles; every element type of language version 3,
// f32 about half the tensors; elementwise expressions with broadcasting, every function, casts
// to every type, comparisons (bool), select, & | ^ ~ << >> on integers and bool, true and false;
// reductions with every accumulation (sum, prod, max, min, mean of narrow integers and bool,
// argmax / argmin into integers of any type); compound
// subscripts with `where` bounds, triangular ones too (`where k < i + 2`); reads of the target at
// shifted points; intermediates; params
// shared by routines; consts in values, subscripts and bounds). They also avoid values that two
// correct implementations may compute differently beyond rounding:
//  - magnitudes stay bounded: a float tensor is either "bounded" (every write keeps it within
//    [-2, 2], so reads use it as is) or "free" (any size, even +-inf from an empty max/min; every
//    read squashes it through tanh or sigmoid);
//  - discontinuous operations (floor, ceil, comparisons, select's condition, casts to integers
//    and to f16 / bf16, argmax / argmin, and the conversion on assignment to an integer target)
//    only see exact values: inputs, literals, index values, integer arithmetic of any type
//    (which wraps identically everywhere: program_generator_integers.cc), exact f16 / bf16
//    tensors;
//  - integer values are tracked as ranges; one that may be large reaches a float expression
//    squashed (tanh(f32(n) * 0.125)); integer inputs are drawn now and then across their whole
//    range (input_values: the type's limits, all ones, the sign bit, random bit patterns), and
//    the programs build values at the limits (`~u64(0)`, `i8(1) << 7`), shift by amounts out of
//    range and divide by zero;
//  - an f16 / bf16 tensor other than an input is written either only with exact values (then
//    its rounding is the same everywhere and later statements may read it) or with anything,
//    by `=` only, and never read (one rounding apart between devices is allowed for it, and
//    reading it could magnify that);
//  - division of floats only by (1 + x * x), log only of abs(x) + 1, pow only of a base in
//    (0.5, 1.5), pow of integers only of values whose square is exact.
// Some programs hold a gather through select with an integer comparison,
//   p[a, b] = sum(select(t[a, b] == g, x[g, a, b], 0))
// with an integer index input t (i32, i8, u8, i16 or i64) holding -8..8 or 0..16 (some values
// out of range): GCC 12 at -O3
// -march=native once miscompiled that shape; others the gather itself (language version 2),
// `p[a, b] = x[t[a, b], a, b]` and variants, and reductions inside expressions, nested ones too.
// Several programs are concatenated into one file (names prefixed pN_) so that one C compiler run
// builds a whole batch; each program is also parsed on its own first. The generator is
// ProgramGenerator (program_generator.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/base/env.h"
#include "kiln/base/time.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/sizes.h"
#include "kiln/loop/lower.h"
#include "kiln/lang/parser.h"
#include "ir/program_equal.h"
#include "runtime/e2e_util.h"
#include "runtime/program_generator.h"


namespace kiln::e2e {
namespace {

using ir::Role;

// ---------------------------------------------------------------------------------------------
// Running.

struct Settings {
  uint64_t seed = 1;
  uint64_t count = 300;
};

Settings settings() {
  Settings s;
#ifdef KILN_SANITIZED
  s.count = 90;
#endif
  Result<std::optional<uint64_t>> seed = env_uint("KILN_DIFF_SEED", 0, UINT64_MAX / 2);
  EXPECT_TRUE(seed.ok()) << seed.status();
  if (seed.ok() && seed->has_value()) s.seed = **seed;
  Result<std::optional<uint64_t>> count = env_uint("KILN_DIFF_COUNT", 0, 1000000);
  EXPECT_TRUE(count.ok()) << count.status();
  if (count.ok() && count->has_value()) s.count = **count;
  return s;
}

constexpr int kShards = 4;
constexpr size_t kBatch = 10;

// Whether the program of a seed may put its first routine's statements at the top level.
bool allows_main(uint64_t seed) { return seed % 4 == 0; }

struct Generated {
  uint64_t seed;
  std::string prefix;
  std::string text;
  ir::Program program;  // parsed alone
  bool devices = false;  // also run on the other devices present (opencl, cuda)
  std::set<std::string> wide_inputs;  // integer inputs drawn across their whole range
};

// The program of a seed (not yet parsed).
Generated generated(uint64_t seed, std::string prefix, bool allow_main) {
  Generated g;
  g.seed = seed;
  g.prefix = std::move(prefix);
  ProgramGenerator generator(seed, g.prefix, allow_main);
  g.text = generator.generate();
  g.wide_inputs = generator.wide_inputs();
  return g;
}

// An input's values: as `kiln run` draws them (random_tensor: floats in [-1, 1), integers in
// [-8, 8] or [0, 16], bools 0 or 1), or for a wide integer input across its type's whole range:
// about a third at or next to its limits (0, all ones, the sign bit alone and its neighbours),
// the rest random bit patterns.
HostTensor input_values(const ir::TensorNode& node, uint64_t seed, bool wide) {
  if (!wide || !ir::is_integer_type(node.dtype)) return random_tensor(node, seed);
  HostTensor t = empty_tensor(node);
  Random random = Random::for_name(seed, "wide input:" + node.name);
  const int bits = ir::dtype_bits(node.dtype);
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const uint64_t sign = uint64_t{1} << (bits - 1);
  for (int64_t i = 0; i < t.size(); ++i) {
    uint64_t v = random.next_u64();
    switch (v % 12) {
      case 0: v = 0; break;
      case 1: v = mask; break;          // -1, or the greatest unsigned value
      case 2: v = sign; break;          // the least signed value
      case 3: v = sign - 1; break;      // the greatest signed value
      case 4: v = sign + 1; break;
      default: v = random.next_u64(); break;
    }
    ir::Scalar scalar;
    scalar.i = static_cast<int64_t>(v & mask);  // store_scalar wraps it to the type
    ir::store_scalar(node.dtype, scalar, t.bytes.data() + static_cast<size_t>(i) * ir::dtype_size(node.dtype));
  }
  return t;
}

// f16 / bf16 values that two correct devices may both compute: the same, adjacent values of the
// type (one unit in the last place: each computes in f32 and rounds once, and the reference
// computes in double, so a value near a rounding tie may round either way), or within 1e-5 of
// each other (what f32 arithmetic may differ by near 0 after cancellation, first_difference's
// absolute tolerance). NaN matches NaN; infinities match only themselves.
bool narrow_close(ir::DType type, uint16_t expected, uint16_t actual) {
  const double e = type == ir::DType::kF16 ? ir::f16_value(expected) : ir::bf16_value(expected);
  const double a = type == ir::DType::kF16 ? ir::f16_value(actual) : ir::bf16_value(actual);
  if (std::isnan(e) || std::isnan(a)) return std::isnan(e) && std::isnan(a);
  if (std::isinf(e) || std::isinf(a)) return e == a;
  // The bit patterns in the order of the values they stand for (+0 and -0 alike).
  auto ordered = [](uint16_t bits) { return bits & 0x8000 ? -int{bits & 0x7fff} : int{bits & 0x7fff}; };
  return std::abs(ordered(expected) - ordered(actual)) <= 1 || std::fabs(e - a) <= 1e-5;
}

// The first element where a device's result differs from the reference's beyond what two
// correct devices may: integers and bool exactly, f32 and f64 within first_difference's
// tolerance, f16 and bf16 within narrow_close; nullopt when they agree.
std::optional<std::string> difference(const std::string& name, const HostTensor& expected, const HostTensor& actual) {
  if (!ir::is_narrow_float(expected.dtype) || expected.dtype != actual.dtype ||
      expected.bytes.size() != actual.bytes.size()) {
    return first_difference(name, expected, actual);
  }
  int mismatches = 0;
  std::optional<std::string> first;
  for (int64_t i = 0; i < expected.size(); ++i) {
    uint16_t e = 0, a = 0;
    std::memcpy(&e, expected.bytes.data() + 2 * i, 2);
    std::memcpy(&a, actual.bytes.data() + 2 * i, 2);
    if (narrow_close(expected.dtype, e, a)) continue;
    if (!first) {
      char bits[64];
      std::snprintf(bits, sizeof bits, " (bits 0x%04x, got 0x%04x)", e, a);
      std::ostringstream os;
      os.precision(9);
      os << name << index_string(expected.dims, i) << " (element " << i << " of " << expected.size()
         << "): expected " << expected.at(i) << ", got " << actual.at(i) << bits;
      first = os.str();
    }
    ++mismatches;
  }
  if (first) *first += " (" + std::to_string(mismatches) + " elements differ)";
  return first;
}

std::string numbered(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  for (int n = 1; std::getline(in, line); ++n) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%4d| ", n);
    out += buf + line + "\n";
  }
  return out;
}

std::string describe(const Generated& g) {
  return "seed " + std::to_string(g.seed) + " (reproduce: KILN_DIFF_SEED=" + std::to_string(g.seed) +
         " KILN_DIFF_COUNT=1 kiln_runtime_test --gtest_filter='*Differential*'), program:\n" + numbered(g.text);
}

struct DeviceRun {
  std::unique_ptr<runtime::ProgramInstance> instance;
  Status status;
};

// Compiles `program` for `device`, writes the inputs of each generated program (random values
// from its seed).
DeviceRun start(const hal::DeviceRef& device, const ir::Program& program,
                const std::vector<const Generated*>& parts, const runtime::ProgramOptions& options) {
  DeviceRun run;
  auto instance = runtime::ProgramInstance::create(device, program, options);
  if (!instance.ok()) {
    run.status = instance.status();
    return run;
  }
  run.instance = std::move(*instance);
  for (const Generated* g : parts) {
    for (const ir::TensorNode& node : g->program.nodes) {
      if (node.role != Role::kInput) continue;
      Status st = write_tensor(*run.instance, node.name, input_values(node, g->seed, g->wide_inputs.count(node.name) > 0));
      if (!st.ok()) {
        run.status = st.annotate("writing input " + node.name);
        return run;
      }
    }
  }
  return run;
}

class DifferentialTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(cache_.path().empty());
    auto cpu = open_device("cpu", cache_.path());
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *cpu;
    auto interp = open_device("interp", cache_.path());
    ASSERT_TRUE(interp.ok()) << interp.status();
    interp_ = *interp;
    // OpenCL and CUDA too where they are present (CPU-hosted PoCL in CI); otherwise cpu only.
    for (const char* name : {"opencl", "cuda"}) {
      if (!driver_availability(name).ok()) continue;
      auto device = open_device(name, cache_.path());
      ASSERT_TRUE(device.ok()) << device.status();
      devices_.push_back({name, *device});
    }
  }

  // Runs a batch of generated programs, concatenated, on both devices; returns how many were
  // checked without a failure.
  int run_batch(const std::vector<const Generated*>& parts, bool use_devices) {
    std::string text;
    for (const Generated* g : parts) text += "# ---- program seed " + std::to_string(g->seed) + "\n" + g->text + "\n";
    Result<ir::Program> program = lang::parse_program(text, "differential.kiln");
    if (!program.ok()) {
      // Each part parsed alone: a failure here is about the concatenation.
      ADD_FAILURE() << "a batch of programs that each parse alone does not parse: " << program.status()
                    << "\n" << numbered(text);
      return 0;
    }
    // What `kiln compile --emit ir` prints must parse to the same program; the devices under
    // test run that, the reference the original.
    const std::string printed_text = ir::print_program(*program);
    Result<ir::Program> printed = lang::parse_program(printed_text, "differential-printed.kiln");
    if (!printed.ok()) {
      ADD_FAILURE() << "the printed batch does not parse: " << printed.status() << "\n" << numbered(printed_text);
      return 0;
    }
    EXPECT_TRUE(ir::testing::programs_equal(*program, *printed)) << numbered(printed_text);
    // The reference is the interpreter running the plainest lowering (every intermediate
    // stored, no optimization passes, no automatic library calls); the CPU runs the default one
    // (single-use intermediates inlined, constants folded, invariants hoisted, fma formed,
    // products by gemm).
    runtime::ProgramOptions plain;
    plain.lower.auto_calls = false;
    plain.lower.inline_virtual = false;
    plain.lower.fuse = false;
    plain.lower.collapse = false;
    plain.lower.local_arrays = false;
    plain.lower.optimize = false;
    DeviceRun reference = start(interp_, *program, parts, plain);
    DeviceRun cpu = start(cpu_, *printed, parts, {});
    std::vector<DeviceRun> others(use_devices ? devices_.size() : 0);
    Status others_status;
    for (size_t d = 0; d < others.size(); ++d) {
      others[d] = start(devices_[d].second, *printed, parts, {});
      if (others_status.ok() && !others[d].status.ok()) others_status = others[d].status.annotate(devices_[d].first);
    }
    if (!reference.status.ok() || !cpu.status.ok() || !others_status.ok()) {
      if (parts.size() > 1) {
        // Find the culprit(s) one by one.
        int ok = 0;
        for (const Generated* g : parts) ok += run_batch({g}, use_devices);
        return ok;
      }
      ADD_FAILURE() << "compiling failed: interp: " << reference.status << "; cpu: " << cpu.status
                    << "; other devices: " << others_status << "\n" << describe(*parts[0]);
      return 0;
    }
    for (const ir::TensorNode& node : cpu.instance->lowered().program.nodes) {
      if (node.role != Role::kTensor) continue;
      (node.memory == ir::MemoryMode::kVirtual ? stats_.inlined
       : node.memory == ir::MemoryMode::kLocal ? stats_.local
                                               : stats_.stored)++;
    }
    for (const ir::LoweredRoutine& r : reference.instance->lowered().routines) stats_.kernels_plain += static_cast<int64_t>(r.kernels.size());
    for (const ir::LoweredRoutine& r : cpu.instance->lowered().routines) stats_.kernels += static_cast<int64_t>(r.kernels.size());
    std::set<const Generated*> failed;
    for (int pass = 1; pass <= 2; ++pass) {
      for (const ir::Routine& routine : program->routines) {
        Status a = reference.instance->run(routine.name);
        Status b = cpu.instance->run(routine.name);
        for (size_t d = 0; d < others.size() && b.ok(); ++d) {
          b = others[d].instance->run(routine.name).annotate(devices_[d].first);
        }
        if (!a.ok() || !b.ok()) {
          const Generated* owner = owner_of(parts, routine.name);
          if (failed.insert(owner).second) {
            ADD_FAILURE() << "running routine " << routine.name << " (pass " << pass << ") failed: interp: " << a
                          << "; cpu: " << b << "\n" << (owner ? describe(*owner) : text);
          }
        }
      }
      for (const Generated* g : parts) {
        if (failed.count(g)) continue;
        for (const ir::TensorNode* node : result_nodes(g->program)) {
          Result<HostTensor> expected = read_tensor(*reference.instance, *node);
          Result<HostTensor> actual = read_tensor(*cpu.instance, *node);
          if (!expected.ok() || !actual.ok()) {
            ADD_FAILURE() << "reading " << node->name << ": " << expected.status() << " / " << actual.status()
                          << "\n" << describe(*g);
            failed.insert(g);
            break;
          }
          if (pass == 2) {
            for (int64_t i = 0; i < expected->size(); ++i) {
              const double v = expected->at(i);
              ++stats_.values;
              stats_.nonzero += v != 0;
              stats_.nonfinite += !std::isfinite(v);
            }
          }
          if (auto diff = difference(node->name, *expected, *actual)) {
            ADD_FAILURE() << "cpu differs from interp after pass " << pass << " of the routines: " << *diff
                          << "\n" << describe(*g);
            failed.insert(g);
            break;
          }
          bool differs = false;
          for (size_t d = 0; d < others.size() && !differs; ++d) {
            Result<HostTensor> device = read_tensor(*others[d].instance, *node);
            std::optional<std::string> diff =
                device.ok() ? difference(node->name, *expected, *device)
                            : std::optional<std::string>(device.status().to_string());
            if (diff) {
              ADD_FAILURE() << devices_[d].first << " differs from interp after pass " << pass << " of the routines: "
                            << *diff << "\n" << describe(*g);
              differs = true;
            }
          }
          if (differs) {
            failed.insert(g);
            break;
          }
        }
      }
    }
    return static_cast<int>(parts.size() - failed.size());
  }

  static const Generated* owner_of(const std::vector<const Generated*>& parts, const std::string& routine) {
    for (const Generated* g : parts) {
      if (routine.rfind(g->prefix, 0) == 0) return g;
    }
    return parts.empty() ? nullptr : parts[0];  // `main` belongs to the first program
  }

  TempDir cache_;
  hal::DeviceRef cpu_, interp_;
  std::vector<std::pair<std::string, hal::DeviceRef>> devices_;  // opencl, cuda where present
  // OpenCL builds with LLVM (slow): every KILN_DIFF_OPENCL_EVERY-th program of a shard (0 for
  // none) also runs there.
  uint64_t opencl_every_ = [] {
    Result<std::optional<uint64_t>> n = env_uint("KILN_DIFF_OPENCL_EVERY", 0, 1000000);
    EXPECT_TRUE(n.ok()) << n.status();
#ifdef KILN_SANITIZED
    const uint64_t every = 4;
#else
    const uint64_t every = 8;
#endif
    return n.ok() && n->has_value() ? **n : every;
  }();
  struct {
    int64_t values = 0, nonzero = 0, nonfinite = 0, inlined = 0, stored = 0, local = 0;
    int64_t kernels_plain = 0, kernels = 0;
  } stats_;
};

TEST_P(DifferentialTest, RandomProgramsAgreeOnInterpAndCpu) {
  const Settings s = settings();
  const int shard = GetParam();
  const int64_t start_ns = now_ns();
  // Programs with top-level statements (routine `main`) go first in a batch, one per batch;
  // those that also run on opencl are batched apart from the others.
  std::vector<Generated> mains, others;
  for (uint64_t n = static_cast<uint64_t>(shard); n < s.count; n += kShards) {
    Generated g = generated(s.seed + n, "s" + std::to_string(s.seed + n) + "_", allows_main(s.seed + n));
    g.devices = !devices_.empty() && opencl_every_ > 0 && (n / kShards) % opencl_every_ == 0;
    if (env_string("KILN_DIFF_PRINT")) std::printf("# seed %llu\n%s\n", static_cast<unsigned long long>(g.seed), g.text.c_str());
    Result<ir::Program> parsed = lang::parse_program(g.text, "seed" + std::to_string(g.seed) + ".kiln");
    if (!parsed.ok()) {
      ADD_FAILURE() << "a generated program does not parse: " << parsed.status() << "\n" << describe(g);
      continue;
    }
    g.program = std::move(*parsed);
    (g.program.find_routine("main") ? mains : others).push_back(std::move(g));
  }
  const size_t total = mains.size() + others.size();
  int checked = 0, on_devices = 0;
  for (bool devices : {true, false}) {
    std::vector<const Generated*> group_mains, group_others;
    for (const Generated& g : mains) if (g.devices == devices) group_mains.push_back(&g);
    for (const Generated& g : others) if (g.devices == devices) group_others.push_back(&g);
    size_t next_main = 0, next_other = 0;
    while (next_main < group_mains.size() || next_other < group_others.size()) {
      std::vector<const Generated*> batch;
      if (next_main < group_mains.size()) batch.push_back(group_mains[next_main++]);
      while (batch.size() < kBatch && next_other < group_others.size()) batch.push_back(group_others[next_other++]);
      if (devices) on_devices += static_cast<int>(batch.size());
      checked += run_batch(batch, devices);
    }
  }
  std::string device_names;
  for (const auto& [name, device] : devices_) device_names += (device_names.empty() ? "" : " and ") + name;
  std::printf("shard %d: %d of %zu generated programs agree (seeds %llu + n, n = %d mod %d; %d also on %s), %.1f s; "
              "%lld values compared, %lld non-zero, %lld not finite; intermediates: %lld inlined, %lld local, "
              "%lld stored; kernels: %lld one per statement, %lld grouped\n",
              shard, checked, total, static_cast<unsigned long long>(s.seed), shard, kShards, on_devices,
              device_names.empty() ? "no other device" : device_names.c_str(),
              double(now_ns() - start_ns) / 1e9, static_cast<long long>(stats_.values),
              static_cast<long long>(stats_.nonzero), static_cast<long long>(stats_.nonfinite),
              static_cast<long long>(stats_.inlined), static_cast<long long>(stats_.local),
              static_cast<long long>(stats_.stored), static_cast<long long>(stats_.kernels_plain),
              static_cast<long long>(stats_.kernels));
}

INSTANTIATE_TEST_SUITE_P(Shards, DifferentialTest, ::testing::Range(0, kShards));

// The devices beside cpu and interp, each registered as a test of its own so that a machine
// without one says so: a few generated programs agree with the interpreter there (the shards
// above also run every KILN_DIFF_OPENCL_EVERY-th program on every device that is present).
class DifferentialDeviceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DifferentialDeviceTest, AgreesWithTheInterpreterWherePresent) {
  Status available = driver_availability(GetParam());
  if (!available.ok()) GTEST_SKIP() << GetParam() << " is not available here: " << available;
  TempDir cache;
  auto interp = open_device("interp", cache.path());
  auto device = open_device(GetParam(), cache.path());
  ASSERT_TRUE(interp.ok()) << interp.status();
  ASSERT_TRUE(device.ok()) << device.status();
  for (uint64_t seed = 500; seed < 504; ++seed) {
    Generated g = generated(seed, "d" + std::to_string(seed) + "_", allows_main(seed));
    Result<ir::Program> parsed = lang::parse_program(g.text, "device.kiln");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    g.program = std::move(*parsed);
    DeviceRun reference = start(*interp, g.program, {&g}, {});
    DeviceRun run = start(*device, g.program, {&g}, {});
    ASSERT_TRUE(reference.status.ok() && run.status.ok()) << reference.status << "; " << run.status << "\n" << describe(g);
    for (const ir::Routine& routine : g.program.routines) {
      ASSERT_TRUE(reference.instance->run(routine.name).ok());
      Status ran = run.instance->run(routine.name);
      ASSERT_TRUE(ran.ok()) << ran << "\n" << describe(g);
    }
    for (const ir::TensorNode* node : result_nodes(g.program)) {
      Result<HostTensor> expected = read_tensor(*reference.instance, *node);
      Result<HostTensor> actual = read_tensor(*run.instance, *node);
      ASSERT_TRUE(expected.ok() && actual.ok()) << expected.status() << "; " << actual.status();
      if (auto diff = difference(node->name, *expected, *actual)) ADD_FAILURE() << *diff << "\n" << describe(g);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DifferentialDeviceTest, ::testing::Values("opencl", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// Sizes (language version 2): a generated program with one of its dimensions made a size.

// `text` with the commonest dimension (of 2 or more) of its inputs, outputs and tensors replaced by
// the size `N` in those declarations; nullopt when a param or const has that dimension too (they
// cannot be sized) or no dimension qualifies. The result may still not parse (a `where` bound or a
// dimension elsewhere that must agree with the number); callers skip those.
std::optional<std::string> with_size(const std::string& text, int64_t* value) {
  const std::regex declaration(R"(^(input|output|tensor|param|const)(\s+\S+\s*:\s*\w+)\[([^\]]*)\](.*)$)");
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::map<int64_t, int> counts;
  std::set<int64_t> fixed;  // dims of params and consts
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    std::smatch m;
    if (!std::regex_match(line, m, declaration)) continue;
    std::istringstream dims(m[3].str());
    for (std::string d; std::getline(dims, d, ',');) {
      const int64_t v = std::strtoll(d.c_str(), nullptr, 10);
      if (m[1] == "param" || m[1] == "const") fixed.insert(v);
      else if (v >= 2) ++counts[v];
    }
  }
  int best = 0;
  for (const auto& [v, n] : counts) {
    if (!fixed.count(v) && n > best) {
      best = n;
      *value = v;
    }
  }
  if (best == 0) return std::nullopt;
  std::string out = "size N\n";
  for (const std::string& line : lines) {
    std::smatch m;
    if (!std::regex_match(line, m, declaration) || m[1] == "param" || m[1] == "const") {
      out += line + "\n";
      continue;
    }
    std::istringstream dims(m[3].str());
    std::string sized;
    for (std::string d; std::getline(dims, d, ',');) {
      const bool is_size = std::strtoll(d.c_str(), nullptr, 10) == *value;
      sized += (sized.empty() ? "" : ", ") + (is_size ? std::string("N") : d.substr(d.find_first_not_of(' ')));
    }
    out += m[1].str() + m[2].str() + "[" + sized + "]" + m[4].str() + "\n";
  }
  return out;
}

// Generated programs with a size, compiled once on cpu (and for every 4th on opencl where present), run at the
// size's original value, at 0, 1 and a random value up to twice the original: every result
// agrees with the interpreter running the program specialized to that value.
TEST(DifferentialSizesTest, SizedProgramsAgreeAtRandomSizes) {
  Settings s = settings();
  const uint64_t count = std::max<uint64_t>(1, s.count / 8);
  TempDir cache;
  auto interp = open_device("interp", cache.path());
  auto cpu = open_device("cpu", cache.path());
  ASSERT_TRUE(interp.ok() && cpu.ok());
  std::vector<std::pair<std::string, hal::DeviceRef>> devices = {{"cpu", *cpu}};
  if (driver_availability("opencl").ok()) devices.push_back({"opencl", *open_device("opencl", cache.path())});
  runtime::ProgramOptions plain;
  plain.lower.auto_calls = plain.lower.inline_virtual = plain.lower.fuse = false;
  plain.lower.collapse = plain.lower.local_arrays = plain.lower.optimize = false;
  // Seeds in turn until `count` programs could be sized (most can), or four times as many tried.
  int checked = 0, skipped = 0, runs = 0, sized_programs = 0;
  for (uint64_t n = 0; static_cast<uint64_t>(sized_programs) < count && n < 4 * count; ++n) {
    Generated g = generated(s.seed + 7919 + n, "z" + std::to_string(s.seed + 7919 + n) + "_", false);
    int64_t original = 0;
    std::optional<std::string> sized = with_size(g.text, &original);
    Result<ir::Program> parsed = sized ? lang::parse_program(*sized, "sized.kiln")
                                       : Result<ir::Program>(invalid_argument_error("no dimension to size"));
    if (!parsed.ok()) {
      ++skipped;
      continue;
    }
    g.text = *sized;
    ++sized_programs;
    Random random = Random::for_name(g.seed, "sizes");
    const int64_t values[] = {original, 0, 1, 2 + static_cast<int64_t>(random.next_u64() % static_cast<uint64_t>(2 * original))};
    bool ok = true;
    for (int64_t value : values) {
      Result<ir::Program> at = ir::specialize_sizes(*parsed, {value});
      if (!at.ok()) continue;  // e.g. a `where` bound that turns negative at this value
      g.program = *at;
      DeviceRun reference = start(*interp, *at, {&g}, plain);
      ASSERT_TRUE(reference.status.ok()) << "at N = " << value << ": " << reference.status << "\n" << describe(g);
      for (const ir::Routine& routine : at->routines) ASSERT_TRUE(reference.instance->run(routine.name).ok());
      for (const auto& [name, device] : devices) {
        if (name != "cpu" && n % 4 != 0) continue;  // PoCL's builds are slow: every 4th program
        runtime::ProgramOptions general;
        general.sizes = {value};
        DeviceRun run = start(device, *parsed, {&g}, general);
        ASSERT_TRUE(run.status.ok()) << name << " at N = " << value << ": " << run.status << "\n" << describe(g);
        for (const ir::Routine& routine : at->routines) {
          Status ran = run.instance->run(routine.name);
          ASSERT_TRUE(ran.ok()) << name << " at N = " << value << ": " << ran << "\n" << describe(g);
        }
        ++runs;
        for (const ir::TensorNode* node : result_nodes(*at)) {
          Result<HostTensor> expected = read_tensor(*reference.instance, *node);
          Result<HostTensor> actual = read_tensor(*run.instance, *node);
          ASSERT_TRUE(expected.ok() && actual.ok()) << expected.status() << "; " << actual.status();
          if (auto diff = difference(node->name, *expected, *actual)) {
            ADD_FAILURE() << name << " at N = " << value << " (general build) differs from interp: " << *diff << "\n"
                          << describe(g);
            ok = false;
          }
        }
      }
    }
    checked += ok ? 1 : 0;
  }
  std::printf("sized programs: %d of %d agree at 4 sizes each (%d runs), %d skipped (no dimension to size, or "
              "the sized program does not parse)\n",
              checked, sized_programs, runs, skipped);
  EXPECT_EQ(static_cast<uint64_t>(sized_programs), count) << "most generated programs could not be sized";
}

// The generator itself: deterministic, and it produces what it promises.
TEST(DifferentialGeneratorTest, IsDeterministicAndVaried) {
  EXPECT_EQ(ProgramGenerator(7, "p_", true).generate(), ProgramGenerator(7, "p_", true).generate());
  EXPECT_NE(ProgramGenerator(7, "p_", true).generate(), ProgramGenerator(8, "p_", true).generate());
  std::string all;
  for (uint64_t seed = 0; seed < 200; ++seed) all += ProgramGenerator(seed, "p_", true).generate();
  for (const char* feature : {"sum(", "prod(", "max(", "min(", "mean(", " += ", " -= ", " *= ", " where ",
                              "routine ", "param ", "tensor ", "const ", ": i32", ": f64", "2*", "exp(",
                              "log(", "sqrt(", "rsqrt(", "tanh(", "sigmoid(", "relu(", "abs(", "sin(",
                              "cos(", "erf(", "floor(", "ceil(", "pow(", "select(", "f32(", "f64(", "i32(",
                              " < ", " <= ", " > ", " >= ", " == ", " != ", " / ", "uniform(", "normal(",
                              // the gather through select with an integer comparison
                              " == g, ", "g == ", " != g, 0, ", "abs(", "min(", " + 1 == g",
                              // the gather as a subscript (language version 2)
                              "[p_gi", "[abs(p_gi", "[min(p_gi"}) {
    EXPECT_NE(all.find(feature), std::string::npos) << "no generated program uses '" << feature << "'";
  }
  EXPECT_TRUE(std::regex_search(all, std::regex(R"(where (.*, )?[a-z]+ < [a-z]+ \+ [1-3])")))
      << "no generated program has a triangular bound";
}

// Language version 3: the programs use every element type in declarations and casts, the
// bitwise operators and shifts, bool literals, argmax / argmin, gathers through index tensors of
// several integer types, f16 / bf16 intermediates that lowering inlines, and wide inputs.
TEST(DifferentialGeneratorTest, CoversEveryElementType) {
  std::string all;
  int wide = 0, exact_narrow = 0, unread_narrow = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    ProgramGenerator generator(seed, "p_", true);
    all += generator.generate();
    wide += static_cast<int>(generator.wide_inputs().size());
    for (const GenTensor& t : generator.tensors()) {
      exact_narrow += t.narrow_exact;
      unread_narrow += t.unread();
    }
  }
  for (ir::DType type : ir::kAllDTypes) {
    const std::string name(ir::dtype_name(type));
    EXPECT_TRUE(std::regex_search(all, std::regex("input +p_x[0-9]+ : " + name + "\\b")))
        << "no generated program has an input of type " << name;
    EXPECT_TRUE(std::regex_search(all, std::regex("(output|tensor|param) +p_[a-z]+[0-9]+ : " + name + "\\b")))
        << "no generated program writes a tensor of type " << name;
    EXPECT_NE(all.find(name + "("), std::string::npos) << "no generated program casts to " << name;
  }
  for (const char* feature : {" & ", " | ", " ^ ", "~", " << ", " >> ", "true", "false", "argmax(", "argmin(",
                              "~u64(0)", "i8(1) << 7", "(i64(1) << 63)"}) {
    EXPECT_NE(all.find(feature), std::string::npos) << "no generated program uses '" << feature << "'";
  }
  EXPECT_TRUE(std::regex_search(all, std::regex(R"((<<|>>) (3[23]|6[45]|100)\b)")))
      << "no generated program shifts by as much as 32 (or 64)";
  for (const char* index : {"i32", "i8", "u8", "i16", "i64"}) {
    EXPECT_TRUE(std::regex_search(all, std::regex(std::string("input +p_gi[0-9]+ : ") + index + "\\[")))
        << "no generated program gathers through an index tensor of type " << index;
  }
  EXPECT_TRUE(std::regex_search(all, std::regex(R"(tensor +p_v[0-9]+ : b?f16)"))) << "no f16 / bf16 intermediate to inline";
  EXPECT_GT(wide, 20);
  EXPECT_GT(exact_narrow, 20);
  EXPECT_GT(unread_narrow, 20);
}

// f16 / bf16 results agree when they are equal or one unit in the last place apart (or within
// 1e-5), never two units.
TEST(DifferentialGeneratorTest, NarrowFloatsAgreeWithinOneUnitInTheLastPlace) {
  for (ir::DType type : {ir::DType::kF16, ir::DType::kBF16}) {
    auto bits = [&](double v) { return type == ir::DType::kF16 ? ir::f16_bits(v) : ir::bf16_bits(v); };
    const uint16_t one = bits(1.0), minus = bits(-0.75), tiny = bits(0.0);
    EXPECT_TRUE(narrow_close(type, one, one));
    EXPECT_TRUE(narrow_close(type, one, static_cast<uint16_t>(one + 1)));
    EXPECT_TRUE(narrow_close(type, one, static_cast<uint16_t>(one - 1)));  // below 1.0: a finer step
    EXPECT_FALSE(narrow_close(type, one, static_cast<uint16_t>(one + 2)));
    EXPECT_FALSE(narrow_close(type, one, static_cast<uint16_t>(one - 2)));
    EXPECT_TRUE(narrow_close(type, minus, static_cast<uint16_t>(minus + 1)));
    EXPECT_FALSE(narrow_close(type, minus, static_cast<uint16_t>(minus + 2)));
    EXPECT_FALSE(narrow_close(type, one, minus));
    EXPECT_TRUE(narrow_close(type, tiny, bits(-0.0)));
    EXPECT_TRUE(narrow_close(type, tiny, bits(4e-6)));  // near 0: f32's absolute tolerance
    EXPECT_FALSE(narrow_close(type, bits(INFINITY), bits(65504)));
    EXPECT_FALSE(narrow_close(type, bits(NAN), one));
    EXPECT_TRUE(narrow_close(type, bits(NAN), bits(NAN)));
  }
}

// The row blocks give lowering something to fuse and to keep in local arrays.
TEST(DifferentialGeneratorTest, RowBlocksGiveFusionAndLocalArrays) {
  int64_t locals = 0, kernels = 0, kernels_plain = 0;
  ir::LowerOptions plain;
  plain.fuse = plain.collapse = plain.local_arrays = false;
  for (uint64_t seed = 2000; seed < 2100; ++seed) {
    const std::string text = ProgramGenerator(seed, "q_", true).without_inner_reductions().generate();
    Result<ir::Program> program = lang::parse_program(text, "gen.kiln");
    ASSERT_TRUE(program.ok()) << program.status() << "\n" << numbered(text);
    Result<ir::LoweredProgram> grouped = ir::lower_program(*program);
    Result<ir::LoweredProgram> alone = ir::lower_program(*program, plain);
    ASSERT_TRUE(grouped.ok() && alone.ok()) << grouped.status() << alone.status() << "\n" << numbered(text);
    for (const ir::TensorNode& n : grouped->program.nodes) locals += n.memory == ir::MemoryMode::kLocal;
    for (const ir::LoweredRoutine& r : grouped->routines) kernels += static_cast<int64_t>(r.kernels.size());
    for (const ir::LoweredRoutine& r : alone->routines) kernels_plain += static_cast<int64_t>(r.kernels.size());
  }
  EXPECT_GT(locals, 20);
  EXPECT_LT(kernels * 5, kernels_plain * 4) << kernels << " kernels grouped, " << kernels_plain << " alone";
}

// Reductions inside expressions (language version 2) are generated, nested ones too: their
// temporaries (TARGET__REDUCE1) show in the parsed programs.
TEST(DifferentialGeneratorTest, ReductionsInsideExpressions) {
  int temporaries = 0, nested = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const std::string text = ProgramGenerator(seed, "p_", true).generate();
    Result<ir::Program> program = lang::parse_program(text, "gen.kiln");
    ASSERT_TRUE(program.ok()) << program.status() << "\n" << numbered(text);
    for (const ir::Routine& routine : program->routines) {
      for (const ir::Assignment& s : routine.statements) {
        const std::string& target = program->nodes[static_cast<size_t>(s.target)].name;
        if (target.find("__") == std::string::npos) continue;
        ++temporaries;
        nested += ir::print_statement(*program, s).find("__", target.size()) != std::string::npos;
      }
    }
  }
  // Over these 100 seeds: 59 temporaries, 9 nested. The generator draws its random numbers in
  // sequence (never two in the arguments of one call, whose order C++ leaves to the compiler), so
  // GCC's and Clang's builds generate the same programs; the margins leave room for changes.
  EXPECT_GT(temporaries, 30);
  EXPECT_GT(nested, 4);
}

TEST(DifferentialGeneratorTest, ProgramsParse) {
  for (uint64_t seed = 1000; seed < 1100; ++seed) {
    const std::string text = ProgramGenerator(seed, "q_", true).generate();
    Result<ir::Program> program = lang::parse_program(text, "gen.kiln");
    ASSERT_TRUE(program.ok()) << program.status() << "\nseed " << seed << ":\n" << numbered(text);
    Status valid = ir::validate_program(*program);
    ASSERT_TRUE(valid.ok()) << valid << "\n" << numbered(text);
  }
}

}  // namespace
}  // namespace kiln::e2e