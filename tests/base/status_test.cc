#include "kiln/base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace kiln {
namespace {

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_TRUE(Status::ok_status().ok());
  // OK statuses share one static empty message.
  EXPECT_EQ(&Status().message(), &Status::ok_status().message());
}

TEST(StatusTest, CodeNames) {
  EXPECT_EQ(status_code_name(StatusCode::kOk), "OK");
  EXPECT_EQ(status_code_name(StatusCode::kCancelled), "CANCELLED");
  EXPECT_EQ(status_code_name(StatusCode::kUnknown), "UNKNOWN");
  EXPECT_EQ(status_code_name(StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(status_code_name(StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(status_code_name(StatusCode::kNotFound), "NOT_FOUND");
  EXPECT_EQ(status_code_name(StatusCode::kAlreadyExists), "ALREADY_EXISTS");
  EXPECT_EQ(status_code_name(StatusCode::kPermissionDenied), "PERMISSION_DENIED");
  EXPECT_EQ(status_code_name(StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(status_code_name(StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(status_code_name(StatusCode::kAborted), "ABORTED");
  EXPECT_EQ(status_code_name(StatusCode::kOutOfRange), "OUT_OF_RANGE");
  EXPECT_EQ(status_code_name(StatusCode::kUnimplemented), "UNIMPLEMENTED");
  EXPECT_EQ(status_code_name(StatusCode::kInternal), "INTERNAL");
  EXPECT_EQ(status_code_name(StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(status_code_name(StatusCode::kDataLoss), "DATA_LOSS");
  EXPECT_EQ(status_code_name(StatusCode::kDeferred), "DEFERRED");
}

TEST(StatusTest, ConvenienceConstructors) {
  struct Case {
    Status status;
    StatusCode code;
  };
  const Case cases[] = {
      {cancelled_error("m"), StatusCode::kCancelled},
      {unknown_error("m"), StatusCode::kUnknown},
      {invalid_argument_error("m"), StatusCode::kInvalidArgument},
      {deadline_exceeded_error("m"), StatusCode::kDeadlineExceeded},
      {not_found_error("m"), StatusCode::kNotFound},
      {already_exists_error("m"), StatusCode::kAlreadyExists},
      {permission_denied_error("m"), StatusCode::kPermissionDenied},
      {resource_exhausted_error("m"), StatusCode::kResourceExhausted},
      {failed_precondition_error("m"), StatusCode::kFailedPrecondition},
      {aborted_error("m"), StatusCode::kAborted},
      {out_of_range_error("m"), StatusCode::kOutOfRange},
      {unimplemented_error("m"), StatusCode::kUnimplemented},
      {internal_error("m"), StatusCode::kInternal},
      {unavailable_error("m"), StatusCode::kUnavailable},
      {data_loss_error("m"), StatusCode::kDataLoss},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.to_string(), std::string(status_code_name(c.code)) + ": m");
  }
}

TEST(StatusTest, ToStringAndEquality) {
  Status s = invalid_argument_error("bad shape");
  EXPECT_EQ(s.to_string(), "INVALID_ARGUMENT: bad shape");
  EXPECT_EQ(s, invalid_argument_error("bad shape"));
  EXPECT_FALSE(s == internal_error("bad shape"));
  EXPECT_FALSE(s == invalid_argument_error("other"));
  EXPECT_FALSE(s == Status());
  Status copy = s;  // shared, cheap
  EXPECT_EQ(copy, s);
  EXPECT_EQ(&copy.message(), &s.message());
}

TEST(StatusTest, Annotate) {
  Status s = not_found_error("no such kernel").annotate("linking routine f");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "linking routine f: no such kernel");
  EXPECT_EQ(s.to_string(), "NOT_FOUND: linking routine f: no such kernel");
  EXPECT_TRUE(Status().annotate("ctx").ok());
  EXPECT_EQ(Status().annotate("ctx").message(), "");
}

TEST(StatusTest, ErrnoError) {
  struct Case {
    int err;
    StatusCode code;
  };
  const Case cases[] = {
      {ENOENT, StatusCode::kNotFound},           {EACCES, StatusCode::kPermissionDenied},
      {EPERM, StatusCode::kPermissionDenied},    {EROFS, StatusCode::kPermissionDenied},
      {ENOSPC, StatusCode::kResourceExhausted},  {ENOMEM, StatusCode::kResourceExhausted},
      {EEXIST, StatusCode::kAlreadyExists},      {EINVAL, StatusCode::kInvalidArgument},
      {EIO, StatusCode::kDataLoss},              {ENOTDIR, StatusCode::kFailedPrecondition},
      {EISDIR, StatusCode::kFailedPrecondition}, {EMFILE, StatusCode::kResourceExhausted},
      {EAGAIN, StatusCode::kResourceExhausted},  {EXDEV, StatusCode::kUnknown},
  };
  for (const Case& c : cases) {
    Status s = errno_error(c.err, "opening /x");
    EXPECT_EQ(s.code(), c.code) << c.err;
  }
  Status s = errno_error(ENOENT, "opening /x/y");
  EXPECT_EQ(s.message(), "opening /x/y: No such file or directory");
}

TEST(ResultTest, ValueAndStatus) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(r.value(), 42);
  EXPECT_TRUE(r.status().ok());

  Result<int> e = out_of_range_error("too big");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(e.status().message(), "too big");

  // An OK status is not a value: it becomes an INTERNAL error.
  Result<int> bogus = Status();
  EXPECT_FALSE(bogus.ok());
  EXPECT_EQ(bogus.status().code(), StatusCode::kInternal);

  Result<std::string> s = std::string("abc");
  EXPECT_EQ(s->size(), 3u);
  std::string moved = std::move(s).value();
  EXPECT_EQ(moved, "abc");

  Result<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = *std::move(p);
  EXPECT_EQ(*owned, 7);
}

Status fails_if(bool fail) { return fail ? aborted_error("failed") : Status(); }

int g_after_return_if_error = 0;
Status uses_return_if_error(bool fail) {
  KILN_RETURN_IF_ERROR(fails_if(fail));
  ++g_after_return_if_error;
  return Status();
}

TEST(MacroTest, ReturnIfError) {
  g_after_return_if_error = 0;
  EXPECT_TRUE(uses_return_if_error(false).ok());
  EXPECT_EQ(g_after_return_if_error, 1);
  Status s = uses_return_if_error(true);
  EXPECT_EQ(s, aborted_error("failed"));
  EXPECT_EQ(g_after_return_if_error, 1);
}

Result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return invalid_argument_error(std::string("not a digit: ") + c);
  return c - '0';
}

Result<std::unique_ptr<int>> make_box(int v) {
  if (v < 0) return out_of_range_error("negative");
  return std::make_unique<int>(v);
}

Result<int> sum_two(char a, char b) {
  KILN_ASSIGN_OR_RETURN(int x, parse_digit(a));
  KILN_ASSIGN_OR_RETURN(auto y, parse_digit(b));
  return x + y;
}

Result<int> unbox(int v) {
  std::unique_ptr<int> box;
  KILN_ASSIGN_OR_RETURN(box, make_box(v));  // assigns to an existing, move-only variable
  return *box;
}

Status assign_in_status_function(char c, int* out) {
  KILN_ASSIGN_OR_RETURN(*out, parse_digit(c));
  return Status();
}

TEST(MacroTest, AssignOrReturn) {
  Result<int> ok = sum_two('3', '4');
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 7);

  Result<int> bad = sum_two('3', 'x');
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().to_string(), "INVALID_ARGUMENT: not a digit: x");

  EXPECT_EQ(*unbox(5), 5);
  EXPECT_EQ(unbox(-1).status().code(), StatusCode::kOutOfRange);

  int out = -1;
  EXPECT_TRUE(assign_in_status_function('9', &out).ok());
  EXPECT_EQ(out, 9);
  EXPECT_EQ(assign_in_status_function('q', &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 9);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(ResultDeathTest, TakingTheValueOfAnErrorIsFatalAndNamesTheStatus) {
  Result<int> error = not_found_error("no device 'opencl:5'");
  EXPECT_DEATH((void)*error, "kiln: fatal: .*NOT_FOUND: no device 'opencl:5'");
  Result<std::string> text = invalid_argument_error("bad");
  EXPECT_DEATH((void)text->size(), "INVALID_ARGUMENT: bad");
  EXPECT_DEATH((void)std::move(text).value(), "INVALID_ARGUMENT: bad");
}

}  // namespace
}  // namespace kiln
