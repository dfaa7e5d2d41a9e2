// Statement completion: index extents, typing, and the rules, with every problem reported.
#include "kiln/ir/statement.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::ir {
namespace {

TensorNode node(std::string name, Role role, DType dtype, std::vector<int64_t> dims,
                Init init = {}) {
  TensorNode n;
  n.name = std::move(name);
  n.role = role;
  n.dtype = dtype;
  n.dims = std::move(dims);
  n.init = init;
  n.loc = SourceLoc{1, 1};
  return n;
}

class CompletionTest : public ::testing::Test {
 protected:
  CompletionTest() {
    add(node("x", Role::kInput, DType::kF32, {4, 5}));
    add(node("v", Role::kInput, DType::kF32, {5}));
    add(node("y", Role::kOutput, DType::kF32, {4}));
    add(node("z", Role::kOutput, DType::kF32, {4, 5}));
    add(node("d", Role::kOutput, DType::kF64, {4}));
    add(node("n", Role::kOutput, DType::kI32, {4}));
    add(node("s", Role::kParam, DType::kF32, {}));
    add(node("two", Role::kConst, DType::kI32, {}, Init{Init::Kind::kValue, 2, 0}));
    add(node("half", Role::kConst, DType::kF32, {}, Init{Init::Kind::kValue, 0.5, 0}));
    add(node("w", Role::kInput, DType::kF32, {3}));
    add(node("big", Role::kInput, DType::kF64, {10}));
    add(node("late", Role::kInput, DType::kF32, {4}));
    visible_ = nodes_.size() - 1;  // `late` is declared after the statements
  }

  std::vector<TensorNode> temporaries_;  // of the last completion
  std::vector<Assignment> assignments_;

  void add(TensorNode n) {
    n.id = static_cast<int>(nodes_.size());
    n.loc.line = static_cast<int>(nodes_.size()) + 1;
    nodes_.push_back(std::move(n));
  }

  std::optional<Assignment> complete(const std::string& target, std::vector<std::string> indices,
                                     RawExprRef rhs, std::vector<RawBound> where = {},
                                     Accum accum = Accum::kAssign) {
    RawStatement s;
    s.target = target;
    for (const std::string& i : indices) s.target_subscripts.push_back(raw_name(i, loc(1, 3)));
    s.accum = accum;
    s.rhs = std::move(rhs);
    s.where = std::move(where);
    s.loc = loc(1, 1);
    diagnostics_.clear();
    std::optional<CompletedStatement> c = complete_statement(s, nodes_, visible_, &diagnostics_);
    if (!c) return std::nullopt;
    temporaries_ = c->temporaries;
    assignments_ = c->assignments;
    return c->assignments.back();
  }

  static SourceLoc loc(int line, int column) { return SourceLoc{line, column}; }
  static RawExprRef name(const std::string& n, SourceLoc l = {}) { return raw_name(n, l); }
  static RawExprRef num(double v, SourceLoc l = {}) { return raw_number(v, false, l); }
  static RawExprRef flt(double v, SourceLoc l = {}) { return raw_number(v, true, l); }
  static RawExprRef ref(const std::string& n, std::vector<RawExprRef> subs, SourceLoc l = {}) {
    return raw_tensor(n, std::move(subs), l);
  }
  static RawExprRef op(Op o, std::vector<RawExprRef> args, SourceLoc l = {}) {
    return raw_op(o, std::move(args), l);
  }

  std::string messages() const {
    std::string out;
    for (const Diagnostic& d : diagnostics_) {
      out += std::to_string(d.loc.line) + ":" + std::to_string(d.loc.column) + ": " + d.message + "\n";
    }
    return out;
  }
  bool has(const std::string& fragment) const { return messages().find(fragment) != std::string::npos; }

