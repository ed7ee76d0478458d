// Every version of every op in kernels/registry.h against the CPU reference (tests/gpu/reference.h), on fresh
// random inputs (seed printed; QWEN3_TEST_SEED=N replays a run), at the Qwen3-8B shapes and at awkward ones.
// Each version runs twice: launched directly, then as the engine runs it, captured in a CUDA graph with
// programmatic dependent launch on and its activation inputs written by a late predecessor kernel (a version
// that reads them before pdl_wait() reads poison). Outputs are poisoned (0xFFFF, a bf16 NaN) before every
// launch and must be fully written. Without a GPU every test skips with "no CUDA device".
//
// Error bounds. The reference is either the bf16 result at transformers' rounding points or the exact value
// in double; |d| is the difference from it.
//   * embedding, kv_write, v rows of the cache, transpose: bit-exact (copies).
//   * residual add: <= 1 bf16 ulp (a bf16 hardware add rounds once, fp32-then-bf16 rounds twice).
//   * rmsnorm, add_rmsnorm's y, silu_mul: <= 2 bf16 ulps. The fp32 sum order, rsqrtf or expf can move the
//     inner bf16 value by one ulp at a rounding boundary; the bf16 product that follows can widen it to two.
//   * rope: |d| <= 2^-6 (|x cos| + |x' sin|) + 2^-7 |ref|. sincosf and libm can differ in bf16(cos) by one
//     ulp: each product moves by 2^-7 of its size plus its own rounding.
//   * QK-norm + rope (fused): as rope with 2^-5, since the norm's two ulps feed the rotation.
//   * gemm: |d| <= 2^-8 |exact| + 2^-12 sum_k |x w| per element (bf16 output rounding; fp32 accumulation in
//     any order) and relative Frobenius error <= 5e-3 (the output rounding alone gives about 1.6e-3). Large
//     prefill shapes: sampled rows against the CPU, every row against cuBLAS.
//   * residual GEMV: residual' within the gemm bound of x · wᵀ plus one bf16 ulp of the sum (rounded twice);
//     the partial sums of squares add up to Σ residual'² of the kernel's own output within 1e-5 relative.
//   * norm GEMVs: the normed activations are reproduced bit-exactly (norm_prologue's fp32 formula, partials
//     whose fp32 sum is exact in any order), then the gemm bound; SwiGLU as gate_up_swiglu. With a residual
//     delta (the norm sums h'² itself, in its own order): the gemm bound plus Σ_j |w_j| times how far
//     normed_j moves for any inv_rms within 2^-17 of the oracle's (almost always 0). A delta of several copies
//     (delta_copies) is built so that their fp32 sum is exact in any order: the same bound over that sum.
//   * MLP in one launch (fp32 residual_delta +=): |d| <= 2^-12 (Σ_j |w_j act_j| + |delta before|) (fp32 sums
//     in any order) + Σ_j |w_j| (how far act_j may legitimately round: g, u within 2^-18 Σ|x w|, silu within
//     2^-20; almost always 0), relative Frobenius error <= 5e-3. With several delta copies: the same bound for
//     their sum (|delta before| the sum of the copies' magnitudes); a copy no CTA adds to stays bit-exact.
//   * MLP with the next layer's QKV norm GEMV in the same launch: the delta as above (two launches back to
//     back: their errors add); next_out as the norm GEMVs with a residual delta, over the kernel's own delta
//     (summed over its copies);
//     the grid-wide wait's two sync words zero after every launch.
//   * qkv_attention_o with a residual delta: as the residual GEMV, over h' = bf16(h + bf16(delta)) (exact;
//     several copies summed exactly); the delta (every copy) left zero.
//   * attention: |d| <= 2^-6 sum_j p_j |v_j| + 2^-7 |exact| (P may be rounded to bf16 before the PV product:
//     2^-8 of each term), relative Frobenius error <= 1e-2.
//   * decode layers (every layer in one launch): h within (layers + 1) 2^-5 (|ref| + rms(h)), layer n's new
//     cache rows within (n + 2) 2^-5 (|ref| + rms(row)), as rounding flips of fp32 sums in another order spread
//     through the later layers (calibrated at the test); h's relative Frobenius error <= (layers + 1) 2^-7;
//     every other cache row unchanged; a second launch bit-identical to the first.
//   * sampling: greedy returns the argmax after penalties, ties to the lowest id; sampled tokens are always
//     allowed ones, and their frequencies are within 5 standard deviations of the distribution.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/registry.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/reference.h"

namespace qwen3::gpu_test {
namespace {

using kernels::AddArgs;
using kernels::AddDeltaRmsnormArgs;
using kernels::AddRmsnormArgs;
using kernels::AttentionArgs;
using kernels::DeviceSampling;
using kernels::EmbeddingArgs;
using kernels::GateUpSwigluArgs;
using kernels::GemmArgs;
using kernels::GemvResidualArgs;
using kernels::KvWriteArgs;
using kernels::NormGateUpSwigluArgs;
using kernels::NormGemvArgs;
using kernels::NormMlpArgs;
using kernels::QkNormRopeCacheArgs;
using kernels::RmsnormArgs;
using kernels::RopeArgs;
using kernels::SampleArgs;
using kernels::SiluMulArgs;
using kernels::TransposeArgs;
namespace ref = qwen3::reference;

// Qwen3-8B
constexpr int64_t kVocab = 151936, kHidden = 4096, kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kInter = 12288;
constexpr float kEps = 1e-6f;

constexpr int64_t kNormUlps = 2, kSiluUlps = 2, kAddUlps = 1;
constexpr double kRopeTermTol = 0x1p-6, kQkNormRopeTermTol = 0x1p-5, kRopeResultTol = 0x1p-7;
constexpr double kGemmRelTol = 0x1p-8, kGemmAccumTol = 0x1p-12, kGemmFrobenius = 5e-3;
constexpr double kAttnWeightedTol = 0x1p-6, kAttnResultTol = 0x1p-7, kAttnFrobenius = 1e-2;

template <class T>
DeviceArray<T> to_device(const std::vector<T>& host) {
  DeviceArray<T> d(host.size());
  d.upload(host);
  return d;
}

std::string str(int64_t v) {
  return std::to_string(v);
}

std::vector<int32_t> consecutive(int32_t first, int64_t count) {
  std::vector<int32_t> p(static_cast<size_t>(count));
  std::iota(p.begin(), p.end(), first);
  return p;
}

std::vector<float> make_inv_freq(int64_t head_dim,
                                 double theta) {  // as transformers' default rope init, in fp32
  std::vector<float> f(size_t(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i)
    f[size_t(i)] = 1.0f / std::pow(float(theta), float(2 * i) / float(head_dim));
  return f;
}

// fp32 values uniform in [lo, hi) with full 24-bit mantissas (so most are not bf16 values and bf16(v)
// rounds); element i a pure function of (seed, i).
std::vector<float> random_f32(size_t count, uint64_t seed, float lo, float hi) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = lo + (hi - lo) * float(double(ref::mix_seed(seed, uint64_t(i)) >> 40) * 0x1p-24);
  return v;
}

// The hidden state with the MLP's fp32 output still owed to it folded in, h' = bf16(h + bf16(delta)), in fp32
// as the delta readers do it (NormGemvArgs / QkvAttentionOArgs::residual_delta), so bit-exact.
uint16_t add_delta(uint16_t h, float delta) {
  return ref::to_bf16(ref::to_float(h) + ref::round_bf16(delta));
}

// A residual delta of several copies (NormMlpArgs::delta_copies): `copies` (count) fp32 vectors one after the
// other, of random multiples of 2^-10 in [-2, 2] (element e a pure function of (seed, e)). Their sum is exact in
// fp32 in any order (every partial sum a multiple of 2^-10 of magnitude at most 2 copies: 12 + log2(copies) bits),
// so the oracle need not know the order a kernel sums them in.
std::vector<float> exact_sum_copies(int64_t copies, int64_t count, uint64_t seed) {
  std::vector<float> v = random_f32(size_t(copies * count), seed, -2.0f, 2.0f);
  for (float& x : v) x = std::ldexp(std::nearbyint(std::ldexp(x, 10)), -10);
  return v;
}

// (copies, count) -> (count): Σ_j copies[j][i] in fp32, j = 0, 1, ... in turn, as the delta readers sum them
// (one copy: itself, bit for bit); with absolute, Σ_j |copies[j][i]|.
std::vector<float> sum_copies(const std::vector<float>& copies, int64_t count, bool absolute = false) {
  std::vector<float> sum(copies.begin(), copies.begin() + count);
  if (absolute)
    for (float& s : sum) s = std::fabs(s);
  for (size_t e = size_t(count); e < copies.size(); ++e)
    sum[e % size_t(count)] += absolute ? std::fabs(copies[e]) : copies[e];
  return sum;
}

// expect_ok for an fp32 tensor (Check holds bf16 bits): |got - want| <= bound per element, every value
// finite, and the relative Frobenius error within max_rel_frobenius. One gtest failure naming the worst
// element.
void expect_f32_near(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                     const std::vector<double>& bound, const std::string& label, double max_rel_frobenius) {
  int64_t violations = 0, nonfinite = 0, worst = -1;
  double worst_ratio = 0, err_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++nonfinite;
      continue;
    }
    const double diff = std::fabs(double(got[i]) - want[i]);
    err_sq += diff * diff;
    ref_sq += want[i] * want[i];
    const double ratio = bound[i] > 0 ? diff / bound[i] : (diff > 0 ? INFINITY : 0.0);
    violations += diff > bound[i];
    if (worst < 0 || ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = int64_t(i);
    }
  }
  const double frobenius = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
  std::ostringstream s;
  s << what << ": " << got.size() << " checked";
  if (violations) s << ", " << violations << " over the bound";
  if (nonfinite) s << ", " << nonfinite << " non-finite";
  if (worst >= 0)
    s << " (worst #" << worst << ": got " << got[size_t(worst)] << ", want " << want[size_t(worst)]
      << ", bound " << bound[size_t(worst)] << ")";
  s << ", rel. Frobenius " << frobenius << ", worst error/bound " << worst_ratio;
  const char* verbose = std::getenv("QWEN3_GPU_TESTS_VERBOSE");
  if (verbose && *verbose && std::string(verbose) != "0")
    std::printf("[ check    ] %s | %s\n", label.c_str(), s.str().c_str());
  if (violations || nonfinite) ADD_FAILURE() << label << " | " << s.str();
  if (frobenius > max_rel_frobenius)
    ADD_FAILURE() << label << " | relative Frobenius error over " << max_rel_frobenius << " | " << s.str();
}

// Args with delta_copies > 1 (NormMlpArgs, NormGemvArgs, QkvAttentionOArgs): a version that takes the same args
// with one copy but refuses these is skipped, with a visible line, unless its name is in `must` and `fail` is set
// (an engine shape the version must take them on): then the test fails.
template <class Args>
void check_delta_copies_support(const std::vector<kernels::KernelVersion<Args>>& versions, const Args& args,
                                const std::string& label, bool fail, const std::vector<std::string>& must = {}) {
  Args one = args;
  one.delta_copies = 1;
  for (const auto& v : versions) {
    if (v.takes(args) || !v.takes(one)) continue;  // takes them, or refuses for another reason
    if (fail && std::find(must.begin(), must.end(), std::string(v.name)) != must.end())
      ADD_FAILURE() << label << " | " << v.name << " must support delta_copies=" << args.delta_copies;
    else
      std::printf("[ skipped  ] %s | %s: supports() false with delta_copies=%d\n", label.c_str(), v.name,
                  int(args.delta_copies));
  }
}

// ---- registry ---------------------------------------------------------------------------------------------
template <class Args>
void expect_well_formed(const std::vector<kernels::KernelVersion<Args>>& versions, const char* op) {
  EXPECT_FALSE(versions.empty()) << op << ": no version registered";
  std::set<std::string> names;
  for (const auto& v : versions) {
    EXPECT_TRUE(v.name && *v.name) << op << ": a version without a name";
    EXPECT_TRUE(v.summary && *v.summary) << op << "/" << v.name << ": no summary";
    EXPECT_NE(v.launch, nullptr) << op << "/" << v.name << ": no launch function";
    EXPECT_TRUE(names.insert(v.name).second) << op << ": duplicate version name " << v.name;
  }
}

// Host-only: runs without a GPU too.
TEST(Registry, EveryOpListsNamedVersions) {
  expect_well_formed(kernels::embedding_versions(), "embedding");
  expect_well_formed(kernels::rmsnorm_versions(), "rmsnorm");
  expect_well_formed(kernels::add_rmsnorm_versions(), "add_rmsnorm");
  expect_well_formed(kernels::add_delta_rmsnorm_versions(), "add_delta_rmsnorm");
  expect_well_formed(kernels::gemm_versions(), "gemm");
  expect_well_formed(kernels::rope_versions(), "rope");
  expect_well_formed(kernels::qk_norm_rope_cache_versions(), "qk_norm_rope_cache");
  expect_well_formed(kernels::kv_write_versions(), "kv_write");
  expect_well_formed(kernels::attention_versions(), "attention");
  expect_well_formed(kernels::qkv_attention_versions(), "qkv_attention");
  expect_well_formed(kernels::qkv_attention_o_versions(), "qkv_attention_o");
  expect_well_formed(kernels::silu_mul_versions(), "silu_mul");
  expect_well_formed(kernels::gate_up_swiglu_versions(), "gate_up_swiglu");
  expect_well_formed(kernels::gemv_residual_versions(), "gemv_residual");
  expect_well_formed(kernels::norm_gemv_versions(), "norm_gemv");
  expect_well_formed(kernels::norm_gate_up_swiglu_versions(), "norm_gate_up_swiglu");
  expect_well_formed(kernels::norm_mlp_versions(), "norm_mlp");
  expect_well_formed(kernels::transpose_versions(), "transpose");
  expect_well_formed(kernels::decode_layers_versions(), "decode_layers");
  expect_well_formed(kernels::add_versions(), "add");
  expect_well_formed(kernels::sample_versions(), "sample");
}

// Host-only: norm_gemv v26's split of n rows over CTAs (gemv_rows_begin_ramped) covers [0, n) in order, gives no
// CTA more than gemv_rows_max_ramped, is the even split c * n / ctas at 0 and before the ramp's first CTA, and falls
// (rises) with c at p > 0 (< 0) from there on.
TEST(RowSplit, RampedSharesCoverTheRowsInOrder) {
  for (const int64_t ctas : {1, 7, 132}) {
    for (const int64_t n : {1, 5, 131, 6144, 151936}) {
      for (const int64_t permille : {-1000, -250, 0, 1, 300, 999, 1000}) {
        for (const int64_t first : {int64_t(0), int64_t(1), ctas / 3, ctas - 1, ctas, ctas + 500}) {
          const std::string label =
              "ctas=" + str(ctas) + " n=" + str(n) + " permille=" + str(permille) + " first=" + str(first);
          EXPECT_EQ(kernels::gemv_rows_begin_ramped(0, ctas, n, permille, first), 0) << label;
          EXPECT_EQ(kernels::gemv_rows_begin_ramped(ctas, ctas, n, permille, first), n) << label;
          const int64_t most = kernels::gemv_rows_max_ramped(ctas, n, permille, first);
          int64_t previous_rows = 0;
          for (int64_t c = 0; c < ctas; ++c) {
            const int64_t begin = kernels::gemv_rows_begin_ramped(c, ctas, n, permille, first);
            const int64_t rows = kernels::gemv_rows_begin_ramped(c + 1, ctas, n, permille, first) - begin;
            ASSERT_GE(rows, 0) << label << " c=" << c;
            ASSERT_LE(rows, most) << label << " c=" << c;
            if (permille == 0 || c <= first) ASSERT_EQ(begin, c * n / ctas) << label << " c=" << c;
            // In the ramp a share moves by at most one row against the linear trend (the rounding).
            if (c - 1 > first) {
              if (permille > 0) ASSERT_LE(rows, previous_rows + 1) << label << " c=" << c;
              if (permille < 0) ASSERT_GE(rows, previous_rows - 1) << label << " c=" << c;
            }
            previous_rows = rows;
          }
          if (permille == 0 || first >= ctas) EXPECT_EQ(most, (n + ctas - 1) / ctas) << label;
        }
      }
    }
  }
  // Qwen3-8B's QKV rows over an H100's 132 SMs, 300 per mille: ~1.3x the even share (46.5) first, ~0.7x last.
  const auto rows_of = [](int64_t c, int64_t permille, int64_t first) {
    return kernels::gemv_rows_begin_ramped(c + 1, 132, 6144, permille, first) -
           kernels::gemv_rows_begin_ramped(c, 132, 6144, permille, first);
  };
  EXPECT_NEAR(double(rows_of(0, 300, 0)), 46.5 * 1.3, 1.0);
  EXPECT_NEAR(double(rows_of(131, 300, 0)), 46.5 * 0.7, 1.0);
  EXPECT_NEAR(double(rows_of(0, -300, 0)), 46.5 * 0.7, 1.0);
  EXPECT_NEAR(double(rows_of(131, -300, 0)), 46.5 * 1.3, 1.0);
  // From CTA 66 on: the first half keeps the even share, the ramp runs from ~1.3x at 66 to ~0.7x at 131.
  EXPECT_NEAR(double(rows_of(0, 300, 66)), 46.5, 1.0);
  EXPECT_NEAR(double(rows_of(65, 300, 66)), 46.5, 1.0);
  EXPECT_NEAR(double(rows_of(66, 300, 66)), 46.5 * 1.3, 1.0);
  EXPECT_NEAR(double(rows_of(131, 300, 66)), 46.5 * 0.7, 1.0);
}

// ---- 00 embedding -----------------------------------------------------------------------------------------
TEST_F(GpuTest, EmbeddingCopiesTableRows) {
  VersionRunner<EmbeddingArgs> runner(kernels::embedding_versions());
  struct Shape {
    int64_t vocab, hidden;
    std::vector<int64_t> token_counts;
    bool required;
  };
  const std::vector<Shape> shapes = {
      {kVocab, kHidden, {1, 3, 8, 300, 2048}, true}, {1000, 1024, {5}, false}, {300, 2560, {7}, false}};
  for (const Shape& shape : shapes) {
    const std::string table_label = "embedding vocab=" + str(shape.vocab) + " hidden=" + str(shape.hidden);
    const auto table = random_bf16(size_t(shape.vocab * shape.hidden), case_seed(table_label), -1.0f, 1.0f);
    const auto table_d = to_device(table);  // (vocab, hidden)
    for (const int64_t tokens : shape.token_counts) {
      const std::string label = table_label + " tokens=" + str(tokens);
      std::vector<int32_t> ids(static_cast<size_t>(tokens));  // (tokens)
      ref::fill_uniform_int(ids, case_seed(label), 0, int32_t(shape.vocab - 1));
      ids.front() = int32_t(shape.vocab - 1);  // the last row catches an off-by-one at the end of the table
      if (tokens > 1) ids.back() = 0;
      std::vector<uint16_t> want(size_t(tokens * shape.hidden));  // (tokens, hidden)
      ref::embedding(ids, table.data(), shape.hidden, want.data());
      DeviceArray<int32_t> ids_d(ids.size());
      DeviceArray<uint16_t> out_d(want.size());
      const EmbeddingArgs args{ids_d.get(), as_bf16(table_d), as_bf16(out_d), tokens, shape.hidden};
      runner.run(
          label, args,
          [&] {
            ids_d.upload(ids);
            out_d.poison();
          },
          [&](const std::string& run_label) {
            const auto got = out_d.download();
            Check c("out");
            for (size_t i = 0; i < got.size(); ++i) c.exact(int64_t(i), got[i], want[i]);
            expect_ok(c, run_label);
          },
          shape.required, {produced(ids_d)});
    }
  }
}

// ---- 01 rmsnorm -------------------------------------------------------------------------------------------
TEST_F(GpuTest, RmsnormMatchesReference) {
  VersionRunner<RmsnormArgs> runner(kernels::rmsnorm_versions());
  struct Case {
    std::string name;
    int64_t rows, n;
    bool in_place, required;
  };
  const std::vector<Case> cases = {
      {"hidden decode", 1, kHidden, false, true},
      {"hidden decode b=3", 3, kHidden, false, true},
      {"hidden prefill T=300", 300, kHidden, false, true},
      {"hidden prefill T=2048", 2048, kHidden, false, true},
      {"hidden in place", 3, kHidden, true, true},
      {"q-norm decode (32 heads) in place", kQHeads, kHeadDim, true, true},
      {"k-norm decode b=3 in place", 3 * kKvHeads, kHeadDim, true, true},
      {"q-norm prefill T=300 in place", 300 * kQHeads, kHeadDim, true, true},
      {"q-norm prefill T=300", 300 * kQHeads, kHeadDim, false, true},
      {"qwen3-4b hidden", 5, 2560, false, false},
      {"qwen3-14b hidden", 3, 5120, false, false},
      {"qwen3-0.6b hidden", 2, 1024, false, false},
      {"head_dim 64", 7 * 16, 64, true, false},
      {"n=100 (not a multiple of 8)", 2, 100, false, false},
  };
  for (const Case& c : cases) {
    const std::string label = "rmsnorm " + c.name + " rows=" + str(c.rows) + " n=" + str(c.n);
    const uint64_t seed = case_seed(label);
    const auto x = random_bf16(size_t(c.rows * c.n), ref::mix_seed(seed, 1), -3.0f, 3.0f);  // (rows, n)
    const auto weight = random_bf16(size_t(c.n), ref::mix_seed(seed, 2), -1.5f, 1.5f);      // (n)
    std::vector<uint16_t> want(x.size());                                                   // (rows, n)
    ref::rmsnorm(x.data(), weight.data(), c.rows, c.n, kEps, want.data());
    DeviceArray<uint16_t> x_d(x.size()), y_d(c.in_place ? 0 : x.size());
    const auto weight_d = to_device(weight);
    const RmsnormArgs args{
        as_bf16(x_d), as_bf16(weight_d), c.in_place ? as_bf16(x_d) : as_bf16(y_d), c.rows, c.n, kEps};
    runner.run(
        label, args,
        [&] {
          x_d.upload(x);
          y_d.poison();
        },
        [&](const std::string& run_label) {
          const auto got = (c.in_place ? x_d : y_d).download();
          Check check("y");
          for (size_t i = 0; i < got.size(); ++i) check.ulps(int64_t(i), got[i], want[i], kNormUlps);
          expect_ok(check, run_label);
        },
        c.required, {produced(x_d)});
  }
}

// y of an add-and-norm kernel (rows, n) within kNormUlps of the norm of the residual it wrote (got_residual), so
// that the residual's check and y's stay independent.
void expect_norm_of(const std::vector<uint16_t>& got_residual, const std::vector<uint16_t>& weight, int64_t rows,
                    int64_t n, const std::vector<uint16_t>& got_y, const std::string& run_label) {
  std::vector<uint16_t> want_y(got_y.size());
  ref::rmsnorm(got_residual.data(), weight.data(), rows, n, kEps, want_y.data());
  Check y("y");
  for (size_t i = 0; i < got_y.size(); ++i) y.ulps(int64_t(i), got_y[i], want_y[i], kNormUlps);
  expect_ok(y, run_label);
}

TEST_F(GpuTest, AddRmsnormMatchesReference) {
  VersionRunner<AddRmsnormArgs> runner(kernels::add_rmsnorm_versions());
  struct Case {
    int64_t rows, n;
    bool required;
  };
  const std::vector<Case> cases = {{1, kHidden, true},   {3, kHidden, true},    {8, kHidden, true},
                                   {300, kHidden, true}, {2048, kHidden, true}, {5, 2560, false},
                                   {2, 1024, false}};
  for (const Case& c : cases) {
    const std::string label = "add_rmsnorm rows=" + str(c.rows) + " n=" + str(c.n);
    const uint64_t seed = case_seed(label);
    const auto residual =
        random_bf16(size_t(c.rows * c.n), ref::mix_seed(seed, 1), -8.0f, 8.0f);            // (rows, n)
    const auto delta = random_bf16(residual.size(), ref::mix_seed(seed, 2), -2.0f, 2.0f);  // (rows, n)
    const auto weight = random_bf16(size_t(c.n), ref::mix_seed(seed, 3), -1.5f, 1.5f);     // (n)
    std::vector<uint16_t> want_residual(residual.size());
    ref::add(residual.data(), delta.data(), int64_t(residual.size()), want_residual.data());
    DeviceArray<uint16_t> residual_d(residual.size()), y_d(residual.size());
    const auto delta_d = to_device(delta);
    const auto weight_d = to_device(weight);
    const AddRmsnormArgs args{
        as_bf16(residual_d), as_bf16(delta_d), as_bf16(weight_d), as_bf16(y_d), c.rows, c.n, kEps};
    runner.run(
        label, args,
        [&] {
          residual_d.upload(residual);
          y_d.poison();
        },
        [&](const std::string& run_label) {
          const auto got_residual = residual_d.download();
          const auto got_y = y_d.download();
          Check r("residual");
          for (size_t i = 0; i < got_residual.size(); ++i)
            r.ulps(int64_t(i), got_residual[i], want_residual[i], kAddUlps);
          expect_ok(r, run_label);
          expect_norm_of(got_residual, weight, c.rows, c.n, got_y, run_label);
        },
        c.required, {produced(residual_d), produced(delta_d)});
  }
}

// h' = bf16(h + bf16(Σ_j delta copy j)) bit for bit (add_delta, the copies summed in order: exact_sum_copies makes
// the sum exact in any order), then with an addend (AddDeltaRmsnormArgs::addend) h'' = bf16(h' + addend), every copy
// zeroed, y the norm of the h the kernel wrote (kNormUlps, as AddRmsnormMatchesReference). The delta starts at
// random values, y poisoned; h, the delta and the addend come from the previous kernels.
TEST_F(GpuTest, AddDeltaRmsnormMatchesReference) {
  VersionRunner<AddDeltaRmsnormArgs> runner(kernels::add_delta_rmsnorm_versions());
  struct Case {
    int64_t rows, n;
    int32_t copies;
    bool required, addend = false;
  };
  const std::vector<Case> cases = {{1, kHidden, 1, true},        {2, kHidden, 2, true},  {2, kHidden, 4, true},
                                   {8, kHidden, 2, true},        {3, 1024, 1, false},    {2, 5120, 3, false},
                                   {2, kHidden, 2, true, true},  {1, kHidden, 1, true, true}};
  for (const Case& c : cases) {
    const std::string label = "add_delta_rmsnorm rows=" + str(c.rows) + " n=" + str(c.n) +
                              " copies=" + str(c.copies) + (c.addend ? " addend" : "");
    const uint64_t seed = case_seed(label);
    const auto residual = random_bf16(size_t(c.rows * c.n), ref::mix_seed(seed, 1), -8.0f, 8.0f);  // (rows, n)
    const auto weight = random_bf16(size_t(c.n), ref::mix_seed(seed, 3), -1.5f, 1.5f);            // (n)
    const auto delta = c.copies == 1 ? random_f32(residual.size(), ref::mix_seed(seed, 2), -2.0f, 2.0f)
                                     : exact_sum_copies(c.copies, c.rows * c.n, ref::mix_seed(seed, 2));
    const std::vector<float> sum = sum_copies(delta, c.rows * c.n);  // (rows, n)
    const auto addend = random_bf16(residual.size(), ref::mix_seed(seed, 4), -2.0f, 2.0f);  // (rows, n)
    std::vector<uint16_t> want_residual(residual.size());
    for (size_t i = 0; i < residual.size(); ++i) {
      want_residual[i] = add_delta(residual[i], sum[i]);
      if (c.addend) want_residual[i] = ref::to_bf16(ref::to_float(want_residual[i]) + ref::to_float(addend[i]));
    }
    DeviceArray<uint16_t> residual_d(residual.size()), y_d(residual.size());
    DeviceArray<float> delta_d(delta.size());  // (copies, rows, n)
    const auto weight_d = to_device(weight);
    const auto addend_d = to_device(addend);
    AddDeltaRmsnormArgs args{as_bf16(residual_d), delta_d.get(), c.copies, as_bf16(weight_d), as_bf16(y_d),
                             c.rows,              c.n,           kEps};
    if (c.addend) args.addend = as_bf16(addend_d);
    runner.run(
        label, args,
        [&] {
          residual_d.upload(residual);
          delta_d.upload(delta);
          y_d.poison();
        },
        [&](const std::string& run_label) {
          const auto got_residual = residual_d.download();
          Check r("residual");
          for (size_t i = 0; i < got_residual.size(); ++i) r.exact(int64_t(i), got_residual[i], want_residual[i]);
          expect_ok(r, run_label);
          const auto got_delta = delta_d.download();
          int64_t nonzero = 0;
          for (float d : got_delta) nonzero += d != 0.0f;
          EXPECT_EQ(nonzero, 0) << run_label << " | delta copies not zeroed";
          expect_norm_of(got_residual, weight, c.rows, c.n, y_d.download(), run_label);
        },
        c.required, {produced(residual_d), produced(delta_d), produced(addend_d)});
  }
}

// ---- 02 gemm ----------------------------------------------------------------------------------------------
struct GemmShape {
  const char* name;
  int64_t n, k;
};
// The engine's projections at Qwen3-8B: QKV fused, O, gate|up fused, down, lm_head.
const GemmShape kEngineGemms[] = {{"qkv", 6144, 4096},
                                  {"o", 4096, 4096},
                                  {"gate_up", 24576, 4096},
                                  {"down", 4096, 12288},
                                  {"lm_head", kVocab, 4096}};

std::vector<VersionUnderTest<GemmArgs>> gemm_versions_and_cublas() {
  auto versions = versions_under_test(kernels::gemm_versions());
  const bool listed = std::any_of(versions.begin(), versions.end(),
                                  [](const auto& v) { return v.launch == &kernels::launch_gemm_cublas; });
  // cuBLAS is checked too (it validates the reference), but not replayed from a graph: it is never in the
  // engine's.
  if (!listed) versions.push_back({"cublas", &kernels::launch_gemm_cublas, nullptr, false});
  return versions;
}

// Inputs and the CPU reference of one (n, k) shape for the rows `rows` of x.
struct GemmProblem {
  int64_t max_m, n, k;
  std::vector<uint16_t> x, w;         // (max_m, k), (n, k)
  std::vector<int64_t> rows;          // rows of x with a CPU reference
  std::vector<float> exact, abs_sum;  // (rows.size(), n)
  DeviceArray<uint16_t> x_d, w_d;

  GemmProblem(const std::string& label, int64_t max_m_, int64_t n_, int64_t k_, std::vector<int64_t> rows_)
      : max_m(max_m_), n(n_), k(k_), rows(std::move(rows_)) {
    const uint64_t seed = case_seed(label);
    x = random_bf16(size_t(max_m * k), ref::mix_seed(seed, 1), -2.0f, 2.0f);
    w = random_bf16(size_t(n * k), ref::mix_seed(seed, 2), -0.05f, 0.05f);
    exact.resize(rows.size() * size_t(n));
    abs_sum.resize(exact.size());
    ref::gemm(x.data(), w.data(), n, k, rows, exact.data(), abs_sum.data());
    x_d = to_device(x);
    w_d = to_device(w);
  }

  // Checks y (m, n): rows with a CPU reference within the bound, every element written and finite, and, when
  // `cublas` is given, every row against it.
  void check(const std::vector<uint16_t>& got, int64_t m, const std::vector<uint16_t>* cublas,
             const std::string& run_label) const {
    Check vs_cpu("y vs CPU");
    std::vector<uint8_t> cpu_checked(size_t(m), 0);
    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t i = rows[r];
      if (i >= m) continue;
      cpu_checked[size_t(i)] = 1;
      for (int64_t j = 0; j < n; ++j) {
        const double e = exact[r * size_t(n) + size_t(j)];
        const double bound = kGemmRelTol * std::fabs(e) + kGemmAccumTol * abs_sum[r * size_t(n) + size_t(j)];
        vs_cpu.near(i * n + j, got[size_t(i * n + j)], e, bound);
      }
    }
    expect_ok(vs_cpu, run_label, kGemmFrobenius);
    if (cublas) {
      Check vs_cublas("y vs cuBLAS");
      for (int64_t i = 0; i < m; ++i) {
        double sum_sq = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double v = ref::to_float((*cublas)[size_t(i * n + j)]);
          sum_sq += v * v;
        }
        const double row_rms = std::sqrt(sum_sq / double(n));
        for (int64_t j = 0; j < n; ++j) {
          const double want = ref::to_float((*cublas)[size_t(i * n + j)]);
          // Both sides rounded once to bf16 from fp32 sums in different orders.
          vs_cublas.near(i * n + j, got[size_t(i * n + j)], want,
                         0x1p-6 * std::fabs(want) + 0x1p-10 * row_rms);
        }
      }
      expect_ok(vs_cublas, run_label, kGemmFrobenius);
    } else {
      Check written("y rows without a reference");
      for (int64_t i = 0; i < m; ++i)
        if (!cpu_checked[size_t(i)])
          for (int64_t j = 0; j < n; ++j) written.near(i * n + j, got[size_t(i * n + j)], 0.0, INFINITY);
      expect_ok(written, run_label);
    }
  }
};

