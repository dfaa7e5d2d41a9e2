// Generic functions (functions without a declared signature, as Python's kiln.register_call
// registers them): one concrete function made per call site's full name when a call binds, the
// attribute names and outputs it was made for, the registration conflicts, the maker's errors,
// and 8 threads binding the same call at once (run under TSan by make test).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "kiln/lang/parser.h"
#include "kiln/ral/bound_call.h"
#include "kiln/ral/context.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/registry.h"

namespace kiln::ral {
namespace {

// What the made functions were made for; Function::user of each.
struct Made {
  CallSite site;
};

// y = x * the first attribute, for f32 vectors: what a host language's function would compute.
Status scale_first(const Function& function, ExecutionContext&, void** args) {
  const auto& made = *static_cast<const Made*>(function.user);
  struct Vector {
    float* data;
    int64_t size;
  };
  const auto* x = static_cast<const Vector*>(args[1]);
  const auto* y = static_cast<const Vector*>(args[2]);
  const double factor = made.site.attributes.empty() ? 1 : *static_cast<const double*>(args[3]);
  for (int64_t i = 0; i < x->size; ++i) y->data[i] = static_cast<float>(x->data[i] * factor);
  return Status();
}

// A generic function whose maker counts what it makes.
GenericFunction counting(std::string nickname, std::string device, std::atomic<int>* made) {
  return GenericFunction{std::move(nickname), std::move(device), [made](const CallSite& site) -> Result<Function> {
    made->fetch_add(1);
    return function_for_site(site, &scale_first, std::make_shared<Made>(Made{site}));
  }};
}

Result<BoundCall> bind_text(const std::string& text, std::string_view device, Registry& registry) {
  KILN_ASSIGN_OR_RETURN(ir::Program program, lang::parse_program(text, "generic.kiln"));
  return BoundCall::bind(program.routines.front().calls.front(), program, 0, device, registry);
}

constexpr const char* kScale =
    "input x : f32[4]\noutput y : f32[4]\ncall scale(x, factor=3) -> y\n";

TEST(GenericFunctionTest, MakesOneFunctionPerFullNameAndCallsIt) {
  Registry registry;
  std::atomic<int> made{0};
  ASSERT_TRUE(registry.add_generic(counting("scale", "", &made)).ok());
  Result<BoundCall> bound = bind_text(kScale, "cpu", registry);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->full_name(), "scale___cpu___pvoid_m1df32_m1df32_f64___void");
  // Bound again (another program, the same types and names): the function made first.
  ASSERT_TRUE(bind_text(kScale, "cpu", registry).ok());
  EXPECT_EQ(made.load(), 1);
  Result<const Function*> f = registry.find(bound->full_name());
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_NE((*f)->site, nullptr);
  EXPECT_EQ((*f)->site->outputs, 1u);
  EXPECT_EQ((*f)->site->attributes, std::vector<std::string>{"factor"});

  // Called as compiled code calls it.
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  Context context("cpu", registry);
  ExecutionContext execution(context, 0, 0);
  ASSERT_TRUE(bound->invoke(execution, std::vector<void*>{x, y}).ok()) << execution.status();
  EXPECT_EQ(y[3], 12.0f);

