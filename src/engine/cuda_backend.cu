#include "engine/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <type_traits>

#include "core/error.h"
#include "engine/device_buffer.h"
#include "kernels/common/check.h"
#include "kernels/common/launch.cuh"
#include "kernels/registry.h"
#include "model/qwen3_weights.h"
#include "model/rope.h"

namespace qwen3 {

using kernels::bf16;
using kernels::KernelVersion;

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

std::string cuda_device_name() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown";
  return prop.name;
}

EngineOptions EngineOptions::preset(const std::string& name) {
  EngineOptions o;
  if (name == "fast") return o;
  if (name == "cublas") {
    o.cublas_gemm = true;
    o.decode_layers = "off";
    o.decode_attention_o = "off";
    o.decode_mlp = "off";
    o.fused_swiglu = false;  // the baseline keeps every GEMM in cuBLAS
    o.fold_norms = false;
    return o;
  }
  if (name == "fast-v1") {
    o.decode_layers = "off";
    o.decode_attention_o = "off";
    o.decode_mlp = "off";
    o.decode_gemm = "v2_gemv_stream";
    o.decode_gemm_batched = "v2_gemv_stream";
    o.decode_gemm_batched_large = "v2_gemv_stream";
    o.decode_attention = "v1_flash_decode";
    o.decode_qkv_attention = "off";
    o.gate_up_swiglu = "v1_gate_up_swiglu";
    o.fused_swiglu = false;
    o.fold_norms = false;
    o.sample = "v0_sample";
    o.sample_plain = "v0_sample";
    o.pdl = false;
    return o;
  }
  if (name == "v0") {
    o.decode_layers = "off";
    o.decode_attention_o = "off";
    o.decode_mlp = "off";
    o.decode_gemm = "v0_gemm_naive";
    o.decode_gemm_batched = "v0_gemm_naive";
    o.decode_gemm_batched_large = "v0_gemm_naive";
    o.prefill_gemm = "v0_gemm_naive";
    o.decode_attention = "v0_attention";
    o.decode_qkv_attention = "off";
    o.prefill_attention = "v0_attention";
    o.rmsnorm = "v0_rmsnorm";
    o.add_rmsnorm = "v0_add_rmsnorm";
    o.fused = false;
    o.fused_swiglu = false;
    o.fold_norms = false;
    o.sample = "v0_sample";
    o.sample_plain = "v0_sample";
    o.cuda_graph = false;
    o.pdl = false;
    return o;
  }
  throw InputError("unknown engine path '" + name + "' (expected fast, fast-v1, cublas or v0)");
}

ModelConfig synthetic_qwen3_config(const std::string& name) {
  struct Size {
    const char* name;
    int64_t hidden, layers, heads, kv_heads, inter;
    bool tied;
  };
  static const Size kSizes[] = {
      {"qwen3-0.6b", 1024, 28, 16, 8, 3072, true},   {"qwen3-1.7b", 2048, 28, 16, 8, 6144, true},
      {"qwen3-4b", 2560, 36, 32, 8, 9728, true},     {"qwen3-8b", 4096, 36, 32, 8, 12288, false},
      {"qwen3-14b", 5120, 40, 40, 8, 17408, false},  {"qwen3-32b", 5120, 64, 64, 8, 25600, false},
  };
  std::string known;
  for (const Size& s : kSizes) {
    known += std::string(known.empty() ? "" : ", ") + s.name;
    if (name != s.name) continue;
    ModelConfig c;
    c.architecture = "Qwen3ForCausalLM";
    c.hidden_size = s.hidden;
    c.intermediate_size = s.inter;
    c.num_layers = s.layers;
    c.num_heads = s.heads;
    c.num_kv_heads = s.kv_heads;
    c.head_dim = 128;
    c.vocab_size = 151936;
    c.max_position_embeddings = 40960;
    c.rms_norm_eps = 1e-6;
    c.rope.theta = 1e6;
    c.tie_word_embeddings = s.tied;
    c.eos_token_ids = {151645, 151643};
    return c;
  }
  throw InputError("unknown synthetic model '" + name + "' (known: " + known + ")");
}

namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// out[i] = offset + scale * u, u uniform in [-1, 1): random weights for synthetic benchmarks (never zeros).
__global__ void fill_uniform_kernel(bf16* out, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float u = float(mix64(seed ^ (uint64_t(i) * 0xd1b54a32d192ed03ull)) >> 40) * (1.0f / 8388608.0f) - 1.0f;
    out[i] = __float2bfloat16_rn(offset + scale * u);
  }
}

// After sampling: the sampled token becomes the slot's next input; its position advances; penalties count it.
// Counts only for slots whose sampling uses penalties (the host never runs ahead of those, see forward_and_sample).
__global__ void advance_kernel(const int32_t* __restrict__ sampled, int32_t* __restrict__ next_ids,
                               int32_t* __restrict__ positions, int32_t* __restrict__ counts,
                               const kernels::DeviceSampling* __restrict__ params, int64_t batch, int64_t vocab) {
  kernels::pdl_launch_dependents();
  kernels::pdl_wait();
  const int64_t b = threadIdx.x;
  if (b >= batch) return;
  const int32_t token = sampled[b];
  next_ids[b] = token;
  if (positions) positions[b] += 1;
  const kernels::DeviceSampling p = params[b];
  if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    counts[b * vocab + token] += 1;
}

// Samples a.rows rows and makes each token its slot's next decode input: in the sampler's own launch where it
// takes that (SampleArgs::next_ids, v2_sample_split), else with advance_kernel after it. Returns the launches.
// `positions` may be nullptr (the caller stages them); `counts` is a.token_counts' memory.
int sample_and_advance(const kernels::KernelVersion<kernels::SampleArgs>& sampler, const kernels::SampleArgs& a,
                       int32_t* next_ids, int32_t* positions, int32_t* counts, bool sample, bool advance, bool fold,
                       cudaStream_t stream) {
  kernels::SampleArgs folded = a;
  folded.next_ids = next_ids;
  folded.positions = positions;
  folded.counts = counts;
  if (fold && sample && advance && sampler.takes(folded)) {
    sampler.launch(folded, stream);
    return 1;
  }
  if (sample) sampler.launch(a, stream);
  if (advance) {
    kernels::launch(advance_kernel, dim3(1), dim3(32), 0, stream, a.out_tokens, next_ids, positions, counts, a.params,
                    a.rows, a.vocab);
    CUDA_CHECK_LAUNCH();
  }
  return int(sample) + int(advance);
}

constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

kernels::DeviceSampling to_device(const SamplingParams& p) {
  kernels::DeviceSampling d{};
  d.temperature = float(p.temperature);
  d.top_k = int32_t(std::min<int64_t>(p.top_k, INT32_MAX));
  d.top_p = float(p.top_p);
  d.min_p = float(p.min_p);
  d.repetition_penalty = float(p.repetition_penalty);
  d.presence_penalty = float(p.presence_penalty);
  d.frequency_penalty = float(p.frequency_penalty);
  d.seed = p.seed;
  return d;
}

struct LayerDevice {
  bf16* input_norm;  // (hidden)
  bf16* post_norm;   // (hidden)
  bf16* q_norm;      // (head_dim)
  bf16* k_norm;      // (head_dim)
  bf16* wqkv;        // (q_dim + 2 * kv_dim, hidden): q_proj | k_proj | v_proj rows
  bf16* wo;          // (hidden, q_dim)
  bf16* w_gate_up;   // (2 * intermediate, hidden): gate_proj | up_proj rows
  bf16* w_down;      // (hidden, intermediate)
  bf16* w_down_t = nullptr;  // (intermediate, hidden): w_down transposed, where decode_mlp runs (the last layer
                             // only with last_mlp_in_one_launch)
};

}  // namespace

struct CudaEngine::Impl {
  cudaStream_t stream = nullptr;
  int64_t* launch_counter = nullptr;
  int64_t* handoff_counter = nullptr;  // CudaEngine::handoffs_per_step_, counted where launch_counter is

  DeviceBuffer weights;
  bf16* embed = nullptr;       // (vocab, hidden)
  bf16* final_norm = nullptr;  // (hidden)
  bf16* lm_head = nullptr;     // (vocab, hidden): embed when tied
  std::vector<LayerDevice> layers;
  int64_t decode_weight_bytes = 0;
  int64_t layer_weight_bytes = 0;  // one layer's weights, norms included
  size_t norm_weight_bytes = 0;    // every RMSNorm weight: the first bytes of `weights` (WeightLayout)

  // K then V, each (layers, slots, context, kv_heads, head_dim): one range, for EngineOptions::l2_persist "kv".
  DeviceBuffer kv_cache;
  int64_t layer_cache_elems = 0;
  bf16* k_cache() const { return kv_cache.as<bf16>(); }
  bf16* v_cache() const { return kv_cache.as<bf16>() + kv_cache.bytes() / 2 / sizeof(bf16); }
  // The L2 access-policy window of every launch and graph kernel node (num_bytes 0: none; EngineOptions::l2_persist).
  cudaAccessPolicyWindow l2_window{};
  size_t l2_set_aside = 0;
  DeviceBuffer inv_freq;          // (head_dim / 2) fp32
  float attention_factor = 1.0f;

  int64_t rows = 0;        // activation rows: max(prefill_chunk, max_batch)
  int64_t logit_rows = 0;  // logits rows computed at once
  DeviceBuffer h, x, qkv, q, k, v, attn, tmp, gate_up, act, logits;
  DeviceBuffer prefill_ids, prefill_positions, prefill_slots;  // (rows) int32
  DeviceBuffer next_ids, next_positions, decode_slots;         // (max_batch) int32: decode state per slot
  DeviceBuffer sampling, greedy;                               // DeviceSampling (max_batch) / (logit_rows)
  DeviceBuffer steps;                                          // (max_batch) u64 random-stream positions
  DeviceBuffer sampled;                                        // (max(max_batch, logit_rows)) int32
  DeviceBuffer counts;                                         // (max_batch, vocab) int32
  DeviceBuffer in_prompt;                                      // (max_batch, vocab) uint8
  DeviceBuffer attention_workspace;                            // split-KV partials
  DeviceBuffer norm_partials;                                  // (max_batch, kMaxNormPartials) fp32
  PinnedBuffer host_ints;                                      // staging for ids / positions / tokens
  int64_t host_ints_capacity = 0;

  const KernelVersion<kernels::GemmArgs>* decode_gemm = nullptr;          // batch 1
  const KernelVersion<kernels::GemmArgs>* decode_gemm_batched = nullptr;        // 2..3 rows
  const KernelVersion<kernels::GemmArgs>* decode_gemm_batched_large = nullptr;  // 4..8 rows
  const KernelVersion<kernels::GemmArgs>* prefill_gemm = nullptr;
  const KernelVersion<kernels::AttentionArgs>* decode_attention = nullptr;
  const KernelVersion<kernels::AttentionArgs>* prefill_attention = nullptr;
  const KernelVersion<kernels::QkvAttentionArgs>* decode_qkv_attention = nullptr;  // nullptr: off
  const KernelVersion<kernels::DecodeLayersArgs>* decode_layers = nullptr;  // nullptr: off
  const KernelVersion<kernels::QkvAttentionOArgs>* attention_o = nullptr;    // nullptr: off
  const KernelVersion<kernels::NormMlpArgs>* mlp = nullptr;                  // nullptr: off
  const KernelVersion<kernels::NormMlpArgs>* mlp_batched = nullptr;          // batch 2; nullptr: off
  const KernelVersion<kernels::AddDeltaRmsnormArgs>* add_delta_rmsnorm = nullptr;
  const KernelVersion<kernels::NormGemvArgs>* norm_gemv_batched = nullptr;  // batch 2 with mlp_batched; or off
  DeviceBuffer down_t;      // (layers - 1, intermediate, hidden): the layers' w_down transposed, for mlp
  DeviceBuffer mlp_delta;   // (copies, tokens, hidden) fp32: the MLP output owed to the residual; zero between steps
  DeviceBuffer mlp_sync;    // 2 words for v3's grid-wide wait, zeroed once (every launch leaves them zero)
  DeviceBuffer qkv_claims;  // 2 words: norm_gemv v21's queue of row groups, zeroed once (each launch leaves them so)
  // Counter hand-offs of the batch-1 layer (kernels/common/handoff.cuh), 2 words each, zeroed once (each consumer
  // leaves its words zero): the MLP's count for the next QKV GEMV (norm_mlp v19 -> norm_gemv v25), the QKV GEMV's for
  // the attention launch (-> qkv_attention_o v33), the attention launch's for the MLP (-> norm_mlp v19).
  DeviceBuffer mlp_handoff, qkv_handoff, attention_handoff;
  // (2, CTAs) %globaltimer stamps for v12: layer l reads row (l + 1) % 2 (the previous layer's) and writes row l % 2,
  // so a launch never reads what it writes (NormMlpArgs::lateness_in); zeroed once (no transfer at first).
  DeviceBuffer mlp_lateness;
  DeviceBuffer mlp_trace;   // (layers - 1, CTAs, kNormMlpTraceEvents) stamps, profiling only
  DeviceBuffer qkv_trace;   // (layers, SMs, kNormGemvTraceEvents) stamps of v12's QKV GEMV, profiling only
  int64_t mlp_ctas = 0;  // CTAs of the one-launch MLP (norm_mlp_ctas), where mlp is on
  DeviceBuffer attention_o_workspace;  // qkv_attention_o_workspace_floats() floats, its counters zeroed once
  DeviceBuffer attention_o_trace;      // (layers, CTAs, kQkvAttentionOTraceEvents) stamps, profiling only
  DeviceBuffer decode_layer_table;      // (layers) kernels::DecodeLayerWeights
  DeviceBuffer decode_layers_workspace;  // decode_layers_workspace_floats() floats
  DeviceBuffer decode_layers_sync;       // decode_layers_sync_words() words, zeroed once (launches leave them 0)
  const KernelVersion<kernels::NormGemvArgs>* norm_gemv = nullptr;
  const KernelVersion<kernels::GemvResidualArgs>* residual_gemv = nullptr;
  const KernelVersion<kernels::NormGateUpSwigluArgs>* norm_gate_up = nullptr;
  const KernelVersion<kernels::RmsnormArgs>* rmsnorm = nullptr;
  const KernelVersion<kernels::AddRmsnormArgs>* add_rmsnorm = nullptr;
  const KernelVersion<kernels::GateUpSwigluArgs>* gate_up_swiglu = nullptr;
  const KernelVersion<kernels::GateUpSwigluArgs>* gate_up_swiglu_batched_large = nullptr;  // 4..8 rows, or none
  const KernelVersion<kernels::SampleArgs>* sample = nullptr;
  bool cublas = false;

