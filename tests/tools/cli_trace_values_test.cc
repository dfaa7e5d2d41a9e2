// `kiln trace-values FILE`: the tree of a value trace written by hand to the format (docs/cli.md,
// "Value trace files"), the --routine / --statement / --first-nan filters, every kind of
// malformed or unreadable file (exit 2 or 1 with FILE:LINE, never a crash), and the parsing of
// `kiln run --trace-values FILE`.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fifo_writer.h"
#include "cli_test_util.h"

namespace kiln::tools {
namespace {

constexpr const char* kHeader = R"J({"kiln_value_trace": 1, "lines_per_statement": 2})J";

// Run 1 (train): a statement at line 14 with more points than logged, and a gemm call at 20.
constexpr const char* kRun1 =
    R"J({"run": 1, "routine": "train", "stream": "stream 0", "device": "cpu", "run_number": 0,)J"
    R"J( "begin_ns": 1000, "end_ns": 413000, "entries": [)J"
    R"J({"kind": "statement", "file": "moons.kiln", "line": 14,)J"
    R"J( "text": "h[b, j] = relu(sum(x[b, k] * w1[k, j]))", "target": "h", "lines": [)J"
    R"J({"indices": {"b": 0, "j": 1, "k": 0}, "reads": [{"ref": "x[b, k]", "value": 0.5},)J"
    R"J( {"ref": "w1[k, j]", "value": -0.25}], "value": 1.25},)J"
    R"J({"indices": {"b": 0, "j": 1, "k": 1}, "reads": [{"ref": "x[b, k]", "value": 1e-07},)J"
    R"J( {"ref": "w1[k, j]", "value": 3}], "value": 1.2500003}], "truncated": true},)J"
    R"J({"kind": "call", "file": "moons.kiln", "line": 20, "text": "call gemm(a, b) -> c", "function": "gemm",)J"
    R"J( "inputs": [{"name": "a", "dtype": "f32", "shape": [4, 8], "min": -1.5, "max": 2.0, "mean": 0.125,)J"
    R"J( "nans": 0, "infs": 0}], "outputs": [{"name": "c", "dtype": "f32", "shape": [4, 4], "min": -1,)J"
    R"J( "max": 3, "mean": 0.5, "nans": 0, "infs": 0}]}]})J";

// Run 2 (eval): a scalar statement at line 30, with an inlined intermediate.
constexpr const char* kRun2 =
    R"J({"run": 2, "routine": "eval", "stream": "stream 0", "device": "cpu", "run_number": 0,)J"
    R"J( "begin_ns": 500000, "end_ns": 600000, "entries": [)J"
    R"J({"kind": "statement", "file": "moons.kiln", "line": 30, "text": "loss = sum(d[i] * d[i])",)J"
    R"J( "target": "loss", "lines": [{"indices": {"i": 0}, "reads": [{"ref": "inlined d[i]", "value": -2}],)J"
    R"J( "value": 4}]}]})J";

// Run 3 (train again): at line 14, point b=1 j=0 k=2 reads inf and 0 and stores nan; then the
// gemm's output holds NaNs.
constexpr const char* kRun3 =
    R"J({"run": 3, "routine": "train", "stream": "stream 1", "device": "cpu", "run_number": 1,)J"
    R"J( "begin_ns": 700000, "end_ns": 900000, "entries": [)J"
    R"J({"kind": "statement", "file": "moons.kiln", "line": 14,)J"
    R"J( "text": "h[b, j] = relu(sum(x[b, k] * w1[k, j]))", "target": "h", "lines": [)J"
    R"J({"indices": {"b": 1, "j": 0, "k": 1}, "reads": [{"ref": "x[b, k]", "value": 2},)J"
    R"J( {"ref": "w1[k, j]", "value": 0.5}], "value": 1},)J"
    R"J({"indices": {"b": 1, "j": 0, "k": 2}, "reads": [{"ref": "x[b, k]", "value": "inf"},)J"
    R"J( {"ref": "w1[k, j]", "value": 0}], "value": "nan"}]},)J"
    R"J({"kind": "call", "file": "moons.kiln", "line": 20, "text": "call gemm(a, b) -> c", "function": "gemm",)J"
    R"J( "inputs": [{"name": "a", "dtype": "f32", "shape": [4, 8], "min": null, "max": null, "mean": null,)J"
    R"J( "nans": 32, "infs": 0}], "outputs": [{"name": "c", "dtype": "f32", "shape": [4, 4], "min": -1,)J"
    R"J( "max": 3, "mean": 0.5, "nans": 3, "infs": 1}]}]})J";

std::string lines(std::initializer_list<std::string> each) {
  std::string out;
  for (const std::string& line : each) out += line + "\n";
  return out;
}

class CliTraceValuesTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    trace_ = write("trace.jsonl", lines({kHeader, kRun1, kRun2, kRun3}));
  }
  std::string write(const std::string& name, const std::string& contents) {
    const std::string path = dir_.file(name);
    EXPECT_TRUE(write_bytes(path, contents).ok());
    return path;
  }
  // `kiln ARGS...` with standard output alone (standard error must stay empty).
  std::string listing(const std::vector<std::string>& args) {
    ProcessResult r = kiln(args, env(), Captured::kStdout, dir_.file("stderr"));
    EXPECT_EQ(r.exit_code, 0) << describe_run(args, r);
    EXPECT_EQ(*read_file(dir_.file("stderr")), "") << describe_run(args, r);
    return r.output;
  }
  // Runs `args`, expecting exit `code` and a message with each of `words`, and no usage.
  void expect_error(const std::vector<std::string>& args, int code, std::initializer_list<std::string> words) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, code) << describe_run(args, r);
    for (const std::string& w : words) {
      EXPECT_NE(r.output.find(w), std::string::npos) << "no '" << w << "' in\n" << describe_run(args, r);
    }
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << describe_run(args, r);
    EXPECT_EQ(r.output.find("usage:"), std::string::npos) << describe_run(args, r);
  }
  static void expect_has(const std::string& text, std::initializer_list<std::string> parts) {
    for (const std::string& p : parts) EXPECT_NE(text.find(p), std::string::npos) << "no '" << p << "' in\n" << text;
  }
  static void expect_lacks(const std::string& text, std::initializer_list<std::string> parts) {
    for (const std::string& p : parts) EXPECT_EQ(text.find(p), std::string::npos) << "'" << p << "' in\n" << text;
  }

  std::string trace_;
};