  // Another device and other types make others.
  ASSERT_TRUE(bind_text(kScale, "interp", registry).ok());
  ASSERT_TRUE(bind_text("input x : f64[4]\noutput y : f64[4]\ncall scale(x, factor=3) -> y\n", "cpu", registry).ok());
  EXPECT_EQ(made.load(), 3);
}

TEST(GenericFunctionTest, AFullNameServesOneSetOfOutputsAndAttributeNames) {
  Registry registry;
  std::atomic<int> made{0};
  ASSERT_TRUE(registry.add_generic(counting("scale", "cpu", &made)).ok());
  ASSERT_TRUE(bind_text(kScale, "cpu", registry).ok());
  Result<BoundCall> renamed =
      bind_text("input x : f32[4]\noutput y : f32[4]\ncall scale(x, by=3) -> y\n", "cpu", registry);
  ASSERT_EQ(renamed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(renamed.status().message().find("attributes (factor), this one has 1 output(s), attributes (by)"),
            std::string::npos)
      << renamed.status();
  // Three vectors: another full name, then the same one split otherwise into arguments and outputs.
  Result<BoundCall> split = bind_text("input x : f32[4]\ninput y : f32[4]\noutput z : f32[4]\n"
                                      "call scale(x, y) -> z\n",
                                      "cpu", registry);
  ASSERT_TRUE(split.ok()) << split.status();
  Result<BoundCall> two_outputs = bind_text("input x : f32[4]\noutput y : f32[4]\noutput z : f32[4]\n"
                                            "call scale(x) -> y, z\n",
                                            "cpu", registry);
  ASSERT_EQ(two_outputs.status().code(), StatusCode::kInvalidArgument) << two_outputs.status();
  EXPECT_NE(two_outputs.status().message().find("2 output(s)"), std::string::npos) << two_outputs.status();
  EXPECT_EQ(made.load(), 2);
}

TEST(GenericFunctionTest, NotFoundWhereNoneCoversTheDevice) {
  Registry registry;
  std::atomic<int> made{0};
  ASSERT_TRUE(registry.add_generic(counting("scale", "cpu", &made)).ok());
  Result<BoundCall> bound = bind_text(kScale, "interp", registry);
  ASSERT_EQ(bound.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bound.status().message().find("no function 'scale' is registered for device 'interp'"), std::string::npos)
      << bound.status();
  EXPECT_EQ(made.load(), 0);
}

TEST(GenericFunctionTest, RegistrationsThatOverlapAreRefused) {
  Registry registry;
  std::atomic<int> made{0};
  ASSERT_TRUE(registry.add_generic(counting("every", "", &made)).ok());
  EXPECT_EQ(registry.add_generic(counting("every", "", &made)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.add_generic(counting("every", "cpu", &made)).code(), StatusCode::kAlreadyExists);

  ASSERT_TRUE(registry.add_generic(counting("one", "cpu", &made)).ok());
  ASSERT_TRUE(registry.add_generic(counting("one", "interp", &made)).ok());
  EXPECT_EQ(registry.add_generic(counting("one", "cpu", &made)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.add_generic(counting("one", "", &made)).code(), StatusCode::kAlreadyExists);

  // A concrete function of the nickname and a generic one on the same device, either way round.
  Function concrete;
  concrete.full_name = "fixed___cpu___pvoid___void";
  concrete.nickname = "fixed";
  concrete.device = "cpu";
  concrete.invoke = &scale_first;
  ASSERT_TRUE(registry.add(concrete).ok());
  const Status over = registry.add_generic(counting("fixed", "", &made));
  EXPECT_EQ(over.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(over.message().find("fixed___cpu___pvoid___void"), std::string::npos) << over;
  EXPECT_TRUE(registry.add_generic(counting("fixed", "interp", &made)).ok());
  Function under = concrete;
  under.full_name = "one___cpu___pvoid___void";
  under.nickname = "one";
  EXPECT_EQ(registry.add(under).code(), StatusCode::kAlreadyExists);

  // Names that cannot be called, built-in functions, no maker.
  EXPECT_EQ(registry.add_generic(counting("two__words", "", &made)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.add_generic(counting("ok", "bad_", &made)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.add_generic(counting("gemm", "", &made)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.add_generic(GenericFunction{"nomaker", "", nullptr}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(made.load(), 0);
}

TEST(GenericFunctionTest, TheMakersErrorFailsTheBinding) {
  Registry registry;
  ASSERT_TRUE(registry
                  .add_generic(GenericFunction{"picky", "", [](const CallSite&) -> Result<Function> {
                                                 return invalid_argument_error("picky takes no vectors");
                                               }})
                  .ok());
  Result<BoundCall> bound = bind_text("input x : f32[4]\noutput y : f32[4]\ncall picky(x) -> y\n", "cpu", registry);
  ASSERT_EQ(bound.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bound.status().message().find("picky takes no vectors"), std::string::npos) << bound.status();
  EXPECT_FALSE(registry.find("picky___cpu___pvoid_m1df32_m1df32___void").ok());
}

TEST(GenericFunctionTest, EightThreadsBindTheSameCall) {
  Registry registry;
  std::atomic<int> made{0};
  ASSERT_TRUE(registry.add_generic(counting("scale", "", &made)).ok());
  Result<ir::Program> program = lang::parse_program(kScale, "generic.kiln");
  ASSERT_TRUE(program.ok()) << program.status();
  const ir::Call& call = program->routines.front().calls.front();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        Result<BoundCall> bound = BoundCall::bind(call, *program, 0, "cpu", registry);
        if (!bound.ok() || !registry.lookup(bound->full_name().c_str())) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // Several threads may make it at once; one is kept.
  EXPECT_GE(made.load(), 1);
  EXPECT_EQ(registry.find_nickname("scale", "cpu")->size(), 1u);
}

}  // namespace
}  // namespace kiln::ral
