// Sorting 64-bit keys with AVX-512 (unweighted windows: every quantile window of one item each, the
// Lossy Counting windows of uint64 keys, the partial window of every quantile question).
//
// A bitonic merge sort in registers (Inoue & Taura's in-register merge, as in the SIMD sorts of
// the literature; our own code): blocks of 64 keys are sorted in eight zmm registers (a 19-
// comparator network down the columns, a transpose, three rounds of bitonic merges), then sorted
// runs are merged pairwise, eight keys a step, from both ends at once (two independent chains).
// Keys alone are sorted, so the result is the unique ascending order: the same array the radix
// sort and std::sort return, whatever the input (the tests compare them on every shape).
//
// Measured on windows of 1,024 keys (2-vCPU VM, Xeon with AVX-512, thread CPU time): 5.0 ns a key
// against 11.5 for the MSD radix sort on doubles and 6.9 on hashed keys; 8.2-8.4 against 11-12.5
// at 4,096 keys; 25 against 27-29 at 65,536.
#ifndef STREAMSTATS_CORE_ACCEL_SIMD_SORT_H_
#define STREAMSTATS_CORE_ACCEL_SIMD_SORT_H_

#include <cstddef>
#include <cstdint>

namespace streamstats::core {

// The most keys SimdSortKeys takes (its buffers are two arrays of the keys, rounded up to 64).
inline constexpr size_t kSimdSortMaxKeys = size_t{1} << 20;

// Whether SimdSortKeys runs here: this CPU has AVX-512F and it was not turned off.
bool SimdSortAvailable();
// Turns the SIMD sort off (false) or back on where the CPU has it; for tests and benchmarks that
// compare it with the radix sort. Process-wide; call before sorting starts.
void SetSimdSortEnabled(bool enabled);

// Sorts keys[0, n) ascending; requires SimdSortAvailable() and n <= kSimdSortMaxKeys.
void SimdSortKeys(uint64_t* keys, size_t n);

}  // namespace streamstats::core

#endif  // STREAMSTATS_CORE_ACCEL_SIMD_SORT_H_
