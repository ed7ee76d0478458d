// qwen3 bench: end-to-end prefill and decode timing on the GPU, on a real checkpoint (--model DIR) or on random
// weights of a real Qwen3 size made on the device (--synthetic qwen3-8b). Reports what a decode step must read
// (weights + KV cache), the effective bandwidth and its share of the measured peak (bench/results/peaks-*.json).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <random>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#ifdef QWEN3_HAVE_CUDA
#include "engine/cuda_backend.h"
#include "kernels/kernels.h"
#endif

namespace qwen3::cli {
#ifdef QWEN3_HAVE_CUDA
namespace {

constexpr double kDefaultPeakGBs = 4530.0;  // docs/gpu-machine.md: streaming read, 16-byte loads, 8 GB buffer

// The newest bench/results/peaks-*.json (written by bench/measure_peaks) under the source tree measured on this
// GPU model, else docs/gpu-machine.md's H200 figure.
double measured_read_peak(std::string& source) {
  const auto measured =
      newest_read_peak(std::filesystem::path(QWEN3_SOURCE_DIR) / "bench" / "results", cuda_device_name());
  if (measured) {
    source = measured->file;
    return measured->gb_s;
  }
  source = "default (docs/gpu-machine.md, H200)";
  return kDefaultPeakGBs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
#endif

namespace {

// --pdl-trigger SITE=F,...: the batch-1 decode launch sites that let the next kernel launch (PDL) only after a
// fraction F in (0, 1] of their work (EngineOptions::pdl_trigger).
std::map<std::string, float> parse_pdl_trigger(const std::vector<std::string>& items) {
  static const std::set<std::string> kSites = {"gemm_qkv_norm", "qkv_attention", "gemm_o_residual",
                                               "gemm_gate_up_swiglu_norm", "gemm_down_residual"};
  std::map<std::string, float> fractions;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    float fraction = -1.0f;
    size_t used = 0;
    try {
      if (eq != std::string::npos) fraction = std::stof(item.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const bool parsed = eq != std::string::npos && used > 0 && used == item.size() - eq - 1;
    if (!parsed || kSites.count(item.substr(0, eq)) == 0 || !(fraction > 0.0f && fraction <= 1.0f))
      throw InputError("--pdl-trigger wants SITE=F, SITE one of gemm_qkv_norm, qkv_attention, gemm_o_residual, "
                       "gemm_gate_up_swiglu_norm, gemm_down_residual and F in (0, 1]; got '" + item + "'");
    fractions[item.substr(0, eq)] = fraction;
  }
  return fractions;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time prefill and decode on the GPU (real checkpoint or synthetic weights)");
  struct Options {
    std::string model_dir, synthetic, path = "fast";
    int64_t prompt_len = 128, gen = 128, batch = 1, context = 0, warmup = 16, repeat = 3;
    uint64_t seed = 1;
    double peak = 0;
    bool json = false;
    bool profile = false;
    std::string decode_gemm, decode_attention, decode_qkv_attention, gate_up_swiglu;  // kernel overrides
    std::string gate_up_swiglu_batched;
    std::string norm_gemv, norm_gemv_batched, residual_gemv, norm_gate_up, decode_layers, attention_o;
    int32_t attention_o_keys_per_split = 0, attention_o_smem_kb = -1, attention_o_l2_rows = -1, attention_o_stages = 0,
            attention_o_chain_steps = -1, attention_o_claims_ahead = 0, attention_o_claim_static_tiles = 0,
            attention_o_late_rows = 0, attention_o_warm_code = 0, attention_o_stage_window = 0,
            attention_o_split_staging = 0, attention_o_stage_burst = 0, attention_o_split_prewait_rows = -1,
            attention_o_mlp_lead_window = 0, attention_o_mlp_lead_policy = 0, attention_o_handoff_rows = -1;
    std::optional<int32_t> attention_o_mlp_lead_skip_rows;  // (unset: EngineOptions' default)
    std::string attention_o_trace;  // file for the last step's stamps
    std::string mlp, mlp_batched, mlp_trace;  // mlp_trace: file for the last step's stamps
    std::string l2_persist;
    int64_t l2_persist_mb = 0;
    int32_t mlp_ctas = 0, mlp_prewait_rows = -1, mlp_delta_copies = 0, mlp_o_ctas = 0, mlp_o_ahead = -1,
            mlp_prewait_window = 0, mlp_late_cta_from = 0, mlp_late_prewait_groups = 1,
            mlp_beside_stages = 0, mlp_beside_l2_groups = 0, handoff_poll_ns = 0;
    int32_t smem_carveout = -1;
    int32_t mlp_l2_lead_ctas = -1;
    int32_t mlp_skew_from = 0, mlp_skew_permille = 0, mlp_lateness_permille = -1, mlp_lateness_max = -1;
    std::optional<int64_t> mlp_l2_lead_kb, qkv_l2_first_kb;
    bool mlp_o_l2_prefetch = false;
    std::optional<int64_t> mlp_l2_prefetch_mb;
    std::optional<bool> pdl, graph, fused_swiglu, fold_norms, last_mlp_one_launch, fold_advance;
    std::string sample_plain;
    int32_t qkv_prewait_groups = 0, qkv_claim_static_groups = 0, qkv_prewait_window = 0, qkv_late_cta_from = 0,
            qkv_late_prewait_groups = 1;
    std::optional<int32_t> qkv_row_ramp_permille;  // (unset: EngineOptions' default)
    std::optional<int32_t> qkv_row_ramp_first_cta;  // (unset: EngineOptions' default)
    std::optional<int64_t> attention_prefetch_mb;
    std::vector<std::string> skip;
    std::vector<std::string> pdl_trigger;
  };
  auto o = std::make_shared<Options>();
  auto* source = cmd->add_option_group("weights");
  source->add_option("--model,-m", o->model_dir, "Hugging Face checkpoint directory");
  source->add_option("--synthetic", o->synthetic, "Random weights of a Qwen3 size: qwen3-0.6b ... qwen3-32b");
  source->require_option(1);
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens (random ids)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen", o->gen, "Decode steps timed")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--batch", o->batch, "Sequences decoded together")->check(CLI::Range(1, 8));
  cmd->add_option("--path", o->path, "Kernel path: fast, fast-v1, cublas (cuBLAS GEMMs) or v0 (every baseline)")
      ->check(CLI::IsMember({"fast", "fast-v1", "cublas", "v0"}));
  cmd->add_option("--ctx-size", o->context, "KV-cache positions (default: prompt + warm-up + gen)");
  cmd->add_option("--warmup", o->warmup, "Untimed decode steps first")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--repeat", o->repeat, "Prefill timings (median reported)")->check(CLI::Range(1, 100));
  cmd->add_option("--seed", o->seed, "Seed of the synthetic weights and the prompt");
  cmd->add_option("--peak-gb-s", o->peak, "Read bandwidth to report against (default: newest measure_peaks)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag("--profile", o->profile,
                "Also time every launch of one decode step (eager, events between launches): where the time goes");
  cmd->add_option("--decode-gemm", o->decode_gemm, "Override the decode GEMM version (kernels/registry.cu)");
  cmd->add_option("--decode-attention", o->decode_attention, "Override the decode attention version");
  cmd->add_option("--qkv-attention", o->decode_qkv_attention,
                  "Override the fused decode attention (QK-norm + RoPE + cache + attention) version, or off");
  cmd->add_option("--attention-l2-prefetch-mb", o->attention_prefetch_mb,
                  "MB of each layer's o projection the fused attention pulls into L2 (versions with a prefetch)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--decode-layers", o->decode_layers,
                  "Override the one-launch batch-1 layer stack (decode_layers op) version, or off");
  cmd->add_option("--attention-o", o->attention_o,
                  "Override the batch-1 attention + o projection launch (qkv_attention_o op) version, or off");
  cmd->add_option("--attention-o-keys-per-split", o->attention_o_keys_per_split,
                  "Tuning: keys per split of --attention-o (0: the version's default)")
      ->check(CLI::Range(0, 2048));
  cmd->add_option("--attention-o-smem-kb", o->attention_o_smem_kb,
                  "Tuning: KB of shared memory a CTA of --attention-o takes (0: the version's default, 160; "
                  "-1: the engine's, 192)")
      ->check(CLI::Range(-1, 227));
  cmd->add_option("--attention-o-l2-rows", o->attention_o_l2_rows,
                  "Tuning: w_o rows past the staged ones a CTA of --attention-o prefetches into L2 (-1: default)")
      ->check(CLI::Range(-1, 1 << 20));
  cmd->add_option("--attention-o-stages", o->attention_o_stages,
                  "Tuning: K/V tiles in the ring of --attention-o's attention, 2, 4 or 8 (0: the version's choice)")
      ->check(CLI::IsMember({0, 2, 4, 8}));
  cmd->add_option("--attention-o-chain-steps", o->attention_o_chain_steps,
                  "Tuning: which of v3-v5's shortened-chain steps run, a bit mask: 1 K/V L2 prefetch before the "
                  "wait, 2 residual read after the split, 4 merge values with its statistics (-1: all); "
                  "diagnostics: 8 v1-v3 run their o loop twice, 16 every version its attention twice")
      ->check(CLI::Range(-1, 31));
  cmd->add_option("--attention-o-claims-ahead", o->attention_o_claims_ahead,
                  "Tuning: K/V tile claims a CTA of v10 keeps in flight, 2, 4 or 8 (0: 2)")
      ->check(CLI::IsMember({0, 2, 4, 8}));
  cmd->add_option("--attention-o-claim-static-tiles", o->attention_o_claim_static_tiles,
                  "Tuning: K/V tiles each split of v10 takes before it claims more (0: its ring's depth - 1)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--attention-o-late-rows", o->attention_o_late_rows,
                  "Tuning: v11's o rows in the K/V ring, a bit mask: 1 the CTA's last rows (0: the first unstaged), "
                  "2 copied once every split is in (0: once the CTA's ring is free)")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--attention-o-warm-code", o->attention_o_warm_code,
                  "Tuning: v14's and v15's warm-up passes, a bit mask: 1 skips v14's o loop warm-up, 2 the "
                  "attention's (0: every warm-up runs); diagnostics: 4 warms the attention up on the next kv "
                  "head's rows, 8 on one row as every key's. v17's first o pass: 1 none, 2 in the CTAs with a "
                  "split too, 8 those pull their unstaged rows into L2 instead; diagnostic 4: on shared memory in "
                  "place of the unstaged rows; 16 / 32 the CTAs without a split pull the split CTAs' unstaged rows "
                  "into L2 after / before it; v29: 64 keeps every CTA on its own o rows (no hand-off); v31: 128 "
                  "with 2, the split CTAs' first pass reads staged rows in place of unstaged ones; 256 the split "
                  "CTAs pull their unstaged rows into L2 as the heads come in; 512 the hand-off the other way (the "
                  "CTAs without a split give their last --attention-o-handoff-rows rows to the split CTAs); "
                  "diagnostic 1024 / 2048 / both: those stay 1 / 2 / 3 us on their SM after their work")
      ->check(CLI::Range(0, 4095));
  cmd->add_option("--attention-o-stage-window", o->attention_o_stage_window,
                  "Tuning: staged o rows v26's CTAs without a split keep in flight (0: 4)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--attention-o-mlp-lead-window", o->attention_o_mlp_lead_window,
                  "Tuning: MLP row copies v27's CTAs without a split keep in flight (0: 4; at most 8)")
      ->check(CLI::Range(0, 8));
  cmd->add_option("--attention-o-mlp-lead-skip-rows", o->attention_o_mlp_lead_skip_rows,
                  "Tuning: gate rows of each MLP CTA v27 / v28 leave out of their pull into L2 (default 24: those "
                  "norm_mlp v13 / v15 read before their PDL wait); --mlp-l2-lead-kb sets how many bytes past them")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--attention-o-mlp-lead-policy", o->attention_o_mlp_lead_policy,
                  "Tuning: the L2 priority of v27's pulled MLP rows: 0 evict-normal, 1 evict-first, 2 evict-last")
      ->check(CLI::Range(0, 2));
  cmd->add_option("--attention-o-handoff-rows", o->attention_o_handoff_rows,
                  "Tuning: the unstaged o rows each split CTA of v31 hands to the CTAs without a split, its last ones "
                  "(-1: all)")
      ->check(CLI::Range(-1, 1 << 16));
  cmd->add_option("--attention-o-split-staging", o->attention_o_split_staging,
                  "Tuning: how v26's CTAs with a split stage their o rows: 0 all at once before the PDL wait, 1 all "
                  "at once after their split, 2 paced from then")
      ->check(CLI::Range(0, 2));
  cmd->add_option("--attention-o-stage-burst", o->attention_o_stage_burst,
                  "Tuning: staged o rows v26's CTAs without a split issue at once before pacing the rest (0: the "
                  "window)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--attention-o-split-prewait-rows", o->attention_o_split_prewait_rows,
                  "Tuning: staged o rows v26's CTAs with a split issue before the PDL wait, the rest after their "
                  "split (-1: all)")
      ->check(CLI::Range(-1, 64));
  cmd->add_option("--attention-o-trace", o->attention_o_trace,
                  "Profiling: write the last decode step's per-CTA %globaltimer stamps of --attention-o to this JSON "
                  "file (bench/attention_o_trace.py summarizes it)");
  cmd->add_option("--mlp", o->mlp,
                  "Override the batch-1 one-launch MLP (norm_mlp op: gate|up, SwiGLU and down) version, or off");
  cmd->add_option("--mlp-batched", o->mlp_batched,
                  "Override the one-launch MLP version of batch-2 decode (norm_mlp op with normed inputs), or off");
  cmd->add_option("--mlp-ctas", o->mlp_ctas, "Tuning: CTAs of --mlp (0: one per SM)")->check(CLI::Range(0, 4096));
  cmd->add_option("--mlp-o-ctas", o->mlp_o_ctas, "Tuning, --mlp v7_mlp_with_o: CTAs that take the o rows (0: all)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--mlp-o-ahead", o->mlp_o_ahead,
                  "Tuning, --mlp v7_mlp_with_o: MLP row groups in flight during the o rows (-1: the ring's all)")
      ->check(CLI::Range(-1, 64));
  cmd->add_flag("--mlp-o-l2-prefetch", o->mlp_o_l2_prefetch,
                "Tuning, --mlp v7_mlp_with_o: the attention still pulls the o rows into L2");
  cmd->add_option("--mlp-prewait-rows", o->mlp_prewait_rows,
                  "Tuning: weight rows a CTA of --mlp loads before the PDL wait (-1: the version's default)")
      ->check(CLI::Range(-1, 64));
  cmd->add_option("--mlp-prewait-window", o->mlp_prewait_window,
                  "Tuning, --mlp v15: of those, ring groups in flight at once (0: 1)")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--mlp-late-cta-from", o->mlp_late_cta_from,
                  "Tuning, --mlp v16: the CTAs from this index on issue --mlp-late-prewait-groups ring groups before "
                  "the PDL wait (0: a quarter of the grid; -1: none)")
      ->check(CLI::Range(-1, 4096));
  cmd->add_option("--mlp-late-prewait-groups", o->mlp_late_prewait_groups,
                  "Tuning, --mlp v16: ring groups those CTAs issue before the PDL wait (default 1)")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--mlp-beside-stages", o->mlp_beside_stages,
                  "Tuning, --mlp v18: ring stages of 4 rows a CTA keeps, 2-5 (0: 4); with --attention-o-smem-kb the "
                  "two CTAs must fit in an SM's shared memory together")
      ->check(CLI::Range(0, 5));
  cmd->add_option("--handoff-poll-ns", o->handoff_poll_ns,
                  "Tuning, --mlp v19_mlp_split_down_handoff with --norm-gemv v25_gemv_norm_ring_handoff: pause in ns "
                  "between the QKV GEMV's polls of the MLP's count (0: none)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--mlp-beside-l2-groups", o->mlp_beside_l2_groups,
                  "Tuning, --mlp v18: ring groups (32 KB each) past its ring a CTA pulls into L2 before the PDL wait "
                  "(default 0: none)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--mlp-skew-from", o->mlp_skew_from,
                  "Tuning, --mlp v11_mlp_split_down_skewed: the first CTA that takes fewer features")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--mlp-skew-permille", o->mlp_skew_permille,
                  "Tuning, --mlp v11_mlp_split_down_skewed: how many per mille fewer features those CTAs take")
      ->check(CLI::Range(0, 999));
  cmd->add_option("--mlp-lateness-permille", o->mlp_lateness_permille,
                  "Tuning, --mlp v12_mlp_split_down_paired: per mille of a CTA's features handed to its partner per "
                  "us it waited later in the previous layer (-1: the kernel's 25)")
      ->check(CLI::Range(-1, 1000));
  cmd->add_option("--mlp-lateness-max", o->mlp_lateness_max,
                  "Tuning, --mlp v12_mlp_split_down_paired: the most features a CTA hands over (-1: the kernel's 8)")
      ->check(CLI::Range(-1, 64));
  cmd->add_option("--mlp-l2-lead-ctas", o->mlp_l2_lead_ctas,
                  "Tuning, --mlp v8_mlp_split_down_l2_lead: CTAs that pull the other CTAs' first rows into L2 before "
                  "the PDL wait (-1: the SMs the attention launch leaves free)")
      ->check(CLI::Range(-1, 4096));
  cmd->add_option("--mlp-l2-lead-kb", o->mlp_l2_lead_kb,
                  "Tuning, --mlp v8_mlp_split_down_l2_lead and --attention-o v7 / v27 / v28: KB of each MLP CTA's rows "
                  "pulled into L2 (default 192)")
      ->check(CLI::Range(0, 65536));
  cmd->add_option("--qkv-prewait-groups", o->qkv_prewait_groups,
                  "Tuning, --norm-gemv v20 / v22: ring groups of 4 rows issued before the PDL wait (0: 4 / 5)")
      ->check(CLI::Range(0, 6));
  cmd->add_option("--qkv-prewait-window", o->qkv_prewait_window,
                  "Tuning, --norm-gemv v22: of those, groups in flight at once (0: 1)")
      ->check(CLI::Range(0, 4));
  cmd->add_option("--qkv-late-cta-from", o->qkv_late_cta_from,
                  "Tuning, --norm-gemv v23: the CTAs from this index on issue --qkv-late-prewait-groups ring groups "
                  "before the PDL wait (0: a quarter of the grid; -1: none)")
      ->check(CLI::Range(-1, 4096));
  cmd->add_option("--qkv-late-prewait-groups", o->qkv_late_prewait_groups,
                  "Tuning, --norm-gemv v23: ring groups those CTAs issue before the PDL wait (default 1)")
      ->check(CLI::Range(0, 5));
  cmd->add_option("--qkv-row-ramp-permille", o->qkv_row_ramp_permille,
                  "Tuning, --norm-gemv v26: how far the CTAs' shares of the QKV rows fall from the first CTA to the "
                  "last, per mille of the even share (negative: rising; default: the engine's)")
      ->check(CLI::Range(-1000, 1000));
  cmd->add_option("--qkv-row-ramp-first-cta", o->qkv_row_ramp_first_cta,
                  "Tuning, --norm-gemv v26: the CTAs before this index take the even share of the QKV rows and the "
                  "ramp spreads the rest over the others (0: the whole grid; default: the engine's)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--qkv-claim-static-groups", o->qkv_claim_static_groups,
                  "Tuning, --norm-gemv v21: groups of 8 rows a CTA owns before it takes more from the queue (0: 4)")
      ->check(CLI::Range(0, 16));
  cmd->add_option("--qkv-l2-first-kb", o->qkv_l2_first_kb,
                  "Tuning, --norm-gemv v16_gemv_norm_ring_l2_first: KB of its first rows each CTA pulls into L2 "
                  "before the PDL wait (default 192)")
      ->check(CLI::Range(0, 65536));
  cmd->add_option("--mlp-l2-prefetch-mb", o->mlp_l2_prefetch_mb,
                  "MB of the next layer's QKV weights --mlp pulls into L2 at its tail (versions with a prefetch)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--mlp-delta-copies", o->mlp_delta_copies,
                  "Tuning: copies of --mlp's fp32 output its CTAs spread their reductions over (0: the default)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--mlp-trace", o->mlp_trace,
                  "Profiling: write the last decode step's per-CTA %globaltimer stamps of --mlp to this JSON file "
                  "(bench/attention_o_trace.py summarizes it)");
  cmd->add_option("--l2-persist", o->l2_persist,
                  "L2 persistence for what each step reads again: off, norms (every RMSNorm weight) or kv (the KV "
                  "cache) (default: off)")
      ->check(CLI::IsMember({"off", "norms", "kv"}));
  cmd->add_option("--l2-persist-mb", o->l2_persist_mb,
                  "MB of L2 set aside for --l2-persist's lines (0: the device's maximum; capped at the window)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--norm-gemv", o->norm_gemv, "Override the QKV GEMV with the RMSNorm folded in (norm_gemv op)");
  cmd->add_option("--norm-gemv-batched", o->norm_gemv_batched,
                  "Override batch 2's QKV GEMV that norms h with the MLP's delta folded in (norm_gemv op), or off");
  cmd->add_option("--residual-gemv", o->residual_gemv, "Override the O/down GEMV with the residual add folded in");
  cmd->add_option("--norm-gate-up", o->norm_gate_up, "Override the gate|up GEMV with RMSNorm and SwiGLU folded in");
  cmd->add_option("--gate-up-swiglu", o->gate_up_swiglu, "Override the fused gate|up + SwiGLU version");
  cmd->add_option("--gate-up-swiglu-batched", o->gate_up_swiglu_batched,
                  "Override the fused gate|up + SwiGLU version at batch 4-8, or off (gate|up GEMM, then silu_mul)");
  cmd->add_option("--sample-plain", o->sample_plain,
                  "Override the sampler of greedy and untruncated sampling (sample op; default v2_sample_split)");
  cmd->add_option("--last-mlp-one-launch", o->last_mlp_one_launch,
                  "Batch 1: the last layer's MLP as the one-launch MLP plus an add + final-norm launch on/off");
  cmd->add_option("--fold-advance", o->fold_advance,
                  "The sampler makes its token the next input itself (v2) on/off (off: a separate advance launch)");
  cmd->add_option("--pdl", o->pdl, "Programmatic dependent launch on/off (default: the path's)");
  cmd->add_option("--smem-carveout", o->smem_carveout,
                  "Tuning: the shared-memory carveout every kernel asks for, percent of the SM's L1 / shared memory "
                  "(-1: none, the driver's choice; --mlp v18 beside the attention needs 100)")
      ->check(CLI::Range(-1, 100));
  cmd->add_option("--graph", o->graph, "CUDA graph for the decode step on/off (default: the path's)");
  cmd->add_option("--fused-swiglu", o->fused_swiglu, "SwiGLU in the gate|up GEMV on/off (default: the path's)");
  cmd->add_option("--fold-norms", o->fold_norms, "Residual adds and RMSNorms folded into the decode GEMVs on/off");
  cmd->add_option("--pdl-trigger", o->pdl_trigger,
                  "SITE=F,...: batch-1 decode launch sites (--profile's names) that let the next kernel launch (PDL) "
                  "only after a fraction F in (0, 1] of their work, instead of at their start")
      ->delimiter(',');
  cmd->add_option("--skip", o->skip,
                  "Profiling only: leave these launch sites (--profile's names) out of the batch-1 decode step "
                  "to time the step without them; the tokens are then garbage")
      ->delimiter(',');
  cmd->callback([o] {
    [[maybe_unused]] const auto pdl_trigger = parse_pdl_trigger(o->pdl_trigger);  // bad flags fail first
#ifndef QWEN3_HAVE_CUDA
    throw InputError("bench needs the CUDA backend: this build has none (configure with -DQWEN3_CUDA=ON)");
#else
    EngineOptions options = EngineOptions::preset(o->path);
    if (!o->decode_gemm.empty())
      options.decode_gemm = options.decode_gemm_batched = options.decode_gemm_batched_large = o->decode_gemm;
    if (!o->decode_attention.empty()) options.decode_attention = o->decode_attention;
    if (!o->decode_qkv_attention.empty()) options.decode_qkv_attention = o->decode_qkv_attention;
    if (o->attention_prefetch_mb) options.attention_l2_prefetch_bytes = *o->attention_prefetch_mb << 20;
    if (!o->norm_gemv.empty()) options.norm_gemv = o->norm_gemv;
    if (!o->norm_gemv_batched.empty()) options.decode_norm_gemv_batched = o->norm_gemv_batched;
    if (!o->decode_layers.empty()) options.decode_layers = o->decode_layers;
    if (!o->attention_o.empty()) options.decode_attention_o = o->attention_o;
    options.attention_o_keys_per_split = o->attention_o_keys_per_split;
    if (o->attention_o_smem_kb >= 0) options.attention_o_smem_bytes = o->attention_o_smem_kb * 1024;
    options.attention_o_l2_prefetch_rows = o->attention_o_l2_rows;
    options.attention_o_ring_stages = o->attention_o_stages;
    options.attention_o_chain_steps = o->attention_o_chain_steps;
    options.attention_o_claims_ahead = o->attention_o_claims_ahead;
    options.attention_o_claim_static_tiles = o->attention_o_claim_static_tiles;
    options.attention_o_late_rows = o->attention_o_late_rows;
    options.attention_o_warm_code = o->attention_o_warm_code;
    options.attention_o_stage_window = o->attention_o_stage_window;
    options.attention_o_split_staging = o->attention_o_split_staging;
    options.attention_o_stage_burst = o->attention_o_stage_burst;
    options.attention_o_split_prewait_rows = o->attention_o_split_prewait_rows;
    options.attention_o_mlp_lead_window = o->attention_o_mlp_lead_window;
    if (o->attention_o_mlp_lead_skip_rows) options.attention_o_mlp_lead_skip_rows = *o->attention_o_mlp_lead_skip_rows;
    options.attention_o_mlp_lead_policy = o->attention_o_mlp_lead_policy;
    options.attention_o_handoff_rows = o->attention_o_handoff_rows;
    options.attention_o_trace = !o->attention_o_trace.empty();
    if (!o->mlp.empty()) options.decode_mlp = o->mlp;
    if (!o->mlp_batched.empty()) options.decode_mlp_batched = o->mlp_batched;
    options.mlp_ctas = o->mlp_ctas;
    options.mlp_o_ctas = o->mlp_o_ctas;
    options.mlp_o_ahead = o->mlp_o_ahead;
    options.mlp_o_l2_prefetch = o->mlp_o_l2_prefetch;
    options.mlp_prewait_rows = o->mlp_prewait_rows;
    options.mlp_prewait_window = o->mlp_prewait_window;
    options.mlp_late_cta_from = o->mlp_late_cta_from;
    options.mlp_late_prewait_groups = o->mlp_late_prewait_groups;
    options.mlp_beside_stages = o->mlp_beside_stages;
    options.mlp_beside_l2_groups = o->mlp_beside_l2_groups;
    options.handoff_poll_ns = o->handoff_poll_ns;
    options.mlp_skew_from = o->mlp_skew_from;
    options.mlp_skew_permille = o->mlp_skew_permille;
    options.mlp_lateness_permille_per_us = o->mlp_lateness_permille;
    options.mlp_lateness_max_features = o->mlp_lateness_max;
    options.mlp_trace = !o->mlp_trace.empty();
    if (o->mlp_delta_copies > 0) options.mlp_delta_copies = o->mlp_delta_copies;
    if (o->mlp_l2_prefetch_mb) options.mlp_l2_prefetch_bytes = *o->mlp_l2_prefetch_mb << 20;
    options.mlp_l2_lead_ctas = o->mlp_l2_lead_ctas;
    if (o->mlp_l2_lead_kb) options.mlp_l2_lead_bytes = *o->mlp_l2_lead_kb << 10;
    if (o->qkv_l2_first_kb) options.qkv_l2_first_bytes = *o->qkv_l2_first_kb << 10;
    options.qkv_prewait_groups = o->qkv_prewait_groups;
    options.qkv_claim_static_groups = o->qkv_claim_static_groups;
    options.qkv_prewait_window = o->qkv_prewait_window;
    options.qkv_late_cta_from = o->qkv_late_cta_from;
    options.qkv_late_prewait_groups = o->qkv_late_prewait_groups;
    if (o->qkv_row_ramp_permille) options.qkv_row_ramp_permille = *o->qkv_row_ramp_permille;
    if (o->qkv_row_ramp_first_cta) options.qkv_row_ramp_first_cta = *o->qkv_row_ramp_first_cta;
    if (!o->l2_persist.empty()) options.l2_persist = o->l2_persist;
    options.l2_persist_bytes = o->l2_persist_mb << 20;
    if (!o->residual_gemv.empty()) options.residual_gemv = o->residual_gemv;
    if (!o->norm_gate_up.empty()) options.norm_gate_up = o->norm_gate_up;
    if (!o->gate_up_swiglu.empty()) options.gate_up_swiglu = o->gate_up_swiglu;
    if (!o->gate_up_swiglu_batched.empty()) options.gate_up_swiglu_batched_large = o->gate_up_swiglu_batched;
    if (o->pdl) options.pdl = *o->pdl;
    options.smem_carveout = o->smem_carveout;
    if (o->graph) options.cuda_graph = *o->graph;
    if (o->fused_swiglu) options.fused_swiglu = *o->fused_swiglu;
    if (o->fold_norms) options.fold_norms = *o->fold_norms;
    if (!o->sample_plain.empty()) options.sample_plain = o->sample_plain;
    if (o->last_mlp_one_launch) options.last_mlp_in_one_launch = *o->last_mlp_one_launch;
    if (o->fold_advance) options.fold_advance = *o->fold_advance;
    options.max_batch = o->batch;
    options.skip_launches.insert(o->skip.begin(), o->skip.end());
    options.pdl_trigger = pdl_trigger;
    options.context = o->context > 0 ? o->context : o->prompt_len + o->warmup + o->gen + 16;  // + profile steps
    std::unique_ptr<Checkpoint> checkpoint;
    std::unique_ptr<CudaEngine> engine;
    std::string model_name;
    const auto load_start = std::chrono::steady_clock::now();
    if (!o->model_dir.empty()) {
      checkpoint = Checkpoint::open(o->model_dir);
      engine = std::make_unique<CudaEngine>(*checkpoint, options);
      model_name = o->model_dir;
    } else {
      engine = std::make_unique<CudaEngine>(synthetic_qwen3_config(o->synthetic), o->seed, options);
      model_name = o->synthetic + " (synthetic)";
    }
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const ModelConfig& c = engine->config();
    if (o->prompt_len + o->warmup + o->gen > engine->context_length())
      throw InputError("prompt + warm-up + gen exceed the context of " + std::to_string(engine->context_length()));

    std::mt19937_64 rng(o->seed);
    std::vector<int32_t> prompt(static_cast<size_t>(o->prompt_len));
    for (auto& id : prompt) id = int32_t(rng() % uint64_t(c.vocab_size));
    SamplingParams greedy;
    greedy.temperature = 0;
    for (int64_t b = 0; b < o->batch; ++b) engine->set_sampling(b, greedy);

    // Prefill: one untimed run, then the median of `repeat` (each from an empty cache).
    std::vector<double> prefill_ms;
    for (int64_t r = 0; r <= o->repeat; ++r) {
      engine->reset_slot(0);
      const auto t0 = std::chrono::steady_clock::now();
      engine->prefill(0, prompt);  // synchronizes
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) prefill_ms.push_back(ms);
    }
    for (int64_t b = 1; b < o->batch; ++b) {
      engine->reset_slot(b);
      engine->prefill(b, prompt);
    }
    if (o->warmup > 0) engine->decode(o->batch, o->warmup);
    double decode_ms = 0;
    engine->decode(o->batch, o->gen, &decode_ms);
    if (!o->attention_o_trace.empty()) {
      const auto stamps = engine->attention_o_trace();
      if (stamps.empty()) throw InputError("--attention-o-trace: the step ran no traced attention_o launch");
      nlohmann::json t;
      t["layers"] = c.num_layers;
      t["ctas"] = int64_t(stamps.size()) / (c.num_layers * kernels::kQkvAttentionOTraceEvents);
      t["events"] = kernels::kQkvAttentionOTraceEvents;
      t["prompt_len"] = o->prompt_len;
      t["attention_o"] = options.decode_attention_o;
      // v8 fills the same slots with its own points (WavefrontTraceEvent in v8_qkv_attention_o_wavefront.cu).
      if (options.decode_attention_o.starts_with("v8_"))
        t["event_names"] = {"start",    "issued",     "waited",    "normed", "qkv_done",
                            "attended", "first_head", "last_head", "o_rows", "end"};
      else
        t["event_names"] = {"start",  "issued",   "waited", "attended", "all_splits",
                            "merged", "weights_in", "o_staged", "o_rows", "end"};
      t["stamps_ns"] = stamps;
      std::ofstream file(o->attention_o_trace);
      if (!(file << t.dump() << "\n"))
        throw InputError("--attention-o-trace: cannot write '" + o->attention_o_trace + "'");
    }

    if (!o->mlp_trace.empty()) {
      const auto stamps = engine->mlp_trace();
      if (stamps.empty()) throw InputError("--mlp-trace: the step ran no traced one-launch MLP");
      nlohmann::json t;
      t["layers"] = c.num_layers - 1;  // (the last layer's MLP runs as two GEMVs)
      t["ctas"] = int64_t(stamps.size()) / ((c.num_layers - 1) * kernels::kNormMlpTraceEvents);
      t["events"] = kernels::kNormMlpTraceEvents;
      t["event_names"] = {"start", "waited", "gate_up", "down", "all_in", "normed", "rows_done", "end"};
      t["prompt_len"] = o->prompt_len;
      t["mlp"] = options.decode_mlp;
      t["stamps_ns"] = stamps;
      // The QKV GEMV of every layer (v12; zeros where another version ran), as (layers, SMs, events).
      t["qkv_events"] = kernels::kNormGemvTraceEvents;
      t["qkv_event_names"] = {"start", "waited", "normed", "rows_done", "end"};
      t["qkv_stamps_ns"] = engine->qkv_trace();
      std::ofstream file(o->mlp_trace);
      if (!(file << t.dump() << "\n")) throw InputError("--mlp-trace: cannot write '" + o->mlp_trace + "'");
    }

    const double step_ms = decode_ms / double(o->gen);
    const double mean_context = double(o->prompt_len + o->warmup) + double(o->gen + 1) / 2.0;
    const double kv_bytes = 2.0 * double(c.num_layers * c.kv_dim()) * 2.0 * mean_context * double(o->batch);
    const double bytes_per_step = double(engine->decode_weight_bytes()) + kv_bytes;
    std::string peak_source;
    const double peak = o->peak > 0 ? o->peak : measured_read_peak(peak_source);
    if (o->peak > 0) peak_source = "--peak-gb-s";
    const double effective = bytes_per_step / (step_ms * 1e-3) / 1e9;

    nlohmann::ordered_json j;
    j["model"] = model_name;
    j["gpu"] = cuda_device_name();
    j["path"] = o->path;
    j["batch"] = o->batch;
    j["prompt_len"] = o->prompt_len;
    j["gen"] = o->gen;
    j["context"] = engine->context_length();
    j["prefill_ms"] = median(prefill_ms);
    j["prefill_tok_s"] = double(o->prompt_len) / (median(prefill_ms) * 1e-3);
    j["decode_ms_per_tok"] = step_ms;
    j["decode_tok_s"] = double(o->batch) * 1e3 / step_ms;
    j["decode_tok_s_per_sequence"] = 1e3 / step_ms;
    j["bytes_per_token"] = bytes_per_step;  // per decode step (all sequences of the batch)
    j["weight_bytes_per_token"] = engine->decode_weight_bytes();
    j["kv_bytes_per_token"] = kv_bytes;
    j["effective_GB_s"] = effective;
    j["peak_GB_s"] = peak;
    j["peak_source"] = peak_source;
    j["pct_of_peak"] = 100.0 * effective / peak;
    j["launches_per_step"] = engine->launches_per_decode_step();
    j["cuda_graph"] = options.cuda_graph;
    j["pdl"] = options.pdl;
    // How the driver loaded the kernels (CUDA_MODULE_LOADING; lazily, at first launch, unless set): it decides where
    // their code lands, which moved a step by up to 0.44% between two load orders of the same kernels (ITERATIONS.md
    // session 36), so a result records it.
    const char* module_loading = std::getenv("CUDA_MODULE_LOADING");
    j["module_loading"] = module_loading != nullptr && *module_loading != '\0' ? module_loading : "default (lazy)";
    if (options.smem_carveout >= 0) j["smem_carveout"] = options.smem_carveout;
    j["fused_swiglu"] = options.fused_swiglu;
    j["fold_norms"] = options.fold_norms;
    j["sample_plain"] = options.sample_plain;
    j["last_mlp_in_one_launch"] = options.last_mlp_in_one_launch;
    j["fold_advance"] = options.fold_advance;
    j["decode_gemm"] = options.cublas_gemm ? std::string("cublas")
                                           : (o->batch == 1  ? options.decode_gemm
                                              : o->batch >= 4 ? options.decode_gemm_batched_large
                                                              : options.decode_gemm_batched);
    j["decode_attention"] = options.decode_attention;
    j["qkv_attention"] = options.decode_qkv_attention;
    j["attention_l2_prefetch_bytes"] = options.attention_l2_prefetch_bytes;
    j["pdl_trigger"] = options.pdl_trigger;
    j["norm_gemv"] = options.norm_gemv;
    j["qkv_prewait_groups"] = options.qkv_prewait_groups;
    j["qkv_claim_static_groups"] = options.qkv_claim_static_groups;
    j["qkv_prewait_window"] = options.qkv_prewait_window;
    j["qkv_late_cta_from"] = options.qkv_late_cta_from;
    j["qkv_late_prewait_groups"] = options.qkv_late_prewait_groups;
    j["qkv_row_ramp_permille"] = options.qkv_row_ramp_permille;
    j["qkv_row_ramp_first_cta"] = options.qkv_row_ramp_first_cta;
    j["norm_gemv_batched"] = options.decode_norm_gemv_batched;
    j["decode_layers"] = options.decode_layers;
    j["attention_o"] = options.decode_attention_o;
    j["mlp"] = options.decode_mlp;
    j["mlp_batched"] = options.decode_mlp_batched;
    if (options.mlp_ctas > 0) j["mlp_ctas"] = options.mlp_ctas;
    if (options.mlp_o_ctas > 0) j["mlp_o_ctas"] = options.mlp_o_ctas;
    if (options.mlp_o_ahead >= 0) j["mlp_o_ahead"] = options.mlp_o_ahead;
    if (options.mlp_o_l2_prefetch) j["mlp_o_l2_prefetch"] = true;
    if (options.mlp_prewait_rows >= 0) j["mlp_prewait_rows"] = options.mlp_prewait_rows;
    if (options.mlp_prewait_window > 0) j["mlp_prewait_window"] = options.mlp_prewait_window;
    j["mlp_late_cta_from"] = options.mlp_late_cta_from;
    j["mlp_late_prewait_groups"] = options.mlp_late_prewait_groups;
    if (options.mlp_beside_stages > 0) j["mlp_beside_stages"] = options.mlp_beside_stages;
    if (options.mlp_beside_l2_groups > 0) j["mlp_beside_l2_groups"] = options.mlp_beside_l2_groups;
    if (options.handoff_poll_ns > 0) j["handoff_poll_ns"] = options.handoff_poll_ns;
    if (options.mlp_skew_permille > 0) {
      j["mlp_skew_from"] = options.mlp_skew_from;
      j["mlp_skew_permille"] = options.mlp_skew_permille;
    }
    if (options.mlp_lateness_permille_per_us >= 0) j["mlp_lateness_permille"] = options.mlp_lateness_permille_per_us;
    if (options.mlp_lateness_max_features >= 0) j["mlp_lateness_max"] = options.mlp_lateness_max_features;
    j["mlp_delta_copies"] = options.mlp_delta_copies;
    if (o->mlp_l2_prefetch_mb) j["mlp_l2_prefetch_mb"] = *o->mlp_l2_prefetch_mb;
    if (options.mlp_l2_lead_ctas >= 0) j["mlp_l2_lead_ctas"] = options.mlp_l2_lead_ctas;
    if (o->mlp_l2_lead_kb) j["mlp_l2_lead_kb"] = *o->mlp_l2_lead_kb;
    if (o->qkv_l2_first_kb) j["qkv_l2_first_kb"] = *o->qkv_l2_first_kb;
    if (options.attention_o_keys_per_split > 0) j["attention_o_keys_per_split"] = options.attention_o_keys_per_split;
    if (options.attention_o_smem_bytes > 0) j["attention_o_smem_bytes"] = options.attention_o_smem_bytes;
    if (options.attention_o_l2_prefetch_rows >= 0) j["attention_o_l2_rows"] = options.attention_o_l2_prefetch_rows;
    if (options.attention_o_ring_stages > 0) j["attention_o_stages"] = options.attention_o_ring_stages;
    if (options.attention_o_chain_steps >= 0) j["attention_o_chain_steps"] = options.attention_o_chain_steps;
    if (options.attention_o_claims_ahead > 0) j["attention_o_claims_ahead"] = options.attention_o_claims_ahead;
    if (options.attention_o_claim_static_tiles > 0)
      j["attention_o_claim_static_tiles"] = options.attention_o_claim_static_tiles;
    if (options.attention_o_late_rows > 0) j["attention_o_late_rows"] = options.attention_o_late_rows;
    if (options.attention_o_warm_code > 0) j["attention_o_warm_code"] = options.attention_o_warm_code;
    if (options.attention_o_stage_window > 0) j["attention_o_stage_window"] = options.attention_o_stage_window;
    if (options.attention_o_split_staging > 0) j["attention_o_split_staging"] = options.attention_o_split_staging;
    if (options.attention_o_stage_burst > 0) j["attention_o_stage_burst"] = options.attention_o_stage_burst;
    if (options.attention_o_split_prewait_rows >= 0)
      j["attention_o_split_prewait_rows"] = options.attention_o_split_prewait_rows;
    if (options.attention_o_mlp_lead_window > 0) j["attention_o_mlp_lead_window"] = options.attention_o_mlp_lead_window;
    if (options.attention_o_mlp_lead_policy > 0) j["attention_o_mlp_lead_policy"] = options.attention_o_mlp_lead_policy;
    if (options.attention_o_handoff_rows >= 0) j["attention_o_handoff_rows"] = options.attention_o_handoff_rows;
    if (o->attention_o_mlp_lead_skip_rows) j["attention_o_mlp_lead_skip_rows"] = *o->attention_o_mlp_lead_skip_rows;
    if (options.l2_persist != "off") {
      const CudaEngine::L2Persistence l2 = engine->l2_persistence();
      j["l2_persist"] = options.l2_persist;
      j["l2_window_bytes"] = l2.window_bytes;
      j["l2_set_aside_bytes"] = l2.set_aside_bytes;
      j["l2_hit_ratio"] = l2.hit_ratio;
    }
    j["residual_gemv"] = options.residual_gemv;
    j["norm_gate_up"] = options.norm_gate_up;
    j["gate_up_swiglu"] = options.fused_swiglu ? options.gate_up_swiglu : std::string("off");
    j["gate_up_swiglu_batched"] = options.fused_swiglu ? options.gate_up_swiglu_batched_large : std::string("off");
    j["logits_hash"] = engine->last_logits_hash(0);
    j["load_s"] = load_s;
    if (!o->skip.empty()) j["skipped_launches"] = o->skip;
    if (o->profile) {
      // Median over several eager steps of each launch, then summed per launch site.
      constexpr int kSteps = 5;
      std::vector<std::vector<KernelTiming>> runs;
      for (int r = 0; r < kSteps && o->prompt_len + o->warmup + o->gen + r + 1 < engine->context_length(); ++r)
        runs.push_back(engine->profile_decode_step(o->batch));
      std::vector<std::string> order;
      std::map<std::string, std::tuple<int64_t, double, double>> sites;  // launches, ms, bytes
      double total_ms = 0;
      for (size_t i = 0; !runs.empty() && i < runs[0].size(); ++i) {
        std::vector<double> ms;
        for (const auto& run : runs) ms.push_back(run[i].ms);
        const double t = median(ms);
        auto [it, inserted] = sites.try_emplace(runs[0][i].what, 0, 0.0, 0.0);
        if (inserted) order.push_back(runs[0][i].what);
        std::get<0>(it->second) += 1;
        std::get<1>(it->second) += t;
        std::get<2>(it->second) += runs[0][i].bytes;
        total_ms += t;
      }
      nlohmann::ordered_json rows = nlohmann::json::array();
      for (const auto& what : order) {
        const auto& [launches, ms, bytes] = sites[what];
        rows.push_back({{"what", what}, {"launches", launches}, {"total_us", ms * 1e3},
                        {"mean_us", ms * 1e3 / double(launches)}, {"bytes", bytes},
                        {"GB_s", ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0},
                        {"pct_of_step", 100.0 * ms / total_ms}});
      }
      j["profile"] = rows;
      j["profile_eager_step_ms"] = total_ms;
    }
    if (o->json) {
      std::cout << j.dump() << "\n";
      return;
    }
    std::printf("%s on %s, path %s, batch %lld\n", model_name.c_str(), j["gpu"].get<std::string>().c_str(),
                o->path.c_str(), (long long)o->batch);
    std::printf("prefill %lld tokens: %.2f ms, %.0f tok/s\n", (long long)o->prompt_len, median(prefill_ms),
                j["prefill_tok_s"].get<double>());
    std::printf("decode: %.3f ms/step, %.1f tok/s (%.1f per sequence), context %.0f on average\n", step_ms,
                j["decode_tok_s"].get<double>(), 1e3 / step_ms, mean_context);
    std::printf("bytes per step: %.3f GB (weights %.3f + KV %.3f): %.0f GB/s = %.1f%% of %.0f GB/s (%s)\n",
                bytes_per_step / 1e9, double(engine->decode_weight_bytes()) / 1e9, kv_bytes / 1e9, effective,
                100.0 * effective / peak, peak, peak_source.c_str());
    std::printf("launches per step: %lld%s; logits hash %016llx\n", (long long)engine->launches_per_decode_step(),
                options.cuda_graph ? " (one CUDA graph)" : "", (unsigned long long)j["logits_hash"].get<uint64_t>());
    if (o->profile) {
      std::printf("one decode step launched eagerly (events between launches): %.3f ms\n",
                  j["profile_eager_step_ms"].get<double>());
      std::printf("%-22s %8s %10s %9s %9s %7s\n", "launch site", "launches", "total us", "mean us", "GB/s", "%step");
      for (const auto& row : j["profile"])
        std::printf("%-22s %8lld %10.1f %9.2f %9.0f %7.1f\n", row["what"].get<std::string>().c_str(),
                    (long long)row["launches"].get<int64_t>(), row["total_us"].get<double>(),
                    row["mean_us"].get<double>(), row["GB_s"].get<double>(), row["pct_of_step"].get<double>());
    }
#endif
  });
}

}  // namespace qwen3::cli
