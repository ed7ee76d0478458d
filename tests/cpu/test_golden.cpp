// The CPU reference against Hugging Face transformers. tests/gen_golden.py (run on the GPU machine) built small
// random Qwen3 checkpoints and recorded transformers' float32 outputs on their bf16 weights; we must match them:
// last-position logits within max|diff| / max|ref| <= 1e-4, per-position argmax identical, greedy continuation
// identical.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "io/checkpoint.h"
#include "model/cpu_backend.h"
#include "model/generate.h"
#include "test_util.h"

namespace qwen3 {
namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(QWEN3_TEST_DATA_DIR) / "golden";

std::vector<std::string> golden_cases() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kGoldenDir, ec))
    if (std::filesystem::exists(entry.path() / "expected.json")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json load_expected(const std::string& name) {
  return nlohmann::json::parse(read_text_file(kGoldenDir / name / "expected.json", 512u << 20));
}

double relative_max_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(got[i]) - double(want[i])));
    max_ref = std::max(max_ref, std::abs(double(want[i])));
  }
  return max_diff / max_ref;
}

TEST(Golden, CasesArePresent) {
  // Tied and untied, GQA 1/2/4, head_dim 64 and 128, heads x head_dim != hidden: see tests/gen_golden.py.
  EXPECT_GE(golden_cases().size(), 4u) << "no golden data under " << kGoldenDir;
}

class GoldenCase : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCase, LogitsAndArgmaxMatchTransformers) {
  const nlohmann::json expected = load_expected(GetParam());
  auto checkpoint = Checkpoint::open(kGoldenDir / GetParam());
  CpuBackend backend(*checkpoint);
  for (const auto& prompt : expected["prompts"]) {
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    backend.truncate(0);
    ForwardOutput out;
    backend.forward(ids, true, out);
    const auto want = prompt["last_logits"].get<std::vector<float>>();
    ASSERT_EQ(out.last_logits.size(), want.size());
    const double rel = relative_max_diff(out.last_logits, want);
    EXPECT_LE(rel, 1e-4) << GetParam() << " T=" << ids.size();
    EXPECT_EQ(out.argmax, prompt["argmax"].get<std::vector<int32_t>>()) << GetParam() << " T=" << ids.size();
    char rel_text[32];
    std::snprintf(rel_text, sizeof(rel_text), "%.3e", rel);
    RecordProperty("rel_diff_T" + std::to_string(ids.size()), rel_text);
  }
}

TEST_P(GoldenCase, GreedyContinuationMatchesTransformers) {
  const nlohmann::json expected = load_expected(GetParam());
  auto checkpoint = Checkpoint::open(kGoldenDir / GetParam());
  CpuBackend backend(*checkpoint);
  const auto prompt = expected["greedy"]["prompt"].get<std::vector<int32_t>>();
  const auto want = expected["greedy"]["tokens"].get<std::vector<int32_t>>();
  GenerateOptions options;
  options.max_tokens = int64_t(want.size());
  options.sampling.temperature = 0;
  options.ignore_eos = true;
  const GenerateResult result = generate(backend, prompt, options);
  EXPECT_EQ(result.tokens, want) << GetParam();
}

std::string case_name(const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; }

INSTANTIATE_TEST_SUITE_P(Transformers, GoldenCase, ::testing::ValuesIn(golden_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenCase);

}  // namespace
}  // namespace qwen3
