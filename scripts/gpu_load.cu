// scripts/gpu_load.cu: a GPU load for scripts/gpu-check.sh, built with nvcc when it is there.
//   gpu_load [SECONDS]   keeps every visible GPU busy with fused multiply-adds for SECONDS
//                        (default 60), or until SIGTERM/SIGINT.
// Each GPU runs one kernel after another from its own host thread, each kernel about 10 ms, so
// the GPU stays at full load and a clock or power-limit change shows up within one kernel.
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <thread>
#include <vector>
#include <chrono>

static volatile sig_atomic_t stop;
static void on_stop(int) { stop = 1; }

__global__ void fma_loop(float *out, int iters) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f;
  for (int i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    b = fmaf(b, c, a * 1e-7f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}

static int run(int dev, double seconds) {
  if (cudaSetDevice(dev) != cudaSuccess) return 1;
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, dev);
  int blocks = p.multiProcessorCount * 8, threads = 256;
  float *out;
  if (cudaMalloc(&out, sizeof(float) * blocks * threads) != cudaSuccess) return 1;
  auto t0 = std::chrono::steady_clock::now();
  int iters = 1 << 14;
  while (!stop && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    auto k0 = std::chrono::steady_clock::now();
    fma_loop<<<blocks, threads>>>(out, iters);
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - k0).count();
    if (ms < 5 && iters < (1 << 24)) iters *= 2; /* aim at about 10 ms a kernel */
    else if (ms > 20 && iters > 1024) iters /= 2;
  }
  cudaFree(out);
  return 0;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 60;
  signal(SIGTERM, on_stop);
  signal(SIGINT, on_stop);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) { /* 77: built, but nothing here it can run on (gpu-check: skipped) */
    fprintf(stderr, "gpu_load: no CUDA device it can run on (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none");
    return 77;
  }
  std::vector<std::thread> t;
  std::vector<int> rc(n, 0);
  for (int d = 0; d < n; d++) t.emplace_back([&, d] { rc[d] = run(d, seconds); });
  for (auto &x : t) x.join();
  for (int d = 0; d < n; d++)
    if (rc[d]) {
      fprintf(stderr, "gpu_load: GPU %d: %s\n", d, cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
  return 0;
}