  // (batch, context bucket, sampler) -> the captured decode step
  std::map<std::tuple<int64_t, int64_t, const void*>, cudaGraphExec_t> graphs;
  const KernelVersion<kernels::SampleArgs>* sample_plain = nullptr;  // greedy and untruncated sampling
  DeviceBuffer sample_workspace;  // sample_workspace_floats(max(max_batch, logit_rows)): v2's partials, counters
  // The sampler for the next launches: options.sample (v1_sample_topk) only when a slot samples with top-k; its
  // 1024 threads x 62 registers need a whole SM, which under PDL waits for the lm_head GEMV to drain (+0.08 ms a
  // step measured), while v0 fits beside it. Otherwise options.sample_plain.
  const KernelVersion<kernels::SampleArgs>* sampler_for(int64_t batch) const {
    for (int64_t b = 0; b < batch; ++b) {
      const SamplingParams& p = slot_params[size_t(b)];
      if (p.temperature > 0 && p.top_k > 0) return sample;
    }
    return sample_plain;
  }
  bool speculating = false;       // a decode step for slot 0 is in flight, fed with speculative_input
  int32_t speculative_input = -1;
  cudaEvent_t timing_start = nullptr, timing_stop = nullptr;  // set while decode() times its steps
  std::vector<SamplingParams> slot_params;
  std::vector<bool> slot_has_penalties;

  bool counting = false;  // set while a decode step is being issued, so launches_per_decode_step() is exact
  std::vector<KernelTiming>* profile = nullptr;  // set by profile_decode_step: one event after each launch
  std::vector<cudaEvent_t> profile_events;
  // Called after every launch of the forward pass: counts it and, when profiling, marks its end with an event.
  // bytes: the least the kernel must move (inputs read once, outputs written once).
  void count(const char* what, double bytes, int kernels = 1) {
    if (counting) *launch_counter += kernels;
    if (!profile) return;
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    CUDA_CHECK(cudaEventRecord(e, stream));
    profile_events.push_back(e);
    profile->push_back({what, 0.0, bytes});
  }

  void gemm(const char* what, const bf16* xin, const bf16* w, bf16* y, int64_t m, int64_t n, int64_t kdim,
            int64_t ldy = 0) {
    const kernels::GemmArgs a{xin, w, y, m, n, kdim, ldy};
    if (cublas) {
      kernels::launch_gemm_cublas(a, stream);
    } else {
      const auto* small = m == 1                                          ? decode_gemm
                          : m >= 4 && decode_gemm_batched_large->takes(a) ? decode_gemm_batched_large
                                                                          : decode_gemm_batched;
      const bool decode_regime = m <= 8 && small->takes(a);
      (decode_regime ? small : prefill_gemm)->launch(a, stream);
    }
    count(what, 2.0 * double(n * kdim + m * kdim + m * n));
  }
};

void CudaEngine::prepare(const EngineOptions& options) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128)
    throw InputError("the CUDA backend supports head_dim 64 or 128 (this model has " + std::to_string(c.head_dim) + ")");
  if (c.hidden_size % 8 || c.intermediate_size % 8)
    throw InputError("the CUDA backend needs hidden_size and intermediate_size to be multiples of 8");
  if (c.gqa_group() > 8) throw InputError("the CUDA backend supports at most 8 query heads per kv head");
  if (cuda_device_count() == 0) throw InputError("no CUDA device is available");
  options_ = options;
  if (options_.max_batch < 1 || options_.max_batch > 8) throw InputError("max batch must be in [1, 8]");
  if (options_.l2_persist != "off" && options_.l2_persist != "norms" && options_.l2_persist != "kv")
    throw InputError("l2_persist must be off, norms or kv, got \"" + options_.l2_persist + "\"");
  if (options_.l2_persist_bytes < 0) throw InputError("l2_persist_bytes must be >= 0");
  context_ = options_.context > 0 ? std::min(options_.context, c.max_position_embeddings)
                                  : std::min<int64_t>(c.max_position_embeddings, 16384);
  lengths_.assign(size_t(options_.max_batch), 0);

  impl_ = std::make_unique<Impl>();
  Impl& m = *impl_;
  m.launch_counter = &launches_per_step_;
  m.handoff_counter = &handoffs_per_step_;
  m.slot_params.assign(size_t(options_.max_batch), SamplingParams{});
  m.slot_has_penalties.assign(size_t(options_.max_batch), false);
}

namespace {

// EngineOptions::l2_persist: the access-policy window over the norm block or the KV cache, set on the stream for
// eager launches (apply_l2_window puts it on the graphs' kernel nodes). The set-aside is the device's maximum
// persisting L2 size, capped at the window; where the window is larger, a random hitRatio = set-aside / window of
// its lines persist. Lines outside the window, and the rest of it, keep the normal policy.
void set_up_l2_persistence(CudaEngine::Impl& m, const std::string& what, int64_t set_aside_cap) {
  if (what == "off") return;
  void* base = what == "norms" ? m.weights.as<void>() : m.kv_cache.as<void>();
  size_t bytes = what == "norms" ? m.norm_weight_bytes : m.kv_cache.bytes();
  int device = 0, max_persisting = 0, max_window = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device));
  if (max_persisting <= 0 || max_window <= 0)
    throw InputError("l2_persist: this GPU has no persisting L2 set-aside (sm_80 or later)");
  bytes = std::min(bytes, size_t(max_window));
  size_t set_aside = std::min(bytes, size_t(max_persisting));
  if (set_aside_cap > 0) set_aside = std::min(set_aside, size_t(set_aside_cap));
  CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, set_aside));
  CUDA_CHECK(cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize));  // as the driver rounded it
  m.l2_set_aside = set_aside;
  m.l2_window.base_ptr = base;
  m.l2_window.num_bytes = bytes;
  m.l2_window.hitRatio = float(std::min(1.0, double(set_aside) / double(bytes)));
  m.l2_window.hitProp = cudaAccessPropertyPersisting;
  m.l2_window.missProp = cudaAccessPropertyNormal;
  cudaStreamAttrValue value{};
  value.accessPolicyWindow = m.l2_window;
  CUDA_CHECK(cudaStreamSetAttribute(m.stream, cudaStreamAttributeAccessPolicyWindow, &value));
}

// Every kernel node of a captured graph gets the window explicitly, whatever the capture recorded of the stream's.
void apply_l2_window(cudaGraph_t graph, const cudaAccessPolicyWindow& window) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  cudaKernelNodeAttrValue value{};
  value.accessPolicyWindow = window;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel)
      CUDA_CHECK(cudaGraphKernelNodeSetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow, &value));
  }
}

}  // namespace

