// The CUDA engine end to end on the small golden checkpoints: against transformers' float32 outputs
// (tests/data/golden/*/expected.json) and the CPU reference, for the fast path and the v0 path. Skips without a GPU.
//
// Error bounds (bf16 activations, rounded at every op as transformers' bf16 forward does):
//   last-position logits: max |gpu - ref| / max |ref| <= 3e-2 (measured values are printed);
//   argmax per position and greedy tokens: identical wherever the fp32 reference's top-1/top-2 margin exceeds
//   kMarginBound x max|logit| (below that, bf16 rounding may legitimately pick the runner-up); a greedy run that
//   diverges must do so at such a near-tie, and the test reports the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "engine/cuda_backend.h"
#include "io/checkpoint.h"
#include "kernels/registry.h"
#include "model/cpu_backend.h"
#include "model/generate.h"

namespace qwen3 {
namespace {

const std::filesystem::path kGoldenDir = std::filesystem::path(QWEN3_TEST_DATA_DIR) / "golden";
constexpr double kLogitsRelBound = 3e-2;
constexpr double kMarginBound = 2e-2;

std::vector<std::string> golden_cases() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kGoldenDir, ec))
    if (std::filesystem::exists(entry.path() / "expected.json")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct Param {
  std::string golden_case;
  std::string path;  // engine preset
};

// gtest prints parameters in failure messages and test listings.
void PrintTo(const Param& p, std::ostream* os) { *os << p.golden_case << "/" << p.path; }

class EngineGolden : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  }
};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::abs(x)));
  return m;
}

TEST_P(EngineGolden, LogitsArgmaxAndGreedyMatchTransformers) {
  const auto dir = kGoldenDir / GetParam().golden_case;
  const auto expected = nlohmann::json::parse(read_text_file(dir / "expected.json", 512u << 20));
  auto checkpoint = Checkpoint::open(dir);
  // "persistent": the fast path with the one-launch decode layer stack; "attention_o": with the attention and the
  // o projection in one launch (the newest version); "wavefront": with v8, which also takes the QKV projection into
  // that launch; "mlp": with the newest batch-1 one-launch MLP; "mlp_off": the fast path with the MLP as two GEMVs
  // (each where the device supports it; elsewhere the same as fast). "Newest" skips the counter hand-off versions
  // (KernelVersion::handoff), which run their base version here (EngineHandoff runs them with their hand-offs).
  const std::string& path = GetParam().path;
  const bool persistent = path == "persistent", attention_o = path == "attention_o";
  const bool variant = persistent || attention_o || path == "wavefront" || path == "mlp" || path == "mlp_off";
  EngineOptions options = EngineOptions::preset(variant ? "fast" : path);
  if (persistent) options.decode_layers = "v1_decode_layers_persistent";
  if (attention_o) {
    const auto& versions = kernels::qkv_attention_o_versions();
    options.decode_attention_o =
        std::find_if(versions.rbegin(), versions.rend(), [](const auto& v) { return !v.handoff; })->name;
  }
  if (path == "wavefront") options.decode_attention_o = "v8_qkv_attention_o_wavefront";
  if (path == "mlp") {  // the newest batch-1 version (v14 and later batched ones take normed inputs of 2 tokens)
    const auto& mlps = kernels::norm_mlp_versions();
    options.decode_mlp = std::find_if(mlps.rbegin(), mlps.rend(), [](const auto& v) {
                           return !v.handoff && std::string_view(v.name).find("batched") == std::string_view::npos;
                         })->name;
  }
  if (path == "mlp_off") options.decode_mlp = "off";
  options.context = 512;
  CudaEngine engine(*checkpoint, options);
  CpuBackend cpu(*checkpoint);

  for (const auto& prompt : expected["prompts"]) {
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    const auto want = prompt["last_logits"].get<std::vector<float>>();
    ForwardOutput gpu_out, cpu_out;
    engine.truncate(0);
    engine.forward(ids, true, gpu_out);
    cpu.truncate(0);
    cpu.forward(ids, true, cpu_out);
    double max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, double(std::abs(gpu_out.last_logits[i] - want[i])));
    const double scale = max_abs(want);
    const double rel = max_diff / scale;
    std::printf("[ %s %s T=%zu ] logits max|diff|/max|ref| = %.3e\n", GetParam().golden_case.c_str(),
                GetParam().path.c_str(), ids.size(), rel);
    EXPECT_LE(rel, kLogitsRelBound) << "T=" << ids.size();
    const auto want_argmax = prompt["argmax"].get<std::vector<int32_t>>();
    int near_ties = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (gpu_out.argmax[t] == want_argmax[t]) continue;
      const bool near_tie = cpu_out.top2_margin[t] < kMarginBound * scale;
      near_ties += near_tie;
      EXPECT_TRUE(near_tie) << "argmax differs at position " << t << " of T=" << ids.size() << " with fp32 margin "
                            << cpu_out.top2_margin[t];
    }
    if (near_ties) std::printf("  %d argmax differences, all at near-ties\n", near_ties);
  }

  // Greedy continuation through the generation loop (device sampling, graph-captured decode).
  const auto prompt = expected["greedy"]["prompt"].get<std::vector<int32_t>>();
  const auto want = expected["greedy"]["tokens"].get<std::vector<int32_t>>();
  GenerateOptions g;
  g.max_tokens = int64_t(want.size());
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  const GenerateResult got = generate(engine, prompt, g);
  ASSERT_EQ(got.tokens.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (got.tokens[i] == want[i]) continue;
    // Diverged: the reference must have been at a near-tie at this step.
    std::vector<int32_t> context(prompt);
    context.insert(context.end(), want.begin(), want.begin() + ptrdiff_t(i));
    ForwardOutput ref;
    cpu.truncate(0);
    cpu.forward(context, true, ref);
    const double scale = max_abs(ref.last_logits);
    std::printf("  greedy diverges at step %zu: gpu %d, transformers %d, fp32 margin %.4g (scale %.3g)\n", i,
                got.tokens[i], want[i], ref.top2_margin.back(), scale);
    EXPECT_LT(ref.top2_margin.back(), kMarginBound * scale) << "greedy diverged at step " << i << " without a near-tie";
    break;
  }
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const auto& name : golden_cases())
    for (const char* path : {"fast", "v0", "cublas", "persistent", "attention_o", "wavefront", "mlp", "mlp_off"})
      p.push_back({name, path});
  return p;
}

