// v1_qkv_attention_cluster: the decode step's attention in one kernel (sm_90), where v0 takes three
// (qk_norm_rope_cache, the split-KV kernel, the merge kernel). An H200 ablation of the decode graph put those three
// at 0.69 ms of a 4.55 ms step at context 128 (1.49 ms at 8192) for K/V bytes worth a few microseconds: the cost
// was latency, three dependent kernels each with its own dependent phases, not bandwidth.
//
// Design. Grid (C, kv_heads, tokens), clusters of C CTAs along x (C = 1..8, from the context length; 1 up to 128
// keys). A CTA owns a contiguous range of the token's keys for one kv head and all q heads of its GQA group:
//  1. Right after the PDL wait it starts streaming its K tiles and then its V tiles (64 keys each) into a 4-stage
//     shared-memory ring with cp.async, so K/V bytes are in flight while it does step 2.
//  2. QK-norm + RoPE of the group's q heads from the QKV projection's output (each CTA of the cluster redoes
//     this: it is a few hundred FMAs, cheaper than sharing). The CTA whose range ends at the new position also
//     normalizes and rotates the new key, copies the new value, and stores both in the cache; the new row is never
//     loaded from the cache by anyone (its values come from registers), so no CTA waits for that store.
//  3. Scores for every key of the range (16 lanes per key, 8 dims each, shuffle reduction), an exact softmax over
//     the range per q head, then P·V with each V row read once for the whole group.
//  4. With C > 1 the CTAs' partial results (unnormalized output, max, sum per head) meet through distributed
//     shared memory: after a cluster barrier each CTA merges a 1/C slice of the outputs from all C partials. No
//     global workspace, no second kernel.
// PRECOND (decode): one token per cache slot; positions[t] < max_ctx; position + 1 <= 8 * kMaxKeysPerCta.

#include <algorithm>
#include <cfloat>
#include <stdexcept>

#include "kernels/03_rope/qk_norm_rope.cuh"
#include "kernels/04_attention/qkv_attention.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kThreads = 256;
[[maybe_unused]] constexpr int kWarps = kThreads / kWarpSize;  // unused in the sm_89 build (empty body)
constexpr int kTileKeys = 64;
constexpr int kStages = 4;
constexpr int kMaxCluster = 8;          // the portable cluster size
constexpr int kKeysPerCtaTarget = 128;  // up to this many keys a CTA handles alone: more CTAs only add the merge
constexpr int kMaxKeysPerCta = 2048;    // scores live in shared memory: 8 CTAs x 2048 keys = context 16384

// Dynamic shared memory, byte offsets. The ring is reused for the cross-key-group sum at the end.
template <int kHeadDim, int kGroup>
struct Layout {
  static constexpr int kLanesPerKey = kHeadDim / 8;  // one 16-byte piece of a K/V row per lane
  static constexpr int kKeyGroups = kThreads / kLanesPerKey;
  static constexpr int kTileElems = kTileKeys * kHeadDim;
  static constexpr size_t kRingBytes = std::max<size_t>(size_t(kStages) * kTileElems * 2,
                                                        size_t(kKeyGroups) * kGroup * kHeadDim * 4);
  static constexpr size_t kQ = kRingBytes;                             // float (kGroup, kHeadDim)
  static constexpr size_t kNew = kQ + size_t(kGroup) * kHeadDim * 4;   // float (2, kHeadDim): new k, new v
  static constexpr size_t kPartial = kNew + 2 * kHeadDim * 4;          // float (kGroup, kHeadDim), max, sum
  static constexpr size_t kScores = kPartial + (size_t(kGroup) * kHeadDim + 2 * kGroup) * 4;  // (kGroup, cap)
  static constexpr size_t bytes(int keys_cap) { return kScores + size_t(kGroup) * keys_cap * 4; }
};

