// Guards: each construct, torch 2.13's real guard text, malformed and hostile input, a deterministic mutation run,
// and random expressions checked against a reference evaluator.
#include "aotcache/guard.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace aotcache {
namespace {

constexpr int64_t k_max = std::numeric_limits<int64_t>::max();
constexpr int64_t k_min = std::numeric_limits<int64_t>::min();

// The value of a boolean guard, or the error code.
Result<bool> eval(std::string_view text, std::vector<int64_t> values) {
  AOTCACHE_ASSIGN_OR_RETURN(GuardExpr g, parse_guard(text));
  return evaluate_guard(g, values);
}

Result<int64_t> eval_int(std::string_view text, std::vector<int64_t> values) {
  AOTCACHE_ASSIGN_OR_RETURN(GuardExpr g, parse_guard_int(text));
  return evaluate_guard_int(g, values);
}

int64_t int_value(std::string_view text, std::vector<int64_t> values = {}) {
  Result<int64_t> r = eval_int(text, std::move(values));
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().to_string();
  return r.ok() ? r.value() : 0;
}

bool holds(std::string_view text, std::vector<int64_t> values = {}) {
  Result<bool> r = eval(text, std::move(values));
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().to_string();
  return r.ok() && r.value();
}

// The error of parsing `text`, which must fail.
Status parse_error(std::string_view text) {
  Result<GuardExpr> r = parse_guard(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? to_string(r.value()) : "");
  return r.ok() ? Status::ok_status() : r.status();
}

// The error of evaluating `text`, which must parse and then fail.
Status eval_error(std::string_view text, std::vector<int64_t> values = {}) {
  Result<GuardExpr> g = parse_guard_int(text);
  if (!g.ok()) g = parse_guard(text);
  EXPECT_TRUE(g.ok()) << text << ": " << g.status().to_string();
  if (!g.ok()) return g.status();
  if (g->is_bool()) {
    Result<bool> r = evaluate_guard(g.value(), values);
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? Status::ok_status() : r.status();
  }
  Result<int64_t> r = evaluate_guard_int(g.value(), values);
  EXPECT_FALSE(r.ok()) << text << " = " << (r.ok() ? r.value() : 0);
  return r.ok() ? Status::ok_status() : r.status();
}

bool contains(const Status& s, std::string_view part) {
  return s.message().find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------------------------------
// Constructs.

TEST(GuardParse, LiteralsSymbolsAndBooleans) {
  EXPECT_EQ(int_value("0"), 0);
  EXPECT_EQ(int_value("42"), 42);
  EXPECT_EQ(int_value("9223372036854775807"), k_max);
  EXPECT_EQ(int_value("-9223372036854775808"), k_min);
  EXPECT_EQ(int_value("s0", {7}), 7);
  EXPECT_EQ(int_value("s2", {1, 2, 3}), 3);
  EXPECT_TRUE(holds("True"));
  EXPECT_FALSE(holds("False"));
  EXPECT_EQ(parse_guard_int("s0 + s12")->num_symbols(), 13u);
  EXPECT_EQ(parse_guard("True")->num_symbols(), 0u);
}

TEST(GuardParse, Arithmetic) {
  EXPECT_EQ(int_value("1 + 2*3"), 7);
  EXPECT_EQ(int_value("(1 + 2)*3"), 9);
  EXPECT_EQ(int_value("10 - 3 - 2"), 5);  // left associative
  EXPECT_EQ(int_value("-s0 + 5", {2}), 3);
  EXPECT_EQ(int_value("-2*s0 + s1", {3, 10}), 4);
  EXPECT_EQ(int_value("s0*s1", {4, 6}), 24);
  EXPECT_EQ(int_value("2**10"), 1024);
  EXPECT_EQ(int_value("2**3**2"), 512);  // right associative
  EXPECT_EQ(int_value("-2**2"), -4);     // ** binds tighter than unary minus
  EXPECT_EQ(int_value("(-2)**2"), 4);
  EXPECT_EQ(int_value("2**-0"), 1);
  EXPECT_EQ(int_value("0**0"), 1);
  EXPECT_EQ(int_value("(-1)**9223372036854775807"), -1);
  EXPECT_EQ(int_value("s0**2*s1", {3, 2}), 18);
  EXPECT_EQ(int_value("--5"), 5);
  EXPECT_EQ(int_value("Abs(s0 - s1)", {3, 10}), 7);
  EXPECT_EQ(int_value("Min(5, s0)", {9}), 5);
  EXPECT_EQ(int_value("Max(1, s0, s1, 3)", {-4, 2}), 3);
  EXPECT_EQ(int_value("Min(s0)", {9}), 9);
  EXPECT_EQ(int_value("PowByNatural(s0, 3)", {3}), 27);
  EXPECT_EQ(int_value("IntTrueDiv(s0, 4)", {12}), 3);
  EXPECT_EQ(int_value("Identity(s0 + 1)", {1}), 2);
}

TEST(GuardParse, FloorDivisionAndModuloArePythons) {
  // Python: 7 // 2 == 3, -7 // 2 == -4, 7 // -2 == -4, -7 // -2 == 3.
  EXPECT_EQ(int_value("7//2"), 3);
  EXPECT_EQ(int_value("(-7)//2"), -4);
  EXPECT_EQ(int_value("7//(-2)"), -4);
  EXPECT_EQ(int_value("(-7)//(-2)"), 3);
  EXPECT_EQ(int_value("(s0//8)", {64}), 8);
  EXPECT_EQ(int_value("FloorDiv(s0, 3)", {-1}), -1);
  EXPECT_EQ(int_value("CleanDiv(s0, 3)", {9}), 3);
  // Python: 7 % 3 == 1, -7 % 3 == 2, 7 % -3 == -2, -7 % -3 == -1.
  EXPECT_EQ(int_value("7 % 3"), 1);
  EXPECT_EQ(int_value("Mod(-7, 3)"), 2);
  EXPECT_EQ(int_value("PythonMod(7, -3)"), -2);
  EXPECT_EQ(int_value("Mod(-7, -3)"), -1);
  EXPECT_EQ(int_value("Mod(-9223372036854775808, -1)"), 0);
  EXPECT_EQ(int_value("(-9223372036854775808)//1"), k_min);
  EXPECT_EQ(int_value("(-9223372036854775807)//2"), -4611686018427387904);
}

TEST(GuardParse, ComparisonsAndLogic) {
  EXPECT_TRUE(holds("2 <= s0", {2}));
  EXPECT_FALSE(holds("2 <= s0", {1}));
  EXPECT_TRUE(holds("s0 < 3", {2}));
  EXPECT_TRUE(holds("s0 > 5", {6}));
  EXPECT_TRUE(holds("s0 >= 6", {6}));
  EXPECT_TRUE(holds("s0 == 6", {6}));
  EXPECT_TRUE(holds("s0 != 5", {6}));
  EXPECT_TRUE(holds("Eq(Mod(s0, 8), 0)", {64}));
  EXPECT_FALSE(holds("Eq(Mod(s0, 8), 0)", {63}));
  EXPECT_TRUE(holds("Ne(s0, 1)", {2}));
  EXPECT_TRUE(holds("Lt(s0, 3) & Le(s0, 2) & Gt(s0, 1) & Ge(s0, 2)", {2}));
  EXPECT_TRUE(holds("(s0 < 3) | (s1 > 2)", {5, 3}));
  EXPECT_FALSE(holds("(s0 < 3) | (s1 > 2)", {5, 2}));
  EXPECT_TRUE(holds("~(s0 < 3)", {3}));
  EXPECT_TRUE(holds("Not(Eq(s0, 1))", {3}));
  EXPECT_TRUE(holds("And(s0 > 1, s0 < 9, Ne(s0, 4))", {5}));
  EXPECT_TRUE(holds("Or(False, s0 > 1)", {5}));
  EXPECT_TRUE(holds("Eq(s0 < 3, True)", {1}));  // Eq/Ne also compare two booleans
  EXPECT_TRUE(holds("Ne(True, False)"));
  // & binds tighter than |, both tighter than comparisons (Python).
  EXPECT_TRUE(holds("True | False & False"));
  EXPECT_FALSE(holds("(True | False) & False"));
}

TEST(GuardParse, TypesAreChecked) {
  // sympy itself raises TypeError for `s0 + True`; aotcache rejects it at parse time.
  EXPECT_TRUE(contains(parse_error("s0 + True"), "needs an integer operand, got a boolean"));
  EXPECT_TRUE(contains(parse_error("(s0 < 3) & s1"), "needs a boolean operand, got an integer"));
  EXPECT_TRUE(contains(parse_error("~s0"), "needs a boolean operand"));
  EXPECT_TRUE(contains(parse_error("Eq(s0, True)"), "both operands must have one type"));
  EXPECT_TRUE(contains(parse_error("(s0 < 3) < 4"), "needs an integer operand"));
  EXPECT_TRUE(contains(parse_error("s0 + 1"), "integer expression, not a condition"));
  EXPECT_FALSE(parse_guard_int("s0 < 1").ok());
}

TEST(GuardEval, ErrorsAreStatusesNeverUndefined) {
  EXPECT_TRUE(contains(eval_error("9223372036854775807 + 1"), "integer overflow in +"));
  EXPECT_TRUE(contains(eval_error("s0 - 1", {k_min}), "integer overflow in -"));
  EXPECT_TRUE(contains(eval_error("s0*s0", {int64_t{1} << 32}), "integer overflow in *"));
  EXPECT_TRUE(contains(eval_error("-s0", {k_min}), "overflow"));
  EXPECT_TRUE(contains(eval_error("--9223372036854775808"), "overflow"));
  EXPECT_TRUE(contains(eval_error("Abs(s0)", {k_min}), "overflow"));
  EXPECT_TRUE(contains(eval_error("s0//0", {5}), "division by zero in //"));
  EXPECT_TRUE(contains(eval_error("s0//s1", {k_min, -1}), "overflow"));
  EXPECT_TRUE(contains(eval_error("Mod(s0, 0)", {5}), "modulo by zero"));
  EXPECT_TRUE(contains(eval_error("s0 % s1", {5, 0}), "modulo by zero"));
  EXPECT_TRUE(contains(eval_error("2**s0", {-1}), "negative exponent"));
  EXPECT_TRUE(contains(eval_error("2**63"), "overflow"));
  EXPECT_EQ(int_value("2**62"), int64_t{1} << 62);
  EXPECT_EQ(int_value("(-2)**63"), k_min);
  EXPECT_TRUE(contains(eval_error("3**40"), "overflow"));
  EXPECT_TRUE(contains(eval_error("IntTrueDiv(7, 2)"), "non-integral"));
  EXPECT_TRUE(contains(eval_error("IntTrueDiv(7, 0)"), "division by zero"));
  EXPECT_TRUE(contains(eval_error("Eq(s0//0, 1)", {1}), "division by zero"));
  // A symbol without a value.
  Result<bool> r = eval("s3 > 0", {1, 2});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.status(), "uses s3 but only 2"));
}

