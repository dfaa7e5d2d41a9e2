// The CUDA image builder without a GPU: NVRTC builds cubins or PTX per the image policy, and the
// disk cache makes a second build a hit, keys by source and architecture, and repairs entries that
// are corrupt or unreadable. Skipped, with the reason, where NVRTC does not load.
#include "drivers/cuda/cu_image_builder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/other_user.h"
#include "common/temp_dir.h"

namespace kiln::cuda {
namespace {

// Minimal kernels of kiln's CUDA ABI; they differ only in the value stored.
constexpr const char* kSource = R"CU(
extern "C" __global__ void k(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  KILN_BINDING(unsigned, 0)[threadIdx.x] = 1u;
}
)CU";
constexpr const char* kOtherSource = R"CU(
extern "C" __global__ void k(KILN_STATUS_PARAMS, KILN_BINDING_PARAMS(0)) {
  KILN_ENTRY();
  KILN_BINDING(unsigned, 0)[threadIdx.x] = 2u;
}
)CU";

bool is_elf(const std::string& bytes) { return bytes.rfind("\x7f" "ELF", 0) == 0; }

class CudaImageBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = nvrtc_available();
    if (!available.ok()) GTEST_SKIP() << "no NVRTC to build with: " << available;
    ASSERT_FALSE(dir_.path().empty());
  }

  DiskCache cache() const { return DiskCache(dir_.path()); }

  // The cache's entry files, by name.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  // The one entry of the cache, which the test expects to be the only one.
  std::string only_entry() const {
    std::vector<std::string> names = entries();
    EXPECT_EQ(names.size(), 1u);
    return names.empty() ? std::string() : names.front();
  }

  void overwrite(const std::string& name, const std::string& bytes) const {
    ASSERT_TRUE(write_file_atomic(dir_.file(name), bytes).ok());
  }

  // Builds kSource for `arch` with a new builder on the cache (another process, in effect:
  // nothing shared but the directory), expects `bytes`, and returns the builder's stats.
  ImageBuilderStats build_fresh(int arch, const std::string& bytes) const {
    ImageBuilder builder(cache());
    Result<KernelImage> image = builder.build(kSource, arch, "fresh");
    EXPECT_TRUE(image.ok()) << image.status();
    if (image.ok()) {
      EXPECT_EQ(image->bytes, bytes);
    }
    return builder.stats();
  }

  test::TempDir dir_{"kiln-cuda-image"};
};

TEST_F(CudaImageBuilderTest, ColdBuildIsStoredAndWarmBuildIsADiskHit) {
  ImageBuilder cold(cache());
  Result<KernelImage> first = cold.build(kSource, 80, "cold");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kind, CudaImage::kCubin);
  EXPECT_EQ(first->arch, 80);
  EXPECT_EQ(cold.stats().nvrtc_builds, 1u);
  EXPECT_EQ(cold.stats().disk_hits, 0u);
  const std::string name = only_entry();
  EXPECT_TRUE(name.size() > 6 && name.substr(name.size() - 6) == ".cubin") << name;

  Result<KernelImage> second = ImageBuilder(cache()).build(kSource, 80, "warm");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->kind, CudaImage::kCubin);
  EXPECT_EQ(second->arch, 80);
  const ImageBuilderStats warm = build_fresh(80, first->bytes);
  EXPECT_EQ(warm.nvrtc_builds, 0u);
  EXPECT_EQ(warm.disk_hits, 1u);
}

TEST_F(CudaImageBuilderTest, CubinsAreElf) {
  ImageBuilder builder(cache());
  for (int arch : {80, 90}) {
    if (!check_cuda_arch(arch).ok()) continue;  // an NVRTC without it is checked elsewhere
    Result<KernelImage> image = builder.build(kSource, arch, "elf");
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(image->kind, CudaImage::kCubin) << arch;
    EXPECT_TRUE(is_elf(image->bytes)) << arch;
  }
}

TEST_F(CudaImageBuilderTest, ArchitectureAndSourceArePartOfTheKey) {
  ImageBuilder builder(cache());
  ASSERT_TRUE(builder.build(kSource, 80, "a").ok());
  ASSERT_TRUE(builder.build(kSource, 90, "b").ok());
  ASSERT_TRUE(builder.build(kOtherSource, 80, "c").ok());
  EXPECT_EQ(builder.stats().nvrtc_builds, 3u);
  EXPECT_EQ(builder.stats().disk_hits, 0u);
  EXPECT_EQ(entries().size(), 3u);
  // The label is not part of the key: it only names the source in messages.
  ASSERT_TRUE(builder.build(kOtherSource, 80, "another label").ok());
  EXPECT_EQ(builder.stats().disk_hits, 1u);
  EXPECT_EQ(builder.stats().nvrtc_builds, 3u);
}

TEST_F(CudaImageBuilderTest, CorruptEntryIsRebuiltAndRepaired) {
  Result<KernelImage> original = ImageBuilder(cache()).build(kSource, 90, "original");
  ASSERT_TRUE(original.ok()) << original.status();
  const std::string name = only_entry();

  // Garbage in the file: the cache's checksum refuses it.
  overwrite(name, "not a cache entry at all");
  const ImageBuilderStats after_garbage = build_fresh(90, original->bytes);
  EXPECT_EQ(after_garbage.nvrtc_builds, 1u);
  EXPECT_EQ(after_garbage.disk_hits, 0u);

  // A well-formed entry under the right key whose payload is not a cubin: refused by the builder.
  overwrite(name, DiskCache::make_entry(name, "garbage that passes the checksum"));
  const ImageBuilderStats after_bad_payload = build_fresh(90, original->bytes);
  EXPECT_EQ(after_bad_payload.rejected_entries, 1u);
  EXPECT_EQ(after_bad_payload.nvrtc_builds, 1u);

  // Both rebuilds replaced the entry.
  const ImageBuilderStats repaired = build_fresh(90, original->bytes);
  EXPECT_EQ(repaired.disk_hits, 1u);
  EXPECT_EQ(repaired.nvrtc_builds, 0u);
  EXPECT_EQ(entries().size(), 1u);
}

