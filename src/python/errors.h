// The Python package's exceptions (kiln.Error, kiln.ProgramError) and the one way a Status
// becomes a Python exception.
#pragma once

#include <stdexcept>
#include <string>

#include "kiln/base/status.h"

namespace kiln::python {

// kiln.Error: a failure kiln reports (a device error, a failed routine, a bad file).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// kiln.ProgramError: a program that does not parse or check; the message holds every
// diagnostic as FILE:LINE:COL: error: ...
class ProgramError : public Error {
 public:
  using Error::Error;
};

// Throws kiln.Error with the status's message (prefixed by its code) unless it is OK.
void throw_if_error(const Status& status);

template <typename T>
T value_or_throw(Result<T> result) {
  throw_if_error(result.status());
  return std::move(*result);
}

}  // namespace kiln::python