TEST_F(CliTraceValuesTest, PrintsEveryRunAsATree) {
  const std::string out = listing({"trace-values", trace_});
  EXPECT_EQ(out.rfind("run 1: routine train (1st run) on stream \"stream 0\" (cpu), 0.412 ms\n"
                      "  moons.kiln:14  h[b, j] = relu(sum(x[b, k] * w1[k, j]))\n"
                      "    b=0 j=1 k=0  x[b, k]=0.5  w1[k, j]=-0.25  -> 1.25\n"
                      "    b=0 j=1 k=1  x[b, k]=1e-07  w1[k, j]=3  -> 1.2500003\n"
                      "    ... (2 shown, more points ran than were logged)\n"
                      "  moons.kiln:20  call gemm(a, b) -> c\n"
                      "    in  a f32[4, 8]  min -1.5 max 2 mean 0.125\n"
                      "    out c f32[4, 4]  min -1 max 3 mean 0.5\n"
                      "\n"
                      "run 2: routine eval (1st run) on stream \"stream 0\" (cpu), 0.100 ms\n"
                      "  moons.kiln:30  loss = sum(d[i] * d[i])\n"
                      "    i=0  inlined d[i]=-2  -> 4\n"
                      "\n",
                      0),
            0u)
      << out;
  expect_has(out, {"run 3: routine train (2nd run) on stream \"stream 1\" (cpu), 0.200 ms\n",
                   "    b=1 j=0 k=2  x[b, k]=inf  w1[k, j]=0  -> nan\n",
                   "    in  a f32[4, 8]  no finite values  nans 32\n",
                   "    out c f32[4, 4]  min -1 max 3 mean 0.5  nans 3  infs 1\n"});
}

TEST_F(CliTraceValuesTest, RoutineKeepsThatRoutinesRuns) {
  std::string out = listing({"trace-values", trace_, "--routine", "eval"});
  expect_has(out, {"run 2: routine eval", "moons.kiln:30"});
  expect_lacks(out, {"routine train", "moons.kiln:14"});
  out = listing({"trace-values", "--routine=train", trace_});
  expect_has(out, {"run 1: routine train", "run 3: routine train"});
  expect_lacks(out, {"routine eval"});
  // Repeatable: runs of either.
  out = listing({"trace-values", trace_, "--routine", "train", "--routine", "eval"});
  expect_has(out, {"run 1:", "run 2:", "run 3:"});
  // A routine the file has no run of: what it has, and the likely one.
  expect_error({"trace-values", trace_, "--routine", "trian"}, 2,
               {"--routine trian", trace_, "train, eval", "did you mean 'train'?"});
  expect_error({"trace-values", trace_, "--routine", "predict", "--first-nan"}, 2, {"--routine predict", "train, eval"});
}