TEST_F(CudaImageBuilderTest, UnreadableEntryIsRebuilt) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions";
  Result<KernelImage> original = ImageBuilder(cache()).build(kSource, 80, "original");
  ASSERT_TRUE(original.ok()) << original.status();
  ASSERT_EQ(::chmod(dir_.file(only_entry()).c_str(), 0), 0);
  EXPECT_EQ(build_fresh(80, original->bytes).nvrtc_builds, 1u);
  // The store renamed a readable entry over the unreadable one.
  EXPECT_EQ(build_fresh(80, original->bytes).disk_hits, 1u);
}

TEST_F(CudaImageBuilderTest, SourceThatDoesNotCompileIsInvalidArgumentWithNvrtcsLog) {
  ImageBuilder builder(cache());
  Result<KernelImage> image = builder.build(
      "extern \"C\" __global__ void k() { kiln_undeclared_name = 1; }", 80, "broken");
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kInvalidArgument) << image.status();
  const std::string& message = image.status().message();
  EXPECT_NE(message.find("kiln_undeclared_name"), std::string::npos) << message;
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("broken"), std::string::npos) << message;
  EXPECT_EQ(builder.stats().nvrtc_builds, 0u);
  EXPECT_TRUE(entries().empty());
}

TEST_F(CudaImageBuilderTest, ArchitectureNvrtcCannotBuildExactlyGetsPtxForTheNewestBelow) {
  // NVRTC 13 builds sm_90 and sm_100 but not sm_95: a device of sm_95 gets PTX for compute_90.
  for (int arch = 91; arch <= 95; ++arch) {
    if (check_cuda_arch(arch).ok()) GTEST_SKIP() << "this NVRTC builds sm_" << arch;
  }
  if (!check_cuda_arch(90).ok()) GTEST_SKIP() << "this NVRTC does not build sm_90";
  ImageBuilder builder(cache());
  Result<KernelImage> image = builder.build(kSource, 95, "ptx");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->kind, CudaImage::kPtx);
  EXPECT_EQ(image->arch, 90);
  EXPECT_NE(image->bytes.find(".version"), std::string::npos);
  EXPECT_NE(image->bytes.find(".target sm_90"), std::string::npos) << image->bytes.substr(0, 400);
  const std::string name = only_entry();
  EXPECT_TRUE(name.size() > 4 && name.substr(name.size() - 4) == ".ptx") << name;

  // A checksummed payload that is not PTX text is refused and rebuilt.
  overwrite(name, DiskCache::make_entry(name, std::string("\x7f" "ELF not ptx", 12)));
  EXPECT_EQ(build_fresh(95, image->bytes).rejected_entries, 1u);
  EXPECT_EQ(build_fresh(95, image->bytes).disk_hits, 1u);
}

TEST_F(CudaImageBuilderTest, ArchitectureOlderThanNvrtcIsUnimplemented) {
  // Every NVRTC kiln loads (11.2 and later) dropped sm_30.
  Result<ImageTarget> target = choose_image_target(30);
  ASSERT_FALSE(target.ok());
  EXPECT_EQ(target.status().code(), StatusCode::kUnimplemented) << target.status();
  EXPECT_NE(target.status().message().find("sm_30"), std::string::npos) << target.status();
  Result<KernelImage> image = ImageBuilder(cache()).build(kSource, 30, "old");
  EXPECT_EQ(image.status().code(), StatusCode::kUnimplemented) << image.status();
}

TEST_F(CudaImageBuilderTest, NotAnArchitectureIsInvalidArgument) {
  for (int arch : {0, -80, 1000}) {
    EXPECT_EQ(choose_image_target(arch).status().code(), StatusCode::kInvalidArgument) << arch;
  }
}

// An image planted under a valid trailer in a cache directory another user owns (or, without root,
// one others may write) is never returned: the source is built again.
TEST_F(CudaImageBuilderTest, ImagePlantedInACacheOfAnotherUserIsNotReturned) {
  Result<KernelImage> ours = ImageBuilder(cache()).build(kSource, 80, "ours");
  ASSERT_TRUE(ours.ok()) << ours.status();
  test::TempDir other{"kiln-cuda-image-other"};
  Result<KernelImage> theirs = ImageBuilder(DiskCache(other.path())).build(kOtherSource, 80, "theirs");
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_NE(theirs->bytes, ours->bytes);
  const std::string name = only_entry();
  overwrite(name, DiskCache::make_entry(name, theirs->bytes));
  if (::geteuid() == 0) {
    ASSERT_TRUE(test::give_to_other_user(dir_.path()));
  } else {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
  }
  const ImageBuilderStats stats = build_fresh(80, ours->bytes);
  EXPECT_EQ(stats.nvrtc_builds, 1u);
  EXPECT_EQ(stats.disk_hits, 0u);
}

TEST_F(CudaImageBuilderTest, DisabledCacheBuildsEveryTime) {
  ImageBuilder builder{DiskCache("")};
  ASSERT_TRUE(builder.build(kSource, 80, "a").ok());
  ASSERT_TRUE(builder.build(kSource, 80, "a").ok());
  EXPECT_EQ(builder.stats().nvrtc_builds, 2u);
  EXPECT_EQ(builder.stats().disk_hits, 0u);
}

}  // namespace
}  // namespace kiln::cuda