TEST(GuardEval, AndOrAreOrderIndependentOverErrors) {
  // A false operand decides And even when another operand errs, in either order; likewise true for Or.
  EXPECT_FALSE(holds("Ne(s1, 0) & Eq(Mod(s0, s1), 0)", {5, 0}));
  EXPECT_FALSE(holds("Eq(Mod(s0, s1), 0) & Ne(s1, 0)", {5, 0}));
  EXPECT_TRUE(holds("Eq(s1, 0) | Eq(Mod(s0, s1), 0)", {5, 0}));
  EXPECT_TRUE(holds("Eq(Mod(s0, s1), 0) | Eq(s1, 0)", {5, 0}));
  // Otherwise the error stands.
  EXPECT_TRUE(contains(eval_error("Eq(s1, 0) & Eq(Mod(s0, s1), 0)", {5, 0}), "modulo by zero"));
  EXPECT_TRUE(contains(eval_error("Ne(s1, 0) | Eq(Mod(s0, s1), 0)", {5, 0}), "modulo by zero"));
  EXPECT_TRUE(contains(eval_error("~Eq(Mod(s0, s1), 0)", {5, 0}), "modulo by zero"));
}

// ---------------------------------------------------------------------------------------------------------------
// Real guards of torch 2.13 (scripts/torch_guard_vectors.py; symbols renamed s0, s1, ... by first appearance in the
// inputs), with sizes for which torch's compiled graph is valid: every guard holds.

