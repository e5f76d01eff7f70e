// Recursive-descent parser of guard text (docs/formats/guard-format.md): Python's operator precedence, sympy's function
// forms, size symbols s<i> only. Bounded in text length, nesting, nodes and tree height.
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "aotcache/guard.h"
#include "guard/guard_builder.h"

namespace aotcache {
namespace {

using internal::GuardBuilder;
using internal::GuardType;

enum class Tok : uint8_t {
  kEnd,
  kInt,
  kName,
  kLParen,
  kRParen,
  kComma,
  kPlus,
  kMinus,
  kStar,
  kSlash,
  kSlashSlash,
  kPercent,
  kStarStar,
  kLt,
  kLe,
  kGt,
  kGe,
  kEqEq,
  kNe,
  kAmp,
  kPipe,
  kTilde,
};

struct Token {
  Tok kind = Tok::kEnd;
  size_t offset = 0;
  std::string_view text;
  uint64_t value = 0;  // kInt: the literal, at most 2**63
};

constexpr uint64_t k_int64_min_magnitude = uint64_t{1} << 63;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Functions torch defines or sympy prints that aotcache deliberately does not evaluate (floats, piecewise).
constexpr std::array<std::string_view, 26> k_unsupported_functions = {"Piecewise",
                                                                      "ITE",
                                                                      "FloatTrueDiv",
                                                                      "ToFloat",
                                                                      "TruncToFloat",
                                                                      "TruncToInt",
                                                                      "FloorToInt",
                                                                      "CeilToInt",
                                                                      "RoundToInt",
                                                                      "RoundDecimal",
                                                                      "FloatPow",
                                                                      "FloorToFloat",
                                                                      "floor",
                                                                      "ceiling",
                                                                      "sqrt",
                                                                      "log",
                                                                      "exp",
                                                                      "Float",
                                                                      "Rational",
                                                                      "Xor",
                                                                      "LShift",
                                                                      "RShift",
                                                                      "ModularIndexing",
                                                                      "IsNonOverlappingAndDenseIndicator",
                                                                      "BitwiseFn_bitwise_and",
                                                                      "BitwiseFn_bitwise_or"};

struct FunctionForm {
  std::string_view name;
  GuardOp op;
};
constexpr std::array<FunctionForm, 17> k_functions = {{
    {"Eq", GuardOp::kEq},
    {"Ne", GuardOp::kNe},
    {"Lt", GuardOp::kLt},
    {"Le", GuardOp::kLe},
    {"Gt", GuardOp::kGt},
    {"Ge", GuardOp::kGe},
    {"Mod", GuardOp::kMod},
    {"PythonMod", GuardOp::kMod},
    {"FloorDiv", GuardOp::kFloorDiv},
    {"CleanDiv", GuardOp::kFloorDiv},
    {"IntTrueDiv", GuardOp::kIntTrueDiv},
    {"PowByNatural", GuardOp::kPow},
    {"Min", GuardOp::kMin},
    {"Max", GuardOp::kMax},
    {"Abs", GuardOp::kAbs},
    {"And", GuardOp::kAnd},
    {"Or", GuardOp::kOr},
}};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<GuardExpr> parse(GuardType want) {
    if (text_.size() > k_guard_max_text_bytes) {
      return Status::invalid_argument("guard text of " + std::to_string(text_.size()) + " bytes exceeds the limit of " +
                                      std::to_string(k_guard_max_text_bytes));
    }
    AOTCACHE_RETURN_IF_ERROR(advance());
    if (tok_.kind == Tok::kEnd) return error(StatusCode::kInvalidArgument, "empty guard");
    AOTCACHE_RETURN_IF_ERROR(parse_comparison());
    if (tok_.kind != Tok::kEnd) return error(StatusCode::kInvalidArgument, "unexpected " + describe(tok_));
    if (b_.type_of_last() != want) {
      return error(StatusCode::kInvalidArgument, want == GuardType::kBool
                                                     ? "guard is an integer expression, not a condition"
                                                     : "expression is a condition, not an integer");
    }
    return std::move(b_).finish();
  }

