// Files a user names: bounded reading (devices that never end, sparse giants) and writing that
// keeps what a name refers to (FIFOs, character devices, symbolic links).
#include "kiln/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "base/disk_cache.h"
#include "base/fifo_reader.h"

namespace kiln {
namespace {

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-file-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(FileTest, ReadsStopAtTheBound) {
  // /dev/zero never ends: a bounded read says so instead of reading until memory runs out.
  Result<std::string> zero = read_bounded_file("/dev/zero", 1 << 20, "the program");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("/dev/zero"), std::string::npos) << zero.status();
  EXPECT_NE(zero.status().message().find("the program is larger than 1 MiB"), std::string::npos) << zero.status();

  // A regular file is judged by its size, without reading: a sparse 1 TiB file costs nothing.
  const std::string sparse = file("sparse");
  int fd = ::open(sparse.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ::close(fd);
  Result<std::string> big = read_bounded_file(sparse, 1 << 20, "the program");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find(std::to_string(uint64_t{1} << 40)), std::string::npos) << big.status();

  // Exactly at the bound is fine; a missing file is NOT_FOUND naming it.
  ASSERT_TRUE(write_file_atomic(file("small"), std::string(1024, 'x')).ok());
  Result<std::string> small = read_bounded_file(file("small"), 1024, "it");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->size(), 1024u);
  EXPECT_FALSE(read_bounded_file(file("small"), 1023, "it").ok());
  Result<std::string> missing = read_bounded_file(file("missing"), 10, "it");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  EXPECT_FALSE(read_bounded_file(dir_, 10, "it").ok());
}

TEST_F(FileTest, InputFileReadsInSteps) {
  ASSERT_TRUE(write_file_atomic(file("f"), "abcdef").ok());
  Result<InputFile> f = InputFile::open(file("f"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->regular_size(), 6u);
  EXPECT_EQ(*f->read(2), "ab");
  // Asking for far more than the file holds reads what there is, allocating only that.
  EXPECT_EQ(*f->read(size_t{1} << 40), "cdef");
  EXPECT_TRUE(*f->at_end());
  Result<InputFile> zero = InputFile::open("/dev/zero");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_FALSE(zero->regular_size().has_value());
  EXPECT_EQ(*zero->read(3), std::string(3, '\0'));
  EXPECT_FALSE(*zero->at_end());
}

TEST_F(FileTest, WritesReplaceRegularFilesAndLinkTargets) {
  const std::string real = file("real"), link = file("link");
  ASSERT_TRUE(write_file_atomic(real, "old").ok());
  ASSERT_EQ(::symlink("real", link.c_str()), 0);  // relative to the link's directory
  ASSERT_TRUE(write_output_file(link, "new").ok());
  struct stat st;
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(*read_file(real), "new");

  // A dangling link (through a second link) creates the file it points to.
  ASSERT_EQ(::symlink("link2", file("link1").c_str()), 0);
  ASSERT_EQ(::symlink(file("created").c_str(), file("link2").c_str()), 0);
  ASSERT_TRUE(write_output_file(file("link1"), "made").ok());
  ASSERT_EQ(::lstat(file("link1").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(*read_file(file("created")), "made");

  // A plain name: created, then replaced.
  ASSERT_TRUE(write_output_file(file("plain"), "1").ok());
  ASSERT_TRUE(write_output_file(file("plain"), "22").ok());
  EXPECT_EQ(*read_file(file("plain")), "22");

  // A directory is refused, naming it.
  Status dir = write_output_file(dir_, "x");
  EXPECT_EQ(dir.code(), StatusCode::kFailedPrecondition) << dir;
  EXPECT_NE(dir.message().find("a directory"), std::string::npos) << dir;
}

TEST_F(FileTest, WritesThroughFifosAndCharacterDevices) {
  const std::string fifo = file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::FifoReader reader(fifo);
  ASSERT_TRUE(reader.opened());
  // More than a pipe holds, so that the writer waits for the reader.
  const std::string payload(300000, 'q');
  Status written = write_output_file(fifo, payload);
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_EQ(reader.finish(), payload);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";

  // A character device of our own (a private /dev/null node), where we may create one.
  const std::string null = file("null");
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "cannot create device nodes here";
  ASSERT_TRUE(write_output_file(null, "discarded").ok());
  ASSERT_EQ(::lstat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced";
}

// StagedFiles: nothing is visible before commit(), everything after; what is dropped uncommitted
// leaves the old files and no temporary behind.
TEST_F(FileTest, StagedFilesAppearTogetherOrNotAtAll) {
  auto names = [&] {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  const std::string real = file("real"), link = file("link"), fresh = file("fresh");
  ASSERT_TRUE(write_file_atomic(real, "old").ok());
  ASSERT_EQ(::symlink("real", link.c_str()), 0);
  {
    StagedFiles files;
    ASSERT_TRUE(files.stage(link, "new").ok());
    const std::string_view parts[] = {"fr", "esh"};
    ASSERT_TRUE(files.stage(fresh, parts).ok());
    EXPECT_EQ(*read_file(real), "old");
    EXPECT_FALSE(std::filesystem::exists(fresh));
  }  // dropped: nothing written, nothing left behind
  EXPECT_EQ(*read_file(real), "old");
  EXPECT_EQ(names(), (std::vector<std::string>{"link", "real"}));

  StagedFiles files;
  ASSERT_TRUE(files.stage(link, "new").ok());
  ASSERT_TRUE(files.stage(fresh, "fresh").ok());
  Status committed = files.commit();
  ASSERT_TRUE(committed.ok()) << committed;
  EXPECT_EQ(*read_file(real), "new");  // through the link, which stays a link
  EXPECT_EQ(*read_file(fresh), "fresh");
  EXPECT_EQ(names(), (std::vector<std::string>{"fresh", "link", "real"}));

  // A device that fails at commit (a private /dev/full): the regular files are not replaced.
  const std::string full = file("full");
  if (::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) GTEST_SKIP() << "cannot create device nodes here";
  StagedFiles failing;
  ASSERT_TRUE(failing.stage(fresh, "newer").ok());
  ASSERT_TRUE(failing.stage(full, "anything").ok());
  Status st = failing.commit();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(full), std::string::npos) << st;
  EXPECT_EQ(*read_file(fresh), "fresh");
}

TEST_F(FileTest, IdentityIsTheFileNotTheName) {
  ASSERT_TRUE(write_file_atomic(file("a"), "x").ok());
  ASSERT_EQ(::link(file("a").c_str(), file("hard").c_str()), 0);
  ASSERT_EQ(::symlink("a", file("soft").c_str()), 0);
  Result<std::optional<FileIdentity>> a = file_identity(file("a"));
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_TRUE((*a)->regular);
  for (const std::string& other : {file("hard"), file("soft"), dir_ + "/./a"}) {
    Result<std::optional<FileIdentity>> id = file_identity(other);
    ASSERT_TRUE(id.ok() && id->has_value()) << other;
    EXPECT_TRUE(**id == **a) << other;
  }
  ASSERT_TRUE(write_file_atomic(file("b"), "x").ok());
  EXPECT_FALSE(**file_identity(file("b")) == **a);
  Result<std::optional<FileIdentity>> none = file_identity(file("nothing"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE((**file_identity("/dev/null")).regular);
}

}  // namespace
}  // namespace kiln