TEST_F(GpuTest, GemmDecodeShapes) {
  VersionRunner<GemmArgs> runner(gemm_versions_and_cublas());
  for (const GemmShape& shape : kEngineGemms) {
    const std::string base = std::string("gemm ") + shape.name + " n=" + str(shape.n) + " k=" + str(shape.k);
    // One reference for m = 8; the m < 8 cases use its first m rows.
    const GemmProblem problem(base, 8, shape.n, shape.k, {0, 1, 2, 3, 4, 5, 6, 7});
    for (int64_t m = 1; m <= 8; ++m) {
      const std::string label = base + " m=" + str(m);
      DeviceArray<uint16_t> y_d(size_t(m * shape.n));  // (m, n)
      const GemmArgs args{as_bf16(problem.x_d), as_bf16(problem.w_d), as_bf16(y_d), m, shape.n, shape.k};
      runner.run(
          label, args, [&] { y_d.poison(); },
          [&](const std::string& run_label) { problem.check(y_d.download(), m, nullptr, run_label); }, true,
          {produced(problem.x_d)});
    }
  }
}

TEST_F(GpuTest, GemmPrefillAndAwkwardShapes) {
  VersionRunner<GemmArgs> runner(gemm_versions_and_cublas());
  struct Case {
    std::string name;
    int64_t m, n, k;
    bool required, large;
  };
  const std::vector<Case> cases = {
      {"qkv", 3, 6144, 4096, true, false},
      {"o", 300, 4096, 4096, true, true},
      {"down", 300, 4096, 12288, true, true},
      {"gate_up", 3, 24576, 4096, true, false},
      {"lm_head", 3, kVocab, 4096, true, false},
      {"qwen3-4b gate_up", 300, 2 * 9728, 2560, false, true},
      {"qwen3-4b down", 3, 2560, 9728, false, false},
      {"qwen3-0.6b lm_head", 1, kVocab, 1024, false, false},
      {"n not a multiple of 64", 17, 1000, 4096, false, false},
      {"k not a multiple of 64", 7, 4096, 1000, false, false},
      {"odd n, small k", 33, 129, 264, false, false},
      {"decode, odd n, small k", 1, 129, 264, false, false},
      {"tiny n and k", 300, 200, 72, false, false},
      // Decode shapes where a one-CTA-per-SM grid has CTAs without rows, stages of many short rows, or stages
      // of one long row.
      {"decode, n < 132, k = 64", 1, 100, 64, false, false},
      {"decode b=3, k = 64", 3, 200, 64, false, false},
      {"decode b=8, tiny n, k = 128", 8, 7, 128, false, false},
      {"decode b=5, k = 128", 5, 1000, 128, false, false},
      {"decode b=4, n = 133", 4, 133, 4096, false, false},
      {"decode b=2, odd n, k = 12288", 2, 1001, kInter, false, false},
      {"decode b=8, k = 12288", 8, 300, kInter, false, false},
  };
  for (const Case& c : cases) {
    if (c.large && quick_mode()) continue;
    const std::string label = "gemm " + c.name + " m=" + str(c.m) + " n=" + str(c.n) + " k=" + str(c.k);
    std::vector<int64_t> rows(size_t(c.m));
    std::iota(rows.begin(), rows.end(), 0);
    const GemmProblem problem(label, c.m, c.n, c.k, rows);
    DeviceArray<uint16_t> y_d(size_t(c.m * c.n));  // (m, n)
    const GemmArgs args{as_bf16(problem.x_d), as_bf16(problem.w_d), as_bf16(y_d), c.m, c.n, c.k};
    runner.run(
        label, args, [&] { y_d.poison(); },
        [&](const std::string& run_label) { problem.check(y_d.download(), c.m, nullptr, run_label); },
        c.required, {produced(problem.x_d)});
  }
}

// y rows ldy > n elements apart (two projections filling the halves of one buffer): every row within the gemm
// bound, the gaps between rows untouched.
TEST_F(GpuTest, GemmDecodeWritesRowsLdyApart) {
  VersionRunner<GemmArgs> runner(gemm_versions_and_cublas());
  struct Case {
    int64_t m, n, k, ldy;
  };
  const std::vector<Case> cases = {{1, 4096, 4096, 2 * 4096}, {3, 200, 128, 456}, {8, 1024, 4096, 3072}};
  for (const Case& c : cases) {
    const std::string label =
        "gemm ldy m=" + str(c.m) + " n=" + str(c.n) + " k=" + str(c.k) + " ldy=" + str(c.ldy);
    std::vector<int64_t> rows(size_t(c.m));
    std::iota(rows.begin(), rows.end(), 0);
    const GemmProblem problem(label, c.m, c.n, c.k, rows);
    DeviceArray<uint16_t> y_d(size_t(c.m * c.ldy));  // (m, ldy)
    const GemmArgs args{as_bf16(problem.x_d), as_bf16(problem.w_d), as_bf16(y_d), c.m, c.n, c.k, c.ldy};
    runner.run(
        label, args, [&] { y_d.poison(); },
        [&](const std::string& run_label) {
          const auto got = y_d.download();
          Check check("y"), gaps("y between rows");
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < c.ldy; ++j) {
              const uint16_t bits = got[size_t(i * c.ldy + j)];
              if (j >= c.n) {
                gaps.untouched(i * c.ldy + j, bits);
                continue;
              }
              const double e = problem.exact[size_t(i * c.n + j)];
              check.near(i * c.n + j, bits, e,
                         kGemmRelTol * std::fabs(e) + kGemmAccumTol * problem.abs_sum[size_t(i * c.n + j)]);
            }
          expect_ok(check, run_label, kGemmFrobenius);
          expect_ok(gaps, run_label);
        },
        false, {produced(problem.x_d)});
  }
}

TEST_F(GpuTest, GemmPrefillLargeAgainstCublasAndSampledRows) {
  if (quick_mode()) {
    GTEST_SKIP() << "QWEN3_GPU_TESTS_QUICK: large prefill GEMMs skipped";
  }
  VersionRunner<GemmArgs> runner(gemm_versions_and_cublas());
  for (const GemmShape& shape : kEngineGemms) {
    const bool lm_head = std::string(shape.name) == "lm_head";
    const int64_t max_m = lm_head ? 512 : 2048;  // the engine projects only the last prompt token to logits
    const std::string base = std::string("gemm ") + shape.name + " n=" + str(shape.n) + " k=" + str(shape.k);
    std::vector<int64_t> rows = {0, 1, 255, 256, 511};
    if (max_m > 512) rows.insert(rows.end(), {512, 1023, 1500, 2047});
    const GemmProblem problem(base + " prefill", max_m, shape.n, shape.k, rows);
    for (const int64_t m : {int64_t(512), int64_t(2048)}) {
      if (m > max_m) continue;
      const std::string label = base + " m=" + str(m);
      DeviceArray<uint16_t> y_d(size_t(m * shape.n));  // (m, n)
      const GemmArgs args{as_bf16(problem.x_d), as_bf16(problem.w_d), as_bf16(y_d), m, shape.n, shape.k};
      y_d.poison();
      kernels::launch_gemm_cublas(args, test_stream());
      VersionRunner<GemmArgs>::finish(label + " | cublas reference");
      const std::vector<uint16_t> cublas = y_d.download();
      runner.run(
          label, args, [&] { y_d.poison(); },
          [&](const std::string& run_label) { problem.check(y_d.download(), m, &cublas, run_label); }, true,
          {produced(problem.x_d)});
    }
  }
}

// ---- 03 rope ----------------------------------------------------------------------------------------------
TEST_F(GpuTest, RopeMatchesReference) {
  VersionRunner<RopeArgs> runner(kernels::rope_versions());
  struct Case {
    std::string name;
    int64_t q_heads, kv_heads, head_dim;
    std::vector<int32_t> positions;
    double theta;
    float attention_factor;
    bool required;
  };
  std::vector<int32_t> decode8(8);
  ref::fill_uniform_int(decode8, case_seed("rope decode positions"), 0, 40959);
  decode8[0] = 0;
  decode8[1] = 40959;  // Qwen3's longest context: sincosf must reduce large angles accurately
  const std::vector<Case> cases = {
      {"decode b=1", kQHeads, kKvHeads, kHeadDim, {4097}, 1e6, 1.0f, true},
      {"decode b=8", kQHeads, kKvHeads, kHeadDim, decode8, 1e6, 1.0f, true},
      {"prefill T=3", kQHeads, kKvHeads, kHeadDim, consecutive(0, 3), 1e6, 1.0f, true},
      {"prefill T=300 from 17", kQHeads, kKvHeads, kHeadDim, consecutive(17, 300), 1e6, 1.0f, true},
      {"prefill T=2048", kQHeads, kKvHeads, kHeadDim, consecutive(0, 2048), 1e6, 1.0f, true},
      {"qwen3-0.6b heads", 16, 8, 128, {3, 900, 31000, 7, 1}, 1e6, 1.0f, false},
      {"head_dim 64", 8, 4, 64, consecutive(100, 7), 1e4, 1.0f, false},
      {"odd head counts", 14, 2, 64, {0, 5, 77}, 1e4, 1.0f, false},
      {"attention factor 1.3 (YaRN)", kQHeads, kKvHeads, kHeadDim, {0, 1, 8191, 32768}, 1e6, 1.3f, false},
  };
  for (const Case& c : cases) {
    const int64_t tokens = int64_t(c.positions.size());
    const std::string label = "rope " + c.name + " heads=" + str(c.q_heads) + "/" + str(c.kv_heads) +
                              " head_dim=" + str(c.head_dim) + " tokens=" + str(tokens);
    const uint64_t seed = case_seed(label);
    const auto q = random_bf16(size_t(tokens * c.q_heads * c.head_dim), ref::mix_seed(seed, 1), -4.0f, 4.0f);
    const auto k = random_bf16(size_t(tokens * c.kv_heads * c.head_dim), ref::mix_seed(seed, 2), -4.0f, 4.0f);
    const auto inv_freq = make_inv_freq(c.head_dim, c.theta);  // (head_dim / 2)
    auto want_q = q, want_k = k;
    std::vector<float> q_mag(q.size()), k_mag(k.size());
    ref::rope(want_q.data(), want_k.data(), c.positions, inv_freq, c.attention_factor, c.q_heads, c.kv_heads,
              c.head_dim, q_mag.data(), k_mag.data());
    DeviceArray<uint16_t> q_d(q.size()), k_d(k.size());
    const auto positions_d = to_device(c.positions);
    const auto inv_freq_d = to_device(inv_freq);
    const RopeArgs args{as_bf16(q_d), as_bf16(k_d), positions_d.get(), inv_freq_d.get(), c.attention_factor,
                        tokens,       c.q_heads,    c.kv_heads,        c.head_dim};
    runner.run(
        label, args,
        [&] {
          q_d.upload(q);
          k_d.upload(k);
        },
        [&](const std::string& run_label) {
          for (const bool is_q : {true, false}) {
            const auto got = (is_q ? q_d : k_d).download();
            const auto& want = is_q ? want_q : want_k;
            const auto& mag = is_q ? q_mag : k_mag;
            Check check(is_q ? "q" : "k");
            for (size_t i = 0; i < got.size(); ++i) {
              const double w = ref::to_float(want[i]);
              check.near(int64_t(i), got[i], w, kRopeTermTol * mag[i] + kRopeResultTol * std::fabs(w));
            }
            expect_ok(check, run_label);
          }
        },
        c.required, {produced(q_d), produced(k_d), produced(positions_d, "positions")});
  }
}

// ---- 03 QK-norm + RoPE + KV-cache write (fused), and the unfused KV write ---------------------------------
// A KV cache of (slots, max_ctx, kv_heads, head_dim) with the rows that a set of tokens writes.
struct CacheLayout {
  int64_t num_slots, max_ctx, kv_heads, head_dim;
  int64_t size() const { return num_slots * max_ctx * kv_heads * head_dim; }
  int64_t row_offset(int64_t slot, int64_t position) const {
    return (slot * max_ctx + position) * kv_heads * head_dim;
  }
};

// Checks a cache: the rows written by the tokens against `want` (exact, or within `bound` when given), every
// other element still poison.
void check_cache(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                 const std::vector<float>* bound, const CacheLayout& layout,
                 const std::vector<int32_t>& positions, const std::vector<int32_t>& slots, const char* what,
                 const std::string& run_label) {
  const int64_t row = layout.kv_heads * layout.head_dim;
  std::vector<uint8_t> written(size_t(layout.num_slots * layout.max_ctx), 0);
  for (size_t t = 0; t < positions.size(); ++t)
    written[size_t((slots.empty() ? 0 : slots[t]) * layout.max_ctx + positions[t])] = 1;
  Check check(what);
  for (int64_t r = 0; r < layout.num_slots * layout.max_ctx; ++r) {
    for (int64_t i = r * row; i < (r + 1) * row; ++i) {
      if (!written[size_t(r)]) {
        check.untouched(i, got[size_t(i)]);
      } else if (bound) {
        const double w = ref::to_float(want[size_t(i)]);
        check.near(i, got[size_t(i)], w, (*bound)[size_t(i)]);
      } else {
        check.exact(i, got[size_t(i)], want[size_t(i)]);
      }
    }
  }
  expect_ok(check, run_label);
}

struct CacheCase {
  std::string name;
  int64_t q_heads, kv_heads, head_dim;
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;  // empty: nullptr (slot 0)
  int64_t num_slots, max_ctx;
  bool required;
};

std::vector<CacheCase> cache_cases() {
  std::vector<int32_t> decode8(8);
  ref::fill_uniform_int(decode8, case_seed("cache decode positions"), 0, 1099);
  return {
      {"decode b=1", kQHeads, kKvHeads, kHeadDim, {1023}, {}, 1, 1100, true},
      {"decode b=4", kQHeads, kKvHeads, kHeadDim, {5, 1099, 0, 640}, {2, 0, 3, 1}, 4, 1100, true},
      {"decode b=8", kQHeads, kKvHeads, kHeadDim, decode8, {7, 3, 5, 1, 0, 6, 2, 4}, 8, 1100, true},
      {"prefill T=3", kQHeads, kKvHeads, kHeadDim, consecutive(0, 3), {}, 1, 1100, true},
      {"prefill T=300 from 17 in slot 1", kQHeads, kKvHeads, kHeadDim, consecutive(17, 300),
       std::vector<int32_t>(300, 1), 2, 1100, true},
      {"qwen3-0.6b heads b=3", 16, 8, 128, {9, 700, 64}, {1, 2, 0}, 3, 1100, false},
      {"head_dim 64 b=3", 16, 8, 64, {9, 700, 64}, {1, 2, 0}, 3, 1100, false},
      {"gqa 1 T=5", 8, 8, 128, consecutive(40, 5), {}, 1, 1100, false},
  };
}

TEST_F(GpuTest, QkNormRopeCacheMatchesReference) {
  VersionRunner<QkNormRopeCacheArgs> runner(kernels::qk_norm_rope_cache_versions());
  for (const CacheCase& c : cache_cases()) {
    const int64_t tokens = int64_t(c.positions.size()), D = c.head_dim;
    const int64_t qkv_width = (c.q_heads + 2 * c.kv_heads) * D;
    const std::string label = "qk_norm_rope_cache " + c.name + " heads=" + str(c.q_heads) + "/" +
                              str(c.kv_heads) + " head_dim=" + str(D);
    const uint64_t seed = case_seed(label);
    const auto qkv =
        random_bf16(size_t(tokens * qkv_width), ref::mix_seed(seed, 1), -4.0f, 4.0f);  // q | k | v
    const auto q_norm = random_bf16(size_t(D), ref::mix_seed(seed, 2), -1.5f, 1.5f);   // (head_dim)
    const auto k_norm = random_bf16(size_t(D), ref::mix_seed(seed, 3), -1.5f, 1.5f);   // (head_dim)
    const auto inv_freq = make_inv_freq(D, 1e6);
    const CacheLayout layout{c.num_slots, c.max_ctx, c.kv_heads, D};

    // Reference: rmsnorm per head, then rope; k and v into the cache at (slot, position).
    std::vector<uint16_t> want_q(size_t(tokens * c.q_heads * D));  // (tokens, q_heads, head_dim)
    std::vector<float> q_bound(want_q.size());
    std::vector<uint16_t> want_k(size_t(layout.size())), want_v(size_t(layout.size()));
    std::vector<float> k_bound(size_t(layout.size()));
    std::vector<float> cos(size_t(D / 2)), sin(size_t(D / 2)), mag(static_cast<size_t>(D));
    std::vector<uint16_t> head(static_cast<size_t>(D));
    for (int64_t t = 0; t < tokens; ++t) {
      ref::rope_cos_sin(c.positions[size_t(t)], inv_freq, 1.0f, cos.data(), sin.data());
      const uint16_t* row = qkv.data() + t * qkv_width;
      const int64_t slot = c.slots.empty() ? 0 : c.slots[size_t(t)];
      for (int64_t h = 0; h < c.q_heads + c.kv_heads; ++h) {
        const bool is_q = h < c.q_heads;
        ref::rmsnorm(row + h * D, (is_q ? q_norm : k_norm).data(), 1, D, kEps, head.data());
        ref::rope_head(head.data(), D, cos.data(), sin.data(), mag.data());
        const int64_t out = is_q ? (t * c.q_heads + h) * D
                                 : layout.row_offset(slot, c.positions[size_t(t)]) + (h - c.q_heads) * D;
        for (int64_t d = 0; d < D; ++d) {
          const double bound = kQkNormRopeTermTol * mag[size_t(d)] +
                               kRopeResultTol * std::fabs(ref::to_float(head[size_t(d)]));
          (is_q ? want_q : want_k)[size_t(out + d)] = head[size_t(d)];
          (is_q ? q_bound : k_bound)[size_t(out + d)] = float(bound);
        }
      }
      for (int64_t h = 0; h < c.kv_heads; ++h)
        std::copy_n(row + (c.q_heads + c.kv_heads + h) * D, D,
                    want_v.begin() + layout.row_offset(slot, c.positions[size_t(t)]) + h * D);
    }

    const auto qkv_d = to_device(qkv);
    const auto q_norm_d = to_device(q_norm), k_norm_d = to_device(k_norm);
    const auto positions_d = to_device(c.positions);
    const DeviceArray<int32_t> slots_d = to_device(c.slots);
    const auto inv_freq_d = to_device(inv_freq);
    DeviceArray<uint16_t> q_out_d(want_q.size()), k_cache_d(size_t(layout.size())),
        v_cache_d(size_t(layout.size()));
    const QkNormRopeCacheArgs args{as_bf16(qkv_d),
                                   as_bf16(q_norm_d),
                                   as_bf16(k_norm_d),
                                   as_bf16(q_out_d),
                                   as_bf16(k_cache_d),
                                   as_bf16(v_cache_d),
                                   positions_d.get(),
                                   c.slots.empty() ? nullptr : slots_d.get(),
                                   inv_freq_d.get(),
                                   1.0f,
                                   kEps,
                                   tokens,
                                   c.q_heads,
                                   c.kv_heads,
                                   D,
                                   c.max_ctx};
    runner.run(
        label, args,
        [&] {
          q_out_d.poison();
          k_cache_d.poison();
          v_cache_d.poison();
        },
        [&](const std::string& run_label) {
          const auto got_q = q_out_d.download();
          Check q("q_out");
          for (size_t i = 0; i < got_q.size(); ++i)
            q.near(int64_t(i), got_q[i], ref::to_float(want_q[i]), q_bound[i]);
          expect_ok(q, run_label);
          check_cache(k_cache_d.download(), want_k, &k_bound, layout, c.positions, c.slots, "k_cache",
                      run_label);
          check_cache(v_cache_d.download(), want_v, nullptr, layout, c.positions, c.slots, "v_cache",
                      run_label);
        },
        c.required, {produced(qkv_d), produced(positions_d, "positions"), produced(slots_d, "slots")});
  }
}

TEST_F(GpuTest, KvWriteCopiesRowsIntoTheCache) {
  VersionRunner<KvWriteArgs> runner(kernels::kv_write_versions());
  for (const CacheCase& c : cache_cases()) {
    for (const bool strided : {true, false}) {  // k and v read from the fused qkv rows, or packed
      const int64_t tokens = int64_t(c.positions.size()), D = c.head_dim, kv_width = c.kv_heads * D;
      const int64_t row_stride = strided ? (c.q_heads + 2 * c.kv_heads) * D : kv_width;
      const std::string label = "kv_write " + c.name + (strided ? " strided" : " packed") +
                                " kv_heads=" + str(c.kv_heads) + " head_dim=" + str(D);
      const uint64_t seed = case_seed(label);
      // strided: (tokens, (q_heads + 2 kv_heads) * head_dim) with k at column q_heads*D and v after it;
      // packed: k then v, each (tokens, kv_heads * head_dim).
      const auto source =
          random_bf16(size_t(tokens * (strided ? row_stride : 2 * kv_width)), seed, -4.0f, 4.0f);
      const int64_t k_offset = strided ? c.q_heads * D : 0;
      const int64_t v_offset = strided ? (c.q_heads + c.kv_heads) * D : tokens * kv_width;
      const CacheLayout layout{c.num_slots, c.max_ctx, c.kv_heads, D};
      std::vector<uint16_t> want_k(size_t(layout.size())), want_v(size_t(layout.size()));
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t dst =
            layout.row_offset(c.slots.empty() ? 0 : c.slots[size_t(t)], c.positions[size_t(t)]);
        std::copy_n(source.begin() + k_offset + t * row_stride, kv_width, want_k.begin() + dst);
        std::copy_n(source.begin() + v_offset + t * row_stride, kv_width, want_v.begin() + dst);
      }
      const auto source_d = to_device(source);
      const auto positions_d = to_device(c.positions);
      const DeviceArray<int32_t> slots_d = to_device(c.slots);
      DeviceArray<uint16_t> k_cache_d(size_t(layout.size())), v_cache_d(size_t(layout.size()));
      const KvWriteArgs args{as_bf16(source_d) + k_offset,
                             as_bf16(source_d) + v_offset,
                             as_bf16(k_cache_d),
                             as_bf16(v_cache_d),
                             positions_d.get(),
                             c.slots.empty() ? nullptr : slots_d.get(),
                             tokens,
                             c.kv_heads,
                             D,
                             c.max_ctx,
                             row_stride,
                             row_stride};
      runner.run(
          label, args,
          [&] {
            k_cache_d.poison();
            v_cache_d.poison();
          },
          [&](const std::string& run_label) {
            check_cache(k_cache_d.download(), want_k, nullptr, layout, c.positions, c.slots, "k_cache",
                        run_label);
            check_cache(v_cache_d.download(), want_v, nullptr, layout, c.positions, c.slots, "v_cache",
                        run_label);
          },
          c.required, {produced(source_d), produced(positions_d, "positions"), produced(slots_d, "slots")});
    }
  }
}

// ---- 04 attention -----------------------------------------------------------------------------------------
struct AttentionCase {
  std::string name;
  int64_t q_heads, kv_heads, head_dim;
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;  // empty: nullptr (slot 0)
  int64_t num_slots, max_ctx;
  bool required = false;
  bool needles = false;     // a few keys dominate: a dropped or extra key moves the output visibly
  bool nan_beyond = false;  // cache rows past each slot's last position hold NaN instead of large values
  bool loose_max_position = false;  // max_position = max_ctx - 1 (a valid upper bound, larger than the truth)
};

// Positions where tiles and splits start or end: a needle there is lost by an off-by-one at the edge.
const int32_t kTileEdges[] = {0,   1,   15,  16,   31,   32,   63,   64,   127,  128, 255,
                              256, 511, 512, 1023, 1024, 2047, 2048, 4095, 4096, 8191};

// A decode / prefill attention output against the reference: within the attention bounds of each element
// (kAttnWeightedTol of Σ p |v|, kAttnResultTol of the value) and the Frobenius bound over the whole.
void check_attention_out(const std::vector<uint16_t>& got, const std::vector<float>& exact,
                         const std::vector<float>& weighted_abs, const std::string& run_label) {
  Check check("out");
  for (size_t i = 0; i < got.size(); ++i)
    check.near(int64_t(i), got[i], exact[i],
               kAttnWeightedTol * weighted_abs[i] + kAttnResultTol * std::fabs(exact[i]) + 1e-6);
  expect_ok(check, run_label, kAttnFrobenius);
}

void run_attention_case(VersionRunner<AttentionArgs>& runner, const AttentionCase& c) {
  const int64_t tokens = int64_t(c.positions.size()), D = c.head_dim;
  const std::string label = "attention " + c.name + " heads=" + str(c.q_heads) + "/" + str(c.kv_heads) +
                            " head_dim=" + str(D) + " tokens=" + str(tokens);
  const uint64_t seed = case_seed(label);
  const float scale = 1.0f / std::sqrt(float(D));
  const CacheLayout layout{c.num_slots, c.max_ctx, c.kv_heads, D};
  const int64_t row = c.kv_heads * D;

  // Keys and values in [-1, 1]; queries in [-6, 6] so scores spread over ~+-6 and the softmax is peaked.
  auto q = random_bf16(size_t(tokens * c.q_heads * D), ref::mix_seed(seed, 1), -6.0f, 6.0f);
  auto k_cache = random_bf16(size_t(layout.size()), ref::mix_seed(seed, 2), -1.0f, 1.0f);
  auto v_cache = random_bf16(size_t(layout.size()), ref::mix_seed(seed, 3), -1.0f, 1.0f);

  if (c.needles) {
    // q = A u + noise and needle keys = A u + noise with |u| = 1: a needle scores ~12 against ~+-1 for the
    // rest.
    const float amplitude = std::sqrt(12.0f / scale);
    std::vector<float> u(static_cast<size_t>(D));
    for (int64_t d = 0; d < D; ++d)
      u[size_t(d)] = ((ref::mix_seed(seed, 100 + uint64_t(d)) & 1) ? 1.0f : -1.0f) / std::sqrt(float(D));
    const auto noise = random_bf16(q.size() + size_t(layout.size()), ref::mix_seed(seed, 4), -0.3f, 0.3f);
    for (size_t i = 0; i < q.size(); ++i)
      q[i] = ref::to_bf16(amplitude * u[i % size_t(D)] + ref::to_float(noise[i]));
    std::set<int64_t> needle_rows(std::begin(kTileEdges), std::end(kTileEdges));
    for (const int32_t p : c.positions) needle_rows.insert({int64_t(p) - 1, int64_t(p), int64_t(p) + 1});
    for (int64_t slot = 0; slot < c.num_slots; ++slot)
      for (const int64_t j : needle_rows) {
        if (j < 0 || j >= c.max_ctx) continue;
        for (int64_t i = layout.row_offset(slot, j); i < layout.row_offset(slot, j) + row; ++i)
          k_cache[size_t(i)] =
              ref::to_bf16(amplitude * u[size_t(i % D)] + ref::to_float(noise[q.size() + size_t(i)]));
      }
  }

  // Rows past the last position each slot's tokens reach hold garbage the kernel must never use.
  std::vector<int64_t> valid_rows(size_t(c.num_slots), 0);
  for (size_t t = 0; t < c.positions.size(); ++t) {
    const int64_t slot = c.slots.empty() ? 0 : c.slots[t];
    valid_rows[size_t(slot)] = std::max(valid_rows[size_t(slot)], int64_t(c.positions[t]) + 1);
  }
  const auto garbage = random_bf16(size_t(layout.size()), ref::mix_seed(seed, 5), -30.0f, 30.0f);
  for (int64_t slot = 0; slot < c.num_slots; ++slot)
    for (int64_t i = layout.row_offset(slot, valid_rows[size_t(slot)]); i < layout.row_offset(slot + 1, 0);
         ++i) {
      if (c.needles && !c.nan_beyond) continue;  // needles past the position test the mask instead
      const uint16_t value = c.nan_beyond ? kPoisonBf16 : garbage[size_t(i)];
      k_cache[size_t(i)] = value;
      v_cache[size_t(i)] = c.nan_beyond ? kPoisonBf16 : garbage[size_t((i * 7 + 3) % layout.size())];
    }

  std::vector<float> exact(q.size()), weighted_abs(q.size());  // (tokens, q_heads, head_dim)
  ref::attention({tokens, c.q_heads, c.kv_heads, D, c.max_ctx, scale}, q.data(), k_cache.data(),
                 v_cache.data(), c.positions, c.slots, exact.data(), weighted_abs.data());

  const auto q_d = to_device(q), k_d = to_device(k_cache), v_d = to_device(v_cache);
  const auto positions_d = to_device(c.positions);
  const DeviceArray<int32_t> slots_d = to_device(c.slots);
  DeviceArray<uint16_t> out_d(q.size());
  const int64_t workspace_floats = kernels::attention_workspace_floats(tokens, c.q_heads, D, c.max_ctx);
  DeviceArray<float> workspace_d(size_t(std::max<int64_t>(workspace_floats, 1)));
  const int64_t max_position =
      c.loose_max_position ? c.max_ctx - 1 : *std::max_element(c.positions.begin(), c.positions.end());
  const AttentionArgs args{as_bf16(q_d),
                           as_bf16(k_d),
                           as_bf16(v_d),
                           as_bf16(out_d),
                           positions_d.get(),
                           c.slots.empty() ? nullptr : slots_d.get(),
                           tokens,
                           c.q_heads,
                           c.kv_heads,
                           D,
                           c.max_ctx,
                           max_position,
                           scale,
                           workspace_d.get()};
  runner.run(
      label, args,
      [&] {
        out_d.poison();
        workspace_d.poison();  // NaN: partials must be written before they are read
      },
      [&](const std::string& run_label) { check_attention_out(out_d.download(), exact, weighted_abs, run_label); },
      c.required,
      {produced(q_d), produced(k_d), produced(v_d), produced(positions_d, "positions"), produced(slots_d, "slots")});
}

TEST_F(GpuTest, AttentionDecode) {
  VersionRunner<AttentionArgs> runner(kernels::attention_versions());
  const std::vector<AttentionCase> cases = {
      {"decode ctx=1", kQHeads, kKvHeads, kHeadDim, {0}, {}, 1, 8200, true},
      {"decode ctx=17", kQHeads, kKvHeads, kHeadDim, {16}, {}, 1, 8200, true},
      {"decode ctx=1000", kQHeads, kKvHeads, kHeadDim, {999}, {}, 1, 8200, true},
      {"decode ctx=4097", kQHeads, kKvHeads, kHeadDim, {4096}, {}, 1, 8200, true},
      {"decode b=4 ctx 1/17/1000/4097",
       kQHeads,
       kKvHeads,
       kHeadDim,
       {0, 16, 999, 4096},
       {2, 0, 3, 1},
       5,
       8200,
       true},
      {"decode b=8 at tile edges",
       kQHeads,
       kKvHeads,
       kHeadDim,
       {4, 4096, 63, 64, 126, 127, 128, 8191},
       {7, 3, 5, 1, 0, 6, 2, 4},
       8,
       8192,
       true},
      {"decode b=2 loose max_position",
       kQHeads,
       kKvHeads,
       kHeadDim,
       {100, 2000},
       {1, 0},
       2,
       4100,
       true,
       false,
       false,
       true},
      {"decode gqa=1", 8, 8, 128, {16, 999, 128}, {0, 1, 2}, 3, 1100},
      {"decode gqa=2", 16, 8, 128, {16, 999, 128}, {2, 1, 0}, 3, 1100},
      {"decode gqa=8 (qwen3-32b)", 64, 8, 128, {16, 999, 128}, {0, 2, 1}, 3, 1100},
      {"decode gqa=4 head_dim=64", 16, 4, 64, {16, 999, 128, 5, 64}, {0, 1, 2, 3, 4}, 5, 1100},
      {"decode gqa=2 head_dim=64", 16, 8, 64, {16, 999}, {1, 0}, 2, 1100},
      {"decode needles b=4",
       kQHeads,
       kKvHeads,
       kHeadDim,
       {0, 200, 1024, 4096},
       {1, 2, 3, 0},
       4,
       4200,
       true,
       true},
      {"decode NaN past the context b=3",
       kQHeads,
       kKvHeads,
       kHeadDim,
       {16, 999, 128},
       {0, 1, 2},
       3,
       1100,
       true,
       false,
       true},
  };
  for (const AttentionCase& c : cases) run_attention_case(runner, c);
}

