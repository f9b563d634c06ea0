// pattern.cu: the data every mode of the example sends, and its check on
// the receiver. Word i of a buffer filled with seed s holds mix(s, i),
// which differs between seeds, so data left over from another mode or
// size fails the check. With check set, the kernel counts the words of p
// that differ from mul * mix(seed, i) + add into bad[0] and keeps the
// lowest such index in bad[1] (which the host sets to all ones first);
// mul 1 and add 0 check the data as filled, and the overlap example's
// loop, an affine map mod 2^32, is checked with the coefficients the host
// composes.
#include <msccl/msccl.cuh>

DEV u32 mix(u32 seed, u64 i) {
  u32 x = seed ^ (u32)i ^ ((u32)(i >> 32) * 0x85ebca6bu);
  x = (x ^ (x >> 16)) * 0x7feb352du;
  x = (x ^ (x >> 15)) * 0x846ca68bu;
  return (x ^ (x >> 16)) + (u32)i;
}

extern "C" __global__ void pattern(u32* p, u64 words, u32 seed, u32 mul, u32 add, int check, u64* bad) {
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
    u32 want = mul * mix(seed, i) + add;
    if (!check) {
      p[i] = want;
    } else if (p[i] != want) {
      atomicAdd(&bad[0], 1ull);
      atomicMin(&bad[1], i);
    }
  }
}
