// CUTLASS's sm90 split-K / stream-K GEMM, the kernel samples/gemm_splitk.hk and
// samples/gemm_streamk.hk are compared with: bf16 A (row-major) and B (column-major,
// K-major as the samples' B), f32 accumulators and an f32 D, 128x256x64 tiles, one
// block per cluster, the cooperative schedule (two consumer warpgroups share a
// tile), and the stream-K tile scheduler. One binary serves data-parallel,
// split-K and stream-K launches (the decomposition is a run-time argument): the
// partial tiles meet in a global workspace (the first split stores its
// accumulators, the others wait on a per-tile lock and add theirs, the last adds
// the workspace and runs the epilogue). Only the kernel is instantiated;
// bench/cutlass_sass.py compiles it with nvcc -cubin for sm_90a.
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

using namespace cute;

using TileMNK = Shape<_128, _256, _64>;
using ClusterMNK = Shape<_1, _1, _1>;
using BF16 = cutlass::bfloat16_t;

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileMNK, ClusterMNK,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, cutlass::layout::RowMajor, 4, float, cutlass::layout::RowMajor, 4,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    BF16, cutlass::layout::RowMajor, 8,
    BF16, cutlass::layout::ColumnMajor, 8,
    float, TileMNK, ClusterMNK,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using Kernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, Mainloop, Epilogue, cutlass::gemm::StreamKScheduler>;

// Taking the kernel's address instantiates it for the device pass.
void* cutlass_streamk_kernel() {
    void (*kernel)(typename Kernel::Params) = &cutlass::device_kernel<Kernel>;
    return reinterpret_cast<void*>(kernel);
}
