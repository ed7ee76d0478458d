// The Qwen3 chat template rendered from tokenizer_config.json, byte for byte against transformers'
// apply_chat_template (tests/data/chat-template/qwen3_conversations.json, made by
// tests/gen_template_golden.py), the loading rules, and `qwen3 template`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "text/chat_template.h"
#include "text/reply_parser.h"

namespace qwen3 {
namespace {

using nlohmann::ordered_json;

const std::filesystem::path kTokenizerDir = std::filesystem::path(QWEN3_TEST_DATA_DIR) / "tokenizer";
const std::filesystem::path kCasesPath =
    std::filesystem::path(QWEN3_TEST_DATA_DIR) / "chat-template" / "qwen3_conversations.json";

ordered_json load_cases() {
  std::ifstream in(kCasesPath);
  if (!in) throw std::runtime_error("missing " + kCasesPath.string());
  return ordered_json::parse(in);
}

ChatTemplateOptions options_of(const ordered_json& c) {
  ChatTemplateOptions options;
  options.tools = c["tools"];
  options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  options.kwargs = c["kwargs"];
  return options;
}

// Where two renderings first differ, with context, for a readable failure.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return "at byte " + std::to_string(i) + ":\n  ours: " + ordered_json(a.substr(from, 80)).dump() +
         "\n  hf:   " + ordered_json(b.substr(from, 80)).dump();
}

TEST(ChatTemplate, ParityWithTransformersOnQwen3Conversations) {
  const ChatTemplate chat_template = ChatTemplate::from_model_dir(kTokenizerDir);
  const ordered_json cases = load_cases();
  ASSERT_GE(cases.size(), 30u);
  int identical = 0, errors_matched = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    if (c.contains("error")) {
      EXPECT_THROW(chat_template.render(c["messages"], options_of(c)), Error)
          << "transformers raised " << c["error"].get<std::string>();
      ++errors_matched;
      continue;
    }
    std::string ours;
    try {
      ours = chat_template.render(c["messages"], options_of(c));
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    const std::string expected = c["expected"].get<std::string>();
    if (ours == expected) {
      ++identical;
    } else {
      ADD_FAILURE() << "differs from transformers " << first_difference(ours, expected);
    }
  }
  EXPECT_EQ(identical + errors_matched, int(cases.size()));
}

TEST(ChatTemplate, LoadsSpecialTokensAndFeatures) {
  const ChatTemplate t = ChatTemplate::from_tokenizer_config_file(kTokenizerDir / "tokenizer_config.json");
  EXPECT_EQ(t.eos_token(), "<|im_end|>");
  EXPECT_FALSE(t.bos_token().has_value());  // Qwen3 has bos_token: null
  EXPECT_EQ(t.special_tokens().at("pad_token"), "<|endoftext|>");
  const ordered_json messages = {{{"role", "user"}, {"content", "Hi"}}};
  EXPECT_EQ(t.render(messages), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ChatTemplateOptions no_think;
  no_think.kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(t.render(messages, no_think),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, ChatTemplateJinjaFileAndNamedTemplates) {
  const auto dir = test::make_temp_dir("chat-template");
  test::write_file(dir / "tokenizer_config.json",
                   R"({"eos_token": {"content": "</s>", "lstrip": false}, "bos_token": "<s>",
                       "chat_template": "unused"})");
  test::write_file(dir / "chat_template.jinja",
                   "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"
                   "{{ eos_token }}\n");
  const ChatTemplate from_file = ChatTemplate::from_model_dir(dir);
  EXPECT_EQ(from_file.render({{{"role", "user"}, {"content", "x"}}}),
            "<s>x</s>");  // .jinja wins, newline dropped

  const ordered_json named = ordered_json::parse(R"({"chat_template": [
      {"name": "default", "template": "plain"}, {"name": "tool_use", "template": "tools:{{ tools|length }}"}]})");
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(named);
  const ordered_json messages = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(t.render(messages), "plain");
  ChatTemplateOptions with_tools;
  with_tools.tools = ordered_json::array({{{"name", "f"}}});
  EXPECT_EQ(t.render(messages, with_tools), "tools:1");
  std::filesystem::remove_all(dir);

  EXPECT_THROW(ChatTemplate::from_tokenizer_config(ordered_json::object()), FormatError);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config({{"chat_template", "{% if %}"}}), jinja::TemplateError);
}

TEST(ChatTemplate, BadInputIsAnInputError) {
  const ChatTemplate t = ChatTemplate::from_model_dir(kTokenizerDir);
  EXPECT_THROW(t.render(ordered_json::array()), InputError);
  EXPECT_THROW(t.render(ordered_json::object()), InputError);
  ChatTemplateOptions bad_tools;
  bad_tools.tools = "not a list";
  EXPECT_THROW(t.render({{{"role", "user"}, {"content", "x"}}}, bad_tools), InputError);
  jinja::RenderLimits tight;
  tight.max_output_bytes = 100;
  EXPECT_THROW(t.render({{{"role", "user"}, {"content", std::string(1000, 'x')}}}, {}, tight), InputError);
}

