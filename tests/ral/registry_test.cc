// The registry: registration, lookup by full name and by nickname, the errors, the per-thread
// lookup cache, and registration and calls from 8 threads at once (run under TSan by make test).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "kiln/ral/execution_context.h"
#include "kiln/ral/registry.h"

namespace kiln::ral {
namespace {

int64_t twice(ExecutionContext*, int64_t x) { return 2 * x; }
Status check_positive(ExecutionContext*, double x) {
  return x > 0 ? Status() : invalid_argument_error("x must be positive");
}
Status scale(ExecutionContext*, MemRef<float, 1> x, float by) {
  for (int64_t i = 0; i < x.size(0); ++i) x.data[i] *= by;
  return Status();
}
Status scale64(ExecutionContext*, MemRef<double, 1> x, double by) {
  for (int64_t i = 0; i < x.size(0); ++i) x.data[i] *= by;
  return Status();
}

TEST(RegistryTest, FindsByFullNameAndNickname) {
  Registry registry;
  ASSERT_TRUE(registry.add(make_function<"scale", "cpu", &scale>()).ok());
  ASSERT_TRUE(registry.add(make_function<"scale", "cpu", &scale64>()).ok());
  ASSERT_TRUE(registry.add(make_function<"twice", "interp", &twice>()).ok());

  auto f = registry.find("scale___cpu___pvoid_m1df32_f32___void");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->nickname, "scale");
  EXPECT_EQ((*f)->device, "cpu");

  auto overloads = registry.find_nickname("scale", "cpu");
  ASSERT_TRUE(overloads.ok()) << overloads.status();
  ASSERT_EQ(overloads->size(), 2u);
  EXPECT_EQ((*overloads)[0]->full_name, "scale___cpu___pvoid_m1df32_f32___void");
  EXPECT_EQ((*overloads)[1]->full_name, "scale___cpu___pvoid_m1df64_f64___void");