template <int kHeadDim, int kGroup>
__global__ void __launch_bounds__(kThreads) qkv_attention_kernel(QkvAttentionArgs a, int keys_cap) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using L = Layout<kHeadDim, kGroup>;
  constexpr int kLanesPerKey = L::kLanesPerKey, kKeyGroups = L::kKeyGroups;
  constexpr int kKeysPerWarpStep = kWarpSize / kLanesPerKey;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* ring = reinterpret_cast<bf16*>(smem);                     // kStages x (kTileKeys, kHeadDim)
  float* q_s = reinterpret_cast<float*>(smem + L::kQ);            // normed, rotated q of the group
  float* new_kv = reinterpret_cast<float*>(smem + L::kNew);       // the new key and value (owner CTA)
  float* partial = reinterpret_cast<float*>(smem + L::kPartial);  // unnormalized output of this CTA's keys
  float* stat_max = partial + kGroup * kHeadDim;
  float* stat_sum = stat_max + kGroup;
  float* scores = reinterpret_cast<float*>(smem + L::kScores);    // (kGroup, keys_cap)

  pdl_launch_dependents();
  pdl_wait();  // qkv comes from the previous kernel, the cached rows from earlier steps

  const QkNormRopeCacheArgs& p = a.prep;
  const int split = blockIdx.x, splits = gridDim.x, kv_head = blockIdx.y, token = blockIdx.z;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int32_t position = p.positions[token];
  const qkv_attention::KeyRange range = qkv_attention::key_range(position, split, splits);
  const int key0 = range.key0, n_keys = range.n_keys, new_key = range.new_key;
  const int tiles = (n_keys + kTileKeys - 1) / kTileKeys;
  const int64_t slot = p.slots ? p.slots[token] : 0;
  const int64_t row_stride = p.kv_heads * kHeadDim;
  const int64_t first_row =
      qkv_attention::split_first_row<kHeadDim>(slot, p.max_ctx, key0, position, row_stride, kv_head);
  const bf16* k_rows = p.k_cache + first_row;
  const bf16* v_rows = p.v_cache + first_row;

  // Tile i of the stream K[0], ..., K[tiles - 1], V[0], ..., V[tiles - 1] into ring slot i % kStages. One commit
  // group per call, empty or not, so cp_async_wait<kStages - 2> always means "tile i has landed".
  auto issue = [&](int i) {
    if (i < 2 * tiles) {
      const bool is_v = i >= tiles;
      const int first = (is_v ? i - tiles : i) * kTileKeys;
      const bf16* src = (is_v ? v_rows : k_rows) + int64_t(first) * row_stride;
      bf16* dst = ring + (i % kStages) * L::kTileElems;
      for (int c = threadIdx.x; c < kTileKeys * kLanesPerKey; c += kThreads) {
        const int key = c / kLanesPerKey, piece = c % kLanesPerKey;
        const bool load = first + key < n_keys && first + key != new_key;
        cp_async_16B_zfill(dst + key * kHeadDim + piece * 8, load ? src + int64_t(key) * row_stride + piece * 8 : src,
                           load ? 16 : 0);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);

  qkv_attention::prepare_q_and_new_kv<kHeadDim, kWarps>(p, token, kv_head, kGroup, position, slot, new_key >= 0,
                                                        q_s, new_kv);
  if (n_keys == 0 && threadIdx.x < kGroup) {  // an empty CTA (tiny context): weight 0 in the merge
    stat_max[threadIdx.x] = -FLT_MAX;
    stat_sum[threadIdx.x] = 0.0f;
  }
  __syncthreads();

  const int lane_in_key = lane % kLanesPerKey;
  float q_reg[kGroup][8];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) q_reg[g][e] = q_s[g * kHeadDim + lane_in_key * 8 + e];
  const int key_group = threadIdx.x / kLanesPerKey, dim0 = (threadIdx.x % kLanesPerKey) * 8;
  float acc[kGroup][8] = {};

  for (int i = 0; i < 2 * tiles; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile i is in for every thread, and every thread is done with tile i - 1's slot
    issue(i + kStages - 1);
    const bf16* tile = ring + (i % kStages) * L::kTileElems;
    if (i < tiles) {  // scores[g][key] = q_g · k_key * scale
      const int first = i * kTileKeys;
      for (int base = warp * kKeysPerWarpStep; base < kTileKeys && first + base < n_keys;
           base += kWarps * kKeysPerWarpStep) {  // warp-uniform bounds: every lane takes part in the shuffles
        const int key = base + lane / kLanesPerKey, local = first + key;
        float k_f[8];
        if (local == new_key) {
#pragma unroll
          for (int e = 0; e < 8; ++e) k_f[e] = new_kv[lane_in_key * 8 + e];
        } else {
          bf16x8_to_float(*reinterpret_cast<const Bf16x8*>(tile + key * kHeadDim + lane_in_key * 8), k_f);
        }
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot += q_reg[g][e] * k_f[e];
#pragma unroll
          for (int offset = kLanesPerKey / 2; offset > 0; offset >>= 1)
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
          if (local < n_keys && lane_in_key == 0) scores[g * keys_cap + local] = dot * a.scale;
        }
      }
    } else {
      if (i == tiles) {  // every score is in (the barrier above): exact softmax numerators per q head
        for (int g = warp; g < kGroup; g += kWarps) {
          float m = -FLT_MAX;
          for (int key = lane; key < n_keys; key += kWarpSize) m = fmaxf(m, scores[g * keys_cap + key]);
          m = warp_max(m);
          float sum = 0.0f;
          for (int key = lane; key < n_keys; key += kWarpSize) {
            const float e = expf(scores[g * keys_cap + key] - m);
            scores[g * keys_cap + key] = e;
            sum += e;
          }
          sum = warp_sum(sum);
          if (lane == 0) {
            stat_max[g] = m;
            stat_sum[g] = sum;
          }
        }
        __syncthreads();
      }
      const int first = (i - tiles) * kTileKeys;
      const int count = min(kTileKeys, n_keys - first);
      for (int key = key_group; key < count; key += kKeyGroups) {  // P·V: each V row read once for the group
        float v_f[8];
        if (first + key == new_key) {
#pragma unroll
          for (int e = 0; e < 8; ++e) v_f[e] = new_kv[kHeadDim + dim0 + e];
        } else {
          bf16x8_to_float(*reinterpret_cast<const Bf16x8*>(tile + key * kHeadDim + dim0), v_f);
        }
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          const float pr = scores[g * keys_cap + first + key];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] += pr * v_f[e];
        }
      }
    }
  }

  cp_async_wait<0>();
  __syncthreads();  // the ring is free: sum the key groups' accumulators through it
  float* reduce = reinterpret_cast<float*>(ring);  // (kKeyGroups, kGroup, kHeadDim)
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) reduce[(key_group * kGroup + g) * kHeadDim + dim0 + e] = acc[g][e];
  __syncthreads();
  for (int o = threadIdx.x; o < kGroup * kHeadDim; o += kThreads) {
    float sum = 0.0f;
#pragma unroll 4
    for (int kg = 0; kg < kKeyGroups; ++kg) sum += reduce[kg * kGroup * kHeadDim + o];
    partial[o] = sum;
  }
  bf16* out = a.out + (int64_t(token) * p.q_heads + int64_t(kv_head) * kGroup) * kHeadDim;  // (kGroup, kHeadDim)
  qkv_attention::write_output<kHeadDim, kThreads>(partial, stat_max, stat_sum, kGroup * kHeadDim, split, splits,
                                                  splits, out);