void CudaEngine::init() {
  const ModelConfig& c = config_;
  Impl& m = *impl_;
  CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  m.cublas = options_.cublas_gemm;
  // Process-wide: the kernels read it at launch. Off for paths that do not ask for it.
  kernels::set_programmatic_dependent_launch(options_.pdl);
  kernels::set_smem_carveout(options_.smem_carveout);
  m.decode_gemm = &kernels::find_version(kernels::gemm_versions(), options_.decode_gemm);
  m.decode_gemm_batched = &kernels::find_version(kernels::gemm_versions(), options_.decode_gemm_batched);
  m.decode_gemm_batched_large =
      &kernels::find_version(kernels::gemm_versions(), options_.decode_gemm_batched_large);
  m.prefill_gemm = &kernels::find_version(kernels::gemm_versions(), options_.prefill_gemm);
  m.decode_attention = &kernels::find_version(kernels::attention_versions(), options_.decode_attention);
  m.prefill_attention = &kernels::find_version(kernels::attention_versions(), options_.prefill_attention);
  m.norm_gemv = &kernels::find_version(kernels::norm_gemv_versions(), options_.norm_gemv);
  m.residual_gemv = &kernels::find_version(kernels::gemv_residual_versions(), options_.residual_gemv);
  m.norm_gate_up = &kernels::find_version(kernels::norm_gate_up_swiglu_versions(), options_.norm_gate_up);
  if (options_.decode_attention_o != "off")
    m.attention_o = &kernels::find_version(kernels::qkv_attention_o_versions(), options_.decode_attention_o);
  // The one-launch MLP hands its output to qkv_attention_o (sm_90 only), so it runs only beside it.
  if (options_.decode_mlp != "off" && m.attention_o && kernels::device_compute_major() >= 9 && c.num_layers > 1)
    m.mlp = &kernels::find_version(kernels::norm_mlp_versions(), options_.decode_mlp);
  // (the batched MLP's delta, and at batch 1 the last layer's: last_mlp_in_one_launch)
  if (m.mlp) m.add_delta_rmsnorm = &kernels::add_delta_rmsnorm_versions()[0];
  if (m.mlp && options_.decode_mlp_batched != "off") {
    m.mlp_batched = &kernels::find_version(kernels::norm_mlp_versions(), options_.decode_mlp_batched);
    if (options_.decode_norm_gemv_batched != "off")
      m.norm_gemv_batched = &kernels::find_version(kernels::norm_gemv_versions(), options_.decode_norm_gemv_batched);
  }
  if (options_.decode_layers != "off")
    m.decode_layers = &kernels::find_version(kernels::decode_layers_versions(), options_.decode_layers);
  if (options_.decode_qkv_attention != "off")
    m.decode_qkv_attention = &kernels::find_version(kernels::qkv_attention_versions(), options_.decode_qkv_attention);
  m.rmsnorm = &kernels::find_version(kernels::rmsnorm_versions(), options_.rmsnorm);
  m.add_rmsnorm = &kernels::find_version(kernels::add_rmsnorm_versions(), options_.add_rmsnorm);
  m.gate_up_swiglu = &kernels::find_version(kernels::gate_up_swiglu_versions(), options_.gate_up_swiglu);
  if (options_.gate_up_swiglu_batched_large != "off")
    m.gate_up_swiglu_batched_large =
        &kernels::find_version(kernels::gate_up_swiglu_versions(), options_.gate_up_swiglu_batched_large);
  m.sample = &kernels::find_version(kernels::sample_versions(), options_.sample);
  m.sample_plain = &kernels::find_version(kernels::sample_versions(), options_.sample_plain);

  const int64_t H = c.hidden_size, QD = c.q_dim(), KVD = c.kv_dim(), I = c.intermediate_size, V = c.vocab_size;
  const int64_t B = options_.max_batch;
  m.rows = std::max(options_.prefill_chunk, B);
  m.logit_rows = std::max<int64_t>(64, B);

  // KV cache and activations; the weights were allocated by the constructor.
  m.layer_cache_elems = B * context_ * KVD;
  const size_t cache_bytes = size_t(c.num_layers * m.layer_cache_elems) * sizeof(bf16);
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Every layer but the last, and the last too where its MLP runs in one launch (last_mlp_in_one_launch).
  const int64_t down_t_layers = options_.last_mlp_in_one_launch ? c.num_layers : c.num_layers - 1;
  const size_t down_t_bytes = m.mlp ? size_t(down_t_layers * I * H) * sizeof(bf16) : 0;
  const size_t activation_bytes =
      size_t(m.rows) * (3 * H + 2 * (QD + 2 * KVD) + QD + 3 * I) * 2 + size_t(m.logit_rows) * V * 2;
  if (2 * cache_bytes + activation_bytes + down_t_bytes > free_bytes)
    throw InputError("the KV cache (" + std::to_string(2 * cache_bytes >> 20) + " MiB for " +
                     std::to_string(context_) + " positions x " + std::to_string(B) + " slots), activations (" +
                     std::to_string(activation_bytes >> 20) + " MiB) and transposed down weights (" +
                     std::to_string(down_t_bytes >> 20) + " MiB, --mlp off drops them) do not fit in the " +
                     std::to_string(free_bytes >> 20) + " MiB left on the GPU: lower --ctx-size");
  if (m.mlp) {
    // down_proj transposed once, so that each CTA of the MLP reads its block of features as contiguous rows.
    m.down_t = DeviceBuffer(down_t_bytes);
    for (size_t l = 0; l < size_t(down_t_layers); ++l) {
      LayerDevice& L = m.layers[l];
      L.w_down_t = m.down_t.as<bf16>() + int64_t(l) * I * H;
      kernels::transpose_versions()[0].launch({L.w_down, L.w_down_t, H, I}, m.stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(m.stream));
    if (options_.mlp_delta_copies < 1 || options_.mlp_delta_copies > 64)
      throw InputError("mlp_delta_copies must be in [1, 64], got " + std::to_string(options_.mlp_delta_copies));
    // (copies, tokens, hidden): one token at batch 1, up to max_batch for the batched MLP (decode_mlp_batched).
    m.mlp_delta = DeviceBuffer(size_t(options_.mlp_delta_copies * B * H) * sizeof(float));
    CUDA_CHECK(cudaMemset(m.mlp_delta.as<void>(), 0, m.mlp_delta.bytes()));
    m.mlp_sync = DeviceBuffer(2 * sizeof(uint32_t));
    CUDA_CHECK(cudaMemset(m.mlp_sync.as<void>(), 0, m.mlp_sync.bytes()));
    m.qkv_claims = DeviceBuffer(2 * sizeof(uint32_t));  // norm_gemv v21's queue
    CUDA_CHECK(cudaMemset(m.qkv_claims.as<void>(), 0, m.qkv_claims.bytes()));
    for (DeviceBuffer* words : {&m.mlp_handoff, &m.qkv_handoff, &m.attention_handoff}) {
      *words = DeviceBuffer(2 * sizeof(uint32_t));
      CUDA_CHECK(cudaMemset(words->as<void>(), 0, words->bytes()));
    }
    kernels::NormMlpArgs probe{};
    probe.ctas = options_.mlp_ctas;
    m.mlp_ctas = kernels::norm_mlp_ctas(probe);
    m.mlp_lateness = DeviceBuffer(size_t(2 * m.mlp_ctas) * sizeof(uint64_t));
    CUDA_CHECK(cudaMemset(m.mlp_lateness.as<void>(), 0, m.mlp_lateness.bytes()));
    if (options_.mlp_trace) {
      m.mlp_trace = DeviceBuffer(size_t((c.num_layers - 1) * m.mlp_ctas * kernels::kNormMlpTraceEvents) *
                                 sizeof(uint64_t));
      CUDA_CHECK(cudaMemset(m.mlp_trace.as<void>(), 0, m.mlp_trace.bytes()));
      m.qkv_trace = DeviceBuffer(size_t(c.num_layers * kernels::device_sm_count() * kernels::kNormGemvTraceEvents) *
                                 sizeof(uint64_t));
      CUDA_CHECK(cudaMemset(m.qkv_trace.as<void>(), 0, m.qkv_trace.bytes()));
    }
  }
  m.kv_cache = DeviceBuffer(2 * cache_bytes);
  set_up_l2_persistence(m, options_.l2_persist, options_.l2_persist_bytes);
  auto bf16_buffer = [](int64_t elems) { return DeviceBuffer(size_t(elems) * sizeof(bf16)); };
  m.h = bf16_buffer(m.rows * H);
  m.x = bf16_buffer(m.rows * H);
  m.tmp = bf16_buffer(m.rows * H);
  m.qkv = bf16_buffer(m.rows * (QD + 2 * KVD));
  m.q = bf16_buffer(m.rows * QD);
  m.k = bf16_buffer(m.rows * KVD);
  m.v = bf16_buffer(m.rows * KVD);
  m.attn = bf16_buffer(m.rows * QD);
  m.gate_up = bf16_buffer(m.rows * 2 * I);
  m.act = bf16_buffer(m.rows * I);
  m.logits = bf16_buffer(m.logit_rows * V);
  m.prefill_ids = DeviceBuffer(size_t(m.rows) * 4);
  m.prefill_positions = DeviceBuffer(size_t(m.rows) * 4);
  m.prefill_slots = DeviceBuffer(size_t(m.rows) * 4);
  m.next_ids = DeviceBuffer(size_t(B) * 4);
  m.next_positions = DeviceBuffer(size_t(B) * 4);
  m.decode_slots = DeviceBuffer(size_t(B) * 4);
  m.sampling = DeviceBuffer(size_t(B) * sizeof(kernels::DeviceSampling));
  m.greedy = DeviceBuffer(size_t(m.logit_rows) * sizeof(kernels::DeviceSampling));
  m.steps = DeviceBuffer(size_t(B) * 8);
  m.sampled = DeviceBuffer(size_t(std::max(B, m.logit_rows)) * 4);
  m.sample_workspace = DeviceBuffer(size_t(kernels::sample_workspace_floats(std::max(B, m.logit_rows), V)) * 4);
  CUDA_CHECK(cudaMemset(m.sample_workspace.as<void>(), 0, m.sample_workspace.bytes()));  // v2's row counters
  m.counts = DeviceBuffer(size_t(B * V) * 4);
  m.in_prompt = DeviceBuffer(size_t(B * V));
  m.attention_workspace =
      DeviceBuffer(size_t(kernels::attention_workspace_floats(B, c.num_heads, c.head_dim, context_)) * 4);
  CUDA_CHECK(cudaMemset(m.attention_workspace.as<void>(), 0, m.attention_workspace.bytes()));  // merge counters
  m.norm_partials = DeviceBuffer(size_t(B * kernels::kMaxNormPartials) * sizeof(float));
  if (m.attention_o) {
    m.attention_o_workspace = DeviceBuffer(size_t(kernels::qkv_attention_o_workspace_floats(
                                               c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim)) *
                                           sizeof(float));
    // All of it zero once: the counters, and for qkv_attention_o v35 its launch count and tagged words (a word's tag
    // is then never one a later launch polls for before writing it).
    CUDA_CHECK(cudaMemset(m.attention_o_workspace.as<void>(), 0, m.attention_o_workspace.bytes()));
    if (options_.attention_o_trace) {
      m.attention_o_trace = DeviceBuffer(size_t(c.num_layers * kernels::qkv_attention_o_partials(c.hidden_size,
                                                                                                 c.num_kv_heads) *
                                                kernels::kQkvAttentionOTraceEvents) *
                                         sizeof(uint64_t));
      CUDA_CHECK(cudaMemset(m.attention_o_trace.as<void>(), 0, m.attention_o_trace.bytes()));
    }
  }
  if (m.decode_layers) {
    std::vector<kernels::DecodeLayerWeights> table;
    for (const LayerDevice& L : m.layers)
      table.push_back({L.input_norm, L.post_norm, L.q_norm, L.k_norm, L.wqkv, L.wo, L.w_gate_up, L.w_down});
    m.decode_layer_table = DeviceBuffer(table.size() * sizeof(table[0]));
    CUDA_CHECK(cudaMemcpy(m.decode_layer_table.as<void>(), table.data(), table.size() * sizeof(table[0]),
                          cudaMemcpyHostToDevice));
    m.decode_layers_workspace =
        DeviceBuffer(size_t(kernels::decode_layers_workspace_floats(c.num_kv_heads, c.head_dim)) * sizeof(float));
    m.decode_layers_sync =
        DeviceBuffer(size_t(kernels::decode_layers_sync_words(c.num_layers, c.num_kv_heads)) * sizeof(uint32_t));
    CUDA_CHECK(cudaMemset(m.decode_layers_sync.as<void>(), 0, m.decode_layers_sync.bytes()));
  }
  m.host_ints_capacity = std::max(m.rows, m.logit_rows) * 2;
  m.host_ints = PinnedBuffer(size_t(m.host_ints_capacity) * 4);

  const RopeTable rope = make_rope_table(c);
  m.inv_freq = DeviceBuffer(rope.inv_freq.size() * sizeof(float));
  CUDA_CHECK(cudaMemcpy(m.inv_freq.as<float>(), rope.inv_freq.data(), rope.inv_freq.size() * 4, cudaMemcpyHostToDevice));
  m.attention_factor = rope.attention_factor;

  std::vector<int32_t> slot_ids(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) slot_ids[size_t(b)] = int32_t(b);
  CUDA_CHECK(cudaMemcpy(m.decode_slots.as<int32_t>(), slot_ids.data(), size_t(B) * 4, cudaMemcpyHostToDevice));
  std::vector<kernels::DeviceSampling> greedy(size_t(m.logit_rows), to_device(SamplingParams{0.0}));
  CUDA_CHECK(cudaMemcpy(m.greedy.as<void>(), greedy.data(), greedy.size() * sizeof(greedy[0]), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(m.counts.as<void>(), 0, m.counts.bytes()));
  CUDA_CHECK(cudaMemset(m.in_prompt.as<void>(), 0, m.in_prompt.bytes()));
  CUDA_CHECK(cudaMemset(m.next_ids.as<void>(), 0, m.next_ids.bytes()));
  CUDA_CHECK(cudaMemset(m.next_positions.as<void>(), 0, m.next_positions.bytes()));
  for (int64_t b = 0; b < B; ++b) set_sampling(b, SamplingParams{});

  const int64_t per_layer = (QD + 2 * KVD) * H + H * QD + 2 * I * H + H * I + 2 * H + 2 * c.head_dim;
  m.layer_weight_bytes = per_layer * int64_t(sizeof(bf16));
  m.decode_weight_bytes = (c.num_layers * per_layer + H + V * H) * int64_t(sizeof(bf16));

  // One eager decode step on dummy state: loads every kernel module and runs one-time setup (shared-memory
  // attributes, cuBLAS handles) outside any graph capture. Slot 0 position 0 of the cache gets overwritten later.
  run_decode_step(1, 0);
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  CUDA_CHECK(cudaMemset(m.counts.as<void>(), 0, m.counts.bytes()));
  CUDA_CHECK(cudaMemset(m.next_positions.as<void>(), 0, m.next_positions.bytes()));
  CUDA_CHECK(cudaMemset(m.steps.as<void>(), 0, m.steps.bytes()));
}

namespace {

// Device layout of all weights: one allocation, every tensor 256-byte aligned. Every RMSNorm weight comes first,
// in one block [0, norms_end), so that one L2 access-policy window covers them (EngineOptions::l2_persist).
struct WeightLayout {
  size_t embed = 0, final_norm = 0, lm_head = 0, norms_end = 0, total = 0;
  struct Layer {
    size_t input_norm, post_norm, q_norm, k_norm, wqkv, wo, w_gate_up, w_down;
  };
  std::vector<Layer> layers;
};

WeightLayout plan_weights(const ModelConfig& c) {
  const int64_t H = c.hidden_size, QD = c.q_dim(), KVD = c.kv_dim(), I = c.intermediate_size, V = c.vocab_size;
  WeightLayout w;
  size_t offset = 0;
  auto take = [&](int64_t elems) {
    const size_t at = offset;
    offset += align_up(size_t(elems) * sizeof(bf16));
    return at;
  };
  w.layers.resize(size_t(c.num_layers));
  for (WeightLayout::Layer& L : w.layers) {
    L.input_norm = take(H);
    L.post_norm = take(H);
    L.q_norm = take(c.head_dim);
    L.k_norm = take(c.head_dim);
  }
  w.final_norm = take(H);
  w.norms_end = offset;
  w.embed = take(V * H);
  for (WeightLayout::Layer& L : w.layers) {
    L.wqkv = take((QD + 2 * KVD) * H);
    L.wo = take(H * QD);
    L.w_gate_up = take(2 * I * H);
    L.w_down = take(H * I);
  }
  w.lm_head = c.tie_word_embeddings ? w.embed : take(V * H);
  w.total = offset;
  return w;
}

void bind_layout(const WeightLayout& layout, const DeviceBuffer& buffer, bf16*& embed, bf16*& final_norm,
                 bf16*& lm_head, std::vector<LayerDevice>& layers) {
  auto* base = buffer.as<unsigned char>();
  auto at = [&](size_t offset) { return reinterpret_cast<bf16*>(base + offset); };
  embed = at(layout.embed);
  final_norm = at(layout.final_norm);
  lm_head = at(layout.lm_head);
  layers.clear();
  for (const auto& L : layout.layers)
    layers.push_back({at(L.input_norm), at(L.post_norm), at(L.q_norm), at(L.k_norm), at(L.wqkv), at(L.wo),
                      at(L.w_gate_up), at(L.w_down)});
}

DeviceBuffer allocate_weights(size_t bytes) {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes > free_bytes)
    throw InputError("the model's weights need " + std::to_string(bytes >> 20) + " MiB of GPU memory but only " +
                     std::to_string(free_bytes >> 20) + " MiB are free");
  return DeviceBuffer(bytes);
}

// Copies one checkpoint tensor into device memory as bf16 (converting F16/F32 on the host).
void upload_tensor(const TensorView& t, bf16* dst) {
  const size_t n = size_t(t.numel());
  if (t.dtype == DType::BF16) {
    CUDA_CHECK(cudaMemcpy(dst, t.data, n * 2, cudaMemcpyHostToDevice));
    return;
  }
  std::vector<uint16_t> converted(n);
  const auto* f16 = static_cast<const uint16_t*>(t.data);
  const auto* f32 = static_cast<const float*>(t.data);
  for (size_t i = 0; i < n; ++i) converted[i] = f32_to_bf16(t.dtype == DType::F16 ? f16_to_f32(f16[i]) : f32[i]);
  CUDA_CHECK(cudaMemcpy(dst, converted.data(), n * 2, cudaMemcpyHostToDevice));
}

}  // namespace

CudaEngine::CudaEngine(const Checkpoint& checkpoint, const EngineOptions& options) : config_(checkpoint.config()) {
  prepare(options);
  const Qwen3Weights w = bind_qwen3_weights(checkpoint);
  Impl& m = *impl_;
  const WeightLayout layout = plan_weights(config_);
  m.weights = allocate_weights(layout.total);
  m.norm_weight_bytes = layout.norms_end;
  bind_layout(layout, m.weights, m.embed, m.final_norm, m.lm_head, m.layers);
  const int64_t H = config_.hidden_size, QD = config_.q_dim(), KVD = config_.kv_dim(), I = config_.intermediate_size;
  upload_tensor(w.embed, m.embed);
  upload_tensor(w.final_norm, m.final_norm);
  if (!config_.tie_word_embeddings) upload_tensor(w.lm_head, m.lm_head);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const LayerWeights& src = w.layers[l];
    const LayerDevice& dst = m.layers[l];
    upload_tensor(src.input_norm, dst.input_norm);
    upload_tensor(src.post_norm, dst.post_norm);
    upload_tensor(src.q_norm, dst.q_norm);
    upload_tensor(src.k_norm, dst.k_norm);
    upload_tensor(src.q_proj, dst.wqkv);
    upload_tensor(src.k_proj, dst.wqkv + QD * H);
    upload_tensor(src.v_proj, dst.wqkv + (QD + KVD) * H);
    upload_tensor(src.o_proj, dst.wo);
    upload_tensor(src.gate_proj, dst.w_gate_up);
    upload_tensor(src.up_proj, dst.w_gate_up + I * H);
    upload_tensor(src.down_proj, dst.w_down);
  }
  init();
}