 private:
  Status error(StatusCode code, const std::string& message) const {
    return Status(code, "guard parse error at offset " + std::to_string(tok_.offset) + ": " + message);
  }
  // A builder error (types, arity, limits) located at `offset`.
  Status located(Status s, size_t offset) const {
    if (s.ok()) return s;
    return Status(s.code(), "guard parse error at offset " + std::to_string(offset) + ": " + s.message());
  }

  static std::string describe(const Token& t) {
    if (t.kind == Tok::kEnd) return "end of text";
    return "'" + std::string(t.text) + "'";
  }

  Status advance() {
    size_t i = pos_;
    while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r')) ++i;
    tok_ = Token{};
    tok_.offset = i;
    if (i >= text_.size()) {
      pos_ = i;
      return Status::ok_status();
    }
    const char c = text_[i];
    auto two = [&](char next) { return i + 1 < text_.size() && text_[i + 1] == next; };
    size_t len = 1;
    if (is_digit(c)) {
      uint64_t v = 0;
      size_t j = i;
      bool too_big = false;
      for (; j < text_.size() && is_digit(text_[j]); ++j) {
        const uint64_t d = static_cast<uint64_t>(text_[j] - '0');
        if (v > (k_int64_min_magnitude - d) / 10) too_big = true;
        if (!too_big) v = v * 10 + d;
      }
      tok_.text = text_.substr(i, j - i);
      if (j < text_.size() && (text_[j] == '.' || text_[j] == 'e' || text_[j] == 'E')) {
        return error(StatusCode::kUnsupported, "float literal at '" + std::string(tok_.text) + text_[j] +
                                                   "...' is not supported (guards are integer conditions)");
      }
      if (j < text_.size() && is_name_char(text_[j])) {
        return error(StatusCode::kInvalidArgument, "malformed number '" + std::string(tok_.text) + text_[j] + "'");
      }
      if (too_big) {
        return error(StatusCode::kInvalidArgument,
                     "integer literal " + std::string(tok_.text.substr(0, 40)) + " does not fit in 64 bits");
      }
      tok_.kind = Tok::kInt;
      tok_.value = v;
      pos_ = j;
      return Status::ok_status();
    }
    if (is_name_start(c)) {
      size_t j = i;
      while (j < text_.size() && is_name_char(text_[j])) ++j;
      tok_.kind = Tok::kName;
      tok_.text = text_.substr(i, j - i);
      pos_ = j;
      return Status::ok_status();
    }
    switch (c) {
      case '(': tok_.kind = Tok::kLParen; break;
      case ')': tok_.kind = Tok::kRParen; break;
      case ',': tok_.kind = Tok::kComma; break;
      case '+': tok_.kind = Tok::kPlus; break;
      case '-': tok_.kind = Tok::kMinus; break;
      case '%': tok_.kind = Tok::kPercent; break;
      case '&': tok_.kind = Tok::kAmp; break;
      case '|': tok_.kind = Tok::kPipe; break;
      case '~': tok_.kind = Tok::kTilde; break;
      case '*':
        tok_.kind = two('*') ? Tok::kStarStar : Tok::kStar;
        len = two('*') ? 2 : 1;
        break;
      case '/':
        tok_.kind = two('/') ? Tok::kSlashSlash : Tok::kSlash;
        len = two('/') ? 2 : 1;
        break;
      case '<':
        tok_.kind = two('=') ? Tok::kLe : Tok::kLt;
        len = two('=') ? 2 : 1;
        break;
      case '>':
        tok_.kind = two('=') ? Tok::kGe : Tok::kGt;
        len = two('=') ? 2 : 1;
        break;
      case '=':
        if (!two('=')) return error(StatusCode::kInvalidArgument, "'=' is not an operator (use == or Eq)");
        tok_.kind = Tok::kEqEq;
        len = 2;
        break;
      case '!':
        if (!two('=')) return error(StatusCode::kInvalidArgument, "'!' is not an operator (use != or Ne)");
        tok_.kind = Tok::kNe;
        len = 2;
        break;
      default: {
        const unsigned char u = static_cast<unsigned char>(c);
        std::string shown = (u >= 0x20 && u < 0x7f) ? std::string(1, c) : "\\x" + hex_byte(u);
        return error(StatusCode::kInvalidArgument, "unexpected character '" + shown + "'");
      }
    }
    tok_.text = text_.substr(i, len);
    pos_ = i + len;
    return Status::ok_status();
  }

