// Robustness: random bytes, random token soups, mutated examples and pathological inputs never
// crash the parser; each gives a program (which then round-trips through the printer) or
// diagnostics with sensible locations.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/printer.h"
#include "kiln/lang/diagnostics.h"
#include "kiln/lang/parser.h"

namespace kiln::lang {
namespace {

const char* const kSeeds[] = {
    "input  a : f32[64, 128]\ninput  b : f32[128, 32]\nparam  bias : f32[32] = 0\n"
    "output y : f32[64, 32]\ntensor c : f32[64, 32]\n\nc[i, j] = sum(a[i, k] * b[k, j])\n"
    "y[i, j] = relu(c[i, j] + bias[j])\n",
    "input  x : f32[4, 10]\noutput y : f32[4, 10]\ntensor m : f32[4]\ntensor e : f32[4, 10]\n"
    "tensor s : f32[4]\n\nm[i] = max(x[i, j])\ne[i, j] = exp(x[i, j] - m[i])\ns[i] = sum(e[i, j])\n"
    "y[i, j] = e[i, j] / s[i]\n",
    "input  img : f32[1, 3, 16, 16]\ninput  w : f32[8, 3, 3, 3]\noutput o : f32[1, 8, 16, 16]\n"
    "input  s : f32[20]\ninput  f : f32[4]\noutput d : f32[9]\n\n"
    "o[n, co, y, x] = sum(img[n, ci, y + ky - 1, x + kx - 1] * w[co, ci, ky, kx])\n"
    "d[t] = sum(s[2*t + k] * f[k])\n",
    "input  x : f32[8]\nparam  w : f32[8] = 1\noutput out : f32[]\n\nroutine step {\n"
    "  w[i] = w[i] * 0.5 + x[i]\n}\nroutine total {\n  out = sum(w[i])\n}\n",
    "input x : f64[3]\nconst k : i32 = 2\nparam g : f64[3] = normal(0, 1)\noutput y : i32[3]\n"
    "y[i] = select(x[i] < 0.5, i32(x[i] * 2), i * k) + g.merge[i]\n"
    "g[i] += sum(x[i + q] * (q != 1)) where q < 2\n",
    "input a : u8[4]\ninput m : bool[4]\ninput t : i64[4]\nparam h : bf16[4] = 0.5\noutput y : u8[4]\n"
    "output z : bool[4]\noutput w : f16[4]\n"
    "y[i] = (a[i] << 2 | a[i] >> 1) & ~a[i] ^ 7\nz[i] = m[i] & true | a[i] > 3 ^ false\n"
    "w[i] = f16(h[t[i]] * 2.0) + bf16(i8(a[i]))\n",
};

const char* const kVocabulary[] = {
    "input", "output", "param", "tensor", "const", "routine", "where", "x", "y", "i", "j", "k",
    "sum", "max", "min", "mean", "prod", "exp", "select", "f32", "f64", "i32", "merge", "uniform",
    "normal", "0", "1", "2", "-1", "0.5", "1e3", "1e", "(", ")", "[", "]", "{", "}", ",", ":", ".",
    "=", "+=", "-=", "*=", "+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "\n", "\n", "\n",
    " ", "#", "$", "\t", "é",
    // language version 3
    "u8", "bool", "f16", "bf16", "i64", "u64", "true", "false", "&", "|", "^", "~", "<<", ">>", "&&", "300",
};

struct Stats {
  int ok = 0;
  int failed = 0;
};

int line_count(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
}

void check_input(const std::string& text, Stats* stats) {
  ParseResult r = parse(text, "fuzz.kiln");
  if (r.program) {
    ++stats->ok;
    ASSERT_TRUE(r.diagnostics.empty());
    ASSERT_TRUE(ir::validate_program(*r.program).ok()) << text;
    std::string printed = ir::print_program(*r.program);
    ParseResult again = parse(printed, "printed.kiln");
    ASSERT_TRUE(again.program.has_value())
        << text << "\n---\n" << printed << format_diagnostics("printed.kiln", printed, again.diagnostics);
    ASSERT_EQ(ir::print_program(*again.program), printed) << text;
    return;
  }
  ++stats->failed;
  ASSERT_FALSE(r.diagnostics.empty()) << text;
  ASSERT_LE(r.diagnostics.size(), kMaxDiagnostics + 1);
  const int lines = line_count(text);
  for (const Diagnostic& d : r.diagnostics) {
    ASSERT_GE(d.loc.line, 1) << d.message;
    ASSERT_LE(d.loc.line, lines) << d.message;
    ASSERT_GE(d.loc.column, 1) << d.message;
    ASSERT_FALSE(d.message.empty());
  }
  std::string formatted = format_diagnostics("fuzz.kiln", text, r.diagnostics);
  ASSERT_EQ(formatted.rfind("fuzz.kiln:", 0), 0u);
}

// The seeds and regression inputs of the libFuzzer parse target (tests/fuzz, docs/fuzzing.md),
// replayed in every build of the tests, not only in the fuzz build.
TEST(Fuzz, CorpusAndRegressionsOfTheParseFuzzer) {
  const std::string root = KILN_SOURCE_DIR;
  Stats stats;
  int files = 0;
  for (const char* folder : {"/examples/kiln", "/tests/fuzz/corpus/kiln", "/tests/fuzz/regressions/kiln_parse_fuzzer",
                             "/tests/fuzz/regressions/kiln_frontend_fuzzer"}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(root + folder, ec)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      ++files;
      SCOPED_TRACE(entry.path().string());
      check_input(text.str(), &stats);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GE(files, 10);
  EXPECT_GE(stats.ok, 10);  // the seeds are valid programs
}

TEST(Fuzz, RandomBytes) {
  std::mt19937_64 rng(1);
  Stats stats;
  for (int n = 0; n < 1500; ++n) {
    std::string text(rng() % 200, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    check_input(text, &stats);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(stats.failed, 0);
}

TEST(Fuzz, TokenSoup) {
  std::mt19937_64 rng(2);
  Stats stats;
  const size_t vocabulary = sizeof(kVocabulary) / sizeof(kVocabulary[0]);
  for (int n = 0; n < 3000; ++n) {
    std::string text;
    size_t length = rng() % 60;
    for (size_t t = 0; t < length; ++t) {
      text += kVocabulary[rng() % vocabulary];
      if (rng() % 2) text += " ";
    }
    check_input(text, &stats);
    if (HasFatalFailure()) return;
  }
}

std::string mutate(std::string text, std::mt19937_64& rng) {
  const size_t vocabulary = sizeof(kVocabulary) / sizeof(kVocabulary[0]);
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    size_t at = rng() % text.size();
    switch (rng() % 6) {
      case 0: text[at] = static_cast<char>(rng() % 128); break;
      case 1: text.erase(at, 1 + rng() % 8); break;
      case 2: text.insert(at, kVocabulary[rng() % vocabulary]); break;
      case 3: {  // duplicate a line
        size_t begin = text.rfind('\n', at);
        begin = begin == std::string::npos ? 0 : begin + 1;
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        text.insert(begin, text.substr(begin, end - begin) + "\n");
        break;
      }
      case 4: text.insert(at, std::string(1 + rng() % 4, "([{}])"[rng() % 6])); break;
      default: text.insert(at, std::to_string(static_cast<int64_t>(rng() % 2000000) - 1000000)); break;
    }
  }
  return text;
}

TEST(Fuzz, MutatedExamples) {
  std::mt19937_64 rng(3);
  Stats stats;
  const size_t seeds = sizeof(kSeeds) / sizeof(kSeeds[0]);
  for (size_t s = 0; s < seeds; ++s) {
    check_input(kSeeds[s], &stats);  // the seeds themselves are valid
    ASSERT_EQ(stats.ok, static_cast<int>(s) + 1) << kSeeds[s];
  }
  for (int n = 0; n < 4000; ++n) {
    check_input(mutate(kSeeds[rng() % seeds], rng), &stats);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(stats.ok, 100);      // many mutations stay valid (and round-trip)
  EXPECT_GT(stats.failed, 1000);  // and many are errors
}

TEST(Fuzz, PathologicalInputs) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    out.reserve(s.size() * n);
    for (int k = 0; k < n; ++k) out += s;
    return out;
  };
  const std::string prelude = "input x : f32[4]\noutput y : f32[4]\n";
  const std::vector<std::string> inputs = {
      prelude + "y[i] = " + repeat("(", 100000) + "1" + repeat(")", 100000) + "\n",
      prelude + "y[i] = " + repeat("(", 60000),
      prelude + "y[i] = " + repeat("-", 60000) + "1\n",
      prelude + "y[i] = " + repeat("exp(", 60000) + "1\n",
      prelude + "y[i] = x[" + repeat("x[", 60000) + "\n",
      prelude + "y[i] = 1" + repeat(" + 1", 16000) + "\n",
      prelude + "y[i] = 1" + repeat(" * x[i] < 2", 5000) + "\n",
      prelude + "y[i] = x[i" + repeat(" + i", 16000) + "]\n",
      prelude + repeat("routine r {\n", 5000),
      prelude + repeat("}\n", 5000),
      prelude + repeat("y[i] = x[i]\n", 20000),
      repeat("input x : f32[4]\n", 3000),
      "input x : f32[" + repeat("2, ", 2000) + "2]\noutput y : f32\ny = sum(x" + "[" +
          [] { std::string s; for (int k = 0; k < 2001; ++k) s += (k ? ", i" : "i") + std::to_string(k); return s; }() + "])\n",
      "input x : f32[4611686018427387904, 4]\n",
      "input x : f32[99999999999999999999999]\n",
      "output y : f32\ny = " + repeat("9", 5000) + "\n",
      "output y : f32\ny = 1" + repeat("0", 400) + ".5\n",
      "output " + repeat("a", 60000) + " : f32\n",
      repeat("x", 70000) + "\n" + prelude,
      std::string("\0\0\0", 3),
      repeat("\n", 100000),
      repeat("# comment\n", 10000),
      prelude + "y[i] = x[i] where " + repeat("k < 2, ", 5000) + "k < 2\n",
      prelude + "y[i] = x[2147483647*i + 9223372036854775807]\n",
      prelude + "y[i] = x[4611686018427387904*i*4]\n",
      prelude + "y[i] = sum(x[i + k]) where k < 9223372036854775807\n",
  };
  Stats stats;
  for (const std::string& text : inputs) {
    // No wall-clock bound (sanitizer builds on a loaded machine vary tenfold): a quadratic
    // lookup makes these inputs run into ctest's timeout instead.
    check_input(text, &stats);
    if (HasFatalFailure()) return;
  }
}

// Big inputs take time in proportion to their size (no quadratic lookups).
TEST(Fuzz, ManyNamesRoutinesAndIndices) {
  std::string decls, routines, statements;
  for (int n = 0; n < 40000; ++n) {
    decls += "param p" + std::to_string(n) + " : f32[2]\n";
    statements += "p" + std::to_string(n) + "[i] = p" + std::to_string((n * 7919) % 40000) + "[i] + 1\n";
    routines += "routine r" + std::to_string(n) + " {\n}\n";
  }
  // A balanced sum of 2000 distinct indices in one subscript (depth 11).
  std::vector<std::string> terms;
  for (int n = 0; n < 2000; ++n) terms.push_back("k" + std::to_string(n));
  while (terms.size() > 1) {
    std::vector<std::string> next;
    for (size_t t = 0; t + 1 < terms.size(); t += 2) next.push_back("(" + terms[t] + " + " + terms[t + 1] + ")");
    if (terms.size() % 2) next.push_back(terms.back());
    terms = next;
  }
  const std::vector<std::string> inputs = {
      decls + statements + routines,
      "input x : f32[4]\noutput y : f32\ny = sum(x[" + terms[0] + "])\n",
  };
  Stats stats;
  for (const std::string& text : inputs) {
    // No wall-clock bound (sanitizer builds on a loaded machine vary tenfold): a quadratic
    // lookup makes these inputs run into ctest's timeout instead.
    check_input(text, &stats);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace kiln::lang