  std::vector<TensorNode> nodes_;
  size_t visible_ = 0;
  std::vector<Diagnostic> diagnostics_;
};

TEST_F(CompletionTest, ElementwiseStatement) {
  // z[i, j] = x[i, j] + v[j]
  auto a = complete("z", {"i", "j"}, op(Op::kAdd, {ref("x", {name("i"), name("j")}), ref("v", {name("j")})}));
  ASSERT_TRUE(a) << messages();
  EXPECT_EQ(a->target, 3);
  EXPECT_EQ(a->target_indices, (std::vector<int>{0, 1}));
  ASSERT_EQ(a->indices.size(), 2u);
  EXPECT_EQ(a->indices[0].name, "i");
  EXPECT_EQ(a->indices[0].extent, 4);
  EXPECT_EQ(a->indices[1].name, "j");
  EXPECT_EQ(a->indices[1].extent, 5);
  EXPECT_EQ(a->reduce, Reduce::kNone);
  EXPECT_EQ(a->rhs->type, DType::kF32);
  EXPECT_EQ(a->rhs->args[1]->subscripts[0].bare_index(), 1);
}

TEST_F(CompletionTest, ReductionNumbersIndicesInReadingOrder) {
  // y[i] = sum(v[b] * x[i, a] * w[c]) where c < 3 is implied by w: b first, then a, then c.
  auto a = complete("y", {"i"},
                    raw_reduce(Reduce::kSum, op(Op::kMul, {op(Op::kMul, {ref("v", {name("b")}), ref("x", {name("i"), name("a")})}),
                                                           ref("w", {name("c")})})));
  ASSERT_TRUE(a) << messages();
  ASSERT_EQ(a->indices.size(), 4u);
  EXPECT_EQ(a->indices[1].name, "b");
  EXPECT_EQ(a->indices[2].name, "a");
  EXPECT_EQ(a->indices[3].name, "c");
  EXPECT_EQ(a->indices[3].extent, 3);
  EXPECT_EQ(a->reduce, Reduce::kSum);
  EXPECT_EQ(a->reduced_indices(), (std::vector<int>{1, 2, 3}));
}

TEST_F(CompletionTest, AffineSubscriptsAndConsts) {
  // y[t] = sum(big[two*t + k - 1] * w[k]): two is a const (2), not an index.
  auto sub = op(Op::kSub, {op(Op::kAdd, {op(Op::kMul, {name("two"), name("t")}), name("k")}), num(1)});
  auto a = complete("y", {"t"}, raw_reduce(Reduce::kSum, op(Op::kMul, {ref("big", {sub}), ref("w", {name("k")})})));
  ASSERT_TRUE(a) << messages();
  ASSERT_EQ(a->indices.size(), 2u);
  const Affine& affine = a->rhs->args[0]->subscripts[0];
  EXPECT_EQ(affine.terms, (std::vector<std::pair<int, int64_t>>{{0, 2}, {1, 1}}));
  EXPECT_EQ(affine.offset, -1);
  // -(i - 3) * 2 and i - i + 1 fold.
  auto b = complete("y", {"i"}, ref("y", {op(Op::kMul, {op(Op::kNeg, {op(Op::kSub, {name("i"), num(3)})}), num(2)})}));
  ASSERT_TRUE(b) << messages();
  EXPECT_EQ(b->rhs->subscripts[0].terms, (std::vector<std::pair<int, int64_t>>{{0, -2}}));
  EXPECT_EQ(b->rhs->subscripts[0].offset, 6);
  auto c = complete("y", {"i"}, ref("y", {op(Op::kAdd, {op(Op::kSub, {name("i"), name("i")}), num(1)})}));
  ASSERT_TRUE(c) << messages();
  EXPECT_TRUE(c->rhs->subscripts[0].terms.empty());
  EXPECT_EQ(c->rhs->subscripts[0].offset, 1);
}

TEST_F(CompletionTest, WhereBounds) {
  // y[i] = sum(x[i, j + k]) where k < 2: j needs a bound too.
  auto rhs = [&] { return raw_reduce(Reduce::kSum, ref("x", {name("i"), op(Op::kAdd, {name("j", loc(1, 20)), name("k")})})); };
  EXPECT_FALSE(complete("y", {"i"}, rhs(), {{"k", num(2), loc(1, 40)}}));
  EXPECT_TRUE(has("1:20: the range of index 'j' is unknown: it never stands alone as a whole subscript; add a bound like `where j < N`"))
      << messages();
  auto a = complete("y", {"i"}, rhs(), {{"k", num(2), {}}, {"j", name("two"), {}}});
  ASSERT_TRUE(a) << messages();
  EXPECT_EQ(a->indices[1].extent, 2);
  EXPECT_EQ(a->indices[2].extent, 2);
  // A bound that agrees with a stand-alone dimension is fine; one that disagrees is not.
  EXPECT_TRUE(complete("y", {"i"}, ref("y", {name("i")}), {{"i", num(4), {}}})) << messages();
  EXPECT_FALSE(complete("y", {"i"}, ref("y", {name("i")}), {{"i", num(3), loc(1, 30)}}));
  EXPECT_TRUE(has("1:30: where i < 3 disagrees with dimension 0 of 'y' (size 4), where 'i' stands alone")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, ref("y", {name("i")}), {{"q", num(3), loc(1, 30)}}));
  EXPECT_TRUE(has("1:30: where bound on 'q', which is not used in this statement")) << messages();
  // An index may appear only as a value when it has a bound; a tensor cannot be bounded.
  auto v = complete("s", {}, raw_reduce(Reduce::kSum, op(Op::kMul, {name("q"), name("q")})), {{"q", num(4), {}}});
  ASSERT_TRUE(v) << messages();
  EXPECT_EQ(v->indices.size(), 1u);
  EXPECT_EQ(v->rhs->args[0]->kind, Expr::Kind::kIndex);
  EXPECT_FALSE(complete("y", {"i"}, ref("y", {name("i")}), {{"x", num(3), loc(1, 30)}}));
  EXPECT_TRUE(has("1:30: 'x' is a tensor, so it cannot be an index")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, ref("y", {name("i")}), {{"i", num(4), {}}, {"i", num(4), loc(1, 9)}}));
  EXPECT_TRUE(has("1:9: index 'i' has two where bounds")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, rhs(), {{"k", num(0, loc(1, 7)), {}}, {"j", num(2), {}}}));
  EXPECT_TRUE(has("1:7: the bound of 'k' must be positive")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, rhs(), {{"k", name("half", loc(1, 7)), {}}, {"j", num(2), {}}}));
  EXPECT_TRUE(has("1:7: const 'half' is not an integer")) << messages();
}

