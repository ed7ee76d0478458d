// Splits what a Qwen3 model writes into reasoning ("<think>...</think>"), content and tool calls
// ("<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>", the Hermes format), both for a whole reply
// and incrementally while it streams. The newlines that the chat template puts around the tags belong to the
// tags: reasoning and content come back without them, so feeding reasoning_content and content back through
// the template reproduces the prompt.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

struct ToolCall {
  std::string name;
  nlohmann::ordered_json arguments =
      nlohmann::ordered_json::object();  // as the model wrote them, key order kept
  // json.dumps(arguments, ensure_ascii=False): the OpenAI `function.arguments` string, and what the chat
  // template prints back when the call is replayed with arguments given as a string.
  std::string arguments_json() const;
};

struct ParsedReply {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool has_reasoning = false;  // a reasoning block was opened (by the reply or by the prompt)
  bool reasoning_finished =
      false;  // ... and closed; false with has_reasoning: the reply was cut off while thinking
};

struct ReplyParserOptions {
  // The prompt already opened "<think>" (see prompt_opens_reasoning): the reply starts inside the reasoning.
  bool starts_in_reasoning = false;
  // false when no tools were offered: "<tool_call>" text then stays in the content.
  bool parse_tool_calls = true;
};

// What one push() adds: the pieces to stream out now. Text that may be the start of a tag, newlines that may
// belong to a tag, and an unfinished tool call are held back until later input (or finish()) settles them.
struct ReplyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ReplyStreamParser {
 public:
  explicit ReplyStreamParser(ReplyParserOptions options = {});

  // Feeds the next piece of decoded text (any split: tags may straddle pieces).
  ReplyDelta push(std::string_view text);
  // The reply has ended (end of sequence, a stop string or the token limit): flushes what was held back. A
  // cut-off tag or an unterminated tool call is given back as plain text.
  ReplyDelta finish();

  // Everything parsed so far: the sum of the deltas.
  const ParsedReply& reply() const { return reply_; }
  // Whether text pushed now would count as reasoning (for a "thinking..." indicator).
  bool in_reasoning() const {
    return state_ == State::kReasoning || (state_ == State::kStart && options_.starts_in_reasoning);
  }

 private:
  enum class State { kStart, kReasoning, kContent, kToolCall };
  void process(bool final, ReplyDelta& delta);
  void emit_reasoning(std::string_view text, ReplyDelta& delta);
  void emit_content(std::string_view text, ReplyDelta& delta);

  ReplyParserOptions options_;
  State state_ = State::kStart;
  std::string pending_;                  // received, not yet classified
  bool strip_leading_newlines_ = false;  // right after <think> or </think>
  bool skip_leading_space_ = false;      // right after </tool_call>
  std::string space_before_tool_call_;   // given back with the block if the call does not parse
  bool finished_ = false;
  ParsedReply reply_;
};

// The whole reply at once; the same result as streaming it through ReplyStreamParser in any pieces.
ParsedReply parse_reply(std::string_view text, const ReplyParserOptions& options = {});

}  // namespace qwen3