TEST_F(GpuTest, AttentionPrefill) {
  VersionRunner<AttentionArgs> runner(kernels::attention_versions());
  std::vector<AttentionCase> cases = {
      {"prefill T=1", kQHeads, kKvHeads, kHeadDim, consecutive(0, 1), {}, 1, 2100, true},
      {"prefill T=3", kQHeads, kKvHeads, kHeadDim, consecutive(0, 3), {}, 1, 2100, true},
      {"prefill T=300", kQHeads, kKvHeads, kHeadDim, consecutive(0, 300), {}, 1, 2100, true},
      {"prefill T=300 from 17 in slot 1", kQHeads, kKvHeads, kHeadDim, consecutive(17, 300),
       std::vector<int32_t>(300, 1), 2, 2100, true},
      {"prefill T=512", kQHeads, kKvHeads, kHeadDim, consecutive(0, 512), {}, 1, 2100, true},
      {"prefill gqa=4 head_dim=64 T=300 from 5", 16, 4, 64, consecutive(5, 300), {}, 1, 1100},
      {"prefill gqa=1 T=3 from 1000", 8, 8, 128, consecutive(1000, 3), {}, 1, 1100},
      {"prefill gqa=8 (qwen3-32b) T=65", 64, 8, 128, consecutive(0, 65), {}, 1, 1100},
      {"prefill needles T=300 from 40",
       kQHeads,
       kKvHeads,
       kHeadDim,
       consecutive(40, 300),
       {},
       1,
       2100,
       true,
       true},
      {"prefill NaN past the context T=65",
       kQHeads,
       kKvHeads,
       kHeadDim,
       consecutive(0, 65),
       {},
       1,
       1100,
       true,
       false,
       true},
  };
  if (!quick_mode())
    cases.push_back({"prefill T=2048", kQHeads, kKvHeads, kHeadDim, consecutive(0, 2048), {}, 1, 2048, true});
  for (const AttentionCase& c : cases) run_attention_case(runner, c);
}

// ---- 04 attention fused with QK-norm, RoPE and the cache store (decode) ----------------------------------
struct QkvAttentionCase {
  std::string name;
  int64_t q_heads, kv_heads, head_dim;
  std::vector<int32_t> positions;
  std::vector<int32_t> slots;  // empty: nullptr (slot 0)
  int64_t num_slots, max_ctx;
  bool required = false;
  int64_t max_position = -1;     // -1: the largest position (else a looser, valid upper bound)
  bool new_key_needle = false;   // q heads equal their kv head's new key: the new key dominates the softmax
};

// The reference is the unfused chain: rmsnorm + rope of q and of the new k (tests/gpu/reference.h), k and v into
// the cache at (slot, position), then attention over keys [0, position]. Checked: the output (attention bounds),
// the new cache rows (k within the QK-norm/RoPE bound, v exact) and every other cache row untouched.
double bf16_ulp(double v);  // (below, with the residual GEMV tests)

// With o_runner (batch 1 only), the qkv_attention_o op runs instead of runner's: its attention output is checked
// the same way, and its residual against that output times a random o projection (hidden o_hidden). With
// o_delta_copies > 0 also a random fp32 residual_delta (the previous layer's MLP output owed to the residual) of
// that many copies (QkvAttentionOArgs::delta_copies): one at full fp32 mantissas, several exact_sum_copies.
// o_chain_steps: QkvAttentionOArgs::chain_steps (v3-v5's steps, and the diagnostic second o pass of v1-v3).
// o_claims_ahead, o_claim_static_tiles: v10's tuning fields; o_late_rows: v11's; o_warm_code: v14's, v15's and v17's
// (QkvAttentionOArgs); o_tune: sets any other tuning field (v26's staging).
void run_qkv_attention_case(VersionRunner<kernels::QkvAttentionArgs>& runner, const QkvAttentionCase& c,
                            VersionRunner<kernels::QkvAttentionOArgs>* o_runner = nullptr, int64_t o_hidden = 0,
                            int32_t o_ring_stages = 0, int32_t o_delta_copies = 0, int32_t o_chain_steps = -1,
                            int32_t o_claims_ahead = 0, int32_t o_claim_static_tiles = 0, int32_t o_late_rows = 0,
                            int32_t o_warm_code = 0, int32_t o_smem_bytes = 0,
                            const std::function<void(kernels::QkvAttentionOArgs&)>& o_tune = {}) {
  const int64_t tokens = int64_t(c.positions.size()), D = c.head_dim, group = c.q_heads / c.kv_heads;
  const int64_t qkv_width = (c.q_heads + 2 * c.kv_heads) * D;
  const std::string label = "qkv_attention " + c.name + " heads=" + str(c.q_heads) + "/" + str(c.kv_heads) +
                            " head_dim=" + str(D) + " tokens=" + str(tokens);
  const bool o_residual_delta = o_delta_copies > 0;
  const std::string o_label =
      label + " +o hidden=" + str(o_hidden) + (o_ring_stages ? " ring=" + str(o_ring_stages) : "") +
      (o_residual_delta ? " +residual_delta" : "") +
      (o_delta_copies > 1 ? " delta_copies=" + str(o_delta_copies) : "") +
      (o_chain_steps >= 0 ? " chain_steps=" + str(o_chain_steps) : "");
  // (the runner would skip the case too, but only after the inputs and the oracle below: seconds a case)
  if (!case_selected(o_runner ? o_label : label)) return;
  const uint64_t seed = case_seed(label);
  const float scale = 1.0f / std::sqrt(float(D));
  const CacheLayout layout{c.num_slots, c.max_ctx, c.kv_heads, D};

  auto qkv = random_bf16(size_t(tokens * qkv_width), ref::mix_seed(seed, 1), -4.0f, 4.0f);  // q | k | v
  auto q_norm = random_bf16(size_t(D), ref::mix_seed(seed, 2), 0.5f, 1.5f);
  const auto k_norm = random_bf16(size_t(D), ref::mix_seed(seed, 3), 0.5f, 1.5f);
  if (c.new_key_needle) {
    q_norm = k_norm;
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < c.q_heads; ++h)
        std::copy_n(qkv.begin() + t * qkv_width + (c.q_heads + h / group) * D, D,
                    qkv.begin() + t * qkv_width + h * D);
  }
  // Earlier keys and values: magnitudes like normed, rotated ones. Rows at and past each token's position hold
  // garbage: the new row must come from qkv, later rows must never be read.
  auto k_cache = random_bf16(size_t(layout.size()), ref::mix_seed(seed, 4), -1.5f, 1.5f);
  auto v_cache = random_bf16(size_t(layout.size()), ref::mix_seed(seed, 5), -4.0f, 4.0f);
  const auto garbage = random_bf16(size_t(layout.size()), ref::mix_seed(seed, 6), -30.0f, 30.0f);
  std::vector<int64_t> valid_rows(size_t(c.num_slots), 0);
  for (size_t t = 0; t < c.positions.size(); ++t) {
    const int64_t slot = c.slots.empty() ? 0 : c.slots[t];
    valid_rows[size_t(slot)] = std::max(valid_rows[size_t(slot)], int64_t(c.positions[t]));
  }
  for (int64_t slot = 0; slot < c.num_slots; ++slot)
    for (int64_t i = layout.row_offset(slot, valid_rows[size_t(slot)]); i < layout.row_offset(slot + 1, 0); ++i) {
      k_cache[size_t(i)] = garbage[size_t(i)];
      v_cache[size_t(i)] = garbage[size_t((i * 7 + 3) % layout.size())];
    }

  // Reference: q and the new k, v; the caches as the kernel must leave them.
  const auto inv_freq = make_inv_freq(D, 1e6);
  std::vector<uint16_t> q(size_t(tokens * c.q_heads * D));
  std::vector<uint16_t> want_k = k_cache, want_v = v_cache;
  std::vector<float> k_bound(size_t(layout.size()), 0.0f);
  std::vector<float> cos(size_t(D / 2)), sin(size_t(D / 2)), mag(static_cast<size_t>(D));
  std::vector<uint16_t> head(static_cast<size_t>(D));
  for (int64_t t = 0; t < tokens; ++t) {
    ref::rope_cos_sin(c.positions[size_t(t)], inv_freq, 1.0f, cos.data(), sin.data());
    const uint16_t* row = qkv.data() + t * qkv_width;
    const int64_t new_row = layout.row_offset(c.slots.empty() ? 0 : c.slots[size_t(t)], c.positions[size_t(t)]);
    for (int64_t h = 0; h < c.q_heads + c.kv_heads; ++h) {
      const bool is_q = h < c.q_heads;
      ref::rmsnorm(row + h * D, (is_q ? q_norm : k_norm).data(), 1, D, kEps, head.data());
      ref::rope_head(head.data(), D, cos.data(), sin.data(), mag.data());
      const int64_t out = is_q ? (t * c.q_heads + h) * D : new_row + (h - c.q_heads) * D;
      for (int64_t d = 0; d < D; ++d) {
        (is_q ? q : want_k)[size_t(out + d)] = head[size_t(d)];
        if (!is_q)
          k_bound[size_t(out + d)] = float(kQkNormRopeTermTol * mag[size_t(d)] +
                                           kRopeResultTol * std::fabs(ref::to_float(head[size_t(d)])));
      }
    }
    std::copy_n(row + (c.q_heads + c.kv_heads) * D, c.kv_heads * D, want_v.begin() + new_row);
  }
  std::vector<float> exact(q.size()), weighted_abs(q.size());
  ref::attention({tokens, c.q_heads, c.kv_heads, D, c.max_ctx, scale}, q.data(), want_k.data(), want_v.data(),
                 c.positions, c.slots, exact.data(), weighted_abs.data());

  const auto qkv_d = to_device(qkv);
  const auto q_norm_d = to_device(q_norm), k_norm_d = to_device(k_norm);
  const auto positions_d = to_device(c.positions);
  const DeviceArray<int32_t> slots_d = to_device(c.slots);
  const auto inv_freq_d = to_device(inv_freq);
  DeviceArray<uint16_t> k_d(k_cache.size()), v_d(v_cache.size()), out_d(q.size()), q_scratch_d(q.size());
  const int64_t workspace_floats = kernels::attention_workspace_floats(tokens, c.q_heads, D, c.max_ctx);
  DeviceArray<float> workspace_d(size_t(std::max<int64_t>(workspace_floats, 1)));
  const int64_t max_position =
      c.max_position >= 0 ? c.max_position : *std::max_element(c.positions.begin(), c.positions.end());
  // The L2 prefetch hint (versions that use it only read it): a buffer nothing else touches, of an odd size.
  const int64_t prefetch_bytes = 3 * (1 << 20) + 16 * 7;
  DeviceArray<uint16_t> prefetch_d(size_t(prefetch_bytes / 2));
  const kernels::QkvAttentionArgs args{
      {as_bf16(qkv_d), as_bf16(q_norm_d), as_bf16(k_norm_d), as_bf16(q_scratch_d), as_bf16(k_d), as_bf16(v_d),
       positions_d.get(), c.slots.empty() ? nullptr : slots_d.get(), inv_freq_d.get(), 1.0f, kEps, tokens,
       c.q_heads, c.kv_heads, D, c.max_ctx},
      as_bf16(out_d),
      max_position,
      scale,
      workspace_d.get(),
      prefetch_d.get(),
      prefetch_bytes,
      (seed & 1) ? 0.5f : 0.0f};  // about half the cases also with the late PDL trigger
  // Rows a version must not write hold their input values; check_cache wants them poison, so compare here.
  auto check_cache_rows = [&](const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                              const std::vector<float>* bound, const char* what, const std::string& run_label) {
    std::vector<uint8_t> is_new(size_t(c.num_slots * c.max_ctx), 0);
    for (size_t t = 0; t < c.positions.size(); ++t)
      is_new[size_t((c.slots.empty() ? 0 : c.slots[t]) * c.max_ctx + c.positions[t])] = 1;
    Check check(what);
    const int64_t row = c.kv_heads * D;
    for (int64_t r = 0; r < c.num_slots * c.max_ctx; ++r)
      for (int64_t i = r * row; i < (r + 1) * row; ++i) {
        if (is_new[size_t(r)] && bound)
          check.near(i, got[size_t(i)], ref::to_float(want[size_t(i)]), (*bound)[size_t(i)]);
        else
          check.exact(i, got[size_t(i)], want[size_t(i)]);
      }
    expect_ok(check, run_label);
  };
  const auto check_attention = [&](const std::string& run_label) {
    const auto got = out_d.download();
    check_attention_out(got, exact, weighted_abs, run_label);
    check_cache_rows(k_d.download(), want_k, &k_bound, "k_cache", run_label);
    check_cache_rows(v_d.download(), want_v, nullptr, "v_cache", run_label);
    return got;
  };
  if (o_runner) {
    // residual = bf16(residual + bf16(out · w_oᵀ)) checked against the kernel's own attention output (itself
    // checked above), as GemvResidualMatchesReference checks a residual GEMV; Σ partials against Σ residual²; the
    // workspace counters zero again after every launch. With a delta the residual added to is h' = bf16(h +
    // bf16(delta)) (bit-exact; with several copies, delta = their sum, exact in any order), the partials are those
    // of the final residual, and the delta (every copy) is left zero.
    const int64_t H = o_hidden, QD = c.q_heads * D;
    const auto w_o = random_bf16(size_t(H * QD), ref::mix_seed(seed, 7), -0.05f, 0.05f);
    const auto residual_in = random_bf16(size_t(H), ref::mix_seed(seed, 8), -4.0f, 4.0f);
    const auto delta =  // (o_delta_copies, H) or empty
        !o_residual_delta     ? std::vector<float>{}
        : o_delta_copies == 1 ? random_f32(size_t(H), ref::mix_seed(seed, 9), -4.0f, 4.0f)
                              : exact_sum_copies(o_delta_copies, H, ref::mix_seed(seed, 9));
    std::vector<uint16_t> residual_base = residual_in;  // (H): what the o projection's output is added to
    if (o_residual_delta) {
      const std::vector<float> delta_sum = sum_copies(delta, H);
      for (int64_t j = 0; j < H; ++j)
        residual_base[size_t(j)] = add_delta(residual_in[size_t(j)], delta_sum[size_t(j)]);
    }
    const auto w_o_d = to_device(w_o);
    DeviceArray<float> delta_d(delta.size());  // (o_delta_copies, H) or empty
    DeviceArray<uint16_t> residual_d(residual_in.size());
    DeviceArray<float> partials_d(size_t(kernels::kMaxNormPartials));
    const int64_t o_floats = kernels::qkv_attention_o_workspace_floats(H, c.q_heads, c.kv_heads, D);
    const int64_t counter_bytes = kernels::qkv_attention_o_counter_bytes(H, c.kv_heads);
    DeviceArray<float> o_workspace_d{size_t(o_floats)};
    CUDA_OK(cudaMemset(o_workspace_d.get(), 0, size_t(counter_bytes)));  // zeroed once, as the engine does
    kernels::QkvAttentionOArgs o_args{args, as_bf16(w_o_d), as_bf16(residual_d), partials_d.get(), H,
                                      o_workspace_d.get()};
    o_args.attention.workspace = nullptr;  // the op brings its own
    o_args.ring_stages = o_ring_stages;
    o_args.claims_ahead = o_claims_ahead;
    o_args.claim_static_tiles = o_claim_static_tiles;
    o_args.late_rows = o_late_rows;
    o_args.warm_code = o_warm_code;
    o_args.smem_bytes = o_smem_bytes;
    o_args.residual_delta = o_residual_delta ? delta_d.get() : nullptr;
    o_args.delta_copies = std::max(o_delta_copies, 1);
    o_args.chain_steps = o_chain_steps;
    // (v7) The CTAs without a split pull "MLP rows" into L2: w_o's bytes read as (2 * q_dim / 2, hidden) rows of 7
    // CTAs, 4 KB + 16 of each (a hint only: the outputs must not change).
    o_args.mlp_w_gate_up = as_bf16(w_o_d);
    o_args.mlp_inter = c.q_heads * D / 2;
    o_args.mlp_ctas = 7;
    o_args.mlp_lead_bytes = 4096 + 16;
    if (o_tune) o_tune(o_args);
    std::vector<Produced> o_produced = {produced(qkv_d), produced(positions_d, "positions"),
                                        produced(residual_d)};
    if (o_residual_delta) o_produced.push_back(produced(delta_d));  // the MLP launch before writes it
    if (o_delta_copies > 1)
      check_delta_copies_support(kernels::qkv_attention_o_versions(), o_args, o_label, false);
    o_runner->run(
        o_label, o_args,
        [&] {
          k_d.upload(k_cache);
          v_d.upload(v_cache);
          out_d.poison();
          q_scratch_d.poison();
          residual_d.upload(residual_in);
          delta_d.upload(delta);  // the launch zeroes it
          partials_d.poison();
          // Partials NaN, the counters as the last launch left them (zero, or the test below fails).
          CUDA_OK(cudaMemsetAsync(reinterpret_cast<char*>(o_workspace_d.get()) + counter_bytes, 0xFF,
                                  size_t(o_floats * 4 - counter_bytes), test_stream()));
        },
        [&](const std::string& run_label) {
          const auto attn = check_attention(run_label);
          const auto got = residual_d.download();
          Check check("residual");
          for (int64_t i = 0; i < H; ++i) {
            double dot = 0, abs_sum = 0;
            for (int64_t j = 0; j < QD; ++j) {
              const double term = double(ref::to_float(w_o[size_t(i * QD + j)])) * ref::to_float(attn[size_t(j)]);
              dot += term;
              abs_sum += std::fabs(term);
            }
            const double dot_bound = kGemmRelTol * std::fabs(dot) + kGemmAccumTol * abs_sum;
            const double want = double(ref::to_float(residual_base[size_t(i)])) + dot;
            check.near(i, got[size_t(i)], want, dot_bound + bf16_ulp(std::fabs(want) + dot_bound));
          }
          expect_ok(check, run_label);
          const int64_t count = kernels::qkv_attention_o_partials(H, c.kv_heads);
          const auto partials = partials_d.download();
          double want_sq = 0, sum = 0;
          for (int64_t j = 0; j < H; ++j) want_sq += double(ref::to_float(got[size_t(j)])) * ref::to_float(got[size_t(j)]);
          int64_t bad = 0, stray = 0;
          for (int64_t b = 0; b < kernels::kMaxNormPartials; ++b) {
            const float p = partials[size_t(b)];
            uint32_t bits = 0;
            std::memcpy(&bits, &p, sizeof bits);
            if (b >= count) {
              stray += bits != 0xFFFFFFFFu;
            } else if (!std::isfinite(p) || p < 0) {
              ++bad;
            } else {
              sum += p;
            }
          }
          EXPECT_EQ(bad, 0) << run_label << " | " << bad << " of the first " << count << " partials bad";
          EXPECT_EQ(stray, 0) << run_label << " | " << stray << " partials written past the count " << count;
          EXPECT_NEAR(sum, want_sq, 1e-5 * want_sq) << run_label << " | Σ partials vs Σ residual²";
          std::vector<uint32_t> counters(size_t(counter_bytes / 4));
          CUDA_OK(cudaMemcpy(counters.data(), o_workspace_d.get(), size_t(counter_bytes), cudaMemcpyDeviceToHost));
          EXPECT_EQ(std::count(counters.begin(), counters.end(), 0u), int64_t(counters.size()))
              << run_label << " | workspace counters not left zero";
          if (o_residual_delta) {
            const auto left = delta_d.download();
            const int64_t nonzero =
                std::count_if(left.begin(), left.end(), [](float v) { return v != 0.0f; });
            EXPECT_EQ(nonzero, 0) << run_label << " | " << nonzero << " of " << left.size()
                                  << " residual_delta entries (" << o_delta_copies
                                  << " copies) not left zero for the next MLP launch";
          }
        },
        c.required, o_produced);
    return;
  }
  runner.run(
      label, args,
      [&] {
        k_d.upload(k_cache);
        v_d.upload(v_cache);
        out_d.poison();
        q_scratch_d.poison();
        workspace_d.poison();  // partials NaN; the merge counters zero, as the engine leaves them
        const int64_t counter_bytes =
            std::min(workspace_floats * 4, kernels::attention_workspace_counter_bytes(c.q_heads));
        CUDA_OK(cudaMemsetAsync(workspace_d.get(), 0, size_t(counter_bytes), test_stream()));
      },
      [&](const std::string& run_label) { check_attention(run_label); },
      c.required, {produced(qkv_d), produced(positions_d, "positions"), produced(slots_d, "slots")});
}

TEST_F(GpuTest, QkvAttentionDecode) {
  VersionRunner<kernels::QkvAttentionArgs> runner(kernels::qkv_attention_versions());
  // Contexts around the fused version's cluster sizes (1 CTA up to 128 keys, 2 up to 256, ..., 8 past 1024) and
  // its 64-key tiles.
  const std::vector<QkvAttentionCase> cases = {
      {"ctx=1", kQHeads, kKvHeads, kHeadDim, {0}, {}, 1, 1100, true},
      {"ctx=64", kQHeads, kKvHeads, kHeadDim, {63}, {}, 1, 1100, true},
      {"ctx=129", kQHeads, kKvHeads, kHeadDim, {128}, {}, 1, 1100, true},
      {"ctx=1000", kQHeads, kKvHeads, kHeadDim, {999}, {}, 1, 1100, true},
      {"ctx=8192", kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192, true},
      {"ctx=3 loose max_position (empty CTAs)", kQHeads, kKvHeads, kHeadDim, {2}, {}, 1, 4100, true, 4000},
      {"new key dominates ctx=200", kQHeads, kKvHeads, kHeadDim, {199}, {}, 1, 1100, true, -1, true},
      {"new key dominates ctx=5000", kQHeads, kKvHeads, kHeadDim, {4999}, {}, 1, 5100, true, -1, true},
      {"b=4 ctx 1/65/1025/4097", kQHeads, kKvHeads, kHeadDim, {0, 64, 1024, 4096}, {2, 0, 3, 1}, 4, 4200, true},
      {"b=8 new key dominates", kQHeads, kKvHeads, kHeadDim, {4, 4095, 63, 64, 126, 127, 128, 255},
       {7, 3, 5, 1, 0, 6, 2, 4}, 8, 4100, true, -1, true},
      {"gqa=1", 8, 8, 128, {16, 999, 128}, {0, 1, 2}, 3, 1100},
      {"gqa=8 (qwen3-32b)", 64, 8, 128, {16, 999, 128}, {0, 2, 1}, 3, 1100},
      {"gqa=2 head_dim=64 (qwen3-0.6b-like)", 16, 8, 64, {16, 999, 300}, {1, 0, 2}, 3, 1100},
      {"gqa=4 head_dim=64", 16, 4, 64, {0, 129, 1024}, {0, 1, 2}, 3, 1100, false, -1, true},
  };
  for (const QkvAttentionCase& c : cases) run_qkv_attention_case(runner, c);
}

TEST_F(GpuTest, QkvAttentionODecode) {
  VersionRunner<kernels::QkvAttentionArgs> unused(kernels::qkv_attention_versions());
  VersionRunner<kernels::QkvAttentionOArgs> runner(kernels::qkv_attention_o_versions());
  // Batch 1: contexts around the 64-key splits (1, 2, 3 splits, every row block a split, 8192 at 512 keys a split),
  // a loose bucket, the new key dominating, other GQA shapes and a hidden size that leaves a short last row block.
  const std::vector<QkvAttentionCase> cases = {
      {"ctx=1", kQHeads, kKvHeads, kHeadDim, {0}, {}, 1, 1100, true},
      {"ctx=65", kQHeads, kKvHeads, kHeadDim, {64}, {}, 1, 1100, true},
      {"ctx=129", kQHeads, kKvHeads, kHeadDim, {128}, {}, 1, 1100, true},
      {"ctx=1000 slot 2", kQHeads, kKvHeads, kHeadDim, {999}, {2}, 3, 1100, true},
      {"ctx=8192", kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192, true},
      {"ctx=3 loose max_position", kQHeads, kKvHeads, kHeadDim, {2}, {}, 1, 4100, true, 4000},
      {"new key dominates ctx=200", kQHeads, kKvHeads, kHeadDim, {199}, {}, 1, 1100, true, -1, true},
      {"gqa=1", 8, 8, 128, {999}, {1}, 2, 1100},
      {"gqa=8 (qwen3-32b)", 64, 8, 128, {300}, {}, 1, 1100},
      {"gqa=5 (qwen3-14b)", 40, 8, 128, {300}, {}, 1, 1100},
      {"gqa=2 head_dim=64 (qwen3-0.6b-like)", 16, 8, 64, {1500}, {}, 1, 2100},
      {"ctx=1051 (v10: none to claim)", kQHeads, kKvHeads, kHeadDim, {1050}, {}, 1, 1100},
      {"ctx=1090 (v10: one tile to claim)", kQHeads, kKvHeads, kHeadDim, {1089}, {}, 1, 1100},
      {"ctx=1200 (v10: two tiles to claim)", kQHeads, kKvHeads, kHeadDim, {1199}, {}, 1, 1300},
  };
  for (const QkvAttentionCase& c : cases) run_qkv_attention_case(unused, c, &runner, kHidden);
  run_qkv_attention_case(unused, {"hidden=1000", kQHeads, kKvHeads, kHeadDim, {700}, {}, 1, 1100}, &runner, 1000);
  // The tuning field's other ring depths (the default picks 2 or 4).
  run_qkv_attention_case(unused, {"ctx=3000", kQHeads, kKvHeads, kHeadDim, {2999}, {}, 1, 3100}, &runner, kHidden, 8);
  run_qkv_attention_case(unused, {"ctx=100", kQHeads, kKvHeads, kHeadDim, {99}, {}, 1, 1100}, &runner, kHidden, 4);
  // With the previous layer's MLP output owed to the residual (NormMlpArgs): folded in first, then zeroed.
  run_qkv_attention_case(unused, {"ctx=1 delta", kQHeads, kKvHeads, kHeadDim, {0}, {}, 1, 1100, true},
                         &runner, kHidden, 0, 1);
  run_qkv_attention_case(unused,
                         {"ctx=1000 slot 2 delta", kQHeads, kKvHeads, kHeadDim, {999}, {2}, 3, 1100, true},
                         &runner, kHidden, 0, 1);
  run_qkv_attention_case(unused,
                         {"ctx=1000 slot 2 delta", kQHeads, kKvHeads, kHeadDim, {999}, {2}, 3, 1100, true},
                         &runner, kHidden, 0, 1);
  run_qkv_attention_case(unused, {"hidden=1000 delta", kQHeads, kKvHeads, kHeadDim, {700}, {}, 1, 1100},
                         &runner, 1000, 0, 1);
  // The delta as four copies (QkvAttentionOArgs::delta_copies): their sum folded in, every copy zeroed.
  run_qkv_attention_case(unused,
                         {"ctx=1000 slot 2 delta copies", kQHeads, kKvHeads, kHeadDim, {999}, {2}, 3, 1100, true},
                         &runner, kHidden, 0, 4);
  run_qkv_attention_case(unused, {"hidden=1000 delta copies", kQHeads, kKvHeads, kHeadDim, {700}, {}, 1, 1100},
                         &runner, 1000, 0, 4);
  // v3-v5's chain steps one at a time and none (QkvAttentionOArgs::chain_steps), and the diagnostic second o pass
  // (8) and the diagnostic second attention pass (16), with a delta: the residual fold moves with step 2.
  for (const int32_t steps : {0, 1, 2, 4, 8, 16})
    run_qkv_attention_case(unused,
                           {"ctx=1000 slot 2 chain steps", kQHeads, kKvHeads, kHeadDim, {999}, {2}, 3, 1100, true},
                           &runner, kHidden, 0, 4, steps);
  // v10's claims in flight and static tiles (QkvAttentionOArgs::claims_ahead, claim_static_tiles): at 8192 and 3000
  // keys, and static tiles that leave nothing to claim at 1200 (the static path).
  const std::vector<std::array<int32_t, 2>> claim_tunings = {{4, 0}, {8, 6}, {2, 2}};
  for (const auto& [ahead, static_tiles] : claim_tunings) {
    const std::string tuning = " claims " + str(ahead) + " static " + str(static_tiles);
    run_qkv_attention_case(unused, {"ctx=8192" + tuning, kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192},
                           &runner, kHidden, 0, 0, -1, ahead, static_tiles);
    run_qkv_attention_case(unused, {"ctx=3000" + tuning, kQHeads, kKvHeads, kHeadDim, {2999}, {}, 1, 3100},
                           &runner, kHidden, 0, 0, -1, ahead, static_tiles);
  }
  run_qkv_attention_case(unused, {"ctx=1200 static 2", kQHeads, kKvHeads, kHeadDim, {1199}, {}, 1, 1300}, &runner,
                         kHidden, 0, 0, -1, 2, 2);
  // v11's late rows, each choice of rows and time (QkvAttentionOArgs::late_rows), where every CTA attends (8192),
  // where few do (129), and with a hidden size that leaves a short last row block.
  for (const int32_t mode : {1, 2, 3}) {
    const std::string tuning = " late rows " + str(mode);
    for (const QkvAttentionCase& c :
         {QkvAttentionCase{"ctx=8192" + tuning, kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192},
          QkvAttentionCase{"ctx=129" + tuning, kQHeads, kKvHeads, kHeadDim, {128}, {}, 1, 1100}})
      run_qkv_attention_case(unused, c, &runner, kHidden, 0, 0, -1, 0, 0, mode);
    run_qkv_attention_case(unused, {"hidden=1000" + tuning, kQHeads, kKvHeads, kHeadDim, {700}, {}, 1, 1100},
                           &runner, 1000, 0, 0, -1, 0, 0, mode);
  }
  // v14's, v15's and v17's warm-up passes, each left out or added (QkvAttentionOArgs::warm_code; the cases above run
  // the defaults), v17's L2 pulls (8; 16 and 32: of the split CTAs' rows by the others), v15's and v17's
  // diagnostic 4 and v29's and v30's 64 (no rows handed over; 65: no first pass either), at 8192, at 129 in slot 2 (the
  // cache check: the warm-up writes no row), and with a short last row block and a delta.
  for (const int32_t mode : {1, 2, 3, 4, 8, 16, 32, 64, 65}) {
    const std::string tuning = " warm code " + str(mode);
    for (const QkvAttentionCase& c :
         {QkvAttentionCase{"ctx=8192" + tuning, kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192},
          QkvAttentionCase{"ctx=129 slot 2" + tuning, kQHeads, kKvHeads, kHeadDim, {128}, {2}, 3, 1100}})
      run_qkv_attention_case(unused, c, &runner, kHidden, 0, 0, -1, 0, 0, 0, mode);
    run_qkv_attention_case(unused, {"hidden=1000 delta" + tuning, kQHeads, kKvHeads, kHeadDim, {700}, {}, 1, 1100},
                           &runner, 1000, 0, 4, -1, 0, 0, 0, mode);
  }
  // A CTA's shared memory at 192 KB and at the most it may take (QkvAttentionOArgs::smem_bytes; the default 160 KB
  // stages fewer o rows): one split, a few, every CTA a split, and a delta of two copies.
  for (const int32_t kb : {192, 227}) {
    const std::string tuning = " smem " + str(kb) + " KB";
    for (const QkvAttentionCase& c :
         {QkvAttentionCase{"ctx=1" + tuning, kQHeads, kKvHeads, kHeadDim, {0}, {}, 1, 1100},
          QkvAttentionCase{"ctx=129 slot 2" + tuning, kQHeads, kKvHeads, kHeadDim, {128}, {2}, 3, 1100},
          QkvAttentionCase{"ctx=1000" + tuning, kQHeads, kKvHeads, kHeadDim, {999}, {}, 1, 1100},
          QkvAttentionCase{"ctx=8192" + tuning, kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192}})
      run_qkv_attention_case(unused, c, &runner, kHidden, 0, 2, -1, 0, 0, 0, 0, kb * 1024);
  }
}

// A runner over one version of an op, by name (the tuning tests below: the version tuned, and the engine's attention
// beside it).
template <class Args>
VersionRunner<Args> runner_of(const std::vector<kernels::KernelVersion<Args>>& versions, const char* name) {
  return VersionRunner<Args>(std::vector<kernels::KernelVersion<Args>>{kernels::find_version(versions, name)});
}