struct Vector {
  const char* program;
  std::vector<int64_t> sizes;
  std::vector<std::string> guards;
};

const std::vector<Vector>& torch_vectors() {
  static const std::vector<Vector> v = {
      {"x.view(-1, 8), x: [64]", {64}, {"Eq(Mod(s0, 8), 0)", "Ne((s0//8), 1)", "8*((s0//8)) >= 2", "Ne((s0//8), 0)"}},
      {"x * 2 if x.size(0) > 5", {10}, {"s0 > 5"}},
      {"torch.cat([x, y]) (x: [s0, s1], y: [s2, s3])", {4, 3, 5, 3}, {"Eq(s3, s1)"}},
      {"x.reshape(-1) + y", {4, 6, 24}, {"Eq(s0*s1, s2)"}},
      {"x @ y", {4, 6, 6, 7}, {"Eq(s2, s1)"}},
      {"x + y, both [s0, s1]", {4, 6, 4, 6}, {"Eq(s1, s3)", "Eq(s2, s0)"}},
      {"x[: x.size(0) // 2]", {10}, {"((s0//2)) <= s0", "Ne((s0//2), 1)", "((s0//2)) >= 2"}},
      {"x.size(0) % 3 == 1", {10}, {"Eq(Mod(s0, 3), 1)"}},
      {"x[: min(x.size(0), 5)]", {10}, {"Min(5, s0) <= s0"}},
      {"torch.split(x, 3)[0]", {10}, {"Eq(((s0 + 2)//3), 4)", "s0 - 9 >= 0", "Ne(s0 - 9, 0)", "s0 - 9 < 2"}},
      {"torch.chunk(x, 4)[0]",
       {12},
       {"Eq(((s0 + (((s0 + 3)//4)) - 1)//(((s0 + 3)//4))), 4)", "s0 - 3*(((s0 + 3)//4)) >= 0", "Ne(((s0 + 3)//4), 1)",
        "(((s0 + 3)//4)) >= 2", "Ne(s0 - 3*(((s0 + 3)//4)), 0)", "s0 - 3*(((s0 + 3)//4)) >= 2",
        "Ne(s0 - 3*(((s0 + 3)//4)), 1)"}},
      {"F.conv1d(x, w, stride=2), x: [1, s0, s1], w: [s2, s5, s3]",
       {2, 17, 3, 3, 0, 2},
       {"Eq(s5, s0)", "s1 >= s3", "s3 <= 3", "s0*s1 <= 20480", "(((s1 - s3)//2)) + 1 > 0",
        "Ne((((s1 - s3)//2)) + 1, 0)", "s2*((((s1 - s3)//2)) + 1) >= 2", "Ne((((s1 - s3)//2)) + 1, 1)",
        "Eq(Max(1, (((s1 - s3)//2)) + 1), (((s1 - s3)//2)) + 1)"}},
      {"F.conv1d(x, w, stride=2), automatic dynamic",
       {4, 5, 20, 6, 6, 5},
       {"Eq(s5, s1)", "s2 >= s4", "s4 > 3", "(((s2 - s4)//2)) + 1 > 0", "(((s2 - s4)//2)) + 1 >= 0",
        "Ne((((s2 - s4)//2)) + 1, 0)", "s0*s3*((((s2 - s4)//2)) + 1) >= 2", "Ne((((s2 - s4)//2)) + 1, 1)",
        "Eq(Max(1, (((s2 - s4)//2)) + 1), (((s2 - s4)//2)) + 1)",
        "Eq(s3*Max(1, (((s2 - s4)//2)) + 1), s3*((((s2 - s4)//2)) + 1))"}},
      {"x * 2 if x.size(0) != x.size(1)", {4, 6}, {"Ne(s0, s1)"}},
      {"x.view(x.size(0) * x.size(1) // 4, 4)",
       {4, 6},
       {"Eq(s0*s1, 4*(((s0*s1)//4)))", "Ne(((s0*s1)//4), s0)", "Ne(Mod(s0, ((s0*s1)//4)), 0)",
        "Eq(Mod(s0*s1, ((s0*s1)//4)), 0)", "Ne(s0*s1, ((s0*s1)//4))", "Eq(((s0*s1)//(((s0*s1)//4))), 4)",
        "Ne(((s0*s1)//(((s0*s1)//4))), 0)", "(((s0*s1)//4))*(((s0*s1)//(((s0*s1)//4)))) >= 2",
        "Ne(((s0*s1)//(((s0*s1)//4))), 1)", "Ne(((s0*s1)//4), 1)"}},
      {"x.view(2, -1, 3), automatic dynamic",
       {5, 9, 6},
       {"Eq(Mod(s0*s1*s2, 6), 0)", "Eq(s0*s1*s2, 6*(((s0*s1*s2)//6)))", "Ne(s0, 2)", "Ne(Mod(s0, 2), 0)",
        "Ne(Mod(s0*s1, 2), 0)", "Eq(Mod(s0*s1*s2, 2), 0)", "Ne(((s0*s1*s2)//6), ((s0*s1*s2)//2))",
        "Eq(Mod(((s0*s1*s2)//2), ((s0*s1*s2)//6)), 0)", "Eq(((s0*s1*s2)//(2*(((s0*s1*s2)//6)))), 3)",
        "Ne(((s0*s1*s2)//(2*(((s0*s1*s2)//6)))), 1)", "Ne(((s0*s1*s2)//6), 1)",
        "2*(((s0*s1*s2)//6))*(((s0*s1*s2)//(2*(((s0*s1*s2)//6))))) >= 2",
        "Eq(((s0*s1*s2)//2), (((s0*s1*s2)//6))*(((s0*s1*s2)//(2*(((s0*s1*s2)//6))))))",
        "Ne(((s0*s1*s2)//(2*(((s0*s1*s2)//6)))), 0)",
        "Eq(Max(1, ((s0*s1*s2)//(2*(((s0*s1*s2)//6))))), ((s0*s1*s2)//(2*(((s0*s1*s2)//6)))))",
        "Eq(Max(1, ((s0*s1*s2)//6))*Max(1, ((s0*s1*s2)//(2*(((s0*s1*s2)//6))))), "
        "(((s0*s1*s2)//6))*(((s0*s1*s2)//(2*(((s0*s1*s2)//6))))))"}},
      {"x.unfold(0, 3, 2)", {11}, {"s0 >= 3", "Ne((((s0 - 3)//2)) + 1, 1)"}},
      {"x.new_zeros(abs(x.size(0) - y.size(0)) + 1)", {4, 9}, {"Abs(s0 - s1) + 1 >= 2", "Ne(Abs(s0 - s1) + 1, 1)"}},
      {"x * 2 if 3 < x.size(0) < 100", {10}, {"s0 > 3", "s0 < 100"}},
      // sympy's str() of forms the programs above do not reach (torch 2.13's sympy; FloorDiv etc. from torch).
      {"sympy forms",
       {2, 10, 3},
       {"2 <= s0",
        "s0 <= 9223372036854775807",
        "Eq(s1, 9223372036854775807) | (s1 < 11)",
        "5 - s0 >= 3",
        "-2*s0 + s1 > 0",
        "Eq(s1, 2) | (s0 < 3)",
        "(s0 < 3) & ((s1 > 2) | (s2 > 1))",
        "s0 >= 2",
        "2*Abs(s0 - s1) > 0",
        "-((s0//2)) < 0",
        "(((-s0)//2)) < 0",
        "Eq(2*(PythonMod(s1, 3)), 2)",
        "Eq(2*(Mod(s1, 3)), 2)",
        "(((s0*s1)//2)) >= 10",
        "Eq(IntTrueDiv(s1, 2), 5)",
        "Eq(2*s0**2, 8)",
        "Eq(s0*(s1 + 1), 22)",
        "Eq((s0 + 1)**2, 9)",
        "Eq(((s0//2))**2, 1)",
        "Eq(2**s0, 4)",
        "Eq(Min(s0, s1, s2), 2)",
        "Eq((s0//((s1//2))), 0)",
        "-s0*s1 < 0",
        "True",
        "~(s0 > 3)",
        "~((s0 > 3) & (s1 < 2))"}},
  };
  return v;
}

