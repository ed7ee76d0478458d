#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "model/sampler.h"

namespace qwen3 {
namespace {

std::vector<float> logits_of(std::initializer_list<float> values) { return std::vector<float>(values); }

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 4);
  auto l = logits_of({1.0f, 3.0f, 3.0f, -1.0f});
  EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 42;
  std::vector<int32_t> a, b;
  for (auto* out : {&a, &b}) {
    Sampler s(p, 5);
    for (int i = 0; i < 200; ++i) {
      auto l = logits_of({0.1f, 0.5f, 0.2f, 0.0f, 0.4f});
      out->push_back(s.sample(l));
    }
  }
  EXPECT_EQ(a, b);
  p.seed = 43;
  Sampler s(p, 5);
  std::vector<int32_t> c;
  for (int i = 0; i < 200; ++i) {
    auto l = logits_of({0.1f, 0.5f, 0.2f, 0.0f, 0.4f});
    c.push_back(s.sample(l));
  }
  EXPECT_NE(a, c);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  SamplingParams p;
  p.temperature = 2.0;
  p.seed = 7;
  Sampler s(p, 3);
  const std::vector<float> base = {0.0f, 1.0f, 2.0f};
  std::map<int32_t, int> counts;
  const int n = 60000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    counts[s.sample(l)]++;
  }
  double z = 0;
  for (float v : base) z += std::exp(v / 2.0);
  for (int i = 0; i < 3; ++i) {
    const double expected = std::exp(base[size_t(i)] / 2.0) / z;
    EXPECT_NEAR(double(counts[i]) / n, expected, 0.01) << "token " << i;
  }
}

TEST(Sampler, FiltersKeepOnlyAllowedTokens) {
  const std::vector<float> base = {3.0f, 2.9f, 1.0f, 0.5f, -4.0f};
  auto sampled_set = [&](SamplingParams p) {
    std::set<int32_t> seen;
    Sampler s(p, 5);
    for (int i = 0; i < 3000; ++i) {
      auto l = base;
      seen.insert(s.sample(l));
    }
    return seen;
  };
  SamplingParams p;
  p.temperature = 5.0;  // flat enough that every token would appear without filters
  EXPECT_EQ(sampled_set(p).size(), 5u);
  p.top_k = 2;
  EXPECT_EQ(sampled_set(p), (std::set<int32_t>{0, 1}));
  p.top_k = 0;
  p.temperature = 1.0;
  p.top_p = 0.5;  // token 0 alone has ~0.49 of the mass: the prefix needs token 1 too
  EXPECT_EQ(sampled_set(p), (std::set<int32_t>{0, 1}));
  p.top_p = 1.0;
  p.min_p = 0.5;  // p(token 1) / p(token 0) = e^-0.1 > 0.5; token 2 is e^-2 < 0.5
  EXPECT_EQ(sampled_set(p), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, PenaltiesFollowTransformersAndOpenAI) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0;
  Sampler s(p, 3);
  s.add_prompt(std::vector<int32_t>{0});
  auto l = logits_of({4.0f, 3.0f, -1.0f});
  EXPECT_EQ(s.sample(l), 1);  // 4 / 2 = 2 < 3
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  SamplingParams q;
  q.temperature = 0;
  q.frequency_penalty = 0.5;
  q.presence_penalty = 0.25;
  Sampler s2(q, 3);
  s2.add_prompt(std::vector<int32_t>{1});  // the prompt does not count for OpenAI penalties
  s2.accept(0);
  s2.accept(0);
  auto l2 = logits_of({1.0f, 0.5f, 0.0f});
  s2.sample(l2);
  EXPECT_FLOAT_EQ(l2[0], 1.0f - (2 * 0.5f + 0.25f));
  EXPECT_FLOAT_EQ(l2[1], 0.5f);
  // Negative logits grow more negative under the repetition penalty.
  SamplingParams r;
  r.temperature = 0;
  r.repetition_penalty = 2.0;
  Sampler s3(r, 2);
  s3.accept(1);
  auto l3 = logits_of({-1.0f, -0.6f});
  EXPECT_EQ(s3.sample(l3), 0);
  EXPECT_FLOAT_EQ(l3[1], -1.2f);
}

TEST(Sampler, RejectsBadParams) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THROW(Sampler(p, 3), InputError);
  p = {};
  p.top_p = 0;
  EXPECT_THROW(Sampler(p, 3), InputError);
  p = {};
  p.min_p = 1.5;
  EXPECT_THROW(Sampler(p, 3), InputError);
  p = {};
  p.repetition_penalty = 0;
  EXPECT_THROW(Sampler(p, 3), InputError);
  p = {};
  p.temperature = NAN;
  EXPECT_THROW(Sampler(p, 3), InputError);
}

}  // namespace
}  // namespace qwen3