TEST_F(CliTraceValuesTest, StatementKeepsThatLinesEntries) {
  std::string out = listing({"trace-values", trace_, "--statement", "20"});
  expect_has(out, {"run 1: routine train", "run 3: routine train", "moons.kiln:20  call gemm(a, b) -> c"});
  expect_lacks(out, {"moons.kiln:14", "routine eval", "moons.kiln:30"});
  out = listing({"trace-values", trace_, "--statement", "30", "--routine", "eval"});
  expect_has(out, {"moons.kiln:30"});
  expect_lacks(out, {"moons.kiln:14", "moons.kiln:20"});
  // A line nothing ran at: the lines there are.
  expect_error({"trace-values", trace_, "--statement", "99"}, 2, {"--statement 99", trace_, "14, 20, 30"});
  expect_error({"trace-values", trace_, "--statement", "30", "--routine", "train"}, 2, {"14, 20", "train"});
  // Not a line number: a usage error.
  for (const char* bad : {"0", "-3", "abc", "1.5", "99999999999999999999999", ""}) {
    std::vector<std::string> args = {"trace-values", trace_, "--statement", bad};
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find("--statement"), std::string::npos) << describe_run(args, r);
    EXPECT_NE(r.output.find("usage: kiln trace-values"), std::string::npos) << describe_run(args, r);
  }
}

TEST_F(CliTraceValuesTest, FirstNanNamesTheStatementAndWhatItRead) {
  std::string out = listing({"trace-values", trace_, "--first-nan"});
  EXPECT_EQ(out,
            "run 3: routine train (2nd run) on stream \"stream 1\" (cpu), 0.200 ms\n"
            "moons.kiln:14: first NaN or infinity\n"
            "  h[b, j] = relu(sum(x[b, k] * w1[k, j]))\n"
            "  at b=1 j=0 k=2\n"
            "    x[b, k] = inf\n"
            "    w1[k, j] = 0\n"
            "    -> nan\n"
            "  (" + trace_ + ":4, entries[0].lines[1])\n"
            // Run 1 logged 2 of line 14's points and ran more: one of those may have been first.
            "warning: this may not be the first NaN or infinity: statements before it ran more points than\n"
            "  the 2 each logged (KILN_TRACE_LINES), and one not logged may have come first:\n"
            "    moons.kiln:14 (run 1)\n"
            "  Run again with KILN_TRACE_LINES=0 to log every point.\n");
  // The first call whose outputs hold a NaN or an infinity, with its inputs.
  out = listing({"trace-values", trace_, "--first-nan", "--statement", "20"});
  expect_has(out, {"run 3: routine train", "moons.kiln:20: first NaN or infinity\n  call gemm(a, b) -> c\n",
                   "in  a f32[4, 8]  no finite values  nans 32", "out c f32[4, 4]  min -1 max 3 mean 0.5  nans 3  infs 1",
                   trace_ + ":4, entries[1])"});
  // None among the runs kept.
  EXPECT_EQ(listing({"trace-values", trace_, "--first-nan", "--routine", "eval"}), "no NaN or infinity in 1 run\n");
  const std::string clean = write("clean.jsonl", lines({kHeader, kRun1, kRun2}));
  EXPECT_EQ(listing({"trace-values", clean, "--first-nan"}),
            "no NaN or infinity in 2 runs\n"
            "warning: statements ran more points than the 2 each logged (KILN_TRACE_LINES), and a NaN\n"
            "  or infinity may be among those not logged:\n"
            "    moons.kiln:14 (run 1)\n"
            "  Run again with KILN_TRACE_LINES=0 to log every point.\n");
  const std::string empty = write("no-runs.jsonl", lines({kHeader}));
  EXPECT_EQ(listing({"trace-values", empty, "--first-nan"}), "no NaN or infinity in 0 runs\n");
  EXPECT_EQ(listing({"trace-values", empty}), "no routine runs in " + empty + "\n");
  // An infinity counts too, and it need not be in a statement's last point.
  std::string run = kRun1;
  run.replace(run.find("\"value\": 1.25}"), 14, "\"value\": \"-inf\"}");
  const std::string inf = write("inf.jsonl", lines({kHeader, run}));
  expect_has(listing({"trace-values", inf, "--first-nan"}),
             {"run 1:", "moons.kiln:14: first NaN or infinity", "at b=0 j=1 k=0", "-> -inf", "entries[0].lines[0])"});
}

