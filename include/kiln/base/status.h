// Status and Result<T>: how every fallible kiln call reports what went wrong and where.
//
// A Status is either OK (no allocation) or an immutable, shared (code, message) pair, so copying a
// failure into many waiters is cheap. No kiln API throws; errors travel as values.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln {

enum class StatusCode : int {
  kOk = 0,
  kCancelled,
  kUnknown,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  // Not an error: a host call that will signal its semaphores itself, later.
  kDeferred,
};

// "INVALID_ARGUMENT" etc.
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status ok_status() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message without the code; empty for OK.
  const std::string& message() const;
  // "CODE: message", or "OK".
  std::string to_string() const;

  // Returns a status with the same code and "context: message"; OK stays OK.
  Status annotate(std::string_view context) const;

  // Marks a status as deliberately ignored.
  void ignore() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

// "CODE: message" (so that test frameworks and logs print statuses readably).
std::ostream& operator<<(std::ostream& os, const Status& status);
std::ostream& operator<<(std::ostream& os, StatusCode code);

// Convenience constructors, named after the code.
Status cancelled_error(std::string message);
Status unknown_error(std::string message);
Status invalid_argument_error(std::string message);
Status deadline_exceeded_error(std::string message);
Status not_found_error(std::string message);
Status already_exists_error(std::string message);
Status permission_denied_error(std::string message);
Status resource_exhausted_error(std::string message);
Status failed_precondition_error(std::string message);
Status aborted_error(std::string message);
Status out_of_range_error(std::string message);
Status unimplemented_error(std::string message);
Status internal_error(std::string message);
Status unavailable_error(std::string message);
Status data_loss_error(std::string message);
// errno → code (ENOENT → NOT_FOUND, EACCES → PERMISSION_DENIED, ...), message "what: strerror".
Status errno_error(int err, std::string_view what);

namespace internal {
// Prints "kiln: fatal: the value of a Result holding an error was taken: STATUS" and aborts.
[[noreturn]] void die_on_error_result(const Status& status);
}  // namespace internal

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = internal_error("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Taking the value of a Result that holds an error is a programming error: it prints the
  // status ("kiln: fatal: ...") and aborts, rather than reading an empty optional.
  T& value() & { return checked(), *value_; }
  const T& value() const& { return checked(), *value_; }
  T&& value() && { return checked(), std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void checked() const {
    if (!value_.has_value()) [[unlikely]] internal::die_on_error_result(status_);
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

#define KILN_RETURN_IF_ERROR(expr)           \
  do {                                       \
    ::kiln::Status kiln_status_ = (expr);    \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// KILN_ASSIGN_OR_RETURN(auto x, make_x());
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, expr)