INSTANTIATE_TEST_SUITE_P(Golden, EngineGolden, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& param_info) {
                           return param_info.param.golden_case + "_" + param_info.param.path;
                         });

// Batched decode must give each sequence exactly the tokens it gets alone (slots are independent).
TEST(EngineBatch, SlotsAreIndependent) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  auto checkpoint = Checkpoint::open(kGoldenDir / "untied_gqa2_hd128");
  EngineOptions options;
  options.max_batch = 4;
  options.context = 256;
  // Alone (batch 1) and together (batch 4) must run kernels with the same summation order for the tokens to be
  // comparable bit for bit: the one-launch layer stack and the one-launch attention + o projection run at batch 1
  // only, so they are off here (EngineGolden checks them against transformers).
  options.decode_layers = "off";
  options.decode_attention_o = "off";
  options.decode_mlp = "off";
  CudaEngine engine(*checkpoint, options);
  SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {40, 41, 42, 43, 44, 45, 46}, {7}, {100, 200, 300, 400, 500}};
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    engine.set_sampling(0, greedy);
    engine.reset_slot(0);
    std::vector<int32_t> tokens{engine.prefill(0, p)};
    const auto rest = engine.decode(1, 20);
    tokens.insert(tokens.end(), rest.begin(), rest.end());
    alone.push_back(tokens);
  }
  for (int64_t b = 0; b < 4; ++b) {
    engine.set_sampling(b, greedy);
    engine.reset_slot(b);
  }
  std::vector<std::vector<int32_t>> together(4);
  for (int64_t b = 0; b < 4; ++b) together[size_t(b)].push_back(engine.prefill(b, prompts[size_t(b)]));
  const auto steps = engine.decode(4, 20);
  for (int64_t s = 0; s < 20; ++s)
    for (int64_t b = 0; b < 4; ++b) together[size_t(b)].push_back(steps[size_t(s * 4 + b)]);
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(together[b], alone[b]) << "slot " << b;
}

