// Text in, text out, against transformers: `qwen3 run --prompt TEXT --temperature 0 --max-tokens 40
// --ignore-eos` on tests/data/text_real_vocab (random weights with the real 151936-token vocabulary; the
// tokenizer files are tests/data/tokenizer) prints exactly what transformers' greedy generate decoded
// (expected.json, written by tests/gen_golden.py build_text_case), from exactly the prompt ids it rendered.
// Also: the bad inputs of run's text flags.
//
// stdout is compared with `text_skip_special` (tokenizer.decode(ids, skip_special_tokens=True)): run prints
// what vLLM's default decode and llama-cli print, leaving out special tokens such as <|im_end|> (--special
// keeps them, and is compared with `text`). <think> and </think> are not special tokens, so both forms keep
// them: the reasoning is printed as the model wrote it.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

namespace qwen3 {
namespace {

const std::string kQwen3 = QWEN3_BINARY;
const std::filesystem::path kDataDir = QWEN3_TEST_DATA_DIR;
const std::filesystem::path kCheckpoint = kDataDir / "text_real_vocab";
const std::filesystem::path kTokenizerDir = kDataDir / "tokenizer";

// Single quotes for /bin/sh: the prompts hold spaces, '*', '?' and non-ASCII text.
std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

test::CommandResult qwen3(const std::string& args) {
  return test::run_command(kQwen3 + " " + args);
}

std::string model_args() {
  return "--model " + kCheckpoint.string() + " --tokenizer " + (kTokenizerDir / "tokenizer.json").string() +
         " --backend cpu";
}

nlohmann::json expected_runs() {
  std::ifstream in(kCheckpoint / "expected.json");
  return nlohmann::json::parse(in)["runs"];
}

// The ids after "prompt ids: " in --verbose-prompt's stderr.
std::vector<int32_t> prompt_ids_in(const std::string& err) {
  const size_t at = err.find("prompt ids: ");
  if (at == std::string::npos) return {};
  std::istringstream line(err.substr(at + 12, err.find('\n', at) - at - 12));
  return {std::istream_iterator<int32_t>(line), {}};
}

std::string flags_of(const nlohmann::json& run) {
  if (run.value("raw", false)) return " --raw";
  return run["enable_thinking"].get<bool>() ? "" : " --no-think";
}

std::string describe(const nlohmann::json& run) {
  return run["prompt"].get<std::string>() + flags_of(run);
}

TEST(TextEndToEnd, RunPrintsWhatTransformersDecoded) {
  const nlohmann::json runs = expected_runs();
  ASSERT_EQ(runs.size(), 9u);
  int matched = 0;
  for (const auto& run : runs) {
    SCOPED_TRACE(describe(run));
    const std::string command = "run " + model_args() + " --prompt " + shell_quote(run["prompt"]) +
                                " --temperature 0 --max-tokens 40 --ignore-eos --verbose-prompt" +
                                flags_of(run);
    const test::CommandResult r = qwen3(command);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto expected_prompt = run["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(prompt_ids_in(r.err), expected_prompt) << r.err;
    if (run.contains("rendered")) {
      EXPECT_NE(r.err.find("\n" + run["rendered"].get<std::string>() + "\nprompt ids: "), std::string::npos)
          << r.err;
    }
    EXPECT_EQ(r.out, run["text_skip_special"].get<std::string>());
    const bool text_matches = r.out == run["text_skip_special"].get<std::string>();

    // The ids too, so that a mismatch says whether the model or the decoder is wrong.
    const test::CommandResult ids = qwen3(command + " --print-ids");
    ASSERT_EQ(ids.exit_code, 0) << ids.err;
    std::istringstream tokens(ids.out);
    const std::vector<int32_t> generated{std::istream_iterator<int32_t>(tokens), {}};
    EXPECT_EQ(generated, run["generated_ids"].get<std::vector<int32_t>>());
    matched += text_matches && prompt_ids_in(r.err) == expected_prompt;
  }
  std::printf("text end to end: %d of %zu runs printed exactly transformers' text\n", matched, runs.size());
}

TEST(TextEndToEnd, SpecialKeepsSpecialTokens) {
  // The golden replies hold no special token, so --special must print the same text (transformers' `text`).
  const nlohmann::json run = expected_runs()[1];
  const test::CommandResult r =
      qwen3("run " + model_args() + " --prompt " + shell_quote(run["prompt"]) +
            " --temperature 0 --max-tokens 40 --ignore-eos --special" + flags_of(run));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, run["text"].get<std::string>());
}

TEST(TextEndToEnd, PromptIdsDecodeToText) {
  // --prompt-ids without --print-ids prints text when the checkpoint has a tokenizer.
  const nlohmann::json run = expected_runs()[2];  // raw
  std::string ids;
  for (int32_t id : run["prompt_ids"].get<std::vector<int32_t>>())
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const test::CommandResult r =
      qwen3("run " + model_args() + " --prompt-ids " + ids + " --temperature 0 --max-tokens 40 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, run["text_skip_special"].get<std::string>());
}

// A copy of the checkpoint (weights linked, not copied) whose text files the test chooses.
class RunTextErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("run-text");
    for (const char* file : {"config.json", "generation_config.json", "model.safetensors"})
      std::filesystem::create_symlink(std::filesystem::absolute(kCheckpoint / file), dir_ / file);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void add_tokenizer_files() {
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
      std::filesystem::copy_file(kTokenizerDir / file, dir_ / file);
  }
  test::CommandResult run(const std::string& args) {
    return qwen3("run --model " + dir_.string() + " --backend cpu --max-tokens 2 --temperature 0 " + args);
  }
  void expect_error(const test::CommandResult& r, const std::string& needle, int exit_code = 1) {
    EXPECT_EQ(r.exit_code, exit_code) << "stdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  std::filesystem::path dir_;
};

TEST_F(RunTextErrors, TokenizerFilesInTheModelDirectoryAreFound) {
  add_tokenizer_files();
  const test::CommandResult r = run("--prompt hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
}

TEST_F(RunTextErrors, MissingTokenizer) {
  expect_error(run("--prompt hello"), "no tokenizer.json in " + dir_.string());
  expect_error(run("--prompt hello --tokenizer /nonexistent/tokenizer.json"), "does not exist");
  // Ids still work without a tokenizer: printed as ids, with a note.
  const test::CommandResult ids = run("--prompt-ids 1,2,3");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_NE(ids.err.find("printing token ids"), std::string::npos) << ids.err;
  std::istringstream tokens(ids.out);
  EXPECT_EQ(std::vector<int>(std::istream_iterator<int>(tokens), {}).size(), 2u);
}

TEST_F(RunTextErrors, MalformedTokenizer) {
  test::write_file(dir_ / "tokenizer.json", "{\"model\": ");
  expect_error(run("--prompt hello"), "tokenizer.json");
}

TEST_F(RunTextErrors, InvalidUtf8) {
  add_tokenizer_files();
  // printf's octal escapes: /bin/sh may be dash, which has no $'...'.
  expect_error(run("--prompt \"$(printf 'ab\\377c')\""), "--prompt is not valid UTF-8 (byte 2");
  expect_error(run("--raw --prompt \"$(printf '\\300\\200')\""), "--prompt is not valid UTF-8 (byte 0");
  expect_error(run("--prompt hi --system \"$(printf '\\355\\240\\200')\""), "--system is not valid UTF-8");
}

TEST_F(RunTextErrors, TemplateProblems) {
  std::filesystem::copy_file(kTokenizerDir / "tokenizer.json", dir_ / "tokenizer.json");
  // No tokenizer_config.json: nothing to apply, but --raw needs none.
  expect_error(run("--prompt hello"), "no chat template to apply (pass --raw");
  EXPECT_EQ(run("--raw --prompt hello").exit_code, 0);

  test::write_file(dir_ / "tokenizer_config.json",
                   R"({"chat_template": "{% for m in messages %}{{ m.content "})");
  expect_error(run("--prompt hello"), "chat template");
  test::write_file(dir_ / "tokenizer_config.json",
                   R"({"chat_template": "{{ raise_exception('this template takes no system message') }}"})");
  expect_error(run("--prompt hello --system 'be brief'"), "this template takes no system message");
}

TEST_F(RunTextErrors, BadCommandLines) {
  add_tokenizer_files();
  expect_error(run(""), "give the prompt with --prompt TEXT or --prompt-ids");
  expect_error(run("--prompt hi --prompt-ids 1,2"), "excludes", 2);
  expect_error(run("--raw --system x --prompt hi"), "excludes", 2);
  expect_error(run("--no-think --prompt-ids 1,2"), "excludes", 2);
  // The empty template prompt is valid (one empty user turn); an empty raw prompt is not.
  EXPECT_EQ(run("--prompt ''").exit_code, 0);
  expect_error(run("--raw --prompt ''"), "the prompt is empty");
  expect_error(run("--prompt 'a long prompt that does not fit' --ctx-size 8"), "context holds 8");
}

}  // namespace
}  // namespace qwen3