  static std::string hex_byte(unsigned char u) {
    const char* digits = "0123456789abcdef";
    return {digits[u >> 4], digits[u & 15]};
  }

  Status expect(Tok kind, const char* what) {
    if (tok_.kind != kind)
      return error(StatusCode::kInvalidArgument, std::string("expected ") + what + ", got " + describe(tok_));
    return advance();
  }

  // Nesting guard of parse_unary, which every recursion (parentheses, call arguments, unary operators) enters.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) { ++p_.depth_; }
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    bool too_deep() const { return p_.depth_ > k_guard_max_nesting; }

   private:
    Parser& p_;
  };

  static bool comparison_op(Tok t, GuardOp* op) {
    switch (t) {
      case Tok::kLt: *op = GuardOp::kLt; return true;
      case Tok::kLe: *op = GuardOp::kLe; return true;
      case Tok::kGt: *op = GuardOp::kGt; return true;
      case Tok::kGe: *op = GuardOp::kGe; return true;
      case Tok::kEqEq: *op = GuardOp::kEq; return true;
      case Tok::kNe: *op = GuardOp::kNe; return true;
      default: return false;
    }
  }

  // comparison := bitor [ compop bitor ]
  Status parse_comparison() {
    AOTCACHE_RETURN_IF_ERROR(parse_bitor());
    GuardOp op;
    if (!comparison_op(tok_.kind, &op)) return Status::ok_status();
    const size_t at = tok_.offset;
    AOTCACHE_RETURN_IF_ERROR(advance());
    AOTCACHE_RETURN_IF_ERROR(parse_bitor());
    AOTCACHE_RETURN_IF_ERROR(located(b_.add_op(op, 2), at));
    if (comparison_op(tok_.kind, &op)) {
      return error(StatusCode::kInvalidArgument, "chained comparison is not supported (use &)");
    }
    return Status::ok_status();
  }

  // bitor := bitand { '|' bitand }, one n-ary Or.
  Status parse_bitor() {
    AOTCACHE_RETURN_IF_ERROR(parse_bitand());
    uint32_t n = 1;
    const size_t at = tok_.offset;
    while (tok_.kind == Tok::kPipe) {
      AOTCACHE_RETURN_IF_ERROR(advance());
      AOTCACHE_RETURN_IF_ERROR(parse_bitand());
      ++n;
    }
    if (n > 1) AOTCACHE_RETURN_IF_ERROR(located(b_.add_op(GuardOp::kOr, n), at));
    return Status::ok_status();
  }

  // bitand := sum { '&' sum }, one n-ary And.
  Status parse_bitand() {
    AOTCACHE_RETURN_IF_ERROR(parse_sum());
    uint32_t n = 1;
    const size_t at = tok_.offset;
    while (tok_.kind == Tok::kAmp) {
      AOTCACHE_RETURN_IF_ERROR(advance());
      AOTCACHE_RETURN_IF_ERROR(parse_sum());
      ++n;
    }
    if (n > 1) AOTCACHE_RETURN_IF_ERROR(located(b_.add_op(GuardOp::kAnd, n), at));
    return Status::ok_status();
  }

