// reduce.cuh: element-wise reductions over 32-bit words. Floating point
// types accumulate in fp32 across every source and round once at the end,
// so an n-way reduction of f16/bf16/fp8 matches a CPU that does the same.

// Data type codes (DT_*, ir.DType) and reduce op codes (RED_*,
// kernels.ReduceCode) are in the generated abi.cuh.

DEV float red_f(float a, float b, int op) {
  switch (op) {
    case RED_MIN: return b < a ? b : a;
    case RED_MAX: return b > a ? b : a;
    case RED_PROD: return __fmul_rn(a, b);
    default: return __fadd_rn(a, b);
  }
}
DEV i32 red_i(i32 a, i32 b, int op) {
  switch (op) {
    case RED_MIN: return b < a ? b : a;
    case RED_MAX: return b > a ? b : a;
    case RED_PROD: return (i32)((u32)a * (u32)b);
    default: return (i32)((u32)a + (u32)b);
  }
}
DEV u32 red_u(u32 a, u32 b, int op) {
  switch (op) {
    case RED_MIN: return b < a ? b : a;
    case RED_MAX: return b > a ? b : a;
    case RED_PROD: return a * b;
    default: return a + b;
  }
}
DEV u32 red_u8x4(u32 a, u32 b, int op) {
  u32 r = 0;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    u32 x = (a >> (8 * k)) & 0xffu, y = (b >> (8 * k)) & 0xffu;
    r |= (red_u(x, y, op) & 0xffu) << (8 * k);
  }
  return r;
}

// ---- FP8 (OCP E4M3 and E5M2; upstream's __fp8_e4m3 and __fp8_e5m2) ----
// Written out in integer code, step for step as executor/cpu/dtype.go's
// f32ToF8, f8e4m3ToF32 and f8e5m2ToF32, so that the GPU and the CPU
// oracle agree bit for bit on every arch (no cuda_fp8.h here, and the
// cvt.*.e4m3x2 instructions exist only from sm_89). The rules, as there:
// round to nearest even; |x| >= the largest finite value (448 in E4M3,
// 57344 in E5M2), infinities included, saturates to it with x's sign
// (satfinite: what upstream's __nv_fp8 constructors do, and E4M3 has no
// infinity anyway); every NaN becomes 0x7f, sign and payload dropped,
// because f32 arithmetic here returns the canonical NaN whatever the
// operands; zeros and underflows keep their sign.
#define F8_NAN 0x7fu

// f32_to_f8 narrows to a format with m mantissa bits and exponent bias
// bias; maxCode is its largest finite code and maxF that value's f32 bits.
DEV u32 f32_to_f8(float f, int m, int bias, u32 maxCode, u32 maxF) {
  u32 b = __float_as_uint(f);
  u32 sign = (b >> 24) & 0x80u;
  u32 a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return F8_NAN;
  // Saturate; below maxF rounding cannot pass it (the next code up is
  // more than half an ulp above), so nothing is checked after rounding.
  if (a >= maxF) return sign | maxCode;
  if (a < 0x00800000u) return sign;  // zero or f32 subnormal: underflows
  int e = (int)(a >> 23) - 127;
  if (e < 1 - bias) {
    // Subnormal: count quanta of 2^(1-bias-m); a count of 2^m is the
    // smallest normal's code, so a carry is the right answer.
    u32 sig = (a & 0x7fffffu) | 0x800000u;
    u32 shift = (u32)(24 - bias - m - e);
    if (shift > 24) return sign;
    u32 code = sig >> shift;
    u32 rest = sig & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (code & 1u))) code++;
    return sign | code;
  }
  u32 s = (u32)(23 - m);
  u32 code = ((u32)(e + bias) << m) | ((a & 0x7fffffu) >> s);
  u32 rest = a & ((1u << s) - 1u), half = 1u << (s - 1u);
  if (rest > half || (rest == half && (code & 1u))) code++;  // may carry into the exponent: right
  return sign | code;
}
DEV float f8e4m3_to_f32(u32 v) {
  u32 sign = (v & 0x80u) << 24, a = v & 0x7fu;
  if (a == 0x7fu) return __uint_as_float(sign | 0x7fc00000u);
  if (a < 8u) {
    // Subnormal a * 2^-9 (exact); built from bits so that zero keeps its sign.
    if (a == 0u) return __uint_as_float(sign);
    return __uint_as_float(sign | __float_as_uint((float)a * 0.001953125f));
  }
  return __uint_as_float(sign | (((a >> 3) + 120u) << 23) | ((a & 7u) << 20));
}
// E5M2 is the upper byte of an IEEE half: same exponent width and bias.
DEV float f8e5m2_to_f32(u32 v) { return f16_to_f32((u16)((v & 0xffu) << 8)); }