CudaEngine::CudaEngine(const ModelConfig& config, uint64_t seed, const EngineOptions& options) : config_(config) {
  prepare(options);
  Impl& m = *impl_;
  const WeightLayout layout = plan_weights(config_);
  m.weights = allocate_weights(layout.total);
  m.norm_weight_bytes = layout.norms_end;
  bind_layout(layout, m.weights, m.embed, m.final_norm, m.lm_head, m.layers);
  const int64_t H = config_.hidden_size, QD = config_.q_dim(), KVD = config_.kv_dim(), I = config_.intermediate_size;
  const int64_t V = config_.vocab_size;
  uint64_t stream_id = seed * 1000003;
  auto fill = [&](bf16* p, int64_t n, float scale, float offset) {
    fill_uniform_kernel<<<1024, 256, 0, m.stream>>>(p, n, ++stream_id, scale, offset);
    CUDA_CHECK_LAUNCH();
  };
  // Uniform with the variance of tests/gen_golden.py's recipe: unit-variance linear outputs, norms in [0.5, 1.5).
  const float kSqrt3 = 1.7320508f;
  fill(m.embed, V * H, kSqrt3, 0.0f);
  fill(m.final_norm, H, 0.5f, 1.0f);
  if (!config_.tie_word_embeddings) fill(m.lm_head, V * H, kSqrt3 * 2.5f / std::sqrt(float(H)), 0.0f);
  for (const LayerDevice& L : m.layers) {
    fill(L.input_norm, H, 0.5f, 1.0f);
    fill(L.post_norm, H, 0.5f, 1.0f);
    fill(L.q_norm, config_.head_dim, 0.5f, 1.0f);
    fill(L.k_norm, config_.head_dim, 0.5f, 1.0f);
    fill(L.wqkv, (QD + 2 * KVD) * H, kSqrt3 / std::sqrt(float(H)), 0.0f);
    fill(L.wo, H * QD, kSqrt3 / std::sqrt(float(QD)), 0.0f);
    fill(L.w_gate_up, 2 * I * H, kSqrt3 / std::sqrt(float(H)), 0.0f);
    fill(L.w_down, H * I, kSqrt3 / std::sqrt(float(I)), 0.0f);
  }
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  init();
}

CudaEngine::L2Persistence CudaEngine::l2_persistence() const {
  const Impl& m = *impl_;
  return {int64_t(m.l2_window.num_bytes), int64_t(m.l2_set_aside), m.l2_window.hitRatio};
}

CudaEngine::~CudaEngine() {
  if (!impl_) return;
  if (impl_->stream) cudaStreamSynchronize(impl_->stream);  // a speculative step may still write pinned memory
  for (auto& [key, exec] : impl_->graphs) cudaGraphExecDestroy(exec);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
  if (impl_->l2_window.num_bytes) {  // the set-aside and its persisting lines are the device's, not this engine's
    cudaCtxResetPersistingL2Cache();
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  }
}

