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

// A multicast load (SM90_TMA_LOAD_MULTICAST, C blocks): the map make_tma_copy
// builds for each block's part of the box, then per cluster rank the first
// global row and the shared byte offset of the part it issues
// ("slice RANK ROW BYTES"), from CuTe's partition of the box.
template <class T, int BITS, int BOX_ROWS, int BOX_COLS, int C>
void tma_case_multicast(const char* name, uint64_t address, int rows, int cols,
                        int64_t row_stride) {
  std::printf("tma %s\n", name);
  Tensor gmem = make_tensor(make_gmem_ptr(reinterpret_cast<T*>(address)),
                            make_layout(make_shape(rows, cols), make_stride(row_stride, _1{})));
  auto box = box_layout<T, BITS, BOX_ROWS, BOX_COLS>();
  auto tma = make_tma_copy(SM90_TMA_LOAD_MULTICAST{}, gmem, box, Int<C>{});
  Tensor coords = local_tile(tma.get_tma_tensor(make_shape(rows, cols)),
                             Shape<Int<BOX_ROWS>, Int<BOX_COLS>>{}, make_coord(0, 0));
  Tensor smem = make_tensor(make_smem_ptr(reinterpret_cast<T*>(0)), box);
  for (int rank = 0; rank < C; ++rank) {
    auto part = tma.get_slice(rank);
    auto first = part.partition_S(coords)(0);  // the TMA's coordinates: columns first
    long bytes = long(reinterpret_cast<char*>(raw_pointer_cast(part.partition_D(smem).data())) -
                      reinterpret_cast<char*>(0));
    std::printf("slice %d %d %ld\n", rank, int(get<1>(first)), bytes);
  }
}

// A cluster of X x Y x Z blocks: each block's rank in it (CuTe's column-major
// layout of the cluster, as %cluster_ctarank) and the multicast mask of a load
// shared along mode MODE ("rank X Y Z RANK MASK").
template <int X, int Y, int Z, int MODE>
void cluster_case(const char* name) {
  std::printf("cluster %s\n", name);
  auto cluster = Layout<Shape<Int<X>, Int<Y>, Int<Z>>>{};
  for (int z = 0; z < Z; ++z)
    for (int y = 0; y < Y; ++y)
      for (int x = 0; x < X; ++x)
        std::printf("rank %d %d %d %d %u\n", x, y, z, int(cluster(x, y, z)),
                    unsigned(create_tma_multicast_mask<MODE>(cluster, make_coord(x, y, z))));
}

#include "hopperc_tma_cases.h"

int main() {
  hk_tma_cases();
  return 0;
}
#endif  // __CUDA_ARCH__
