// kiln's NCCL declarations (ral/library/nccl.h) against nccl.h: every function kiln binds has
// the header's signature, and the types, ops and codes kiln names have the header's values.
// static_asserts, compiled only where CMake found nccl.h (KILN_HAVE_NCCL_H); elsewhere the test
// reports itself skipped.
#include <gtest/gtest.h>

#include <string>

#include "common/abi_same.h"
#include "ral/library/nccl.h"

#if KILN_HAVE_NCCL_H
#include <nccl.h>

namespace {
// ncclCommInitRank takes the unique id by value: a struct of the same size and alignment passes
// the same way, and the header's signature is the one kiln declares with it.
static_assert(sizeof(kiln::ral::library::NcclUniqueId) == sizeof(ncclUniqueId) &&
              alignof(kiln::ral::library::NcclUniqueId) == alignof(ncclUniqueId));
static_assert(kiln::ral::library::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(std::is_same_v<decltype(&::ncclCommInitRank), ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int)>);
static_assert(std::is_same_v<decltype(kiln::ral::library::Nccl::CommInitRank),
                             int (*)(kiln::ral::library::ncclComm_t*, int, kiln::ral::library::NcclUniqueId, int)>);
static_assert(std::is_same_v<decltype(&::ncclGetUniqueId), ncclResult_t (*)(ncclUniqueId*)>);
static_assert(std::is_same_v<decltype(kiln::ral::library::Nccl::GetUniqueId), int (*)(kiln::ral::library::NcclUniqueId*)>);
}  // namespace
#endif

namespace kiln::ral::library {
namespace {

#if KILN_HAVE_NCCL_H
// The members other than the two that take the unique id (checked above).
template <bool kSkip, typename Kiln, typename Header>
constexpr bool same_or_skipped() {
  if constexpr (kSkip) return true;
  else return test::AbiSame<Kiln, Header>::value;
}
#define KILN_CHECK(member, symbol)                                                                        \
  static_assert(same_or_skipped<std::string_view(#member) == "CommInitRank" || std::string_view(#member) == "GetUniqueId", decltype(Nccl::member),      \
                                decltype(&::symbol)>(),                                                   \
                "Nccl::" #member " does not match nccl.h's " #symbol);
KILN_NCCL_FUNCTIONS(KILN_CHECK)
#undef KILN_CHECK
static_assert(std::is_same_v<ncclComm_t, ::ncclComm_t>);
static_assert(kNcclSuccess == ncclSuccess && kNcclInProgress == ncclInProgress);
static_assert(kNcclInt8 == ncclInt8 && kNcclUint8 == ncclUint8 && kNcclInt32 == ncclInt32 && kNcclUint32 == ncclUint32 &&
              kNcclInt64 == ncclInt64 && kNcclUint64 == ncclUint64 && kNcclFloat16 == ncclFloat16 &&
              kNcclFloat32 == ncclFloat32 && kNcclFloat64 == ncclFloat64 && kNcclBfloat16 == ncclBfloat16);
static_assert(kNcclSum == ncclSum && kNcclMax == ncclMax && kNcclMin == ncclMin);
static_assert(kNcclMinimumVersion == NCCL_VERSION(2, 10, 0));
#endif

TEST(NcclTest, DeclarationsMatchNcclH) {
#if !KILN_HAVE_NCCL_H
  GTEST_SKIP() << "CMake did not find nccl.h when configuring, so kiln's NCCL declarations are not checked "
                  "against it";
#endif
}

// Loading binds every symbol, or says why not; it needs no GPU.
TEST(NcclTest, LoadsOrSaysWhy) {
  const Nccl& lib = nccl();
  if (!lib.status.ok()) {
    EXPECT_EQ(lib.status.code(), StatusCode::kUnavailable);
    EXPECT_NE(lib.status.message().find("NCCL"), std::string::npos) << lib.status;
    GTEST_SKIP() << lib.status;
  }
#define KILN_CHECK_BOUND(member, symbol) EXPECT_NE(lib.member, nullptr) << #symbol;
  KILN_NCCL_FUNCTIONS(KILN_CHECK_BOUND)
#undef KILN_CHECK_BOUND
  EXPECT_FALSE(lib.version.empty());
}

}  // namespace
}  // namespace kiln::ral::library