namespace {

// The layers of the forward pass for `rows` tokens whose ids/positions/slots are already on the device, read as
// a flat list of launches. On return x holds the final-normed hidden states (rows, hidden).
void run_layers(CudaEngine::Impl& m, const ModelConfig& c, const EngineOptions& o, int64_t rows,
                const int32_t* positions, const int32_t* slots, int64_t context, int64_t max_position, bool decode) {
  const int64_t H = c.hidden_size, QD = c.q_dim(), KVD = c.kv_dim(), I = c.intermediate_size, D = c.head_dim;
  const float eps = float(c.rms_norm_eps);
  bf16* h = m.h.as<bf16>();
  bf16* x = m.x.as<bf16>();
  bf16* q = m.q.as<bf16>();
  bf16* attn = m.attn.as<bf16>();
  bf16* tmp = m.tmp.as<bf16>();
  bf16* gate_up = m.gate_up.as<bf16>();
  bf16* act = m.act.as<bf16>();
  const cudaStream_t s = m.stream;
  auto rmsnorm = [&](const bf16* in, const bf16* w, bf16* out, int64_t n_rows, int64_t n) {
    m.rmsnorm->launch({in, w, out, n_rows, n, eps}, s);
    m.count("rmsnorm", 2.0 * double(2 * n_rows * n + n));
  };
  auto add_rmsnorm = [&](const bf16* w) {
    m.add_rmsnorm->launch({h, tmp, w, x, rows, H, eps}, s);
    m.count("add_rmsnorm", 2.0 * double(4 * rows * H + H));
  };
  // h = bf16(h + bf16(Σ delta copies)), then + addend where given; the copies zeroed; x = norm(h) with `w`.
  // launch false: counted, not launched (--skip).
  auto add_delta_rmsnorm = [&](const bf16* w, const bf16* addend = nullptr, bool launch = true) {
    if (launch)
      m.add_delta_rmsnorm->launch({h, m.mlp_delta.as<float>(), o.mlp_delta_copies, w, x, rows, H, eps, addend}, s);
    m.count("add_delta_rmsnorm",
            2.0 * double((addend ? 4 : 3) * rows * H + H) + 8.0 * double(o.mlp_delta_copies * rows * H));
  };
  const kernels::KernelVersion<kernels::AttentionArgs>* attention =
      decode ? m.decode_attention : m.prefill_attention;
  kernels::AttentionArgs attention_args{q, nullptr, nullptr, attn, positions, slots, rows, c.num_heads,
                                        c.num_kv_heads, D, context, max_position, 1.0f / std::sqrt(float(D)),
                                        m.attention_workspace.as<float>()};
  if (!attention->takes(attention_args)) attention = m.prefill_attention;
  const auto trigger = [&](const char* site) {
    const auto it = o.pdl_trigger.find(site);
    return it == o.pdl_trigger.end() ? 0.0f : it->second;
  };
  // Bytes the fused attention and the O GEMV with its residual add move (m.count), apart or as one launch.
  const double qkv_attention_bytes = 2.0 * double(rows * (QD + 2 * KVD) + 2 * rows * KVD + rows * QD) +
                                     2.0 * double(2 * KVD * max_position * rows);
  const double o_residual_bytes = 2.0 * double(H * QD + rows * QD + 2 * rows * H);
  // prefetch_o: the attention pulls the o rows into L2 for the O GEMV behind it (not for v7_mlp_with_o, whose ring
  // streams them).
  const auto qkv_attention_args = [&](const LayerDevice& L, bf16* k_cache, bf16* v_cache, bool prefetch_o = true) {
    const int64_t o_bytes = H * QD * int64_t(sizeof(bf16));
    return kernels::QkvAttentionArgs{{m.qkv.as<bf16>(), L.q_norm, L.k_norm, q, k_cache, v_cache, positions, slots,
                                      m.inv_freq.as<float>(), m.attention_factor, eps, rows, c.num_heads,
                                      c.num_kv_heads, D, context},
                                     attn,
                                     max_position,
                                     1.0f / std::sqrt(float(D)),
                                     m.attention_workspace.as<float>(),
                                     L.wo,
                                     prefetch_o ? std::min(o_bytes, o.attention_l2_prefetch_bytes) / 16 * 16 : 0,
                                     trigger("qkv_attention")};
  };
  // The fused decode attention (QK-norm, RoPE, cache store, attention in one launch) when chosen and supported.
  // Returns false where the caller must run qk_norm_rope_cache and the attention kernel instead.
  const auto fused_attention = [&](const LayerDevice& L, bf16* k_cache, bf16* v_cache, bool prefetch_o = true) {
    if (!decode || !o.fused || !m.decode_qkv_attention) return false;
    const kernels::QkvAttentionArgs a = qkv_attention_args(L, k_cache, v_cache, prefetch_o);
    if (!m.decode_qkv_attention->takes(a)) return false;
    if (o.skip_launches.count("qkv_attention") == 0) m.decode_qkv_attention->launch(a, s);
    m.count("qkv_attention", qkv_attention_bytes, m.decode_qkv_attention->kernels_per_launch);
    return true;
  };

  if (decode && o.fused && o.fold_norms && o.fused_swiglu && !m.cublas && rows == 1) {
    // The decode layer with the residual adds and RMSNorms folded into the GEMVs (kernels.h): 6 launches.
    // PRECOND: the embedding left its sums of squares in norm_partials (v1_embedding_stats).
    float* partials = m.norm_partials.as<float>();
    int64_t partial_count = 1;
    const auto kept = [&](const char* what) { return o.skip_launches.count(what) == 0; };
    // The chosen version, or the op's first where the chosen one does not support the shape or device.
    const auto chosen_or_first = [&]<class Args>(const KernelVersion<Args>* chosen,
                                                 const std::vector<KernelVersion<Args>>& versions,
                                                 const std::type_identity_t<Args>& args) {
      return chosen->takes(args) ? chosen : &versions[0];
    };
    const auto launch_or_first = [&]<class Args>(const KernelVersion<Args>* chosen,
                                                 const std::vector<KernelVersion<Args>>& versions,
                                                 const std::type_identity_t<Args>& args) {
      chosen_or_first(chosen, versions, args)->launch(args, s);
    };
    // Launches the residual GEMV; returns how many partial sums of squares per token it left for the next norm.
    const auto residual = [&](const kernels::GemvResidualArgs& a) -> int64_t {
      const auto* v = chosen_or_first(m.residual_gemv, kernels::gemv_residual_versions(), a);
      v->launch(a, s);
      return std::string_view(v->name) == "v9_gemv_residual_tma" ? kernels::gemv_residual_tma_partials(a.m, a.n)
                                                                 : kernels::gemv_residual_partials(a.m, a.n);
    };
    if (m.decode_layers) {
      // Every layer in one persistent launch where the version supports the shape and device.
      const kernels::DecodeLayersArgs a{m.decode_layer_table.as<kernels::DecodeLayerWeights>(),
                                        c.num_layers, H, c.num_heads, c.num_kv_heads, D, I, context,
                                        h, m.qkv.as<bf16>(), attn, act, m.k_cache(), m.v_cache(),
                                        m.layer_cache_elems, positions, slots, m.inv_freq.as<float>(),
                                        m.attention_factor, eps, 1.0f / std::sqrt(float(D)), max_position,
                                        m.decode_layers_workspace.as<float>(), m.decode_layers_sync.as<uint32_t>()};
      if (m.decode_layers->takes(a)) {
        if (kept("decode_layers")) m.decode_layers->launch(a, s);
        m.count("decode_layers", double(c.num_layers) * (double(m.layer_weight_bytes) +
                                                          2.0 * double(2 * KVD * (max_position + 1))));
        rmsnorm(h, m.final_norm, x, rows, H);
        return;
      }
    }
    // Layer L's QKV norm GEMV (layer index l) over h, with the previous MLP's delta where given.
    const auto qkv_gemv_args = [&](const LayerDevice& L, float* delta, size_t l) {
      kernels::NormGemvArgs a{h, partials, partial_count, L.input_norm, eps, L.wqkv, m.qkv.as<bf16>(), rows,
                              QD + 2 * KVD, H, trigger("gemm_qkv_norm")};
      a.residual_delta = delta;
      a.delta_copies = delta ? o.mlp_delta_copies : 1;
      a.l2_first_bytes = o.qkv_l2_first_bytes / 16 * 16;
      a.prewait_groups = o.qkv_prewait_groups;
      a.claims = m.qkv_claims.as<uint32_t>();  // (v21)
      a.claim_static_groups = o.qkv_claim_static_groups;
      a.prewait_window = o.qkv_prewait_window;
      a.late_cta_from = o.qkv_late_cta_from;
      a.late_prewait_groups = o.qkv_late_prewait_groups;
      a.row_ramp_permille = o.qkv_row_ramp_permille;
      a.row_ramp_first_cta = o.qkv_row_ramp_first_cta;
      if (o.mlp_trace && m.qkv_trace.bytes() > 0)
        a.trace = m.qkv_trace.as<uint64_t>() + int64_t(l) * kernels::device_sm_count() *
                                                   kernels::kNormGemvTraceEvents;
      return a;
    };
    // The QKV GEMV's bytes (its weights, input, output and the delta it norms over).
    const auto qkv_norm_bytes = [&](const float* residual_delta) {
      return 2.0 * double((QD + 2 * KVD) * H + rows * H + rows * (QD + 2 * KVD)) +
             (residual_delta ? 4.0 * double(o.mlp_delta_copies * rows * H) : 0.0);
    };
    // The attention and the o projection in one launch where chosen and supported; returns false where the caller
    // runs them as two. with_qkv: the QKV GEMV too (v8_qkv_attention_o_wavefront), false where the chosen version
    // does not take it (the caller then launches the QKV GEMV and asks again without).
    // Layer L's QkvAttentionOArgs with the options' tuning fields; the callers add the rest.
    const auto attention_o_args = [&](const LayerDevice& L, bf16* k_cache, bf16* v_cache, float* norm_partials) {
      kernels::QkvAttentionOArgs a{qkv_attention_args(L, k_cache, v_cache),
                                   L.wo,
                                   h,
                                   norm_partials,
                                   H,
                                   m.attention_o_workspace.as<float>(),
                                   o.attention_o_keys_per_split,
                                   o.attention_o_smem_bytes,
                                   o.attention_o_l2_prefetch_rows,
                                   o.attention_o_ring_stages,
                                   o.attention_o_chain_steps};
      a.claims_ahead = o.attention_o_claims_ahead;
      a.claim_static_tiles = o.attention_o_claim_static_tiles;
      a.late_rows = o.attention_o_late_rows;
      a.warm_code = o.attention_o_warm_code;
      a.stage_window = o.attention_o_stage_window;
      a.split_staging = o.attention_o_split_staging;
      a.stage_burst = o.attention_o_stage_burst;
      a.split_prewait_rows = o.attention_o_split_prewait_rows;
      a.mlp_lead_window = o.attention_o_mlp_lead_window;
      a.mlp_lead_skip_rows = o.attention_o_mlp_lead_skip_rows;
      a.mlp_lead_policy = o.attention_o_mlp_lead_policy;
      a.handoff_rows = o.attention_o_handoff_rows;
      return a;
    };
    // Counter hand-offs between the layer's launches (kernels/common/handoff.cuh) in place of their PDL waits, each
    // where the versions on both sides take part (KernelVersion::handoff): MLP -> next QKV GEMV, QKV GEMV ->
    // attention launch, attention launch -> MLP. Decided below, once the launches' forms are known; a version
    // without it would ignore the words, and a consumer would then wait for a count nobody makes, or a count be left
    // set for the next one. *_pending: a count signalled and not yet taken (a launch must take it next).
    bool mlp_to_qkv = false, qkv_to_attention = false, attention_to_mlp = false;
    bool mlp_pending = false, qkv_pending = false, attention_pending = false;
    uint32_t* const mlp_words = m.mlp_handoff.as<uint32_t>();
    uint32_t* const qkv_words = m.qkv_handoff.as<uint32_t>();
    uint32_t* const attention_words = m.attention_handoff.as<uint32_t>();
    const int64_t attention_ctas = kernels::qkv_attention_o_partials(H, c.num_kv_heads);
    const auto count_handoff = [&] {
      if (m.counting) ++*m.handoff_counter;
    };
    // A launch's args (NormMlpArgs, NormGemvArgs or QkvAttentionOArgs, whose hand-off fields are named alike) with
    // its hand-offs: where `wait`, the count of `producers` CTAs in `wait_words` in place of its PDL wait; where
    // `signal_words`, its own count for the next launch.
    const auto with_handoffs = [&](auto a, bool wait, uint32_t* wait_words, int64_t producers,
                                   uint32_t* signal_words) {
      if (wait) {
        a.handoff = wait_words;
        a.handoff_producers = int32_t(producers);
        a.handoff_poll_ns = o.handoff_poll_ns;
      }
      a.handoff_signal = signal_words;
      return a;
    };
    // Each launch's form of it: the QKV GEMV waits on the MLP and signals the attention launch, which signals the
    // MLP, which signals the next QKV GEMV.
    const auto attention_handoffs = [&](const kernels::QkvAttentionOArgs& a, bool wait) {
      return with_handoffs(a, wait, qkv_words, kernels::device_sm_count(),  // (norm_gemv v25's grid)
                           attention_to_mlp ? attention_words : nullptr);
    };
    const auto mlp_handoffs = [&](const kernels::NormMlpArgs& a, bool wait, bool signal) {
      return with_handoffs(a, wait, attention_words, attention_ctas, signal && mlp_to_qkv ? mlp_words : nullptr);
    };
    const auto qkv_handoffs = [&](const kernels::NormGemvArgs& a, bool wait) {
      return with_handoffs(a, wait, mlp_words, m.mlp_ctas, qkv_to_attention ? qkv_words : nullptr);
    };
    const auto took_mlp_handoffs = [&](const kernels::NormMlpArgs& a) {
      if (a.handoff != nullptr) count_handoff();
      attention_pending = false;
      mlp_pending = a.handoff_signal != nullptr;
    };
    const auto fused_attention_o = [&](const LayerDevice& L, bf16* k_cache, bf16* v_cache, float* norm_partials,
                                       int64_t& partial_count, float* residual_delta, bool with_qkv) {
      if (!m.attention_o || !m.decode_qkv_attention) return false;  // (qkv_attention off: the unfused attention)
      const int64_t ctas = kernels::qkv_attention_o_partials(H, c.num_kv_heads);
      kernels::QkvAttentionOArgs a = attention_o_args(L, k_cache, v_cache, norm_partials);
      a.residual_delta = residual_delta;
      a.delta_copies = residual_delta ? o.mlp_delta_copies : 1;
      // (v7, v27) The next launch's MLP rows into L2 from the CTAs that do not attend, where that MLP is one launch.
      if (m.mlp) {
        a.mlp_w_gate_up = L.w_gate_up;
        a.mlp_inter = I;
        a.mlp_ctas = int32_t(m.mlp_ctas);
        a.mlp_lead_bytes = o.mlp_l2_lead_bytes / 16 * 16;
      }
      if (o.attention_o_trace)
        a.trace = m.attention_o_trace.as<uint64_t>() + int64_t(&L - m.layers.data()) * ctas *
                                                          kernels::kQkvAttentionOTraceEvents;
      if (with_qkv) {
        a.w_qkv = L.wqkv;
        a.qkv_norm_weight = L.input_norm;
        a.qkv_norm_partials = norm_partials;  // (read before this launch writes its own partials there)
        a.qkv_partial_count = partial_count;
        a.qkv_out = m.qkv.as<bf16>();
      }
      if (!with_qkv) a = attention_handoffs(a, qkv_pending);
      if (!m.attention_o->takes(a)) return false;
      if (with_qkv && !m.attention_o->supports) return false;  // (a version that cannot say it takes the QKV)
      if (kept("qkv_attention_o")) m.attention_o->launch(a, s);
      if (!with_qkv) {
        if (a.handoff != nullptr) count_handoff();
        qkv_pending = false;
        attention_pending = a.handoff_signal != nullptr;
      }
      // The O GEMV's read of the attention output stays on chip; a delta is read and zeroed.
      m.count("qkv_attention_o", qkv_attention_bytes + o_residual_bytes - 2.0 * double(rows * QD) +
                                     (residual_delta ? 8.0 * double(o.mlp_delta_copies * H) : 0.0) +
                                     (with_qkv ? qkv_norm_bytes(residual_delta) : 0.0));
      partial_count = ctas;
      return true;
    };
    // The one-launch MLP (NormMlpArgs) leaves its output in mlp_delta; the next layer's QKV GEMV norms
    // h + delta and its qkv_attention_o adds the delta to h (and zeroes it). So it runs only where that launch
    // will run, which depends on the step's shape alone: asked once here, for the first layer.
    // v3 also runs the next layer's QKV GEMV (next != nullptr), after a grid-wide wait for the delta.
    const auto mlp_args = [&](const LayerDevice& L, const LayerDevice* next) {
      kernels::NormMlpArgs a{h, partials, partial_count, L.post_norm, eps, L.w_gate_up, L.w_down_t,
                             m.mlp_delta.as<float>(), H, I, o.mlp_ctas, o.mlp_prewait_rows, o.mlp_delta_copies};
      a.prewait_window = o.mlp_prewait_window;
      a.late_cta_from = o.mlp_late_cta_from;
      a.late_prewait_groups = o.mlp_late_prewait_groups;
      a.beside_stages = o.mlp_beside_stages;
      a.beside_l2_groups = o.mlp_beside_l2_groups;
      if (next) {
        a.next_norm_weight = next->input_norm;
        a.w_next = next->wqkv;
        a.next_out = m.qkv.as<bf16>();
        a.next_rows = QD + 2 * KVD;
        a.sync = m.mlp_sync.as<uint32_t>();
      }
      const int64_t layer = int64_t(&L - m.layers.data());
      // (v4) The next kernel's weights into L2 at the launch's tail: the next layer's QKV GEMV, where it runs.
      if (!next && size_t(layer) + 1 < m.layers.size()) {
        a.l2_prefetch = m.layers[size_t(layer) + 1].wqkv;
        a.l2_prefetch_bytes = std::min<int64_t>((QD + 2 * KVD) * H * 2, o.mlp_l2_prefetch_bytes) / 16 * 16;
      }
      a.skew_from = o.mlp_skew_from;
      a.skew_permille = o.mlp_skew_permille;
      a.lateness_in = m.mlp_lateness.as<uint64_t>() + ((layer + 1) % 2) * m.mlp_ctas;
      a.lateness_out = m.mlp_lateness.as<uint64_t>() + (layer % 2) * m.mlp_ctas;
      if (o.mlp_lateness_permille_per_us >= 0) a.lateness_permille_per_us = o.mlp_lateness_permille_per_us;
      if (o.mlp_lateness_max_features >= 0) a.lateness_max_features = o.mlp_lateness_max_features;
      if (o.mlp_trace && size_t(layer) + 1 < m.layers.size())  // (the trace holds the layers before the last)
        a.trace = m.mlp_trace.as<uint64_t>() + layer * m.mlp_ctas * kernels::kNormMlpTraceEvents;
      // (v8) The CTAs resident long before the PDL release, on the SMs the attention launch leaves free, pull the
      // first bytes of the other CTAs' rows into L2 while the attention runs.
      a.l2_lead_ctas = o.mlp_l2_lead_ctas >= 0
                           ? o.mlp_l2_lead_ctas
                           : int32_t(std::max<int64_t>(0, kernels::device_sm_count() -
                                                              kernels::qkv_attention_o_partials(H, c.num_kv_heads)));
      a.l2_lead_bytes = o.mlp_l2_lead_bytes / 16 * 16;
      return a;
    };
    // v7 (NormMlpArgs::w_o): the o projection in the MLP's launch, behind the attention alone (qkv_attention, which
    // then pulls no o rows into L2: the MLP's ring streams them). The last layer keeps qkv_attention_o.
    const auto mlp_with_o_args = [&](const LayerDevice& L) {
      kernels::NormMlpArgs a = mlp_args(L, nullptr);  // (its launcher drops v4's l2_prefetch)
      a.w_o = L.wo;
      a.attention_out = attn;
      a.o_residual = h;
      a.o_partials = partials;
      a.q_dim = QD;
      a.o_ctas = o.mlp_o_ctas;
      a.o_ahead_groups = o.mlp_o_ahead;
      a.sync = m.mlp_sync.as<uint32_t>();
      return a;
    };
    bool mlp_in_one_launch = false, mlp_runs_next_qkv = false, mlp_with_o = false;
    if (m.mlp && m.attention_o && m.decode_qkv_attention && m.layers.size() > 1) {
      const kernels::QkvAttentionOArgs a = attention_o_args(m.layers[0], m.k_cache(), m.v_cache(), partials);
      if (m.attention_o->takes(a)) {
        mlp_runs_next_qkv = m.mlp->takes(mlp_args(m.layers[0], &m.layers[1]));
        mlp_in_one_launch = mlp_runs_next_qkv || m.mlp->takes(mlp_args(m.layers[0], nullptr));
        mlp_with_o = !mlp_in_one_launch && m.mlp->supports && m.mlp->takes(mlp_with_o_args(m.layers[0]));
      }
    }
    // The hand-offs (above): only in the batch-1 layer of three launches (the QKV GEMV, the attention launch, the
    // one-launch MLP), each where both sides' versions take part and both launches run; all off where one of the
    // three chosen versions refuses its hand-off fields at this shape (norm_mlp v19 and norm_gemv v25 take hidden
    // 4096 only).
    if (mlp_in_one_launch && !mlp_runs_next_qkv && m.attention_o) {
      const bool mlp_hands_off = m.mlp->handoff && kept("mlp_split_down");
      const bool qkv_hands_off = m.norm_gemv->handoff && kept("gemm_qkv_norm");
      const bool attention_hands_off = m.attention_o->handoff && kept("qkv_attention_o");
      mlp_to_qkv = mlp_hands_off && qkv_hands_off;
      qkv_to_attention = qkv_hands_off && attention_hands_off;
      attention_to_mlp = attention_hands_off && mlp_hands_off;
      // Each launch as at layer 1 (every hand-off it takes part in).
      kernels::QkvAttentionOArgs attention_probe =
          attention_o_args(m.layers[0], m.k_cache(), m.v_cache(), partials);
      attention_probe.residual_delta = m.mlp_delta.as<float>();
      attention_probe.delta_copies = o.mlp_delta_copies;
      if (!m.mlp->takes(mlp_handoffs(mlp_args(m.layers[0], nullptr), attention_to_mlp, true)) ||
          !m.norm_gemv->takes(qkv_handoffs(qkv_gemv_args(m.layers[0], m.mlp_delta.as<float>(), 0), mlp_to_qkv)) ||
          !m.attention_o->takes(attention_handoffs(attention_probe, qkv_to_attention)))
        mlp_to_qkv = qkv_to_attention = attention_to_mlp = false;
    }
    // The one-launch MLP's bytes: gate|up and down rows, h and the norm weight, the delta written and read.
    const double mlp_bytes = 2.0 * double(3 * I * H + 2 * H) + 4.0 * double(2 * H);
    float* pending_delta = nullptr;  // the previous layer's MLP output, not yet in h
    bool qkv_ready = false;          // the previous layer's MLP launch computed this layer's QKV (v3)
    for (size_t l = 0; l < m.layers.size(); ++l) {
      const LayerDevice& L = m.layers[l];
      bf16* k_cache = m.k_cache() + int64_t(l) * m.layer_cache_elems;
      bf16* v_cache = m.v_cache() + int64_t(l) * m.layer_cache_elems;
      bool attention_o_ran = false;  // the attention and the o projection ran as one launch
      if (!qkv_ready) {  // (else the previous layer's MLP launch computed this layer's QKV)
        // v8: the QKV GEMV in the attention's launch, where the chosen version takes it.
        if (!mlp_with_o)
          attention_o_ran = fused_attention_o(L, k_cache, v_cache, partials, partial_count, pending_delta, true);
      }
      if (!qkv_ready && !attention_o_ran) {
        if (kept("gemm_qkv_norm")) {
          const kernels::NormGemvArgs a = qkv_handoffs(qkv_gemv_args(L, pending_delta, l), mlp_pending);
          if (a.handoff || a.handoff_signal) {
            if (!m.norm_gemv->takes(a))  // (another version would leave a count set or wait for none)
              throw std::logic_error("run_layers: the QKV GEMV version does not take its hand-offs");
            m.norm_gemv->launch(a, s);
            if (a.handoff) count_handoff();
          } else {
            launch_or_first(m.norm_gemv, kernels::norm_gemv_versions(), a);
          }
          mlp_pending = false;
          qkv_pending = a.handoff_signal != nullptr;
        }
        m.count("gemm_qkv_norm", qkv_norm_bytes(pending_delta));
      }
      if (mlp_pending)  // (the layer's QKV ran in another launch, which would leave the MLP's count set)
        throw std::logic_error("run_layers: the MLP's hand-off was left without the QKV GEMV to take it");
      qkv_ready = false;
      if (mlp_with_o && l + 1 < m.layers.size()) {
        if (!fused_attention(L, k_cache, v_cache, o.mlp_o_l2_prefetch))
          throw std::logic_error("run_layers: v7_mlp_with_o needs the fused decode attention");
        if (kept("mlp_split_down")) m.mlp->launch(mlp_with_o_args(L), s);
        // The o rows, the attention output, h read and written, the delta read and zeroed; then the MLP.
        m.count("mlp_split_down", o_residual_bytes + 8.0 * double(o.mlp_delta_copies * H) + mlp_bytes);
        pending_delta = m.mlp_delta.as<float>();
        continue;
      }
      if (!attention_o_ran)
        attention_o_ran = fused_attention_o(L, k_cache, v_cache, partials, partial_count, pending_delta, false);
      if (pending_delta && !attention_o_ran)
        throw std::logic_error("run_layers: the MLP's delta was left without qkv_attention_o to add it");
      pending_delta = nullptr;
      if (mlp_in_one_launch && l + 1 < m.layers.size()) {
        const LayerDevice* next = mlp_runs_next_qkv ? &m.layers[l + 1] : nullptr;
        if (qkv_pending || attention_pending != attention_to_mlp)
          throw std::logic_error("run_layers: a hand-off was left without the launch to take it");
        const kernels::NormMlpArgs a = mlp_handoffs(mlp_args(L, next), attention_pending, true);
        took_mlp_handoffs(a);
        if (kept("mlp_split_down")) m.mlp->launch(a, s);
        // With the next QKV GEMV: its weights and output, and the delta read once more.
        m.count("mlp_split_down", mlp_bytes + (next ? 2.0 * double((QD + 2 * KVD) * (H + 1) + H) + 4.0 * double(H)
                                                    : 0.0));
        pending_delta = m.mlp_delta.as<float>();
        qkv_ready = next != nullptr;
        continue;
      }
      if (mlp_in_one_launch && attention_o_ran && L.w_down_t && !mlp_runs_next_qkv) {
        // The last layer: the same MLP launch, then h += delta (the delta zeroed) and the final norm into x.
        if (qkv_pending || attention_pending != attention_to_mlp)
          throw std::logic_error("run_layers: a hand-off was left without the launch to take it");
        const kernels::NormMlpArgs a = mlp_handoffs(mlp_args(L, nullptr), attention_pending, false);
        took_mlp_handoffs(a);  // (no signal: the final norm takes the PDL wait)
        if (kept("mlp_split_down")) m.mlp->launch(a, s);
        m.count("mlp_split_down", mlp_bytes);
        add_delta_rmsnorm(m.final_norm, nullptr, kept("add_delta_rmsnorm"));
        return;
      }
      if (!attention_o_ran && !fused_attention(L, k_cache, v_cache)) {
        if (kept("qk_norm_rope_cache"))
          kernels::qk_norm_rope_cache_versions()[0].launch(
              {m.qkv.as<bf16>(), L.q_norm, L.k_norm, q, k_cache, v_cache, positions, slots,
               m.inv_freq.as<float>(), m.attention_factor, eps, rows, c.num_heads, c.num_kv_heads, D, context},
              s);
        m.count("qk_norm_rope_cache", 2.0 * double(2 * rows * (QD + 2 * KVD)));
        attention_args.k_cache = k_cache;
        attention_args.v_cache = v_cache;
        if (kept("attention")) attention->launch(attention_args, s);
        m.count("attention", 2.0 * double(2 * KVD * (max_position + 1) * rows), attention->kernels_per_launch);
      }
      if (!attention_o_ran) {
        if (kept("gemm_o_residual"))
          partial_count = residual({attn, L.wo, h, partials, rows, H, QD, trigger("gemm_o_residual")});
        m.count("gemm_o_residual", o_residual_bytes);
      }
      if (kept("gemm_gate_up_swiglu_norm"))
        launch_or_first(m.norm_gate_up, kernels::norm_gate_up_swiglu_versions(),
                        {h, partials, partial_count, L.post_norm, eps, L.w_gate_up, act, rows, I, H,
                         trigger("gemm_gate_up_swiglu_norm")});
      m.count("gemm_gate_up_swiglu_norm", 2.0 * double(2 * I * H + rows * H + rows * I));
      if (kept("gemm_down_residual"))
        partial_count = residual({act, L.w_down, h, partials, rows, H, I, trigger("gemm_down_residual")});
      m.count("gemm_down_residual", 2.0 * double(H * I + rows * I + 2 * rows * H));
    }
    rmsnorm(h, m.final_norm, x, rows, H);
    return;
  }

  // Batched decode: the MLP in one launch (decode_mlp_batched) on x as add_rmsnorm normed it, its output left in
  // mlp_delta for add_delta_rmsnorm, which adds it to h and norms h for the next layer. Not in the last layer (no
  // transposed down_proj there) nor where the version refuses the shape (more tokens than it takes).
  const auto batched_mlp_args = [&](const LayerDevice& L) {
    kernels::NormMlpArgs a{h, nullptr, 0, L.post_norm, eps, L.w_gate_up, L.w_down_t, m.mlp_delta.as<float>(), H, I};
    a.ctas = o.mlp_ctas;
    a.prewait_rows = o.mlp_prewait_rows;
    a.delta_copies = o.mlp_delta_copies;
    a.normed_input = x;
    a.rows = rows;
    return a;
  };
  const auto batched_mlp_runs = [&](const LayerDevice& L) {
    return decode && o.fused && rows > 1 && m.mlp_batched && L.w_down_t && m.mlp_batched->takes(batched_mlp_args(L));
  };
  // With norm_gemv_batched (fold_delta) the delta is not added after the MLP: the next layer's QKV GEMV norms
  // bf16(h + bf16(delta)) itself, and its o projection's residual add (add_delta_rmsnorm with the o output as its
  // addend) adds the delta, then the o output, to h and zeroes the delta. Layer 0 reads a zero delta (every step
  // leaves it zero); the last layer's MLP (the batched MLP where it has w_down_t, else four launches) is added
  // with the final norm.
  const auto qkv_norm_args = [&](const LayerDevice& L) {
    kernels::NormGemvArgs a{h, m.norm_partials.as<float>(), 1, L.input_norm, eps, L.wqkv, m.qkv.as<bf16>(), rows,
                            QD + 2 * KVD, H};
    a.residual_delta = m.mlp_delta.as<float>();
    a.delta_copies = o.mlp_delta_copies;
    return a;
  };
  const bool fold_delta = !m.layers.empty() && batched_mlp_runs(m.layers[0]) && m.norm_gemv_batched &&
                          m.norm_gemv_batched->takes(qkv_norm_args(m.layers[0]));
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const LayerDevice& L = m.layers[l];
    bf16* k_cache = m.k_cache() + int64_t(l) * m.layer_cache_elems;
    bf16* v_cache = m.v_cache() + int64_t(l) * m.layer_cache_elems;
    bool attended = false;  // the fused decode attention ran (QK-norm, RoPE, cache store and attention)
    if (fold_delta) {
      m.norm_gemv_batched->launch(qkv_norm_args(L), s);
      m.count("gemm_qkv_norm", 2.0 * double((QD + 2 * KVD) * H + 2 * rows * H + H + rows * (QD + 2 * KVD)) +
                                   4.0 * double(o.mlp_delta_copies * rows * H));
      attended = fused_attention(L, k_cache, v_cache);
      if (!attended) throw std::logic_error("run_layers: the batched delta fold needs the fused decode attention");
    } else if (o.fused) {
      if (l == 0) rmsnorm(h, L.input_norm, x, rows, H);  // later layers: the previous add_rmsnorm did it
      m.gemm("gemm_qkv", x, L.wqkv, m.qkv.as<bf16>(), rows, QD + 2 * KVD, H);
      attended = fused_attention(L, k_cache, v_cache);
      if (!attended) {
        kernels::qk_norm_rope_cache_versions()[0].launch(
            {m.qkv.as<bf16>(), L.q_norm, L.k_norm, q, k_cache, v_cache, positions, slots, m.inv_freq.as<float>(),
             m.attention_factor, eps, rows, c.num_heads, c.num_kv_heads, D, context},
            s);
        m.count("qk_norm_rope_cache", 2.0 * double(2 * rows * (QD + 2 * KVD)));
      }
    } else {
      bf16* k = m.k.as<bf16>();
      bf16* v = m.v.as<bf16>();
      rmsnorm(h, L.input_norm, x, rows, H);
      m.gemm("gemm_q", x, L.wqkv, q, rows, QD, H);
      m.gemm("gemm_k", x, L.wqkv + QD * H, k, rows, KVD, H);
      m.gemm("gemm_v", x, L.wqkv + (QD + KVD) * H, v, rows, KVD, H);
      rmsnorm(q, L.q_norm, q, rows * c.num_heads, D);
      rmsnorm(k, L.k_norm, k, rows * c.num_kv_heads, D);
      kernels::rope_versions()[0].launch(
          {q, k, positions, m.inv_freq.as<float>(), m.attention_factor, rows, c.num_heads, c.num_kv_heads, D}, s);
      m.count("rope", 2.0 * double(2 * rows * (QD + KVD)));
      kernels::kv_write_versions()[0].launch(
          {k, v, k_cache, v_cache, positions, slots, rows, c.num_kv_heads, D, context, KVD, KVD}, s);
      m.count("kv_write", 2.0 * double(4 * rows * KVD));
    }
    if (!attended) {
      attention_args.k_cache = k_cache;
      attention_args.v_cache = v_cache;
      attention->launch(attention_args, s);
      // K and V of every cached position (decode: each token's own context, bounded here by max_position).
      m.count("attention", decode ? 2.0 * double(2 * KVD * (max_position + 1) * rows)
                                  : 2.0 * double(2 * KVD * (max_position + 1)),
              attention->kernels_per_launch);
    }
    m.gemm("gemm_o", attn, L.wo, tmp, rows, H, QD);
    // Batch 1: gate_up_swiglu; 4-8 rows (decode): gate_up_swiglu_batched_large where it takes the shape.
    const kernels::GateUpSwigluArgs swiglu_args{x, L.w_gate_up, act, rows, I, H};
    const auto* batched_swiglu = decode && rows >= 4 && rows <= 8 && m.gate_up_swiglu_batched_large &&
                                         m.gate_up_swiglu_batched_large->takes(swiglu_args)
                                     ? m.gate_up_swiglu_batched_large
                                     : nullptr;
    const bool swiglu_in_gemv = o.fused_swiglu && !m.cublas && (rows == 1 || batched_swiglu);
    if (o.fused) {
      if (fold_delta) {  // h = bf16(bf16(h + bf16(delta)) + o output), the delta zeroed, x = norm(h)
        add_delta_rmsnorm(L.post_norm, tmp);
      } else {
        add_rmsnorm(L.post_norm);
      }
      if (batched_mlp_runs(L)) {
        if (o.skip_launches.count("mlp_split_down") == 0) m.mlp_batched->launch(batched_mlp_args(L), s);
        m.count("mlp_split_down", 2.0 * double(3 * I * H + rows * H) + 4.0 * double(rows * H));
        if (fold_delta && l + 1 < m.layers.size()) continue;  // (the next layer's QKV GEMV and o add the delta)
        add_delta_rmsnorm(l + 1 < m.layers.size() ? m.layers[l + 1].input_norm : m.final_norm);
        continue;
      }
      if (swiglu_in_gemv) {
        (rows == 1 ? m.gate_up_swiglu : batched_swiglu)->launch(swiglu_args, s);
        m.count("gemm_gate_up_swiglu", 2.0 * double(2 * I * H + rows * H + rows * I));
      } else {
        m.gemm("gemm_gate_up", x, L.w_gate_up, gate_up, rows, 2 * I, H);
      }
    } else {
      kernels::add_versions()[0].launch({h, tmp, rows * H}, s);
      m.count("add", 2.0 * double(3 * rows * H));
      rmsnorm(h, L.post_norm, x, rows, H);
      m.gemm("gemm_gate", x, L.w_gate_up, gate_up, rows, I, H, 2 * I);
      m.gemm("gemm_up", x, L.w_gate_up + I * H, gate_up + I, rows, I, H, 2 * I);
    }
    if (!(o.fused && swiglu_in_gemv)) {
      kernels::silu_mul_versions()[0].launch({gate_up, act, rows, I}, s);
      m.count("silu_mul", 2.0 * double(3 * rows * I));
    }
    m.gemm("gemm_down", act, L.w_down, tmp, rows, H, I);
    if (o.fused) {
      add_rmsnorm(l + 1 < m.layers.size() ? m.layers[l + 1].input_norm : m.final_norm);
    } else {
      kernels::add_versions()[0].launch({h, tmp, rows * H}, s);
      m.count("add", 2.0 * double(3 * rows * H));
    }
  }
  if (!o.fused) rmsnorm(h, m.final_norm, x, rows, H);
}