  // sum := term { ('+' | '-') term }
  Status parse_sum() {
    AOTCACHE_RETURN_IF_ERROR(parse_term());
    while (tok_.kind == Tok::kPlus || tok_.kind == Tok::kMinus) {
      const GuardOp op = tok_.kind == Tok::kPlus ? GuardOp::kAdd : GuardOp::kSub;
      const size_t at = tok_.offset;
      AOTCACHE_RETURN_IF_ERROR(advance());
      AOTCACHE_RETURN_IF_ERROR(parse_term());
      AOTCACHE_RETURN_IF_ERROR(located(b_.add_op(op, 2), at));
    }
    return Status::ok_status();
  }

  // term := unary { ('*' | '//' | '%') unary }
  Status parse_term() {
    AOTCACHE_RETURN_IF_ERROR(parse_unary());
    for (;;) {
      GuardOp op;
      switch (tok_.kind) {
        case Tok::kStar: op = GuardOp::kMul; break;
        case Tok::kSlashSlash: op = GuardOp::kFloorDiv; break;
        case Tok::kPercent: op = GuardOp::kMod; break;
        case Tok::kSlash:
          return error(StatusCode::kUnsupported, "true division '/' is not supported (rational or float result)");
        default: return Status::ok_status();
      }
      const size_t at = tok_.offset;
      AOTCACHE_RETURN_IF_ERROR(advance());
      AOTCACHE_RETURN_IF_ERROR(parse_unary());
      AOTCACHE_RETURN_IF_ERROR(located(b_.add_op(op, 2), at));
    }
  }

  // unary := ('-' | '~') unary | power
  Status parse_unary() {
    Nest nest(*this);
    if (nest.too_deep()) {
      return error(StatusCode::kInvalidArgument,
                   "guard nests deeper than " + std::to_string(k_guard_max_nesting) + " levels");
    }
    if (tok_.kind == Tok::kMinus || tok_.kind == Tok::kTilde) {
      const GuardOp op = tok_.kind == Tok::kMinus ? GuardOp::kNeg : GuardOp::kNot;
      const size_t at = tok_.offset;
      AOTCACHE_RETURN_IF_ERROR(advance());
      // -9223372036854775808: the one literal whose magnitude only fits negated.
      if (op == GuardOp::kNeg && tok_.kind == Tok::kInt && tok_.value == k_int64_min_magnitude) {
        const Token literal = tok_;
        AOTCACHE_RETURN_IF_ERROR(advance());
        if (tok_.kind == Tok::kStarStar) {
          return located(Status::invalid_argument("integer literal 9223372036854775808 does not fit in 64 bits"),
                         literal.offset);
        }
        return located(b_.add_int(std::numeric_limits<int64_t>::min()), literal.offset);
      }
      AOTCACHE_RETURN_IF_ERROR(parse_unary());
      return located(b_.add_op(op, 1), at);
    }
    return parse_power();
  }

  // power := atom [ '**' unary ]
  Status parse_power() {
    AOTCACHE_RETURN_IF_ERROR(parse_atom());
    if (tok_.kind != Tok::kStarStar) return Status::ok_status();
    const size_t at = tok_.offset;
    AOTCACHE_RETURN_IF_ERROR(advance());
    AOTCACHE_RETURN_IF_ERROR(parse_unary());
    return located(b_.add_op(GuardOp::kPow, 2), at);
  }

  // atom := INT | 'True' | 'False' | SYMBOL | NAME '(' args ')' | '(' comparison ')'
  Status parse_atom() {
    const Token t = tok_;
    switch (t.kind) {
      case Tok::kInt:
        if (t.value == k_int64_min_magnitude) {
          return error(StatusCode::kInvalidArgument, "integer literal 9223372036854775808 does not fit in 64 bits");
        }
        AOTCACHE_RETURN_IF_ERROR(advance());
        return located(b_.add_int(static_cast<int64_t>(t.value)), t.offset);
      case Tok::kLParen: {  // nesting is counted where the operand inside starts (parse_unary)
        AOTCACHE_RETURN_IF_ERROR(advance());
        AOTCACHE_RETURN_IF_ERROR(parse_comparison());
        return expect(Tok::kRParen, "')'");
      }
      case Tok::kName: return parse_name();
      default: return error(StatusCode::kInvalidArgument, "expected an operand, got " + describe(t));
    }
  }

