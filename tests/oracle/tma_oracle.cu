// CuTe's side of the oracle for TMA tensor maps: make_tma_copy for a global
// tensor and a shared-memory box, recording every argument it passes to
// cuTensorMapEncodeTiled. The definition below replaces the driver's (CuTe is
// told to call it directly), so no driver or GPU is touched.
//
// `hopperc_tma_cases.h`, written by the test, defines hk_tma_cases(), which
// calls tma_case<...> for each case. Output: one "tma NAME" line per case,
// then one "arg FIELD VALUES..." line per argument.
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1

// Only host code runs: nvcc's device pass (once per target) gets an empty file.
#ifndef __CUDA_ARCH__
#include <cstdint>
#include <cstdio>

#include <cute/tensor.hpp>  // before the TMA traits, which need all of CuTe
#include <cute/atom/copy_traits_sm90_tma.hpp>

using namespace cute;

static void print_values(const char* field, const void* values, int count, int bytes) {
  std::printf("arg %s", field);
  for (int i = 0; i < count; ++i) {
    const char* value = static_cast<const char*>(values) + i * bytes;
    std::printf(" %llu", bytes == 8 ? static_cast<unsigned long long>(
                                          *reinterpret_cast<const cuuint64_t*>(value))
                                    : *reinterpret_cast<const cuuint32_t*>(value));
  }
  std::printf("\n");
}

CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap*, CUtensorMapDataType data_type, cuuint32_t rank, void* address,
    const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
    const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2_promotion,
    CUtensorMapFloatOOBfill oob_fill) {
  std::printf("arg data_type %d\narg rank %u\narg address %llu\n", int(data_type), rank,
              static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(address)));
  print_values("global_dim", dims, rank, 8);
  print_values("global_strides", strides, rank - 1, 8);  // bytes, dims 1 .. rank-1
  print_values("box_dim", box, rank, 4);
  print_values("element_strides", element_strides, rank, 4);
  std::printf("arg interleave %d\narg swizzle %d\narg l2_promotion %d\narg oob_fill %d\n",
              int(interleave), int(swizzle), int(l2_promotion), int(oob_fill));
  return CUDA_SUCCESS;
}

// The shared box hopperc's TMA load writes: rows of BOX_COLS elements,
// row-major, and with a swizzle Swizzle<BITS,4,3> over its byte addresses.
template <class T, int BITS, int BOX_ROWS, int BOX_COLS>
auto box_layout() {
  auto rows = make_layout(Shape<Int<BOX_ROWS>, Int<BOX_COLS>>{}, LayoutRight{});
  return make_composed_layout(Swizzle<BITS, 4, 3>{}, smem_ptr_flag_bits<sizeof_bits_v<T>>{},
                              rows);
}

// A row-major [rows, cols] tensor with `row_stride` elements between rows.
template <class T, int BITS, int BOX_ROWS, int BOX_COLS>
void tma_case(const char* name, uint64_t address, int rows, int cols, int64_t row_stride) {
  std::printf("tma %s\n", name);
  Tensor gmem = make_tensor(make_gmem_ptr(reinterpret_cast<T*>(address)),
                            make_layout(make_shape(rows, cols), make_stride(row_stride, _1{})));
  make_tma_copy(SM90_TMA_LOAD{}, gmem, box_layout<T, BITS, BOX_ROWS, BOX_COLS>());
}

// A [planes, rows, cols] tensor read one plane at a time: CuTe's modes are
// (rows, cols, planes), the box covering one plane.
template <class T, int BITS, int BOX_ROWS, int BOX_COLS>
void tma_case_planes(const char* name, uint64_t address, int planes, int rows, int cols,
                     int64_t row_stride, int64_t plane_stride) {
  std::printf("tma %s\n", name);
  Tensor gmem = make_tensor(make_gmem_ptr(reinterpret_cast<T*>(address)),
                            make_layout(make_shape(rows, cols, planes),
                                        make_stride(row_stride, _1{}, plane_stride)));
  make_tma_copy(SM90_TMA_LOAD{}, gmem, box_layout<T, BITS, BOX_ROWS, BOX_COLS>());
}

// A 1-D tensor of `length` elements, one box of BOX elements into a 1-D buffer.
template <class T, int BOX>
void tma_case_vector(const char* name, uint64_t address, int length) {
  std::printf("tma %s\n", name);
  Tensor gmem = make_tensor(make_gmem_ptr(reinterpret_cast<T*>(address)),
                            make_layout(make_shape(length)));
  make_tma_copy(SM90_TMA_LOAD{}, gmem, make_layout(Shape<Int<BOX>>{}));
}

#include "hopperc_tma_cases.h"

int main() {
  hk_tma_cases();
  return 0;
}
#endif  // __CUDA_ARCH__
