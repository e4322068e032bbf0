// CuTe's side of the oracle for the SM90 encodings hopperc computes itself:
// wgmma shared-memory matrix descriptors, the 32B/64B/128B swizzle, the wgmma
// register fragments (accumulator D and register A), the layout of swizzled
// buffers wider than their swizzle span, and stmatrix's register and address
// mapping.
//
// The two headers it includes are written by the test from hopperc's own
// output: `hopperc_prelude.h` holds device helpers cut from the rendered
// prelude (plain bit arithmetic), `hopperc_cases.h` the cases, with
// expressions cut from generated kernels, calling the templates below with
// the matching CuTe types. Every line printed starts with a tag (desc,
// swizzle, frag, slot, fp8a, tiled, stsm); the test parses and compares them.
#include <array>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cute/atom/copy_traits_sm90.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/swizzle.hpp>

#include "hopperc_prelude.h"

using namespace cute;
using SM90::GMMA::Major;

// The canonical GMMA swizzle atom for a swizzle of 2^bits 16-byte chunks.
template <class T, Major major, int bits>
auto gmma_atom() {
  if constexpr (major == Major::K) {
    if constexpr (bits == 1) return SM90::GMMA::Layout_K_SW32_Atom<T>{};
    else if constexpr (bits == 2) return SM90::GMMA::Layout_K_SW64_Atom<T>{};
    else return SM90::GMMA::Layout_K_SW128_Atom<T>{};
  } else {
    if constexpr (bits == 1) return SM90::GMMA::Layout_MN_SW32_Atom<T>{};
    else if constexpr (bits == 2) return SM90::GMMA::Layout_MN_SW64_Atom<T>{};
    else return SM90::GMMA::Layout_MN_SW128_Atom<T>{};
  }
}

// An (MN, K) operand tile at byte address `address`, split into k-steps of
// KSTEP elements as a CuTe kernel partitions it, one descriptor per k-step
// (make_gmma_desc for the tile, advanced over the k-steps by CuTe's own
// DescriptorIterator, as partition_fragment_A/B do). Prints the major mode
// (the instruction's transpose bit) and CuTe's and hopperc's value of each k-step.
// The tile is hopperc's buffer layout: atoms down the buffer's rows first, so
// along MN first for a K-major operand ([MN, K] buffer) and along K first for
// an MN-major one ([K, MN] buffer): each span-wide column block holds every row.
// With PARTS > 1 the operand is block `part` of PARTS along MN (a warpgroup's
// M of an MN-major A^T), cut from the tile with local_tile.
template <class T, Major major, int bits, int MN, int K, int KSTEP, int PARTS>
void descriptors(const char* name, uint32_t address, int part,
                 const unsigned long long* hopperc, int steps) {
  using RowsFirst = conditional_t<major == Major::K, Step<_1, _2>, Step<_2, _1>>;
  auto layout = tile_to_shape(gmma_atom<T, major, bits>(), Shape<Int<MN>, Int<K>>{},
                              RowsFirst{});
  // Only the layout matters on the host: make_gmma_desc cannot read a shared
  // address there (it prints a warning and uses 0), so the address (and the
  // part's offset in the tile, from the layout) is added below in 16-byte
  // units, exactly as the device field takes it.
  Tensor smem = make_tensor(make_smem_ptr(static_cast<T*>(nullptr)), layout);
  Tensor block = local_tile(smem, Shape<Int<MN / PARTS>, Int<K>>{}, make_coord(part, 0));
  const uint32_t offset = uint32_t(layout(part * (MN / PARTS), 0)) * sizeof(T);
  Tensor ksteps = zipped_divide(block, Shape<Int<MN / PARTS>, Int<KSTEP>>{});
  Tensor descs = MakeTensor<SM90::GMMA::smem_desc<major>>{}(ksteps);
  auto base = descs.data() + static_cast<int>((address + offset) / 16);
  for (int step = 0; step < steps; ++step) {
    uint64_t cute_desc = base[descs.layout()(0, step)];
    std::printf("desc %s %d %d %016llx %016llx\n", name, step, int(major),
                static_cast<unsigned long long>(cute_desc), hopperc[step]);
  }
}

// Swizzle<bits,4,3> over every byte address below `bytes`: CuTe, then hopperc.
template <int bits>
void swizzle(uint32_t bytes) {
  Swizzle<bits, 4, 3> cute_swizzle;
  std::printf("swizzle %d cute", bits);
  for (uint32_t a = 0; a < bytes; ++a) std::printf(" %u", uint32_t(cute_swizzle(a)));
  std::printf("\nswizzle %d hopperc", bits);
  for (uint32_t a = 0; a < bytes; ++a) std::printf(" %u", hk_swizzle(a, (1u << bits) - 1));
  std::printf("\n");
}

// Layout (thread, value) -> (row, col) of a 64-row fragment (CuTe's layouts
// index the 64 x cols tile column-major): one line per thread, "row,col" pairs.
template <class Layout>
void fragment(const char* name, const char* operand, Layout layout) {
  for (int t = 0; t < 128; ++t) {
    std::printf("frag %s %s %d", name, operand, t);
    for (int v = 0; v < int(size<1>(layout)); ++v) {
      int index = layout(t, v);
      std::printf(" %d,%d", index % 64, index / 64);
    }
    std::printf("\n");
  }
}