uint64_t fnv1a(const uint16_t* data, size_t n) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    hash = (hash ^ (data[i] & 0xff)) * 0x100000001b3ull;
    hash = (hash ^ (data[i] >> 8)) * 0x100000001b3ull;
  }
  return hash;
}

}  // namespace

void CudaEngine::run_decode_step(int64_t batch, int64_t max_position) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  const int64_t V = c.vocab_size;
  launches_per_step_ = 0;
  handoffs_per_step_ = 0;
  m.counting = true;
  const auto kept = [&](const char* what) { return options_.skip_launches.count(what) == 0; };
  // v1 also leaves the rows' sums of squares for the folded-norm layer loop (run_layers).
  if (kept("embedding"))
    kernels::embedding_versions()[1].launch(
        {m.next_ids.as<int32_t>(), m.embed, m.h.as<bf16>(), batch, c.hidden_size, m.norm_partials.as<float>()},
        m.stream);
  m.count("embedding", 2.0 * double(2 * batch * c.hidden_size));
  run_layers(m, c, options_, batch, m.next_positions.as<int32_t>(), m.decode_slots.as<int32_t>(), context_,
             max_position, /*decode=*/true);
  if (kept("gemm_lm_head")) m.gemm("gemm_lm_head", m.x.as<bf16>(), m.lm_head, m.logits.as<bf16>(), batch, V, c.hidden_size);
  const int launches = sample_and_advance(
      *m.sampler_for(batch),
      {m.logits.as<bf16>(), m.sampling.as<kernels::DeviceSampling>(), m.counts.as<int32_t>(),
       m.in_prompt.as<uint8_t>(), m.steps.as<uint64_t>(), m.sampled.as<int32_t>(), batch, V,
       m.sample_workspace.as<float>()},
      m.next_ids.as<int32_t>(), m.next_positions.as<int32_t>(), m.counts.as<int32_t>(), kept("sample"),
      kept("advance"), options_.fold_advance, m.stream);
  if (launches >= 1) m.count("sample", 2.0 * double(batch * V));  // (one launch: the sampler advanced the slots)
  if (launches == 2) m.count("advance", 0.0);
  m.counting = false;
}

