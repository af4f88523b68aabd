// A small recursive-descent reader for affine expressions, conditions and
// templates. Texts are short (a name, a slice bound), so clarity wins.
#include "engine/format/compact/compact_expr.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace shardproof::compact {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw ExprError{"compact-expr", message};
}

int64_t checked(int64_t v, std::string_view text) {
  if (v > kMaxMagnitude || v < -kMaxMagnitude)
    fail("\"" + std::string(text) + "\": a value beyond 2^40 (a constant or coefficient)");
  return v;
}

// Operands within 2^40 keep sums exact; a product may not fit in int64 at
// all, so it is checked before it can wrap.
int64_t checked_product(int64_t a, int64_t b, std::string_view text) {
  int64_t v;
  if (__builtin_mul_overflow(a, b, &v)) return checked(kMaxMagnitude + 1, text);
  return checked(v, text);
}

// The text as quoted in a message: a hostile one is cut short.
std::string shown(std::string_view text) {
  return text.size() <= 80 ? std::string(text) : std::string(text.substr(0, 80)) + "...";
}

void check_length(std::string_view text) {
  if (text.size() > kMaxExprLength)
    fail("\"" + shown(text) + "\": longer than " + std::to_string(kMaxExprLength) +
         " characters (the limit of an expression, condition or template)");
}

class Parser {
 public:
  Parser(std::string_view text, AxisMask declared) : text_(text), declared_(declared) {
    check_length(text);
  }

  Affine expr() {
    Affine a = term();
    while (true) {
      skip();
      if (eat('+')) {
        add(a, term(), 1);
      } else if (peek() == '-') {
        ++pos_;
        add(a, term(), -1);
      } else {
        return a;
      }
    }
  }

  // At the end of the text (after blanks)?
  bool done() {
    skip();
    return pos_ >= text_.size();
  }
  size_t pos() const { return pos_; }
  std::string_view rest() const { return text_.substr(pos_); }
  void skip() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat(std::string_view s) {
    skip();
    if (text_.substr(pos_, s.size()) == s) {
      pos_ += s.size();
      return true;
    }
    return false;
  }
  [[noreturn]] void unexpected(const char* wanted) {
    std::string found = pos_ < text_.size() ? "\"" + std::string(text_.substr(pos_)) + "\""
                                            : std::string("the end");
    fail("\"" + std::string(text_) + "\": expected " + wanted + " at " + found);
  }

 private:
  char peek() {
    skip();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void add(Affine& a, const Affine& b, int sign) {
    a.constant = checked(a.constant + sign * b.constant, text_);
    for (int i = 0; i < kAxisCount; ++i) a.coef[i] = checked(a.coef[i] + sign * b.coef[i], text_);
  }

  Affine term() {
    Affine a = factor();
    while (eat('*')) {
      Affine b = factor();
      if (!a.is_constant() && !b.is_constant())
        fail("\"" + std::string(text_) +
             "\": a product of two coordinate terms is not affine (one factor must be a constant)");
      if (a.is_constant()) std::swap(a, b);
      int64_t k = b.constant;  // a * k
      a.constant = checked_product(a.constant, k, text_);
      for (int64_t& c : a.coef) c = checked_product(c, k, text_);
    }
    return a;
  }

  // Counts the nesting of parentheses and signs while a factor is read.
  struct Deeper {
    Parser& p;
    explicit Deeper(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxExprDepth)
        fail("\"" + shown(p.text_) + "\": nested deeper than " + std::to_string(kMaxExprDepth) +
             " parentheses or signs");
    }
    ~Deeper() { --p.depth_; }
  };

  Affine factor() {
    skip();
    Deeper deeper(*this);
    Affine a;
    char c = peek();
    if (c == '(') {
      ++pos_;
      a = expr();
      if (!eat(')')) unexpected("\")\"");
      return a;
    }
    if (c == '-') {
      ++pos_;
      a = factor();
      a.constant = -a.constant;
      for (int64_t& k : a.coef) k = -k;
      return a;
    }
    if (c >= '0' && c <= '9') {
      size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      std::string_view digits = text_.substr(start, pos_ - start);
      if (digits.size() > 13) fail("\"" + std::string(text_) + "\": a value beyond 2^40");
      int64_t v = 0;
      std::from_chars(digits.data(), digits.data() + digits.size(), v);
      a.constant = checked(v, text_);
      return a;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      std::string_view name = text_.substr(start, pos_ - start);
      std::optional<int> axis = axis_by_name(name);
      if (!axis || !(declared_ & (1u << *axis)))
        throw ExprError{"compact-axis", "\"" + std::string(text_) + "\": \"" + std::string(name) +
                                            "\" is not an axis of the mesh"};
      a.coef[*axis] = 1;
      return a;
    }
    unexpected("a number, an axis or \"(\"");
  }

