// `kiln --help`, `kiln COMMAND --help`, `kiln --version`, "did you mean" for misspelt options
// and commands, and which errors print the usage (only usage errors).
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "cli_test_util.h"

namespace kiln::tools {
namespace {

class CliHelpTest : public CliTest {
 protected:
  ProcessResult stdout_of(const std::vector<std::string>& args) {
    return kiln(args, env(), Captured::kStdout, dir_.file("discarded"));
  }
  ProcessResult stderr_of(const std::vector<std::string>& args) {
    return kiln(args, env(), Captured::kStderr, dir_.file("discarded"));
  }
};

TEST_F(CliHelpTest, EveryCommandTakesHelpOnStandardOutput) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--help"}, "usage: kiln COMMAND"},
      {{"-h"}, "usage: kiln COMMAND"},
      {{"help"}, "usage: kiln COMMAND"},
      {{"run", "--help"}, "usage: kiln run"},
      {{"run", "-h"}, "usage: kiln run"},
      {{"run", example("softmax"), "--device", "cpu", "--help"}, "usage: kiln run"},
      {{"help", "run"}, "usage: kiln run"},
      {{"compile", "--help"}, "usage: kiln compile"},
      {{"help", "compile"}, "usage: kiln compile"},
      {{"devices", "--help"}, "usage: kiln devices"},
      {{"trace-values", "--help"}, "usage: kiln trace-values"},
      {{"help", "trace-values"}, "usage: kiln trace-values"},
  };
  for (const auto& [args, start] : cases) {
    ProcessResult out = stdout_of(args);
    EXPECT_EQ(out.exit_code, 0) << describe_run(args, out);
    EXPECT_EQ(out.output.rfind(start, 0), 0u) << describe_run(args, out);
    ProcessResult err = stderr_of(args);
    EXPECT_EQ(err.output, "") << "help goes to standard output\n" << describe_run(args, err);
  }
}

TEST_F(CliHelpTest, HelpDescribesEveryOptionThatIsAccepted) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"run", {"--device", "--routine", "--input", "--output", "--size", "--params", "--seed", "--repeat", "--warmup", "--streams", "--print",
               "--trace", "--trace-values", "--no-auto-calls", "--no-shared-buffers", "--strict-fp", "--check-bounds", "--help"}},
      {"compile", {"--device", "--target", "--emit", "--no-auto-calls", "--no-shared-buffers", "--strict-fp", "--check-bounds", "--size", "--timings", "-o",
                   "--help"}},
      {"devices", {"--help"}},
      {"trace-values", {"--routine", "--statement", "--first-nan", "--help"}},
  };
  for (const auto& [command, options] : expected) {
    const std::string help = stdout_of({command, "--help"}).output;
    // Each option opens a line of the options list; the described ones are exactly the expected.
    std::set<std::string> described;
    std::regex line(R"((^|\n)  (-h, )?(--?[a-z][a-z-]*))");
    for (auto it = std::sregex_iterator(help.begin(), help.end(), line); it != std::sregex_iterator(); ++it) {
      described.insert((*it)[3].str());
    }
    EXPECT_EQ(described, std::set<std::string>(options.begin(), options.end())) << help;
    // Every described option is accepted (a missing value is a different complaint).
    for (const std::string& option : described) {
      std::vector<std::string> args = {command};
      if (command != "devices") args.push_back(example("softmax"));
      args.push_back(option);
      ProcessResult r = run(args);
      EXPECT_EQ(r.output.find("unknown option"), std::string::npos) << describe_run(args, r);
    }
  }
  const std::string top = stdout_of({"--help"}).output;
  for (const char* word :
       {"run", "compile", "devices", "trace-values", "--version", "--help", "KILN_CACHE_DIR", "Exit status"}) {
    EXPECT_NE(top.find(word), std::string::npos) << word << "\n" << top;
  }
}

// The ranges `kiln --help` gives its variables are the ones kiln accepts: each end is accepted
// and the value past it refused (KILN_COLLECTIVE_TIMEOUT's help once said 0 to 86400, and 0 is
// refused: the timeout must be more than 0).
TEST_F(CliHelpTest, HelpGivesTheRangesTheVariablesAccept) {
  const std::string help = stdout_of({"--help"}).output;
  // Exit status of a command that reads no device, with `name` set to `value`.
  auto status_with = [&](const std::string& name, const std::string& value) {
    Env env = this->env();
    env[name] = value;
    const std::vector<std::string> args = {"compile", example("softmax"), "--emit", "ir"};
    ProcessResult r = kiln(args, env, Captured::kStderr, dir_.file("discarded"));
    return r.exit_code;
  };
  const std::regex integers(R"(  (KILN_[A-Z_]+) .*\(([0-9]+) to ([0-9]+)\))");
  size_t ranges = 0;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, integers)) continue;
    const std::string name = m[1].str();
    const uint64_t low = std::stoull(m[2].str()), high = std::stoull(m[3].str());
    SCOPED_TRACE(name + " in\n" + help);
    EXPECT_EQ(status_with(name, std::to_string(low)), 0);
    EXPECT_EQ(status_with(name, std::to_string(high)), 0);
    if (low > 0) {
      EXPECT_EQ(status_with(name, std::to_string(low - 1)), 2);
    }
    EXPECT_EQ(status_with(name, std::to_string(high + 1)), 2);
    ++ranges;
  }
  EXPECT_GE(ranges, 5u) << help;
  // A timeout in seconds: more than 0, up to its bound, decimals too.
  std::smatch seconds;
  ASSERT_TRUE(std::regex_search(help, seconds,
                                std::regex(R"(\n  KILN_COLLECTIVE_TIMEOUT [^\n]*\(more than 0, at most ([0-9]+); decimals)")))
      << help;
  const uint64_t most = std::stoull(seconds[1].str());
  EXPECT_EQ(status_with("KILN_COLLECTIVE_TIMEOUT", "0"), 2);
  EXPECT_EQ(status_with("KILN_COLLECTIVE_TIMEOUT", "0.5"), 0);
  EXPECT_EQ(status_with("KILN_COLLECTIVE_TIMEOUT", std::to_string(most)), 0);
  EXPECT_EQ(status_with("KILN_COLLECTIVE_TIMEOUT", std::to_string(most + 1)), 2);
}

