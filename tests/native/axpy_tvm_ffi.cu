// Toy axpy in the contest's tvm-ffi binding: z = x + alpha * y, launched on the caller's stream.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

__global__ void axpy_kernel(const float* x, const float* y, float alpha, float* z, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + alpha * y[i];
}

void run(tvm::ffi::TensorView x, tvm::ffi::TensorView y, double alpha, tvm::ffi::TensorView z) {
  int64_t n = x.numel();
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  axpy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(x.data_ptr()),
                                                   static_cast<const float*>(y.data_ptr()),
                                                   static_cast<float>(alpha), static_cast<float*>(z.data_ptr()), n);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