  // Unknown: NOT_FOUND naming the function and the device.
  auto missing = registry.find("scale___opencl___pvoid_m1df32_f32___void");
  ASSERT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'scale' for device 'opencl'"), std::string::npos)
      << missing.status();
  auto no_nick = registry.find_nickname("twice", "cpu");
  ASSERT_EQ(no_nick.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_nick.status().message().find("'twice'"), std::string::npos);
  EXPECT_NE(no_nick.status().message().find("'cpu'"), std::string::npos);
}

// make_function_for (the device at run time) makes what make_function makes for that device: one
// instantiation registers the library's host functions on several devices.
TEST(RegistryTest, MakesAFunctionForADeviceChosenAtRunTime) {
  Registry registry;
  for (const char* device : {"cpu", "interp"}) {
    Function f = make_function_for<"scale", &scale, Memory::kDevice>(device);
    EXPECT_EQ(f.full_name, std::string("scale___") + device + "___pvoid_m1df32_f32___void");
    EXPECT_EQ(f.nickname, "scale");
    EXPECT_EQ(f.device, device);
    EXPECT_EQ(f.memory, Memory::kDevice);
    EXPECT_EQ(f.invoke, (make_function<"scale", "cpu", &scale, Memory::kDevice>().invoke));
    ASSERT_TRUE(registry.add(std::move(f)).ok());
  }
  const Function compile_time = make_function<"scale", "interp", &scale>();
  const Function run_time = make_function_for<"scale", &scale>("interp");
  EXPECT_EQ(run_time.full_name, compile_time.full_name);
  EXPECT_EQ(run_time.memory, Memory::kHost);

  ASSERT_TRUE(registry.find("scale___interp___pvoid_m1df32_f32___void").ok());
  EXPECT_EQ(registry.add(make_function_for<"scale", &scale>(std::string("cpu"))).code(), StatusCode::kAlreadyExists);
}

TEST(RegistryTest, RefusesDuplicatesAndMalformedNames) {
  Registry registry;
  ASSERT_TRUE(registry.add(make_function<"twice", "cpu", &twice>()).ok());
  EXPECT_EQ(registry.add(make_function<"twice", "cpu", &twice>()).code(), StatusCode::kAlreadyExists);

  Function bad = make_function<"twice", "cpu", &twice>();
  bad.full_name = "twice_cpu";
  EXPECT_EQ(registry.add(bad).code(), StatusCode::kInvalidArgument);
  Function mismatch = make_function<"twice", "cpu", &twice>();
  mismatch.device = "opencl";
  EXPECT_EQ(registry.add(mismatch).code(), StatusCode::kInvalidArgument);
  Function no_invoker = make_function<"other", "cpu", &twice>();
  no_invoker.invoke = nullptr;
  EXPECT_EQ(registry.add(no_invoker).code(), StatusCode::kInvalidArgument);
}

TEST(RegistryTest, GlobalRegistryHasTheBuiltins) {
  Registry& global = Registry::global();
  EXPECT_EQ(&global, &Registry::global());
  for (const char* device : {"cpu", "interp"}) {
    EXPECT_TRUE(global.find_nickname("recv_input", device).ok()) << device;
    EXPECT_TRUE(global.find_nickname("send_output", device).ok()) << device;
  }
  EXPECT_TRUE(global.find("recv_input___cpu___pvoid_i64___buf").ok());
  EXPECT_TRUE(global.find("send_output___cpu___pvoid_i64_buf___void").ok());
}

TEST(RegistryTest, CachedLookupChecksTheNameNotOnlyTheAddress) {
  Registry registry;
  ASSERT_TRUE(registry.add(make_function<"twice", "cpu", &twice>()).ok());
  ASSERT_TRUE(registry.add(make_function<"scale", "cpu", &scale>()).ok());
  char name[64] = "twice___cpu___pvoid_i64___i64";
  const Function* first = registry.lookup(name);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(registry.lookup(name), first);  // warm
  // The same address now holds another name: the cache must not answer with `twice`.
  std::snprintf(name, sizeof name, "%s", "scale___cpu___pvoid_m1df32_f32___void");
  const Function* second = registry.lookup(name);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->nickname, "scale");
  std::snprintf(name, sizeof name, "%s", "nothing___cpu___pvoid___void");
  EXPECT_EQ(registry.lookup(name), nullptr);
  // Another registry with the same name at the same address does not share the cache entry.
  Registry other;
  std::snprintf(name, sizeof name, "%s", "twice___cpu___pvoid_i64___i64");
  EXPECT_NE(registry.lookup(name), nullptr);
  EXPECT_EQ(other.lookup(name), nullptr);
}

TEST(RegistryTest, EightThreadsRegisterAndCall) {
  Registry registry;
  ASSERT_TRUE(registry.add(make_function<"twice", "cpu", &twice>()).ok());
  Context context("cpu", registry);
  constexpr int kThreads = 8;
  constexpr int kCalls = 2000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ExecutionContext execution(context, 0, static_cast<uint64_t>(t));
      for (int i = 0; i < kCalls; ++i) {
        int64_t x = i, y = 0;
        void* args[] = {nullptr, &x, &y};
        if (execution.call("twice___cpu___pvoid_i64___i64", args) != 0 || y != 2 * i) ++wrong;
        // Registration goes on meanwhile: every thread adds one function, all but one fail.
        if (i == kCalls / 2) {
          Status s = registry.add(make_function<"positive", "cpu", &check_positive>());
          if (!s.ok() && s.code() != StatusCode::kAlreadyExists) ++wrong;
        }
        // Once this thread's add has returned, the function is there, whoever added it.
        if (i > kCalls / 2 && !registry.lookup("positive___cpu___pvoid_f64___void")) ++wrong;
      }
      if (!execution.finish().ok()) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(registry.find_nickname("positive", "cpu")->size(), 1u);
}

}  // namespace
}  // namespace kiln::ral
