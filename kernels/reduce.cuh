// reduce.cuh: element-wise reductions over 32-bit words. Floating point
// types accumulate in fp32 across every source and round once at the end,
// so an n-way reduction of f16/bf16 matches a CPU that does the same.

// Data type codes: the order of kernels.DType on the Go side.
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_I32 3
#define DT_U32 4
#define DT_U8 5

// Reduce op codes: the order of kernels.ReduceCode on the Go side.
#define RED_SUM 0
#define RED_MIN 1
#define RED_MAX 2
#define RED_PROD 3

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

// Acc holds NW words' worth of elements while a reduction runs.
template <int DT, int NW>
struct Acc {
  float f[2 * NW];
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
    } else {
      v[i] = a.w[i];
    }
  }
}
