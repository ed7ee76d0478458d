// The evaluator: walks the parsed template with jinja2's scoping (a for-loop iteration, a macro call and a
// block set each get their own scope; if-blocks do not, which is why templates use namespace() to carry state
// out of loops).
#include "text/jinja.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_builtins.h"
#include "text/jinja_value.h"

namespace qwen3::jinja {
namespace {

// Expression and statement recursion over the whole render (macros included); bounds the C++ stack.
constexpr int kMaxEvalDepth = 500;

struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent_scope) : parent(std::move(parent_scope)) {}
  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}

  ~Interpreter() {
    // A namespace can hold itself (`set ns.me = ns`); emptying them all breaks such reference cycles.
    for (Value& ns : namespaces_) ns.mutable_namespace() = Dict();
  }

  std::string run(const Program& program, const ScopePtr& scope) {
    std::string out;
    out_ = &out;
    try {
      exec(program.body, scope);
    } catch (const EvalError& e) {
      throw TemplateError("chat template line " + std::to_string(line_) + ": " + e.what());
    }
    return out;
  }

  // namespace() that remembers what it made, for the destructor.
  Value make_namespace_function() {
    return Value::function("namespace", [this](CallArgs& args) {
      Dict d;
      if (args.positional.size() > 1) throw EvalError("namespace() takes at most one positional argument");
      if (!args.positional.empty()) {
        if (!args.positional[0].is_dict() || args.positional[0].is_namespace())
          throw EvalError("namespace(): the positional argument must be a mapping");
        d = args.positional[0].as_dict();
      }
      for (auto& [key, value] : args.keyword) d.set(key, value);
      namespaces_.push_back(Value::namespace_object(std::move(d)));
      return namespaces_.back();
    });
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Interpreter& i) : interpreter(i) {
      if (++interpreter.depth_ > kMaxEvalDepth)
        throw TemplateError("chat template line " + std::to_string(interpreter.line_) +
                            ": evaluation nested too deeply (runaway macro recursion?)");
    }
    ~DepthGuard() { --interpreter.depth_; }
    Interpreter& interpreter;
  };

  void emit(std::string_view text) {
    if (out_->size() + text.size() > limits_.max_output_bytes)
      throw InputError("the rendered chat template is longer than the limit of " +
                       std::to_string(limits_.max_output_bytes) + " bytes");
    out_->append(text);
  }

  // Renders `body` into its own buffer (block set, filter block, macro call).
  std::string capture(const Body& body, const ScopePtr& scope) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
      exec(body, scope);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buffer;
  }

  Flow exec(const Body& body, const ScopePtr& scope) {
    DepthGuard guard(*this);
    for (const auto& stmt : body) {
      const Flow flow = exec_stmt(*stmt, scope);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, const ScopePtr& scope) {
    line_ = s.line;
    try {
      return exec_stmt_unchecked(s, scope);
    } catch (const EvalError& e) {
      throw TemplateError("chat template line " + std::to_string(line_) + ": " + e.what());
    }
  }

  Flow exec_stmt_unchecked(const Stmt& s, const ScopePtr& scope) {
    switch (s.kind) {
      case StmtKind::kText:
        emit(s.text);
        return Flow::kNormal;
      case StmtKind::kOutput: {
        const Value v = eval(*s.expr, scope);
        if (v.is_callable()) throw EvalError("cannot print " + v.function_name() + ": it is a function");
        emit(to_str(v));
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (truthy(eval(*s.conditions[i], scope))) return exec(s.bodies[i], scope);
        if (s.bodies.size() > s.conditions.size()) return exec(s.bodies.back(), scope);
        return Flow::kNormal;
      case StmtKind::kFor:
        exec_for(s, scope);
        return Flow::kNormal;
      case StmtKind::kSet: {
        Value v = eval(*s.expr, scope);
        if (!s.attribute.empty()) {
          const Value* target = scope->lookup(s.targets[0]);
          if (!target || !target->is_namespace())
            throw EvalError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
          target->mutable_namespace().set(s.attribute, std::move(v));
        } else {
          bind_targets(*scope, s.targets, v);
        }
        return Flow::kNormal;
      }
      case StmtKind::kSetBlock: {
        Value v = Value::string(capture(s.body, std::make_shared<Scope>(scope)));
        scope->vars[s.targets[0]] = apply_filters(s.filters, std::move(v), scope);
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Value v = Value::string(capture(s.body, std::make_shared<Scope>(scope)));
        emit(to_str(apply_filters(s.filters, std::move(v), scope)));
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        scope->vars[s.targets[0]] = make_macro(s, scope);
        return Flow::kNormal;
      case StmtKind::kWith: {
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < s.targets.size(); ++i) inner->vars[s.targets[i]] = eval(*s.values[i], scope);
        return exec(s.body, inner);
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  static void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    if (!v.is_list()) throw EvalError("cannot unpack non-sequence " + type_name(v));
    if (v.items().size() != targets.size())
      throw EvalError(std::string(v.items().size() > targets.size() ? "too many" : "not enough") +
                      " values to unpack (expected " + std::to_string(targets.size()) + ")");
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = v.items()[i];
  }

  void exec_for(const Stmt& s, const ScopePtr& scope) {
    std::vector<Value> items = iterate(eval(*s.expr, scope));
    if (s.loop_filter) {
      std::vector<Value> kept;
      for (Value& item : items) {
        count_iteration();
        auto probe = std::make_shared<Scope>(scope);
        bind_targets(*probe, s.targets, item);
        if (truthy(eval(*s.loop_filter, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, scope);
      return;
    }
    const int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      count_iteration();
      auto iteration = std::make_shared<Scope>(scope);
      bind_targets(*iteration, s.targets, items[size_t(i)]);
      iteration->vars["loop"] = make_loop(items, i);
      if (exec(s.body, iteration) == Flow::kBreak) break;
      line_ = s.line;
    }
  }

  void count_iteration() {
    if (++iterations_ > limits_.max_loop_iterations)
      throw TemplateError("chat template line " + std::to_string(line_) + ": more than " +
                          std::to_string(limits_.max_loop_iterations) + " loop iterations");
  }

  static Value make_loop(const std::vector<Value>& items, int64_t i) {
    const int64_t n = int64_t(items.size());
    Dict loop;
    loop.set("index0", Value::integer(i));
    loop.set("index", Value::integer(i + 1));
    loop.set("revindex0", Value::integer(n - i - 1));
    loop.set("revindex", Value::integer(n - i));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[size_t(i + 1)] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::function("loop.cycle", [i](CallArgs& args) {
               if (args.positional.empty()) throw EvalError("no items for cycling given");
               return args.positional[size_t(i) % args.positional.size()];
             }));
    return Value::dict(std::move(loop));
  }

  Value make_macro(const Stmt& macro, const ScopePtr& scope) {
    // A weak reference: the defining scope holds the macro, so a strong one would be a cycle.
    std::weak_ptr<Scope> defining_scope = scope;
    return Value::function(macro.targets[0], [this, &macro, defining_scope](CallArgs& args) {
      ScopePtr parent = defining_scope.lock();
      if (!parent) throw EvalError("macro '" + macro.targets[0] + "' called after its scope ended");
      if (++call_depth_ > limits_.max_call_depth) {
        --call_depth_;
        throw EvalError("macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
      }
      struct Unwind {
        int& depth;
        ~Unwind() { --depth; }
      } unwind{call_depth_};
      const int saved_line = line_;
      auto local = std::make_shared<Scope>(parent);
      const size_t n = macro.param_names.size();
      if (args.positional.size() > n)
        throw EvalError("macro '" + macro.targets[0] + "' takes not more than " + std::to_string(n) +
                        " argument(s)");
      std::vector<bool> given(n, false);
      for (size_t i = 0; i < args.positional.size(); ++i) {
        local->vars[macro.param_names[i]] = args.positional[i];
        given[i] = true;
      }
      for (auto& [key, value] : args.keyword) {
        auto it = std::find(macro.param_names.begin(), macro.param_names.end(), key);
        if (it == macro.param_names.end())
          throw EvalError("macro '" + macro.targets[0] + "' takes no keyword argument '" + key + "'");
        const size_t index = size_t(it - macro.param_names.begin());
        if (given[index])
          throw EvalError("macro '" + macro.targets[0] + "' got multiple values for '" + key + "'");
        local->vars[key] = value;
        given[index] = true;
      }
      for (size_t i = 0; i < n; ++i) {
        if (given[i]) continue;
        local->vars[macro.param_names[i]] =
            macro.param_defaults[i]
                ? eval(*macro.param_defaults[i], local)
                : Value::undefined("parameter '" + macro.param_names[i] + "' was not provided");
      }
      std::string rendered = capture(macro.body, local);
      line_ = saved_line;
      return Value::string(std::move(rendered));
    });
  }

  Value apply_filters(const std::vector<std::unique_ptr<Expr>>& filters, Value v, const ScopePtr& scope) {
    for (const auto& f : filters) {
      CallArgs args = eval_args(*f, scope);
      v = f->filter_fn(v, args);
    }
    return v;
  }

  CallArgs eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs args;
    args.positional.reserve(e.args.size());
    for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
    for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, scope));
    return args;
  }

  static Value eval_optional(Interpreter& self, const std::unique_ptr<Expr>& e, const ScopePtr& scope) {
    return e ? self.eval(*e, scope) : Value::undefined();
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    DepthGuard guard(*this);
    switch (e.kind) {
      case ExprKind::kLiteral:
        return e.literal;
      case ExprKind::kName: {
        const Value* v = scope->lookup(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        std::vector<Value> items;
        items.reserve(e.operands.size());
        for (const auto& item : e.operands) items.push_back(eval(*item, scope));
        return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      case ExprKind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
          Value key = eval(*e.operands[i], scope);
          if (!key.is_string()) throw EvalError("dict keys must be strings here, not " + type_name(key));
          d.set(key.as_string(), eval(*e.operands[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
      case ExprKind::kGetAttr:
        return get_attribute(eval(*e.operands[0], scope), e.name);
      case ExprKind::kGetItem: {
        Value object = eval(*e.operands[0], scope);
        return get_item(object, eval(*e.operands[1], scope));
      }
      case ExprKind::kSlice: {
        Value object = eval(*e.operands[0], scope);
        return get_slice(object, eval_optional(*this, e.operands[1], scope),
                         eval_optional(*this, e.operands[2], scope),
                         eval_optional(*this, e.operands[3], scope));
      }
      case ExprKind::kCall: {
        const Value callee = eval(*e.operands[0], scope);
        if (callee.is_undefined())
          throw EvalError(callee.undefined_hint().empty() ? "called an undefined value"
                                                          : callee.undefined_hint());
        if (!callee.is_callable()) throw EvalError("'" + type_name(callee) + "' object is not callable");
        CallArgs args = eval_args(e, scope);
        return callee.call(args);
      }
      case ExprKind::kFilter: {
        const Value input = eval(*e.operands[0], scope);
        CallArgs args = eval_args(e, scope);
        return e.filter_fn(input, args);
      }
      case ExprKind::kTest: {
        const Value input = eval(*e.operands[0], scope);
        CallArgs args = eval_args(e, scope);
        return Value::boolean(e.test_fn(input, args));
      }
      case ExprKind::kNot:
        return Value::boolean(!truthy(eval(*e.operands[0], scope)));
      case ExprKind::kNegate:
        return negate(eval(*e.operands[0], scope));
      case ExprKind::kPlus: {
        Value v = eval(*e.operands[0], scope);
        if (!v.is_number()) throw EvalError("bad operand type for unary +: '" + type_name(v) + "'");
        return v.is_bool() ? Value::integer(v.int_value()) : v;
      }
      case ExprKind::kBinary: {
        Value left = eval(*e.operands[0], scope);
        return binary_op(e.name, left, eval(*e.operands[1], scope));
      }
      case ExprKind::kAnd: {
        Value left = eval(*e.operands[0], scope);
        return truthy(left) ? eval(*e.operands[1], scope) : left;
      }
      case ExprKind::kOr: {
        Value left = eval(*e.operands[0], scope);
        return truthy(left) ? left : eval(*e.operands[1], scope);
      }
      case ExprKind::kCompare:
        return Value::boolean(eval_compare(e, scope));
      case ExprKind::kConditional:
        if (truthy(eval(*e.operands[1], scope))) return eval(*e.operands[0], scope);
        return e.operands[2] ? eval(*e.operands[2], scope)
                             : Value::undefined("the conditional expression had no else branch");
    }
    throw EvalError("unknown expression");
  }

  bool eval_compare(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.operands[0], scope);
    for (size_t i = 0; i < e.compare_ops.size(); ++i) {
      Value right = eval(*e.operands[i + 1], scope);
      const std::string& op = e.compare_ops[i];
      bool result;
      if (op == "==") {
        result = equals(left, right);
      } else if (op == "!=") {
        result = !equals(left, right);
      } else if (op == "in" || op == "notin") {
        result = contains(right, left) == (op == "in");
      } else {
        for (const Value* v : {&left, &right})
          if (v->is_undefined())
            throw EvalError(v->undefined_hint().empty() ? "an undefined value was compared"
                                                        : v->undefined_hint());
        const int c = compare(left, right);
        result = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
      }
      if (!result) return false;
      left = std::move(right);
    }
    return true;
  }

  const RenderLimits& limits_;
  std::string* out_ = nullptr;
  int line_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace

Template::Template(std::string_view source) : program_(parse_template(source)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  if (!context.is_object()) throw InputError("the chat template's variables must be a JSON object");
  Interpreter interpreter(limits);
  auto globals = std::make_shared<Scope>(nullptr);
  const Dict builtins = make_globals(limits.max_loop_iterations);
  for (const auto& [name, value] : builtins.entries()) globals->vars[name] = value;
  globals->vars["namespace"] = interpreter.make_namespace_function();
  auto root = std::make_shared<Scope>(globals);
  for (const auto& [name, value] : context.items()) root->vars[name] = from_json(value);
  return interpreter.run(*program_, root);
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  return to_python_json(from_json(value));
}

}  // namespace qwen3::jinja