TEST_F(CompletionTest, ExtentsMustAgree) {
  // z[i, j] = x[i, j] + x[j, i]: j is 5 in one place and 4 in the other.
  EXPECT_FALSE(complete("z", {"i", "j"}, op(Op::kAdd, {ref("x", {name("i"), name("j")}), ref("x", {name("j", loc(1, 20)), name("i")})})));
  EXPECT_TRUE(has("1:20: index 'j' stands alone in dimension 0 of 'x' (size 4) here, but in dimension 1 of 'z' (size 5) elsewhere; the sizes must agree"))
      << messages();
}

TEST_F(CompletionTest, WeakLiteralTyping) {
  auto rhs_of = [&](const std::string& target, RawExprRef rhs) -> ExprRef {
    auto a = complete(target, {"i"}, std::move(rhs));
    EXPECT_TRUE(a) << messages();
    return a ? a->rhs : nullptr;
  };
  // f32 * 2: the literal is f32.
  ExprRef e = rhs_of("y", op(Op::kMul, {ref("y", {name("i")}), num(2)}));
  EXPECT_EQ(e->type, DType::kF32);
  EXPECT_EQ(e->args[1]->type, DType::kF32);
  // i32 index * 0.5: a float literal is f32, and so is the product.
  e = rhs_of("d", op(Op::kMul, {name("i"), flt(0.5)}));
  EXPECT_EQ(e->type, DType::kF32);
  EXPECT_EQ(e->args[0]->type, DType::kI32);
  EXPECT_EQ(e->args[1]->type, DType::kF32);
  // f64 * 0.1: the literal is f64.
  e = rhs_of("d", op(Op::kMul, {ref("d", {name("i")}), flt(0.1)}));
  EXPECT_EQ(e->args[1]->type, DType::kF64);
  // index * 2: i32.
  e = rhs_of("n", op(Op::kMul, {name("i"), num(2)}));
  EXPECT_EQ(e->type, DType::kI32);
  // f32 * (1 / 2): the literal subexpression is typed as a whole, f32.
  e = rhs_of("y", op(Op::kMul, {ref("y", {name("i")}), op(Op::kDiv, {num(1), num(2)})}));
  EXPECT_EQ(e->args[1]->type, DType::kF32);
  EXPECT_EQ(e->args[1]->args[0]->type, DType::kF32);
  // A right side of literals only takes the target's type.
  e = rhs_of("d", flt(0.1));
  EXPECT_EQ(e->type, DType::kF64);
  e = rhs_of("n", num(3));
  EXPECT_EQ(e->type, DType::kI32);
  e = rhs_of("n", flt(2.5));
  EXPECT_EQ(e->type, DType::kF32);  // then converted to i32 on assignment
  // Casts type their literal argument.
  e = rhs_of("y", op(Op::kCastF64, {flt(0.1)}));
  EXPECT_EQ(e->type, DType::kF64);
  EXPECT_EQ(e->args[0]->type, DType::kF64);
  // Comparisons give bool (language version 3) and compare in the promoted operand type; select
  // has the promoted branch type.
  e = rhs_of("y", op(Op::kLt, {name("i"), num(2)}));
  EXPECT_EQ(e->type, DType::kBool);
  EXPECT_EQ(e->args[1]->type, DType::kI32);
  e = rhs_of("y", op(Op::kSelect, {op(Op::kLt, {name("i"), num(2)}), ref("d", {name("i")}), num(0)}));
  EXPECT_EQ(e->type, DType::kF64);
  EXPECT_EQ(e->args[2]->type, DType::kF64);
  // Transcendental functions of integers are f32.
  e = rhs_of("y", op(Op::kExp, {name("i")}));
  EXPECT_EQ(e->type, DType::kF32);
  e = rhs_of("y", op(Op::kAbs, {name("i")}));
  EXPECT_EQ(e->type, DType::kI32);
  // Scalar tensors and consts read as values; -literal folds into a literal.
  e = rhs_of("y", op(Op::kAdd, {name("s"), op(Op::kNeg, {name("half")})}));
  EXPECT_EQ(e->args[0]->kind, Expr::Kind::kTensor);
  EXPECT_EQ(e->args[0]->node, 6);
  e = rhs_of("y", op(Op::kNeg, {num(3)}));
  EXPECT_EQ(e->kind, Expr::Kind::kLiteral);
  EXPECT_EQ(e->literal, -3);
  EXPECT_EQ(e->type, DType::kF32);
}