  std::string_view text_;
  AxisMask declared_;
  size_t pos_ = 0;
  int depth_ = 0;
};

AxisMask mask_of(const Affine& a) {
  AxisMask m = 0;
  for (int i = 0; i < kAxisCount; ++i)
    if (a.coef[i] != 0) m |= 1u << i;
  return m;
}

}  // namespace

std::optional<int> axis_by_name(std::string_view name) {
  for (int i = 0; i < kAxisCount; ++i)
    if (kAxisNames[i] == name) return i;
  return std::nullopt;
}

AxisMask Affine::mask() const {
  return mask_of(*this);
}

Affine parse_affine(std::string_view text, AxisMask declared) {
  Parser p(text, declared);
  if (p.done()) fail("an empty expression");
  Affine a = p.expr();
  if (!p.done()) p.unexpected("\"+\", \"-\", \"*\" or the end of the expression");
  return a;
}

bool Comparison::holds(const Coord& c) const {
  int64_t v = diff.eval(c);
  switch (op) {
    case Op::Eq:
      return v == 0;
    case Op::Lt:
      return v < 0;
    case Op::Le:
      return v <= 0;
    case Op::Gt:
      return v > 0;
    case Op::Ge:
      return v >= 0;
  }
  return false;
}

AxisMask Condition::mask() const {
  AxisMask m = 0;
  for (const Comparison& k : all) m |= k.diff.mask();
  return m;
}

Condition parse_condition(std::string_view text, AxisMask declared) {
  Parser p(text, declared);
  Condition cond;
  do {
    Affine lhs = p.expr();
    Comparison k;
    // Longest operators first: "<=" before "<".
    if (p.eat("=="))
      k.op = Comparison::Op::Eq;
    else if (p.eat("<="))
      k.op = Comparison::Op::Le;
    else if (p.eat(">="))
      k.op = Comparison::Op::Ge;
    else if (p.eat("<"))
      k.op = Comparison::Op::Lt;
    else if (p.eat(">"))
      k.op = Comparison::Op::Gt;
    else
      p.unexpected("a comparison (==, <, <=, >, >=; there is no != and no ||)");
    Affine rhs = p.expr();
    // Within 2^40 like every other coefficient: evaluation then fits int64.
    k.diff = lhs;
    k.diff.constant = checked(lhs.constant - rhs.constant, text);
    for (int i = 0; i < kAxisCount; ++i) k.diff.coef[i] = checked(lhs.coef[i] - rhs.coef[i], text);
    cond.all.push_back(k);
  } while (p.eat("&&"));
  if (!p.done()) p.unexpected("\"&&\" or the end of the condition");
  return cond;
}

void Template::append(const Coord& c, std::string& out) const {
  char buf[24];
  for (size_t i = 0; i < exprs.size(); ++i) {
    out += literals[i];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, exprs[i].eval(c));
    out.append(buf, end);
  }
  out += literals.back();
}

AxisMask Template::mask() const {
  AxisMask m = 0;
  for (const Affine& a : exprs) m |= a.mask();
  return m;
}

Template parse_template(std::string_view text, AxisMask declared) {
  check_length(text);
  Template t;
  std::string lit;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '}') fail("\"" + std::string(text) + "\": a \"}\" without its \"{\"");
    if (c != '{') {
      lit += c;
      continue;
    }
    size_t close = text.find('}', i + 1);
    if (close == std::string_view::npos)
      fail("\"" + std::string(text) + "\": a \"{\" without its \"}\"");
    std::string_view inner = text.substr(i + 1, close - i - 1);
    if (inner.find('{') != std::string_view::npos)
      fail("\"" + std::string(text) + "\": braces do not nest");
    try {
      t.exprs.push_back(parse_affine(inner, declared));
    } catch (ExprError& e) {
      e.message = "in template \"" + std::string(text) + "\": " + e.message;
      throw;
    }
    t.literals.push_back(std::move(lit));
    lit.clear();
    i = close;
  }
  t.literals.push_back(std::move(lit));
  return t;
}

}  // namespace shardproof::compact
