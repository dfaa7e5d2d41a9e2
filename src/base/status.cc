#include "kiln/base/status.h"

#include <cstdio>
#include <cstdlib>

#include <ostream>

#include <cerrno>
#include <cstring>

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Status& status) {
  return os << status.to_string();
}

std::ostream& operator<<(std::ostream& os, StatusCode code) { return os << status_code_name(code); }


std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kDeferred: return "DEFERRED";
  }
  return "UNKNOWN_CODE";
}

Status::Status(StatusCode code, std::string message) {
  // An OK code carries no message and no allocation.
  if (code != StatusCode::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string* const kEmpty = new std::string();
  return rep_ ? rep_->message : *kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(status_code_name(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::annotate(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += rep_->message;
  return Status(rep_->code, std::move(message));
}

Status cancelled_error(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
Status unknown_error(std::string m) { return Status(StatusCode::kUnknown, std::move(m)); }
Status invalid_argument_error(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status deadline_exceeded_error(std::string m) {
  return Status(StatusCode::kDeadlineExceeded, std::move(m));
}
Status not_found_error(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status already_exists_error(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
Status permission_denied_error(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
Status resource_exhausted_error(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
Status failed_precondition_error(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
Status aborted_error(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
Status out_of_range_error(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
Status unimplemented_error(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
Status internal_error(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
Status unavailable_error(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status data_loss_error(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }

namespace {

// strerror() is not thread-safe; strerror_r comes in two flavours (XSI returns int, GNU returns
// char*). These overloads pick whichever the C library declares.
[[maybe_unused]] const char* strerror_result(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
[[maybe_unused]] const char* strerror_result(const char* s, const char*) { return s; }

std::string errno_string(int err) {
  char buf[256];
  buf[0] = '\0';
  return strerror_result(strerror_r(err, buf, sizeof buf), buf);
}

StatusCode errno_code(int err) {
  switch (err) {
    case ENOENT: return StatusCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS: return StatusCode::kPermissionDenied;
    case ENOSPC:
    case ENOMEM: return StatusCode::kResourceExhausted;
    case EEXIST: return StatusCode::kAlreadyExists;
    case EINVAL: return StatusCode::kInvalidArgument;
    case EISDIR:
    case ENOTDIR:
    case ENAMETOOLONG:
    case ELOOP: return StatusCode::kFailedPrecondition;  // the path names the wrong kind of thing
    case EMFILE:
    case ENFILE:
    case EAGAIN:
    case EFBIG:
    case EDQUOT: return StatusCode::kResourceExhausted;
    case EIO: return StatusCode::kDataLoss;
    default: return StatusCode::kUnknown;
  }
}

}  // namespace

Status errno_error(int err, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += errno_string(err);
  return Status(errno_code(err), std::move(message));
}

namespace internal {

void die_on_error_result(const Status& status) {
  std::fprintf(stderr, "kiln: fatal: the value of a Result holding an error was taken: %s\n",
               status.to_string().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal

}  // namespace kiln
