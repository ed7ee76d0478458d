// Lexer and recursive-descent parser for the Jinja subset chat templates use. The whitespace rules and the
// operator precedence follow jinja2 3.1 as transformers configures it (trim_blocks, lstrip_blocks), because
// one newline more or less changes the prompt's tokens.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja.h"
#include "text/jinja_ast.h"

namespace qwen3::jinja {
namespace {

// Nesting of expressions and blocks; real templates stay below 20. Bounds the parser's and evaluator's
// recursion.
constexpr int kMaxNesting = 100;

[[noreturn]] void fail(int line, const std::string& message) {
  throw TemplateError("chat template line " + std::to_string(line) + ": " + message);
}

// ---- Lexer
// ---------------------------------------------------------------------------------------------------------

enum class Tok {
  kText,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEnd
};

struct Token {
  Tok kind;
  std::string text;  // text data, name, decoded string literal, operator
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Length in bytes of the Python-whitespace run at the end of `s` (str.rstrip() with no argument).
size_t trailing_space_bytes(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start;
    const auto cps = decode_utf8(s.substr(start, end - start));
    if (cps.size() != 1 || !is_python_space(cps[0])) break;
    end = start;
  }
  return s.size() - end;
}

// Length in bytes of the Python-whitespace run at the start of `s`.
size_t leading_space_bytes(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos + 1;
    while (next < s.size() && (uint8_t(s[next]) & 0xC0) == 0x80) ++next;
    const auto cps = decode_utf8(s.substr(pos, next - pos));
    if (cps.size() != 1 || !is_python_space(cps[0])) break;
    pos = next;
  }
  return pos;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    if (!is_valid_utf8(source)) fail(1, "the template is not valid UTF-8");
    // jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_text(std::string(src_.substr(pos_)));
        advance_to(src_.size());
        break;
      }
      const char opener = src_[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      const bool is_variable = opener == '{';
      size_t raw_body = 0;
      if (opener == '%' && match_raw_begin(after, raw_body)) {
        emit_text(strip_before_tag(src_.substr(pos_, tag - pos_), sign, false));
        advance_to(raw_body);
        lex_raw();
        continue;
      }
      emit_text(strip_before_tag(src_.substr(pos_, tag - pos_), sign, is_variable));
      advance_to(after);
      if (opener == '#') {
        lex_comment();
      } else {
        lex_tag(is_variable);
      }
    }
    tokens_.push_back(Token{Tok::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void advance_to(size_t pos) {
    line_ += int(std::count(src_.begin() + std::ptrdiff_t(pos_), src_.begin() + std::ptrdiff_t(pos), '\n'));
    pos_ = pos;
  }

  // `{%- ` strips all whitespace before the tag; otherwise lstrip_blocks removes the spaces and tabs that
  // open the line of a block or comment tag (not of a `{{ }}`), unless the tag says `{%+`.
  std::string strip_before_tag(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') return std::string(text.substr(0, text.size() - trailing_space_bytes(text)));
    if (sign != '+' && !is_variable) {
      const size_t line_begin = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
      if (line_begin > 0 || line_starting_) {
        const std::string_view tail = text.substr(line_begin);
        if (!tail.empty() && leading_space_bytes(tail) == tail.size())
          return std::string(text.substr(0, line_begin));
      }
    }
    return std::string(text);
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back(Token{Tok::kText, std::move(text), line_});
  }

  // The end of a block or comment tag: `+%}` keeps what follows, `-%}` eats all whitespace after it, and a
  // plain
  // `%}` eats one newline (trim_blocks). Returns the position after it.
  size_t consume_block_end(size_t at) {
    size_t end;
    if (src_[at] == '+') {
      end = at + 3;
    } else if (src_[at] == '-') {
      end = at + 3;
      end += leading_space_bytes(std::string_view(src_).substr(end));
    } else {
      end = at + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;
    }
    line_starting_ = src_[end - 1] == '\n';
    return end;
  }

  bool match_raw_begin(size_t after, size_t& body) const {
    size_t p = after;
    while (p < src_.size() && is_ascii_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_ascii_space(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      p += leading_space_bytes(std::string_view(src_).substr(p));
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    body = p;
    return true;
  }

  void lex_raw() {
    for (size_t i = src_.find("{%", pos_); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      while (p < src_.size() && is_ascii_space(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && is_ascii_space(src_[p])) ++p;
      if (!(src_.compare(p, 3, "+%}") == 0 || src_.compare(p, 3, "-%}") == 0 ||
            src_.compare(p, 2, "%}") == 0))
        continue;
      emit_text(strip_before_tag(std::string_view(src_).substr(pos_, i - pos_), sign, false));
      advance_to(consume_block_end(p));
      return;
    }
    fail(line_, "missing end of raw directive");
  }

  void lex_comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail(line_, "missing end of comment tag");
    size_t at = close;
    if (close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+')) at = close - 1;
    advance_to(consume_block_end(at));
  }

  void lex_tag(bool is_variable) {
    tokens_.push_back(Token{is_variable ? Tok::kVarBegin : Tok::kBlockBegin, "", line_});
    std::vector<char> open_brackets;
    while (true) {
      while (pos_ < src_.size() && is_ascii_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size())
        fail(line_, std::string("unexpected end of template, expected the end of the ") +
                        (is_variable ? "'{{ }}' expression" : "'{% %}' statement"));
      if (open_brackets.empty()) {
        const std::string_view rest = std::string_view(src_).substr(pos_);
        if (is_variable) {
          if (rest.substr(0, 3) == "-}}") {
            size_t end = pos_ + 3;
            end += leading_space_bytes(rest.substr(3));
            line_starting_ = src_[end - 1] == '\n';
            tokens_.push_back(Token{Tok::kVarEnd, "", line_});
            advance_to(end);
            return;
          }
          if (rest.substr(0, 2) == "}}") {
            line_starting_ = false;
            tokens_.push_back(Token{Tok::kVarEnd, "", line_});
            advance_to(pos_ + 2);
            return;
          }
        } else if (rest.substr(0, 3) == "+%}" || rest.substr(0, 3) == "-%}" || rest.substr(0, 2) == "%}") {
          tokens_.push_back(Token{Tok::kBlockEnd, "", line_});
          advance_to(consume_block_end(pos_));
          return;
        }
      }
      lex_token(open_brackets);
    }
  }

  void lex_token(std::vector<char>& open_brackets) {
    const char c = src_[pos_];
    if (is_digit(c)) return lex_number();
    if (is_name_start(c)) {
      size_t end = pos_;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back(Token{Tok::kName, src_.substr(pos_, end - pos_), line_});
      advance_to(end);
      return;
    }
    if (c == '\'' || c == '"') return lex_string();
    static const char* kTwoCharOps[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoCharOps) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Token{Tok::kOperator, op, line_});
        advance_to(pos_ + 2);
        return;
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      fail(line_, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') open_brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (open_brackets.empty()) fail(line_, std::string("unexpected '") + c + "'");
      if (open_brackets.back() != c)
        fail(line_, std::string("unexpected '") + c + "', expected '" + open_brackets.back() + "'");
      open_brackets.pop_back();
    }
    tokens_.push_back(Token{Tok::kOperator, std::string(1, c), line_});
    advance_to(pos_ + 1);
  }

  // Digits with single underscores between them, as Python and jinja accept (1_000).
  size_t digit_run(size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return p;
    while (p < src_.size()) {
      if (is_digit(src_[p])) {
        ++p;
      } else if (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])) {
        ++p;
      } else {
        break;
      }
    }
    return p;
  }

  void lex_number() {
    const size_t start = pos_;
    if (src_[start] == '0' && start + 1 < src_.size() && std::strchr("xXoObB", src_[start + 1]) != nullptr) {
      const char kind = char(src_[start + 1] | 0x20);
      const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      size_t end = start + 2;
      std::string digits;
      for (; end < src_.size() && (std::isxdigit(uint8_t(src_[end])) || src_[end] == '_'); ++end)
        if (src_[end] != '_') digits.push_back(src_[end]);
      push_integer(src_.substr(start, end - start), digits, base);
      advance_to(end);
      return;
    }
    // jinja reads `x.0.1` as x[0][1]: no float right after a dot.
    const bool after_dot =
        !tokens_.empty() && tokens_.back().kind == Tok::kOperator && tokens_.back().text == ".";
    size_t end = digit_run(start);
    bool is_float = false;
    if (!after_dot) {
      size_t p = end;
      if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
        p = digit_run(p + 1);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && is_digit(src_[q])) {
          p = digit_run(q);
          is_float = true;
        }
      }
      if (is_float) end = p;
    }
    std::string digits;
    for (size_t i = start; i < end; ++i)
      if (src_[i] != '_') digits.push_back(src_[i]);
    if (is_float) {
      Token token{Tok::kFloat, src_.substr(start, end - start), line_};
      token.float_value = std::strtod(digits.c_str(), nullptr);
      tokens_.push_back(std::move(token));
    } else {
      // Python rejects 012; jinja lexes it as 0 followed by 12, a syntax error either way.
      if (digits.size() > 1 && digits[0] == '0' && digits.find_first_not_of('0') != std::string::npos)
        fail(line_, "invalid integer literal '" + digits + "'");
      push_integer(src_.substr(start, end - start), digits, 10);
    }
    advance_to(end);
  }