TEST_F(CompletionTest, LiteralRanges) {
  EXPECT_FALSE(complete("n", {"i"}, op(Op::kAdd, {name("i"), num(3e9, loc(1, 12))})));
  EXPECT_TRUE(has("1:12: integer literal 3000000000 does not fit in i32")) << messages();
  EXPECT_TRUE(complete("y", {"i"}, op(Op::kAdd, {ref("y", {name("i")}), num(3e9)}))) << messages();
  EXPECT_FALSE(complete("y", {"i"}, op(Op::kAdd, {ref("y", {name("i")}), flt(1e300, loc(1, 5))})));
  EXPECT_TRUE(has("1:5: literal")) << messages();
  EXPECT_TRUE(has("is out of range for f32")) << messages();
  EXPECT_TRUE(complete("d", {"i"}, op(Op::kAdd, {ref("d", {name("i")}), flt(1e300)}))) << messages();
  // Float literals may be infinite (text spells them `inf`), integer ones not; a built literal
  // must not stand where its name means something else.
  EXPECT_TRUE(complete("y", {"i"}, flt(-1.0 / 0.0, loc(1, 5)))) << messages();
  EXPECT_FALSE(complete("y", {"i"}, num(1.0 / 0.0, loc(1, 5))));
  EXPECT_TRUE(has("1:5: an integer literal must be a finite number")) << messages();
  EXPECT_FALSE(complete("y", {"inf"}, flt(1.0 / 0.0, loc(1, 9))));
  EXPECT_TRUE(has("1:9: the literal inf cannot be used where 'inf' names a tensor, const, size or index")) << messages();
}

