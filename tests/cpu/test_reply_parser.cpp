// Reply parsing: reasoning / content / tool calls, for whole replies and for every way a stream can be cut.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/reply_parser.h"

namespace qwen3 {
namespace {

struct Streamed {
  std::string reasoning, content;
  std::vector<ToolCall> tool_calls;
};

// Feeds `text` in the given pieces and concatenates the deltas.
Streamed stream(const std::vector<std::string>& pieces, const ReplyParserOptions& options = {}) {
  ReplyStreamParser parser(options);
  Streamed out;
  auto take = [&](const ReplyDelta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
    out.tool_calls.insert(out.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  for (const auto& piece : pieces) take(parser.push(piece));
  take(parser.finish());
  EXPECT_EQ(parser.reply().reasoning, out.reasoning);
  EXPECT_EQ(parser.reply().content, out.content);
  return out;
}

void expect_same(const Streamed& s, const ParsedReply& whole, const std::string& how) {
  EXPECT_EQ(s.reasoning, whole.reasoning) << how;
  EXPECT_EQ(s.content, whole.content) << how;
  ASSERT_EQ(s.tool_calls.size(), whole.tool_calls.size()) << how;
  for (size_t i = 0; i < s.tool_calls.size(); ++i) {
    EXPECT_EQ(s.tool_calls[i].name, whole.tool_calls[i].name) << how;
    EXPECT_EQ(s.tool_calls[i].arguments, whole.tool_calls[i].arguments) << how;
  }
}

// Every split into two and three pieces, and one byte at a time, gives what the whole-text parser gives.
void expect_streaming_consistent(const std::string& text, const ReplyParserOptions& options = {}) {
  const ParsedReply whole = parse_reply(text, options);
  for (size_t i = 0; i <= text.size(); ++i) {
    expect_same(stream({text.substr(0, i), text.substr(i)}, options), whole, "split at " + std::to_string(i));
    for (size_t j = i; j <= text.size(); j += 3)
      expect_same(stream({text.substr(0, i), text.substr(i, j - i), text.substr(j)}, options), whole,
                  "split at " + std::to_string(i) + "," + std::to_string(j));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  expect_same(stream(bytes, options), whole, "byte by byte");
}

TEST(ReplyParser, ThinkingThenContent) {
  const ParsedReply r = parse_reply("<think>\nI should greet.\n</think>\n\nHello!");
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_TRUE(r.reasoning_finished);
  EXPECT_EQ(r.reasoning, "I should greet.");
  EXPECT_EQ(r.content, "Hello!");
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ReplyParser, NoThinking) {
  const ParsedReply r = parse_reply("Just an answer.\nTwo lines.");
  EXPECT_FALSE(r.has_reasoning);
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Just an answer.\nTwo lines.");
  // With enable_thinking=false the template writes the empty block itself; the reply is plain content.
  EXPECT_EQ(parse_reply("Paris.").content, "Paris.");
  // An empty reasoning block, as Qwen3 writes after /no_think.
  const ParsedReply empty = parse_reply("<think>\n\n</think>\n\nOK");
  EXPECT_TRUE(empty.has_reasoning);
  EXPECT_EQ(empty.reasoning, "");
  EXPECT_EQ(empty.content, "OK");
}

TEST(ReplyParser, CutOffWhileThinking) {
  const ParsedReply r = parse_reply("<think>\nStep 1: consider the problem.\nStep 2:");
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_FALSE(r.reasoning_finished);
  EXPECT_EQ(r.reasoning, "Step 1: consider the problem.\nStep 2:");
  EXPECT_EQ(r.content, "");
  // Cut inside the closing tag: the partial tag is reasoning text, not lost.
  EXPECT_EQ(parse_reply("<think>\nabc</thi").reasoning, "abc</thi");
}

TEST(ReplyParser, PromptAlreadyOpenedThinking) {
  ReplyParserOptions opened;
  opened.starts_in_reasoning = true;
  const ParsedReply r = parse_reply("Let me think.\n</think>\n\nThe answer is 4.", opened);
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_TRUE(r.reasoning_finished);
  EXPECT_EQ(r.reasoning, "Let me think.");
  EXPECT_EQ(r.content, "The answer is 4.");
  // A model that writes <think> anyway.
  EXPECT_EQ(parse_reply("<think>\nhm\n</think>\n\nok", opened).reasoning, "hm");
  const ParsedReply cut = parse_reply("still thinking", opened);
  EXPECT_EQ(cut.reasoning, "still thinking");
  EXPECT_FALSE(cut.reasoning_finished);
}

TEST(ReplyParser, ToolCalls) {
  const ParsedReply r = parse_reply(
      "<think>\nNeed the weather.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"celsius\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>");
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments_json(), R"({"city": "Paris", "unit": "celsius"})");  // key order kept
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  EXPECT_EQ(r.tool_calls[1].arguments["tz"], "CET");  // arguments given as a JSON string are unwrapped

  const ParsedReply only_call = parse_reply("<tool_call>\n{\"name\": \"f\"}\n</tool_call>");
  EXPECT_EQ(only_call.content, "");
  ASSERT_EQ(only_call.tool_calls.size(), 1u);
  EXPECT_EQ(only_call.tool_calls[0].arguments_json(), "{}");

  // Tool-call markup inside the reasoning is reasoning.
  const ParsedReply in_thought = parse_reply("<think>\nmaybe <tool_call>x</tool_call>\n</think>\n\nno");
  EXPECT_TRUE(in_thought.tool_calls.empty());
  EXPECT_EQ(in_thought.reasoning, "maybe <tool_call>x</tool_call>");
}

TEST(ReplyParser, MalformedToolCallsStayContent) {
  const std::string bad_json =
      "Here:\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call> done";
  const ParsedReply r = parse_reply(bad_json);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, bad_json);  // byte for byte

  const std::string no_name = "<tool_call>\n{\"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(parse_reply(no_name).content, no_name);
  const std::string not_object = "<tool_call>\n[1, 2]\n</tool_call>";
  EXPECT_EQ(parse_reply(not_object).content, not_object);
  const std::string cut_off = "Calling.\n<tool_call>\n{\"name\": \"f\", \"argu";
  EXPECT_EQ(parse_reply(cut_off).content, cut_off);
  EXPECT_TRUE(parse_reply(cut_off).tool_calls.empty());

  ReplyParserOptions no_tools;
  no_tools.parse_tool_calls = false;
  const std::string valid = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(parse_reply(valid, no_tools).content, valid);
}

TEST(ReplyParser, StreamingHoldsBackOnlyWhatMayBeATag) {
  ReplyStreamParser parser;
  EXPECT_EQ(parser.push("<thi").reasoning, "");
  EXPECT_TRUE(parser.push("nk>\nStep one").reasoning == "Step one");
  EXPECT_TRUE(parser.in_reasoning());
  EXPECT_EQ(parser.push(" done\n").reasoning, " done");  // the newline may precede </think>
  EXPECT_EQ(parser.push("</think>\n\nHel").content, "Hel");
  EXPECT_FALSE(parser.in_reasoning());
  EXPECT_EQ(parser.push("lo <").content, "lo");  // " <" may open <tool_call>
  EXPECT_EQ(parser.push("b>").content, " <b>");
  const ReplyDelta call =
      parser.push("\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.content, "");
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_EQ(parser.reply().reasoning, "Step one done");
  EXPECT_EQ(parser.reply().content, "Hello <b>");
}

TEST(ReplyParser, StreamingEqualsWholeParseForEverySplit) {
  expect_streaming_consistent("<think>\nReason\n\nmore\n</think>\n\nAnswer <b> text\n\n");
  expect_streaming_consistent("\n<think>\nx\n</think>\n\n");
  expect_streaming_consistent("No think here <tool_call> but < and <tool_ text");
  expect_streaming_consistent(
      "<think>\nplan\n</think>\n\nOK.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": [1, 2.5]}}\n"
      "</tool_call>\n<tool_call>\n{bad json}\n</tool_call>\ntail");
  expect_streaming_consistent("<think>\ncut off </thi");
  expect_streaming_consistent(
      "Unicode: 日本語 🤖 é <tool_call>\n{\"name\": \"ü\", \"arguments\": {\"q\": "
      "\"☕\"}}\n</tool_call>");
  ReplyParserOptions opened;
  opened.starts_in_reasoning = true;
  expect_streaming_consistent("thinking\n</think>\n\nanswer", opened);
}

}  // namespace
}  // namespace qwen3
