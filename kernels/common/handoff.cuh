// Counter hand-offs between consecutive launches of the decode layer, in place of PDL's grid-completion wait.
//
// Why: a kernel's griddepcontrol.wait returns once the previous grid has completed and flushed, which in the
// batch-1 decode step came 1.4-2.0 us after the MLP's last CTA ended and ~0.9 us after the QKV GEMV's (traces,
// ITERATIONS.md sessions 16-19), while the next launch's CTAs sat resident with their weight rings full. A count
// that every producer CTA raises as its last act can be seen one L2 round trip after the last raise.
// Measured (H100, ITERATIONS.md session 30): it is not. Every boundary released later than with PDL's wait (the QKV
// GEMV's first CTA 1.45 us after the MLP's last against 1.11; 1.25 against 0.77 with fewer copies in flight), and
// the step took 0.988x-0.993x: the producer's release add waits for its CTA's writes to be performed and the poll
// is an L2 round trip, where the hardware's release needs neither. Kept for the record.
//
// Protocol, per hand-off: two words in device memory, zero before the producer's first launch. Every producer CTA,
// once all its outputs are written (a barrier, then one thread), adds 1 to words[0] with release semantics
// (handoff_finish). Every consumer CTA's thread 0 polls words[0] with acquire loads until it reaches the
// producer's CTA count, then counts itself in words[1] (handoff_wait); the consumer CTA whose count is the grid's
// last sets both words back to zero at its end (handoff_finish), before it signals the next hand-off, so the next
// producer of these words (a later launch, causally after) starts from zero.
// PRECOND: every producer CTA is resident before any consumer CTA spins (each producer triggers PDL at its start,
// so the consumer is launched only once they all run), every producer CTA signals exactly once, and the consumer
// runs exactly once per producer launch (a launch that skipped its half would leave the words set).
#pragma once

#include <cstdint>

#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"

namespace qwen3::kernels {

// A consumer CTA's wait, in place of pdl_wait(): thread 0 spins until words[0] >= producers (a pause of poll_ns
// between polls, 0: none; traps after 2^24 polls, as spin_until_at_least) and adds 1 to words[1]; the barrier then
// publishes the acquire to the whole CTA. Returns, in thread 0, the count before its add (0 elsewhere), which
// handoff_finish reads at the CTA's end, so the CTA does not wait for the add here. words nullptr: the PDL wait.
// PRECOND: every thread of the CTA calls it.
__device__ __forceinline__ uint32_t handoff_wait(uint32_t* words, int32_t producers, int32_t poll_ns) {
  if (words == nullptr) {
    pdl_wait();
    return 0;
  }
  uint32_t passed_before = 0;
  if (threadIdx.x == 0) {
    uint64_t polls = 0;
    while (load_acquire_gpu(words) < uint32_t(producers)) {
      if (++polls > (uint64_t(1) << 24)) __trap();  // a producer that never signals: a bug, not a state
      if (poll_ns > 0) __nanosleep(uint32_t(poll_ns));
    }
    passed_before = atomicAdd(words + 1, 1u);
  }
  __syncthreads();
  return passed_before;
}

// A CTA's end in a chain of hand-offs. As a consumer (wait_words, handoff_wait's result): the last CTA past the wait
// (passed_before == grid - 1) sets its words back to zero, with plain stores ordered before the signal below, so the
// next producer of those words (a later launch, causally after it) starts from zero. As a producer (signal_words):
// once every thread's writes are issued (the barrier), thread 0 adds 1 to signal_words[0] with release semantics
// (red_release_gpu_add's contract: the whole CTA's writes before the barrier are ordered before it). Either may be
// nullptr. PRECOND: every thread of the CTA calls it, as its last act.
__device__ __forceinline__ void handoff_finish(uint32_t* wait_words, uint32_t passed_before, uint32_t* signal_words) {
  if (wait_words != nullptr && threadIdx.x == 0 && passed_before == gridDim.x - 1) {
    wait_words[0] = 0;
    wait_words[1] = 0;
  }
  if (signal_words == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) red_release_gpu_add(signal_words, 1);
}

}  // namespace qwen3::kernels