// One tuning of a qkv_attention_o version over the cases its tuning tests share: at 129 keys in slot 2 (most CTAs
// without a split), at 1000 (a few), at 8192 (v9's kernel: every CTA splits), and with a short last row block and
// a delta of two copies. plain: the attention run beside every case (the callers': only the engine's, to keep them
// short).
void run_o_tuning_cases(VersionRunner<kernels::QkvAttentionArgs>& plain,
                        VersionRunner<kernels::QkvAttentionOArgs>& runner, const std::string& tuning,
                        const std::function<void(kernels::QkvAttentionOArgs&)>& tune) {
  for (const QkvAttentionCase& c :
       {QkvAttentionCase{"ctx=129 slot 2" + tuning, kQHeads, kKvHeads, kHeadDim, {128}, {2}, 3, 1100, true},
        QkvAttentionCase{"ctx=1000" + tuning, kQHeads, kKvHeads, kHeadDim, {999}, {}, 1, 1100, true},
        QkvAttentionCase{"ctx=8192" + tuning, kQHeads, kKvHeads, kHeadDim, {8191}, {}, 1, 8192, true}})
    run_qkv_attention_case(plain, c, &runner, kHidden, 0, 0, -1, 0, 0, 0, 0, 0, tune);
  run_qkv_attention_case(plain, {"hidden=1000 delta" + tuning, kQHeads, kKvHeads, kHeadDim, {700}, {}, 1, 1100},
                         &runner, 1000, 0, 2, -1, 0, 0, 0, 0, 192 * 1024, tune);
}

// v26's staging tunings (QkvAttentionOArgs::stage_window, stage_burst, split_staging, split_prewait_rows), v26 only
// (QkvAttentionODecode runs it with its defaults among every version): one row in flight, a burst before the
// window, the split CTAs' rows after their split at once and paced, part of them before the wait, none before it,
// a window wider than the rows. At 129 keys in slot 2 most CTAs pace; at 1000 a few do; at 8192 (v9's kernel) none;
// and with a short last row block and a delta of two copies.
TEST_F(GpuTest, QkvAttentionOPacedStaging) {
  auto plain = runner_of(kernels::qkv_attention_versions(), "v12_qkv_attention_warp_merge");
  auto runner = runner_of(kernels::qkv_attention_o_versions(), "v26_qkv_attention_o_paced");
  struct Staging {
    int32_t window, burst, split_staging, split_prewait_rows;
  };
  for (const Staging& t : {Staging{1, 0, 0, -1}, Staging{2, 12, 0, -1}, Staging{4, 0, 1, -1}, Staging{2, 0, 2, -1},
                           Staging{4, 16, 0, 12}, Staging{4, 0, 0, 0}, Staging{64, 0, 0, -1}}) {
    const std::string tuning = " staging " + str(t.window) + "/" + str(t.burst) + "/" + str(t.split_staging) + "/" +
                               str(t.split_prewait_rows);
    const auto tune = [t](kernels::QkvAttentionOArgs& a) {
      a.stage_window = t.window;
      a.stage_burst = t.burst;
      a.split_staging = t.split_staging;
      a.split_prewait_rows = t.split_prewait_rows;
    };
    run_o_tuning_cases(plain, runner, tuning, tune);
  }
}

// v27's pull of the next MLP's rows into L2 under its tuning: a hint that must leave every output as v25 writes it
// (the pull lands in the K/V ring of CTAs without a split, which they never read, and stops once the heads are in).
TEST_F(GpuTest, QkvAttentionOMlpWarm) {
  auto plain = runner_of(kernels::qkv_attention_versions(), "v12_qkv_attention_warp_merge");
  auto runner = runner_of(kernels::qkv_attention_o_versions(), "v27_qkv_attention_o_mlp_warm");
  struct Lead {
    int32_t window, skip_rows;
    int64_t bytes;
  };
  for (const Lead& t : {Lead{1, 0, 64 * 1024}, Lead{4, 3, 1 << 20}, Lead{8, 1, 64 * 1024}, Lead{2, 1000, 8192}}) {
    const std::string tuning = " lead " + str(t.window) + "/" + str(t.skip_rows) + "/" + str(t.bytes);
    const auto tune = [t](kernels::QkvAttentionOArgs& a) {
      a.mlp_lead_window = t.window;
      a.mlp_lead_skip_rows = t.skip_rows;
      a.mlp_lead_bytes = t.bytes;
    };
    run_o_tuning_cases(plain, runner, tuning, tune);
  }
}

// v41 under its tuning (QkvAttentionOArgs::keys_per_split as the most keys it attends before v40 takes the launch,
// l2_prefetch_rows, ring_stages, chain_steps bit 1, smem_bytes; QkvAttentionODecode runs its defaults): a bound of
// 2048 keys (ctx=2000 in one CTA a head) and of 128 (every case to v40), no unstaged row into L2 and five of them,
// no K/V into L2, rings of 2 and 8 tiles, and 80 KB a CTA (at 129 keys about no staged row, every row read from
// global memory; the longer contexts do not fit and go to v40).
TEST_F(GpuTest, QkvAttentionOClusterHeadsTuning) {
  auto plain = runner_of(kernels::qkv_attention_versions(), "v12_qkv_attention_warp_merge");
  auto runner = runner_of(kernels::qkv_attention_o_versions(), "v41_qkv_attention_o_cluster_heads");
  struct Tuning {
    int32_t max_keys, l2_rows, stages, chain_steps, smem_kb;
  };
  for (const Tuning& t : {Tuning{2048, -1, 0, -1, 0}, Tuning{128, -1, 0, -1, 0}, Tuning{0, 0, 0, -1, 0},
                          Tuning{0, 5, 0, 0, 0}, Tuning{0, -1, 2, -1, 0}, Tuning{0, -1, 8, 0, 0},
                          Tuning{0, -1, 0, -1, 80}}) {
    const std::string tuning = " cluster heads " + str(t.max_keys) + "/" + str(t.l2_rows) + "/" + str(t.stages) +
                               "/" + str(t.chain_steps) + "/" + str(t.smem_kb);
    const auto tune = [t](kernels::QkvAttentionOArgs& a) {
      a.keys_per_split = t.max_keys;
      a.l2_prefetch_rows = t.l2_rows;
      a.ring_stages = t.stages;
      a.chain_steps = t.chain_steps;
      if (t.smem_kb > 0) a.smem_bytes = t.smem_kb * 1024;
    };
    run_o_tuning_cases(plain, runner, tuning, tune);
    run_qkv_attention_case(plain, {"ctx=2000" + tuning, kQHeads, kKvHeads, kHeadDim, {1999}, {}, 1, 2100}, &runner,
                           kHidden, 0, 0, -1, 0, 0, 0, 0, 0, tune);
  }
}

// v31's hand-off under its tuning (QkvAttentionOArgs::handoff_rows; QkvAttentionODecode runs its default, all):
// none (every CTA its own rows), one row a split CTA, part of them, more than it has (all), and with the first pass
// in the split CTAs too (warm code 2), which take over no rows, on their unstaged rows or (130) on staged rows in
// their place, with the split CTAs' unstaged rows pulled into L2 at the merge (256), and the other way round (512:
// the free CTAs give 1 or 3 rows to the split CTAs; all 15 of each of them would exceed what a split CTA may take,
// and hidden 1000 leaves a short last block: no hand-off there), and the diagnostic 3 us stay of the free CTAs
// (3072). Every output as v25 writes it.
TEST_F(GpuTest, QkvAttentionOHandOffRows) {
  auto plain = runner_of(kernels::qkv_attention_versions(), "v12_qkv_attention_warp_merge");
  auto runner = runner_of(kernels::qkv_attention_o_versions(), "v31_qkv_attention_o_handoff_late");
  struct HandOff {
    int32_t rows, warm_code;
  };
  for (const HandOff& t : {HandOff{0, 0}, HandOff{1, 0}, HandOff{7, 0}, HandOff{1000, 0}, HandOff{5, 2},
                           HandOff{-1, 130}, HandOff{0, 130}, HandOff{0, 256}, HandOff{4, 256}, HandOff{1, 512},
                           HandOff{3, 512}, HandOff{-1, 512}, HandOff{0, 3072}}) {
    const std::string tuning = " handoff rows " + str(t.rows) + " warm code " + str(t.warm_code);
    const auto tune = [t](kernels::QkvAttentionOArgs& a) {
      a.handoff_rows = t.rows;
      a.warm_code = t.warm_code;
    };
    run_o_tuning_cases(plain, runner, tuning, tune);
  }
}

// ---- 05 silu_mul, 06 residual add -------------------------------------------------------------------------
TEST_F(GpuTest, SiluMulMatchesReference) {
  VersionRunner<SiluMulArgs> runner(kernels::silu_mul_versions());
  struct Case {
    int64_t tokens, inter;
    bool required;
  };
  const std::vector<Case> cases = {{1, kInter, true},   {3, kInter, true},    {8, kInter, true},
                                   {300, kInter, true}, {2048, kInter, true}, {5, 3072, false},
                                   {3, 9728, false},    {2, 100, false}};
  for (const Case& c : cases) {
    const std::string label = "silu_mul tokens=" + str(c.tokens) + " inter=" + str(c.inter);
    const uint64_t seed = case_seed(label);
    // gate in [-8, 8] covers silu's curved part and both tails; up in [-3, 3]. (tokens, 2 * inter)
    std::vector<uint16_t> gate_up(size_t(c.tokens * 2 * c.inter));
    for (int64_t t = 0; t < c.tokens; ++t) {
      ref::fill_uniform_bf16(std::span(gate_up).subspan(size_t(t * 2 * c.inter), size_t(c.inter)),
                             ref::mix_seed(seed, uint64_t(2 * t)), -8.0f, 8.0f);
      ref::fill_uniform_bf16(std::span(gate_up).subspan(size_t(t * 2 * c.inter + c.inter), size_t(c.inter)),
                             ref::mix_seed(seed, uint64_t(2 * t + 1)), -3.0f, 3.0f);
    }
    std::vector<uint16_t> want(size_t(c.tokens * c.inter));  // (tokens, inter)
    ref::silu_mul(gate_up.data(), c.tokens, c.inter, want.data());
    const auto gate_up_d = to_device(gate_up);
    DeviceArray<uint16_t> out_d(want.size());
    const SiluMulArgs args{as_bf16(gate_up_d), as_bf16(out_d), c.tokens, c.inter};
    runner.run(
        label, args, [&] { out_d.poison(); },
        [&](const std::string& run_label) {
          const auto got = out_d.download();
          Check check("out");
          for (size_t i = 0; i < got.size(); ++i) check.ulps(int64_t(i), got[i], want[i], kSiluUlps);
          expect_ok(check, run_label);
        },
        c.required, {produced(gate_up_d)});
  }
}

// The gate|up projection with SwiGLU in its epilogue. g and u are the bf16-rounded projections, and an fp32
// accumulation in any order may land anywhere within its error of the exact sum (taken as 2^-18 sum |x w|,
// far above the typical fp32 error): the output must lie within two bf16 ulps of the range swiglu takes over
// the bf16 values g and u can round to (for a tiny u that range spans many ulps, for most elements it is one
// value).
TEST_F(GpuTest, GateUpSwigluMatchesReference) {
  VersionRunner<GateUpSwigluArgs> runner(kernels::gate_up_swiglu_versions());
  struct Case {
    std::string name;
    int64_t max_m, inter, k;
    std::vector<int64_t> ms;
    bool required, large;
  };
  const std::vector<Case> cases = {
      {"qwen3-8b", 8, kInter, kHidden, {1, 2, 3, 4, 5, 6, 7, 8}, true, false},
      {"qwen3-0.6b", 3, 3072, 1024, {3}, false, false},
      {"qwen3-4b", 2, 9728, 2560, {2}, false, false},
      {"qwen3-8b prefill", 300, kInter, kHidden, {300}, false, true},
  };
  for (const Case& c : cases) {
    if (c.large && quick_mode()) continue;
    const std::string base = "gate_up_swiglu " + c.name + " inter=" + str(c.inter) + " k=" + str(c.k);
    std::vector<int64_t> rows(static_cast<size_t>(c.max_m));
    std::iota(rows.begin(), rows.end(), 0);
    const GemmProblem problem(base, c.max_m, 2 * c.inter, c.k, rows);  // w: gate rows then up rows
    // Per output: the swiglu of the central roundings and the largest distance to a corner of the range.
    std::vector<float> center(static_cast<size_t>(c.max_m * c.inter)),
        spread(center.size());  // (max_m, inter)
    const size_t width = size_t(2 * c.inter);
    for (int64_t i = 0; i < c.max_m; ++i)
      for (int64_t j = 0; j < c.inter; ++j) {
        const size_t g = size_t(i) * width + size_t(j), u = g + size_t(c.inter), e = size_t(i * c.inter + j);
        auto roundings = [&](size_t index) {
          const double exact = problem.exact[index], slack = 0x1p-18 * problem.abs_sum[index];
          return std::array<uint16_t, 3>{ref::to_bf16(float(exact - slack)), ref::to_bf16(float(exact)),
                                         ref::to_bf16(float(exact + slack))};
        };
        const auto gates = roundings(g), ups = roundings(u);
        center[e] = ref::to_float(ref::swiglu(gates[1], ups[1]));
        float largest = std::fabs(center[e]), distance = 0;
        for (const uint16_t gate : gates)
          for (const uint16_t up : ups) {
            const float value = ref::to_float(ref::swiglu(gate, up));
            distance = std::max(distance, std::fabs(value - center[e]));
            largest = std::max(largest, std::fabs(value));
          }
        spread[e] = distance + float(0x1p-6) * largest;  // + two bf16 ulps (expf, the product's rounding)
      }
    for (const int64_t m : c.ms) {
      const std::string label = base + " m=" + str(m);
      DeviceArray<uint16_t> out_d(size_t(m * c.inter));  // (m, inter)
      const GateUpSwigluArgs args{
          as_bf16(problem.x_d), as_bf16(problem.w_d), as_bf16(out_d), m, c.inter, c.k};
      runner.run(
          label, args, [&] { out_d.poison(); },
          [&](const std::string& run_label) {
            const auto got = out_d.download();
            Check check("out");
            for (size_t e = 0; e < got.size(); ++e) check.near(int64_t(e), got[e], center[e], spread[e]);
            expect_ok(check, run_label);
          },
          c.required, {produced(problem.x_d)});
    }
  }
}

TEST_F(GpuTest, ResidualAddMatchesReference) {
  VersionRunner<AddArgs> runner(kernels::add_versions());
  struct Case {
    int64_t n;
    bool required;
  };
  const std::vector<Case> cases = {
      {kHidden, true}, {8 * kHidden, true}, {300 * kHidden, true}, {2048 * kHidden, true}, {3 * 2560, false},
      {1000, false},   {8, false},          {4100, false}};
  for (const Case& c : cases) {
    const std::string label = "add n=" + str(c.n);
    const uint64_t seed = case_seed(label);
    const auto h = random_bf16(size_t(c.n), ref::mix_seed(seed, 1), -8.0f, 8.0f);      // (n)
    const auto delta = random_bf16(size_t(c.n), ref::mix_seed(seed, 2), -2.0f, 2.0f);  // (n)
    std::vector<uint16_t> want(h.size());
    ref::add(h.data(), delta.data(), c.n, want.data());
    DeviceArray<uint16_t> h_d(h.size());
    const auto delta_d = to_device(delta);
    const AddArgs args{as_bf16(h_d), as_bf16(delta_d), c.n};
    runner.run(
        label, args, [&] { h_d.upload(h); },
        [&](const std::string& run_label) {
          const auto got = h_d.download();
          Check check("h");
          for (size_t i = 0; i < got.size(); ++i) check.ulps(int64_t(i), got[i], want[i], kAddUlps);
          expect_ok(check, run_label);
        },
        c.required, {produced(h_d), produced(delta_d)});
  }
}

// ---- 09 layout --------------------------------------------------------------------------------------------
// out = inᵀ bit for bit: the engine's one use (down_proj (hidden, inter) at load time, for v1_mlp_split_down)
// and shapes that leave partial 32 x 32 tiles in one or both dimensions.
TEST_F(GpuTest, TransposeMatchesHost) {
  VersionRunner<TransposeArgs> runner(kernels::transpose_versions());
  struct Case {
    int64_t rows, cols;
    bool required;
  };
  const std::vector<Case> cases = {{kHidden, kInter, true}, {1, 1, false},     {33, 70, false},
                                   {70, 33, false},         {4096, 96, false}, {100, 3000, false},
                                   {1, 1000, false},        {1000, 1, false}};
  for (const Case& c : cases) {
    const std::string label = "transpose rows=" + str(c.rows) + " cols=" + str(c.cols);
    const auto in = random_bf16(size_t(c.rows * c.cols), case_seed(label), -4.0f, 4.0f);  // (rows, cols)
    std::vector<uint16_t> want(in.size());                                                // (cols, rows)
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.cols; ++j) want[size_t(j * c.rows + i)] = in[size_t(i * c.cols + j)];
    const auto in_d = to_device(in);
    DeviceArray<uint16_t> out_d(want.size());
    const TransposeArgs args{as_bf16(in_d), as_bf16(out_d), c.rows, c.cols};
    runner.run(
        label, args, [&] { out_d.poison(); },
        [&](const std::string& run_label) {
          const auto got = out_d.download();
          Check check("out");
          for (size_t i = 0; i < got.size(); ++i) check.exact(int64_t(i), got[i], want[i]);
          expect_ok(check, run_label);
          Check input("in (read only)");
          const auto got_in = in_d.download();
          for (size_t i = 0; i < got_in.size(); ++i) input.exact(int64_t(i), got_in[i], in[i]);
          expect_ok(input, run_label);
        },
        c.required, {produced(in_d)});
  }
}

// ---- decode GEMVs with the residual add and the RMSNorm folded in (kernels.h) ---------------------------
// One bf16 ulp at |v| (the spacing of the bf16 values of v's binade; 2^-7 |v| at most).
double bf16_ulp(double v) {
  return v == 0 ? 0x1p-133 : std::ldexp(1.0, std::ilogb(v) - 7);
}

// The partials per token a residual version leaves: v7 and v10 one per block of their grid, v9 one per SM. A version
// missing here fails the test until its count is stated.
int64_t residual_partials_of(const std::string& run_label, int64_t m, int64_t n) {
  struct Known {
    const char* name;
    int64_t (*count)(int64_t, int64_t);
  };
  const Known known[] = {{"v7_gemv_residual", &kernels::gemv_residual_partials},
                         {"v9_gemv_residual_tma", &kernels::gemv_residual_tma_partials},
                         {"v10_gemv_residual_early", &kernels::gemv_residual_partials}};
  for (const Known& k : known)
    if (run_label.find(std::string(" | ") + k.name + " (") != std::string::npos) return k.count(m, n);
  return -1;
}

// residual = bf16(residual + bf16(x · wᵀ)): within the gemm bound of the dot product plus one bf16 ulp of the
// sum (the second rounding). Partials: the first `count` of each token's row are finite, the rest untouched
// (poison), and they add up to Σ residual² of the kernel's own output within 1e-5 relative.
TEST_F(GpuTest, GemvResidualMatchesReference) {
  VersionRunner<GemvResidualArgs> runner(kernels::gemv_residual_versions());
  struct Case {
    std::string name;
    int64_t n, k;
    std::vector<int64_t> ms;
    bool required;
  };
  const std::vector<Case> cases = {
      {"o", kHidden, kQHeads * kHeadDim, {1, 2, 8}, true},
      {"down", kHidden, kInter, {1, 2, 8}, true},
      {"n=200 k=64", 200, 64, {1, 3, 8}, false},
      {"n=7 k=128 (fewer rows than blocks)", 7, 128, {1, 2, 8}, false},
  };
  constexpr int64_t kMaxM = 8;
  for (const Case& c : cases) {
    const std::string base = "gemv_residual " + c.name + " n=" + str(c.n) + " k=" + str(c.k);
    std::vector<int64_t> rows(static_cast<size_t>(kMaxM));
    std::iota(rows.begin(), rows.end(), 0);
    const GemmProblem problem(base, kMaxM, c.n, c.k, rows);  // x (8, k), w (n, k), exact x · wᵀ
    const auto residual =
        random_bf16(size_t(kMaxM * c.n), ref::mix_seed(case_seed(base), 3), -4.0f, 4.0f);  // (8, n)
    for (const int64_t m : c.ms) {
      const std::string label = base + " m=" + str(m);
      const std::vector<uint16_t> residual_in(residual.begin(), residual.begin() + m * c.n);  // (m, n)
      DeviceArray<uint16_t> residual_d(residual_in.size());
      DeviceArray<float> partials_d(size_t(m * kernels::kMaxNormPartials));  // (m, kMaxNormPartials)
      // m == 2 also covers the late PDL trigger (kernels.h pdl_trigger): it must not change a bit.
      const GemvResidualArgs args{as_bf16(problem.x_d), as_bf16(problem.w_d), as_bf16(residual_d), partials_d.get(),
                                  m, c.n, c.k, m == 2 ? 0.5f : 0.0f};
      runner.run(
          label, args,
          [&] {
            residual_d.upload(residual_in);
            partials_d.poison();
          },
          [&](const std::string& run_label) {
            const auto got = residual_d.download();
            Check check("residual");
            for (int64_t i = 0; i < m * c.n; ++i) {
              const double dot = problem.exact[size_t(i)];
              const double dot_bound =
                  kGemmRelTol * std::fabs(dot) + kGemmAccumTol * problem.abs_sum[size_t(i)];
              const double want = double(ref::to_float(residual_in[size_t(i)])) + dot;
              check.near(i, got[size_t(i)], want, dot_bound + bf16_ulp(std::fabs(want) + dot_bound));
            }
            expect_ok(check, run_label);

            const int64_t count = residual_partials_of(run_label, m, c.n);
            if (count < 1 || count > kernels::kMaxNormPartials) {
              ADD_FAILURE() << run_label << " | partial count " << count
                            << ": add this version to residual_partials_of()";
              return;
            }
            const auto partials = partials_d.download();
            for (int64_t t = 0; t < m; ++t) {
              double want_sq = 0, sum = 0;
              for (int64_t j = 0; j < c.n; ++j) {
                const double v = ref::to_float(got[size_t(t * c.n + j)]);
                want_sq += v * v;
              }
              int64_t bad = 0, stray = 0;
              for (int64_t b = 0; b < kernels::kMaxNormPartials; ++b) {
                const float p = partials[size_t(t * kernels::kMaxNormPartials + b)];
                if (b >= count) {
                  uint32_t bits = 0;
                  std::memcpy(&bits, &p, sizeof bits);
                  stray += bits != 0xFFFFFFFFu;
                } else if (!std::isfinite(p) || p < 0) {
                  ++bad;
                } else {
                  sum += p;
                }
              }
              EXPECT_EQ(bad, 0) << run_label << " | token " << t << ": " << bad << " of the first " << count
                                << " partials unwritten, negative or not finite";
              EXPECT_EQ(stray, 0) << run_label << " | token " << t << ": " << stray
                                  << " partials written past the count " << count;
              EXPECT_NEAR(sum, want_sq, 1e-5 * want_sq)
                  << run_label << " | token " << t << ": Σ partials vs Σ residual² of the output";
            }
          },
          c.required, {produced(problem.x_d), produced(residual_d)});
    }
  }
}

// The inputs of a norm GEMV, the residual h (max_m, k) and the norm weight (k), and the activations the
// kernels must build from them: normed = bf16(weight * bf16(h * inv_rms)) with inv_rms = 1 / sqrt(Σ h² / k +
// eps) in fp32, gemv_fused::norm_prologue's formula, with Σ h² the fp32 value the partials add up to exactly
// (norm_partials). Bit-exact, so the GEMV after it is judged with the gemm bound alone.
struct NormInputs {
  std::vector<uint16_t> residual, weight, normed;  // (max_m, k), (k), (max_m, k)
  std::vector<float> sum_sq;                       // (max_m)
};

NormInputs make_norm_inputs(const std::string& label, int64_t max_m, int64_t k) {
  const uint64_t seed = case_seed(label + " norm inputs");
  NormInputs in;
  in.residual = random_bf16(size_t(max_m * k), ref::mix_seed(seed, 1), -8.0f, 8.0f);
  in.weight = random_bf16(size_t(k), ref::mix_seed(seed, 2), -1.5f, 1.5f);
  in.normed.resize(in.residual.size());
  for (int64_t t = 0; t < max_m; ++t) {
    double exact = 0;
    for (int64_t i = 0; i < k; ++i) {
      const double h = ref::to_float(in.residual[size_t(t * k + i)]);
      exact += h * h;
    }
    const float sum_sq = float(exact);
    in.sum_sq.push_back(sum_sq);
    const float inv_rms = 1.0f / std::sqrt(sum_sq / float(k) + kEps);
    for (int64_t i = 0; i < k; ++i) {
      const float normalized = ref::round_bf16(ref::to_float(in.residual[size_t(t * k + i)]) * inv_rms);
      in.normed[size_t(t * k + i)] = ref::to_bf16(ref::to_float(in.weight[size_t(i)]) * normalized);
    }
  }
  return in;
}

// (m, kMaxNormPartials) partials whose first `count` entries per token add up to sum_sq[t] exactly in fp32,
// in any order: all are non-negative multiples of one fp32 ulp of sum_sq[t], so every partial sum fits 24
// bits. spread = false: the whole sum in entry 0, zeros after it; true: spread over all `count` entries, some
// zero. Entries past `count` are NaN: a kernel that reads them writes NaN.
std::vector<float> norm_partials(const std::vector<float>& sum_sq, int64_t m, int64_t count, bool spread,
                                 uint64_t seed) {
  std::vector<float> p(size_t(m * kernels::kMaxNormPartials), std::numeric_limits<float>::quiet_NaN());
  for (int64_t t = 0; t < m; ++t) {
    float* row = p.data() + t * kernels::kMaxNormPartials;
    std::fill(row, row + count, 0.0f);
    const double total = sum_sq[size_t(t)];
    if (!spread || count == 1 || total == 0) {
      row[0] = float(total);
      continue;
    }
    const double ulp = std::ldexp(1.0, std::ilogb(total) - 23);
    double left = total;
    for (int64_t b = 0; b + 1 < count; ++b) {
      if (b % 5 == 3) continue;
      const double fraction =
          double(ref::mix_seed(seed, uint64_t(t * count + b)) % 1000) / 2000.0;  // [0, 0.5)
      const double share = std::floor(left * fraction / ulp) * ulp;
      row[b] = float(share);
      left -= share;
    }
    row[count - 1] = float(left);
  }
  return p;
}

struct PartialLayout {
  const char* name;
  int64_t count;
  bool spread;
};
const PartialLayout kPartialLayouts[] = {{"sum in partial 0 of 132", 132, false},
                                         {"sum over 300 partials", 300, true}};

// y = normed · wᵀ within the gemm bound (normed bit-exact, see NormInputs), for both partial layouts.
TEST_F(GpuTest, NormGemvMatchesReference) {
  VersionRunner<NormGemvArgs> runner(kernels::norm_gemv_versions());
  struct Case {
    std::string name;
    int64_t n, k;
    std::vector<int64_t> ms;
    bool required;
  };
  const std::vector<Case> cases = {
      {"qkv", (kQHeads + 2 * kKvHeads) * kHeadDim, kHidden, {1, 2, 8}, true},
      {"n=200 k=64", 200, 64, {1, 3, 8}, false},
      {"n=7 k=128 (fewer rows than blocks)", 7, 128, {1, 2, 8}, false},
  };
  constexpr int64_t kMaxM = 8;
  for (const Case& c : cases) {
    const std::string base = "norm_gemv " + c.name + " n=" + str(c.n) + " k=" + str(c.k);
    const NormInputs in = make_norm_inputs(base, kMaxM, c.k);
    const auto w =
        random_bf16(size_t(c.n * c.k), ref::mix_seed(case_seed(base), 4), -0.05f, 0.05f);  // (n, k)
    std::vector<int64_t> rows(static_cast<size_t>(kMaxM));
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> exact(size_t(kMaxM * c.n)), abs_sum(exact.size());  // (8, n)
    ref::gemm(in.normed.data(), w.data(), c.n, c.k, rows, exact.data(), abs_sum.data());
    const auto residual_d = to_device(in.residual);
    const auto weight_d = to_device(in.weight);
    const auto w_d = to_device(w);
    DeviceArray<uint32_t> claims_d(2);
    CUDA_OK(cudaMemsetAsync(claims_d.get(), 0, claims_d.bytes(), test_stream()));
    for (const int64_t m : c.ms)
      for (const PartialLayout& layout : kPartialLayouts) {
        const std::string label = base + " m=" + str(m) + " " + layout.name;
        const auto partials_d =
            to_device(norm_partials(in.sum_sq, m, layout.count, layout.spread, case_seed(label)));
        DeviceArray<uint16_t> y_d(size_t(m * c.n));  // (m, n)
        NormGemvArgs args{as_bf16(residual_d),
                          partials_d.get(),
                          layout.count,
                          as_bf16(weight_d),
                          kEps,
                          as_bf16(w_d),
                          as_bf16(y_d),
                          m,
                          c.n,
                          c.k,
                          m == 2 ? 0.5f : 0.0f};  // m == 2: also the late PDL trigger
        args.l2_first_bytes = 48 * 1024 + 16;    // (v16) a hint only: a part of its rows, not a whole number of them
        args.claims = claims_d.get();             // (v21) its queue; every launch leaves it zero
        args.claim_static_groups = m == 1 ? 0 : 5;
        args.prewait_window = &layout == &kPartialLayouts[0] ? 0 : 2;  // (v22) its default 1, two at a time
        args.late_cta_from = 1;        // (v23) every CTA but the first late, none of their groups before the wait
        args.late_prewait_groups = 0;  // (with 300 partials v23 runs v22)
        args.row_ramp_permille = &layout == &kPartialLayouts[0] ? 300 : -1000;  // (v26) CTA 0 then takes no rows
        args.row_ramp_first_cta = &layout == &kPartialLayouts[0] ? 44 : 0;  // (v26) a third of 132 on the even split
        runner.run(
            label, args, [&] { y_d.poison(); },
            [&](const std::string& run_label) {
              const auto got = y_d.download();
              Check check("y");
              for (int64_t i = 0; i < m * c.n; ++i) {
                const double e = exact[size_t(i)];
                check.near(i, got[size_t(i)], e,
                           kGemmRelTol * std::fabs(e) + kGemmAccumTol * abs_sum[size_t(i)]);
              }
              expect_ok(check, run_label, kGemmFrobenius);
            },
            c.required, {produced(residual_d), produced(partials_d)});
      }
  }
}

// The delta form of the norm GEMVs' input (NormGemvArgs::residual_delta): h' = bf16(h + bf16(delta)) is
// bit-exact, but Σ h'² is now the kernel's own fp32 sum in its own order, so its inv_rms may sit a few fp32
// ulps from the oracle's and a normed value at a bf16 rounding boundary may round the other way. normed is
// the oracle's activations; dev how far each may move for any inv_rms within kDeltaInvRmsSlack of the
// oracle's (rounding is monotone in inv_rms, so the two ends bound it): 0 for almost every element. The
// slack: a sum of k positive terms in fp32 over a tree of depth d is within d 2^-24 of the exact one (d ~ 30
// here), inv_rms moves half as much plus a few fp32 ulps (divide, sqrt, reciprocal), well inside 2^-17.
constexpr double kDeltaInvRmsSlack = 0x1p-17;

struct DeltaNormInputs {
  std::vector<uint16_t> residual, weight, normed;  // (max_m, k), (k), (max_m, k)
  std::vector<float> delta, dev;                   // (max_m, k) fp32, (max_m, k)
  int32_t delta_copies = 1;
  std::vector<float> copies;  // (delta_copies, max_m, k): delta is their sum (one copy: delta itself)
};