TEST(GuardTorchVectors, EveryGuardParsesHoldsAndRoundTrips) {
  size_t count = 0;
  size_t printed_back_unchanged = 0;
  std::vector<std::string> printed_differently;
  for (const Vector& v : torch_vectors()) {
    for (const std::string& text : v.guards) {
      ++count;
      Result<GuardExpr> g = parse_guard(text);
      ASSERT_TRUE(g.ok()) << v.program << ": " << text << ": " << g.status().to_string();
      Result<bool> r = evaluate_guard(g.value(), v.sizes);
      ASSERT_TRUE(r.ok()) << v.program << ": " << text << ": " << r.status().to_string();
      EXPECT_TRUE(r.value()) << v.program << ": " << text;
      const std::string printed = to_string(g.value());
      Result<GuardExpr> again = parse_guard(printed);
      ASSERT_TRUE(again.ok()) << printed;
      EXPECT_EQ(again.value(), g.value()) << text << " -> " << printed;
      if (printed == text) {
        ++printed_back_unchanged;
      } else {
        printed_differently.push_back(text + " -> " + printed);
      }
    }
  }
  EXPECT_EQ(count, 104u);
  // Every guard torch printed prints back unchanged but PythonMod, which prints as Mod (same semantics).
  const std::vector<std::string> expected_differences = {
      "Eq(2*(PythonMod(s1, 3)), 2) -> Eq(2*(Mod(s1, 3)), 2)",
  };
  EXPECT_EQ(printed_differently, expected_differences);
  EXPECT_EQ(printed_back_unchanged, count - expected_differences.size());
}

