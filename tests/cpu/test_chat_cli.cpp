// `qwen3 chat` driven through a pipe on tests/data/text_real_vocab (random weights, real vocabulary and
// tokenizer): the transcript, the history each turn's prompt carries (checked against the chat template and
// tokenizer run in-process, and the first and last turns against transformers' expected.json), the commands,
// bad input that must not end the chat, and Ctrl-C (while a reply streams: stops it; at the prompt: quits).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"
#include "text/chat_template.h"
#include "text/reply_parser.h"
#include "text/tokenizer.h"

namespace qwen3 {
namespace {

const std::string kQwen3 = QWEN3_BINARY;
const std::filesystem::path kDataDir = QWEN3_TEST_DATA_DIR;
const std::filesystem::path kCheckpoint = kDataDir / "text_real_vocab";
const std::filesystem::path kTokenizerDir = kDataDir / "tokenizer";

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string model_args(const std::filesystem::path& tokenizer_json = kTokenizerDir / "tokenizer.json") {
  return "--model " + kCheckpoint.string() + " --tokenizer " + tokenizer_json.string() + " --backend cpu";
}

// The expected.json run for a prompt, templated with thinking on or off.
nlohmann::json golden_run(const std::string& prompt, bool thinking) {
  std::ifstream in(kCheckpoint / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  for (const auto& run : expected["runs"])
    if (run["prompt"] == prompt && !run.value("raw", false) && run["enable_thinking"] == thinking) return run;
  ADD_FAILURE() << "no expected run for " << prompt;
  return {};
}

// Every "prompt ids: ..." line of --verbose-prompt's stderr, in order.
std::vector<std::vector<int32_t>> prompt_ids_in(const std::string& err) {
  std::vector<std::vector<int32_t>> all;
  for (size_t at = err.find("prompt ids: "); at != std::string::npos; at = err.find("prompt ids: ", at + 1)) {
    std::istringstream line(err.substr(at + 12, err.find('\n', at) - at - 12));
    all.emplace_back(std::istream_iterator<int32_t>(line), std::istream_iterator<int32_t>());
  }
  return all;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class ChatCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("chat"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `qwen3 chat` with `input` piped into stdin.
  test::CommandResult chat(const std::string& input, const std::string& args,
                           const std::string& model = model_args()) {
    test::write_file(dir_ / "input.txt", input);
    return test::run_command(kQwen3 + " chat " + model + " " + args + " < " + (dir_ / "input.txt").string());
  }

  std::filesystem::path dir_;
};

TEST_F(ChatCli, MultiTurnTranscriptKeepsTheHistory) {
  const std::string first_message = "Write a haiku about GPUs. 日本語も少し。";
  const std::string last_message = "What is 17 * 23? Answer briefly 🙂";
  const nlohmann::json first = golden_run(first_message, true);
  const nlohmann::json last = golden_run(last_message, false);
  const test::CommandResult r = chat(first_message + "\nHow are you?\n/stats\n\n/reset\n/no_think\n" +
                                         last_message + "\n/exit\nnever answered\n",
                                     "--temperature 0 --max-tokens 40 --ignore-eos --verbose-prompt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto prompts = prompt_ids_in(r.err);
  ASSERT_EQ(prompts.size(), 3u) << r.err;

  // Turn 1 is transformers' single-turn prompt; turn 3 too, after /reset and /no_think.
  EXPECT_EQ(prompts[0], first["prompt_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(prompts[2], last["prompt_ids"].get<std::vector<int32_t>>());

  // Turn 2 carries turn 1: the prompt the template renders for the whole conversation.
  const Tokenizer tokenizer = Tokenizer::from_file(kTokenizerDir / "tokenizer.json");
  const ChatTemplate chat_template = ChatTemplate::from_model_dir(kTokenizerDir);
  const ParsedReply first_reply =
      parse_reply(first["text_skip_special"].get<std::string>(), {.parse_tool_calls = false});
  const nlohmann::ordered_json history = {
      {{"role", "user"}, {"content", first_message}},
      {{"role", "assistant"}, {"content", first_reply.content}, {"reasoning_content", first_reply.reasoning}},
      {{"role", "user"}, {"content", "How are you?"}}};
  const std::string second_prompt = chat_template.render(normalize_chat_messages(history));
  EXPECT_NE(second_prompt.find(first["rendered"].get<std::string>()), std::string::npos);
  EXPECT_EQ(prompts[1], tokenizer.encode(second_prompt));
  EXPECT_NE(r.err.find(second_prompt + "\nprompt ids: "), std::string::npos) << r.err;

  // The reply to turn 2, as `run` generates it from the same ids.
  std::string ids;
  for (int32_t id : prompts[1]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const test::CommandResult second = test::run_command(kQwen3 + " run " + model_args() + " --prompt-ids " +
                                                       ids + " --temperature 0 --max-tokens 40 --ignore-eos");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ASSERT_FALSE(parse_reply(second.out).has_reasoning) << "the expectation below assumes no <think>";

  // stdout: the replies alone, each followed by a newline.
  EXPECT_EQ(r.out, first["text_skip_special"].get<std::string>() + "\n" + second.out + "\n" +
                       last["text_skip_special"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("last reply: 40 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("conversation: 4 messages; thinking on"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[new conversation]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[thinking off]"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("never answered"), std::string::npos) << r.err;
}

TEST_F(ChatCli, SoftSwitchInsideAMessageIsPassedThrough) {
  const test::CommandResult r = chat("Hello /no_think\n", "--temperature 0 --max-tokens 2 --verbose-prompt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("<|im_start|>user\nHello /no_think<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("[thinking off]"), std::string::npos) << r.err;
}

TEST_F(ChatCli, CommandsAndBadLinesDoNotEndTheChat) {
  // No /exit: end of input quits.
  const test::CommandResult r = chat("/stats\n/help\n/frobnicate\n\n   \nab\xff\nHello\r\n",
                                     "--temperature 0 --max-tokens 3 --verbose-prompt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no reply yet"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/reset"), std::string::npos) << r.err;  // the help lists the commands
  EXPECT_NE(r.err.find("unknown command /frobnicate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not valid UTF-8 (byte 2)"), std::string::npos) << r.err;
  ASSERT_EQ(prompt_ids_in(r.err).size(), 1u) << r.err;  // only "Hello" (its \r dropped) reached the model
  EXPECT_NE(r.err.find("user\nHello<|im_end|>"), std::string::npos) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
}

TEST_F(ChatCli, AConversationPastTheContextIsRefusedAndForgotten) {
  std::string long_message;
  for (int i = 0; i < 40; ++i) long_message += "words ";
  const test::CommandResult r =
      chat("Hello\n" + long_message + "\nHi\n",
           "--temperature 0 --max-tokens 5 --ignore-eos --ctx-size 40 --verbose-prompt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("context holds 40 (/reset starts a new conversation)"), std::string::npos) << r.err;
  const auto prompts = prompt_ids_in(r.err);
  ASSERT_EQ(prompts.size(), 2u) << r.err;
  // The refused message left the history: the last prompt holds Hello and Hi only.
  const size_t last_prompt = r.err.rfind("prompt (");
  EXPECT_NE(r.err.find("user\nHello<|im_end|>", last_prompt), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("user\nHi<|im_end|>", last_prompt), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("words words", last_prompt), std::string::npos) << r.err;
}

TEST_F(ChatCli, ReasoningIsShownBetweenThinkTags) {
  // A template whose prompt opens the reasoning (as thinking-only Qwen3 models' do): the whole reply is
  // reasoning, cut off by --max-tokens, so it is shown after <think> with no closing tag.
  const std::filesystem::path tokenizer_json = dir_ / "tokenizer.json";
  std::filesystem::copy_file(kTokenizerDir / "tokenizer.json", tokenizer_json);
  test::write_file(dir_ / "tokenizer_config.json",
                   R"({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}<think>"})");
  // (This random model answers a prompt ending in a newline with newlines alone, which would show nothing.)
  const std::string message = "Hello";
  const test::CommandResult r =
      chat(message + "\n", "--temperature 0 --max-tokens 12 --ignore-eos", model_args(tokenizer_json));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const test::CommandResult raw =
      test::run_command(kQwen3 + " run " + model_args() + " --raw --prompt " +
                        shell_quote(message + "<think>") + " --temperature 0 --max-tokens 12 --ignore-eos");
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  const std::string reasoning = raw.out.substr(std::min(raw.out.find_first_not_of('\n'), raw.out.size()));
  ASSERT_FALSE(reasoning.empty());
  ASSERT_EQ(raw.out.find("</think>"), std::string::npos) << "the expectation below assumes no </think>";
  EXPECT_EQ(r.out, "<think>\n" + reasoning + "\n");
}

TEST_F(ChatCli, BadStart) {
  EXPECT_EQ(chat("Hello\n", "--system \"$(printf '\\377')\"").exit_code, 1);
  const test::CommandResult missing =
      chat("Hello\n", "", "--model " + kCheckpoint.string() + " --backend cpu");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no tokenizer.json in"), std::string::npos) << missing.err;
  const test::CommandResult bad_sampling = chat("Hello\n", "--temperature -1");
  EXPECT_EQ(bad_sampling.exit_code, 1);
  EXPECT_NE(bad_sampling.err.find("temperature"), std::string::npos) << bad_sampling.err;
  EXPECT_TRUE(bad_sampling.out.empty());
}

// A shell script that drives `qwen3 chat` through a fifo (fd 3 writes to its stdin) and sends it SIGINT;
// `body` ends by setting $status to the chat's exit status, which the script prints as "exit=N". A watchdog
// kills a chat that hangs.
test::CommandResult run_script(const std::filesystem::path& dir, const std::string& body) {
  const std::string script =
      "set -u\nd=" + shell_quote(dir.string()) +
      "\nmkfifo \"$d/in\"\n"
      // wait_for TEXT [N]: until stderr holds N (default 1) lines with TEXT
      "wait_for() { i=0; until [ \"$(grep -c \"$1\" \"$d/err\" 2>/dev/null)\" -ge \"${2:-1}\" ]; "
      "do i=$((i+1)); [ $i -gt 600 ] && echo \"timed out waiting for $1\" && break; "
      "sleep 0.1; done; }\n" +
      kQwen3 + " chat " + model_args() +
      " --verbose-prompt --no-think --temperature 0 --ignore-eos --max-tokens 100000 "
      "--ctx-size 4096 < \"$d/in\" > \"$d/out\" 2> \"$d/err\" &\n"
      "pid=$!\n"
      "( sleep 60; kill -9 $pid ) >/dev/null 2>&1 &\n"
      "watchdog=$!\n"
      "exec 3> \"$d/in\"\n" +
      body +
      "echo \"exit=$status\"\n"
      "kill $watchdog 2>/dev/null\n";
  test::write_file(dir / "script.sh", script);
  return test::run_command("sh " + (dir / "script.sh").string());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST_F(ChatCli, CtrlCStopsTheReplyNotTheChat) {
  const test::CommandResult r = run_script(dir_,
                                           "printf 'Hello\\n' >&3\n"
                                           "wait_for 'prompt ids'\n"
                                           "sleep 0.3\n"
                                           "kill -INT $pid\n"
                                           "wait_for '\\[stopped\\]'\n"
                                           "printf '/stats\\nSecond\\n' >&3\n"
                                           "wait_for 'prompt ids' 2\n"
                                           "sleep 0.3\n"
                                           "kill -INT $pid\n"
                                           "wait_for '\\[stopped\\]' 2\n"
                                           "exec 3>&-\n"  // end of input: the chat quits
                                           "wait $pid; status=$?\n");
  const std::string err = read_file(dir_ / "err");
  const std::string out = read_file(dir_ / "out");
  EXPECT_NE(r.out.find("exit=0"), std::string::npos) << r.out << err;
  EXPECT_EQ(r.out.find("timed out"), std::string::npos) << r.out << err;
  EXPECT_EQ(count(err, "[stopped]"), 2u) << err;
  EXPECT_NE(err.find("finished: cancelled"), std::string::npos) << err;
  // The stopped reply stays in the history as far as it got: it is what stdout showed first.
  const std::string opening = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
  const size_t second_prompt = err.rfind("prompt (");
  const size_t reply_start = err.find(opening, second_prompt);
  ASSERT_NE(reply_start, std::string::npos) << err;
  const size_t reply_end = err.find("<|im_end|>\n<|im_start|>user\nSecond", reply_start);
  ASSERT_NE(reply_end, std::string::npos) << err;
  const std::string partial =
      err.substr(reply_start + opening.size(), reply_end - reply_start - opening.size());
  EXPECT_FALSE(partial.empty());
  EXPECT_EQ(out.substr(0, partial.size() + 1), partial + "\n");
}

TEST_F(ChatCli, CtrlCAtThePromptQuits) {
  const test::CommandResult r = run_script(dir_,
                                           "printf '/stats\\n' >&3\n"
                                           "wait_for 'no reply yet'\n"
                                           "kill -INT $pid\n"
                                           "wait $pid; status=$?\n"  // stdin still open: only SIGINT ends it
                                           "exec 3>&-\n");
  EXPECT_NE(r.out.find("exit=0"), std::string::npos) << r.out << read_file(dir_ / "err");
  EXPECT_EQ(r.out.find("timed out"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qwen3