std::vector<KernelTiming> CudaEngine::profile_decode_step(int64_t batch) {
  Impl& m = *impl_;
  drain_speculation();
  int64_t longest = 0;
  for (int64_t b = 0; b < batch; ++b) longest = std::max(longest, lengths_[size_t(b)]);
  if (longest == 0 || longest + 1 > context_) throw InputError("profile: prefill the slots first");
  std::vector<KernelTiming> timings;
  m.profile = &timings;
  cudaEvent_t start;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventRecord(start, m.stream));
  run_decode_step(batch, longest);  // eager, one event after each launch
  m.profile = nullptr;
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  cudaEvent_t previous = start;
  for (size_t i = 0; i < timings.size(); ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, previous, m.profile_events[i]));
    timings[i].ms = ms;
    previous = m.profile_events[i];
  }
  cudaEventDestroy(start);
  for (cudaEvent_t e : m.profile_events) cudaEventDestroy(e);
  m.profile_events.clear();
  for (int64_t b = 0; b < batch; ++b) lengths_[size_t(b)] += 1;
  return timings;
}

void CudaEngine::set_sampling(int64_t slot, const SamplingParams& params) {
  Impl& m = *impl_;
  validate_sampling_params(params);
  drain_speculation();
  const kernels::DeviceSampling d = to_device(params);
  CUDA_CHECK(cudaMemcpyAsync(m.sampling.as<kernels::DeviceSampling>() + slot, &d, sizeof(d), cudaMemcpyHostToDevice,
                             m.stream));
  CUDA_CHECK(cudaMemsetAsync(m.steps.as<uint64_t>() + slot, 0, 8, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));  // d lives on this stack frame
  m.slot_params[size_t(slot)] = params;
  m.slot_has_penalties[size_t(slot)] = params.has_penalties();
}

void CudaEngine::reset_slot(int64_t slot) {
  Impl& m = *impl_;
  drain_speculation();
  lengths_[size_t(slot)] = 0;
  const int64_t V = config_.vocab_size;
  CUDA_CHECK(cudaMemsetAsync(m.counts.as<int32_t>() + slot * V, 0, size_t(V) * 4, m.stream));
  CUDA_CHECK(cudaMemsetAsync(m.in_prompt.as<uint8_t>() + slot * V, 0, size_t(V), m.stream));
  // A new sequence restarts the slot's random stream: the same seed and prompt give the same tokens every time.
  CUDA_CHECK(cudaMemsetAsync(m.steps.as<uint64_t>() + slot, 0, 8, m.stream));
}

void CudaEngine::truncate(int64_t n) {
  drain_speculation();
  if (n <= 0) {
    reset_slot(0);
    return;
  }
  lengths_[0] = std::min(lengths_[0], n);
}

namespace {

// Runs `tokens` through the layers on `slot` starting at position `pos0`, a chunk at a time; after each chunk
// calls on_chunk(first_token_index, rows) while x holds that chunk's final-normed hidden states.
template <class OnChunk>
void prefill_chunks(CudaEngine::Impl& m, const ModelConfig& c, const EngineOptions& o, int64_t context, int64_t slot,
                    int64_t pos0, std::span<const int32_t> tokens, OnChunk&& on_chunk) {
  const int64_t T = int64_t(tokens.size());
  for (int64_t first = 0; first < T; first += m.rows) {
    const int64_t n = std::min(m.rows, T - first);
    int32_t* staging = m.host_ints.as<int32_t>();
    // The pinned staging buffer is reused per chunk: wait for the previous chunk's copies first.
    CUDA_CHECK(cudaStreamSynchronize(m.stream));
    std::vector<int32_t> positions(static_cast<size_t>(n)), slots(static_cast<size_t>(n), int32_t(slot));
    for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = int32_t(pos0 + first + i);
    std::memcpy(staging, tokens.data() + first, size_t(n) * 4);
    CUDA_CHECK(cudaMemcpyAsync(m.prefill_ids.as<int32_t>(), staging, size_t(n) * 4, cudaMemcpyHostToDevice, m.stream));
    CUDA_CHECK(cudaMemcpyAsync(m.prefill_positions.as<int32_t>(), positions.data(), size_t(n) * 4,
                               cudaMemcpyHostToDevice, m.stream));
    CUDA_CHECK(cudaMemcpyAsync(m.prefill_slots.as<int32_t>(), slots.data(), size_t(n) * 4, cudaMemcpyHostToDevice,
                               m.stream));
    kernels::embedding_versions()[0].launch({m.prefill_ids.as<int32_t>(), m.embed, m.h.as<bf16>(), n, c.hidden_size},
                                            m.stream);
    run_layers(m, c, o, n, m.prefill_positions.as<int32_t>(), m.prefill_slots.as<int32_t>(), context,
               pos0 + first + n - 1, /*decode=*/false);
    on_chunk(first, n);
    CUDA_CHECK(cudaStreamSynchronize(m.stream));  // the host vectors above are read by the copies
  }
}

}  // namespace

void CudaEngine::check_new_tokens(const char* what, int64_t pos0, std::span<const int32_t> tokens) const {
  const int64_t T = int64_t(tokens.size());
  if (T == 0) throw InputError(std::string(what) + ": no tokens");
  if (pos0 + T > context_)
    throw InputError(std::string(what) + ": " + std::to_string(pos0 + T) + " positions exceed the context of " +
                     std::to_string(context_));
  for (int32_t id : tokens)
    if (id < 0 || id >= config_.vocab_size) throw InputError("token id " + std::to_string(id) + " is out of range");
}