#endif
}

template <int kHeadDim, int kGroup>
void launch_group(const QkvAttentionArgs& a, cudaStream_t stream) {
  using L = Layout<kHeadDim, kGroup>;
  static const bool configured = [] {
    CUDA_CHECK(cudaFuncSetAttribute(qkv_attention_kernel<kHeadDim, kGroup>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::bytes(kMaxKeysPerCta))));
    return true;
  }();
  (void)configured;
  const auto plan = qkv_attention::plan_clusters(a.max_position, kKeysPerCtaTarget, kMaxCluster, kTileKeys);
  launch_clustered(qkv_attention_kernel<kHeadDim, kGroup>,
                   dim3(unsigned(plan.cluster), unsigned(a.prep.kv_heads), unsigned(a.prep.tokens)), dim3(kThreads),
                   L::bytes(plan.keys_cap), stream, unsigned(plan.cluster), a, plan.keys_cap);
}

template <int kHeadDim>
void launch_head_dim(const QkvAttentionArgs& a, cudaStream_t stream) {
  switch (a.prep.q_heads / a.prep.kv_heads) {
    case 1: launch_group<kHeadDim, 1>(a, stream); break;
    case 2: launch_group<kHeadDim, 2>(a, stream); break;
    case 3: launch_group<kHeadDim, 3>(a, stream); break;
    case 4: launch_group<kHeadDim, 4>(a, stream); break;
    case 5: launch_group<kHeadDim, 5>(a, stream); break;
    case 6: launch_group<kHeadDim, 6>(a, stream); break;
    case 7: launch_group<kHeadDim, 7>(a, stream); break;
    case 8: launch_group<kHeadDim, 8>(a, stream); break;
    default: throw std::invalid_argument("qkv_attention v1: GQA group must be 1..8");
  }
}

}  // namespace

bool qkv_attention_v1_supports(const QkvAttentionArgs& a) {
  const QkNormRopeCacheArgs& p = a.prep;
  if (p.head_dim != 64 && p.head_dim != 128) return false;
  if (p.kv_heads < 1 || p.q_heads % p.kv_heads != 0 || p.q_heads / p.kv_heads > 8) return false;
  if (p.tokens < 1 || p.tokens > 65535 || p.kv_heads > 65535) return false;
  if (a.max_position < 0 || a.max_position >= p.max_ctx) return false;
  if ((a.max_position + kMaxCluster) / kMaxCluster > kMaxKeysPerCta) return false;
  return qkv_attention::device_has_clusters();
}

void launch_qkv_attention_v1(const QkvAttentionArgs& a, cudaStream_t stream) {
  if (a.prep.head_dim == 128) {
    launch_head_dim<128>(a, stream);
  } else {
    launch_head_dim<64>(a, stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