// Batch-2 decode with the MLP in one launch (EngineOptions::decode_mlp_batched, v14, whose kernel takes hidden
// 4096 only: a random Qwen3-8B-shaped model cut to 3 layers, the first two running it) against the same model and
// seed with the MLP as four launches (off). Step by step, each slot's logits agree within the golden bound (max
// |diff| / max |ref| <= 3e-2: the fp32 reductions of the one-launch MLP sum in another order, so the bits may
// differ), and so do the greedy tokens, except at a near-tie of the reference (then the steps after it are not
// comparable and the test stops). That the check can fail: with the batched MLP's launch skipped (its delta stays
// zero) the first step's logits must move by more than the bound. Where the device has no one-launch MLP (before
// sm_90) both run four launches (as many launches a step) and that last check is skipped.
TEST(EngineBatch, BatchedMlpMatchesFourLaunches) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  ModelConfig config = synthetic_qwen3_config("qwen3-8b");
  config.num_layers = 3;
  const auto make = [&](const std::string& batched, bool skip_mlp = false, const std::string& fold = "off") {
    EngineOptions options;
    options.max_batch = 2;
    options.context = 64;
    options.decode_mlp_batched = batched;
    options.decode_norm_gemv_batched = fold;
    if (skip_mlp) options.skip_launches.insert("mlp_split_down");
    auto engine = std::make_unique<CudaEngine>(config, 7, options);
    SamplingParams greedy;
    greedy.temperature = 0;
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {40, 41, 42, 43, 44}};
    for (int64_t b = 0; b < 2; ++b) {
      engine->set_sampling(b, greedy);
      engine->reset_slot(b);
      engine->prefill(b, prompts[size_t(b)]);
    }
    return engine;
  };
  // With the delta folded into the next layer too (EngineOptions::decode_norm_gemv_batched, v19; off by default).
  for (const std::string fold : {"off", "v19_gemv_norm_ring_tokens"}) {
    SCOPED_TRACE("decode_norm_gemv_batched " + fold);
    auto one_launch = make("v14_mlp_split_down_batched", false, fold);
    auto four_launches = make("off");
    const auto to_floats = [](const std::vector<uint16_t>& bits) {
      std::vector<float> v(bits.size());
      for (size_t i = 0; i < bits.size(); ++i) v[i] = bf16_to_f32(bits[i]);
      return v;
    };
    const auto rel_diff = [&](const std::vector<float>& got, const std::vector<float>& want) {
      double max_diff = 0;
      for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, double(std::abs(got[i] - want[i])));
      return max_diff / max_abs(want);
    };
    for (int step = 0; step < 4; ++step) {
      const auto got_tokens = one_launch->decode(2, 1);
      const auto want_tokens = four_launches->decode(2, 1);
      bool diverged = false;
      for (int64_t b = 0; b < 2; ++b) {
        const auto got = to_floats(one_launch->last_logits_bits(b));
        const auto want = to_floats(four_launches->last_logits_bits(b));
        const double scale = max_abs(want), rel = rel_diff(got, want);
        std::printf("[ batched mlp%s step %d slot %lld ] logits max|diff|/max|ref| = %.3e\n",
                    fold == "off" ? "" : ", delta folded,", step, (long long)b, rel);
        EXPECT_LE(rel, kLogitsRelBound) << "step " << step << " slot " << b;
        if (got_tokens[size_t(b)] == want_tokens[size_t(b)]) continue;
        std::vector<float> sorted = want;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        EXPECT_LT(sorted[0] - sorted[1], kMarginBound * scale)
            << "step " << step << " slot " << b << ": tokens " << got_tokens[size_t(b)] << " and "
            << want_tokens[size_t(b)] << " without a near-tie";
        diverged = true;
      }
      if (diverged) break;
    }
    // (fewer launches a step: the batched MLP ran)
    if (one_launch->launches_per_decode_step() < four_launches->launches_per_decode_step()) {
      auto without_mlp = make("v14_mlp_split_down_batched", true, fold);
      auto reference = make("off");
      without_mlp->decode(2, 1);
      reference->decode(2, 1);
      for (int64_t b = 0; b < 2; ++b) {
        const double rel =
            rel_diff(to_floats(without_mlp->last_logits_bits(b)), to_floats(reference->last_logits_bits(b)));
        std::printf("[ batched mlp skipped, slot %lld ] logits max|diff|/max|ref| = %.3e\n", (long long)b, rel);
        EXPECT_GT(rel, kLogitsRelBound) << "slot " << b << ": the MLP's output does not show in the logits";
      }
    } else {
      std::printf("[ batched mlp ] not run on this device (as many launches a step): both ran four launches\n");
    }
  }
}

