// Inline PTX wrappers, each with the hardware reason it exists. Valid on sm_80 and later (sm_89, sm_90a); the TMA /
// mbarrier group is sm_90 only and compiles to nothing below.
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

// An L2 policy that marks lines evict-normal: bytes pulled into L2 ahead of a later launch's evict-first reads
// (qkv_attention_o v27), which the streams passing through in between, all evict-first, should not push out.
__device__ __forceinline__ uint64_t make_evict_normal_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// An L2 policy that marks lines evict-last (qkv_attention_o v27's tuning).
__device__ __forceinline__ uint64_t make_evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// The policy for a priority chosen at run time (QkvAttentionOArgs::mlp_lead_policy, bench/l2_retention): any value
// but kL2EvictFirst and kL2EvictLast is evict-normal.
enum L2Priority { kL2EvictNormal = 0, kL2EvictFirst = 1, kL2EvictLast = 2 };
__device__ __forceinline__ uint64_t make_l2_policy(int priority) {
  return priority == kL2EvictFirst  ? make_evict_first_policy()
         : priority == kL2EvictLast ? make_evict_last_policy()
                                    : make_evict_normal_policy();
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

// 16-byte read-only load that skips L1, default L2 policy: for data read once per launch by a CTA that also holds
// a large shared-memory carve-out, where lines allocated in L1 for many loads in flight would evict each other
// before use (bench/kv_read_pattern: 64 KB in flight a CTA through L1 took twice as long as 16 KB).
__device__ __forceinline__ uint4 load_nc_no_l1_16B(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
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

// One line at ptr into L2: a hint that also fills the SM's address translations on the way (qkv_attention_o v16,
// norm_gemv v24, norm_mlp v17 warm the pages their chain touches after the PDL wait with it).
__device__ __forceinline__ void prefetch_l2_line(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr) : "memory");
}

// This CTA's share of an L2 prefetch hint (QkvAttentionArgs::l2_prefetch, NormMlpArgs::l2_prefetch): the grid
// splits [ptr, ptr + bytes) in equal 16-byte-aligned shares, and the calling warp's lanes each ask for pieces of at
// most 32 KB of its share. The bulk prefetch is fire-and-forget (no register or barrier holds it), so the caller
// goes on at once.
// PRECOND: ptr 16-byte aligned, bytes % 16 == 0; called by one whole warp of the CTA.
__device__ __forceinline__ void prefetch_share_l2(const void* ptr, int64_t bytes, int lane) {
  constexpr int64_t kPieceBytes = 32 << 10;
  const int64_t ctas = int64_t(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t cta = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
  const int64_t share = (bytes / 16 + ctas - 1) / ctas * 16;
  const int64_t end = min((cta + 1) * share, bytes);
  for (int64_t at = cta * share + lane * kPieceBytes; at < end; at += 32 * kPieceBytes)
    prefetch_l2_bulk(static_cast<const char*>(ptr) + at, uint32_t(min(kPieceBytes, end - at)));
}

// ---- grid-wide counters between CTAs of one launch (the persistent layer stack, qkv_attention_o) -----------------
// %globaltimer in ns: stamps comparable across SMs (kernels' profiling traces).
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Acquire load of a word another CTA updates after a __threadfence (a counter): what that CTA wrote before it is
// visible to this thread after the load returns the new value.
__device__ __forceinline__ uint32_t load_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// *counter += value with release semantics at GPU scope: what this thread wrote before, and what the threads of its
// CTA wrote before a barrier it passed with them, is visible to any thread that reads the new count with an
// acquire (load_acquire_gpu). One thread's release instead of every thread's __threadfence (a fence.sc each).
__device__ __forceinline__ void red_release_gpu_add(uint32_t* counter, uint32_t value) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(counter), "r"(value) : "memory");
}

// *counter += value with acquire and release semantics at GPU scope; returns the count before. The thread that sees
// the last count acquires what every earlier adder released (e.g. the last split of a head merges the others').
__device__ __forceinline__ uint32_t atom_acq_rel_gpu_add(uint32_t* counter, uint32_t value) {
  uint32_t before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(before) : "l"(counter), "r"(value) : "memory");
  return before;
}

// The calling thread spins until *counter >= target. A counter that never gets there is a bug (or a grid that is
// not all resident), not a state: trap after 2^24 polls (seconds) instead of hanging the GPU.
__device__ __forceinline__ void spin_until_at_least(const uint32_t* counter, uint32_t target) {
  uint64_t polls = 0;
  while (load_acquire_gpu(counter) < target)
    if (++polls > (uint64_t(1) << 24)) __trap();
}

