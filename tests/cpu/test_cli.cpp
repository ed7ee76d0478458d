// The qwen3 binary end to end: results on stdout, clear errors and non-zero exits on bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "core/config.h"
#include "test_util.h"

namespace qwen3 {
namespace {

const std::string kQwen3 = QWEN3_BINARY;
const std::filesystem::path kGoldenDir = std::filesystem::path(QWEN3_TEST_DATA_DIR) / "golden";

test::CommandResult qwen3(const std::string& args) { return test::run_command(kQwen3 + " " + args); }

void expect_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << "stdout: " << r.out;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_tiny_checkpoint("cli"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string model() const { return "--model " + dir_.string() + " --backend cpu"; }
  std::filesystem::path dir_;
};

TEST_F(Cli, InfoDescribesTheModel) {
  auto r = qwen3("info --json --model " + dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hidden_size"], 32);
  EXPECT_EQ(j["num_kv_heads"], 2);
  EXPECT_EQ(j["parameters"], parse_model_config(test::tiny_config_json()).parameter_count());
  EXPECT_EQ(j["eos_token_ids"], nlohmann::json::array({7}));
}

TEST_F(Cli, LogitsJsonAndRunIds) {
  auto r = qwen3("logits --json --prompt-ids 1,2,3,4 " + model());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["logits"].size(), 50u);
  EXPECT_EQ(j["argmax"].size(), 4u);

  auto greedy = qwen3("run --prompt-ids 1,2,3 --max-tokens 12 --temperature 0 --ignore-eos --print-ids " + model());
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  std::istringstream tokens(greedy.out);
  std::vector<int> ids{std::istream_iterator<int>(tokens), {}};
  EXPECT_EQ(ids.size(), 12u);
  // The first generated token is the argmax of the prompt's last position.
  auto prompt_logits = nlohmann::json::parse(qwen3("logits --json --prompt-ids 1,2,3 " + model()).out);
  EXPECT_EQ(ids[0], prompt_logits["argmax"].back().get<int>());

  // Seeded sampling repeats; a different seed differs (over 40 tokens of a 50-token vocabulary).
  const std::string sample = "run --prompt-ids 5 --max-tokens 40 --temperature 1.5 --ignore-eos --print-ids " + model();
  auto a = qwen3(sample + " --seed 11");
  auto b = qwen3(sample + " --seed 11");
  auto c = qwen3(sample + " --seed 12");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST_F(Cli, StopsOnEos) {
  // Find which token greedy decoding produces first, declare it the eos id, and expect a one-token reply.
  auto first = qwen3("run --prompt-ids 1,2,3 --max-tokens 1 --temperature 0 --print-ids " + model());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const int token = std::stoi(first.out);
  test::write_file(dir_ / "generation_config.json", "{\"eos_token_id\": [" + std::to_string(token) + ", 49]}");
  auto r = qwen3("run --prompt-ids 1,2,3 --max-tokens 10 --temperature 0 --print-ids " + model());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::stoi(r.out), token);
  EXPECT_NE(r.err.find("stop"), std::string::npos) << r.err;
  auto ignored = qwen3("run --prompt-ids 1,2,3 --max-tokens 10 --temperature 0 --ignore-eos --print-ids " + model());
  std::istringstream tokens(ignored.out);
  EXPECT_EQ(std::vector<int>(std::istream_iterator<int>(tokens), {}).size(), 10u);
}

TEST_F(Cli, BadCommandLines) {
  EXPECT_EQ(qwen3("").exit_code, 2);
  EXPECT_EQ(qwen3("frobnicate").exit_code, 2);
  EXPECT_EQ(qwen3("run --prompt-ids 1").exit_code, 2);  // no --model
  EXPECT_EQ(qwen3("run --backend gpu --prompt-ids 1 " + model()).exit_code, 2);
  expect_error(qwen3("run --prompt-ids 1,x " + model()), "cannot parse token ids");
  expect_error(qwen3("run --prompt-ids '' " + model()), "--prompt-ids");
  expect_error(qwen3("run --prompt-ids , " + model()), "no token ids");
  expect_error(qwen3("run --prompt-ids 1,50 " + model()), "out of range");
  expect_error(qwen3("run --prompt-ids 1,-3 " + model()), "out of range");
  expect_error(qwen3("run --prompt-ids 1,99999999999 " + model()), "out of range");
  expect_error(qwen3("run --prompt-ids 1 --temperature -1 " + model()), "temperature");
  expect_error(qwen3("run --prompt-ids 1 --top-p 0 " + model()), "top-p");
  expect_error(qwen3("run --prompt-ids 1,2,3,4,5 --ctx-size 4 " + model()), "context holds 4");
  expect_error(qwen3("logits --prompt-ids 1,2,3,4,5 --ctx-size 4 " + model()), "context holds 4");
  expect_error(qwen3("run --prompt-ids 1 --model /nonexistent/dir"), "does not exist");
  // bench checks its flags before it needs a GPU.
  for (const char* trigger : {"frobnicate=0.5", "gemm_o_residual=2", "gemm_o_residual=0", "gemm_o_residual=0.5x",
                              "gemm_o_residual", "=0.5"})
    expect_error(qwen3(std::string("bench --synthetic qwen3-0.6b --pdl-trigger ") + trigger), "--pdl-trigger");
  for (const char* carveout : {"101", "-2", "x"})
    expect_error(qwen3(std::string("bench --synthetic qwen3-0.6b --smem-carveout ") + carveout), "--smem-carveout");
}

TEST_F(Cli, GenerationStopsAtTheContextEnd) {
  auto r = qwen3("run --prompt-ids 1,2,3 --max-tokens 100 --ctx-size 8 --temperature 0 --ignore-eos --print-ids " +
                 model());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream tokens(r.out);
  // 3 prompt tokens + 5 generated fill 8 positions; the 6th generated token is sampled from the last position.
  EXPECT_EQ(std::vector<int>(std::istream_iterator<int>(tokens), {}).size(), 6u);
  EXPECT_NE(r.err.find("context_full"), std::string::npos) << r.err;
}

TEST(CliBadCheckpoint, ClearErrors) {
  auto check = [](const std::filesystem::path& dir, const std::string& needle) {
    expect_error(qwen3("run --prompt-ids 1 --backend cpu --model " + dir.string()), needle);
    std::filesystem::remove_all(dir);
  };
  check(test::make_tiny_checkpoint("missing", true, {}, "model.layers.1.mlp.up_proj.weight"),
        "missing tensor 'model.layers.1.mlp.up_proj.weight'");
  check(test::make_tiny_checkpoint("untied", false, {}, "lm_head.weight"), "tie_word_embeddings = false");
  check(test::make_tiny_checkpoint("shape", true, {{"model.layers.0.self_attn.k_proj.weight", {16, 32}}}),
        "has shape [16, 32], config.json implies [32, 32]");

  auto dir = test::make_tiny_checkpoint("noconfig");
  std::filesystem::remove(dir / "config.json");
  check(dir, "no config.json");

  dir = test::make_tiny_checkpoint("badconfig");
  test::write_file(dir / "config.json", "{\"hidden_size\": ");
  check(dir, "not valid JSON");

  dir = test::make_tiny_checkpoint("arch");
  test::write_file(dir / "config.json", R"({"architectures": ["MistralForCausalLM"]})");
  check(dir, "unsupported architecture 'MistralForCausalLM'");

  dir = test::make_tiny_checkpoint("truncated");
  std::filesystem::resize_file(dir / "model.safetensors", std::filesystem::file_size(dir / "model.safetensors") - 10);
  check(dir, "file size mismatch");

  dir = test::make_tiny_checkpoint("lying");
  {
    std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    const char huge[8] = {char(0xff), char(0xff), char(0xff), char(0xff), 0, 0, 0, 0};
    f.write(huge, 8);
  }
  check(dir, "exceeds the limit");

  dir = test::make_tiny_checkpoint("badgen");
  test::write_file(dir / "generation_config.json", "{\"top_p\": \"high\"}");
  check(dir, "generation_config.json");
}

// `qwen3 bench` reports a step against the read ceiling measured on the GPU it ran on: bench/results holds peaks of
// the H200 and the H100, and the newest file may be the other model's.
TEST(MeasuredReadPeak, NewestOfTheSameGpu) {
  const auto dir = test::make_temp_dir("peaks");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  write("peaks-20261130T061951Z.json", R"({"gpu": "NVIDIA H200", "read_GB_s": 4530.5})");
  write("peaks-20261101T000000Z.json", R"({"gpu": "NVIDIA H200", "read_GB_s": 4400.0})");
  write("peaks-20261206T052554Z.json", R"({"gpu": "NVIDIA H100 80GB HBM3", "read_GB_s": 3090.9})");
  write("peaks-20261207T000000Z.json", "{ not json");
  write("peaks-20261208T000000Z.json", R"({"gpu": "NVIDIA H200", "read_GB_s": "fast"})");
  write("peaks-20261209T000000Z.txt", R"({"gpu": "NVIDIA H200", "read_GB_s": 1.0})");
  write("other-20261210T000000Z.json", R"({"gpu": "NVIDIA H200", "read_GB_s": 2.0})");

  const auto h200 = cli::newest_read_peak(dir, "NVIDIA H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_DOUBLE_EQ(h200->gb_s, 4530.5);
  EXPECT_EQ(h200->file, "peaks-20261130T061951Z.json");
  const auto h100 = cli::newest_read_peak(dir, "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100.has_value());
  EXPECT_DOUBLE_EQ(h100->gb_s, 3090.9);
  EXPECT_FALSE(cli::newest_read_peak(dir, "NVIDIA GeForce RTX 4080 Laptop GPU").has_value());
  EXPECT_FALSE(cli::newest_read_peak(dir / "missing", "NVIDIA H200").has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qwen3