// A user's trace named line 75, where line 72 had made the NaN in a point past the lines it
// logged: --first-nan says that statements before its answer were cut off, which ones, and what
// to raise; it says nothing when every point before its answer was logged.
TEST_F(CliTraceValuesTest, FirstNanWarnsWhenEarlierStatementsWereCutOff) {
  const auto statement = [](int line, const std::string& value, bool truncated) {
    return R"J({"kind": "statement", "file": "net.kiln", "line": )J" + std::to_string(line) +
           R"J(, "text": "t[i] = u[i]", "target": "t", "lines": [{"indices": {"i": 0}, "reads": [{"ref": "u[i]",)J"
           R"J( "value": 1}], "value": )J" + value + "}]" + (truncated ? R"J(, "truncated": true})J" : "}");
  };
  const auto run = [](int id, const std::vector<std::string>& entries) {
    std::string list;
    for (const std::string& e : entries) list += (list.empty() ? "" : ", ") + e;
    return R"J({"run": )J" + std::to_string(id) +
           R"J(, "routine": "step", "stream": "s0", "device": "cpu", "run_number": 0, "begin_ns": 0,)J"
           R"J( "end_ns": 1000, "entries": [)J" + list + "]}";
  };
  const std::string header = R"J({"kiln_value_trace": 1, "lines_per_statement": 1})J";
  // Lines 70 and 72 ran more points than they logged (72 twice), 73 did not; 75 logged a NaN.
  const std::string cut = write("cut.jsonl", lines({header,
                                                    run(1, {statement(72, "2", true)}),
                                                    run(2, {statement(70, "1", true), statement(72, "2", true),
                                                            statement(73, "3", false), statement(75, "\"nan\"", false),
                                                            statement(76, "4", true)})}));
  std::string out = listing({"trace-values", cut, "--first-nan"});
  expect_has(out, {"net.kiln:75: first NaN or infinity\n",
                   "warning: this may not be the first NaN or infinity: statements before it ran more points than\n"
                   "  the 1 each logged (KILN_TRACE_LINES), and one not logged may have come first:\n"
                   "    net.kiln:72 (run 1 and 1 later run)\n"
                   "    net.kiln:70 (run 2)\n"
                   "  Run again with KILN_TRACE_LINES=0 to log every point.\n"});
  expect_lacks(out, {"net.kiln:73 (", "net.kiln:76 ("});  // logged whole, or after the answer
  // --statement searches that line alone: the others do not count.
  expect_lacks(listing({"trace-values", cut, "--first-nan", "--statement", "75"}), {"warning"});
  // Nothing cut off before the answer: no warning.
  const std::string whole = write("whole.jsonl", lines({header, run(1, {statement(73, "3", false),
                                                                        statement(75, "\"inf\"", false),
                                                                        statement(76, "4", true)})}));
  out = listing({"trace-values", whole, "--first-nan"});
  expect_has(out, {"net.kiln:75: first NaN or infinity\n"});
  expect_lacks(out, {"warning", "KILN_TRACE_LINES"});
  // The tree is not --first-nan: its "... (N shown, ...)" lines say it already.
  expect_lacks(listing({"trace-values", cut}), {"warning"});
}

