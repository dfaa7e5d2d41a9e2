// Where `kiln` writes (--output, --trace, `compile -o`): a FIFO or a character device is written
// in place, a symbolic link's target is replaced (not the link), and an output that is the
// program or an --input file is refused before anything runs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/fifo_reader.h"
#include "cli_test_util.h"

namespace kiln::tools {
namespace {

// y = 2 x over 64 Ki floats: an .npy of 256 KiB, more than a pipe holds.
constexpr const char* kDoubleProgram =
    "input  x : f32[65536]\n"
    "output y : f32[65536]\n"
    "y[i] = x[i] * 2\n";

class CliOutputFilesTest : public CliTest {
 protected:
  bool is(const std::string& path, mode_t type) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == type;
  }
};

TEST_F(CliOutputFilesTest, OutputsToAFifoAreWrittenThrough) {
  const std::string program = dir_.file("double.kiln");
  ASSERT_TRUE(write_bytes(program, kDoubleProgram).ok());
  std::vector<float> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 1000) * 0.25f;
  ASSERT_TRUE(write_bytes(dir_.file("x.npy"), format_npy(f32_array({65536}, x))).ok());

  const std::string fifo = dir_.file("y.fifo"), trace_fifo = dir_.file("trace.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(trace_fifo.c_str(), 0600), 0);
  test::FifoReader reader(fifo), trace_reader(trace_fifo);
  ASSERT_TRUE(reader.opened() && trace_reader.opened());
  std::vector<std::string> args = {"run", program, "--input", "x=" + dir_.file("x.npy"),
                                   "--output", "y=" + fifo, "--trace", trace_fifo};
  ProcessResult r = run(args);
  const std::string received = reader.finish(), trace = trace_reader.finish();
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  EXPECT_TRUE(is(fifo, S_IFIFO)) << "the FIFO was replaced by a file";
  EXPECT_TRUE(is(trace_fifo, S_IFIFO)) << "the trace FIFO was replaced by a file";
  Result<NpyArray> y = parse_npy(received, "from the FIFO");
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<float> v = f32_values(*y);
  ASSERT_EQ(v.size(), x.size());
  for (size_t i = 0; i < x.size(); i += 997) EXPECT_EQ(v[i], 2 * x[i]) << i;
  EXPECT_NE(trace.find("traceEvents"), std::string::npos) << trace.substr(0, 200);

  // compile -o, too.
  test::FifoReader source_reader(fifo);
  r = run({"compile", program, "-o", fifo});
  const std::string text = source_reader.finish();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(is(fifo, S_IFIFO));
  EXPECT_NE(text.find("output y"), std::string::npos) << text;
}

TEST_F(CliOutputFilesTest, OutputsThroughASymlinkReplaceItsTarget) {
  const std::string target = dir_.file("target.npy"), link = dir_.file("link.npy");
  ASSERT_TRUE(write_bytes(target, "old contents").ok());
  ASSERT_EQ(::symlink("target.npy", link.c_str()), 0);
  // A dangling link: its target is created.
  const std::string trace_link = dir_.file("trace-link.json");
  ASSERT_EQ(::symlink(dir_.file("trace.json").c_str(), trace_link.c_str()), 0);
  const std::string source_target = dir_.file("source.c"), source_link = dir_.file("source-link.c");
  ASSERT_TRUE(write_bytes(source_target, "old").ok());
  ASSERT_EQ(::symlink(source_target.c_str(), source_link.c_str()), 0);

  std::vector<std::string> args = {"run", example("softmax"), "--output", "y=" + link, "--trace", trace_link};
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  EXPECT_TRUE(is(link, S_IFLNK)) << "the link was replaced by a file";
  EXPECT_TRUE(is(trace_link, S_IFLNK)) << "the trace link was replaced by a file";
  Result<NpyArray> y = read_npy(target);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape, (std::vector<int64_t>{4, 10}));
  Result<std::string> trace = read_file(dir_.file("trace.json"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_NE(trace->find("traceEvents"), std::string::npos);

  r = run({"compile", example("softmax"), "-o", source_link});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(is(source_link, S_IFLNK));
  EXPECT_NE(read_file(source_target)->find("output y"), std::string::npos);
}

TEST_F(CliOutputFilesTest, OutputsToACharacterDeviceLeaveItADevice) {
  // A private /dev/null node (major 1, minor 3), so that a failure never touches the real one.
  const std::string null = dir_.file("null");
  if (::geteuid() != 0 || ::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "creating a device node needs root";
  }
  std::vector<std::string> args = {"run", example("softmax"), "--output", "y=" + null, "--trace", null};
  ProcessResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
  // ASSERT: a kiln that replaces device nodes must not get to the real /dev/null below.
  ASSERT_TRUE(is(null, S_IFCHR)) << "the device node was replaced by a file";
  r = run({"compile", example("softmax"), "-o", null});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(is(null, S_IFCHR));
  // The real /dev/null, once ours has shown that it is written through (and only if it is a
  // device now: on a machine where something else broke it, a regular file is rightly replaced).
  if (!is("/dev/null", S_IFCHR)) GTEST_SKIP() << "/dev/null is not a character device on this machine";
  r = run({"run", example("softmax"), "--output", "y=/dev/null"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(is("/dev/null", S_IFCHR));
}

TEST_F(CliOutputFilesTest, AFullDeviceIsAnIoFailure) {
  // A private /dev/full node (major 1, minor 7): a kiln that replaced it would not harm the real one.
  const std::string full = dir_.file("full");
  if (::geteuid() != 0 || ::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "creating a device node needs root";
  }
  // Written through, the device's ENOSPC is the failure, naming the file.
  ProcessResult r = run({"compile", example("softmax"), "-o", full});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(full), std::string::npos) << r.output;
  r = run({"run", example("softmax"), "--output", "y=" + full});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // Standard output on a full device: the printed text did not arrive.
  r = kiln({"compile", example("softmax")}, env(), Captured::kStderr, full);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("standard output"), std::string::npos) << r.output;
  EXPECT_TRUE(is(full, S_IFCHR));
}

// A run whose last output fails writes none: the --output staged before the trace that fails is
// not renamed into place, and no staged file is left behind.
TEST_F(CliOutputFilesTest, AFailedOutputLeavesNoOtherOutputWritten) {
  const std::string full = dir_.file("full");
  if (::geteuid() != 0 || ::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "creating a device node needs root";
  }
  const std::string y = dir_.file("y.npy"), values = dir_.file("values.jsonl");
  ProcessResult r = run({"run", example("softmax"), "--output", "y=" + y, "--trace", full});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(full), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(y)) << r.output;
  // The same with the output there from before: it keeps its old contents.
  ASSERT_TRUE(write_bytes(y, "old").ok());
  r = run({"run", example("softmax"), "--output", "y=" + y, "--trace-values", values, "--trace", full});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(*read_file(y), "old");
  EXPECT_FALSE(std::filesystem::exists(values));
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_NE(entry.path().filename().string()[0], '.') << "a staged file was left behind: " << entry.path();
  }
}