TEST_F(CompletionTest, IndexNotOnTheLeftSuggestsAReduction) {
  EXPECT_FALSE(complete("y", {"i"}, ref("x", {name("i"), name("j", loc(1, 13))})));
  EXPECT_EQ(messages(), "1:13: index 'j' is not on the left side; reduce over it with sum(...) (or prod, max, min, mean, argmax, argmin), or add it to the target\n");
}

TEST_F(CompletionTest, ReductionPlacement) {
  // Inside an expression (language version 2): the sum becomes a temporary y__sum1[i] first.
  auto inner = complete("y", {"i"}, op(Op::kMul, {raw_reduce(Reduce::kSum, ref("x", {name("i"), name("j")}), loc(1, 8)), num(2)}));
  ASSERT_TRUE(inner) << messages();
  ASSERT_EQ(temporaries_.size(), 1u);
  EXPECT_EQ(temporaries_[0].name, "y__sum1");
  EXPECT_EQ(temporaries_[0].id, static_cast<int>(nodes_.size()));
  EXPECT_EQ(temporaries_[0].dims, std::vector<int64_t>{4});
  ASSERT_EQ(assignments_.size(), 2u);
  EXPECT_EQ(assignments_[0].target, temporaries_[0].id);
  EXPECT_EQ(assignments_[0].reduce, Reduce::kSum);
  EXPECT_EQ(assignments_[0].indices.size(), 2u);
  EXPECT_EQ(inner->reduce, Reduce::kNone);
  EXPECT_EQ(inner->indices.size(), 1u);  // j is the temporary's alone
  EXPECT_EQ(inner->rhs->args[0]->node, temporaries_[0].id);
  // Nested: the max keeps what its scope (the sum's argument) uses.
  auto nested = complete("s", {}, raw_reduce(Reduce::kSum, raw_reduce(Reduce::kMax, ref("x", {name("i"), name("j")}), loc(1, 9))));
  ASSERT_TRUE(nested) << messages();
  ASSERT_EQ(temporaries_.size(), 1u);
  EXPECT_TRUE(temporaries_[0].dims.empty());  // max over i and j: nothing else uses them
  // An inner reduction over nothing is a mistake.
  EXPECT_FALSE(complete("y", {"i"}, op(Op::kMul, {raw_reduce(Reduce::kSum, ref("x", {name("i"), name("j")}), loc(1, 8)), ref("x", {name("i"), name("j")})})));
  EXPECT_TRUE(has("1:8: sum(...) reduces over no index: every index of its argument also appears in the target or in the expression around it")) << messages();
  // Reducing over nothing as the whole right side is allowed; a scalar target reduces over everything.
  EXPECT_TRUE(complete("y", {"i"}, raw_reduce(Reduce::kMean, ref("y", {name("i")})))) << messages();
  auto a = complete("s", {}, raw_reduce(Reduce::kMax, ref("x", {name("i"), name("j")})), {}, Accum::kAdd);
  ASSERT_TRUE(a) << messages();
  EXPECT_EQ(a->reduce, Reduce::kMax);
  EXPECT_EQ(a->accum, Accum::kAdd);
  EXPECT_TRUE(a->target_indices.empty());
}