TEST(GuardTorchVectors, GuardSetFindsTheFirstFailingGuard) {
  const Vector& view = torch_vectors()[0];
  Result<GuardSet> set = GuardSet::parse(view.guards);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->size(), 4u);
  EXPECT_EQ(set->num_symbols(), 1u);
  const std::vector<int64_t> ok = {64}, not_divisible = {60}, one_row = {8};
  EXPECT_EQ(set->first_failing(ok).value(), std::nullopt);
  EXPECT_EQ(set->first_failing(not_divisible).value(), std::optional<size_t>(0));
  EXPECT_EQ(set->first_failing(one_row).value(), std::optional<size_t>(1));
  const std::vector<int64_t> none;
  Result<std::optional<size_t>> missing = set->first_failing(none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);

  const std::vector<std::string> bad = {"s0 > 1", "s0 >", "Eq(s0, 1)"};
  Result<GuardSet> bad_set = GuardSet::parse(bad);
  ASSERT_FALSE(bad_set.ok());
  EXPECT_TRUE(contains(bad_set.status(), "guard 1 (s0 >)")) << bad_set.status().to_string();

  const std::vector<std::string> erring = {"s0 > 1", "Eq(Mod(s0, s1), 0)"};
  Result<GuardSet> erring_set = GuardSet::parse(erring);
  ASSERT_TRUE(erring_set.ok());
  const std::vector<int64_t> zero = {5, 0};
  Result<std::optional<size_t>> e = erring_set->first_failing(zero);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.status(), "guard 1: guard evaluation: modulo by zero"));
}

TEST(GuardTorchVectors, FirstMatchingEntry) {
  // Entries as torch would specialize one graph: s0 == 1, s0 even, anything >= 2.
  std::vector<GuardSet> entries;
  for (std::vector<std::string> g :
       std::vector<std::vector<std::string>>{{"Eq(s0, 1)"}, {"Eq(Mod(s0, s1), 0)", "Eq(Mod(s0, 2), 0)"}, {"2 <= s0"}}) {
    entries.push_back(GuardSet::parse(g).value());
  }
  auto match = [&](std::vector<int64_t> sizes) { return first_matching_entry(entries, sizes); };
  EXPECT_EQ(match({1, 1}).value(), std::optional<size_t>(0));
  EXPECT_EQ(match({4, 1}).value(), std::optional<size_t>(1));
  EXPECT_EQ(match({4, 0}).value(), std::optional<size_t>(2));  // entry 1 errs (modulo by zero): no match
  EXPECT_EQ(match({-3, 1}).value(), std::nullopt);
  EXPECT_FALSE(match({4}).ok());  // entry 1 needs s1
}

// ---------------------------------------------------------------------------------------------------------------
// Torch forms aotcache refuses, and malformed input.

TEST(GuardParse, RefusesTorchFormsItDoesNotEvaluate) {
  struct Case {
    const char* text;
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"Eq(u0, 1)", StatusCode::kUnsupported, "unbacked symbol 'u0'"},
      {"s0 > 2.5", StatusCode::kUnsupported, "float literal"},
      {"s0/2 > 1", StatusCode::kUnsupported, "true division"},
      {"Piecewise((1, s0 > 2), (0, True)) > 0", StatusCode::kUnsupported, "function 'Piecewise'"},
      {"FloorToInt(2.5*ToFloat(s0)) > 1", StatusCode::kUnsupported, "function 'FloorToInt'"},
      {"TruncToInt(IntTrueDiv(s0, 2)) > 1", StatusCode::kUnsupported, "function 'TruncToInt'"},
      {"OpaqueUnaryFn_sqrt(s0) > 1", StatusCode::kUnsupported, "function 'OpaqueUnaryFn_sqrt'"},
      {"zuf0 > 1", StatusCode::kInvalidArgument, "unknown identifier 'zuf0'"},
      {"x > 1", StatusCode::kInvalidArgument, "unknown identifier 'x'"},
      {"oo > s0", StatusCode::kInvalidArgument, "unknown identifier 'oo'"},
      {"s01 > 1", StatusCode::kInvalidArgument, "not canonical"},
      {"s99999999 > 1", StatusCode::kInvalidArgument, "beyond the limit"},
      {"Foo(s0) > 1", StatusCode::kInvalidArgument, "unknown function 'Foo'"},
      {"L['t0'] > 1", StatusCode::kInvalidArgument, "unexpected character '['"},
      {"s0 > 1 and s0 < 5", StatusCode::kInvalidArgument, "unexpected 'and'"},
  };
  for (const Case& c : cases) {
    Status s = parse_error(c.text);
    EXPECT_EQ(s.code(), c.code) << c.text << ": " << s.to_string();
    EXPECT_TRUE(contains(s, c.message)) << c.text << ": " << s.to_string();
  }
}

TEST(GuardParse, MalformedInputIsAnError) {
  const char* cases[] = {
      "",
      "   ",
      "(",
      ")",
      "(s0 > 1",
      "s0 > 1)",
      "Eq(s0, 1",
      "Eq(s0 1)",
      "Eq(s0, 1,)",
      "Eq()",
      "Eq(s0)",
      "Eq(s0, 1, 2)",
      "Abs(s0, s1) > 0",
      "Not(True, False)",
      "And()",
      "s0 >",
      "> s0",
      "s0 = 1",
      "s0 ! 1",
      "s0 < s1 < s2",
      "s0 > 1 1",
      "s0 +* 1 > 0",
      "9223372036854775808 > s0",
      "99999999999999999999999999 > s0",
      "-9223372036854775808**2 > 0",
      "-(9223372036854775808) < 0",
      "12abc > 0",
      "s0 > 1 # comment",
      "s0 >\x01 1",
      "s0 \xff> 1",
      "True()",
      "s0(1) > 0",
      "Identity() > 0",
      "Identity(s0, s1) > 0",
  };
  for (const char* text : cases) {
    Status s = parse_error(text);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text << ": " << s.to_string();
    EXPECT_TRUE(contains(s, "guard parse error at offset")) << s.to_string();
  }
  EXPECT_TRUE(contains(parse_error(""), "empty guard"));
  EXPECT_TRUE(contains(parse_error("Eq(s0, 1"), "offset 8: expected ',' or ')', got end of text"));
  EXPECT_TRUE(contains(parse_error("99999999999999999999999999 > s0"), "does not fit in 64 bits"));
  EXPECT_TRUE(contains(parse_error("s0 < s1 < s2"), "chained comparison"));
  EXPECT_TRUE(contains(parse_error("s0 \xff> 1"), "unexpected character '\\xff'"));
}