// ---- the cluster barrier's two halves (sm_90; nothing below), each executed by every thread of a CTA. A CTA that
// only publishes arrives; one that reads the others' shared memory waits, and the wait completes once every thread
// of the cluster that has not exited has arrived. Split in two, a producer CTA does not wait for its consumer.
// Arrives with release semantics at cluster scope: this thread's earlier shared-memory writes (and those of the
// threads of its CTA that passed a barrier with it before) are visible to a thread of the cluster that waits.
// kAligned: the .aligned form, for a call that every thread of the warp executes together.
template <bool kAligned = false>
__device__ __forceinline__ void cluster_arrive_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kAligned)
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  else
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
#endif
}

// Arrives without publishing anything (a CTA of the cluster with nothing to hand over).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}

// Waits until every non-exited thread of the cluster has arrived; acquire, so what they released is visible.
// kAligned: as cluster_arrive_release's.
template <bool kAligned = false>
__device__ __forceinline__ void cluster_wait_acquire() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kAligned)
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  else
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}

// ---- TMA bulk copies and mbarriers (sm_90; every wrapper compiles to nothing below, where the kernels using them
// are empty and their supports() is false). A bulk copy moves one contiguous span global -> shared without any
// thread touching it: a single thread keeps tens of KB of weights in flight, so the loads start the moment a CTA
// is resident (before the PDL wait) and do not hold registers. Completion is counted in bytes on an mbarrier.
// PRECOND (bulk copy): both addresses 16-byte aligned, bytes a multiple of 16, bytes per mbarrier phase < 2^20.

// The shared-memory window address of a generic pointer into shared memory (what the PTX operands take).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One-time setup by one thread: `arrivals` arrive() calls (plus the expected bytes) complete each phase.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
#endif
}

// Makes the mbarrier.init above visible to the async proxy (the bulk copies' complete_tx) before first use.
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// Arrives once and adds `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
#endif
}

// 16 bytes from shared memory in one LDS.128. Reading a uint4 through a reinterpreted reference (e.g. to Bf16x8)
// lets the compiler split it into four 32-bit LDS, which with lanes 16 bytes apart conflict 4-way each (16
// wavefronts a warp instead of 4). Volatile: it stays after the barrier or mbarrier wait that publishes the bytes.
__device__ __forceinline__ uint4 load_shared_16B(const void* p) {
  uint4 v;
#if defined(__CUDA_ARCH__)
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(p))));
#else
  v = *static_cast<const uint4*>(p);
#endif
  return v;
}

// Orders the CTA's earlier generic-proxy accesses to shared memory (ordinary loads and stores, cp.async,
// ldmatrix), made visible to this thread by a barrier, before its later async-proxy ones: a bulk copy into bytes the
// CTA has used for something else.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Arrives once without bytes (a consumer releasing a ring slot it has finished reading).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// Named barrier over `threads` threads (a multiple of 32) with id 1..15: lets a subset of the CTA's warps
// synchronize without the others (id 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Blocks until the phase of parity `parity` (0 for the barrier's 1st, 3rd, ... phase) has completed; acquire, so
// the bytes a bulk copy delivered are visible afterwards. try_wait suspends the thread for a while in hardware
// instead of spinning on the issue slots.
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t addr = smem_u32(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// Bulk copy global -> this CTA's shared memory, completing `bytes` on `bar`, with an L2 policy (evict-first for
// weights streamed once). The shared::cluster destination is this CTA's own window (no cluster launch needed).
__device__ __forceinline__ void bulk_copy_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar,
                                              uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_u32(bar)), "l"(policy)
      : "memory");
#endif
}

// True in exactly one lane of a converged warp (elect.sync): the issuing thread of a single-thread producer
// without a divergent lane-id branch. Below sm_90: lane 0.
__device__ __forceinline__ bool elect_one_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t elected = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected));
  return elected != 0;
#else
  return (threadIdx.x % 32) == 0;
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
// cp_async_16B with an L2 policy (make_evict_first_policy): weights streamed once per token through shared memory.
__device__ __forceinline__ void cp_async_16B_policy(void* smem, const void* gmem, uint64_t policy) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "l"(policy));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}
// The same with a run-time count (the instruction takes an immediate): at most `pending` of this thread's groups
// still in flight, 0-3 (more waits for 3).
__device__ __forceinline__ void cp_async_wait_pending(int pending) {
  switch (pending) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    default: cp_async_wait<3>(); break;
  }
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
