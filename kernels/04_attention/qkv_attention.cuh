// Host-side pieces shared by the fused decode attention versions (v1_qkv_attention_cluster,
// v2_qkv_attention_mma): how many CTAs (one thread-block cluster) split a token's keys for one kv head, and
// whether the device can launch clusters at all.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qwen3::kernels::qkv_attention {

struct ClusterPlan {
  int cluster;   // CTAs per (token, kv head): a power of two <= max_cluster
  int keys_cap;  // keys one CTA may get: >= ceil((max_position + 1) / cluster), a multiple of tile_keys
};

// The fewest CTAs (a power of two, at most max_cluster) that leave each at most keys_per_cta keys of a context of
// max_position + 1 keys; past max_cluster CTAs each takes more.
inline ClusterPlan plan_clusters(int64_t max_position, int keys_per_cta, int max_cluster, int tile_keys) {
  const int64_t keys = max_position + 1;
  int cluster = 1;
  while (cluster < max_cluster && (keys + cluster - 1) / cluster > keys_per_cta) cluster *= 2;
  const int64_t per_cta = (keys + cluster - 1) / cluster;
  return {cluster, int((per_cta + tile_keys - 1) / tile_keys * tile_keys)};
}

// Thread-block clusters need compute capability 9.0 (the current device, asked once).
inline bool device_has_clusters() {
  static const bool has = [] {
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
  }();
  return has;
}

}  // namespace qwen3::kernels::qkv_attention