template <int DT>
DEV float f8_to_f32(u32 v) {
  return DT == DT_F8E4M3 ? f8e4m3_to_f32(v) : f8e5m2_to_f32(v);
}
template <int DT>
DEV u32 f32_to_f8t(float f) {
  return DT == DT_F8E4M3 ? f32_to_f8(f, 3, 7, 0x7eu, 0x43e00000u) : f32_to_f8(f, 2, 15, 0x7bu, 0x47600000u);
}

// LANES is the number of elements of a 32-bit word for the float types.
#define IS_F8(DT) ((DT) == DT_F8E4M3 || (DT) == DT_F8E5M2)
#define LANES(DT) (IS_F8(DT) ? 4 : 2)

// Acc holds NW words' worth of elements while a reduction runs.
template <int DT, int NW>
struct Acc {
  float f[LANES(DT) * NW];
  u32 w[NW];
};

template <int DT, int NW>
DEV void acc_init(Acc<DT, NW>& a, const u32* v) {
#pragma unroll
  for (int i = 0; i < NW; i++) {
    if (DT == DT_F32) {
      a.f[i] = __uint_as_float(v[i]);
    } else if (DT == DT_F16) {
      a.f[2 * i] = f16_to_f32((u16)(v[i] & 0xffffu));
      a.f[2 * i + 1] = f16_to_f32((u16)(v[i] >> 16));
    } else if (DT == DT_BF16) {
      a.f[2 * i] = bf16_to_f32((u16)(v[i] & 0xffffu));
      a.f[2 * i + 1] = bf16_to_f32((u16)(v[i] >> 16));
    } else if (IS_F8(DT)) {
#pragma unroll
      for (int k = 0; k < 4; k++) a.f[4 * i + k] = f8_to_f32<DT>((v[i] >> (8 * k)) & 0xffu);
    } else {
      a.w[i] = v[i];
    }
  }
}

template <int DT, int NW>
DEV void acc_add(Acc<DT, NW>& a, const u32* v, int op) {
#pragma unroll
  for (int i = 0; i < NW; i++) {
    if (DT == DT_F32) {
      a.f[i] = red_f(a.f[i], __uint_as_float(v[i]), op);
    } else if (DT == DT_F16) {
      a.f[2 * i] = red_f(a.f[2 * i], f16_to_f32((u16)(v[i] & 0xffffu)), op);
      a.f[2 * i + 1] = red_f(a.f[2 * i + 1], f16_to_f32((u16)(v[i] >> 16)), op);
    } else if (DT == DT_BF16) {
      a.f[2 * i] = red_f(a.f[2 * i], bf16_to_f32((u16)(v[i] & 0xffffu)), op);
      a.f[2 * i + 1] = red_f(a.f[2 * i + 1], bf16_to_f32((u16)(v[i] >> 16)), op);
    } else if (IS_F8(DT)) {
#pragma unroll
      for (int k = 0; k < 4; k++) a.f[4 * i + k] = red_f(a.f[4 * i + k], f8_to_f32<DT>((v[i] >> (8 * k)) & 0xffu), op);
    } else if (DT == DT_I32) {
      a.w[i] = (u32)red_i((i32)a.w[i], (i32)v[i], op);
    } else if (DT == DT_U32) {
      a.w[i] = red_u(a.w[i], v[i], op);
    } else {
      a.w[i] = red_u8x4(a.w[i], v[i], op);
    }
  }
}

template <int DT, int NW>
DEV void acc_out(const Acc<DT, NW>& a, u32* v) {
#pragma unroll
  for (int i = 0; i < NW; i++) {
    if (DT == DT_F32) {
      v[i] = __float_as_uint(a.f[i]);
    } else if (DT == DT_F16) {
      v[i] = (u32)f32_to_f16(a.f[2 * i]) | ((u32)f32_to_f16(a.f[2 * i + 1]) << 16);
    } else if (DT == DT_BF16) {
      v[i] = (u32)f32_to_bf16(a.f[2 * i]) | ((u32)f32_to_bf16(a.f[2 * i + 1]) << 16);
    } else if (IS_F8(DT)) {
      u32 r = 0;
#pragma unroll
      for (int k = 0; k < 4; k++) r |= f32_to_f8t<DT>(a.f[4 * i + k]) << (8 * k);
      v[i] = r;
    } else {
      v[i] = a.w[i];
    }
  }
}