// Counter hand-offs between the batch-1 layer's launches in place of their PDL waits (kernels/common/handoff.cuh):
// decode_mlp v19_mlp_split_down_handoff with norm_gemv v25_gemv_norm_ring_handoff (the MLP -> next QKV GEMV hand-off
// alone), and with decode_attention_o v33_qkv_attention_o_counted too (all three: QKV GEMV -> attention -> MLP ->
// next QKV GEMV), against the same model and seed with the defaults' PDL waits, batch 1, graph-captured decode
// steps. v19 and v25 take hidden 4096 only: a random Qwen3-8B-shaped model cut to 3 layers. Step by step the logits
// agree within the golden bound and the greedy tokens match except at a near-tie of the reference (as
// BatchedMlpMatchesFourLaunches: the MLP's fp32 reductions meet in no fixed order, so the bits may differ); a launch
// that went on before every CTA of the one before had counted itself would read part of its output. The hand-offs
// must have run: 2 a step for the first pair (into layers 1 and 2), 8 for all three (3 a layer but the first QKV
// GEMV's wait, after the embedding), 0 in the reference (handoffs_per_decode_step). With a pause between polls too.
// Before sm_90 (no one-launch MLP) nothing hands off, and only that is checked.
TEST(EngineHandoff, CountedLaunchesMatchPdlWaits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  ModelConfig config = synthetic_qwen3_config("qwen3-8b");
  config.num_layers = 3;
  struct Config {
    const char* name;
    bool attention;  // v33 as well
    int32_t poll_ns;
    int64_t handoffs;  // a step, on sm_90
  };
  const auto make = [&](const Config* with) {
    EngineOptions options;
    options.context = 64;
    if (with) {
      options.decode_mlp = "v19_mlp_split_down_handoff";
      options.norm_gemv = "v25_gemv_norm_ring_handoff";
      if (with->attention) options.decode_attention_o = "v33_qkv_attention_o_counted";
      options.handoff_poll_ns = with->poll_ns;
    }
    auto engine = std::make_unique<CudaEngine>(config, 7, options);
    SamplingParams greedy;
    greedy.temperature = 0;
    engine->set_sampling(0, greedy);
    engine->reset_slot(0);
    engine->prefill(0, std::vector<int32_t>{5, 6, 7, 8});
    return engine;
  };
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  const int64_t L = config.num_layers;
  for (const Config& with : {Config{"mlp -> qkv", false, 0, L - 1}, Config{"all three", true, 0, 3 * L - 1},
                             Config{"all three, 200 ns polls", true, 200, 3 * L - 1}}) {
    SCOPED_TRACE(with.name);
    auto counted = make(&with);
    auto reference = make(nullptr);
    bool diverged = false;
    for (int step = 0; step < 6 && !diverged; ++step) {
      const auto got_tokens = counted->decode(1, 1);
      const auto want_tokens = reference->decode(1, 1);
      std::vector<float> got, want;
      for (const uint16_t b : counted->last_logits_bits(0)) got.push_back(bf16_to_f32(b));
      for (const uint16_t b : reference->last_logits_bits(0)) want.push_back(bf16_to_f32(b));
      double max_diff = 0;
      for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, double(std::abs(got[i] - want[i])));
      const double scale = max_abs(want), rel = max_diff / scale;
      std::printf("[ hand-offs %s, step %d ] logits max|diff|/max|ref| = %.3e\n", with.name, step, rel);
      EXPECT_LE(rel, kLogitsRelBound) << "step " << step;
      if (got_tokens[0] != want_tokens[0]) {
        std::vector<float> sorted = want;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        EXPECT_LT(sorted[0] - sorted[1], kMarginBound * scale)
            << "step " << step << ": tokens " << got_tokens[0] << " and " << want_tokens[0] << " without a near-tie";
        diverged = true;
      }
    }
    EXPECT_EQ(reference->handoffs_per_decode_step(), 0);
    if (major >= 9) {  // (the one-launch MLP runs from sm_90)
      EXPECT_EQ(counted->handoffs_per_decode_step(), with.handoffs);
    } else {
      EXPECT_EQ(counted->handoffs_per_decode_step(), 0);
      std::printf("[ hand-offs ] no one-launch MLP on this device: nothing hands off\n");
    }
  }
}

// The greedy tokens of a prefill of `prompt` and six decode steps (graph replays) on the random model of `config`
// (seed 7), and the last logits' hash: what two versions that must give the same bits are compared on.
std::pair<std::vector<int32_t>, uint64_t> greedy_tokens_and_hash(const ModelConfig& config,
                                                                 const EngineOptions& options,
                                                                 const std::vector<int32_t>& prompt) {
  CudaEngine engine(config, 7, options);
  SamplingParams greedy;
  greedy.temperature = 0;
  engine.set_sampling(0, greedy);
  engine.reset_slot(0);
  std::vector<int32_t> tokens{engine.prefill(0, prompt)};
  const auto rest = engine.decode(1, 6);
  tokens.insert(tokens.end(), rest.begin(), rest.end());
  return {tokens, engine.last_logits_hash(0)};
}