// Limits reject hostile input quickly (each well under a second, in practice microseconds).
TEST(GuardParse, LimitsRejectHostileInputQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const std::string deep_parens = std::string(10000, '(') + "s0 > 1" + std::string(10000, ')');
  EXPECT_TRUE(contains(parse_error(deep_parens), "nests deeper than 100"));
  std::string deep_calls;
  for (int i = 0; i < 5000; ++i) deep_calls += "Max(";
  deep_calls += "s0";
  for (int i = 0; i < 5000; ++i) deep_calls += ", 1)";
  EXPECT_TRUE(contains(parse_error(deep_calls + " > 0"), "nests deeper than 100"));
  EXPECT_TRUE(contains(parse_error(std::string(10000, '~') + "True"), "nests deeper than 100"));
  EXPECT_TRUE(contains(parse_error(std::string(10000, '-') + "s0 > 0"), "nests deeper than 100"));
  // 1 MB: rejected on length alone.
  std::string big = "s0";
  while (big.size() < (1u << 20)) big += " + s0";
  EXPECT_TRUE(contains(parse_error(big + " > 0"), "exceeds the limit of 65536"));
  // Within the length limit: a long flat sum hits the node or height limit, not the stack.
  std::string sum = "s0";
  for (int i = 0; i < 5000; ++i) sum += "+1";
  Status s = parse_error(sum + " > 0");
  EXPECT_TRUE(contains(s, "deeper than 512") || contains(s, "more than 4096 nodes")) << s.to_string();
  std::string wide = "Max(s0";
  for (int i = 0; i < 5000; ++i) wide += ",1";
  EXPECT_TRUE(contains(parse_error(wide + ") > 0"), "more than 4096 nodes"));
  // Just inside the limits it parses, prints and evaluates.
  std::string nested = "s0";
  for (size_t i = 0; i < 90; ++i) nested = "(" + nested + " + 1)";
  EXPECT_EQ(int_value(nested, {1}), 91);
  std::string chain = "s0";
  for (int i = 0; i < 500; ++i) chain += " + 1";
  Result<GuardExpr> g = parse_guard_int(chain);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(to_string(g.value()), chain);
  const std::vector<int64_t> one = {1};
  EXPECT_EQ(evaluate_guard_int(g.value(), one).value(), 501);
  std::string many = "Max(s0";
  for (int i = 0; i < 200; ++i) many += ", " + std::to_string(i);
  many += ")";
  EXPECT_EQ(int_value(many, {7}), 199);  // 201 operands on the stack: the heap path of the evaluator
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Round trip of the canonical printer.

TEST(GuardPrint, CanonicalTextRoundTrips) {
  struct Case {
    const char* in;
    const char* out;
  };
  const Case cases[] = {
      {"s0 % 8 == 0", "Eq(Mod(s0, 8), 0)"},
      {"PythonMod(s0, 8) != 0", "Ne(Mod(s0, 8), 0)"},
      {"FloorDiv(s0, 2) >= 2", "((s0//2)) >= 2"},
      {"CleanDiv(s0*s1, 2) >= 2", "(((s0*s1)//2)) >= 2"},
      {"Lt(s0, 3)", "s0 < 3"},
      {"And(Gt(s0, 1), Eq(s1, 2))", "(s0 > 1) & Eq(s1, 2)"},
      {"Or(s0 > 1)", "Or(s0 > 1)"},
      {"Not(s0 > 1)", "~(s0 > 1)"},
      {"((s0 > 1) & (s1 > 1)) & (s2 > 1)", "((s0 > 1) & (s1 > 1)) & (s2 > 1)"},
      {"(s0 > 1) & (s1 > 1) & (s2 > 1)", "(s0 > 1) & (s1 > 1) & (s2 > 1)"},
      {"(s0 > 1) & (s1 > 1) | (s2 > 1)", "((s0 > 1) & (s1 > 1)) | (s2 > 1)"},
      {"s0 - (s1 - s2) > 0", "s0 - (s1 - s2) > 0"},
      {"s0 - s1 - s2 > 0", "s0 - s1 - s2 > 0"},
      {"(-5)**2 > s0", "(-5)**2 > s0"},
      {"-(5) < s0", "-5 < s0"},
      {"s0 - -5 > 0", "s0 - -5 > 0"},
      {"-(s0 + 1) < 0", "-(s0 + 1) < 0"},
      {"s0*(s1*s2) > 0", "s0*(s1*s2) > 0"},
      {"(s0**2)**3 > 0", "(s0**2)**3 > 0"},
      {"s0**-s1 > 0", "s0**-s1 > 0"},
      {"Identity(s0) > 0", "s0 > 0"},
      {"PowByNatural(s0, 2) > 0", "s0**2 > 0"},
      {"-9223372036854775808 < s0", "-9223372036854775808 < s0"},
      {"(-9223372036854775808)**1 < 0", "(-9223372036854775808)**1 < 0"},
      {"  Eq( s0 ,\n1 )\t", "Eq(s0, 1)"},
  };
  for (const Case& c : cases) {
    Result<GuardExpr> g = parse_guard(c.in);
    ASSERT_TRUE(g.ok()) << c.in << ": " << g.status().to_string();
    EXPECT_EQ(to_string(g.value()), c.out) << c.in;
    Result<GuardExpr> again = parse_guard(to_string(g.value()));
    ASSERT_TRUE(again.ok()) << to_string(g.value());
    EXPECT_EQ(again.value(), g.value()) << c.in;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Mutation: byte flips, truncations and insertions of the torch vectors. The parser never crashes or hangs, every
// accepted mutant prints back to an equal expression, and evaluation returns a value or a Status (the sanitizer build
// of docs/formats/guard-format.md checks that no step is undefined).

TEST(GuardMutation, ParserAndEvaluatorSurviveMutatedVectors) {
  std::mt19937_64 rng(20250908);
  const char k_alphabet[] = "s0123456789()+-*/%<>=!&|~, EqNeModMaxMinTrueFalse.u_\x00\xff";
  const std::string alphabet(k_alphabet, sizeof(k_alphabet) - 1);
  std::vector<std::string> seeds;
  for (const Vector& v : torch_vectors()) seeds.insert(seeds.end(), v.guards.begin(), v.guards.end());
  size_t accepted = 0, evaluated_ok = 0, total = 0;
  const std::vector<int64_t> sizes[] = {
      {0, 0, 0, 0, 0, 0}, {1, 2, 3, 4, 5, 6}, {k_max, k_min, -1, 1, 2, 3}, {64, 17, 3, 3, 9, 2}};
  for (const std::string& seed : seeds) {
    for (int m = 0; m < 60; ++m) {
      std::string s = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = s.empty() ? 0 : rng() % s.size();
        switch (rng() % 5) {
          case 0:
            if (!s.empty()) s[pos] = static_cast<char>(rng() % 256);
            break;
          case 1:
            if (!s.empty()) s[pos] = alphabet[rng() % alphabet.size()];
            break;
          case 2: s.resize(pos); break;
          case 3: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
          case 4: s.insert(pos, seed.substr(rng() % seed.size(), 1 + rng() % 8)); break;
        }
      }
      ++total;
      Result<GuardExpr> g = parse_guard(s);
      if (!g.ok()) {
        EXPECT_TRUE(g.status().code() == StatusCode::kInvalidArgument || g.status().code() == StatusCode::kUnsupported)
            << s;
        continue;
      }
      ++accepted;
      const std::string printed = to_string(g.value());
      Result<GuardExpr> again = parse_guard(printed);
      ASSERT_TRUE(again.ok()) << s << " -> " << printed << ": " << again.status().to_string();
      EXPECT_EQ(again.value(), g.value()) << s << " -> " << printed;
      for (const std::vector<int64_t>& values : sizes) {
        Result<bool> r = evaluate_guard(g.value(), values);
        if (r.ok()) ++evaluated_ok;
        if (g->num_symbols() > values.size()) {
          EXPECT_FALSE(r.ok());
        }
      }
    }
  }
  EXPECT_EQ(total, seeds.size() * 60);
  EXPECT_GT(accepted, total / 100) << "some mutants should stay valid";
  EXPECT_GT(evaluated_ok, 0u);
  RecordProperty("mutants", static_cast<int>(total));
  RecordProperty("accepted", static_cast<int>(accepted));
}

// ---------------------------------------------------------------------------------------------------------------
// Property: random expressions, printed fully parenthesized, parse and evaluate like a reference evaluator written
// independently (exact 128-bit arithmetic, range-checked afterwards).

__extension__ typedef __int128 Wide;  // exact products of two int64 values

struct Ref {
  std::string text;
  std::optional<Wide> value;  // nullopt: an evaluation error
  bool is_bool;
};

bool fits(Wide v) {
  return v >= k_min && v <= k_max;
}

std::optional<Wide> checked(Wide v) {
  return fits(v) ? std::optional<Wide>(v) : std::nullopt;
}

class RandomExpr {
 public:
  RandomExpr(uint64_t seed, std::vector<int64_t> values) : rng_(seed), values_(std::move(values)) {}

  Ref integer(int depth) {
    const int kind = depth <= 0 ? static_cast<int>(rng_() % 2) : static_cast<int>(rng_() % 12);
    switch (kind) {
      case 0: {
        const int64_t picks[] = {0, 1, 2, 3, 7, -1, -8, k_max, k_min, 1LL << 31, -(1LL << 32) + 5};
        const int64_t v = picks[rng_() % std::size(picks)];
        // Parenthesized so that a negative literal never meets ** unwrapped.
        return {"(" + std::to_string(v) + ")", v, false};
      }
      case 1: {
        const size_t i = rng_() % values_.size();
        return {"s" + std::to_string(i), values_[i], false};
      }
      case 2: {
        Ref a = integer(depth - 1);
        return {"(-" + a.text + ")", a.value ? checked(-*a.value) : std::nullopt, false};
      }
      case 10: {
        Ref a = integer(depth - 1);
        return {"Abs(" + a.text + ")", a.value ? checked(*a.value < 0 ? -*a.value : *a.value) : std::nullopt, false};
      }
      case 11: {
        const bool is_min = rng_() % 2 == 0;
        const int n = 1 + static_cast<int>(rng_() % 3);
        std::string text = is_min ? "Min(" : "Max(";
        std::optional<Wide> v;
        bool err = false;
        for (int k = 0; k < n; ++k) {
          Ref a = integer(depth - 1);
          text += (k ? ", " : "") + a.text;
          if (!a.value) err = true;
          if (a.value && (!v || (is_min ? *a.value < *v : *a.value > *v))) v = a.value;
        }
        return {text + ")", err ? std::nullopt : v, false};
      }
      default: break;
    }
    Ref a = integer(depth - 1);
    Ref b = integer(depth - 1);
    std::optional<Wide> v;
    const char* op = "+";
    const bool both = a.value && b.value;
    const Wide x = a.value.value_or(0), y = b.value.value_or(0);
    switch (kind) {
      case 3:
        op = "+";
        if (both) v = checked(x + y);
        break;
      case 4:
        op = "-";
        if (both) v = checked(x - y);
        break;
      case 5:
        op = "*";
        if (both) v = checked(x * y);
        break;
      case 6:
        op = "//";
        if (both && y != 0) {
          // floor(x / y) from the mathematical identity x == y*q + r with r in [0, |y|) adjusted to y's sign.
          Wide r = x % y;
          if (r < 0) r += (y < 0 ? -y : y);
          if (y < 0 && r != 0) r += y;  // Python's remainder has the divisor's sign
          v = checked((x - r) / y);
        }
        break;
      case 7:
        op = "%";
        if (both && y != 0) {
          Wide r = x % y;
          if (r != 0 && ((r < 0) != (y < 0))) r += y;
          v = checked(r);
        }
        break;
      case 8: {
        op = "**";
        // Small exponents keep random powers meaningful.
        const int64_t e = static_cast<int64_t>(rng_() % 5) - (rng_() % 8 == 0 ? 1 : 0);
        b = {"(" + std::to_string(e) + ")", e, false};
        if (a.value && e >= 0) {
          Wide r = 1;
          bool overflow = false;
          for (int64_t k = 0; k < e; ++k) {
            r *= x;
            if (!fits(r)) {
              overflow = true;
              break;
            }
          }
          if (!overflow) v = r;
        }
        break;
      }
      case 9:
        op = "//";
        if (both && y != 0) {
          // A second floor-division formulation: truncate, then step down when signs differ and it is inexact.
          Wide q = x / y;
          if (q * y != x && ((x < 0) != (y < 0))) q -= 1;
          v = checked(q);
        }
        break;
    }
    return {"(" + a.text + " " + op + " " + b.text + ")", v, false};
  }

  Ref boolean(int depth) {
    const int kind = depth <= 0 ? 0 : static_cast<int>(rng_() % 5);
    if (kind == 0 || kind == 1) {
      Ref a = integer(depth - 1);
      Ref b = integer(depth - 1);
      const char* ops[] = {"<", "<=", ">", ">=", "==", "!="};
      const int o = static_cast<int>(rng_() % 6);
      std::optional<Wide> v;
      if (a.value && b.value) {
        const Wide x = *a.value, y = *b.value;
        const bool r[] = {x<y, x <= y, x> y, x >= y, x == y, x != y};
        v = r[o] ? 1 : 0;
      }
      const bool call = rng_() % 2 == 0;
      const char* names[] = {"Lt", "Le", "Gt", "Ge", "Eq", "Ne"};
      std::string text = call ? std::string(names[o]) + "(" + a.text + ", " + b.text + ")"
                              : "(" + a.text + " " + ops[o] + " " + b.text + ")";
      return {text, v, true};
    }
    if (kind == 2) {
      Ref a = boolean(depth - 1);
      return {"(~" + a.text + ")", a.value ? std::optional<Wide>(*a.value == 0 ? 1 : 0) : std::nullopt, true};
    }
    // And / Or: a deciding operand wins over errors, else an error wins.
    const bool is_and = kind == 3;
    const int n = 2 + static_cast<int>(rng_() % 2);
    std::string text = "(";
    bool decided = false, err = false;
    for (int k = 0; k < n; ++k) {
      Ref a = boolean(depth - 1);
      text += (k ? (is_and ? " & " : " | ") : "") + a.text;
      if (!a.value) {
        err = true;
      } else if ((*a.value != 0) != is_and) {
        decided = true;
      }
    }
    std::optional<Wide> v;
    if (decided) {
      v = is_and ? 0 : 1;
    } else if (!err) {
      v = is_and ? 1 : 0;
    }
    return {text + ")", v, true};
  }

 private:
  std::mt19937_64 rng_;
  std::vector<int64_t> values_;
};

TEST(GuardProperty, RandomExpressionsMatchTheReference) {
  std::mt19937_64 rng(7);
  size_t values_compared = 0, errors_compared = 0;
  for (int round = 0; round < 4000; ++round) {
    std::vector<int64_t> values;
    const int64_t picks[] = {0, 1, 2, 3, 5, 8, 64, -1, -7, k_max, k_min, 1LL << 40};
    for (int i = 0; i < 3; ++i) values.push_back(picks[rng() % std::size(picks)]);
    RandomExpr gen(rng(), values);
    const bool want_bool = round % 2 == 0;
    Ref ref = want_bool ? gen.boolean(4) : gen.integer(4);
    Result<GuardExpr> g = want_bool ? parse_guard(ref.text) : parse_guard_int(ref.text);
    ASSERT_TRUE(g.ok()) << ref.text << ": " << g.status().to_string();
    Result<GuardExpr> again = want_bool ? parse_guard(to_string(g.value())) : parse_guard_int(to_string(g.value()));
    ASSERT_TRUE(again.ok()) << to_string(g.value());
    EXPECT_EQ(again.value(), g.value()) << ref.text << " -> " << to_string(g.value());
    std::optional<Wide> got;
    if (want_bool) {
      Result<bool> r = evaluate_guard(g.value(), values);
      if (r.ok()) got = r.value() ? 1 : 0;
    } else {
      Result<int64_t> r = evaluate_guard_int(g.value(), values);
      if (r.ok()) got = r.value();
    }
    ASSERT_EQ(got.has_value(), ref.value.has_value())
        << ref.text << " with s = " << values[0] << ", " << values[1] << ", " << values[2];
    if (got) {
      ASSERT_TRUE(*got == *ref.value) << ref.text << ": " << static_cast<int64_t>(*got) << " vs "
                                      << static_cast<int64_t>(*ref.value);
      ++values_compared;
    } else {
      ++errors_compared;
    }
  }
  EXPECT_GT(values_compared, 1000u);
  EXPECT_GT(errors_compared, 100u);
}

}  // namespace
}  // namespace aotcache