TEST_F(CompletionTest, Targets) {
  EXPECT_FALSE(complete("x", {"i", "j"}, num(1)));
  EXPECT_TRUE(has("1:1: cannot assign to input 'x': inputs are read-only inside routines")) << messages();
  EXPECT_FALSE(complete("two", {}, num(1)));
  EXPECT_TRUE(has("1:1: cannot assign to const 'two'")) << messages();
  EXPECT_FALSE(complete("z", {"i"}, num(1)));
  EXPECT_TRUE(has("1:1: 'z' has 2 dimensions but 1 subscript is given")) << messages();
  EXPECT_FALSE(complete("s", {"i"}, num(1)));
  EXPECT_TRUE(has("1:1: 's' is a scalar; write it without subscripts")) << messages();
  EXPECT_FALSE(complete("z", {"i", "i"}, num(1)));
  EXPECT_TRUE(has("1:3: index 'i' appears twice in the target")) << messages();
  EXPECT_FALSE(complete("y", {"two"}, num(1)));
  EXPECT_TRUE(has("1:3: target subscripts must be index names, but 'two' is a const")) << messages();
  RawStatement s;
  s.target = "y";
  s.target_subscripts = {op(Op::kAdd, {name("i"), num(1)}, loc(2, 3))};
  s.rhs = num(1);
  diagnostics_.clear();
  EXPECT_FALSE(complete_statement(s, nodes_, visible_, &diagnostics_));
  EXPECT_TRUE(has("2:3: target subscripts must be bare index names")) << messages();
  EXPECT_FALSE(complete("nope", {"i"}, num(1)));
  EXPECT_TRUE(has("1:1: unknown tensor 'nope'")) << messages();
  EXPECT_FALSE(complete("late", {"i"}, num(1)));
  EXPECT_TRUE(has("1:1: 'late' is used before its declaration on line 12")) << messages();
}

TEST_F(CompletionTest, SubscriptRules) {
  auto bad = [&](RawExprRef sub, const std::string& fragment) {
    EXPECT_FALSE(complete("y", {"i"}, ref("y", {std::move(sub)}))) << fragment;
    EXPECT_TRUE(has(fragment)) << messages();
  };
  bad(op(Op::kMul, {name("i"), name("i")}, loc(1, 9)), "1:9: subscript is not affine: it multiplies index 'i' by index 'i'");
  bad(op(Op::kDiv, {name("i"), num(2)}, loc(1, 9)), "1:9: a subscript cannot divide");
  bad(flt(1.0, loc(1, 9)), "1:9: a subscript must be an integer, not a float literal");
  bad(op(Op::kExp, {name("i")}, loc(1, 9)), "1:9: 'exp' cannot be used in a subscript");
  bad(ref("d", {name("i")}, loc(1, 9)), "1:9: a subscript of 'y' reads a f64 value; a gathered subscript reads integer values");
  bad(name("s", loc(1, 9)), "1:9: 's' is a tensor, so it cannot be an index");
  bad(name("half", loc(1, 9)), "1:9: const 'half' is not an integer");
  bad(op(Op::kAdd, {name("i"), name("late", loc(1, 9))}), "1:9: 'late' is a tensor, so it cannot be an index");
  bad(op(Op::kMul, {name("i"), num(1e17, loc(1, 9))}), "1:9: integer in a subscript is too large");
  bad(op(Op::kMul, {op(Op::kMul, {name("i"), num(4e15)}), num(4e15)}, loc(1, 9)), "1:9: subscript arithmetic overflows");
}

TEST_F(CompletionTest, ReadRules) {
  EXPECT_FALSE(complete("y", {"i"}, ref("x", {name("i")}, loc(1, 8))));
  EXPECT_TRUE(has("1:8: 'x' has 2 dimensions but 1 subscript is given; write exactly one subscript per dimension")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, op(Op::kAdd, {name("i"), name("x", loc(1, 8))})));
  EXPECT_TRUE(has("1:8: 'x' has 2 dimensions but 0 subscripts are given")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, name("foo", loc(1, 8))));
  EXPECT_TRUE(has("1:8: unknown name 'foo': it is not a declared tensor, const or size, nor an index of this statement")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, ref("foo", {name("i")}, loc(1, 8))));
  EXPECT_TRUE(has("1:8: unknown tensor 'foo'")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, raw_merge("two", {}, loc(1, 8))));
  EXPECT_TRUE(has("1:8: const 'two' has no merge buffer")) << messages();
  auto a = complete("y", {"i"}, raw_merge("y", {name("i")}));
  ASSERT_TRUE(a) << messages();
  EXPECT_EQ(a->rhs->kind, Expr::Kind::kMerge);
}