TEST_F(CliTraceValuesTest, MalformedFilesNameTheLineAndWhatIsWrong) {
  const std::string run1 = kRun1;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = run1;
    EXPECT_NE(s.find(from), std::string::npos) << from;
    return s.replace(s.find(from), from.size(), to);
  };
  const std::string nested = std::string(100000, '[') + std::string(100000, ']');
  struct Case {
    std::string name, contents;
    int line;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"empty", "", 1, {"empty"}},
      {"truncated", lines({kHeader, kRun2}) + run1.substr(0, 200), 3, {"truncated"}},
      {"header-only-cut", std::string(kHeader).substr(0, 20), 1, {"truncated"}},
      {"invalid-json", lines({kHeader, "{\"run\": 1, \"routine\": tru}"}), 2, {"invalid JSON", "syntax error"}},
      {"not-json", lines({"hello world"}), 1, {"invalid JSON"}},
      {"binary", std::string("\x7f" "ELF\x02\x01\x01\0\0\0\x1b[31m\n", 16), 1, {"invalid JSON"}},
      {"invalid-utf8", lines({kHeader, with("\"train\"", "\"tr\xff\xfein\"")}), 2, {"invalid JSON", "UTF-8"}},
      {"array-line", lines({kHeader, "[1, 2]"}), 2, {"expected an object", "got an array"}},
      {"blank-line", lines({kHeader, kRun2, "", kRun3}), 3, {"empty line"}},
      {"not-a-header", lines({kRun1}), 1, {"not a value trace"}},
      {"version-2", lines({R"J({"kiln_value_trace": 2, "lines_per_statement": 2})J"}), 1, {"version 2", "version 1"}},
      {"header-types", lines({R"J({"kiln_value_trace": 1, "lines_per_statement": "16"})J"}), 1,
       {"lines_per_statement", "non-negative integer", "\"16\""}},
      {"wrong-type", lines({kHeader, with("\"line\": 14", "\"line\": \"14\"")}), 2,
       {"entries[0].line", "non-negative integer", "\"14\""}},
      {"negative-line", lines({kHeader, with("\"line\": 14", "\"line\": -14")}), 2, {"entries[0].line", "-14"}},
      {"float-run", lines({kHeader, with("\"run\": 1,", "\"run\": 1e30,")}), 2, {"run: expected", "1e+30"}},
      {"huge-number", lines({kHeader, with("\"value\": 0.5", "\"value\": 1e999")}), 2, {"number overflow", "1e999"}},
      {"huge-integer", lines({kHeader, with("\"begin_ns\": 1000", "\"begin_ns\": 99999999999999999999999")}), 2,
       {"begin_ns", "integer"}},
      {"uint64-beyond-int64", lines({kHeader, with("\"end_ns\": 413000", "\"end_ns\": 18446744073709551615")}), 2,
       {"end_ns", "18446744073709551615"}},
      {"nan-spelling", lines({kHeader, with("\"value\": 0.5", "\"value\": \"NaN\"")}), 2,
       {"entries[0].lines[0].reads[0].value", "\"nan\"", "\"NaN\""}},
      {"bare-nan", lines({kHeader, with("\"value\": 0.5", "\"value\": NaN")}), 2, {"invalid JSON"}},
      {"missing-field", lines({kHeader, with("\"routine\": \"train\", ", "")}), 2, {"no \"routine\""}},
      {"missing-entries", lines({kHeader, R"J({"run": 4, "routine": "r", "stream": "s", "device": "cpu",)J"
                                          R"J( "run_number": 0, "begin_ns": 0, "end_ns": 1})J"}),
       2, {"no \"entries\""}},
      {"unknown-kind", lines({kHeader, with("\"kind\": \"call\"", "\"kind\": \"loop\"")}), 2,
       {"entries[1].kind", "\"loop\""}},
      {"index-type", lines({kHeader, with("\"k\": 0}", "\"k\": [0]}")}), 2, {"entries[0].lines[0].indices.k"}},
      {"shape-type", lines({kHeader, with("[4, 8]", "[4, -8]")}), 2, {"entries[1].inputs[0].shape[1]"}},
      {"summary-type", lines({kHeader, with("\"nans\": 0, \"infs\": 0}]}]}", "\"nans\": 0, \"infs\": true}]}]}")}), 2,
       {"entries[1].outputs[0].infs", "true"}},
      {"truncated-type", lines({kHeader, with("\"truncated\": true", "\"truncated\": 1")}), 2,
       {"entries[0].truncated"}},
      {"too-many-lines", lines({R"J({"kiln_value_trace": 1, "lines_per_statement": 1})J", kRun1}), 2,
       {"entries[0].lines", "lines_per_statement (1)"}},
      {"runs-out-of-order", lines({kHeader, kRun2, kRun1}), 3, {"run: 1 after run 2 (line 2)"}},
      {"end-before-begin", lines({kHeader, with("\"end_ns\": 413000", "\"end_ns\": 10")}), 2, {"end_ns", "before"}},
      {"deep-nesting", lines({kHeader, nested}), 2, {"nested deeper than 64"}},
      {"late-error", lines({kHeader, kRun1, kRun2, "{\"run\": 3,"}), 4, {"invalid JSON"}},
  };
  for (const Case& c : cases) {
    const std::string file = write(c.name + ".jsonl", c.contents);
    for (const char* mode : {"", "--first-nan"}) {
      std::vector<std::string> args = {"trace-values", file};
      if (*mode) args.push_back(mode);
      std::vector<std::string> words = c.words;
      words.push_back(file + ":" + std::to_string(c.line) + ":");
      ProcessResult r = run(args);
      EXPECT_EQ(r.exit_code, 2) << c.name << "\n" << describe_run(args, r);
      for (const std::string& w : words) {
        EXPECT_NE(r.output.find(w), std::string::npos) << c.name << ": no '" << w << "' in\n" << describe_run(args, r);
      }
      EXPECT_EQ(r.output.find("internal error"), std::string::npos) << describe_run(args, r);
      EXPECT_EQ(r.output.find("usage:"), std::string::npos) << describe_run(args, r);
      // What the file held is quoted harmlessly: no terminal escapes, no bytes that are not UTF-8.
      EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << describe_run(args, r);
      EXPECT_EQ(r.output.find('\xff'), std::string::npos) << describe_run(args, r);
    }
  }
}

