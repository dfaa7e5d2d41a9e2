// Contexts and executions: resources made once per lifetime, the hooks, errors as statuses
// (never aborts), the inputs and outputs of an entry, workspace and the random counter.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/ral/execution_context.h"

namespace kiln::ral {
namespace {

// Records what happened to it, in a log shared by the test.
struct Probe : Resource {
  Probe(std::string name, std::vector<std::string>* log) : name(std::move(name)), log(log) {}
  ~Probe() override { log->push_back(name + ":destroyed"); }
  void on_execution_start(ExecutionContext& e) override { log->push_back(name + ":start" + std::to_string(e.run())); }
  Status on_execution_finish(ExecutionContext& e) override {
    log->push_back(name + ":finish" + std::to_string(e.run()));
    return fail_finish ? internal_error(name + " could not finish") : Status();
  }
  void on_context_finish(Context&) override { log->push_back(name + ":context-finish"); }
  std::string name;
  std::vector<std::string>* log;
  bool fail_finish = false;
};

std::function<Result<std::unique_ptr<Probe>>()> probe(const std::string& name, std::vector<std::string>* log,
                                                       int* made = nullptr) {
  return [=]() -> Result<std::unique_ptr<Probe>> {
    if (made) ++*made;
    return std::make_unique<Probe>(name, log);
  };
}

TEST(ContextTest, ContextResourcesAreMadeOnceAndSeeEveryExecution) {
  std::vector<std::string> log;
  int made = 0;
  {
    Registry registry;
    Context context("cpu", registry);
    {
      ExecutionContext run0(context, 7, 0);
      auto a = run0.get_or_create<Probe>("a", Lifetime::kContext, probe("a", &log, &made));
      ASSERT_TRUE(a.ok()) << a.status();
      auto again = run0.get_or_create<Probe>("a", Lifetime::kContext, probe("a", &log, &made));
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*a, *again);
      ASSERT_TRUE(run0.get_or_create<Probe>("b", Lifetime::kContext, probe("b", &log)).ok());
      EXPECT_TRUE(run0.finish().ok());
    }
    ExecutionContext run1(context, 7, 1);
    auto a = run1.get_or_create<Probe>("a", Lifetime::kContext, probe("a", &log, &made));
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(run1.finish().ok());
    context.finish();
    context.finish();  // idempotent
  }
  EXPECT_EQ(made, 1);
  const std::vector<std::string> expected = {
      "a:finish0", "b:finish0",                              // created during run 0: no start hook
      "a:start1", "b:start1", "a:finish1", "b:finish1",      // run 1 sees both
      "a:context-finish", "b:context-finish",
      "b:destroyed", "a:destroyed"};                          // reverse creation order
  EXPECT_EQ(log, expected);
}

TEST(ContextTest, ExecutionResourcesLiveForOneRun) {
  std::vector<std::string> log;
  Registry registry;
  Context context("cpu", registry);
  for (uint64_t run = 0; run < 2; ++run) {
    ExecutionContext execution(context, 0, run);
    auto r = execution.get_or_create<Probe>("scratch", Lifetime::kExecution, probe("s" + std::to_string(run), &log));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(execution.finish().ok());
  }
  EXPECT_EQ(log, (std::vector<std::string>{"s0:destroyed", "s1:destroyed"}));
}

TEST(ContextTest, GlobalResourcesAreSharedAcrossContexts) {
  std::vector<std::string>* log = new std::vector<std::string>();  // global: lives to the end
  int made = 0;
  Registry registry;
  Context one("cpu", registry), two("opencl", registry);
  ExecutionContext e1(one), e2(two);
  auto a = e1.get_or_create<Probe>("ral-test.global", Lifetime::kGlobal, probe("g", log, &made));
  auto b = e2.get_or_create<Probe>("ral-test.global", Lifetime::kGlobal, probe("g", log, &made));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(made, 1);
}

TEST(ContextTest, FailingFactoryIsReturnedAndRetried) {
  Registry registry;
  Context context("cpu", registry);
  ExecutionContext execution(context);
  std::vector<std::string> log;
  int attempts = 0;
  auto flaky = [&]() -> Result<std::unique_ptr<Probe>> {
    if (++attempts == 1) return resource_exhausted_error("no memory for the handle");
    return std::make_unique<Probe>("p", &log);
  };
  auto first = execution.get_or_create<Probe>("p", Lifetime::kContext, flaky);
  EXPECT_EQ(first.status().code(), StatusCode::kResourceExhausted);
  auto second = execution.get_or_create<Probe>("p", Lifetime::kContext, flaky);
  EXPECT_TRUE(second.ok()) << second.status();
  // The same key asked for as another type is an error, not a bad cast.
  struct Other : Resource {};
  auto wrong = execution.get_or_create<Other>("p", Lifetime::kContext,
                                              []() -> Result<std::unique_ptr<Other>> { return std::make_unique<Other>(); });
  EXPECT_EQ(wrong.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(execution.finish().ok());
  context.finish();
  auto after = ExecutionContext(context).get_or_create<Probe>("q", Lifetime::kContext, probe("q", &log));
  EXPECT_EQ(after.status().code(), StatusCode::kFailedPrecondition);
}

TEST(ContextTest, ResourceIsMadeOnceUnderConcurrency) {
  Registry registry;
  Context context("cpu", registry);
  std::atomic<int> made{0};
  std::vector<Resource*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ExecutionContext execution(context, 0, static_cast<uint64_t>(t));
      auto r = execution.get_or_create<Resource>("shared", Lifetime::kContext, [&]() -> Result<std::unique_ptr<Resource>> {
        ++made;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return std::make_unique<Resource>();
      });
      if (r.ok()) seen[static_cast<size_t>(t)] = *r;
      execution.finish().ignore();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 1);
  for (Resource* r : seen) EXPECT_EQ(r, seen[0]);
}

Status refuse(ExecutionContext*, int32_t code) {
  return code == 0 ? Status() : invalid_argument_error("code " + std::to_string(code) + " refused");
}

TEST(ExecutionTest, FailingCallsRecordTheFirstErrorAndReturnNonZero) {
  Registry registry;
  ASSERT_TRUE(registry.add(make_function<"refuse", "cpu", &refuse>()).ok());
  Context context("cpu", registry);
  ExecutionContext execution(context);
  int32_t ok = 0, bad = 3, worse = 4;
  void* ok_args[] = {nullptr, &ok};
  void* bad_args[] = {nullptr, &bad};
  void* worse_args[] = {nullptr, &worse};
  kiln_ral_context_t* abi = execution.abi();
  EXPECT_EQ(abi->abi_version, static_cast<uint32_t>(KILN_RAL_ABI_VERSION));
  EXPECT_EQ(abi->call(abi, "refuse___cpu___pvoid_i32___void", ok_args), 0);
  EXPECT_TRUE(execution.status().ok());
  EXPECT_NE(abi->call(abi, "refuse___cpu___pvoid_i32___void", bad_args), 0);
  EXPECT_NE(abi->call(abi, "refuse___cpu___pvoid_i32___void", worse_args), 0);
  Status status = execution.finish();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "RAL function 'refuse' on device 'cpu': code 3 refused");
  EXPECT_EQ(execution.finish(), status);  // idempotent
}