// norm_gemv v26 only moves rows between the QKV GEMV's CTAs (NormGemvArgs::row_ramp_permille and
// row_ramp_first_cta): each row's dot product is v22's, so a decode step gives the same tokens and logits bits with
// any ramp as with v22. v26's own kernel takes hidden 4096 only: a random Qwen3-8B-shaped model cut to 3 layers.
// decode_mlp off: the one-launch MLP's fp32 reductions meet in no fixed order, so with it the bits would vary run to
// run.
TEST(EngineQkvRamp, SameBitsAsEvenRows) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  ModelConfig config = synthetic_qwen3_config("qwen3-8b");
  config.num_layers = 3;
  const auto run = [&](const std::string& norm_gemv, int32_t ramp, int32_t first_cta) {
    EngineOptions options;
    options.context = 64;
    options.decode_mlp = "off";
    options.norm_gemv = norm_gemv;
    options.qkv_row_ramp_permille = ramp;
    options.qkv_row_ramp_first_cta = first_cta;
    return greedy_tokens_and_hash(config, options, {5, 6, 7, 8});
  };
  const auto even = run("v22_gemv_norm_ring_paced", 0, 0);
  for (const auto& [ramp, first_cta] : std::vector<std::pair<int32_t, int32_t>>{
           {450, 0}, {-1000, 0}, {1000, 0}, {600, 44}, {1000, 100}}) {
    const auto ramped = run("v26_gemv_norm_ring_ramp", ramp, first_cta);
    EXPECT_EQ(ramped.first, even.first) << "ramp " << ramp << " from CTA " << first_cta;
    EXPECT_EQ(ramped.second, even.second) << "ramp " << ramp << " from CTA " << first_cta;
  }
}

// qkv_attention_o v34-v36, v40 and v42-v46 change only how the splits, the head merges and the waits for the merged
// heads order their memory (v34: one thread's release / acquire on the counts instead of every thread's fence; v35:
// tagged words, the head's last split merging it from the others' words and its own shared memory; v36: the merge's
// loads at once; v40: v36 up to 1536 keys, v34 past them; v42: v40 triggering the next launch once the splits are in;
// v43: v42 reading a split CTA's residual rows in its prepare step; v44: v43 where a split takes at most two K/V tiles,
// v42 past; v45: v44 with a split's K/V tiles in flight at once where they fit its ring; v46: v45 issuing them before
// the PDL wait, also run eagerly, where the position it reads before the wait may be the previous step's): the same
// merge arithmetic as v25, so a decode step gives the same tokens and logits bits. Three contexts,
// so that v25's short kernel (one split a head at 64 positions, several at 512) and its kernel for longer positions
// (more splits than v35's merge takes at once) all run; at 4096 v37-v39 and v40 run v34's kernel. A random
// Qwen3-8B-shaped model cut to 3 layers; decode_mlp off (its fp32 reductions meet in no fixed order).
TEST(EngineAttentionO, ChainSyncSameBitsAsV25) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  ModelConfig config = synthetic_qwen3_config("qwen3-8b");
  config.num_layers = 3;
  const std::vector<std::pair<int32_t, int32_t>> contexts_and_prompts = {{64, 4}, {512, 200}, {4096, 2500}};
  for (const auto& [context, prompt_len] : contexts_and_prompts) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (int32_t i = 0; i < prompt_len; ++i) prompt[size_t(i)] = 5 + (i * 7919) % 1000;
    const auto run = [&](const std::string& attention_o, bool cuda_graph = true) {
      EngineOptions options;
      options.context = context;
      options.decode_mlp = "off";
      options.decode_attention_o = attention_o;
      options.cuda_graph = cuda_graph;
      return greedy_tokens_and_hash(config, options, prompt);
    };
    const auto v25 = run("v25_qkv_attention_o_scaled_early");
    for (const char* version : {"v34_qkv_attention_o_release_counts", "v35_qkv_attention_o_tagged_merge",
                                "v36_qkv_attention_o_merge_at_once", "v40_qkv_attention_o_merge_at_once_short",
                                "v42_qkv_attention_o_trigger_late_short", "v43_qkv_attention_o_residual_in_prepare",
                                "v44_qkv_attention_o_residual_in_prepare_short", "v45_qkv_attention_o_tiles_at_once",
                                "v46_qkv_attention_o_tiles_early"}) {
      const auto got = run(version);
      EXPECT_EQ(got.first, v25.first) << version << ", context " << context;
      EXPECT_EQ(got.second, v25.second) << version << ", context " << context;
    }
    const auto eager = run("v46_qkv_attention_o_tiles_early", false);
    EXPECT_EQ(eager.first, v25.first) << "v46 eager, context " << context;
    EXPECT_EQ(eager.second, v25.second) << "v46 eager, context " << context;
    // v37-v39 merge the same bits inside each launch, but their 120 CTAs leave the next norm its partial sums
    // of squares over other rows (35 a CTA, not 32), which that norm adds in another order: the same tokens, not
    // the same logits bits.
    // v41 sums a row's columns by head, so its residual is not v25's bit for bit either (at 4096 it runs v40).
    for (const char* version : {"v37_qkv_attention_o_cluster_merge", "v38_qkv_attention_o_cluster_trigger_late",
                                "v39_qkv_attention_o_cluster_rows", "v41_qkv_attention_o_cluster_heads"})
      EXPECT_EQ(run(version).first, v25.first) << version << ", context " << context;
  }
}