TEST_F(CliTraceValuesTest, UnreadableFilesAreRuntimeFailures) {
  expect_error({"trace-values", dir_.file("missing.jsonl")}, 1, {dir_.file("missing.jsonl")});
  expect_error({"trace-values", dir_.path()}, 1, {dir_.path()});
  if (::geteuid() != 0) {  // root reads whatever the permissions say
    ASSERT_EQ(::chmod(trace_.c_str(), 0), 0);
    expect_error({"trace-values", trace_}, 1, {trace_});
  }
}

TEST_F(CliTraceValuesTest, EndlessInputsAreRefused) {
  // No newline in sight: refused once a line passes 64 MiB.
  expect_error({"trace-values", "/dev/zero"}, 2, {"/dev/zero:1:", "longer than 64 MiB"});
  // A header, then a line that never ends, from a FIFO: at most 128 MiB, so that a kiln that
  // reads to the end fails this test instead of hanging it.
  const std::string fifo = dir_.file("trace.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::FifoWriter writer(fifo, std::string(kHeader) + "\n{\"run\": 1, \"routine\": \"", std::string(1 << 16, 'a'), 2048);
  ProcessResult r = run({"trace-values", fifo});
  writer.finish();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(fifo + ":2:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("longer than 64 MiB"), std::string::npos) << r.output;
}

TEST_F(CliTraceValuesTest, AFifoIsReadAsItComes) {
  const std::string fifo = dir_.file("trace.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  test::FifoWriter writer(fifo, lines({kHeader, kRun1, kRun2, kRun3}), "", 0, 100);  // in small pieces
  ProcessResult r = run({"trace-values", fifo, "--first-nan"});
  writer.finish();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("moons.kiln:14: first NaN or infinity"), std::string::npos) << r.output;
}

TEST_F(CliTraceValuesTest, UsageErrors) {
  ProcessResult r = kiln({"trace-values", "--help"}, env(), Captured::kStdout, dir_.file("stderr"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  expect_has(r.output, {"usage: kiln trace-values FILE", "--routine NAME", "--statement LINE", "--first-nan"});
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"trace-values"}, "'kiln trace-values' needs a FILE"},
           {{"trace-values", trace_, trace_}, "unexpected argument"},
           {{"trace-values", trace_, "--routine"}, "--routine needs a value"},
           {{"trace-values", trace_, "--first-nan=yes"}, "--first-nan takes no value"},
           {{"trace-values", trace_, "--frist-nan"}, "did you mean --first-nan?"},
           {{"trace-values", trace_, "--device", "cpu"}, "it is an option of 'kiln run'"},
           {{"trace-value", trace_}, "did you mean 'trace-values'?"},
       }) {
    ProcessResult e = run(args);
    EXPECT_EQ(e.exit_code, 2) << describe_run(args, e);
    expect_has(e.output, {message, "usage: kiln"});
  }
}