TEST(ExecutionTest, UnknownFunctionIsNotFoundNamingFunctionAndDevice) {
  Registry registry;
  Context context("opencl", registry);
  ExecutionContext execution(context);
  void* args[] = {nullptr};
  EXPECT_NE(execution.call("frobnicate___opencl___pvoid___void", args), 0);
  Status status = execution.finish();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find("'frobnicate' for device 'opencl'"), std::string::npos) << status;
  ExecutionContext null_name(context);
  EXPECT_NE(null_name.call(nullptr, args), 0);
  EXPECT_EQ(null_name.finish().code(), StatusCode::kNotFound);
}

TEST(ExecutionTest, HookErrorsFailTheExecution) {
  std::vector<std::string> log;
  Registry registry;
  Context context("cpu", registry);
  ExecutionContext execution(context);
  auto p = execution.get_or_create<Probe>("p", Lifetime::kContext, probe("p", &log));
  ASSERT_TRUE(p.ok());
  (*p)->fail_finish = true;
  EXPECT_EQ(execution.finish().code(), StatusCode::kInternal);
}

TEST(ExecutionTest, InputsAndOutputsThroughTheContext) {
  Context context("cpu");  // the global registry, with recv_input / send_output
  ExecutionContext execution(context);
  float in_data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t in_sizes[2] = {2, 3};
  execution.set_input(0, kiln_ral_buffer_t{in_data, 0, 2, in_sizes});

  // As compiled code does it: through the ABI's call function and the mangled names.
  kiln_ral_context_t* abi = execution.abi();
  int64_t index = 0;
  kiln_ral_buffer_t received{};
  void* recv_args[] = {&abi, &index, &received};
  ASSERT_EQ(abi->call(abi, "recv_input___cpu___pvoid_i64___buf", recv_args), 0) << execution.status();
  EXPECT_EQ(received.data, in_data);
  EXPECT_EQ(received.rank, 2);
  // An output whose size is decided at run time: the positive elements.
  std::vector<float> positive;
  for (int i = 0; i < 6; ++i) {
    if (static_cast<float*>(received.data)[i] > 2) positive.push_back(static_cast<float*>(received.data)[i]);
  }
  {
    int64_t out_sizes[1] = {static_cast<int64_t>(positive.size())};
    kiln_ral_buffer_t out{positive.data(), 0, 1, out_sizes};
    void* send_args[] = {&abi, &index, &out};
    ASSERT_EQ(abi->call(abi, "send_output___cpu___pvoid_i64_buf___void", send_args), 0) << execution.status();
    out_sizes[0] = -1;  // the sizes need not outlive the call
  }
  auto output = execution.output(0);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->sizes, std::vector<int64_t>{4});
  EXPECT_EQ(output->buffer.sizes[0], 4);
  EXPECT_EQ(output->buffer.data, positive.data());

  int64_t missing = 5;
  void* bad_recv[] = {&abi, &missing, &received};
  EXPECT_NE(abi->call(abi, "recv_input___cpu___pvoid_i64___buf", bad_recv), 0);
  Status status = execution.finish();
  EXPECT_EQ(status.code(), StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("'recv_input' on device 'cpu'"), std::string::npos) << status;
  EXPECT_EQ(execution.output(1).status().code(), StatusCode::kNotFound);
}

TEST(ExecutionTest, WorkspaceAndRandomCounter) {
  Registry registry;
  Context context("cpu", registry);
  ExecutionContext execution(context, 42, 3);
  EXPECT_EQ(execution.seed(), 42u);
  EXPECT_EQ(execution.run(), 3u);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{1} << 20}) {
    auto p = execution.workspace(bytes);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u);
    std::memset(*p, 0xAB, bytes);
  }
  EXPECT_EQ(execution.workspace(~size_t{0}).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(execution.take_random_blocks(10), 0u);
  EXPECT_EQ(execution.take_random_blocks(5), 10u);
  EXPECT_EQ(execution.take_random_blocks(1), 15u);
  EXPECT_TRUE(execution.finish().ok());
}

}  // namespace
}  // namespace kiln::ral