// L2 persistence is a cache policy only: the same tokens and the same logits bits with and without it.
TEST(EngineL2Persist, SameBitsAsWithout) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  auto checkpoint = Checkpoint::open(kGoldenDir / "untied_gqa2_hd128");
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {40, 41, 42, 43, 44, 45, 46, 9, 300};
  const auto run = [&](const std::string& l2_persist) {
    EngineOptions options;
    options.context = 256;
    options.decode_mlp = "off";  // its fp32 reductions meet in no fixed order: the bits would vary run to run
    options.l2_persist = l2_persist;
    CudaEngine engine(*checkpoint, options);
    engine.set_sampling(0, greedy);
    std::vector<int32_t> tokens{engine.prefill(0, prompt)};
    const auto rest = engine.decode(1, 40);  // graph replays: the window is on their kernel nodes
    tokens.insert(tokens.end(), rest.begin(), rest.end());
    return std::make_pair(tokens, engine.last_logits_hash(0));
  };
  const auto off = run("off");
  for (const char* mode : {"norms", "kv"}) {
    const auto with = run(mode);
    EXPECT_EQ(with.first, off.first) << mode;
    EXPECT_EQ(with.second, off.second) << mode;
  }
  {  // A set-aside below the window: a part of its lines persist.
    EngineOptions options;
    options.context = 256;
    options.l2_persist = "kv";
    options.l2_persist_bytes = 64 << 10;
    CudaEngine engine(*checkpoint, options);
    const CudaEngine::L2Persistence l2 = engine.l2_persistence();
    EXPECT_GT(l2.set_aside_bytes, 0);  // 64 KB as the driver rounds it
    EXPECT_EQ(l2.window_bytes, int64_t(2) * 2 * 256 * 2 * 128 * 2);  // K and V, 2 layers x 256 positions x 2 x 128
    EXPECT_FLOAT_EQ(l2.hit_ratio, float(std::min(1.0, double(l2.set_aside_bytes) / double(l2.window_bytes))));
  }
  EngineOptions bad;
  bad.l2_persist = "weights";
  EXPECT_THROW(CudaEngine(*checkpoint, bad), InputError);
}

// Seeded sampling on the device repeats; the kept set respects top-k.
TEST(EngineSampling, SeededAndFiltered) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU engine tests skipped";
  auto checkpoint = Checkpoint::open(kGoldenDir / "tied_gqa4_hd64_wide_q");
  CudaEngine engine(*checkpoint, EngineOptions{});
  GenerateOptions g;
  g.max_tokens = 40;
  g.ignore_eos = true;
  g.sampling.temperature = 30.0;  // this model's logits span tens of units: flatten them so draws vary
  g.sampling.seed = 9;
  const std::vector<int32_t> prompt{5, 6, 7};
  const auto a = generate(engine, prompt, g).tokens;
  const auto b = generate(engine, prompt, g).tokens;
  EXPECT_EQ(a, b);
  g.sampling.seed = 10;
  EXPECT_NE(generate(engine, prompt, g).tokens, a);
  // top-k 1 is greedy.
  g.sampling.top_k = 1;
  GenerateOptions greedy = g;
  greedy.sampling.temperature = 0;
  EXPECT_EQ(generate(engine, prompt, g).tokens, generate(engine, prompt, greedy).tokens);
}

}  // namespace
}  // namespace qwen3