TEST_F(CompletionTest, ReportsEveryProblem) {
  // y[i] = x[i, j] * foo + w[i * k]: j not on the left, foo unknown, i * k not affine.
  auto rhs = op(Op::kAdd, {op(Op::kMul, {ref("x", {name("i"), name("j", loc(1, 13))}), name("foo", loc(1, 18))}),
                           ref("w", {op(Op::kMul, {name("i"), name("k")}, loc(1, 26))})});
  EXPECT_FALSE(complete("y", {"i"}, rhs));
  EXPECT_EQ(diagnostics_.size(), 3u) << messages();
  EXPECT_TRUE(has("1:26: subscript is not affine")) << messages();
  EXPECT_TRUE(has("1:13: index 'j' is not on the left side")) << messages();
  EXPECT_TRUE(has("1:18: unknown name 'foo'")) << messages();
}

TEST_F(CompletionTest, DepthLimit) {
  RawExprRef e = num(1);
  for (int n = 0; n < kMaxExprDepth; ++n) e = op(Op::kNeg, {e});
  EXPECT_FALSE(complete("y", {"i"}, e));
  EXPECT_TRUE(has("expression nested deeper than 256 levels")) << messages();
  e = num(1);
  for (int n = 0; n < kMaxExprDepth - 1; ++n) e = op(Op::kAbs, {e});
  EXPECT_TRUE(complete("y", {"i"}, e)) << messages();
}

TEST_F(CompletionTest, MissingPieces) {
  EXPECT_FALSE(complete("y", {"i"}, nullptr));
  EXPECT_TRUE(has("the statement has no right side")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, op(Op::kAdd, {num(1)})));
  EXPECT_TRUE(has("'+' takes 2 arguments, not 1")) << messages();
  EXPECT_FALSE(complete("y", {"i"}, op(Op::kAdd, {num(1), nullptr})));
  EXPECT_TRUE(has("missing operand")) << messages();
}

TEST(CheckDeclaration, Rules) {
  auto problems = [](TensorNode n) {
    std::vector<Diagnostic> d;
    check_declaration(n, &d);
    std::string out;
    for (const Diagnostic& x : d) out += x.message + "\n";
    return out;
  };
  EXPECT_EQ(problems(node("x", Role::kParam, DType::kF32, {2}, Init{Init::Kind::kNormal, 0, 1})), "");
  EXPECT_NE(problems(node("where", Role::kInput, DType::kF32, {})).find("'where' is a keyword"), std::string::npos);
  EXPECT_NE(problems(node("1x", Role::kInput, DType::kF32, {})).find("is not a valid name"), std::string::npos);
  EXPECT_EQ(problems(node("x", Role::kInput, DType::kI64, {})), "");  // language version 3: every type
  EXPECT_NE(problems(node("x", Role::kInput, DType::kF32, {2, -1})).find("has a dimension of -1"), std::string::npos);
  EXPECT_NE(problems(node("x", Role::kInput, DType::kF32, {int64_t{1} << 31, int64_t{1} << 31, 2})).find("too large"), std::string::npos);
  EXPECT_NE(problems(node("x", Role::kInput, DType::kF32, {}, Init{Init::Kind::kValue, 1, 0})).find("input 'x' cannot have an initializer"), std::string::npos);
  EXPECT_NE(problems(node("x", Role::kOutput, DType::kF32, {}, Init{Init::Kind::kUniform, 0, 1})).find("output 'x' cannot have an initializer"), std::string::npos);
  EXPECT_NE(problems(node("c", Role::kConst, DType::kF32, {})).find("const 'c' needs a value"), std::string::npos);
  EXPECT_NE(problems(node("c", Role::kConst, DType::kF32, {}, Init{Init::Kind::kNormal, 0, 1})).find("must be initialized with a number"), std::string::npos);
  EXPECT_NE(problems(node("c", Role::kConst, DType::kI32, {}, Init{Init::Kind::kValue, 0.5, 0})).find("i32 'c' cannot be initialized with 0.5"), std::string::npos);
  EXPECT_NE(problems(node("p", Role::kParam, DType::kF32, {}, Init{Init::Kind::kUniform, 1, 0})).find("uniform(LO, HI) needs LO <= HI"), std::string::npos);
  EXPECT_NE(problems(node("p", Role::kParam, DType::kF32, {}, Init{Init::Kind::kNormal, 0, -1})).find("STD >= 0"), std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
