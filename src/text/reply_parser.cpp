#include "text/reply_parser.h"

#include <optional>

#include "text/jinja.h"

namespace qwen3 {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`: text that may become the tag.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// {"name": "...", "arguments": {...}}; arguments may also come as a JSON string holding an object. Anything
// else is not a tool call.
std::optional<ToolCall> parse_tool_call(std::string_view body) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    return std::nullopt;
  ToolCall call;
  call.name = j["name"].get<std::string>();
  if (j.contains("arguments")) {
    const auto& arguments = j["arguments"];
    if (arguments.is_object()) {
      call.arguments = arguments;
    } else if (arguments.is_string()) {
      auto inner = nlohmann::ordered_json::parse(arguments.get<std::string>(), nullptr, false);
      if (inner.is_discarded() || !inner.is_object()) return std::nullopt;
      call.arguments = std::move(inner);
    } else if (!arguments.is_null()) {
      return std::nullopt;
    }
  }
  return call;
}

}  // namespace

std::string ToolCall::arguments_json() const {
  return jinja::python_json_dumps(arguments);
}

ReplyStreamParser::ReplyStreamParser(ReplyParserOptions options) : options_(options) {}

void ReplyStreamParser::emit_reasoning(std::string_view text, ReplyDelta& delta) {
  delta.reasoning.append(text);
  reply_.reasoning.append(text);
}

void ReplyStreamParser::emit_content(std::string_view text, ReplyDelta& delta) {
  delta.content.append(text);
  reply_.content.append(text);
}

ReplyDelta ReplyStreamParser::push(std::string_view text) {
  ReplyDelta delta;
  if (finished_) return delta;
  pending_.append(text);
  process(false, delta);
  return delta;
}

ReplyDelta ReplyStreamParser::finish() {
  ReplyDelta delta;
  if (finished_) return delta;
  process(true, delta);
  finished_ = true;
  return delta;
}

void ReplyStreamParser::process(bool final, ReplyDelta& delta) {
  while (true) {
    switch (state_) {
      case State::kStart: {
        // Qwen3 opens its reply with "<think>" (possibly after whitespace) when it reasons.
        size_t lead = 0;
        while (lead < pending_.size() && is_space(pending_[lead])) ++lead;
        const std::string_view rest = std::string_view(pending_).substr(lead);
        if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
          pending_.erase(0, lead + kThinkOpen.size());
          state_ = State::kReasoning;
          reply_.has_reasoning = true;
          strip_leading_newlines_ = true;
          continue;
        }
        if (!final && kThinkOpen.substr(0, rest.size()) == rest) return;  // may still become "<think>"
        if (options_.starts_in_reasoning) {
          state_ = State::kReasoning;
          reply_.has_reasoning = true;
          strip_leading_newlines_ = true;
        } else {
          state_ = State::kContent;
        }
        continue;
      }

      case State::kReasoning: {
        if (strip_leading_newlines_) {
          const size_t newlines = pending_.find_first_not_of('\n');
          pending_.erase(0, newlines == std::string::npos ? pending_.size() : newlines);
          if (pending_.empty() && !final) return;
          strip_leading_newlines_ = false;
        }
        const size_t close = pending_.find(kThinkClose);
        if (close != std::string::npos) {
          size_t end = close;
          while (end > 0 && pending_[end - 1] == '\n') --end;
          emit_reasoning(std::string_view(pending_).substr(0, end), delta);
          pending_.erase(0, close + kThinkClose.size());
          reply_.reasoning_finished = true;
          state_ = State::kContent;
          strip_leading_newlines_ = true;
          continue;
        }
        if (final) {
          emit_reasoning(pending_, delta);  // cut off while thinking
          pending_.clear();
          return;
        }
        size_t safe = pending_.size() - partial_tag_suffix(pending_, kThinkClose);
        while (safe > 0 && pending_[safe - 1] == '\n') --safe;  // may be the newline before "</think>"
        emit_reasoning(std::string_view(pending_).substr(0, safe), delta);
        pending_.erase(0, safe);
        return;
      }

      case State::kContent: {
        if (strip_leading_newlines_ || skip_leading_space_) {
          size_t lead = 0;
          while (lead < pending_.size() &&
                 (skip_leading_space_ ? is_space(pending_[lead]) : pending_[lead] == '\n'))
            ++lead;
          pending_.erase(0, lead);
          if (pending_.empty() && !final) return;
          strip_leading_newlines_ = skip_leading_space_ = false;
        }
        if (!options_.parse_tool_calls) {
          emit_content(pending_, delta);
          pending_.clear();
          return;
        }
        const size_t open = pending_.find(kToolCallOpen);
        if (open != std::string::npos) {
          size_t end = open;
          while (end > 0 && is_space(pending_[end - 1])) --end;
          emit_content(std::string_view(pending_).substr(0, end), delta);
          space_before_tool_call_ = pending_.substr(end, open - end);
          pending_.erase(0, open + kToolCallOpen.size());
          state_ = State::kToolCall;
          continue;
        }
        if (final) {
          emit_content(pending_, delta);
          pending_.clear();
          return;
        }
        // Hold back what may open a tool call, and the whitespace that would then be dropped before it.
        size_t safe = pending_.size() - partial_tag_suffix(pending_, kToolCallOpen);
        while (safe > 0 && is_space(pending_[safe - 1])) --safe;
        emit_content(std::string_view(pending_).substr(0, safe), delta);
        pending_.erase(0, safe);
        return;
      }

      case State::kToolCall: {
        const size_t close = pending_.find(kToolCallClose);
        if (close == std::string::npos) {
          if (!final) return;
          // Cut off inside the call: give the text back as it was written.
          emit_content(space_before_tool_call_ + std::string(kToolCallOpen) + pending_, delta);
          pending_.clear();
          return;
        }
        const std::string body = pending_.substr(0, close);
        pending_.erase(0, close + kToolCallClose.size());
        state_ = State::kContent;
        if (auto call = parse_tool_call(body)) {
          delta.tool_calls.push_back(*call);
          reply_.tool_calls.push_back(std::move(*call));
          skip_leading_space_ = true;
        } else {
          // Not valid JSON or not a call: it stays content, byte for byte.
          emit_content(
              space_before_tool_call_ + std::string(kToolCallOpen) + body + std::string(kToolCallClose),
              delta);
        }
        space_before_tool_call_.clear();
        continue;
      }
    }
  }
}

ParsedReply parse_reply(std::string_view text, const ReplyParserOptions& options) {
  ReplyStreamParser parser(options);
  parser.push(text);
  parser.finish();
  return parser.reply();
}

}  // namespace qwen3