  void push_integer(std::string text, const std::string& digits, int base) {
    Token token{Tok::kInteger, std::move(text), line_};
    const auto [ptr, ec] =
        std::from_chars(digits.data(), digits.data() + digits.size(), token.int_value, base);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size())
      fail(line_, "integer literal '" + token.text + "' is invalid or out of range");
    tokens_.push_back(std::move(token));
  }

  void lex_string() {
    const char quote = src_[pos_];
    std::string value;
    size_t p = pos_ + 1;
    while (true) {
      if (p >= src_.size()) fail(line_, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail(line_, "unterminated string literal");
      p = unescape(p + 1, value);
    }
    tokens_.push_back(Token{Tok::kString, std::move(value), line_});
    advance_to(p + 1);
  }

  // Python's unicode-escape rules for what follows a backslash. Returns the position after the escape.
  size_t unescape(size_t p, std::string& out) const {
    const char c = src_[p];
    auto hex = [&](size_t digits) -> size_t {
      uint32_t cp = 0;
      for (size_t k = 1; k <= digits; ++k) {
        if (p + k >= src_.size() || !std::isxdigit(uint8_t(src_[p + k])))
          fail(line_, "truncated \\" + std::string(1, c) + " escape in string literal");
        cp = cp * 16 + uint32_t(std::isdigit(uint8_t(src_[p + k])) ? src_[p + k] - '0'
                                                                   : (src_[p + k] | 0x20) - 'a' + 10);
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        fail(line_, "invalid code point in string literal");
      append_utf8(out, cp);
      return p + digits + 1;
    };
    switch (c) {
      case '\n':
        return p + 1;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out.push_back(c);
        return p + 1;
      case 'a':
        out.push_back('\a');
        return p + 1;
      case 'b':
        out.push_back('\b');
        return p + 1;
      case 'f':
        out.push_back('\f');
        return p + 1;
      case 'n':
        out.push_back('\n');
        return p + 1;
      case 'r':
        out.push_back('\r');
        return p + 1;
      case 't':
        out.push_back('\t');
        return p + 1;
      case 'v':
        out.push_back('\v');
        return p + 1;
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      case 'N':
        fail(line_, "\\N{...} escapes are not supported");
      default:
        break;
    }
    if (c >= '0' && c <= '7') {
      uint32_t cp = 0;
      size_t k = p;
      while (k < p + 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7')
        cp = cp * 8 + uint32_t(src_[k++] - '0');
      append_utf8(out, cp);
      return k;
    }
    out.push_back('\\');  // Python keeps an unknown escape as written
    return p;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ =
      true;  // the previous match ended a line: lstrip_blocks may strip the next tag's indent
  std::vector<Token> tokens_;
};

// ---- Parser
// --------------------------------------------------------------------------------------------------------

using ExprPtr = std::unique_ptr<Expr>;

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::unique_ptr<Program> parse() {
    auto program = std::make_unique<Program>();
    std::string end_tag;
    program->body = parse_body({}, "", 0, end_tag);
    return program;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) fail(parser.cur().line, "the template is nested too deeply");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool at_name(std::string_view name) const { return cur().kind == Tok::kName && cur().text == name; }
  bool at_op(std::string_view op) const { return cur().kind == Tok::kOperator && cur().text == op; }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::kText:
        return "template text";
      case Tok::kVarBegin:
        return "'{{'";
      case Tok::kVarEnd:
        return "end of print statement";
      case Tok::kBlockBegin:
        return "'{%'";
      case Tok::kBlockEnd:
        return "end of statement block";
      case Tok::kString:
        return "string literal";
      case Tok::kInteger:
      case Tok::kFloat:
        return "number '" + t.text + "'";
      case Tok::kEnd:
        return "end of template";
      default:
        return "'" + t.text + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(cur().line, "expected '" + std::string(op) + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != Tok::kName) fail(cur().line, "expected a name, got " + describe(cur()));
    std::string name = cur().text;
    next();
    return name;
  }
  void expect_block_end() {
    if (cur().kind != Tok::kBlockEnd)
      fail(cur().line, "expected end of statement block, got " + describe(cur()));
    next();
  }

  // Statements until `{% <one of end_tags>`; consumes that tag's `{%` and name and reports which one it was.
  Body parse_body(std::initializer_list<std::string_view> end_tags, const std::string& opener,
                  int opener_line, std::string& end_tag) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.kind) {
        case Tok::kText: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kText;
          s->line = t.line;
          s->text = t.text;
          body.push_back(std::move(s));
          next();
          break;
        }
        case Tok::kVarBegin: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kOutput;
          s->line = t.line;
          next();
          s->expr = parse_tuple(true, false);
          if (cur().kind != Tok::kVarEnd)
            fail(cur().line, "expected end of print statement, got " + describe(cur()));
          next();
          body.push_back(std::move(s));
          break;
        }
        case Tok::kBlockBegin: {
          const Token& name = peek();
          if (name.kind != Tok::kName) fail(name.line, "expected a statement name, got " + describe(name));
          if (std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
            end_tag = name.text;
            next();
            next();
            return body;
          }
          next();
          body.push_back(parse_statement());
          break;
        }
        case Tok::kEnd:
          if (end_tags.size() == 0) return body;
          {
            std::string expected;
            for (std::string_view tag : end_tags)
              expected += (expected.empty() ? "'" : " or '") + std::string(tag) + "'";
            fail(t.line, "unexpected end of template: the '" + opener + "' block opened on line " +
                             std::to_string(opener_line) + " is not closed (expected " + expected + ")");
          }
        default:
          fail(t.line, "unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    const int line = cur().line;
    const std::string tag = expect_name();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    std::string end_tag;
    if (tag == "if") {
      s->kind = StmtKind::kIf;
      while (true) {
        s->conditions.push_back(parse_tuple(false, false));
        expect_block_end();
        s->bodies.push_back(parse_body({"elif", "else", "endif"}, "if", line, end_tag));
        if (end_tag == "elif") continue;
        if (end_tag == "else") {
          expect_block_end();
          s->bodies.push_back(parse_body({"endif"}, "if", line, end_tag));
        }
        expect_block_end();
        return s;
      }
    }
    if (tag == "for") {
      s->kind = StmtKind::kFor;
      s->targets = parse_assign_names("in");
      if (!skip_name("in")) fail(cur().line, "expected 'in', got " + describe(cur()));
      s->expr = parse_tuple(false, false);
      if (skip_name("if")) s->loop_filter = parse_expression();
      if (at_name("recursive")) fail(cur().line, "recursive for loops are not supported");
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"}, "for", line, end_tag);
      --loop_depth_;
      if (end_tag == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, "for", line, end_tag);
      }
      expect_block_end();
      return s;
    }
    if (tag == "set") {
      if (cur().kind == Tok::kName && peek().kind == Tok::kOperator && peek().text == ".") {
        s->targets.push_back(expect_name());
        next();
        s->attribute = expect_name();
      } else {
        s->targets = parse_assign_names("=");
      }
      if (skip_op("=")) {
        s->kind = StmtKind::kSet;
        s->expr = parse_tuple(true, false);
        expect_block_end();
        return s;
      }
      if (s->targets.size() != 1 || !s->attribute.empty())
        fail(line, "a block set assigns exactly one plain name");
      s->kind = StmtKind::kSetBlock;
      while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
      expect_block_end();
      s->body = parse_body({"endset"}, "set", line, end_tag);
      expect_block_end();
      return s;
    }
    if (tag == "macro") {
      s->kind = StmtKind::kMacro;
      s->targets.push_back(expect_name());
      expect_op("(");
      while (!at_op(")")) {
        if (!s->param_names.empty()) expect_op(",");
        if (at_op(")")) break;
        s->param_names.push_back(expect_name());
        if (skip_op("=")) {
          s->param_defaults.push_back(parse_expression());
        } else {
          if (!s->param_defaults.empty() && s->param_defaults.back())
            fail(cur().line, "non-default argument follows default argument");
          s->param_defaults.push_back(nullptr);
        }
      }
      expect_op(")");
      expect_block_end();
      const int saved_loop_depth = loop_depth_;
      loop_depth_ = 0;  // a macro body is not inside the caller's loop
      s->body = parse_body({"endmacro"}, "macro", line, end_tag);
      loop_depth_ = saved_loop_depth;
      expect_block_end();
      return s;
    }
    if (tag == "filter") {
      s->kind = StmtKind::kFilterBlock;
      s->filters.push_back(parse_filter_call(nullptr));
      while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
      expect_block_end();
      s->body = parse_body({"endfilter"}, "filter", line, end_tag);
      expect_block_end();
      return s;
    }
    if (tag == "with" || tag == "generation") {
      // {% generation %} is transformers' marker for assistant-token masks; it renders its body in its own
      // scope.
      s->kind = StmtKind::kWith;
      while (tag == "with" && cur().kind != Tok::kBlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->values.push_back(parse_expression());
      }
      expect_block_end();
      const std::string end_name = "end" + tag;
      s->body = parse_body({end_name}, tag, line, end_tag);
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(line, "'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end();
      return s;
    }
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") fail(line, "unexpected '" + tag + "'");
    static const char* kUnsupported[] = {"call",  "include",    "import", "from",  "extends",
                                         "block", "autoescape", "do",     "trans", "print"};
    for (const char* name : kUnsupported)
      if (tag == name) fail(line, "the '" + tag + "' statement is not supported by this interpreter");
    fail(line, "unknown statement '" + tag + "'");
  }

  // `a` or `a, b` or `(a, b)`: loop and assignment targets.
  std::vector<std::string> parse_assign_names(std::string_view end) {
    std::vector<std::string> names;
    const bool parenthesized = skip_op("(");
    while (true) {
      names.push_back(expect_name());
      if (!skip_op(",")) break;
      if (at_name(end) || at_op(end) || at_op(")")) break;
    }
    if (parenthesized) expect_op(")");
    return names;
  }

  bool is_tuple_end() const {
    return cur().kind == Tok::kVarEnd || cur().kind == Tok::kBlockEnd || at_op(")");
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parentheses) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end()) break;
      items.push_back(with_condexpr ? parse_expression() : parse_or());
      if (at_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail(cur().line, "expected an expression, got " + describe(cur()));
    }
    auto tuple = make_expr(ExprKind::kTuple, line);
    tuple->operands = std::move(items);
    return tuple;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    const int line = cur().line;
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto cond = make_expr(ExprKind::kConditional, line);
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression() : nullptr;
      cond->operands.push_back(std::move(expr));
      cond->operands.push_back(std::move(test));
      cond->operands.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, const std::string& op, ExprPtr left, ExprPtr right) {
    auto e = make_expr(kind, left->line);
    e->name = op;
    e->operands.push_back(std::move(left));
    e->operands.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(ExprKind::kOr, "or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary(ExprKind::kAnd, "and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this);
      auto e = make_expr(ExprKind::kNot, cur().line);
      next();
      e->operands.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> compare;
    while (true) {
      std::string op;
      if (cur().kind == Tok::kOperator && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                           cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (at_name("in")) {
        op = "in";
        next();
      } else if (at_name("not") && peek().kind == Tok::kName && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!compare) {
        compare = make_expr(ExprKind::kCompare, first->line);
        compare->operands.push_back(std::move(first));
      }
      compare->compare_ops.push_back(op);
      compare->operands.push_back(parse_math1());
    }
    return compare ? std::move(compare) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      const std::string op = cur().text;
      next();
      left = binary(ExprKind::kBinary, op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (skip_op("~")) left = binary(ExprKind::kBinary, "~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const std::string op = cur().text;
      next();
      left = binary(ExprKind::kBinary, op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = binary(ExprKind::kBinary, "**", std::move(left), parse_unary(true));
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      node = make_expr(at_op("-") ? ExprKind::kNegate : ExprKind::kPlus, cur().line);
      next();
      node->operands.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case Tok::kName: {
        auto e = make_expr(ExprKind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") {
          e->literal = Value::boolean(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value::boolean(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::none();
        } else {
          e->kind = ExprKind::kName;
          e->name = t.text;
        }
        next();
        return e;
      }
      case Tok::kString: {
        auto e = make_expr(ExprKind::kLiteral, t.line);
        std::string text;
        while (cur().kind == Tok::kString) {  // adjacent literals concatenate, as in Python
          text += cur().text;
          next();
        }
        e->literal = Value::string(std::move(text));
        return e;
      }
      case Tok::kInteger:
      case Tok::kFloat: {
        auto e = make_expr(ExprKind::kLiteral, t.line);
        e->literal = t.kind == Tok::kInteger ? Value::integer(t.int_value) : Value::number(t.float_value);
        next();
        return e;
      }
      case Tok::kOperator:
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto e = make_expr(ExprKind::kList, t.line);
          next();
          while (!at_op("]")) {
            if (!e->operands.empty()) expect_op(",");
            if (at_op("]")) break;
            e->operands.push_back(parse_expression());
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          auto e = make_expr(ExprKind::kDict, t.line);
          next();
          while (!at_op("}")) {
            if (!e->operands.empty()) expect_op(",");
            if (at_op("}")) break;
            e->operands.push_back(parse_expression());
            expect_op(":");
            e->operands.push_back(parse_expression());
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail(t.line, "unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_op(".")) {
        const int line = cur().line;
        next();
        if (cur().kind == Tok::kName) {
          auto e = make_expr(ExprKind::kGetAttr, line);
          e->name = cur().text;
          next();
          e->operands.push_back(std::move(node));
          node = std::move(e);
        } else if (cur().kind == Tok::kInteger) {
          auto e = make_expr(ExprKind::kGetItem, line);
          auto index = make_expr(ExprKind::kLiteral, line);
          index->literal = Value::integer(cur().int_value);
          next();
          e->operands.push_back(std::move(node));
          e->operands.push_back(std::move(index));
          node = std::move(e);
        } else {
          fail(cur().line, "expected a name or number after '.', got " + describe(cur()));
        }
      } else if (at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int line = cur().line;
    next();  // [
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!at_op(":")) start = parse_expression();
    if (skip_op(":")) {
      is_slice = true;
      if (!at_op("]") && !at_op(":")) stop = parse_expression();
      if (skip_op(":") && !at_op("]")) step = parse_expression();
    }
    if (at_op(",")) fail(cur().line, "tuple subscripts are not supported");
    expect_op("]");
    if (!is_slice) {
      auto e = make_expr(ExprKind::kGetItem, line);
      e->operands.push_back(std::move(node));
      e->operands.push_back(std::move(start));
      return e;
    }
    auto e = make_expr(ExprKind::kSlice, line);
    e->operands.push_back(std::move(node));
    e->operands.push_back(std::move(start));
    e->operands.push_back(std::move(stop));
    e->operands.push_back(std::move(step));
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (!e.args.empty() || !e.kwargs.empty()) {
        expect_op(",");
        if (at_op(")")) break;
      }
      if (at_op("*") || at_op("**")) fail(cur().line, "*args and **kwargs in calls are not supported");
      if (cur().kind == Tok::kName && peek().kind == Tok::kOperator && peek().text == "=") {
        std::string key = expect_name();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail(cur().line, "positional argument follows keyword argument");
        e.args.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make_expr(ExprKind::kCall, cur().line);
    e->operands.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  // One `name(args)` after a `|` (the pipe already consumed); `operand` may be null for filter blocks.
  ExprPtr parse_filter_call(ExprPtr operand) {
    auto e = make_expr(ExprKind::kFilter, cur().line);
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    e->filter_fn = find_filter(e->name);
    if (!e->filter_fn) fail(e->line, "no filter named '" + e->name + "'");
    if (at_op("(")) parse_call_args(*e);
    if (operand) e->operands.push_back(std::move(operand));
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (skip_op("|")) {
        node = parse_filter_call(std::move(node));
      } else if (at_name("is")) {
        node = parse_test(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = cur().line;
    next();  // is
    const bool negated = skip_name("not");
    auto e = make_expr(ExprKind::kTest, line);
    e->name = expect_name();
    while (skip_op(".")) e->name += "." + expect_name();
    e->test_fn = find_test(e->name);
    if (!e->test_fn) fail(line, "no test named '" + e->name + "'");
    if (at_op("(")) {
      parse_call_args(*e);
    } else if ((cur().kind == Tok::kName || cur().kind == Tok::kString || cur().kind == Tok::kInteger ||
                cur().kind == Tok::kFloat || at_op("[") || at_op("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      if (at_name("is")) fail(cur().line, "you cannot chain multiple tests with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    e->operands.push_back(std::move(node));
    if (!negated) return e;
    auto n = make_expr(ExprKind::kNot, line);
    n->operands.push_back(std::move(e));
    return n;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::unique_ptr<Program> parse_template(std::string_view source) {
  return Parser(Lexer(source).run()).parse();
}

}  // namespace qwen3::jinja
