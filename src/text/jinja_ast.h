// The parsed form of a Jinja template: expressions and statements, with the line each came from (for errors).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_builtins.h"
#include "text/jinja_value.h"

namespace qwen3::jinja {

enum class ExprKind {
  kLiteral,  // literal
  kName,     // name
  kList,     // operands: the elements
  kTuple,    // operands: the elements
  kDict,     // operands: key0, value0, key1, value1, ...
  kGetAttr,  // operands[0].name
  kGetItem,  // operands[0][operands[1]]
  kSlice,    // operands[0][operands[1]:operands[2]:operands[3]]; an absent bound is nullptr
  kCall,     // operands[0](args, kwargs)
  kFilter,   // operands[0] | name(args, kwargs); filter_fn resolved at parse time
  kTest,     // operands[0] is name(args, kwargs); test_fn resolved at parse time
  kNot,      // not operands[0]
  kNegate,   // -operands[0]
  kPlus,     // +operands[0]
  kBinary,   // operands[0] <name> operands[1], name one of + - * / // % ** ~
  kAnd,      // operands[0] and operands[1] (Python: yields an operand, not a bool)
  kOr,       // operands[0] or operands[1]
  kCompare,  // operands[0] compare_ops[0] operands[1] compare_ops[1] operands[2] ... (chained, like Python)
  kConditional,  // operands[0] if operands[1] else operands[2]; without else, operands[2] is nullptr
                 // (undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  std::string name;
  Value literal;
  std::vector<std::unique_ptr<Expr>> operands;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
  std::vector<std::string> compare_ops;  // == != < <= > >= in notin
  FilterFn filter_fn = nullptr;
  TestFn test_fn = nullptr;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // conditions[i] -> bodies[i]; bodies has one more entry than conditions when there is an else
  kFor,       // for targets in expr [if loop_filter]: body, else else_body
  kSet,       // set targets = expr, or set targets[0].attribute = expr (namespace attribute)
  kSetBlock,  // set targets[0] [| filters]: body endset
  kMacro,     // macro targets[0](param_names = param_defaults): body endmacro
  kFilterBlock,  // filter filters: body endfilter
  kWith,         // with targets = values: body endwith
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  std::unique_ptr<Expr> expr;
  std::vector<std::unique_ptr<Expr>> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string attribute;
  std::unique_ptr<Expr> loop_filter;
  std::vector<std::string> param_names;
  std::vector<std::unique_ptr<Expr>> param_defaults;  // nullptr: no default
  std::vector<std::unique_ptr<Expr>> values;          // kWith: one per target
  std::vector<std::unique_ptr<Expr>> filters;  // kFilter expressions without an operand, applied in order
};

struct Program {
  Body body;
};

// Parses a template with transformers' chat environment: trim_blocks and lstrip_blocks on, one trailing
// newline dropped, the loopcontrols extension ({% break %}, {% continue %}) and {% generation %} blocks.
// Throws TemplateError (with the line) on a syntax error or a construct this interpreter does not implement.
std::unique_ptr<Program> parse_template(std::string_view source);

}  // namespace qwen3::jinja
