// What `kiln` reads is bounded: a program of at most 64 MiB, an .npy header of at most 64 KiB and
// exactly as many .npy data bytes as the header says. Devices that never end (/dev/zero,
// /dev/urandom) and sparse giants are refused with a message naming the file, never with an
// exhausted memory.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fifo_writer.h"
#include "cli_test_util.h"

namespace kiln::tools {
namespace {

class CliInputLimitsTest : public CliTest {
 protected:
  // Runs `args`, expecting exit 2 and a message naming `file` and containing `words`.
  void expect_refused(const std::vector<std::string>& args, const std::string& file,
                      std::initializer_list<std::string> words) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find(file), std::string::npos) << "the message does not name " << file << "\n"
                                                      << describe_run(args, r);
    for (const std::string& w : words) {
      EXPECT_NE(r.output.find(w), std::string::npos) << "no '" << w << "' in\n" << describe_run(args, r);
    }
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << describe_run(args, r);
    EXPECT_EQ(r.output.find("usage:"), std::string::npos) << describe_run(args, r);
  }
  std::string sparse_file(const std::string& name, const std::string& head, off_t size) {
    const std::string path = dir_.file(name);
    EXPECT_TRUE(write_bytes(path, head).ok());
    EXPECT_EQ(::truncate(path.c_str(), size), 0);
    return path;
  }
};

TEST_F(CliInputLimitsTest, EndlessDevicesAsProgramsAreRefused) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    for (const char* command : {"run", "compile"}) {
      expect_refused({command, device}, device, {"larger than 64 MiB"});
    }
  }
}

TEST_F(CliInputLimitsTest, EndlessDevicesAsNpyInputsAreRefused) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    expect_refused({"run", example("softmax"), "--input", std::string("x=") + device}, device, {"not a .npy file"});
  }
}

TEST_F(CliInputLimitsTest, SparseGiantsAreRefusedWithoutReading) {
  // 1 TiB, stored in a few blocks: refused by its size, before any read.
  const off_t tib = off_t{1} << 40;
  const std::string program = sparse_file("giant.kiln", "output y : f32\ny = 1\n", tib);
  expect_refused({"run", program}, program, {"larger than 64 MiB", std::to_string(tib)});
  // A valid header for x (f32 [4, 10]), then a terabyte of zeros.
  NpyArray x = f32_array({4, 10}, std::vector<float>(40, 1.0f));
  const std::string npy = sparse_file("giant.npy", format_npy(x), tib);
  expect_refused({"run", example("softmax"), "--input", "x=" + npy}, npy, {"instead of 160"});
}

TEST_F(CliInputLimitsTest, NpyHeadersAreBounded) {
  // Version 2 allows a 4 GiB header; kiln reads at most 64 KiB of one.
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\x7f", 4);
  bytes += "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 10), }";
  const std::string file = dir_.file("long-header.npy");
  ASSERT_TRUE(write_bytes(file, bytes).ok());
  expect_refused({"run", example("softmax"), "--input", "x=" + file}, file, {"header", "65536"});
  // A header announcing an enormous array is compared with the declaration before any data.
  NpyArray huge{ir::DType::kF32, {1000000, 1000000}, ""};
  const std::string announced = dir_.file("announced.npy");
  ASSERT_TRUE(write_bytes(announced, format_npy(huge)).ok());
  expect_refused({"run", example("softmax"), "--input", "x=" + announced}, announced,
                 {"f32 [1000000, 1000000]", "f32 [4, 10]"});
}

TEST_F(CliInputLimitsTest, NpyDataFromAStreamIsReadExactly) {
  // A FIFO that delivers a valid x, then zeros for as long as anyone reads: kiln reads the data
  // the header calls for, sees that the stream goes on, and says so.
  const std::string fifo = dir_.file("x.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // At most 256 MiB of zeros, so that a kiln that reads to the end fails this test instead of
  // hanging it.
  test::FifoWriter writer(fifo, format_npy(f32_array({4, 10}, std::vector<float>(40, 1.0f))),
                          std::string(1 << 16, '\0'), 4096);
  std::vector<std::string> args = {"run", example("softmax"), "--input", "x=" + fifo};
  ProcessResult r = run(args);
  writer.finish();
  EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
  EXPECT_NE(r.output.find(fifo), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("more than 160"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::tools
