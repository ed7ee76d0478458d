// Every version of every kernel, so the bench runner and the tests reach them all and production calls the chosen
// one directly (no copy of the winner drifting elsewhere). Versions are listed oldest first; v0 is the plain
// baseline each later one is measured against.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernels.h"

namespace qwen3::kernels {

template <class Args>
struct KernelVersion {
  const char* name;     // e.g. "v1_gemv_splitk": the file name without .cu
  const char* summary;  // one line: what this version changes, and why
  void (*launch)(const Args&, cudaStream_t);
  bool (*supports)(const Args&);  // nullptr: every shape the op's PRECONDs allow
  int kernels_per_launch = 1;     // CUDA kernels one launch() issues (e.g. a split kernel plus a merge kernel)
  // Takes part in a counter hand-off between two launches (NormMlpArgs::handoff_signal, NormGemvArgs::handoff):
  // the engine sets those fields only where both launches' versions do, since a version without it ignores them
  // (a consumer would then wait for a count no producer makes).
  bool handoff = false;

  // Whether launch() takes these args: supports(args), or any args where the version has no supports().
  bool takes(const Args& args) const { return supports == nullptr || supports(args); }
};

const std::vector<KernelVersion<EmbeddingArgs>>& embedding_versions();
const std::vector<KernelVersion<RmsnormArgs>>& rmsnorm_versions();
const std::vector<KernelVersion<AddRmsnormArgs>>& add_rmsnorm_versions();
const std::vector<KernelVersion<AddDeltaRmsnormArgs>>& add_delta_rmsnorm_versions();
const std::vector<KernelVersion<GemmArgs>>& gemm_versions();
const std::vector<KernelVersion<RopeArgs>>& rope_versions();
const std::vector<KernelVersion<QkNormRopeCacheArgs>>& qk_norm_rope_cache_versions();
const std::vector<KernelVersion<KvWriteArgs>>& kv_write_versions();
const std::vector<KernelVersion<AttentionArgs>>& attention_versions();
const std::vector<KernelVersion<QkvAttentionArgs>>& qkv_attention_versions();
const std::vector<KernelVersion<QkvAttentionOArgs>>& qkv_attention_o_versions();
const std::vector<KernelVersion<SiluMulArgs>>& silu_mul_versions();
const std::vector<KernelVersion<GateUpSwigluArgs>>& gate_up_swiglu_versions();
const std::vector<KernelVersion<GemvResidualArgs>>& gemv_residual_versions();
const std::vector<KernelVersion<NormGemvArgs>>& norm_gemv_versions();
const std::vector<KernelVersion<NormGateUpSwigluArgs>>& norm_gate_up_swiglu_versions();
const std::vector<KernelVersion<NormMlpArgs>>& norm_mlp_versions();
const std::vector<KernelVersion<TransposeArgs>>& transpose_versions();
const std::vector<KernelVersion<DecodeLayersArgs>>& decode_layers_versions();
const std::vector<KernelVersion<AddArgs>>& add_versions();
const std::vector<KernelVersion<SampleArgs>>& sample_versions();

// cuBLAS bf16 GEMM (fp32 accumulation): the baseline to beat, never the engine's default decode path.
void launch_gemm_cublas(const GemmArgs& args, cudaStream_t stream);

// Finds a version by name; throws std::invalid_argument listing the known names otherwise.
template <class Args>
const KernelVersion<Args>& find_version(const std::vector<KernelVersion<Args>>& versions, std::string_view name) {
  std::string known;
  for (const auto& v : versions) {
    if (name == v.name) return v;
    known += std::string(known.empty() ? "" : ", ") + v.name;
  }
  throw std::invalid_argument("unknown kernel version '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace qwen3::kernels