// One token's delta-form norm (k values): h' = bf16(residual + bf16(delta)), normed = bf16(weight * bf16(h' *
// inv_rms)) at the oracle's inv_rms (Σ h'² in double, then norm_prologue's fp32 formula), and dev: how far
// each normed value may move for any inv_rms within kDeltaInvRmsSlack of it.
void delta_normed(const uint16_t* residual, const float* delta, const std::vector<uint16_t>& weight,
                  int64_t k, uint16_t* normed, float* dev) {
  std::vector<float> h(static_cast<size_t>(k));
  double exact = 0;
  for (int64_t i = 0; i < k; ++i) {
    h[size_t(i)] = ref::to_float(add_delta(residual[i], delta[i]));
    exact += double(h[size_t(i)]) * h[size_t(i)];
  }
  const float inv_rms = 1.0f / std::sqrt(float(exact) / float(k) + kEps);  // norm_prologue's formula
  const float ends[2] = {float(inv_rms * (1.0 - kDeltaInvRmsSlack)),
                         float(inv_rms * (1.0 + kDeltaInvRmsSlack))};
  const auto normed_at = [&](float inv, int64_t i) {
    return ref::to_bf16(ref::to_float(weight[size_t(i)]) * ref::round_bf16(h[size_t(i)] * inv));
  };
  for (int64_t i = 0; i < k; ++i) {
    normed[i] = normed_at(inv_rms, i);
    dev[i] = 0.0f;
    for (const float end : ends)
      dev[i] = std::max(dev[i], std::fabs(ref::to_float(normed_at(end, i)) - ref::to_float(normed[i])));
  }
}

// delta_copies > 1: the delta as that many copies (NormGemvArgs::delta_copies), exact_sum_copies, so the
// oracle's delta, their fp32 sum, is the kernel's in whatever order it sums them.
DeltaNormInputs make_delta_norm_inputs(const std::string& label, int64_t max_m, int64_t k, int32_t delta_copies = 1) {
  const uint64_t seed = case_seed(label + " delta norm inputs");
  DeltaNormInputs in;
  in.residual = random_bf16(size_t(max_m * k), ref::mix_seed(seed, 1), -8.0f, 8.0f);
  in.delta_copies = delta_copies;
  in.copies = delta_copies == 1  // magnitudes like h's
                  ? random_f32(in.residual.size(), ref::mix_seed(seed, 2), -4.0f, 4.0f)
                  : exact_sum_copies(delta_copies, max_m * k, ref::mix_seed(seed, 2));
  in.delta = sum_copies(in.copies, max_m * k);
  in.weight = random_bf16(size_t(k), ref::mix_seed(seed, 3), -1.5f, 1.5f);
  in.normed.resize(in.residual.size());
  in.dev.resize(in.residual.size());
  for (int64_t t = 0; t < max_m; ++t)
    delta_normed(in.residual.data() + t * k, in.delta.data() + t * k, in.weight, k, in.normed.data() + t * k,
                 in.dev.data() + t * k);
  return in;
}

// The residual_delta buffer of a batch of m <= max_m tokens: each copy's first m rows, the copies one after the
// other ((delta_copies, m, k), NormGemvArgs::delta_copies).
std::vector<float> delta_buffer(const DeltaNormInputs& in, int64_t m, int64_t k) {
  const int64_t copy_size = int64_t(in.copies.size()) / in.delta_copies;
  std::vector<float> buffer;
  for (int32_t j = 0; j < in.delta_copies; ++j)
    buffer.insert(buffer.end(), in.copies.begin() + j * copy_size, in.copies.begin() + j * copy_size + m * k);
  return buffer;
}

// The part of the norm GEMV bound the inv_rms slack adds: moved[t][j] = Σ_i dev[t][i] |w[j][i]| for the first
// n rows of w (at least n, k), dev (m, k); (m, n).
std::vector<double> moved_by_dev(const std::vector<float>& dev, const std::vector<uint16_t>& w, int64_t m,
                                 int64_t n, int64_t k) {
  std::vector<double> moved(size_t(m * n), 0.0);
  for (int64_t t = 0; t < m; ++t)
    for (int64_t i = 0; i < k; ++i) {
      const double d = dev[size_t(t * k + i)];
      if (d == 0) continue;
      for (int64_t j = 0; j < n; ++j)
        moved[size_t(t * n + j)] += d * std::fabs(ref::to_float(w[size_t(j * k + i)]));
    }
  return moved;
}

// The norm GEMVs with a residual delta, batch 1 (the engine's) and 3: y = normed · wᵀ within the gemm bound
// plus Σ_i dev_i |w_i| (DeltaNormInputs); the partials are garbage the kernel must not read; residual and
// delta left as they were. The delta as one copy, and as three (NormGemvArgs::delta_copies: the normed state
// from their sum, which v8, v10-v14 must take wherever they take one copy). v9_gemv_norm_tma has no
// delta form and must refuse such args.
TEST_F(GpuTest, NormGemvWithResidualDelta) {
  const auto& versions = kernels::norm_gemv_versions();
  VersionRunner<NormGemvArgs> runner(versions);
  const auto& v9 = kernels::find_version(versions, "v9_gemv_norm_tma");
  const std::vector<std::string> must_take_copies = {"v8_gemv_norm", "v10_gemv_norm_wave", "v11_gemv_norm_early",
                                                     "v12_gemv_norm_ring", "v13_gemv_norm_ring_full",
                                                     "v14_gemv_norm_ring_tma", "v15_gemv_norm_ring_256t",
                                                     "v16_gemv_norm_ring_l2_first", "v17_gemv_norm_ring_pair",
                                                     "v19_gemv_norm_ring_tokens"};
  struct Case {
    std::string name;
    int64_t n, k;
    bool required;
  };
  const std::vector<Case> cases = {
      {"qkv", (kQHeads + 2 * kKvHeads) * kHeadDim, kHidden, true},
      {"n=200 k=64", 200, 64, false},
      {"n=7 k=128 (fewer rows than blocks)", 7, 128, false},
  };
  constexpr int64_t kMaxM = 3, kGarbagePartials = 132;
  for (const Case& c : cases) {
    const std::string base = "norm_gemv residual_delta " + c.name + " n=" + str(c.n) + " k=" + str(c.k);
    const auto w =
        random_bf16(size_t(c.n * c.k), ref::mix_seed(case_seed(base), 4), -0.05f, 0.05f);  // (n, k)
    std::vector<int64_t> rows(static_cast<size_t>(kMaxM));
    std::iota(rows.begin(), rows.end(), 0);
    // Large positive values: summed, they would make inv_rms several times too small.
    std::vector<float> garbage =
        random_f32(size_t(kMaxM * kernels::kMaxNormPartials), ref::mix_seed(case_seed(base), 5), 1e4f, 1e6f);
    const auto partials_d = to_device(garbage);
    const auto w_d = to_device(w);
    DeviceArray<uint32_t> claims_d(2);
    CUDA_OK(cudaMemsetAsync(claims_d.get(), 0, claims_d.bytes(), test_stream()));
    for (const int32_t copies : {1, 3}) {
      const std::string copies_base = base + (copies > 1 ? " delta_copies=" + str(copies) : "");
      const DeltaNormInputs in = make_delta_norm_inputs(copies_base, kMaxM, c.k, copies);
      std::vector<float> exact(size_t(kMaxM * c.n)), abs_sum(exact.size());  // (3, n)
      ref::gemm(in.normed.data(), w.data(), c.n, c.k, rows, exact.data(), abs_sum.data());
      const std::vector<double> moved = moved_by_dev(in.dev, w, kMaxM, c.n, c.k);  // (3, n): Σ_i dev_i |w_ji|
      auto residual_d = to_device(in.residual);  // re-uploaded before every run: it must stay as it is
      const auto weight_d = to_device(in.weight);
      for (const int64_t m : {int64_t(1), int64_t(2), kMaxM}) {  // (2: v19's ring at two tokens)
        const std::string label = copies_base + " m=" + str(m);
        const std::vector<float> delta = delta_buffer(in, m, c.k);  // (copies, m, k)
        auto delta_d = to_device(delta);
        DeviceArray<uint16_t> y_d(size_t(m * c.n));  // (m, n)
        NormGemvArgs args{as_bf16(residual_d),
                          partials_d.get(),
                          kGarbagePartials,
                          as_bf16(weight_d),
                          kEps,
                          as_bf16(w_d),
                          as_bf16(y_d),
                          m,
                          c.n,
                          c.k,
                          m == kMaxM ? 0.5f : 0.0f};  // m == 3: also the late PDL trigger
        args.residual_delta = delta_d.get();
        args.delta_copies = copies;
        args.l2_first_bytes = m == 1 ? 64 * 1024 : 0;  // (v16) a hint only
        args.claims = claims_d.get();                   // (v21) its queue; every launch leaves it zero
        args.prewait_window = copies == 1 ? 3 : 0;      // (v22) three groups at a time, and its default
        args.late_cta_from = copies == 1 ? 0 : 1;       // (v23) a quarter of the grid late, or all but CTA 0
        args.late_prewait_groups = copies == 1 ? 1 : 2;
        args.row_ramp_permille = copies == 1 ? 1000 : 150;  // (v26) the last CTA then takes ~1 / 132 of a share
        args.row_ramp_first_cta = copies == 1 ? 66 : 0;     // (v26) the ramp over the grid's second half
        EXPECT_FALSE(v9.supports(args)) << label << " | v9_gemv_norm_tma has no delta form: it must refuse";
        if (copies > 1) check_delta_copies_support(versions, args, label, true, must_take_copies);
        runner.run(
            label, args,
            [&] {
              residual_d.upload(in.residual);
              delta_d.upload(delta);
              y_d.poison();
            },
            [&](const std::string& run_label) {
              const auto got = y_d.download();
              Check check("y");
              for (int64_t i = 0; i < m * c.n; ++i) {
                const double e = exact[size_t(i)];
                check.near(i, got[size_t(i)], e,
                           kGemmRelTol * std::fabs(e) + kGemmAccumTol * abs_sum[size_t(i)] + moved[size_t(i)]);
              }
              expect_ok(check, run_label, kGemmFrobenius);
              const auto got_residual = residual_d.download();
              Check residual("residual (read only)");
              for (size_t i = 0; i < got_residual.size(); ++i)
                residual.exact(int64_t(i), got_residual[i], in.residual[i]);
              expect_ok(residual, run_label);
              const auto got_delta = delta_d.download();
              EXPECT_EQ(std::memcmp(got_delta.data(), delta.data(), delta.size() * sizeof(float)), 0)
                  << run_label << " | residual_delta (read only) changed";
            },
            c.required, {produced(residual_d), produced(delta_d)});
      }
    }
  }
}

// v8_qkv_attention_o_wavefront with the QKV projection in its launch (QkvAttentionOArgs::w_qkv): qkv_out within
// the norm GEMV's oracle bound (NormGemvMatchesReference's with partials, NormGemvWithResidualDelta's with a
// delta), and every other output bit-identical to v8 run again on that qkv given (w_qkv nullptr), the form
// QkvAttentionODecode checks against the oracle: attention.out, the caches, the residual, the norm partials, the
// delta left zero, the counters left zero. Shapes: Qwen3-8B's at three contexts (one split a head, several, all
// CTAs), both norm inputs (the layer-0 partials, the MLP's delta), and smaller GQA shapes.
TEST_F(GpuTest, QkvAttentionOWithQkvProjection) {
  const auto& v8 = kernels::find_version(kernels::qkv_attention_o_versions(), "v8_qkv_attention_o_wavefront");
  struct Case {
    std::string name;
    int64_t q_heads, kv_heads, head_dim, hidden;
    int32_t position;
    int32_t delta_copies;  // 0: the norm over the residual with partials (layer 0)
  };
  const std::vector<Case> cases = {
      {"qwen3-8b ctx=129 delta", kQHeads, kKvHeads, kHeadDim, kHidden, 128, 4},
      {"qwen3-8b ctx=1 partials", kQHeads, kKvHeads, kHeadDim, kHidden, 0, 0},
      {"qwen3-8b ctx=8192 delta", kQHeads, kKvHeads, kHeadDim, kHidden, 8191, 4},
      {"qwen3-8b ctx=1000 partials", kQHeads, kKvHeads, kHeadDim, kHidden, 999, 0},
      {"gqa=2 head_dim=64 hidden=1024 ctx=700 delta", 16, 8, 64, 1024, 699, 1},
      {"gqa=4 kv_heads=1 hidden=128 ctx=40 delta", 4, 1, 128, 128, 39, 4},
      // (a kv head's o columns, 80 pieces, do not divide the block: v8's general instance)
      {"gqa=5 (qwen3-14b) hidden=5120 ctx=300 delta", 40, 8, 128, 5120, 299, 4},
  };
  for (const Case& c : cases) {
    const std::string label = "qkv_attention_o with qkv " + c.name;
    const uint64_t seed = case_seed(label);
    const int64_t D = c.head_dim, H = c.hidden, QD = c.q_heads * D, KVD = c.kv_heads * D, width = QD + 2 * KVD;
    const int64_t max_ctx = c.position + 65;
    // The norm's input and its oracle (normed bit-exact; with a delta, dev bounds the inv_rms slack).
    std::vector<uint16_t> residual, norm_weight, normed;
    std::vector<float> delta, dev(size_t(H), 0.0f), partials;
    if (c.delta_copies > 0) {
      const DeltaNormInputs in = make_delta_norm_inputs(label, 1, H, c.delta_copies);
      residual = in.residual, norm_weight = in.weight, normed = in.normed, dev = in.dev;
      delta = delta_buffer(in, 1, H);
    } else {
      const NormInputs in = make_norm_inputs(label, 1, H);
      residual = in.residual, norm_weight = in.weight, normed = in.normed;
      partials = norm_partials(in.sum_sq, 1, kPartialLayouts[0].count, false, seed);
    }
    const auto w_qkv = random_bf16(size_t(width * H), ref::mix_seed(seed, 1), -0.05f, 0.05f);
    std::vector<float> exact(static_cast<size_t>(width)), abs_sum(exact.size());
    const std::vector<int64_t> rows = {0};
    ref::gemm(normed.data(), w_qkv.data(), width, H, rows, exact.data(), abs_sum.data());
    const std::vector<double> moved = moved_by_dev(dev, w_qkv, 1, width, H);
    const auto q_norm = random_bf16(size_t(D), ref::mix_seed(seed, 2), 0.5f, 1.5f);
    const auto k_norm = random_bf16(size_t(D), ref::mix_seed(seed, 3), 0.5f, 1.5f);
    const auto k_cache = random_bf16(size_t(max_ctx * KVD), ref::mix_seed(seed, 4), -1.5f, 1.5f);
    const auto v_cache = random_bf16(size_t(max_ctx * KVD), ref::mix_seed(seed, 5), -4.0f, 4.0f);
    const auto w_o = random_bf16(size_t(H * QD), ref::mix_seed(seed, 6), -0.05f, 0.05f);

    const auto w_qkv_d = to_device(w_qkv), norm_weight_d = to_device(norm_weight), w_o_d = to_device(w_o);
    const auto q_norm_d = to_device(q_norm), k_norm_d = to_device(k_norm);
    const auto inv_freq_d = to_device(make_inv_freq(D, 1e6));
    const auto positions_d = to_device(std::vector<int32_t>{c.position});
    const auto in_partials_d = to_device(partials.empty() ? std::vector<float>(1, 0.0f) : partials);
    DeviceArray<uint16_t> qkv_d{size_t(width)}, q_scratch_d{size_t(QD)}, out_d{size_t(QD)}, residual_d{size_t(H)};
    DeviceArray<uint16_t> k_d{k_cache.size()}, v_d{v_cache.size()};
    DeviceArray<float> delta_d{delta.size()}, partials_d{size_t(kernels::kMaxNormPartials)};
    const int64_t workspace_floats = kernels::qkv_attention_o_workspace_floats(H, c.q_heads, c.kv_heads, D);
    const int64_t counter_bytes = kernels::qkv_attention_o_counter_bytes(H, c.kv_heads);
    DeviceArray<float> workspace_d{size_t(workspace_floats)};
    CUDA_OK(cudaMemset(workspace_d.get(), 0, size_t(counter_bytes)));
    kernels::QkvAttentionOArgs args{
        {{as_bf16(qkv_d), as_bf16(q_norm_d), as_bf16(k_norm_d), as_bf16(q_scratch_d), as_bf16(k_d), as_bf16(v_d),
          positions_d.get(), nullptr, inv_freq_d.get(), 1.0f, kEps, 1, c.q_heads, c.kv_heads, D, max_ctx},
         as_bf16(out_d), c.position, 1.0f / std::sqrt(float(D)), nullptr},
        as_bf16(w_o_d), as_bf16(residual_d), partials_d.get(), H, workspace_d.get()};
    args.residual_delta = c.delta_copies > 0 ? delta_d.get() : nullptr;
    args.delta_copies = std::max(c.delta_copies, 1);
    args.w_qkv = as_bf16(w_qkv_d);
    args.qkv_norm_weight = as_bf16(norm_weight_d);
    args.qkv_norm_partials = in_partials_d.get();
    args.qkv_partial_count = kPartialLayouts[0].count;
    args.qkv_out = as_bf16(qkv_d);
    if (!v8.supports(args)) {
      std::printf("[ SKIPPED ] %s: v8_qkv_attention_o_wavefront does not run here (sm_90 only)\n", label.c_str());
      continue;
    }
    kernels::QkvAttentionOArgs given = args;  // the same launch on the qkv the first one wrote
    given.w_qkv = nullptr;
    EXPECT_TRUE(v8.supports(given)) << label;
    for (const auto& version : kernels::qkv_attention_o_versions())
      if (&version != &v8 && version.supports)
        EXPECT_FALSE(version.supports(args))
            << label << " | " << version.name << " has no QKV projection: it must refuse";
    struct Outputs {
      std::vector<uint16_t> qkv, out, residual, k, v;
      std::vector<float> partials, delta;
      std::vector<uint32_t> counters;
    };
    const auto run = [&](const kernels::QkvAttentionOArgs& a, const std::vector<uint16_t>* qkv_in) {
      if (qkv_in) qkv_d.upload(*qkv_in); else qkv_d.poison();
      out_d.poison();
      q_scratch_d.poison();
      partials_d.poison();
      residual_d.upload(residual);
      delta_d.upload(delta);
      k_d.upload(k_cache);
      v_d.upload(v_cache);
      CUDA_OK(cudaMemsetAsync(reinterpret_cast<char*>(workspace_d.get()) + counter_bytes, 0xFF,
                              size_t(workspace_floats * 4 - counter_bytes), test_stream()));
      v8.launch(a, test_stream());
      CUDA_OK(cudaGetLastError());
      Outputs o{qkv_d.download(), out_d.download(), residual_d.download(), k_d.download(), v_d.download(),
                partials_d.download(), delta_d.download(), std::vector<uint32_t>(size_t(counter_bytes / 4))};
      CUDA_OK(cudaMemcpy(o.counters.data(), workspace_d.get(), size_t(counter_bytes), cudaMemcpyDeviceToHost));
      return o;
    };
    // The default and v8's steps (QkvAttentionOArgs::chain_steps: 1 per-head counts, 3 early splits, 4 bulk copies,
    // 16 contiguous rows).
    for (const int32_t steps : {-1, 1, 3, 4, 16}) {
      const std::string run_label = label + " chain_steps=" + str(steps);
      kernels::QkvAttentionOArgs stepped = args;
      stepped.chain_steps = steps;
      const Outputs fused = run(stepped, nullptr);
      Check check("qkv_out");
      for (int64_t j = 0; j < width; ++j) {
        const double e = exact[size_t(j)];
        check.near(j, fused.qkv[size_t(j)], e,
                   kGemmRelTol * std::fabs(e) + kGemmAccumTol * abs_sum[size_t(j)] + moved[size_t(j)]);
      }
      expect_ok(check, run_label, kGemmFrobenius);
      const Outputs apart = run(given, &fused.qkv);
      EXPECT_EQ(fused.qkv, apart.qkv) << run_label << " | qkv given must stay as it is";
      EXPECT_EQ(fused.out, apart.out) << run_label << " | attention.out differs from the qkv-given launch";
      EXPECT_EQ(fused.residual, apart.residual) << run_label << " | residual differs from the qkv-given launch";
      EXPECT_EQ(fused.k, apart.k) << run_label << " | k_cache differs from the qkv-given launch";
      EXPECT_EQ(fused.v, apart.v) << run_label << " | v_cache differs from the qkv-given launch";
      const int64_t count = kernels::qkv_attention_o_partials(H, c.kv_heads);
      EXPECT_EQ(std::memcmp(fused.partials.data(), apart.partials.data(), size_t(count) * 4), 0)
          << run_label << " | norm partials differ from the qkv-given launch";
      EXPECT_EQ(std::count(fused.delta.begin(), fused.delta.end(), 0.0f), int64_t(fused.delta.size()))
          << run_label << " | residual_delta not left zero";
      EXPECT_EQ(std::count(fused.counters.begin(), fused.counters.end(), 0u), int64_t(fused.counters.size()))
          << run_label << " | workspace counters not left zero";
      EXPECT_NE(fused.residual, residual) << run_label << " | the residual was not updated";
    }
  }
}

// The bounds of GateUpSwigluMatchesReference (g and u rounded from anywhere within 2^-18 sum |x w| of the
// exact sums; two bf16 ulps for expf and the product) from the exact gate|up products: exact, abs_sum (rows,
// 2 * inter) -> center, spread (rows, inter).
void swiglu_bounds(const std::vector<float>& exact, const std::vector<float>& abs_sum, int64_t rows,
                   int64_t inter, std::vector<float>& center, std::vector<float>& spread) {
  center.assign(size_t(rows * inter), 0.0f);
  spread.assign(center.size(), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < inter; ++j) {
      const size_t g = size_t(i * 2 * inter + j), u = g + size_t(inter), e = size_t(i * inter + j);
      auto roundings = [&](size_t index) {
        const double value = exact[index], slack = 0x1p-18 * abs_sum[index];
        return std::array<uint16_t, 3>{ref::to_bf16(float(value - slack)), ref::to_bf16(float(value)),
                                       ref::to_bf16(float(value + slack))};
      };
      const auto gates = roundings(g), ups = roundings(u);
      center[e] = ref::to_float(ref::swiglu(gates[1], ups[1]));
      float largest = std::fabs(center[e]), distance = 0;
      for (const uint16_t gate : gates)
        for (const uint16_t up : ups) {
          const float value = ref::to_float(ref::swiglu(gate, up));
          distance = std::max(distance, std::fabs(value - center[e]));
          largest = std::max(largest, std::fabs(value));
        }
      spread[e] = distance + float(0x1p-6) * largest;
    }
}

// The gate|up projection with the RMSNorm prologue and the SwiGLU epilogue: out as
// GateUpSwigluMatchesReference judges it, over the bit-exact normed activations (NormInputs), for both
// partial layouts.
TEST_F(GpuTest, NormGateUpSwigluMatchesReference) {
  VersionRunner<NormGateUpSwigluArgs> runner(kernels::norm_gate_up_swiglu_versions());
  struct Case {
    std::string name;
    int64_t inter, k;
    std::vector<int64_t> ms;
    bool required;
  };
  const std::vector<Case> cases = {
      {"qwen3-8b", kInter, kHidden, {1, 2, 8}, true},
      {"inter=200 k=64", 200, 64, {1, 3, 8}, false},
      {"inter=7 k=128 (fewer pairs than blocks)", 7, 128, {1, 2, 8}, false},
  };
  constexpr int64_t kMaxM = 8;
  for (const Case& c : cases) {
    const std::string base = "norm_gate_up_swiglu " + c.name + " inter=" + str(c.inter) + " k=" + str(c.k);
    const NormInputs in = make_norm_inputs(base, kMaxM, c.k);
    const auto w = random_bf16(size_t(2 * c.inter * c.k), ref::mix_seed(case_seed(base), 4), -0.05f,
                               0.05f);  // (2 * inter, k): gate rows, then up rows
    std::vector<int64_t> rows(static_cast<size_t>(kMaxM));
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> exact(size_t(kMaxM * 2 * c.inter)), abs_sum(exact.size());  // (8, 2 * inter)
    ref::gemm(in.normed.data(), w.data(), 2 * c.inter, c.k, rows, exact.data(), abs_sum.data());
    std::vector<float> center, spread;  // (8, inter)
    swiglu_bounds(exact, abs_sum, kMaxM, c.inter, center, spread);
    const auto residual_d = to_device(in.residual);
    const auto weight_d = to_device(in.weight);
    const auto w_d = to_device(w);
    DeviceArray<uint32_t> claims_d(2);
    CUDA_OK(cudaMemsetAsync(claims_d.get(), 0, claims_d.bytes(), test_stream()));
    for (const int64_t m : c.ms)
      for (const PartialLayout& layout : kPartialLayouts) {
        const std::string label = base + " m=" + str(m) + " " + layout.name;
        const auto partials_d =
            to_device(norm_partials(in.sum_sq, m, layout.count, layout.spread, case_seed(label)));
        DeviceArray<uint16_t> out_d(size_t(m * c.inter));  // (m, inter)
        const NormGateUpSwigluArgs args{as_bf16(residual_d),
                                        partials_d.get(),
                                        layout.count,
                                        as_bf16(weight_d),
                                        kEps,
                                        as_bf16(w_d),
                                        as_bf16(out_d),
                                        m,
                                        c.inter,
                                        c.k,
                                        m == 2 ? 0.5f : 0.0f};  // m == 2: also the late PDL trigger
        runner.run(
            label, args, [&] { out_d.poison(); },
            [&](const std::string& run_label) {
              const auto got = out_d.download();
              Check check("out");
              for (size_t e = 0; e < got.size(); ++e) check.near(int64_t(e), got[e], center[e], spread[e]);
              expect_ok(check, run_label);
            },
            c.required, {produced(residual_d), produced(partials_d)});
      }
  }
}

// ---- 05 the MLP sublayer in one launch (batch 1) ----------------------------------------------------------
// act_j = bf16(bf16(silu(g_j)) * u_j) at the oracle's bf16 roundings of the exact gate and up sums (center),
// and the farthest from it any value a kernel may legitimately produce lies (dist): g and u rounded from
// anywhere within 2^-18 Σ|x w| of the exact sums (swiglu_bounds' slack), silu within 2^-20 relative of the
// exact value (device expf, its 1 + e and the divide: a few fp32 ulps). The product of two bf16 values is
// exact in fp32, so its rounding adds nothing. dist is 0 for almost every feature: only values at a bf16
// rounding boundary move. exact, abs_sum: (2 * inter) gate sums then up sums; center, dist: (inter).
void swiglu_ranges(const std::vector<float>& exact, const std::vector<float>& abs_sum, int64_t inter,
                   std::vector<double>& center, std::vector<double>& dist) {
  center.assign(size_t(inter), 0.0);
  dist.assign(size_t(inter), 0.0);
  for (int64_t j = 0; j < inter; ++j) {
    auto roundings = [&](size_t index) {
      const double value = exact[index], slack = 0x1p-18 * abs_sum[index];
      return std::array<uint16_t, 3>{ref::to_bf16(float(value - slack)), ref::to_bf16(float(value)),
                                     ref::to_bf16(float(value + slack))};
    };
    const auto gates = roundings(size_t(j)), ups = roundings(size_t(inter + j));
    center[size_t(j)] = ref::to_float(ref::swiglu(gates[1], ups[1]));
    for (const uint16_t gate : gates)
      for (const uint16_t up : ups) {
        const double g = ref::to_float(gate), silu = g / (1.0 + std::exp(-g));
        for (const double f : {1.0 - 0x1p-20, 1.0 + 0x1p-20}) {
          const float act = ref::round_bf16(ref::round_bf16(float(silu * f)) * ref::to_float(up));
          dist[size_t(j)] = std::max(dist[size_t(j)], std::fabs(double(act) - center[size_t(j)]));
        }
      }
  }
}

// The MLP sublayer of one token on random inputs (NormMlpArgs) and what it must add to the delta: normed
// bit-exact from the partials (NormInputs), act as swiglu_ranges, down_i = Σ_j w_down[i][j] act_j, down_abs_i
// = Σ_j |w_ij act_j| and down_moved_i = Σ_j |w_ij| dist_j.
struct MlpProblem {
  NormInputs in;                                   // one token: residual, norm weight, normed (bit-exact)
  std::vector<uint16_t> w_gate_up;                 // (2 * inter, hidden): gate rows, then up rows
  std::vector<uint16_t> w_down_t;                  // (inter, hidden): down_proj (hidden, inter) transposed
  std::vector<double> down, down_abs, down_moved;  // (hidden)
};

// The norm inputs of one token from a given residual: sum_sq in double rounded to fp32, normed as the kernels norm.
NormInputs norm_inputs_of(std::vector<uint16_t> residual, std::vector<uint16_t> weight) {
  NormInputs in;
  const int64_t k = int64_t(residual.size());
  in.residual = std::move(residual);
  in.weight = std::move(weight);
  double exact = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double h = ref::to_float(in.residual[size_t(i)]);
    exact += h * h;
  }
  in.sum_sq.push_back(float(exact));
  const float inv_rms = 1.0f / std::sqrt(float(exact) / float(k) + kEps);
  in.normed.resize(size_t(k));
  for (int64_t i = 0; i < k; ++i) {
    const float normalized = ref::round_bf16(ref::to_float(in.residual[size_t(i)]) * inv_rms);
    in.normed[size_t(i)] = ref::to_bf16(ref::to_float(in.weight[size_t(i)]) * normalized);
  }
  return in;
}

// out.down, down_abs and down_moved (MlpProblem) of the normed input `normed` (hidden) through the weights.
void mlp_oracle(const uint16_t* normed, const std::vector<uint16_t>& w_gate_up, const std::vector<uint16_t>& w_down_t,
                int64_t hidden, int64_t inter, MlpProblem& out) {
  std::vector<float> exact(size_t(2 * inter)), abs_sum(exact.size());  // (2 * inter)
  const std::vector<int64_t> row0 = {0};
  ref::gemm(normed, w_gate_up.data(), 2 * inter, hidden, row0, exact.data(), abs_sum.data());
  std::vector<double> act, dist;  // (inter)
  swiglu_ranges(exact, abs_sum, inter, act, dist);
  out.down.assign(size_t(hidden), 0.0);
  out.down_abs.assign(size_t(hidden), 0.0);
  out.down_moved.assign(size_t(hidden), 0.0);
  for (int64_t j = 0; j < inter; ++j) {
    const uint16_t* row = w_down_t.data() + j * hidden;  // column j of down_proj
    const double a = act[size_t(j)], d = dist[size_t(j)];
    for (int64_t i = 0; i < hidden; ++i) {
      const double w = ref::to_float(row[i]);
      out.down[size_t(i)] += w * a;
      out.down_abs[size_t(i)] += std::fabs(w * a);
      out.down_moved[size_t(i)] += std::fabs(w) * d;
    }
  }
}

// The MLP of the token in `in` (its normed input) with random weights seeded by base.
MlpProblem make_mlp_problem_for(NormInputs in, const std::string& base, int64_t hidden, int64_t inter) {
  const uint64_t seed = case_seed(base);
  MlpProblem p;
  p.in = std::move(in);
  p.w_gate_up = random_bf16(size_t(2 * inter * hidden), ref::mix_seed(seed, 4), -0.05f, 0.05f);
  {
    const auto w_down =
        random_bf16(size_t(hidden * inter), ref::mix_seed(seed, 5), -0.05f, 0.05f);  // (hidden, inter)
    p.w_down_t.resize(w_down.size());
    for (int64_t i = 0; i < hidden; ++i)
      for (int64_t j = 0; j < inter; ++j) p.w_down_t[size_t(j * hidden + i)] = w_down[size_t(i * inter + j)];
  }
  mlp_oracle(p.in.normed.data(), p.w_gate_up, p.w_down_t, hidden, inter, p);
  return p;
}

MlpProblem make_mlp_problem(const std::string& base, int64_t hidden, int64_t inter) {
  return make_mlp_problem_for(make_norm_inputs(base, 1, hidden), base, hidden, inter);
}

// What the delta holds before a NormMlp launch, (delta_copies, hidden) (NormMlpArgs::delta_copies): zeros, or
// random values, one copy at full fp32 mantissas (random_f32), several exact_sum_copies (so that their sum is
// exact). sum: Σ_j copy j, the delta the oracle starts from; abs_sum: Σ_j |copy j|, its bound's |delta before|.
struct MlpDeltaStart {
  std::vector<float> copies, sum, abs_sum;  // (delta_copies, hidden), (hidden), (hidden)
};

MlpDeltaStart mlp_delta_start(int64_t hidden, int32_t copies, bool random, uint64_t seed) {
  MlpDeltaStart s;
  if (!random)
    s.copies.assign(size_t(copies * hidden), 0.0f);
  else if (copies == 1)
    s.copies = random_f32(size_t(hidden), ref::mix_seed(seed, 1), -2.0f, 2.0f);
  else
    s.copies = exact_sum_copies(copies, hidden, ref::mix_seed(seed, 1));
  s.sum = sum_copies(s.copies, hidden);
  s.abs_sum = sum_copies(s.copies, hidden, true);
  return s;
}

