// Calling the RAL's built-in library functions by their mangled names, as compiled code does: for
// the library tests on cpu and on interp (whose plain versions are the reference).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/same_bits.h"
#include "kiln/ral/execution_context.h"

namespace kiln::ral {

using test::same_bits;

inline const char* const kLibraryDevices[] = {"cpu", "interp"};

// The mangled name of `nickname` on `device` taking `args` (a status slot first, returning void).
inline std::string full_name(const std::string& nickname, const std::string& device, const std::string& args) {
  return nickname + "___" + device + "___pvoid_" + args + "___void";
}

// Runs one call in a fresh execution of `device`; the execution's status. A call that reports
// success must leave the execution's status ok.
inline Status call(const std::string& device, const std::string& name, std::vector<void*> args, uint64_t seed = 0,
                   uint64_t run = 0) {
  Context context(device);
  ExecutionContext execution(context, seed, run);
  args.insert(args.begin(), nullptr);
  if (execution.call(name.c_str(), args.data()) == 0) {
    EXPECT_TRUE(execution.status().ok());
  }
  return execution.finish();
}

}  // namespace kiln::ral