TEST(ChatTemplate, NormalizeOpenAiMessages) {
  const ordered_json messages = ordered_json::parse(R"([
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
          "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}])");
  const ordered_json normalized = normalize_chat_messages(messages);
  EXPECT_EQ(normalized[0]["content"], "a\nb");
  EXPECT_EQ(normalized[1]["content"], "");
  EXPECT_TRUE(messages[1]["content"].is_null());  // the input is untouched
  const ChatTemplate t = ChatTemplate::from_model_dir(kTokenizerDir);
  EXPECT_NE(
      t.render(normalized).find("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"),
      std::string::npos);
  EXPECT_THROW(
      normalize_chat_messages(ordered_json::parse(R"([{"role": "user", "content": [{"type": "image"}]}])")),
      InputError);
}

TEST(ChatTemplate, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

// A reply parsed into reasoning, content and tool calls renders back to the same prompt as the raw reply: the
// server can keep the structured form in the history without changing what the model sees.
TEST(ChatTemplate, ParsedReplyRendersLikeTheRawReply) {
  const ChatTemplate t = ChatTemplate::from_model_dir(kTokenizerDir);
  const std::string raw =
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
  const ParsedReply reply = parse_reply(raw);
  ASSERT_EQ(reply.tool_calls.size(), 1u);
  ordered_json structured = {
      {"role", "assistant"}, {"content", reply.content}, {"reasoning_content", reply.reasoning}};
  structured["tool_calls"] = ordered_json::array(
      {{{"type", "function"},
        {"function",
         {{"name", reply.tool_calls[0].name}, {"arguments", reply.tool_calls[0].arguments_json()}}}}});
  const ordered_json user = {{"role", "user"}, {"content", "Weather in Paris?"}};
  ChatTemplateOptions finished;
  finished.add_generation_prompt = false;
  const std::string from_raw = t.render({user, {{"role", "assistant"}, {"content", raw}}}, finished);
  EXPECT_EQ(t.render({user, structured}, finished), from_raw);
  EXPECT_NE(from_raw.find("Let me check.\n<tool_call>"), std::string::npos);
}

TEST(ChatTemplate, CliPrintsThePromptExactly) {
  const ordered_json cases = load_cases();
  const auto dir = test::make_temp_dir("template-cli");
  const std::string qwen3 = QWEN3_BINARY;
  int ran = 0;
  for (const auto& c : cases) {
    if (c.contains("error") || c["kwargs"].size() > 1) continue;
    const ordered_json& kwargs = c["kwargs"];
    if (kwargs.size() == 1 && kwargs.value("enable_thinking", true) != false) continue;
    std::string args = "template --model " + kTokenizerDir.string();
    test::write_file(dir / "messages.json", c["messages"].dump());
    args += " --messages " + (dir / "messages.json").string();
    if (!c["tools"].is_null()) {
      test::write_file(dir / "tools.json", c["tools"].dump());
      args += " --tools " + (dir / "tools.json").string();
    }
    if (!c["add_generation_prompt"].get<bool>()) args += " --no-generation-prompt";
    if (kwargs.size() == 1) args += " --no-think";
    const auto r = test::run_command(qwen3 + " " + args);
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, c["expected"].get<std::string>());
    if (++ran == 8) break;  // each run starts a process; a handful shows the wiring
  }
  EXPECT_EQ(ran, 8);

  // An OpenAI request body works as the messages file; --tokenizer-config names the file directly.
  test::write_file(dir / "request.json",
                   R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                       "chat_template_kwargs": {"enable_thinking": false}})");
  const auto body = test::run_command(qwen3 + " template --tokenizer-config " +
                                      (kTokenizerDir / "tokenizer_config.json").string() + " --messages " +
                                      (dir / "request.json").string());
  EXPECT_EQ(body.exit_code, 0) << body.err;
  EXPECT_EQ(body.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");

  const auto missing = test::run_command(qwen3 + " template --model " + kTokenizerDir.string() +
                                         " --messages " + (dir / "nope.json").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("error: cannot open"), std::string::npos) << missing.err;
  test::write_file(dir / "bad.json", "[{\"role\": \"user\", \"content\": ");
  const auto bad = test::run_command(qwen3 + " template --model " + kTokenizerDir.string() + " --messages " +
                                     (dir / "bad.json").string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("invalid JSON"), std::string::npos) << bad.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qwen3