// The delta after `launches` launches starting from start (want = Σ copies + launches * down, summed over the
// copies) and its bound: each launch adds down within 2^-12 (down_abs + Σ_j |copy j before it|) + down_moved
// (NormMlpMatchesReference; each copy's fp32 reductions round at most at its own magnitude), the copies before
// launch l (from 0) within Σ_j |start copy j| + l down_abs, plus 2^-10 of the sum for the earlier launches' own
// errors when there are several.
void mlp_delta_expectation(const MlpProblem& p, const MlpDeltaStart& start, int launches, std::vector<double>& want,
                           std::vector<double>& bound) {
  want.resize(p.down.size());
  bound.resize(p.down.size());
  for (size_t i = 0; i < p.down.size(); ++i) {
    want[i] = double(start.sum[i]) + launches * p.down[i];
    double b = 0;
    for (int l = 0; l < launches; ++l)
      b += kGemmAccumTol * (p.down_abs[i] * (1 + l) + start.abs_sum[i]) + p.down_moved[i];
    bound[i] = launches == 1 ? b : b * (1 + 0x1p-10);
  }
}

// The delta a NormMlp launch (or two) left, got (delta_copies, hidden): its sum over the copies (fp32, j = 0, 1, ...
// in turn, as the readers sum them: at most a few fp32 ulps from any other order, far inside the bound) within
// bound of want (expect_f32_near), and every copy no CTA adds to (j >= ctas: CTA c adds to copy c % delta_copies)
// bit for bit as it started. Returns the summed delta.
std::vector<float> check_mlp_delta(const std::vector<float>& got, const MlpDeltaStart& start, int64_t ctas,
                                   const std::vector<double>& want, const std::vector<double>& bound,
                                   const std::string& run_label) {
  const int64_t hidden = int64_t(want.size()), copies = int64_t(got.size()) / hidden;
  std::vector<float> sum = sum_copies(got, hidden);
  expect_f32_near(copies > 1 ? "residual_delta (sum of the copies)" : "residual_delta", sum, want, bound, run_label,
                  kGemmFrobenius);
  for (int64_t j = ctas; j < copies; ++j) {
    const size_t bytes = size_t(hidden) * sizeof(float);
    EXPECT_EQ(std::memcmp(got.data() + j * hidden, start.copies.data() + j * hidden, bytes), 0)
        << run_label << " | residual_delta copy " << j << " of " << copies << " changed, yet none of the " << ctas
        << " CTAs adds to it";
  }
  return sum;
}

// %globaltimer-like stamps for v12's lateness_in (NormMlpArgs::lateness_in): 10^15 ns plus 0 .. spread_ns - 1.
constexpr int64_t kMaxMlpStampCtas = 1024;  // more than any launch here has CTAs
std::vector<uint64_t> mlp_stamps(int64_t count, uint64_t spread_ns, uint64_t seed) {
  std::vector<uint64_t> stamps(static_cast<size_t>(count));
  uint64_t state = seed;
  for (auto& t : stamps) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t = 1000000000000000ull + (state >> 33) % spread_ns;
  }
  return stamps;
}

// residual_delta += down(act) for the whole sublayer in one launch (NormMlpArgs), as MlpProblem. Bound: 2^-12
// (Σ_j |w_ij act_j| + |delta before|), the gemm bound's fp32 term (per-thread chains over a CTA's features,
// then one reduction per CTA into the delta, in no fixed order), plus Σ_j |w_ij| dist_j; relative Frobenius
// error <= 5e-3 (a CTA's block of features lost moves it by about (features / inter)^1/2). The delta is an
// accumulator, so it cannot be poisoned: it starts at 0 (as the engine leaves it) or, to check the "+=", at
// random values. The residual is read only. (v3_mlp_qkv_next refuses these args:
// NormMlpNextQkvMatchesReference.) With delta_copies = 4 (NormMlpArgs::delta_copies) the delta is their sum
// (every copy pre-filled when it accumulates), and a copy no CTA adds to (3 CTAs) must stay as it was;
// v2_mlp_split_down_ring must take them on the Qwen3-8B shape, v1 and v4 may refuse them (skipped).
TEST_F(GpuTest, NormMlpMatchesReference) {
  const auto& versions = kernels::norm_mlp_versions();
  VersionRunner<NormMlpArgs> runner(versions);
  struct Run {
    int32_t prewait_rows;  // -1: the version's default
    int64_t partials;      // norm partials the residual's producer left
    bool accumulate;       // the delta starts at random values instead of 0
    int32_t delta_copies = 1;
    int32_t skew_from = 0, skew_permille = 0;  // v11's weighted blocks (the other versions ignore them)
  };
  struct Case {
    std::string name;
    int64_t hidden, inter;
    int32_t ctas;  // 0: one per SM
    std::vector<Run> runs;
    bool required;
  };
  // v11 with a skew: the CTAs from 76 on (of 132 on an H200) take 3% fewer features; 5 CTAs, the last 3 of them 40%
  // fewer; 132 CTAs with 7 features, the last 100 half as many (most take none).
  const std::vector<Case> cases = {
      {"qwen3-8b",
       kHidden,
       kInter,
       0,
       {{-1, 132, false}, {-1, 3, true}, {-1, 132, false, 4}, {-1, 3, true, 4}, {-1, 132, true, 4, 76, 30}},
       true},
      {"qwen3-0.6b", 1024, 3072, 0, {{-1, 3, false}, {0, 132, false}, {8, 3, true}}, false},
      {"hidden=5120 (two vectors a thread)", 5120, 1000, 0, {{-1, 3, false}}, false},
      // With 4 delta copies: two CTAs add to copy 0, one to each of the others.
      {"5 CTAs (uneven feature blocks)", 256, 96, 5, {{-1, 3, true}, {-1, 3, true, 4}, {-1, 3, true, 1, 2, 400}},
       false},
      {"3 CTAs (a delta copy no CTA adds to)", 256, 96, 3, {{-1, 3, true, 4}, {-1, 132, false, 4}}, false},
      {"inter=7 (CTAs without features)", 256, 7, 0, {{-1, 3, false}, {-1, 132, true}, {-1, 3, true, 1, 32, 500}},
       false},
  };
  for (const Case& c : cases) {
    const std::string base =
        "norm_mlp " + c.name + " hidden=" + str(c.hidden) + " inter=" + str(c.inter) + " ctas=" + str(c.ctas);
    const MlpProblem p = make_mlp_problem(base, c.hidden, c.inter);
    auto residual_d = to_device(p.in.residual);  // re-uploaded before every run: it must stay as it is
    const auto weight_d = to_device(p.in.weight);
    const auto w_gate_up_d = to_device(p.w_gate_up);
    const auto w_down_t_d = to_device(p.w_down_t);
    for (const Run& r : c.runs) {
      const std::string label = base + " prewait_rows=" + str(r.prewait_rows) + " partials=" + str(r.partials) +
                                (r.accumulate ? " delta+=" : "") +
                                (r.delta_copies > 1 ? " delta_copies=" + str(r.delta_copies) : "") +
                                (r.skew_permille > 0 ? " skew=" + str(r.skew_from) + ":" + str(r.skew_permille) : "");
      const auto partials_d = to_device(norm_partials(p.in.sum_sq, 1, r.partials, true, case_seed(label)));
      // What the delta holds before the launch.
      const MlpDeltaStart start = mlp_delta_start(c.hidden, r.delta_copies, r.accumulate, case_seed(label));
      std::vector<double> want, bound;
      mlp_delta_expectation(p, start, 1, want, bound);
      DeviceArray<float> delta_d(start.copies.size());  // (delta_copies, hidden)
      // (v12) The previous launch's "waited" stamps, up to 4 us apart: every CTA pair hands features over.
      const auto stamps_d = to_device(mlp_stamps(kMaxMlpStampCtas, 4000, case_seed(label)));
      DeviceArray<uint64_t> stamps_out_d(kMaxMlpStampCtas);
      NormMlpArgs args{as_bf16(residual_d),  partials_d.get(),    r.partials,    as_bf16(weight_d), kEps,
                       as_bf16(w_gate_up_d), as_bf16(w_down_t_d), delta_d.get(), c.hidden,          c.inter};
      args.ctas = c.ctas;
      args.prewait_rows = r.prewait_rows;
      args.prewait_window = r.accumulate ? 2 : 0;  // (v15) two groups at a time, and its default one
      args.late_cta_from = r.accumulate ? 1 : 0;   // (v16) all CTAs but the first late, or a quarter of them
      args.late_prewait_groups = r.accumulate ? 0 : 1;
      args.beside_stages = r.accumulate ? (r.delta_copies > 1 ? 2 : 5) : 0;  // (v18) its default 4, 2 and 5
      // (v18) groups past the ring into L2: none, 40 (gate and up rows at Qwen3-8B's shape) and 200 (more than a CTA
      // has: 72 there): only a hint, the delta must be the same.
      args.beside_l2_groups = r.accumulate ? (r.delta_copies > 1 ? 200 : 40) : 0;
      args.delta_copies = r.delta_copies;
      args.skew_from = r.skew_from;
      args.skew_permille = r.skew_permille;
      args.lateness_in = stamps_d.get();
      args.lateness_out = stamps_out_d.get();
      // (v8) two CTAs pull 48 KB + 16 bytes of every other CTA's rows into L2 first (a partial 64 KB prefetch, a
      // block shorter than that where a CTA has few features): only a hint, the delta must be the same.
      args.l2_lead_ctas = 2;
      args.l2_lead_bytes = 48 * 1024 + 16;
      if (r.delta_copies > 1)
        check_delta_copies_support(versions, args, label, c.required,
                                   {"v2_mlp_split_down_ring", "v5_mlp_split_down_full_ring",
                                    "v6_mlp_split_down_tma", "v8_mlp_split_down_l2_lead",
                                    "v9_mlp_split_down_l2_first"});
      const int64_t ctas = kernels::norm_mlp_ctas(args);
      runner.run(
          label, args,
          [&] {
            residual_d.upload(p.in.residual);
            delta_d.upload(start.copies);
          },
          [&](const std::string& run_label) {
            check_mlp_delta(delta_d.download(), start, ctas, want, bound, run_label);
            const auto got_residual = residual_d.download();
            Check residual("residual (read only)");
            for (size_t i = 0; i < got_residual.size(); ++i)
              residual.exact(int64_t(i), got_residual[i], p.in.residual[i]);
            expect_ok(residual, run_label);
          },
          c.required, {produced(residual_d), produced(partials_d), produced(delta_d), produced(stamps_d)});
    }
  }
}

// v14_mlp_split_down_batched: `tokens` tokens at once (NormMlpArgs::rows), their inputs already normed
// (normed_input, (tokens, hidden): each token a make_norm_inputs row of its own), the delta (delta_copies, tokens,
// hidden). Token t's sum over the copies must be NormMlpMatchesReference's delta for its input alone (same bound),
// and every copy no CTA adds to unchanged. normed_input is read only and comes from the previous kernel. One token
// with normed input is taken too. The batch-1 versions refuse these args (rows, normed_input).
TEST_F(GpuTest, NormMlpBatchedMatchesReference) {
  const auto& versions = kernels::norm_mlp_versions();
  VersionRunner<NormMlpArgs> runner(versions);
  struct Run {
    int64_t tokens;
    bool accumulate;  // the delta starts at random values instead of 0
    int32_t delta_copies;
  };
  struct Case {
    std::string name;
    int64_t inter;
    int32_t ctas;  // 0: one per SM
    std::vector<Run> runs;
    bool required;
  };
  const std::vector<Case> cases = {
      {"qwen3-8b", kInter, 0, {{2, false, 2}, {2, true, 1}, {1, true, 2}, {2, true, 4}}, true},
      {"5 CTAs (uneven feature blocks, a copy no CTA adds to)", 96, 5, {{2, true, 8}, {1, false, 1}}, true},
      {"inter=7 (CTAs without features)", 7, 0, {{2, true, 2}}, true},
  };
  constexpr int64_t kMaxTokens = 2;
  for (const Case& c : cases) {
    const int64_t hidden = kHidden;
    const std::string base = "norm_mlp batched " + c.name + " inter=" + str(c.inter) + " ctas=" + str(c.ctas);
    // Token 0's problem draws the weights; token 1 has its own input through the same weights.
    std::vector<MlpProblem> p;
    p.push_back(make_mlp_problem(base, hidden, c.inter));
    p.emplace_back();
    p[1].in = make_norm_inputs(base + " token 1", 1, hidden);
    mlp_oracle(p[1].in.normed.data(), p[0].w_gate_up, p[0].w_down_t, hidden, c.inter, p[1]);
    std::vector<uint16_t> normed;  // (kMaxTokens, hidden)
    for (int64_t t = 0; t < kMaxTokens; ++t) normed.insert(normed.end(), p[t].in.normed.begin(), p[t].in.normed.end());
    const auto normed_d = to_device(normed);
    const auto weight_d = to_device(p[0].in.weight);
    const auto w_gate_up_d = to_device(p[0].w_gate_up);
    const auto w_down_t_d = to_device(p[0].w_down_t);
    for (const Run& r : c.runs) {
      const std::string label = base + " tokens=" + str(r.tokens) + (r.accumulate ? " delta+=" : "") +
                                " delta_copies=" + str(r.delta_copies);
      // What the delta holds before the launch, token by token, laid out (copies, tokens, hidden).
      std::vector<MlpDeltaStart> start;
      std::vector<float> start_copies(size_t(r.delta_copies * r.tokens * hidden));
      for (int64_t t = 0; t < r.tokens; ++t) {
        start.push_back(mlp_delta_start(hidden, r.delta_copies, r.accumulate, case_seed(label + " token " + str(t))));
        for (int64_t j = 0; j < r.delta_copies; ++j)
          std::copy_n(start[t].copies.begin() + j * hidden, hidden, start_copies.begin() + (j * r.tokens + t) * hidden);
      }
      DeviceArray<float> delta_d(start_copies.size());
      NormMlpArgs args{nullptr, nullptr, 0, as_bf16(weight_d), kEps, as_bf16(w_gate_up_d), as_bf16(w_down_t_d),
                       delta_d.get(), hidden, c.inter};
      args.ctas = c.ctas;
      args.delta_copies = r.delta_copies;
      args.normed_input = as_bf16(normed_d);
      args.rows = r.tokens;
      const int64_t ctas = kernels::norm_mlp_ctas(args);
      runner.run(
          label, args, [&] { delta_d.upload(start_copies); },
          [&](const std::string& run_label) {
            const auto got = delta_d.download();
            for (int64_t t = 0; t < r.tokens; ++t) {
              std::vector<float> token_copies(size_t(r.delta_copies * hidden));
              for (int64_t j = 0; j < r.delta_copies; ++j)
                std::copy_n(got.begin() + (j * r.tokens + t) * hidden, hidden, token_copies.begin() + j * hidden);
              std::vector<double> want, bound;
              mlp_delta_expectation(p[t], start[t], 1, want, bound);
              check_mlp_delta(token_copies, start[t], ctas, want, bound, run_label + " token " + str(t));
            }
            Check input("normed_input (read only)");
            const auto got_input = normed_d.download();
            for (size_t i = 0; i < got_input.size(); ++i) input.exact(int64_t(i), got_input[i], normed[i]);
            expect_ok(input, run_label);
          },
          c.required, {produced(normed_d), produced(delta_d)});
    }
  }
}

// v12_mlp_split_down_paired: CTAs c and ctas - 1 - c hand the tail of the later one's block to the other by how much
// later its stamp in lateness_in is (NormMlpArgs::lateness_in). Each stamp pattern moves features differently (none,
// the last CTAs later as in the decode step, random, one CTA seconds later: capped at lateness_max_features, all of
// a block where blocks are smaller); the delta must be NormMlpMatchesReference's whatever moved. lateness_in is read
// only; lateness_out, poisoned, must hold every CTA's stamp (nonzero, within a second of the others) and nothing
// past the last CTA. An odd CTA count leaves the middle CTA its own partner.
void launch_mlp_paired(const NormMlpArgs& a, cudaStream_t stream) {
  kernels::find_version(kernels::norm_mlp_versions(), "v12_mlp_split_down_paired").launch(a, stream);
}
bool mlp_paired_supports(const NormMlpArgs& a) {
  return kernels::find_version(kernels::norm_mlp_versions(), "v12_mlp_split_down_paired").takes(a);
}

TEST_F(GpuTest, NormMlpPairedHandsOverFeatures) {
  VersionRunner<NormMlpArgs> runner(std::vector<VersionUnderTest<NormMlpArgs>>{
      {"v12_mlp_split_down_paired", &launch_mlp_paired, &mlp_paired_supports, true}});
  enum class Stamps { kEqual, kLastLater, kRandom, kOneFarLater };
  struct Case {
    std::string name;
    int64_t hidden, inter;
    int32_t ctas;  // 0: one per SM
    bool required;
  };
  const std::vector<Case> cases = {
      {"qwen3-8b", kHidden, kInter, 0, true},
      {"5 CTAs (the middle one its own partner)", 256, 96, 5, false},
      {"inter=40 on every SM (blocks of 0-1 features)", 256, 40, 0, false},
  };
  for (const Case& c : cases) {
    const std::string base = "norm_mlp paired " + c.name + " hidden=" + str(c.hidden) + " inter=" + str(c.inter);
    const MlpProblem p = make_mlp_problem(base, c.hidden, c.inter);
    auto residual_d = to_device(p.in.residual);
    const auto weight_d = to_device(p.in.weight);
    const auto w_gate_up_d = to_device(p.w_gate_up);
    const auto w_down_t_d = to_device(p.w_down_t);
    for (const Stamps pattern : {Stamps::kEqual, Stamps::kLastLater, Stamps::kRandom, Stamps::kOneFarLater}) {
      const std::string label = base + " stamps=" + str(int(pattern));
      const auto partials_d = to_device(norm_partials(p.in.sum_sq, 1, 3, true, case_seed(label)));
      const MlpDeltaStart start = mlp_delta_start(c.hidden, 4, true, case_seed(label));
      std::vector<double> want, bound;
      mlp_delta_expectation(p, start, 1, want, bound);
      DeviceArray<float> delta_d(start.copies.size());
      NormMlpArgs args{as_bf16(residual_d),  partials_d.get(),    3,             as_bf16(weight_d), kEps,
                       as_bf16(w_gate_up_d), as_bf16(w_down_t_d), delta_d.get(), c.hidden,          c.inter};
      args.ctas = c.ctas;
      args.delta_copies = 4;
      const int64_t ctas = kernels::norm_mlp_ctas(args);
      std::vector<uint64_t> stamps = mlp_stamps(kMaxMlpStampCtas, 400, case_seed(label));  // (noise)
      for (int64_t i = 0; i < kMaxMlpStampCtas; ++i) {
        if (pattern == Stamps::kEqual) stamps[size_t(i)] = 1000000000000000ull;
        if (pattern == Stamps::kLastLater && i >= ctas / 2) stamps[size_t(i)] += 2000;
        if (pattern == Stamps::kRandom) stamps[size_t(i)] += (uint64_t(i) * 2654435761ull) % 5000;
      }
      if (pattern == Stamps::kOneFarLater) stamps[size_t(ctas - 1)] += 3000000000ull;  // 3 s: capped
      const auto stamps_d = to_device(stamps);
      constexpr uint64_t kPoison = 0xDEADBEEFDEADBEEFull;
      const std::vector<uint64_t> poison(size_t(kMaxMlpStampCtas), kPoison);
      DeviceArray<uint64_t> stamps_out_d(kMaxMlpStampCtas);
      args.lateness_in = stamps_d.get();
      args.lateness_out = stamps_out_d.get();
      runner.run(
          label, args,
          [&] {
            residual_d.upload(p.in.residual);
            delta_d.upload(start.copies);
            stamps_out_d.upload(poison);
          },
          [&](const std::string& run_label) {
            check_mlp_delta(delta_d.download(), start, ctas, want, bound, run_label);
            EXPECT_EQ(stamps_d.download(), stamps) << run_label << " | lateness_in is read only";
            const auto out = stamps_out_d.download();
            const auto [lo, hi] = std::minmax_element(out.begin(), out.begin() + ctas);
            EXPECT_TRUE(*lo != 0 && *hi != kPoison && *hi - *lo < 1000000000ull)
                << run_label << " | lateness_out: a CTA's stamp missing or implausible (" << *lo << " .. " << *hi
                << ")";
            for (int64_t i = ctas; i < kMaxMlpStampCtas; ++i)
              ASSERT_EQ(out[size_t(i)], kPoison) << run_label << " | lateness_out written past the last CTA at " << i;
          },
          c.required, {produced(residual_d), produced(partials_d), produced(delta_d), produced(stamps_d)});
    }
  }
}

// v7_mlp_with_o: the o projection first (NormMlpArgs::w_o), on random h, attention output, o_proj and a random
// pending delta (4 copies with an exact sum). h' = bf16(bf16(h + bf16(Σ delta)) + bf16(w_o · a)) is checked per
// element within one bf16 rounding of the fp32 dot product's error (gemm bound) on each side; the delta copies must
// then hold only the MLP's output, checked as NormMlpMatchesReference checks it with the oracle built from the
// kernel's own h' (so a rounding flip in h' cannot fail the MLP check), the normed input from its own Σ h'² in
// double. Every other version must refuse these args; o_ctas 0 (all CTAs) and fewer CTAs than the grid (the others
// only wait), 3 CTAs, CTAs without features, and the MLP groups issued during the o rows (all, 1, none).
TEST_F(GpuTest, NormMlpWithOMatchesReference) {
  const auto& versions = kernels::norm_mlp_versions();
  VersionRunner<NormMlpArgs> runner(versions);
  struct Case {
    std::string name;
    int64_t hidden, inter;
    int32_t ctas, o_ctas, copies, ahead;  // ahead: NormMlpArgs::o_ahead_groups
    bool required;
  };
  const std::vector<Case> cases = {
      {"qwen3-8b", kHidden, kInter, 0, 0, 4, -1, true},
      {"qwen3-8b o_ctas=100", kHidden, kInter, 0, 100, 4, 0, true},
      {"qwen3-8b ahead=1", kHidden, kInter, 0, 0, 4, 1, true},
      {"hidden=256 3 CTAs", 256, 96, 3, 2, 1, 1, false},
      {"inter=7 (CTAs without features)", 256, 7, 0, 5, 2, 0, false},
  };
  for (const Case& c : cases) {
    const std::string label = "norm_mlp_with_o " + c.name + " hidden=" + str(c.hidden) + " inter=" + str(c.inter) +
                              " ctas=" + str(c.ctas) + " o_ctas=" + str(c.o_ctas) + " copies=" + str(c.copies) +
                              " ahead=" + str(c.ahead);
    const uint64_t seed = case_seed(label);
    const NormInputs h_in = make_norm_inputs(label, 1, c.hidden);  // h (before o) and the norm weight
    const auto w_o = random_bf16(size_t(c.hidden * c.hidden), ref::mix_seed(seed, 11), -0.05f, 0.05f);
    const auto attn = random_bf16(size_t(c.hidden), ref::mix_seed(seed, 12), -2.0f, 2.0f);
    const MlpDeltaStart pending = mlp_delta_start(c.hidden, c.copies, true, ref::mix_seed(seed, 13));
    // h' by the oracle: the o row's dot product in double, its gemm bound, and the roundings around it.
    std::vector<double> h_mid(size_t(c.hidden)), y(size_t(c.hidden)), y_bound(size_t(c.hidden));
    for (int64_t r = 0; r < c.hidden; ++r) {
      double dot = 0, abs_dot = 0;
      for (int64_t k = 0; k < c.hidden; ++k) {
        const double t = double(ref::to_float(w_o[size_t(r * c.hidden + k)])) * ref::to_float(attn[size_t(k)]);
        dot += t;
        abs_dot += std::fabs(t);
      }
      y[size_t(r)] = dot;
      y_bound[size_t(r)] = kGemmAccumTol * abs_dot;
      h_mid[size_t(r)] =
          ref::round_bf16(ref::to_float(h_in.residual[size_t(r)]) + ref::round_bf16(pending.sum[size_t(r)]));
    }
    auto residual_d = to_device(h_in.residual);
    const auto weight_d = to_device(h_in.weight);
    const auto w_o_d = to_device(w_o);
    const auto attn_d = to_device(attn);
    const MlpProblem weights = make_mlp_problem(label + " weights", c.hidden, c.inter);  // its gate|up, down rows
    const auto w_gate_up_d = to_device(weights.w_gate_up);
    const auto w_down_t_d = to_device(weights.w_down_t);
    DeviceArray<float> delta_d(pending.copies.size());
    DeviceArray<float> o_partials_d(size_t(kernels::kMaxNormPartials));
    DeviceArray<uint32_t> sync_d(2);
    CUDA_CHECK(cudaMemset(sync_d.get(), 0, 2 * sizeof(uint32_t)));
    NormMlpArgs args{as_bf16(residual_d),  o_partials_d.get(),  1,        as_bf16(weight_d), kEps,
                     as_bf16(w_gate_up_d), as_bf16(w_down_t_d), delta_d.get(), c.hidden,      c.inter};
    args.ctas = c.ctas;
    args.delta_copies = c.copies;
    args.w_o = as_bf16(w_o_d);
    args.attention_out = as_bf16(attn_d);
    args.o_residual = as_bf16(residual_d);
    args.o_partials = o_partials_d.get();
    args.q_dim = c.hidden;
    args.o_ctas = c.o_ctas;
    args.o_ahead_groups = c.ahead;
    args.sync = sync_d.get();
    for (const auto& v : versions)
      if (std::string_view(v.name) != "v7_mlp_with_o" && v.supports) {
        EXPECT_FALSE(v.supports(args)) << label << " | " << v.name << " must refuse args with w_o";
      }
    const int64_t ctas = kernels::norm_mlp_ctas(args);
    runner.run(
        label, args,
        [&] {
          residual_d.upload(h_in.residual);
          delta_d.upload(pending.copies);
        },
        [&](const std::string& run_label) {
          const auto got_h = residual_d.download();
          Check h_check("residual h' (o rows added)");
          for (int64_t r = 0; r < c.hidden; ++r) {
            // Within the dot's bound, then one bf16 rounding of y and one of the sum, each at most half an ulp of
            // the larger magnitude (2^-8 relative) on either side.
            const double want = h_mid[size_t(r)] + y[size_t(r)];
            const double bound = y_bound[size_t(r)] + 0x1p-8 * (std::fabs(y[size_t(r)]) + std::fabs(want)) + 1e-30;
            h_check.near(r, got_h[size_t(r)], want, bound);
          }
          expect_ok(h_check, run_label);
          // The MLP from the kernel's own h'.
          const MlpProblem p =
              make_mlp_problem_for(norm_inputs_of(got_h, h_in.weight), label + " weights", c.hidden, c.inter);
          const MlpDeltaStart zero = mlp_delta_start(c.hidden, c.copies, false, 0);
          std::vector<double> want, bound;
          mlp_delta_expectation(p, zero, 1, want, bound);
          check_mlp_delta(delta_d.download(), zero, ctas, want, bound, run_label);
        },
        c.required, {produced(residual_d), produced(delta_d), produced(o_partials_d)});
  }
}

// v3_mlp_qkv_next launched twice back to back on the same stream (so in a graph the second is the first's PDL
// dependent) with the same args: the second launch finds the sync words the first left and adds its partials
// to the first's delta.
const kernels::KernelVersion<NormMlpArgs>& mlp_qkv_next_version() {
  return kernels::find_version(kernels::norm_mlp_versions(), "v3_mlp_qkv_next");
}
void launch_mlp_qkv_next_twice(const NormMlpArgs& a, cudaStream_t stream) {
  mlp_qkv_next_version().launch(a, stream);
  mlp_qkv_next_version().launch(a, stream);
}
bool mlp_qkv_next_supports(const NormMlpArgs& a) {
  return mlp_qkv_next_version().takes(a);
}