// The walkthrough of docs/tracing.md, end to end on each device: `kiln run --trace-values` writes
// the trace of examples/tracing/debug_nan.kiln, and --first-nan names line 13 with what it read.
TEST_F(CliTraceValuesTest, RunWritesATraceThatFindsTheFirstNan) {
  for (const std::string device : {"cpu", "interp", "opencl"}) {
    SCOPED_TRACE(device);
    const std::string values = dir_.file(device + ".jsonl");
    using Args = std::vector<std::string>;
    const Args args = {"run", std::string(KILN_SOURCE_DIR) + "/examples/tracing/debug_nan.kiln", "--device", device, "--print", "--trace-values", values};
    ProcessResult r = run(args);
    if (device == "opencl" && r.exit_code != 0 && r.output.find("OpenCL") != std::string::npos) continue;
    ASSERT_EQ(r.exit_code, 0) << describe_run(args, r);
    // The program's own output passes through the capture unchanged.
    EXPECT_NE(r.output.find("loss : f32 []\n"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("kiln-trace"), std::string::npos) << r.output;
    const std::string out = listing({"trace-values", values, "--first-nan"});
    expect_has(out, {"run 1: routine main (1st run)", "debug_nan.kiln:13: first NaN or infinity\n",
                     "  loss = sum(log(rate[r]) * relu(score[r]))\n", "  at r=0\n", "    inlined rate[r] = 0\n",
                     "    -> nan\n"});
    // The whole tree: score's reduction logs its 12 terms, loss its 3.
    const std::string tree = listing({"trace-values", values});
    expect_has(tree, {"debug_nan.kiln:11  score[r] = sum(w[r, k] * x[k])", "r=2 k=3"});
  }
  // KILN_TRACE_LINES sets the points each statement logs; a malformed one is a usage error.
  const std::string few = dir_.file("few.jsonl");
  Env env = this->env();
  env["KILN_TRACE_LINES"] = "2";
  const std::string program = std::string(KILN_SOURCE_DIR) + "/examples/tracing/debug_nan.kiln";
  ProcessResult r = kiln({"run", program, "--trace-values", few}, env);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has(listing({"trace-values", few}), {"r=0 k=1", "(2 shown, more points ran than were logged)"});
  env["KILN_TRACE_LINES"] = "-1";
  r = kiln({"run", program, "--trace-values", few}, env);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  expect_has(r.output, {"KILN_TRACE_LINES='-1'"});
}

TEST_F(CliTraceValuesTest, RunTakesTraceValuesFile) {
  const std::string program = dir_.file("softmax.kiln");
  ASSERT_TRUE(write_bytes(program, *read_file(example("softmax"))).ok());
  // Accepted, in both spellings.
  using Args = std::vector<std::string>;
  for (const Args& args : {Args{"run", program, "--trace-values", dir_.file("v.jsonl")},
                           Args{"run", "--trace-values=" + dir_.file("w.jsonl"), program}}) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << describe_run(args, r);
  }
  // A missing value is a usage error.
  for (const Args& args : {Args{"run", program, "--trace-values"}, Args{"run", program, "--trace-values="}}) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    expect_has(r.output, {"--trace-values needs a value: FILE", "usage: kiln run"});
  }
  // Not the program, an input, or another output: refused before anything runs.
  const std::string out = dir_.file("out.npy"), x = dir_.file("x.npy");
  ASSERT_TRUE(write_bytes(x, format_npy(f32_array({4, 10}, std::vector<float>(40, 0.5f)))).ok());
  expect_error({"run", program, "--trace-values", program}, 2, {"--trace-values " + program, "destroy"});
  expect_error({"run", program, "--input", "x=" + x, "--trace-values", x}, 2, {"--trace-values", "destroy"});
  expect_error({"run", program, "--output", "y=" + out, "--trace-values", out}, 2,
               {"--trace-values " + out, "--output y=" + out, "overwrite"});
  expect_error({"run", program, "--trace-values", dir_.path() + "/./out.npy", "--trace", out}, 2,
               {"--trace " + out, "--trace-values", "overwrite"});
  EXPECT_FALSE(std::filesystem::exists(out));
  ASSERT_TRUE(write_bytes(out, "old").ok());  // an existing file, reached through a link
  ASSERT_EQ(::symlink(out.c_str(), dir_.file("out-link.npy").c_str()), 0);
  expect_error({"run", program, "--trace-values", out, "--output", "y=" + dir_.file("out-link.npy")}, 2, {"overwrite"});
  EXPECT_EQ(*read_file(out), "old");
  // Devices may take several outputs.
  if (std::filesystem::is_character_file("/dev/null")) {
    ProcessResult r =
        run({"run", program, "--trace-values", "/dev/null", "--trace", "/dev/null", "--output", "y=/dev/null"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

}  // namespace
}  // namespace kiln::tools
