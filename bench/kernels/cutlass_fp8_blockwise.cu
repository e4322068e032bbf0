// CUTLASS's sm90 block-scaled FP8 GEMM (1x128 scales of A, 128x128 of B), the
// kernel samples/gemm_fp8_blockscaled.hk is compared with: 128x128x128 tiles, one
// block per cluster (no multicast, as the sample), the cooperative schedule (two
// consumer warpgroups share a tile), bf16 D row-major. Only the kernel is
// instantiated; bench/cutlass_sass.py compiles it with nvcc -cubin for sm_90a.
#include <cutlass/cutlass.h>
#include <cutlass/detail/blockwise_scale_layout.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>

using namespace cute;

using TileMNK = Shape<_128, _128, _128>;
using ClusterMNK = Shape<_1, _1, _1>;
using Scales = decltype(cutlass::detail::sm90_trivial_blockwise_scale_config(TileMNK{}));
using LayoutSFA = decltype(Scales::deduce_layoutSFA());
using LayoutSFB = decltype(Scales::deduce_layoutSFB());
using E4M3 = cutlass::float_e4m3_t;
using BF16 = cutlass::bfloat16_t;

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileMNK, ClusterMNK,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, cutlass::layout::RowMajor, 8, BF16, cutlass::layout::RowMajor, 8,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    E4M3, cute::tuple<cutlass::layout::RowMajor, LayoutSFA>, 16,
    E4M3, cute::tuple<cutlass::layout::ColumnMajor, LayoutSFB>, 16,
    float, TileMNK, ClusterMNK,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise>::CollectiveOp;

using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;

// Taking the kernel's address instantiates it for the device pass.
void* cutlass_fp8_blockwise_kernel() {
    void (*kernel)(typename Kernel::Params) = &cutlass::device_kernel<Kernel>;
    return reinterpret_cast<void*>(kernel);
}