// The MLP sublayer with the next layer's QKV norm GEMV in the same launch (NormMlpArgs' next fields,
// v3_mlp_qkv_next). residual_delta as NormMlpMatchesReference (mlp_delta_expectation). next_out = w_next · x
// against an oracle built from the kernel's own delta, downloaded after the launch (as QkvAttentionODecode
// judges the residual from the kernel's own attention output): h' = bf16(residual + bf16(delta)) bit-exact
// from it, the norm with the inv_rms slack of NormGemvWithResidualDelta (the kernel sums h'² in its own fp32
// order), then the gemm bound plus Σ_i dev_i |w_ji| and relative Frobenius error <= 5e-3; next_out is
// poisoned before every launch and the entries past next_rows must stay poison. The residual is read only,
// and both sync words are zero after every launch. One sync buffer serves the whole test and is never reset:
// every launch relies on the one before it having put the words back. Each run also goes twice back to back
// with no host step between (directly, and in one graph with PDL: the delta then holds both launches'
// partials, next_out the second's). next_rows below the CTA count leaves CTAs without next rows, which must
// still arrive at the grid-wide wait (if one did not, the others would spin until spin_until_at_least traps
// and the context is lost). v1 and v2 must refuse args with w_next set; v3 args missing any next field, or
// with more CTAs than SMs. With delta_copies = 4 (which v3 must take on the Qwen3-8B shape) the delta is checked
// as NormMlpMatchesReference checks it (the sum of the copies; a copy no CTA adds to untouched) and next_out's
// oracle is built from the sum of the kernel's own copies.
TEST_F(GpuTest, NormMlpNextQkvMatchesReference) {
  const auto& versions = kernels::norm_mlp_versions();
  const auto& v1 = kernels::find_version(versions, "v1_mlp_split_down");
  const auto& v2 = kernels::find_version(versions, "v2_mlp_split_down_ring");
  const auto& v3 = mlp_qkv_next_version();
  VersionRunner<NormMlpArgs> runner(versions);
  VersionRunner<NormMlpArgs> twice_runner(std::vector<VersionUnderTest<NormMlpArgs>>{
      {"v3_mlp_qkv_next twice", &launch_mlp_qkv_next_twice, &mlp_qkv_next_supports, true}});
  struct Run {
    int32_t prewait_rows;  // -1: the version's default
    int64_t partials;      // norm partials the residual's producer left
    bool accumulate;       // the delta starts at random values instead of 0
    int64_t next_rows;
    int32_t delta_copies = 1;
  };
  struct Case {
    std::string name;
    int64_t hidden, inter;
    int32_t ctas;  // 0: one per SM
    std::vector<Run> runs;
    bool required;
  };
  // Next rows: the Qwen3 QKV rows (q_heads + 2 kv_heads) * 128 at the model's hidden size, and odd counts,
  // some below the CTA count (7 of one per SM, 3 of 5 CTAs).
  constexpr int64_t kQkvRows = (kQHeads + 2 * kKvHeads) * kHeadDim;  // 6144
  const std::vector<Case> cases = {
      {"qwen3-8b",
       kHidden,
       kInter,
       0,
       {{-1, 132, false, kQkvRows}, {-1, 3, true, kQkvRows}, {-1, 3, false, 7}, {-1, 3, true, kQkvRows, 4}},
       true},
      {"qwen3-0.6b", 1024, 3072, 0, {{-1, 3, false, 4096}, {0, 132, false, 7}, {8, 3, true, 200}}, false},
      {"hidden=5120 (two vectors a thread)", 5120, 1000, 0, {{-1, 3, false, 7168}, {-1, 3, true, 7}}, false},
      {"5 CTAs (uneven feature blocks)", 256, 96, 5, {{-1, 3, true, 3}, {-1, 3, false, 200}, {-1, 3, true, 200, 4}},
       false},
      {"3 CTAs (a delta copy no CTA adds to)", 256, 96, 3, {{-1, 3, true, 200, 4}, {-1, 132, false, 3, 4}},
       false},
      {"inter=7 (CTAs without features)", 256, 7, 0, {{-1, 3, false, 7}, {-1, 132, true, 200}}, false},
  };
  constexpr int64_t kGuard = 8;  // next_out entries past next_rows, poisoned: they must stay so
  DeviceArray<uint32_t> sync_d(2);
  const std::vector<uint32_t> zero_words = {0u, 0u};
  sync_d.upload(zero_words);
  for (const Case& c : cases) {
    const std::string base = "norm_mlp next_qkv " + c.name + " hidden=" + str(c.hidden) +
                             " inter=" + str(c.inter) + " ctas=" + str(c.ctas);
    const uint64_t seed = case_seed(base);
    const MlpProblem p = make_mlp_problem(base, c.hidden, c.inter);
    int64_t max_next_rows = 0;
    for (const Run& r : c.runs) max_next_rows = std::max(max_next_rows, r.next_rows);
    const auto next_weight = random_bf16(size_t(c.hidden), ref::mix_seed(seed, 6), -1.5f, 1.5f);  // (hidden)
    const auto w_next = random_bf16(size_t(max_next_rows * c.hidden), ref::mix_seed(seed, 7), -0.05f,
                                    0.05f);  // (max_next_rows, hidden): a run uses the first next_rows rows
    auto residual_d = to_device(p.in.residual);  // re-uploaded before every run: it must stay as it is
    const auto weight_d = to_device(p.in.weight);
    const auto w_gate_up_d = to_device(p.w_gate_up);
    const auto w_down_t_d = to_device(p.w_down_t);
    const auto next_weight_d = to_device(next_weight);
    const auto w_next_d = to_device(w_next);
    for (const Run& r : c.runs) {
      const std::string label = base + " next_rows=" + str(r.next_rows) +
                                " prewait_rows=" + str(r.prewait_rows) + " partials=" + str(r.partials) +
                                (r.accumulate ? " delta+=" : "") +
                                (r.delta_copies > 1 ? " delta_copies=" + str(r.delta_copies) : "");
      const auto partials_d = to_device(norm_partials(p.in.sum_sq, 1, r.partials, true, case_seed(label)));
      // What the delta holds before the launch.
      const MlpDeltaStart start = mlp_delta_start(c.hidden, r.delta_copies, r.accumulate, case_seed(label));
      DeviceArray<float> delta_d(start.copies.size());  // (delta_copies, hidden)
      DeviceArray<uint16_t> next_out_d(size_t(r.next_rows + kGuard));
      NormMlpArgs args{as_bf16(residual_d),  partials_d.get(),    r.partials,    as_bf16(weight_d), kEps,
                       as_bf16(w_gate_up_d), as_bf16(w_down_t_d), delta_d.get(), c.hidden,          c.inter};
      args.ctas = c.ctas;
      args.prewait_rows = r.prewait_rows;
      args.next_norm_weight = as_bf16(next_weight_d);
      args.w_next = as_bf16(w_next_d);
      args.next_out = as_bf16(next_out_d);
      args.next_rows = r.next_rows;
      args.sync = sync_d.get();
      args.delta_copies = r.delta_copies;
      const int64_t ctas = kernels::norm_mlp_ctas(args);

      EXPECT_FALSE(v1.supports(args)) << label << " | " << v1.name << " must refuse args with w_next set";
      EXPECT_FALSE(v2.supports(args)) << label << " | " << v2.name << " must refuse args with w_next set";
      const auto expect_v3_refuses = [&](const char* what, void (*edit)(NormMlpArgs&)) {
        NormMlpArgs a = args;
        edit(a);
        EXPECT_FALSE(v3.supports(a)) << label << " | " << v3.name << " must refuse args " << what;
      };
      expect_v3_refuses("without the next fields", [](NormMlpArgs& a) {
        a.next_norm_weight = nullptr;
        a.w_next = nullptr;
        a.next_out = nullptr;
        a.next_rows = 0;
        a.sync = nullptr;
      });
      expect_v3_refuses("without w_next", [](NormMlpArgs& a) { a.w_next = nullptr; });
      expect_v3_refuses("without next_norm_weight", [](NormMlpArgs& a) { a.next_norm_weight = nullptr; });
      expect_v3_refuses("without next_out", [](NormMlpArgs& a) { a.next_out = nullptr; });
      expect_v3_refuses("without sync", [](NormMlpArgs& a) { a.sync = nullptr; });
      expect_v3_refuses("with next_rows = 0", [](NormMlpArgs& a) { a.next_rows = 0; });
      expect_v3_refuses("with more CTAs than SMs (not all resident for the grid-wide wait)",
                        [](NormMlpArgs& a) { a.ctas = int32_t(kernels::device_sm_count()) + 1; });
      if (!v3.supports(args)) {
        if (c.required) ADD_FAILURE() << label << " | " << v3.name << " refuses the Qwen3-8B shape";
        std::printf("[ skipped  ] %s | %s: supports() false on this device\n", label.c_str(), v3.name);
      }

      for (const int launches : {1, 2}) {
        std::vector<double> want, bound;
        mlp_delta_expectation(p, start, launches, want, bound);
        const auto check = [&](const std::string& run_label) {
          const auto words = sync_d.download();
          if (words[0] != 0 || words[1] != 0) {
            ADD_FAILURE() << run_label << " | sync words left at " << words[0] << ", " << words[1]
                          << " (must be 0, 0 for the next launch)";
            sync_d.upload(zero_words);  // so that the later runs do not wait on them
          }
          // The delta the kernel left, summed over its copies as the readers sum them.
          const auto got_delta = check_mlp_delta(delta_d.download(), start, ctas, want, bound, run_label);
          const auto got_residual = residual_d.download();
          Check residual("residual (read only)");
          for (size_t i = 0; i < got_residual.size(); ++i)
            residual.exact(int64_t(i), got_residual[i], p.in.residual[i]);
          expect_ok(residual, run_label);

          // The oracle of next_out from the delta the kernel left (and read after its grid-wide wait).
          if (!std::all_of(got_delta.begin(), got_delta.end(), [](float v) { return std::isfinite(v); })) {
            ADD_FAILURE() << run_label << " | next_out not checked: the delta is not finite";
            return;
          }
          std::vector<uint16_t> normed(size_t(c.hidden));
          std::vector<float> dev(size_t(c.hidden));
          delta_normed(p.in.residual.data(), got_delta.data(), next_weight, c.hidden, normed.data(),
                       dev.data());
          std::vector<float> exact(size_t(r.next_rows)), abs_sum(exact.size());
          const std::vector<int64_t> row0 = {0};
          ref::gemm(normed.data(), w_next.data(), r.next_rows, c.hidden, row0, exact.data(), abs_sum.data());
          const std::vector<double> moved = moved_by_dev(dev, w_next, 1, r.next_rows, c.hidden);
          const auto got = next_out_d.download();
          Check out("next_out");
          for (int64_t j = 0; j < r.next_rows; ++j) {
            const double e = exact[size_t(j)];
            out.near(j, got[size_t(j)], e,
                     kGemmRelTol * std::fabs(e) + kGemmAccumTol * abs_sum[size_t(j)] + moved[size_t(j)]);
          }
          for (int64_t j = r.next_rows; j < r.next_rows + kGuard; ++j) out.untouched(j, got[size_t(j)]);
          expect_ok(out, run_label, kGemmFrobenius);
        };
        (launches == 1 ? runner : twice_runner)
            .run(label + (launches == 1 ? "" : " twice back to back"), args,
                 [&] {
                   residual_d.upload(p.in.residual);
                   delta_d.upload(start.copies);
                   next_out_d.poison();
                 },
                 check, c.required, {produced(residual_d), produced(partials_d), produced(delta_d)});
      }
    }
  }
}

// norm_mlp v19 -> norm_gemv v25 through a counter (NormMlpArgs::handoff_signal, NormGemvArgs::handoff) at the
// engine's shape: three MLP -> QKV GEMV pairs back to back in one stream with PDL on (as the engine's graph runs
// them), no host step between, the words zeroed once before. After them the delta must be three MLP launches'
// (mlp_delta_expectation), the QKV output the norm GEMV of residual + that delta within NormGemvWithResidualDelta's
// bound (a QKV GEMV that went on before every MLP CTA had added would norm a smaller delta: with 132 CTAs each
// adding ~1/132 of it, one missing CTA moves the normed input by far more than the bound), y poisoned before, and
// both words zero again (the last QKV CTA resets them; the next pair relies on it). With and without a pause
// between polls, with one and two delta copies. v25 must refuse a hand-off without producers or with a negative
// pause, and v19 a signal at a hidden size v15 runs v10 on (v10 does not count).
TEST_F(GpuTest, NormMlpHandsOffToNormGemv) {
  const auto& mlp = kernels::find_version(kernels::norm_mlp_versions(), "v19_mlp_split_down_handoff");
  const auto& qkv = kernels::find_version(kernels::norm_gemv_versions(), "v25_gemv_norm_ring_handoff");
  EXPECT_TRUE(mlp.handoff && qkv.handoff) << "both versions must say they take part in the hand-off";
  constexpr int64_t kQkvRows = (kQHeads + 2 * kKvHeads) * kHeadDim;  // 6144
  constexpr int kPairs = 3;
  const std::string base = "norm_mlp v19 -> norm_gemv v25 hand-off qwen3-8b";
  const MlpProblem p = make_mlp_problem(base, kHidden, kInter);
  const uint64_t seed = case_seed(base);
  const auto qkv_norm_weight = random_bf16(size_t(kHidden), ref::mix_seed(seed, 6), -1.5f, 1.5f);
  const auto w_qkv = random_bf16(size_t(kQkvRows * kHidden), ref::mix_seed(seed, 7), -0.05f, 0.05f);
  const auto residual_d = to_device(p.in.residual);
  const auto weight_d = to_device(p.in.weight);
  const auto w_gate_up_d = to_device(p.w_gate_up);
  const auto w_down_t_d = to_device(p.w_down_t);
  const auto qkv_norm_weight_d = to_device(qkv_norm_weight);
  const auto w_qkv_d = to_device(w_qkv);
  const auto partials_d = to_device(norm_partials(p.in.sum_sq, 1, 132, true, seed));
  DeviceArray<uint32_t> handoff_d(2);
  const std::vector<uint32_t> zero_words = {0u, 0u};
  handoff_d.upload(zero_words);
  struct Run {
    int32_t delta_copies, poll_ns;
  };
  for (const Run& r : {Run{1, 0}, Run{2, 200}, Run{2, 0}}) {
    const std::string label = base + " delta_copies=" + str(r.delta_copies) + " poll_ns=" + str(r.poll_ns) +
                              " x" + str(kPairs) + " (PDL)";
    const MlpDeltaStart start = mlp_delta_start(kHidden, r.delta_copies, false, case_seed(label));
    DeviceArray<float> delta_d(start.copies.size());  // (delta_copies, hidden)
    delta_d.upload(start.copies);
    DeviceArray<uint16_t> y_d(static_cast<size_t>(kQkvRows));
    y_d.poison();
    NormMlpArgs m{as_bf16(residual_d),  partials_d.get(),    132,           as_bf16(weight_d), kEps,
                  as_bf16(w_gate_up_d), as_bf16(w_down_t_d), delta_d.get(), kHidden,           kInter};
    m.delta_copies = r.delta_copies;
    m.handoff_signal = handoff_d.get();
    NormGemvArgs g{as_bf16(residual_d), partials_d.get(), 132,     as_bf16(qkv_norm_weight_d), kEps,
                   as_bf16(w_qkv_d),    as_bf16(y_d),     1,       kQkvRows,                   kHidden};
    g.residual_delta = delta_d.get();
    g.delta_copies = r.delta_copies;
    g.handoff = handoff_d.get();
    g.handoff_producers = int32_t(kernels::norm_mlp_ctas(m));
    g.handoff_poll_ns = r.poll_ns;
    {
      NormGemvArgs bad = g;
      bad.handoff_producers = 0;
      EXPECT_FALSE(qkv.supports(bad)) << label << " | v25 must refuse a hand-off without producers";
      bad = g;
      bad.handoff_poll_ns = -1;
      EXPECT_FALSE(qkv.supports(bad)) << label << " | v25 must refuse a negative pause";
      NormMlpArgs other = m;
      other.hidden = 1024;
      other.inter = 3072;
      EXPECT_FALSE(mlp.supports(other)) << label << " | v19 must refuse a signal where v15 runs v10";
    }
    if (!mlp.supports(m) || !qkv.supports(g)) {
      ADD_FAILURE() << label << " | v19 or v25 refuses the Qwen3-8B shape";
      continue;
    }
    kernels::set_programmatic_dependent_launch(true);
    for (int i = 0; i < kPairs; ++i) {
      mlp.launch(m, test_stream());
      qkv.launch(g, test_stream());
    }
    kernels::set_programmatic_dependent_launch(false);
    CUDA_OK(cudaStreamSynchronize(test_stream()));
    CUDA_OK(cudaGetLastError());
    std::vector<double> want, bound;
    mlp_delta_expectation(p, start, kPairs, want, bound);
    const std::vector<float> delta = check_mlp_delta(delta_d.download(), start, g.handoff_producers, want, bound,
                                                     label);
    std::vector<uint16_t> normed(static_cast<size_t>(kHidden));
    std::vector<float> dev(static_cast<size_t>(kHidden));
    delta_normed(p.in.residual.data(), delta.data(), qkv_norm_weight, kHidden, normed.data(), dev.data());
    std::vector<float> exact(static_cast<size_t>(kQkvRows)), abs_sum(exact.size());
    const std::vector<int64_t> row0 = {0};
    ref::gemm(normed.data(), w_qkv.data(), kQkvRows, kHidden, row0, exact.data(), abs_sum.data());
    const std::vector<double> moved = moved_by_dev(dev, w_qkv, 1, kQkvRows, kHidden);
    const auto got = y_d.download();
    Check y("y (the last QKV GEMV's)");
    for (int64_t j = 0; j < kQkvRows; ++j) {
      const double e = exact[size_t(j)];
      y.near(j, got[size_t(j)], e,
             kGemmRelTol * std::fabs(e) + kGemmAccumTol * abs_sum[size_t(j)] + moved[size_t(j)]);
    }
    expect_ok(y, label, kGemmFrobenius);
    EXPECT_EQ(handoff_d.download(), zero_words) << label << " | the hand-off words must be zero again";
  }
}

// ---- 08 decode layers: every layer of a batch-1 decode step in one launch ---------------------------------
// The reference is the unfused layer of reference.h at transformers' rounding points: rmsnorm, the QKV GEMV
// rounded to bf16, QK-norm and RoPE of q and of the new k, k and v into the layer's cache at (slot,
// position), attention over keys [0, position] rounded to bf16, h = bf16(h + bf16(W_o · attn)), rmsnorm,
// gate|up rounded to bf16, swiglu, h = bf16(h + bf16(W_down · act)).
//
// Bound. The kernel's fp32 sums (in another order than the reference's double ones) move a bf16 rounding by
// one ulp here and there; every later norm and GEMV spreads such a flip into small differences of what
// follows, so the drift grows with the layers crossed, in ulps of the value itself and of the values added
// into it (of the scale of the tensor's rms). With n the layers before a value:
//   h after all layers (n = layers): |d| <= (n + 1) * 2^-5 * (|ref| + rms(h))
//   new k / v rows of layer n:       |d| <= (n + 2) * 2^-5 * (|ref| + rms(the new row))
// (one step more for the rows: the layer's own QKV GEMV, and for k a QK-norm over only head_dim values and
// RoPE's cancellations), and h's relative Frobenius error <= (layers + 1) * 2^-7. Calibration: a CPU
// emulation of the kernel's fp32 order (per-thread fma chains, warp butterflies, 8 warps in turn; fp32 norms
// and softmax) against this reference, 300 seeds of the small cases and 32 of the Qwen3-8B one, reached |d| /
// (|ref| + rms) = 0.004 / 0.019 / 0.019 for the new rows of layers 0 / 1 / 2, 0.018 for h after 3 layers and
// 0.012 after 2, and Frobenius 0.0072 / 0.0055 after 3 / 2 layers: at least 4x below the bounds. The bugs the
// test is for move h by O(1) (a wrong row, layer, position or slot, a needle key dropped or counted twice, a
// NaN row read).
constexpr double kDecodeLayerTol = 0x1p-5, kDecodeLayerFrobenius = 0x1p-7;
constexpr double kNeedleScore = 8.0;  // a needle's score against each q head of its group (others: about +-1)

struct DecodeLayersCase {
  std::string name;
  int64_t layers, hidden, q_heads, kv_heads, head_dim, inter;
  int32_t position;
  int64_t slot, num_slots, max_ctx;  // num_slots == 1: slots = nullptr (slot 0)
  int64_t max_position;              // the host bound: >= position, < max_ctx
  bool needles;  // keys that dominate the softmax, at tile and split edges (needs context)
};

// The op's shape fields of a case, pointers null: enough for supports().
kernels::DecodeLayersArgs decode_layers_shape(const DecodeLayersCase& c) {
  kernels::DecodeLayersArgs a{};
  a.num_layers = c.layers;
  a.hidden = c.hidden;
  a.q_heads = c.q_heads;
  a.kv_heads = c.kv_heads;
  a.head_dim = c.head_dim;
  a.inter = c.inter;
  a.max_ctx = c.max_ctx;
  a.layer_cache_elems = c.num_slots * c.max_ctx * c.kv_heads * c.head_dim;
  a.attention_factor = 1.0f;
  a.eps = kEps;
  a.scale = 1.0f / std::sqrt(float(c.head_dim));
  a.max_position = c.max_position;
  return a;
}

// Rows [0, position) where a tiled or split-KV attention has an edge: the tile edges of kTileEdges, the edges
// of an even split of the position + 1 keys into 2, 4, 8 or 16 chunks (rounded up), the first two keys, the
// key before the new one, and three seeded random rows (other runs probe other keys).
std::set<int64_t> needle_rows(int32_t position, uint64_t seed) {
  std::set<int64_t> rows = {0, 1, int64_t(position) - 1};
  for (const int32_t e : kTileEdges) rows.insert(e);
  const int64_t keys = int64_t(position) + 1;
  for (const int64_t splits : {2, 4, 8, 16}) {
    const int64_t chunk = (keys + splits - 1) / splits;
    for (int64_t i = 1; i < splits; ++i) rows.insert({i * chunk - 1, i * chunk});
  }
  for (uint64_t r = 0; r < 3; ++r) rows.insert(int64_t(ref::mix_seed(seed, r) % uint64_t(position)));
  std::erase_if(rows, [&](int64_t r) { return r < 0 || r >= position; });
  return rows;
}

// The least-norm key k with q_h · k = dot for each of `count` q heads (count, head_dim): k = Qᵀ c with
// (Q Qᵀ) c = dot, by elimination on the small Gram matrix (positive definite: random heads are independent).
std::vector<double> key_matching(const uint16_t* q, int64_t count, int64_t head_dim, double dot) {
  std::vector<double> gram(size_t(count * count)), coef(size_t(count), dot);
  for (int64_t a = 0; a < count; ++a)
    for (int64_t b = 0; b < count; ++b) {
      double s = 0;
      for (int64_t d = 0; d < head_dim; ++d)
        s += double(ref::to_float(q[a * head_dim + d])) * double(ref::to_float(q[b * head_dim + d]));
      gram[size_t(a * count + b)] = s;
    }
  for (int64_t p = 0; p < count; ++p)
    for (int64_t r = p + 1; r < count; ++r) {
      const double f = gram[size_t(r * count + p)] / gram[size_t(p * count + p)];
      for (int64_t j = p; j < count; ++j) gram[size_t(r * count + j)] -= f * gram[size_t(p * count + j)];
      coef[size_t(r)] -= f * coef[size_t(p)];
    }
  for (int64_t p = count - 1; p >= 0; --p) {
    double s = coef[size_t(p)];
    for (int64_t j = p + 1; j < count; ++j) s -= gram[size_t(p * count + j)] * coef[size_t(j)];
    coef[size_t(p)] = s / gram[size_t(p * count + p)];
  }
  std::vector<double> k(size_t(head_dim), 0.0);
  for (int64_t a = 0; a < count; ++a)
    for (int64_t d = 0; d < head_dim; ++d)
      k[size_t(d)] += coef[size_t(a)] * ref::to_float(q[a * head_dim + d]);
  return k;
}

// One layer's weights on the device.
struct DecodeLayerDevice {
  DeviceArray<uint16_t> input_norm, post_norm, q_norm, k_norm;  // (hidden), (hidden), (head_dim), (head_dim)
  // (q_dim + 2 kv_dim, hidden), (hidden, q_dim), (2 inter, hidden), (hidden, inter)
  DeviceArray<uint16_t> wqkv, wo, w_gate_up, w_down;
  kernels::DecodeLayerWeights pointers() const {
    return {as_bf16(input_norm), as_bf16(post_norm), as_bf16(q_norm),    as_bf16(k_norm),
            as_bf16(wqkv),       as_bf16(wo),        as_bf16(w_gate_up), as_bf16(w_down)};
  }
};

// Inputs on fresh random values, the reference, one run per version (direct, then graph-replayed with PDL and
// a late h / position): h within the bound; every layer's new k and v rows within the bound and every other
// cache row unchanged (rows past the position hold NaN, so a read of one poisons h); the sync words zero
// after each launch; the second launch (on the words the first one left) bit-identical to the first.
void run_decode_layers_case(VersionRunner<kernels::DecodeLayersArgs>& runner, const DecodeLayersCase& c) {
  const int64_t D = c.head_dim, q_dim = c.q_heads * D, kv_dim = c.kv_heads * D, qkv_n = q_dim + 2 * kv_dim;
  const int64_t group = c.q_heads / c.kv_heads, hidden = c.hidden, inter = c.inter;
  const std::string label = "decode_layers " + c.name + " layers=" + str(c.layers) +
                            " hidden=" + str(hidden) + " heads=" + str(c.q_heads) + "/" + str(c.kv_heads) +
                            " head_dim=" + str(D) + " inter=" + str(inter) + " position=" + str(c.position) +
                            " slot=" + str(c.slot) + " max_position=" + str(c.max_position);
  const uint64_t seed = case_seed(label);
  const CacheLayout layout{c.num_slots, c.max_ctx, c.kv_heads, D};
  const int64_t layer_elems = layout.size(), new_row = layout.row_offset(c.slot, c.position);
  const float scale = 1.0f / std::sqrt(float(D));
  const auto inv_freq = make_inv_freq(D, 1e6);
  std::vector<float> cos(size_t(D / 2)), sin(size_t(D / 2));
  ref::rope_cos_sin(c.position, inv_freq, 1.0f, cos.data(), sin.data());
  const std::vector<int32_t> positions = {c.position}, slots = {int32_t(c.slot)};
  const std::vector<int64_t> row0 = {0};

  const auto h_in = random_bf16(size_t(hidden), ref::mix_seed(seed, 1), -2.0f, 2.0f);  // (hidden)
  std::vector<uint16_t> h = h_in;                                                      // the reference
  // (layers, slots, max_ctx, kv_heads, head_dim): as uploaded, and as the kernel must leave them.
  std::vector<uint16_t> k_in(size_t(c.layers * layer_elems)), v_in(k_in.size());
  std::vector<uint16_t> k_want, v_want;
  k_want.reserve(k_in.size());
  v_want.reserve(v_in.size());
  std::vector<DecodeLayerDevice> weights_d(size_t(c.layers));
  std::vector<uint16_t> xn(static_cast<size_t>(hidden)), qkv(static_cast<size_t>(qkv_n)),
      q(static_cast<size_t>(q_dim)), attn(static_cast<size_t>(q_dim));
  std::vector<uint16_t> act(static_cast<size_t>(inter)), head(static_cast<size_t>(D));
  std::vector<float> y, y_abs, attn_exact(static_cast<size_t>(q_dim)), attn_abs(static_cast<size_t>(q_dim));
  auto gemv = [&](const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, int64_t n, int64_t k) {
    y.resize(size_t(n));
    y_abs.resize(size_t(n));
    ref::gemm(x.data(), w.data(), n, k, row0, y.data(), y_abs.data());
  };
  auto add_into_h = [&]() {  // h = bf16(h + bf16(y))
    for (int64_t i = 0; i < hidden; ++i)
      h[size_t(i)] = ref::to_bf16(ref::to_float(h[size_t(i)]) + ref::round_bf16(y[size_t(i)]));
  };

  for (int64_t l = 0; l < c.layers; ++l) {
    // Unit-variance GEMV outputs: weights uniform in +-sqrt(3 / k) against inputs of rms ~1.
    const uint64_t ls = ref::mix_seed(seed, 100 + uint64_t(l));
    auto uniform = [&](int64_t count, uint64_t salt, float bound) {
      return random_bf16(size_t(count), ref::mix_seed(ls, salt), -bound, bound);
    };
    const auto input_norm = random_bf16(size_t(hidden), ref::mix_seed(ls, 1), 0.5f, 1.5f);
    const auto post_norm = random_bf16(size_t(hidden), ref::mix_seed(ls, 2), 0.5f, 1.5f);
    const auto q_norm = random_bf16(size_t(D), ref::mix_seed(ls, 3), 0.5f, 1.5f);
    const auto k_norm = random_bf16(size_t(D), ref::mix_seed(ls, 4), 0.5f, 1.5f);
    const auto wqkv = uniform(qkv_n * hidden, 5, std::sqrt(3.0f / float(hidden)));
    const auto w_gate_up = uniform(2 * inter * hidden, 6, std::sqrt(3.0f / float(hidden)));
    const auto w_down = uniform(hidden * inter, 7, std::sqrt(3.0f / float(inter)));

    // qkv, then q and the new k (QK-norm, RoPE) and v.
    ref::rmsnorm(h.data(), input_norm.data(), 1, hidden, kEps, xn.data());
    gemv(xn, wqkv, qkv_n, hidden);
    for (int64_t i = 0; i < qkv_n; ++i) qkv[size_t(i)] = ref::to_bf16(y[size_t(i)]);
    uint16_t* k_layer = k_in.data() + l * layer_elems;
    uint16_t* v_layer = v_in.data() + l * layer_elems;
    // The cache before the step. The slot's earlier rows: magnitudes like normed, rotated keys and like v
    // rows. Other slots: garbage a wrong slot would read. The new row and every row after it: NaN (never
    // read; the new row must come from qkv).
    const auto k_rand = uniform(layer_elems, 10, 1.5f), v_rand = uniform(layer_elems, 11, 1.75f);
    const auto garbage = uniform(layer_elems, 12, 30.0f);
    for (int64_t i = 0; i < layer_elems; ++i) {
      const bool own_slot = i >= layout.row_offset(c.slot, 0) && i < layout.row_offset(c.slot + 1, 0);
      k_layer[i] = own_slot ? (i < new_row ? k_rand[size_t(i)] : kPoisonBf16) : garbage[size_t(i)];
      v_layer[i] = own_slot ? (i < new_row ? v_rand[size_t(i)] : kPoisonBf16)
                            : garbage[size_t((i * 7 + 3) % layer_elems)];
    }
    std::vector<uint16_t> k_new(static_cast<size_t>(kv_dim)), v_new(qkv.begin() + q_dim + kv_dim, qkv.end());
    for (int64_t hd = 0; hd < c.q_heads + c.kv_heads; ++hd) {
      const bool is_q = hd < c.q_heads;
      ref::rmsnorm(qkv.data() + hd * D, (is_q ? q_norm : k_norm).data(), 1, D, kEps, head.data());
      ref::rope_head(head.data(), D, cos.data(), sin.data());
      std::copy(head.begin(), head.end(), (is_q ? q.begin() + hd * D : k_new.begin() + (hd - c.q_heads) * D));
    }
    if (c.needles) {
      // Needle keys score kNeedleScore against every q head of their group (the reference's q; the kernel's
      // differs by rounding flips, a few 1e-3 of a score): they carry most of the softmax, so a needle
      // dropped or counted twice moves the attention output by a large fraction.
      const std::set<int64_t> rows = needle_rows(c.position, ref::mix_seed(ls, 13));
      const auto noise = uniform(int64_t(rows.size()) * kv_dim, 14, 0.1f);
      for (int64_t g = 0; g < c.kv_heads; ++g) {
        const auto key = key_matching(q.data() + g * group * D, group, D, kNeedleScore / double(scale));
        int64_t n = 0;
        for (const int64_t r : rows) {
          uint16_t* dst = k_layer + layout.row_offset(c.slot, r) + g * D;
          for (int64_t d = 0; d < D; ++d)
            dst[d] = ref::to_bf16(float(key[size_t(d)]) +
                                  ref::to_float(noise[size_t((n * c.kv_heads + g) * D + d)]));
          ++n;
        }
      }
    }
    k_want.insert(k_want.end(), k_layer, k_layer + layer_elems);
    v_want.insert(v_want.end(), v_layer, v_layer + layer_elems);
    uint16_t* k_want_layer = k_want.data() + l * layer_elems;
    uint16_t* v_want_layer = v_want.data() + l * layer_elems;
    std::copy(k_new.begin(), k_new.end(), k_want_layer + new_row);
    std::copy(v_new.begin(), v_new.end(), v_want_layer + new_row);

    ref::attention({1, c.q_heads, c.kv_heads, D, c.max_ctx, scale}, q.data(), k_want_layer, v_want_layer,
                   positions, slots, attn_exact.data(), attn_abs.data());
    double attn_sq = 0;
    for (int64_t i = 0; i < q_dim; ++i) {
      attn[size_t(i)] = ref::to_bf16(attn_exact[size_t(i)]);
      attn_sq += double(attn_exact[size_t(i)]) * double(attn_exact[size_t(i)]);
    }
    // W_o scaled for a unit-variance output whatever the context: an average over many random values is small
    // and would hardly move h, hiding the attention under the bound.
    const double attn_rms = std::max(std::sqrt(attn_sq / double(q_dim)), 1e-3);
    const auto wo = uniform(hidden * q_dim, 8, float(std::sqrt(3.0 / double(q_dim)) / attn_rms));
    gemv(attn, wo, hidden, q_dim);
    add_into_h();

    ref::rmsnorm(h.data(), post_norm.data(), 1, hidden, kEps, xn.data());
    gemv(xn, w_gate_up, 2 * inter, hidden);
    for (int64_t i = 0; i < inter; ++i)
      act[size_t(i)] = ref::swiglu(ref::to_bf16(y[size_t(i)]), ref::to_bf16(y[size_t(inter + i)]));
    gemv(act, w_down, hidden, inter);
    add_into_h();

    DecodeLayerDevice& dev = weights_d[size_t(l)];
    dev.input_norm = to_device(input_norm);
    dev.post_norm = to_device(post_norm);
    dev.q_norm = to_device(q_norm);
    dev.k_norm = to_device(k_norm);
    dev.wqkv = to_device(wqkv);
    dev.wo = to_device(wo);
    dev.w_gate_up = to_device(w_gate_up);
    dev.w_down = to_device(w_down);
    CUDA_OK(cudaStreamSynchronize(test_stream()));  // the host weights are freed at the end of this iteration
  }

  std::vector<kernels::DecodeLayerWeights> pointers;
  for (const DecodeLayerDevice& dev : weights_d) pointers.push_back(dev.pointers());
  const auto layers_d = to_device(pointers);
  DeviceArray<uint16_t> h_d(h_in.size()), qkv_d(static_cast<size_t>(qkv_n)),
      attn_d(static_cast<size_t>(q_dim)), act_d(static_cast<size_t>(inter));
  DeviceArray<uint16_t> k_d(k_in.size()), v_d(v_in.size());
  const auto positions_d = to_device(positions);
  const auto slots_d = to_device(slots);
  const auto inv_freq_d = to_device(inv_freq);
  DeviceArray<float> workspace_d(size_t(kernels::decode_layers_workspace_floats(c.kv_heads, D)));
  DeviceArray<uint32_t> sync_d(size_t(kernels::decode_layers_sync_words(c.layers, c.kv_heads)));
  // Zeroed once, here: every later launch runs on the words the previous one left.
  CUDA_OK(cudaMemsetAsync(sync_d.get(), 0, sync_d.bytes(), test_stream()));

  kernels::DecodeLayersArgs args = decode_layers_shape(c);
  args.layers = layers_d.get();
  args.h = as_bf16(h_d);
  args.qkv = as_bf16(qkv_d);
  args.attn = as_bf16(attn_d);
  args.act = as_bf16(act_d);
  args.k_cache = as_bf16(k_d);
  args.v_cache = as_bf16(v_d);
  args.positions = positions_d.get();
  args.slots = c.num_slots > 1 ? slots_d.get() : nullptr;
  args.inv_freq = inv_freq_d.get();
  args.workspace = workspace_d.get();
  args.sync = sync_d.get();

  double h_sq = 0;
  for (const uint16_t v : h) h_sq += double(ref::to_float(v)) * double(ref::to_float(v));
  const double h_rms = std::sqrt(h_sq / double(hidden));
  const double h_tol = double(c.layers + 1) * kDecodeLayerTol;
  std::map<std::string, std::vector<uint16_t>> first_run;  // per version: h and the new cache rows
  std::vector<Produced> produced_inputs = {produced(h_d), produced(positions_d, "positions")};
  if (args.slots) produced_inputs.push_back(produced(slots_d, "slots"));
  runner.run(
      label, args,
      [&] {
        h_d.upload(h_in);
        k_d.upload(k_in);
        v_d.upload(v_in);
        qkv_d.poison();
        attn_d.poison();
        act_d.poison();
        workspace_d.poison();
      },
      [&](const std::string& run_label) {
        const auto sync = sync_d.download();
        const auto nonzero = std::count_if(sync.begin(), sync.end(), [](uint32_t w) { return w != 0; });
        EXPECT_EQ(nonzero, 0) << run_label << " | " << nonzero << " of " << sync.size()
                              << " sync words not left zero: the next launch would start from them";

        const auto got_h = h_d.download();
        Check check_h("h");
        for (int64_t i = 0; i < hidden; ++i) {
          const double want = ref::to_float(h[size_t(i)]);
          check_h.near(i, got_h[size_t(i)], want, h_tol * (std::fabs(want) + h_rms));
        }
        expect_ok(check_h, run_label, double(c.layers + 1) * kDecodeLayerFrobenius);

        const auto got_k = k_d.download(), got_v = v_d.download();
        std::vector<uint16_t> outputs = got_h;
        for (int64_t l = 0; l < c.layers; ++l) {
          const double tol = double(l + 2) * kDecodeLayerTol;
          for (const bool is_k : {true, false}) {
            const auto& got = is_k ? got_k : got_v;
            const auto& want = is_k ? k_want : v_want;
            const int64_t base = l * layer_elems;
            double sq = 0;
            for (int64_t i = new_row; i < new_row + kv_dim; ++i)
              sq += double(ref::to_float(want[size_t(base + i)])) *
                    double(ref::to_float(want[size_t(base + i)]));
            const double rms = std::sqrt(sq / double(kv_dim));
            Check check((is_k ? "k_cache layer " : "v_cache layer ") + str(l));
            for (int64_t i = 0; i < layer_elems; ++i) {
              const uint16_t got_bits = got[size_t(base + i)], want_bits = want[size_t(base + i)];
              if (i >= new_row && i < new_row + kv_dim) {
                const double w = ref::to_float(want_bits);
                check.near(base + i, got_bits, w, tol * (std::fabs(w) + rms));
              } else {
                check.exact(base + i, got_bits, want_bits);  // rows other than the new one: unchanged
              }
            }
            expect_ok(check, run_label);
            outputs.insert(outputs.end(), got.begin() + base + new_row,
                           got.begin() + base + new_row + kv_dim);
          }
        }

        // The version's name sits between the case label and " (mode)".
        const size_t begin = label.size() + 3;
        const std::string version = run_label.substr(begin, run_label.find(" (", begin) - begin);
        const auto first = first_run.find(version);
        if (first == first_run.end()) {
          first_run.emplace(version, std::move(outputs));
        } else {
          int64_t differ = 0;
          for (size_t i = 0; i < outputs.size(); ++i) differ += outputs[i] != first->second[i];
          EXPECT_EQ(differ, 0) << run_label << " | " << differ
                               << " values of h and the new cache rows differ from the previous launch's "
                                  "(same inputs; the sync words it left were reused)";
        }
      },
      true, produced_inputs);
}

