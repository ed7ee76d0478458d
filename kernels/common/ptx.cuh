// Inline PTX wrappers, each with the hardware reason it exists. Valid on sm_80 and later (sm_89, sm_90a).
#pragma once

#include <cstdint>

namespace qwen3::kernels {

// An L2 policy that marks lines evict-first: weights are streamed once per token, so they should not push small,
// hot tensors (activations, norm weights, the KV cache being written) out of L2.
__device__ __forceinline__ uint64_t make_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// 16-byte read-only load that skips L1 (no reuse within the SM) and carries the L2 policy above.
__device__ __forceinline__ uint4 load_stream_16B(const void* ptr, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr), "l"(policy));
  return v;
}

// Plain 16-byte read-only load through the non-coherent path.
__device__ __forceinline__ uint4 load_nc_16B(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// Bulk prefetch of [ptr, ptr + bytes) into L2 (sm_90; a no-op elsewhere). A kernel launched early under PDL can
// pull its weights from HBM into L2 while the kernel before it (attention, a norm: latency bound, HBM idle) still
// runs. PRECOND: ptr 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void prefetch_l2_bulk(const void* ptr, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes) : "memory");
#endif
}

// ---- cp.async (sm_80+): global -> shared copies that bypass registers, so loads of the next tile overlap the
// math on the current one.
__device__ __forceinline__ void cp_async_16B(void* smem, const void* gmem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
// Copies src_bytes (0 or 16) and zero-fills the rest: out-of-range rows read as zeros without a branch.
__device__ __forceinline__ void cp_async_16B_zfill(void* smem, const void* gmem, int src_bytes) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

// ---- ldmatrix / mma.sync (sm_80+): the tensor-core path that runs on both the 4080 (sm_89) and the H200.
// Register layout contract (PTX ISA, mma.m16n8k16 with .bf16 inputs, row.col):
//   A (16x16, row-major): 4 x .b32 regs per thread, each 2 bf16; B (16x8, "col" = rows of W): 2 regs;
//   C/D (16x8 fp32): 4 floats; thread t holds rows (t/4) and (t/4 + 8), columns 2*(t%4) and 2*(t%4)+1.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row_ptr) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace qwen3::kernels
