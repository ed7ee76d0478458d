// ptxas_vimnmx_relu: a clamp compared with its bound, max(0, min(1, x)) == 1, with the clamp also stored.
// ptxas of CUDA 13.0 for sm_90a folds the clamp and the comparison into one VIMNMX.RELU and takes the comparison
// from that instruction's predicate output, which on the H200 reads "x was in [0, 1]" rather than "the clamp is 1"
// (profiles/ptxas-vimnmx-relu.md). This program runs the pattern over x = -5..10 and 33..48 and checks every lane
// against the host's arithmetic. Exit 0: every lane right; 1: a lane wrong (the miscompile); 2: no GPU / CUDA error.
// Usage: ptxas_vimnmx_relu  (its SASS: cuobjdump -sass ptxas_vimnmx_relu | grep -A2 VIMNMX)
#include <cuda_runtime.h>

#include <cstdio>

namespace {

constexpr int kLanes = 32;

// in: (4, kLanes) ints: a, y, b, z; out: (2, kLanes): c = clamp(a - b, 0, 1) and (c == 1 && y < z).
__global__ void clamp_compare(const int* in, int* out) {
  const int i = int(threadIdx.x);
  const int x = in[i] - in[i + 2 * kLanes], y = in[i + kLanes], z = in[i + 3 * kLanes];
  const int c = max(0, min(1, x));
  out[i] = c;                                 // (without this store ptxas emits a plain ISETP.GT instead)
  out[i + kLanes] = (c == 1 && y < z) ? 1 : 0;
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "ptxas_vimnmx_relu: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  int in[4 * kLanes], out[2 * kLanes];
  for (int i = 0; i < kLanes; ++i) {
    in[i] = i < 16 ? i - 5 : 17 + i;  // x = -5..10, then 33..48
    in[i + kLanes] = 0;               // y < z everywhere: the flag is the clamp's comparison alone
    in[i + 2 * kLanes] = 0;
    in[i + 3 * kLanes] = 1;
  }
  int *in_d = nullptr, *out_d = nullptr;
  if (!ok(cudaMalloc(&in_d, sizeof in), "cudaMalloc") || !ok(cudaMalloc(&out_d, sizeof out), "cudaMalloc") ||
      !ok(cudaMemcpy(in_d, in, sizeof in, cudaMemcpyHostToDevice), "copy in") ||
      !ok(cudaMemset(out_d, 0xff, sizeof out), "poison"))
    return 2;
  clamp_compare<<<1, kLanes>>>(in_d, out_d);
  if (!ok(cudaGetLastError(), "launch") || !ok(cudaDeviceSynchronize(), "run") ||
      !ok(cudaMemcpy(out, out_d, sizeof out, cudaMemcpyDeviceToHost), "copy out"))
    return 2;
  int wrong = 0;
  for (int i = 0; i < kLanes; ++i) {
    const int x = in[i] - in[i + 2 * kLanes];
    const int c = x < 0 ? 0 : x > 1 ? 1 : x;
    const int flag = c == 1 && in[i + kLanes] < in[i + 3 * kLanes] ? 1 : 0;
    if (out[i] != c || out[i + kLanes] != flag) {
      ++wrong;
      std::printf("x=%d: clamp %d (got %d), flag %d (got %d)\n", x, c, out[i], flag, out[i + kLanes]);
    }
  }
  std::printf("ptxas_vimnmx_relu: %d of %d lanes wrong\n", wrong, kLanes);
  cudaFree(in_d);
  cudaFree(out_d);
  return wrong == 0 ? 0 : 1;
}