// hopperc's slot -> (row, col) for `slots` slots of every thread, same format.
template <class Row, class Col>
void slots(const char* name, int count, Row row, Col col) {
  for (int t = 0; t < 128; ++t) {
    std::printf("slot %s %d", name, t);
    for (int k = 0; k < count; ++k) std::printf(" %d,%d", row(t, k), col(t, k));
    std::printf("\n");
  }
}

// A swizzled [ROWS, COLS] buffer at byte address `base`, as CuTe lays out a tile
// of its K-major swizzle atoms (tile_to_shape: atoms down the rows first), and
// hopperc's element address: one line each, the byte address of every element
// in row-major order.
template <class T, int bits, int ROWS, int COLS, class Address>
void tiled_layout(const char* name, uint32_t base, Address hopperc) {
  auto layout = tile_to_shape(gmma_atom<T, Major::K, bits>(), Shape<Int<ROWS>, Int<COLS>>{});
  // The atom swizzles the pointer's bits: a null base gives offsets, which the
  // swizzle maps as it maps the address when the base is on the pattern's repeat.
  Tensor smem = make_tensor(make_smem_ptr(static_cast<T*>(nullptr)), layout);
  std::printf("tiled %s cute", name);
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c)
      std::printf(" %u", base + uint32_t(reinterpret_cast<uintptr_t>(raw_pointer_cast(&smem(r, c)))));
  std::printf("\ntiled %s hopperc", name);
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) std::printf(" %u", hopperc(r, c));
  std::printf("\n");
}

// stmatrix.x4 (SM90_U32x4_STSM_N): for each lane, the bit of the four 8x8
// 16-bit matrices (stacked, 128 bits a row) each bit of its registers goes to
// (SrcLayout: one line per lane, 128 values), and the first bit of the row its
// address names (DstLayout).
void stmatrix_x4() {
  using Traits = Copy_Traits<SM90_U32x4_STSM_N>;
  typename Traits::SrcLayout src;
  typename Traits::DstLayout dst;
  for (int t = 0; t < 32; ++t) {
    std::printf("stsm src %d", t);
    for (int v = 0; v < int(size<1>(src)); ++v) std::printf(" %d", int(src(t, v)));
    std::printf("\nstsm dst %d %d %d\n", t, int(dst(t, 0)), int(size<1>(dst)));
  }
}

template <class Op>
void accumulator(const char* name) {
  fragment(name, "C", typename MMA_Traits<Op>::CLayout{});
}

template <class Op>
void register_a(const char* name) {
  fragment(name, "A", typename MMA_Traits<Op>::ALayout{});
}

// hopperc's fp8 register A: every thread's SLOTS values in the accumulator
// layout (tagged with their row, then their column: integers below 256, which
// the stand-in pack keeps as bytes) exchanged by the prelude's
// hk_fp8_a_exchange, each shuffle answered with what the source lane of the
// quad sent (a first pass records every lane's sends, which do not depend on
// what it receives). One line per thread: the (row, col) of each byte of each
// register, low byte first.
template <int SLOTS, class Tag>
void fp8_exchanged(std::vector<std::array<unsigned, SLOTS / 4>>& out, Tag tag) {
  std::vector<std::vector<unsigned>> sent(128);
  auto pack = [](float lo, float hi) { return unsigned(lo) | unsigned(hi) << 8; };
  for (int pass = 0; pass < 2; ++pass) {
    for (int t = 0; t < 128; ++t) {
      float v[SLOTS];
      for (int k = 0; k < SLOTS; ++k) v[k] = float(tag(t, k));
      size_t call = 0;
      auto shuffle = [&](unsigned value, int source) {
        if (pass == 0) {
          sent[t].push_back(value);
          return 0u;
        }
        return sent[(t & ~3) | source].at(call++);
      };
      unsigned a[SLOTS / 4];
      hk_fp8_a_exchange<SLOTS>(a, v, t % 32, pack, shuffle);
      for (int i = 0; i < SLOTS / 4; ++i) out[t][i] = a[i];
    }
  }
}

template <int SLOTS, class Row, class Col>
void fp8_register_a(const char* name, Row row, Col col) {
  std::vector<std::array<unsigned, SLOTS / 4>> rows(128), cols(128);
  fp8_exchanged<SLOTS>(rows, row);
  fp8_exchanged<SLOTS>(cols, col);
  for (int t = 0; t < 128; ++t) {
    std::printf("fp8a %s %d", name, t);
    for (int i = 0; i < SLOTS / 4; ++i)
      for (int b = 0; b < 4; ++b)
        std::printf(" %u,%u", (rows[t][i] >> 8 * b) & 0xffu, (cols[t][i] >> 8 * b) & 0xffu);
    std::printf("\n");
  }
}

#include "hopperc_cases.h"

int main() {
  hk_descriptor_cases();
  swizzle<1>(HK_SWIZZLE_BYTES);
  swizzle<2>(HK_SWIZZLE_BYTES);
  swizzle<3>(HK_SWIZZLE_BYTES);
  hk_fragment_cases();
  hk_layout_cases();
  stmatrix_x4();
  return 0;
}