// The trace has the compiler's phases on its thread: lowering, the passes, then the build.
TEST_F(CliOutputFilesTest, TheTraceHasTheCompilersPhasesInOrder) {
  const std::string trace = dir_.file("trace.json");
  ProcessResult r = run({"run", example("softmax"), "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result<std::string> json = read_file(trace);
  ASSERT_TRUE(json.ok()) << json.status();
  const size_t lowering = json->find("\"name\": \"lowering\""), passes = json->find("\"name\": \"passes\""),
               build = json->find("\"name\": \"compile for ");
  ASSERT_NE(lowering, std::string::npos) << *json;
  ASSERT_NE(passes, std::string::npos) << *json;
  ASSERT_NE(build, std::string::npos) << *json;
  EXPECT_LT(lowering, passes);
  EXPECT_LT(passes, build);
}

TEST_F(CliOutputFilesTest, AnOutputThatIsTheProgramOrAnInputIsRefused) {
  const std::string program = dir_.file("softmax.kiln");
  ASSERT_TRUE(write_bytes(program, *read_file(example("softmax"))).ok());
  const std::string program_text = *read_file(program);
  const std::string x = dir_.file("x.npy");
  const std::string x_bytes = format_npy(f32_array({4, 10}, std::vector<float>(40, 0.5f)));
  ASSERT_TRUE(write_bytes(x, x_bytes).ok());
  ASSERT_EQ(::symlink("x.npy", dir_.file("x-link.npy").c_str()), 0);
  ASSERT_EQ(::link(x.c_str(), dir_.file("x-hard.npy").c_str()), 0);
  ASSERT_EQ(::symlink("softmax.kiln", dir_.file("program-link.kiln").c_str()), 0);

  const std::vector<std::vector<std::string>> cases = {
      {"run", program, "--output", "y=" + program},
      {"run", program, "--output", "y=" + dir_.file("program-link.kiln")},
      {"run", program, "--trace", dir_.path() + "/./softmax.kiln"},
      {"run", program, "--input", "x=" + x, "--output", "y=" + x},
      {"run", program, "--input", "x=" + x, "--output", "y=" + dir_.file("x-link.npy")},
      {"run", program, "--input", "x=" + dir_.file("x-link.npy"), "--output", "y=" + dir_.file("x-hard.npy")},
      {"compile", program, "-o", dir_.file("program-link.kiln")},
  };
  for (const auto& args : cases) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find("destroy"), std::string::npos) << describe_run(args, r);
    EXPECT_EQ(r.output.find("usage:"), std::string::npos) << describe_run(args, r);
  }
  EXPECT_EQ(*read_file(program), program_text);
  EXPECT_EQ(*read_file(x), x_bytes);
  EXPECT_TRUE(is(dir_.file("x-link.npy"), S_IFLNK));
  EXPECT_TRUE(is(dir_.file("program-link.kiln"), S_IFLNK));
}

// A param's own --input may be its --output: the file is read before the run and replaced after
// it, so a training step can update a checkpoint in place. An input's file still may not be.
TEST_F(CliOutputFilesTest, AParamIsUpdatedInPlace) {
  const std::string program = dir_.file("step.kiln");
  ASSERT_TRUE(write_bytes(program, "param w : f32[4]\noutput y : f32[4]\ny[i] = w[i] * 2\nw[i] = w[i] + 1\n").ok());
  const std::string w = dir_.file("w.npy");
  ASSERT_TRUE(write_bytes(w, format_npy(f32_array({4}, {1, 2, 3, 4}))).ok());
  for (int step = 1; step <= 2; ++step) {
    std::vector<std::string> args = {"run", program, "--input", "w=" + w, "--output", "w=" + w};
    ProcessResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    Result<NpyArray> after = read_npy(w);
    ASSERT_TRUE(after.ok()) << after.status();
    const float k = static_cast<float>(step);
    EXPECT_EQ(f32_values(*after), (std::vector<float>{1 + k, 2 + k, 3 + k, 4 + k})) << "step " << step;
  }
  // Not an input's file as another node's output, nor an output over a param's file of another name.
  std::vector<std::string> args = {"run", program, "--input", "w=" + w, "--output", "y=" + w};
  EXPECT_EQ(run(args).exit_code, 2);
}

}  // namespace
}  // namespace kiln::tools