// docs/cli.md's table of environment variables names the variables `kiln --help` lists, all of them.
TEST_F(CliHelpTest, TheDocsListTheVariablesHelpLists) {
  const std::string help = stdout_of({"--help"}).output;
  std::set<std::string> listed, documented;
  const std::regex help_line(R"((^|\n)  (KILN_[A-Z0-9_]+) )");
  for (auto it = std::sregex_iterator(help.begin(), help.end(), help_line); it != std::sregex_iterator(); ++it) {
    listed.insert((*it)[2].str());
  }
  Result<std::string> cli_md = read_file(std::string(KILN_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(cli_md.ok()) << cli_md.status();
  const size_t section = cli_md->find("\n## Environment variables\n");
  ASSERT_NE(section, std::string::npos);
  const std::string table = cli_md->substr(section);
  const std::regex row(R"(\n\| `(KILN_[A-Z0-9_]+)` \|)");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it) {
    documented.insert((*it)[1].str());
  }
  EXPECT_FALSE(listed.empty()) << help;
  EXPECT_EQ(documented, listed) << help;
}

TEST_F(CliHelpTest, VersionIsPrinted) {
  ProcessResult r = stdout_of({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_match(r.output, std::regex(R"(kiln [0-9]+\.[0-9]+\.[0-9]+\n)"))) << r.output;
  EXPECT_EQ(run({"--version", "extra"}).exit_code, 2);
}

TEST_F(CliHelpTest, MisspeltNamesGetASuggestion) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", example("softmax"), "--devce", "cpu"}, "did you mean --device?"},
      {{"run", example("softmax"), "--ouptut", "y=y.npy"}, "did you mean --output?"},
      {{"run", example("softmax"), "--Print"}, "did you mean --print?"},
      {{"compile", example("softmax"), "--emitt", "ir"}, "did you mean --emit?"},
      {{"rn", example("softmax")}, "did you mean 'run'?"},
      {{"complie", example("softmax")}, "did you mean 'compile'?"},
      {{"--verison"}, "did you mean --version?"},
      {{"help", "devics"}, "did you mean 'devices'?"},
      {{"compile", example("softmax"), "--print"}, "it is an option of 'kiln run'"},
      {{"run", example("softmax"), "--routine", "mian"}, "did you mean 'main'?"},
  };
  for (const auto& [args, hint] : cases) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find(hint), std::string::npos) << describe_run(args, r);
  }
  // Nothing close: no suggestion.
  ProcessResult r = run({"run", example("softmax"), "--bogus"});
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
}

TEST_F(CliHelpTest, OnlyUsageErrorsPrintTheUsage) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"run"}, {"run", example("softmax"), "--bogus"}, {"run", example("softmax"), "--repeat", "abc"},
           {"compile", example("softmax"), "--emit", "asm"}, {"frobnicate"}, {"devices", "extra"}}) {
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << describe_run(args, r);
    EXPECT_NE(r.output.find("usage: kiln"), std::string::npos) << describe_run(args, r);
  }
  // Errors in what was given, or at run time: the message alone.
  ASSERT_TRUE(write_bytes(dir_.file("x.npy"), format_npy(f32_array({3}, {1, 2, 3}))).ok());
  ASSERT_TRUE(write_bytes(dir_.file("bad.kiln"), "output y : f32\ny = nope\n").ok());
  struct Case {
    std::vector<std::string> args;
    Env env;
    int exit_code;
  };
  const std::vector<Case> cases = {
      {{"run", example("softmax"), "--input", "x=" + dir_.file("x.npy")}, env(), 2},  // a wrong shape
      {{"run", example("softmax")}, {{"KILN_CACHE_DIR", dir_.file("c")}, {"KILN_CPU_THREADS", "many"}}, 2},
      {{"run", example("softmax")}, {{"KILN_CACHE_DIR", dir_.file("c")}, {"KILN_LOG", "verbose"}}, 2},
      {{"compile", example("softmax")}, {{"KILN_LOG", "verbose"}}, 2},
      {{"run", example("softmax")}, {{"KILN_CACHE_DIR", dir_.file("c")}, {"KILN_COLLECTIVE_TIMEOUT", "soon"}}, 2},
      {{"run", example("softmax"), "--device", "interp:99"}, env(), 2},  // no such device: a usage error (cli.md)
      {{"run", dir_.file("bad.kiln")}, env(), 2},
      {{"run", dir_.file("missing.kiln")}, env(), 1},
      {{"run", example("softmax"), "--routine", "nope"}, env(), 2},
  };
  for (const Case& c : cases) {
    ProcessResult r = kiln(c.args, c.env);
    EXPECT_EQ(r.exit_code, c.exit_code) << describe_run(c.args, r);
    for (const auto& [name, value] : c.env) {
      if (name != "KILN_CACHE_DIR") {
        EXPECT_NE(r.output.find(name), std::string::npos) << describe_run(c.args, r);
      }
    }
    EXPECT_EQ(r.output.find("usage:"), std::string::npos) << describe_run(c.args, r);
    EXPECT_FALSE(r.output.empty()) << describe_run(c.args, r);
  }
}

}  // namespace
}  // namespace kiln::tools