  Status parse_name() {
    const Token t = tok_;
    AOTCACHE_RETURN_IF_ERROR(advance());
    const std::string name(t.text);
    if (tok_.kind == Tok::kLParen) return parse_call(t);
    if (name == "True" || name == "False") return located(b_.add_bool(name == "True"), t.offset);
    const bool indexed =
        name.size() >= 2 && is_digit(name[1]) && name.find_first_not_of("0123456789", 1) == std::string::npos;
    if (indexed && name[0] == 's') {
      if (name.size() > 2 && name[1] == '0') {
        return located(Status::invalid_argument("symbol '" + name + "' is not canonical (s0, s1, ...)"), t.offset);
      }
      if (name.size() > 8) {
        return located(Status::invalid_argument("symbol '" + name + "' is beyond the limit s" +
                                                std::to_string(k_guard_max_symbol - 1)),
                       t.offset);
      }
      return located(b_.add_symbol(static_cast<uint32_t>(std::stoul(name.substr(1)))), t.offset);
    }
    if (indexed && name[0] == 'u') {
      return located(Status::unsupported("unbacked symbol '" + name + "' is not supported (data-dependent size)"),
                     t.offset);
    }
    return located(Status::invalid_argument("unknown identifier '" + name.substr(0, 64) +
                                            "' (only size symbols s0, s1, ..., True and False)"),
                   t.offset);
  }

  // NAME '(' [ comparison { ',' comparison } ] ')'
  Status parse_call(const Token& name_tok) {
    const std::string_view name = name_tok.text;
    std::optional<GuardOp> op;
    bool identity = false;
    bool is_not = false;
    for (const FunctionForm& f : k_functions) {
      if (f.name == name) op = f.op;
    }
    if (name == "Identity") identity = true;
    if (name == "Not") is_not = true;
    if (!op && !identity && !is_not) {
      bool unsupported = name.substr(0, 14) == "OpaqueUnaryFn_";
      for (std::string_view u : k_unsupported_functions) unsupported = unsupported || u == name;
      if (unsupported) {
        return located(Status::unsupported("function '" + std::string(name) + "' is not supported"), name_tok.offset);
      }
      return located(Status::invalid_argument("unknown function '" + std::string(name.substr(0, 64)) + "'"),
                     name_tok.offset);
    }
    AOTCACHE_RETURN_IF_ERROR(advance());  // '('
    uint32_t n = 0;
    if (tok_.kind != Tok::kRParen) {
      for (;;) {
        AOTCACHE_RETURN_IF_ERROR(parse_comparison());
        ++n;
        if (tok_.kind != Tok::kComma) break;
        AOTCACHE_RETURN_IF_ERROR(advance());
      }
    }
    AOTCACHE_RETURN_IF_ERROR(expect(Tok::kRParen, "',' or ')'"));
    if (identity) {
      if (n != 1) return located(Status::invalid_argument("Identity takes 1 argument(s)"), name_tok.offset);
      return Status::ok_status();
    }
    return located(b_.add_op(is_not ? GuardOp::kNot : *op, n), name_tok.offset);
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  Token tok_;
  GuardBuilder b_;
};

}  // namespace

Result<GuardExpr> parse_guard(std::string_view text) {
  return Parser(text).parse(GuardType::kBool);
}

Result<GuardExpr> parse_guard_int(std::string_view text) {
  return Parser(text).parse(GuardType::kInt);
}

}  // namespace aotcache