TEST_F(GpuTest, DecodeLayersMatchReference) {
  // (a) three layers of a small shape; (b) GQA group 8, head_dim 64, a long context cut into 8 splits (the
  // bound 2047 sizes them), in slot 1 of 2; (c) the Qwen3-8B layer shape with a loose bucket bound (1023 for
  // position 300); (d) fewer o / down rows and gate|up pairs than SMs, and splits without keys (3 keys, bound
  // 2047).
  std::vector<DecodeLayersCase> cases = {
      {"small", 3, 256, 8, 2, 128, 384, 37, 0, 1, 64, 37, true},
      {"group 8 head_dim 64 long context", 2, 192, 8, 1, 64, 320, 1500, 1, 2, 2048, 2047, true},
      {"qwen3-8b", 2, kHidden, kQHeads, kKvHeads, kHeadDim, kInter, 300, 0, 1, 2048, 1023, true},
      {"fewer rows than SMs, empty splits", 2, 64, 16, 4, 128, 96, 2, 0, 1, 2048, 2047, false},
  };
  if (quick_mode()) cases[2].layers = 1;  // 0.4 GB of weights and a slow CPU reference per layer
  const auto& versions = kernels::decode_layers_versions();
  const bool any = std::any_of(versions.begin(), versions.end(), [&](const auto& v) {
    return v.takes(decode_layers_shape(cases.front()));
  });
  if (!any) {
    int major = 0, minor = 0;
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    GTEST_SKIP() << "no decode_layers version supports this GPU (compute capability " << major << "." << minor
                 << "; v1_decode_layers_persistent needs sm_90 and one CTA resident per SM)";
  }
  VersionRunner<kernels::DecodeLayersArgs> runner(versions);
  for (const DecodeLayersCase& c : cases) run_decode_layers_case(runner, c);
}

// ---- 07 sampling ------------------------------------------------------------------------------------------
DeviceSampling device_params(const ref::SamplingSpec& spec, uint64_t seed) {
  DeviceSampling p{};
  p.temperature = float(spec.temperature);
  p.top_k = int32_t(spec.top_k);
  p.top_p = float(spec.top_p);
  p.min_p = float(spec.min_p);
  p.repetition_penalty = float(spec.repetition_penalty);
  p.presence_penalty = float(spec.presence_penalty);
  p.frequency_penalty = float(spec.frequency_penalty);
  p.seed = seed;
  return p;
}

// Device buffers of one sampling launch over (rows, vocab) logits.
struct SampleBuffers {
  int64_t rows, vocab;
  bool penalties;
  DeviceArray<uint16_t> logits;        // (rows, vocab)
  DeviceArray<DeviceSampling> params;  // (rows)
  DeviceArray<int32_t> counts;         // (rows, vocab) or empty
  DeviceArray<uint8_t> in_prompt;      // (rows, vocab) or empty
  DeviceArray<uint64_t> step;          // (rows)
  DeviceArray<int32_t> out;            // (rows)
  DeviceArray<float> workspace;

  SampleBuffers(int64_t rows_, int64_t vocab_, bool penalties_)
      : rows(rows_),
        vocab(vocab_),
        penalties(penalties_),
        logits(size_t(rows_ * vocab_)),
        params(static_cast<size_t>(rows_)),
        counts(penalties_ ? size_t(rows_ * vocab_) : 0),
        in_prompt(penalties_ ? size_t(rows_ * vocab_) : 0),
        step(static_cast<size_t>(rows_)),
        out(static_cast<size_t>(rows_)),
        workspace(size_t(std::max<int64_t>(kernels::sample_workspace_floats(rows_, vocab_), 1))) {
    // v2's row counters start at zero; each launch leaves them so.
    CUDA_OK(cudaMemsetAsync(workspace.get(), 0, workspace.bytes(), test_stream()));
  }

  SampleArgs args() const {
    return {reinterpret_cast<const kernels::bf16*>(logits.get()),
            params.get(),
            penalties ? counts.get() : nullptr,
            penalties ? in_prompt.get() : nullptr,
            step.get(),
            out.get(),
            rows,
            vocab,
            workspace.get()};
  }
};

TEST_F(GpuTest, SampleGreedyIsArgmaxWithTiesToLowestId) {
  VersionRunner<SampleArgs> runner(kernels::sample_versions());
  struct Case {
    int64_t rows, vocab;
    bool required;
  };
  for (const Case& c :
       std::vector<Case>{{8, kVocab, true}, {1, kVocab, true}, {64, kVocab, false}, {3, 1000, false}}) {
    const std::string label = "sample greedy rows=" + str(c.rows) + " vocab=" + str(c.vocab);
    const uint64_t seed = case_seed(label);
    auto logits = random_bf16(size_t(c.rows * c.vocab), seed, -10.0f, 10.0f);  // (rows, vocab)
    std::vector<int32_t> want(size_t(c.rows));
    std::vector<DeviceSampling> params(size_t(c.rows));
    for (int64_t r = 0; r < c.rows; ++r) {
      // The maximum 12.0 at: both ends of the row / the last id only / three random ids / two adjacent ids.
      std::vector<int32_t> top(3);
      ref::fill_uniform_int(top, ref::mix_seed(seed, uint64_t(r)), 1, int32_t(c.vocab - 2));
      std::vector<int32_t> ties;
      switch (r % 4) {
        case 0:
          ties = {0, int32_t(c.vocab - 1)};
          break;
        case 1:
          ties = {int32_t(c.vocab - 1)};
          break;
        case 2:
          ties = top;
          break;
        default:
          ties = {top[0], top[0] + 1};
          break;
      }
      for (const int32_t id : ties) logits[size_t(r * c.vocab + id)] = ref::to_bf16(12.0f);
      want[size_t(r)] = *std::min_element(ties.begin(), ties.end());
      const std::span<const uint16_t> row(logits.data() + r * c.vocab, size_t(c.vocab));
      const auto z = ref::penalized_logits(row, {}, {}, {});
      ASSERT_EQ(ref::argmax(z), want[size_t(r)]) << "test construction";
      // Filters that greedy must ignore; temperature 0 and negative both mean greedy.
      ref::SamplingSpec spec;
      spec.temperature = (r % 2) ? -1.0 : 0.0;
      spec.top_k = 5;
      spec.top_p = 0.5;
      spec.min_p = 0.1;
      params[size_t(r)] = device_params(spec, uint64_t(r));
    }
    SampleBuffers buffers(c.rows, c.vocab, false);
    buffers.logits.upload(logits);
    buffers.params.upload(params);
    const std::vector<uint64_t> zero_steps(size_t(c.rows), 0);
    runner.run(
        label, buffers.args(),
        [&] {
          buffers.step.upload(zero_steps);
          buffers.out.poison();
        },
        [&](const std::string& run_label) {
          const auto got = buffers.out.download();
          for (int64_t r = 0; r < c.rows; ++r)
            EXPECT_EQ(got[size_t(r)], want[size_t(r)]) << run_label << " row " << r;
        },
        c.required, {produced(buffers.logits), produced(buffers.step)});
  }
}

TEST_F(GpuTest, SampleGreedyAppliesPenalties) {
  VersionRunner<SampleArgs> runner(kernels::sample_versions());
  const int64_t rows = 4, vocab = kVocab;
  const std::string label = "sample greedy with penalties rows=4 vocab=" + str(vocab);
  const uint64_t seed = case_seed(label);
  auto logits = random_bf16(size_t(rows * vocab), ref::mix_seed(seed, 1), -5.0f, 5.0f);  // (rows, vocab)
  std::vector<int32_t> counts(size_t(rows * vocab), 0);                                  // (rows, vocab)
  std::vector<uint8_t> in_prompt(size_t(rows * vocab), 0);                               // (rows, vocab)
  std::vector<DeviceSampling> params(static_cast<size_t>(rows));
  std::vector<int32_t> want(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * vocab;
    // Background history: some ids generated 1-3 times, some in the prompt.
    std::vector<int32_t> history(1500);
    ref::fill_uniform_int(history, ref::mix_seed(seed, 10 + uint64_t(r)), 0, int32_t(vocab - 1));
    for (size_t i = 0; i < history.size(); ++i) {
      const size_t index = size_t(base + history[i]);
      if (i % 2)
        counts[index] = 1 + int32_t((i / 2) % 3);
      else
        in_prompt[index] = 1;
    }
    std::vector<int32_t> ids(4);  // a, b, c, d: distinct, b < d
    ref::fill_uniform_int(ids, ref::mix_seed(seed, 20 + uint64_t(r)), 0, int32_t(vocab / 4 - 1));
    const int32_t a = ids[0], b = int32_t(vocab / 4) + ids[1], c = int32_t(vocab / 2) + ids[2],
                  d = int32_t(3 * vocab / 4) + ids[3];
    for (const int32_t id : {a, b, c, d}) {
      counts[size_t(base + id)] = 0;
      in_prompt[size_t(base + id)] = 0;
    }
    ref::SamplingSpec spec;
    spec.temperature = 0;
    spec.repetition_penalty = 1.3;
    spec.presence_penalty = 0.5;
    spec.frequency_penalty = 0.25;
    auto set = [&](int32_t id, float value) { logits[size_t(base + id)] = ref::to_bf16(value); };
    if (r <= 1) {  // the raw argmax a (in the prompt) and c (generated twice) fall behind b, which ties d
      set(a, 8.0f);
      set(b, 7.0f);
      set(c, 7.5f);
      set(d, 7.0f);
      in_prompt[size_t(base + a)] = 1;
      counts[size_t(base + c)] = 2;
      want[size_t(r)] = b;
    } else if (r == 2) {  // all negative: the penalty multiplies, pushing a (in the prompt) below b
      for (int64_t i = 0; i < vocab; ++i)
        logits[size_t(base + i)] = ref::to_bf16(-1.0f - std::fabs(ref::to_float(logits[size_t(base + i)])));
      set(a, -0.5f);
      set(b, -0.6f);
      set(c, -0.55f);
      in_prompt[size_t(base + a)] = 1;
      counts[size_t(base + c)] = 1;
      want[size_t(r)] = b;
    } else {  // a repetition penalty below 1 lifts a seen token above the raw argmax
      spec.repetition_penalty = 0.8;
      set(a, 6.0f);
      set(b, 7.0f);
      in_prompt[size_t(base + a)] = 1;
      want[size_t(r)] = a;
    }
    const auto z =
        ref::penalized_logits(std::span<const uint16_t>(logits.data() + base, size_t(vocab)),
                              std::span<const int32_t>(counts.data() + base, size_t(vocab)),
                              std::span<const uint8_t>(in_prompt.data() + base, size_t(vocab)), spec);
    ASSERT_EQ(ref::argmax(z), want[size_t(r)]) << "test construction, row " << r;
    params[size_t(r)] = device_params(spec, uint64_t(r));
  }
  SampleBuffers buffers(rows, vocab, true);
  buffers.logits.upload(logits);
  buffers.params.upload(params);
  buffers.counts.upload(counts);
  buffers.in_prompt.upload(in_prompt);
  const std::vector<uint64_t> zero_steps(size_t(rows), 0);
  runner.run(
      label, buffers.args(),
      [&] {
        buffers.step.upload(zero_steps);
        buffers.out.poison();
      },
      [&](const std::string& run_label) {
        const auto got = buffers.out.download();
        for (int64_t r = 0; r < rows; ++r)
          EXPECT_EQ(got[size_t(r)], want[size_t(r)]) << run_label << " row " << r;
      },
      true,
      {produced(buffers.logits), produced(buffers.counts), produced(buffers.in_prompt),
       produced(buffers.step)});
}

// v2_sample_split keeps per-row counters in its workspace; the engine shares one workspace between launches of
// different row counts (the decode step's batch, the prefill's argmax rows, one slot's first token). A layout
// that depended on the launch's row count would leave a counter non-zero and the row's token unwritten.
TEST_F(GpuTest, SampleSplitSharesItsWorkspaceAcrossRowCounts) {
  const auto& v2 = kernels::find_version(kernels::sample_versions(), "v2_sample_split");
  const int64_t max_rows = 8, vocab = kVocab;
  const std::string label = "sample v2 one workspace, rows 8 / 1 / 3 / 8 / 1";
  const uint64_t seed = case_seed(label);
  SampleBuffers buffers(max_rows, vocab, false);
  std::vector<DeviceSampling> params(static_cast<size_t>(max_rows));
  for (auto& p : params) p = device_params(ref::SamplingSpec{.temperature = 0}, 1);
  buffers.params.upload(params);
  int round = 0;
  for (const int64_t rows : {8, 1, 3, 8, 1}) {
    const auto logits = random_bf16(size_t(max_rows * vocab), ref::mix_seed(seed, uint64_t(round++)), -10, 10);
    buffers.logits.upload(logits);
    buffers.out.poison();
    SampleArgs a = buffers.args();
    a.rows = rows;
    v2.launch(a, test_stream());
    VersionRunner<SampleArgs>::finish(label);
    const auto got = buffers.out.download();
    for (int64_t r = 0; r < rows; ++r) {
      const auto z = ref::penalized_logits(std::span<const uint16_t>(logits.data() + r * vocab, size_t(vocab)), {},
                                           {}, {});
      EXPECT_EQ(got[size_t(r)], ref::argmax(z)) << label << ": rows " << rows << ", row " << r;
    }
  }
}

// v2_sample_split with SampleArgs::next_ids does the engine's advance kernel's work in its last block: the token
// becomes the row's next input, its position moves on, and rows with penalties count it. The tokens are v0's.
TEST_F(GpuTest, SampleSplitAdvancesTheSlots) {
  const auto& v0 = kernels::find_version(kernels::sample_versions(), "v0_sample");
  const auto& v2 = kernels::find_version(kernels::sample_versions(), "v2_sample_split");
  const int64_t rows = 4, vocab = kVocab;
  const std::string label = "sample v2 advancing 4 rows";
  const uint64_t seed = case_seed(label);
  const auto logits = random_bf16(size_t(rows * vocab), ref::mix_seed(seed, 1), -8.0f, 8.0f);  // (rows, vocab)
  std::vector<int32_t> counts(size_t(rows * vocab), 0);                                        // (rows, vocab)
  std::vector<int32_t> history(600);
  ref::fill_uniform_int(history, ref::mix_seed(seed, 2), 0, int32_t(rows * vocab - 1));
  for (const int32_t i : history) counts[size_t(i)] += 1;
  // Rows: greedy (0 and 2: counts given, penalties neutral); greedy with penalties; sampling with penalties.
  std::vector<ref::SamplingSpec> specs(static_cast<size_t>(rows));
  specs[0].temperature = 0;
  specs[1].temperature = 0;
  specs[1].repetition_penalty = 1.3;
  specs[2].temperature = 0;
  specs[3].temperature = 0.8;
  specs[3].presence_penalty = 0.5;
  std::vector<DeviceSampling> params;
  for (int64_t r = 0; r < rows; ++r) params.push_back(device_params(specs[size_t(r)], 11 + uint64_t(r)));
  const std::vector<int32_t> positions_before = {5, 17, 0, 300};
  SampleBuffers buffers(rows, vocab, true);
  buffers.logits.upload(logits);
  buffers.params.upload(params);
  buffers.in_prompt.upload(std::vector<uint8_t>(size_t(rows * vocab), 0));
  const std::vector<uint64_t> zero_steps(size_t(rows), 0);

  buffers.counts.upload(counts);
  buffers.step.upload(zero_steps);
  buffers.out.poison();
  v0.launch(buffers.args(), test_stream());
  VersionRunner<SampleArgs>::finish(label + " | v0");
  const auto want = buffers.out.download();

  DeviceArray<int32_t> next_ids(static_cast<size_t>(rows)), positions(static_cast<size_t>(rows));
  next_ids.poison();
  positions.upload(positions_before);
  buffers.step.upload(zero_steps);
  buffers.out.poison();
  SampleArgs a = buffers.args();
  a.next_ids = next_ids.get();
  a.positions = positions.get();
  a.counts = buffers.counts.get();
  ASSERT_TRUE(v2.takes(a));
  ASSERT_FALSE(v0.takes(a)) << "v0 does not advance: the engine must launch advance_kernel after it";
  v2.launch(a, test_stream());
  VersionRunner<SampleArgs>::finish(label + " | v2");
  const auto got = buffers.out.download(), ids = next_ids.download(), moved = positions.download();
  const auto counted = buffers.counts.download();
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[size_t(r)], want[size_t(r)]) << label << ": row " << r << " differs from v0";
    EXPECT_EQ(ids[size_t(r)], got[size_t(r)]) << label << ": row " << r << " next id";
    EXPECT_EQ(moved[size_t(r)], positions_before[size_t(r)] + 1) << label << ": row " << r << " position";
    const bool penalties = r == 1 || r == 3;
    for (int64_t i = 0; i < vocab; ++i) {
      const size_t at = size_t(r * vocab + i);
      const int32_t expected = counts[at] + (penalties && i == got[size_t(r)] ? 1 : 0);
      if (counted[at] != expected) {
        ADD_FAILURE() << label << ": row " << r << " count of id " << i << " is " << counted[at] << ", want "
                      << expected;
        break;
      }
    }
  }
}

// Launches `version` `launches` times on `buffers` (steps start at 0), returning the tokens (launch, row).
std::vector<int32_t> draw(const VersionUnderTest<SampleArgs>& version, SampleBuffers& buffers,
                          int64_t launches, const std::string& label) {
  buffers.step.upload(std::vector<uint64_t>(size_t(buffers.rows), 0));
  std::vector<int32_t> tokens;
  tokens.reserve(size_t(launches * buffers.rows));
  for (int64_t i = 0; i < launches; ++i) {
    buffers.out.poison();
    version.launch(buffers.args(), test_stream());
    VersionRunner<SampleArgs>::finish(label);
    const auto got = buffers.out.download();
    tokens.insert(tokens.end(), got.begin(), got.end());
  }
  return tokens;
}

TEST_F(GpuTest, SampleReturnsOnlyAllowedTokens) {
  VersionRunner<SampleArgs> runner(kernels::sample_versions());
  const int64_t rows = 64, vocab = kVocab, launches = 16;
  const std::string label = "sample allowed tokens rows=64 vocab=" + str(vocab);
  const uint64_t seed = case_seed(label);
  // Random rows: bf16 logits in [-8, 8] tie often near the top, so the cuts land on ties.
  const auto logits = random_bf16(size_t(rows * vocab), ref::mix_seed(seed, 1), -8.0f, 8.0f);
  std::vector<int32_t> counts(size_t(rows * vocab), 0);
  std::vector<uint8_t> in_prompt(size_t(rows * vocab), 0);
  std::vector<ref::SamplingSpec> specs(static_cast<size_t>(rows));
  std::vector<DeviceSampling> params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    ref::SamplingSpec& s = specs[size_t(r)];
    // (temperature, top-k, top-p, min-p); the first is Qwen3's recommended setting for thinking mode.
    const double settings[6][4] = {{0.6, 20, 0.95, 0}, {1.0, 50, 1, 0},      {0.8, 0, 0.5, 0},
                                   {1.2, 0, 1, 0.2},   {0.7, 40, 0.9, 0.05}, {1.0, 1, 1, 0}};
    const double* setting = settings[r % 6];
    s.temperature = setting[0];
    s.top_k = int64_t(setting[1]);
    s.top_p = setting[2];
    s.min_p = setting[3];
    if (r % 3 == 0) {  // penalties on a third of the rows
      s.repetition_penalty = 1.2;
      s.presence_penalty = 0.4;
      s.frequency_penalty = 0.2;
      std::vector<int32_t> history(800);
      ref::fill_uniform_int(history, ref::mix_seed(seed, 100 + uint64_t(r)), 0, int32_t(vocab - 1));
      for (size_t i = 0; i < history.size(); ++i) {
        const size_t index = size_t(r * vocab + history[i]);
        if (i % 2)
          counts[index] += 1;
        else
          in_prompt[index] = 1;
      }
    }
    params[size_t(r)] = device_params(s, 7919 * uint64_t(r) + 1);
  }
  std::vector<std::vector<uint8_t>> allowed(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const auto z = ref::penalized_logits(
        std::span<const uint16_t>(logits.data() + r * vocab, size_t(vocab)),
        std::span<const int32_t>(counts.data() + r * vocab, size_t(vocab)),
        std::span<const uint8_t>(in_prompt.data() + r * vocab, size_t(vocab)), specs[size_t(r)]);
    allowed[size_t(r)] = ref::allowed_tokens(z, specs[size_t(r)], 1e-3);
  }
  SampleBuffers buffers(rows, vocab, true);
  buffers.logits.upload(logits);
  buffers.params.upload(params);
  buffers.counts.upload(counts);
  buffers.in_prompt.upload(in_prompt);
  for (const auto& version : runner.supporting(buffers.args(), label)) {
    const std::string run_label = label + " | " + version.name;
    try {
      const auto tokens = draw(version, buffers, launches, run_label);
      int64_t bad = 0;
      std::string first_bad;
      for (int64_t i = 0; i < launches * rows; ++i) {
        const int64_t r = i % rows;
        const int32_t token = tokens[size_t(i)];
        if (token >= 0 && token < vocab && allowed[size_t(r)][size_t(token)]) continue;
        if (bad++ == 0) first_bad = "row " + str(r) + " (spec " + str(r % 6) + ") returned " + str(token);
      }
      EXPECT_EQ(bad, 0) << run_label << ": " << bad << " of " << launches * rows
                        << " draws outside the allowed set; first: " << first_bad;
      const auto steps = buffers.step.download();
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_GT(steps[size_t(r)], uint64_t(0)) << run_label << ": row " << r << " did not advance its step";
    } catch (const std::exception& e) {
      ADD_FAILURE() << run_label << " | " << e.what();
    }
  }
}

TEST_F(GpuTest, SampleFrequenciesMatchTheDistribution) {
  VersionRunner<SampleArgs> runner(kernels::sample_versions());
  const int64_t rows = 128, vocab = kVocab, launches = 128;  // 16384 draws per case
  const std::string label = "sample frequencies rows=128 vocab=" + str(vocab);
  const uint64_t seed = case_seed(label);

  // One row replicated: twelve candidates with distinct logits at random ids, the rest of the vocabulary far
  // below.
  const float top_logits[] = {3.0f, 2.5f, 2.25f, 2.0f, 1.5f, 1.25f, 1.0f, 0.5f, 0.25f, 0.0f, -0.5f, -1.0f};
  auto row = random_bf16(size_t(vocab), ref::mix_seed(seed, 1), -24.0f, -14.0f);
  std::vector<int32_t> top_ids;
  for (uint64_t i = 0; top_ids.size() < std::size(top_logits); ++i) {
    const int32_t id = int32_t(ref::mix_seed(seed, 1000 + i) % uint64_t(vocab));
    if (std::find(top_ids.begin(), top_ids.end(), id) == top_ids.end()) top_ids.push_back(id);
  }
  for (size_t i = 0; i < top_ids.size(); ++i) row[size_t(top_ids[i])] = ref::to_bf16(top_logits[i]);
  std::vector<uint16_t> logits(size_t(rows * vocab));
  for (int64_t r = 0; r < rows; ++r) std::copy(row.begin(), row.end(), logits.begin() + r * vocab);

  // Penalty history for case "penalties": top 0 and 2 in the prompt, top 1 generated twice, top 4 once.
  std::vector<int32_t> row_counts(size_t(vocab), 0);
  std::vector<uint8_t> row_prompt(size_t(vocab), 0);
  row_prompt[size_t(top_ids[0])] = row_prompt[size_t(top_ids[2])] = 1;
  row_counts[size_t(top_ids[1])] = 2;
  row_counts[size_t(top_ids[4])] = 1;

  // Cut points placed halfway between the cumulative masses (or ratios) of two neighbours, far from rounding.
  auto sorted_top_probabilities = [&](const ref::SamplingSpec& spec, bool penalties) {
    const auto z = penalties ? ref::penalized_logits(row, row_counts, row_prompt, spec)
                             : ref::penalized_logits(row, {}, {}, spec);
    const auto p = ref::token_probabilities(z, spec);
    std::vector<double> top;
    for (const int32_t id : top_ids) top.push_back(p[size_t(id)]);
    std::sort(top.rbegin(), top.rend());
    return top;
  };
  auto top_p_keeping = [&](ref::SamplingSpec spec, size_t kept) {
    spec.top_p = 1.0;
    const auto p = sorted_top_probabilities(spec, false);
    const double before = std::accumulate(p.begin(), p.begin() + ptrdiff_t(kept - 1), 0.0);
    return before + 0.5 * p[kept - 1];  // mass of kept - 1 < top_p <= mass of kept
  };
  auto min_p_keeping = [&](ref::SamplingSpec spec, size_t kept) {
    spec.min_p = 0.0;
    const auto p = sorted_top_probabilities(spec, false);
    return 0.5 * (p[kept - 1] + p[kept]) / p[0];
  };

  struct Case {
    std::string name;
    ref::SamplingSpec spec;
    bool penalties;
    size_t expect_kept;  // candidates among the twelve with probability > 0 (0: all, plus the tail)
  };
  std::vector<Case> cases;
  {
    ref::SamplingSpec s;
    cases.push_back({"temperature 1", s, false, 0});
    s.temperature = 0.7;
    s.top_k = 5;
    cases.push_back({"temperature 0.7 top-k 5", s, false, 5});
    s = {};
    s.top_p = top_p_keeping(s, 5);
    cases.push_back({"top-p keeping 5", s, false, 5});
    s = {};
    s.temperature = 0.6;
    s.top_k = 20;
    s.top_p = top_p_keeping(s, 9);
    cases.push_back({"temperature 0.6 top-k 20 top-p keeping 9", s, false, 9});
    s = {};
    s.min_p = min_p_keeping(s, 6);
    cases.push_back({"min-p keeping 6", s, false, 6});
    s = {};
    s.repetition_penalty = 1.5;
    s.presence_penalty = 0.5;
    s.frequency_penalty = 0.3;
    cases.push_back({"penalties", s, true, 0});
  }

  for (const Case& c : cases) {
    const std::string case_label = label + " " + c.name;
    const auto z = c.penalties ? ref::penalized_logits(row, row_counts, row_prompt, c.spec)
                               : ref::penalized_logits(row, {}, {}, c.spec);
    const auto probability = ref::token_probabilities(z, c.spec);
    const auto allowed = ref::allowed_tokens(z, c.spec, 1e-3);
    double top_mass = 0;
    size_t kept = 0;
    for (const int32_t id : top_ids) {
      top_mass += probability[size_t(id)];
      kept += probability[size_t(id)] > 0;
    }
    if (c.expect_kept) {
      ASSERT_EQ(kept, c.expect_kept) << case_label << ": test construction";
    }

    SampleBuffers buffers(rows, vocab, c.penalties);
    buffers.logits.upload(logits);
    std::vector<DeviceSampling> params(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) params[size_t(r)] = device_params(c.spec, 1000003 * uint64_t(r) + 17);
    buffers.params.upload(params);
    if (c.penalties) {
      std::vector<int32_t> counts(size_t(rows * vocab));
      std::vector<uint8_t> prompt(size_t(rows * vocab));
      for (int64_t r = 0; r < rows; ++r) {
        std::copy(row_counts.begin(), row_counts.end(), counts.begin() + r * vocab);
        std::copy(row_prompt.begin(), row_prompt.end(), prompt.begin() + r * vocab);
      }
      buffers.counts.upload(counts);
      buffers.in_prompt.upload(prompt);
    }

    for (const auto& version : runner.supporting(buffers.args(), case_label)) {
      const std::string run_label = case_label + " | " + version.name;
      try {
        const auto tokens = draw(version, buffers, launches, run_label);
        const double n = double(tokens.size());
        std::map<int32_t, int64_t> histogram;
        int64_t outside = 0, tail = 0;
        for (const int32_t t : tokens) {
          if (t < 0 || t >= vocab || !allowed[size_t(t)])
            ++outside;
          else if (std::find(top_ids.begin(), top_ids.end(), t) == top_ids.end())
            ++tail;
          else
            ++histogram[t];
        }
        EXPECT_EQ(outside, 0) << run_label << ": draws outside the allowed set";
        // Each candidate's frequency, and the tail's, within 5 standard deviations (plus 3 draws of slack).
        auto expect_frequency = [&](const std::string& what, int64_t count, double p) {
          const double tolerance = 5.0 * std::sqrt(p * (1.0 - p) / n) + 3.0 / n;
          EXPECT_NEAR(double(count) / n, p, tolerance) << run_label << ": frequency of " << what;
        };
        for (size_t i = 0; i < top_ids.size(); ++i)
          expect_frequency("candidate " + str(int64_t(i)) + " (id " + str(top_ids[i]) + ")",
                           histogram[top_ids[i]], probability[size_t(top_ids[i])]);
        expect_frequency("the tail", tail, std::max(0.0, 1.0 - top_mass));

        if (c.name == "temperature 1") {
          // Rows draw independently, and the same (seed, step) gives the same token.
          const std::set<int32_t> first_launch(tokens.begin(), tokens.begin() + rows);
          EXPECT_GT(first_launch.size(), size_t(1)) << run_label << ": every row drew the same token";
          const auto again = draw(version, buffers, 1, run_label);
          EXPECT_TRUE(std::equal(again.begin(), again.end(), tokens.begin()))
              << run_label << ": the same seeds and steps gave different tokens";
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << run_label << " | " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace qwen3::gpu_test