int32_t CudaEngine::prefill(int64_t slot, std::span<const int32_t> tokens) {
  Impl& m = *impl_;
  drain_speculation();
  const ModelConfig& c = config_;
  const int64_t T = int64_t(tokens.size()), V = c.vocab_size, H = c.hidden_size;
  if (slot < 0 || slot >= options_.max_batch) throw InputError("prefill: slot out of range");
  const int64_t pos0 = lengths_[size_t(slot)];
  check_new_tokens("prefill", pos0, tokens);
  if (m.slot_has_penalties[size_t(slot)]) {  // the prompt's tokens for the repetition penalty
    std::vector<uint8_t> flags(size_t(V), 0);
    if (pos0 > 0)
      CUDA_CHECK(cudaMemcpy(flags.data(), m.in_prompt.as<uint8_t>() + slot * V, size_t(V), cudaMemcpyDeviceToHost));
    for (int32_t id : tokens) flags[size_t(id)] = 1;
    CUDA_CHECK(cudaMemcpyAsync(m.in_prompt.as<uint8_t>() + slot * V, flags.data(), size_t(V), cudaMemcpyHostToDevice,
                               m.stream));
    CUDA_CHECK(cudaStreamSynchronize(m.stream));
  }
  bf16* logits_row = m.logits.as<bf16>() + slot * V;
  prefill_chunks(m, c, options_, context_, slot, pos0, tokens, [&](int64_t first, int64_t n) {
    if (first + n < T) return;
    m.gemm("gemm_lm_head", m.x.as<bf16>() + (n - 1) * H, m.lm_head, logits_row, 1, V, H);
  });
  lengths_[size_t(slot)] = pos0 + T;
  // Sample the first new token and stage it, with its position, as the slot's next decode input.
  sample_and_advance(*m.sampler_for(slot + 1),
                     {logits_row, m.sampling.as<kernels::DeviceSampling>() + slot, m.counts.as<int32_t>() + slot * V,
                      m.in_prompt.as<uint8_t>() + slot * V, m.steps.as<uint64_t>() + slot,
                      m.sampled.as<int32_t>() + slot, 1, V, m.sample_workspace.as<float>()},
                     m.next_ids.as<int32_t>() + slot, nullptr, m.counts.as<int32_t>() + slot * V, true, true,
                     options_.fold_advance, m.stream);
  int32_t* staging = m.host_ints.as<int32_t>();
  staging[0] = int32_t(lengths_[size_t(slot)]);
  CUDA_CHECK(cudaMemcpyAsync(m.next_positions.as<int32_t>() + slot, staging, 4, cudaMemcpyHostToDevice, m.stream));
  CUDA_CHECK(cudaMemcpyAsync(staging + 1, m.sampled.as<int32_t>() + slot, 4, cudaMemcpyDeviceToHost, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return staging[1];
}

void CudaEngine::enqueue_decode(int64_t batch, int64_t steps, int32_t* host_tokens) {
  Impl& m = *impl_;
  if (batch < 1 || batch > options_.max_batch) throw InputError("decode: batch out of range");
  int64_t longest = 0;
  for (int64_t b = 0; b < batch; ++b) {
    if (lengths_[size_t(b)] == 0) throw InputError("decode: slot " + std::to_string(b) + " was never prefilled");
    longest = std::max(longest, lengths_[size_t(b)]);
  }
  if (longest + steps > context_)
    throw InputError("decode: " + std::to_string(longest + steps) + " positions exceed the context of " +
                     std::to_string(context_));
  // Split-KV grids are sized for a power-of-two bucket of the longest context, so one captured graph serves
  // every step until the bucket is outgrown.
  int64_t bucket = 256;
  while (bucket < longest + steps) bucket *= 2;
  bucket = std::min(bucket, context_);
  cudaGraphExec_t exec = nullptr;
  if (options_.cuda_graph) {
    auto key = std::make_tuple(batch, bucket, static_cast<const void*>(m.sampler_for(batch)));
    auto it = m.graphs.find(key);
    if (it == m.graphs.end()) {
      cudaGraph_t graph;
      CUDA_CHECK(cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeThreadLocal));
      run_decode_step(batch, bucket - 1);
      CUDA_CHECK(cudaStreamEndCapture(m.stream, &graph));
      if (m.l2_window.num_bytes) apply_l2_window(graph, m.l2_window);
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_CHECK(cudaGraphDestroy(graph));
      it = m.graphs.emplace(key, exec).first;
    }
    exec = it->second;
  }
  if (m.timing_start) CUDA_CHECK(cudaEventRecord(m.timing_start, m.stream));
  for (int64_t step = 0; step < steps; ++step) {
    if (exec) {
      CUDA_CHECK(cudaGraphLaunch(exec, m.stream));
    } else {
      run_decode_step(batch, bucket - 1);
    }
    CUDA_CHECK(cudaMemcpyAsync(host_tokens + step * batch, m.sampled.as<int32_t>(), size_t(batch) * 4,
                               cudaMemcpyDeviceToHost, m.stream));
  }
  if (m.timing_stop) CUDA_CHECK(cudaEventRecord(m.timing_stop, m.stream));
}

void CudaEngine::drain_speculation() {
  Impl& m = *impl_;
  if (!m.speculating) return;
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.speculating = false;
  // The step ran ahead of the host: put slot 0's decode inputs back to what the host has accepted.
  int32_t* staging = m.host_ints.as<int32_t>();
  staging[0] = m.speculative_input;
  staging[1] = int32_t(lengths_[0]);
  CUDA_CHECK(cudaMemcpyAsync(m.next_ids.as<int32_t>(), staging, 4, cudaMemcpyHostToDevice, m.stream));
  CUDA_CHECK(cudaMemcpyAsync(m.next_positions.as<int32_t>(), staging + 1, 4, cudaMemcpyHostToDevice, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

std::vector<int32_t> CudaEngine::decode(int64_t batch, int64_t steps, double* elapsed_ms) {
  Impl& m = *impl_;
  drain_speculation();
  if (m.host_ints_capacity < batch * steps) {
    m.host_ints = PinnedBuffer(size_t(batch * steps) * 4);
    m.host_ints_capacity = batch * steps;
  }
  if (elapsed_ms) {
    CUDA_CHECK(cudaEventCreate(&m.timing_start));
    CUDA_CHECK(cudaEventCreate(&m.timing_stop));
  }
  int32_t* staging = m.host_ints.as<int32_t>();
  try {
    enqueue_decode(batch, steps, staging);
  } catch (...) {
    if (elapsed_ms) {
      cudaEventDestroy(m.timing_start);
      cudaEventDestroy(m.timing_stop);
      m.timing_start = m.timing_stop = nullptr;
    }
    throw;
  }
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  if (elapsed_ms) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, m.timing_start, m.timing_stop));
    *elapsed_ms = ms;
    cudaEventDestroy(m.timing_start);
    cudaEventDestroy(m.timing_stop);
    m.timing_start = m.timing_stop = nullptr;
  }
  std::vector<int32_t> tokens(staging, staging + batch * steps);
  for (int64_t b = 0; b < batch; ++b) lengths_[size_t(b)] += steps;
  return tokens;
}

void CudaEngine::forward(std::span<const int32_t> tokens, bool want_argmax_per_position, ForwardOutput& out) {
  Impl& m = *impl_;
  drain_speculation();
  const ModelConfig& c = config_;
  const int64_t T = int64_t(tokens.size()), V = c.vocab_size, H = c.hidden_size;
  const int64_t pos0 = lengths_[0];
  check_new_tokens("forward", pos0, tokens);
  out.argmax.assign(size_t(T), 0);
  std::vector<uint16_t> last(static_cast<size_t>(V));
  prefill_chunks(m, c, options_, context_, 0, pos0, tokens, [&](int64_t first, int64_t n) {
    const int64_t begin = want_argmax_per_position ? 0 : n - 1;
    for (int64_t r0 = begin; r0 < n; r0 += m.logit_rows) {
      const int64_t rows = std::min(m.logit_rows, n - r0);
      m.gemm("gemm_lm_head", m.x.as<bf16>() + r0 * H, m.lm_head, m.logits.as<bf16>(), rows, V, H);
      if (want_argmax_per_position) {
        m.sample_plain->launch({m.logits.as<bf16>(), m.greedy.as<kernels::DeviceSampling>(), nullptr, nullptr,
                                m.steps.as<uint64_t>(), m.sampled.as<int32_t>(), rows, V,
                                m.sample_workspace.as<float>()},
                               m.stream);
        CUDA_CHECK(cudaMemcpyAsync(out.argmax.data() + first + r0, m.sampled.as<int32_t>(), size_t(rows) * 4,
                                   cudaMemcpyDeviceToHost, m.stream));
      }
      if (first + r0 + rows == T)
        CUDA_CHECK(cudaMemcpyAsync(last.data(), m.logits.as<bf16>() + (rows - 1) * V, size_t(V) * 2,
                                   cudaMemcpyDeviceToHost, m.stream));
      CUDA_CHECK(cudaStreamSynchronize(m.stream));
    }
  });
  lengths_[0] = pos0 + T;
  out.last_logits.resize(size_t(V));
  for (int64_t i = 0; i < V; ++i) out.last_logits[size_t(i)] = bf16_to_f32(last[size_t(i)]);
  if (!want_argmax_per_position) out.argmax.clear();
}

int32_t CudaEngine::forward_and_sample(std::span<const int32_t> tokens, Sampler& sampler) {
  Impl& m = *impl_;
  const SamplingParams& p = sampler.params();
  const SamplingParams& current = m.slot_params[0];
  if (p.temperature != current.temperature || p.top_k != current.top_k || p.top_p != current.top_p ||
      p.min_p != current.min_p || p.repetition_penalty != current.repetition_penalty ||
      p.presence_penalty != current.presence_penalty || p.frequency_penalty != current.frequency_penalty ||
      p.seed != current.seed)
    set_sampling(0, p);  // drains any step in flight first
  int32_t* staging = m.host_ints.as<int32_t>();
  int32_t token;
  if (tokens.size() == 1 && lengths_[0] > 0) {
    if (m.speculating && tokens[0] == m.speculative_input) {
      // The step launched at the end of the previous call consumed exactly this token: its result is the answer.
      CUDA_CHECK(cudaStreamSynchronize(m.stream));
      m.speculating = false;
      token = staging[2];
      lengths_[0] += 1;
    } else {
      drain_speculation();
      // Any token sequence works: stage the token (and its position) explicitly, then run one step.
      if (tokens[0] < 0 || tokens[0] >= config_.vocab_size) throw InputError("token id out of range");
      staging[0] = tokens[0];
      staging[1] = int32_t(lengths_[0]);
      CUDA_CHECK(cudaMemcpyAsync(m.next_ids.as<int32_t>(), staging, 4, cudaMemcpyHostToDevice, m.stream));
      CUDA_CHECK(cudaMemcpyAsync(m.next_positions.as<int32_t>(), staging + 1, 4, cudaMemcpyHostToDevice, m.stream));
      enqueue_decode(1, 1, staging + 2);
      CUDA_CHECK(cudaStreamSynchronize(m.stream));
      token = staging[2];
      lengths_[0] += 1;
    }
  } else {
    drain_speculation();
    token = prefill(0, tokens);
  }
  // Run ahead: the device already holds `token` as slot 0's next input, so launch the next step now and let the
  // host stream this token (and check it for eos) while the GPU computes. No host round trip sits between steps.
  // Not with penalties (a discarded step would have counted its token) and not past the context.
  if (options_.speculative_decode && !m.slot_has_penalties[0] && lengths_[0] + 1 < context_) {
    m.speculative_input = token;
    enqueue_decode(1, 1, staging + 2);
    m.speculating = true;
  }
  return token;
}

int64_t CudaEngine::decode_weight_bytes() const { return impl_->decode_weight_bytes; }

namespace {

// A profiling trace buffer's stamps, once the stream's work is done (empty when the trace is off).
std::vector<uint64_t> download_stamps(const DeviceBuffer& trace, cudaStream_t stream) {
  std::vector<uint64_t> host(trace.bytes() / sizeof(uint64_t));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!host.empty()) CUDA_CHECK(cudaMemcpy(host.data(), trace.as<void>(), host.size() * 8, cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

std::vector<uint64_t> CudaEngine::mlp_trace() const { return download_stamps(impl_->mlp_trace, impl_->stream); }

std::vector<uint64_t> CudaEngine::qkv_trace() const { return download_stamps(impl_->qkv_trace, impl_->stream); }

std::vector<uint64_t> CudaEngine::attention_o_trace() const {
  return download_stamps(impl_->attention_o_trace, impl_->stream);
}

std::vector<uint16_t> CudaEngine::last_logits_bits(int64_t row) const {
  if (row < 0 || row >= impl_->logit_rows) throw InputError("last_logits: row out of range");
  const int64_t V = config_.vocab_size;  // (a step in flight may update the logits: they are read after it)
  std::vector<uint16_t> host(static_cast<size_t>(V));
  CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  CUDA_CHECK(cudaMemcpy(host.data(), impl_->logits.as<bf16>() + row * V, size_t(V) * 2, cudaMemcpyDeviceToHost));
  return host;
}

uint64_t CudaEngine::last_logits_hash(int64_t row) const {
  const std::vector<uint16_t> bits = last_logits_bits(row);
  return fnv1a(bits.data(), bits.size());
}

std::unique_ptr<Backend> make_cuda_backend(const Checkpoint& checkpoint, int64_t context) {
  EngineOptions options;
  options.context = context;
  return std::make_unique<CudaEngine>(checkpoint, options);
}

}  // namespace qwen3
