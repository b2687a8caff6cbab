"""The C++ source of the CPU LIF scans (compiled by :mod:`snnbench.fused.cpu` at first use).

Kept as a Python string so that it ships with the package without package-data settings.
"""

from __future__ import annotations

SOURCE = r"""// CPU LIF scans for snnbench.fused: the forward recurrence and its exact BPTT.
//
// Plain C++ (no torch headers, so it compiles in about a second), loaded with ctypes by
// snnbench/fused/cpu.py, which passes raw pointers of torch tensors it allocated.
//
// Layout: every (T, B, n) tensor is time-major and its last two dimensions are flattened to
// N = B*n elements per time step. The work is split over the N elements (each thread owns a
// contiguous range for all T steps, so threads never synchronise inside the scan); the inner
// loop runs over the range and is auto-vectorised.
//
// Op order: compile with -ffp-contract=off (cpu.py does) so that `beta * v` and `+ x` are two
// roundings, exactly as in snnbench.workload.linear_lif.reference (NumPy), and the threshold test
// sees the same float32 value. The backward mirrors the reference's expression order too.
//
// Threads: OpenMP from the same libgomp as torch (same soname, already loaded by torch), so the
// scan shares torch's thread pool instead of starting a second one.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <omp.h>

namespace {

using bf16_t = std::uint16_t;  // bfloat16 bits (torch.bfloat16)
using f16_t = _Float16;         // IEEE half (torch.float16)

inline float load_f(const float* p, std::int64_t i) { return p[i]; }
inline float load_f(const f16_t* p, std::int64_t i) { return static_cast<float>(p[i]); }
inline float load_f(const bf16_t* p, std::int64_t i) {
    std::uint32_t u = static_cast<std::uint32_t>(p[i]) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline void store_f(float* p, std::int64_t i, float v) { p[i] = v; }
inline void store_f(f16_t* p, std::int64_t i, float v) { p[i] = static_cast<f16_t>(v); }
inline void store_f(bf16_t* p, std::int64_t i, float v) {
    // round to nearest even, as torch's float -> bfloat16 cast (NaN stays NaN)
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    std::uint32_t r = ((u & 0x7fffffffu) > 0x7f800000u)
                          ? (u | 0x00400000u)
                          : u + 0x7fffu + ((u >> 16) & 1u);
    p[i] = static_cast<bf16_t>(r >> 16);
}

// The element range [begin, end) of thread `tid` out of `nthr`, cut at multiples of 32
// elements so that two threads never write the same cache line (of a 64-byte-aligned buffer,
// as torch allocates them).
inline void thread_range(std::int64_t N, int tid, int nthr, std::int64_t* begin,
                         std::int64_t* end) {
    const std::int64_t blocks = (N + 31) / 32;
    const std::int64_t per = blocks / nthr, extra = blocks % nthr;
    const std::int64_t b0 = tid * per + (tid < extra ? tid : extra);
    const std::int64_t b1 = b0 + per + (tid < extra ? 1 : 0);
    *begin = b0 * 32 < N ? b0 * 32 : N;
    *end = b1 * 32 < N ? b1 * 32 : N;
}

// Threads worth using for `work` element-steps: one thread scans about 8 G elements/s while
// the data is in cache (0.1 ms for T=100, B=16, n=512), so below ~0.25 ms of work a second
// thread saves too little to be worth the risk that, on a busy machine, the parallel region
// waits for a descheduled thread (12 ms instead of 0.1 ms in one measurement). One thread per
// started 2 M element-steps.
inline int threads_for(std::int64_t work, int requested) {
    if (requested < 1) requested = 1;
    constexpr std::int64_t kPerThread = std::int64_t{1} << 21;
    std::int64_t useful = (work + kPerThread - 1) / kPerThread;
    if (useful < 1) useful = 1;
    return static_cast<int>(useful < requested ? useful : requested);
}

// ---- forward --------------------------------------------------------------------------
// E: element type of y and spikes. For float, y and v_pre are the same buffer (v_pre
// overwrites y in place); otherwise y (E) is read and v_pre (float32) written separately.
template <typename E, bool SUBTRACT>
void forward_range(const E* y, float* vpre, E* spikes, float* v, std::int64_t T,
                   std::int64_t N, std::int64_t i0, std::int64_t i1, float beta,
                   float theta) {
    const std::int64_t len = i1 - i0;
    for (std::int64_t k = 0; k < len; ++k) v[k] = 0.0f;
    for (std::int64_t t = 0; t < T; ++t) {
        float* vr = vpre + t * N + i0;
        E* sr = spikes + t * N + i0;
        if constexpr (std::is_same_v<E, float>) {
            // in place: read y[t] and write v_pre[t] through the same pointer
            for (std::int64_t k = 0; k < len; ++k) {
                const float decayed = beta * v[k];  // rounding 1
                const float vp = decayed + vr[k];   // rounding 2 (no FMA: -ffp-contract=off)
                const float s = vp >= theta ? 1.0f : 0.0f;
                vr[k] = vp;
                sr[k] = s;
                v[k] = SUBTRACT ? vp - theta * s : vp * (1.0f - s);
            }
        } else {
            const E* __restrict yr = y + t * N + i0;
            float* __restrict vw = vr;
            for (std::int64_t k = 0; k < len; ++k) {
                const float decayed = beta * v[k];
                const float vp = decayed + load_f(yr, k);
                const float s = vp >= theta ? 1.0f : 0.0f;
                vw[k] = vp;
                store_f(sr, k, s);
                v[k] = SUBTRACT ? vp - theta * s : vp * (1.0f - s);
            }
        }
    }
}

// Runs body(i0, i1, scratch) on nt threads, each over its own columns [i0, i1) of N
// (thread_range) with a float scratch row of i1 - i0 elements. Returns 1 when a thread could
// not allocate its row (that thread's columns are then not done), else 0.
template <typename Body>
int parallel_columns(std::int64_t N, int nt, const Body& body) {
    int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        std::int64_t i0, i1;
        thread_range(N, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
        if (i1 > i0) {
            float* scratch = static_cast<float*>(std::malloc(sizeof(float) * (i1 - i0)));
            if (scratch == nullptr) {
                failed = 1;
            } else {
                body(i0, i1, scratch);
                std::free(scratch);
            }
        }
    }
    return failed;
}

template <typename E>
int forward_impl(const void* y, float* vpre, void* spikes, std::int64_t T, std::int64_t N,
                 float beta, float theta, int reset, int nthreads) {
    const E* ye = static_cast<const E*>(y);
    E* se = static_cast<E*>(spikes);
    // v: the membrane potential of the thread's columns
    return parallel_columns(N, threads_for(T * N, nthreads),
                            [&](std::int64_t i0, std::int64_t i1, float* v) {
        if (reset == 0)
            forward_range<E, true>(ye, vpre, se, v, T, N, i0, i1, beta, theta);
        else
            forward_range<E, false>(ye, vpre, se, v, T, N, i0, i1, beta, theta);
    });
}

// ---- backward -------------------------------------------------------------------------
enum Surrogate { FAST_SIGMOID = 0, ATAN = 1, SIGMOID = 2 };

struct SurrogateConsts {
    float slope;     // k
    float half;      // k / 2               (atan)
    float atan_c;    // float32(pi/2) * k   (atan; same rounding as the NumPy reference)
};

// exp(x) for the sigmoid surrogate, written so that GCC vectorises it (std::exp is a scalar
// libm call: 5 ns per element, 1 ms of the backward at n=128, T=100, B=16). Cephes' expf:
// x = n·ln2 + g with a two-constant Cody-Waite reduction, a degree-6 polynomial for e^g, and
// 2^n built in the exponent bits; about 1 ulp, like libm's. Outside [-87.3, 88.0] it returns 0
// and +inf (libm: a denormal, or a finite value up to 88.72), which changes the surrogate by
// less than 1e-37.
inline float exp_vec(float x) {
    constexpr float kHi = 88.0f, kLo = -87.3365447f;
    const float xc = x > kHi ? kHi : (x < kLo ? kLo : x);
    // n = round(x / ln2) by the 1.5·2^23 trick (std::floor would not vectorise without
    // -fno-trapping-math); exact for |x / ln2| < 2^22, no reassociation involved
    const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float g = xc - n * 0.693359375f;
    g = g - n * -2.12194440e-4f;
    const float z = g * g;
    float p = 1.9875691500e-4f;
    p = p * g + 1.3981999507e-3f;
    p = p * g + 8.3334519073e-3f;
    p = p * g + 4.1665795894e-2f;
    p = p * g + 1.6666665459e-1f;
    p = p * g + 5.0000001201e-1f;
    const float y = p * z + g + 1.0f;
    const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    const float r = y * scale;
    return x > kHi ? INFINITY : (x < kLo ? 0.0f : r);
}

template <int SUR>
inline float surrogate(float u, const SurrogateConsts& c) {
    if constexpr (SUR == FAST_SIGMOID) {
        const float d = 1.0f + c.slope * std::fabs(u);
        return 1.0f / (d * d);
    } else if constexpr (SUR == ATAN) {
        const float a = c.atan_c * u;
        return c.half / (1.0f + a * a);
    } else {
        const float sig = 1.0f / (1.0f + exp_vec(-(c.slope * u)));
        return c.slope * sig * (1.0f - sig);
    }
}

// G: element type of grad_s and dY. GBCAST: grad_s[t] is one value per step (the stride-0
// gradient of .sum()); otherwise grad_s rows are contiguous with row stride g_st.
// For float, dY overwrites v_pre in place.
template <typename G, int SUR, bool SUBTRACT, bool GBCAST>
void backward_range(float* vpre, const G* g, std::int64_t g_st, G* dy, float* acc, float* gv,
                    std::int64_t T, std::int64_t N, std::int64_t i0, std::int64_t i1,
                    float beta, float theta, const SurrogateConsts& c, float keep) {
    const std::int64_t len = i1 - i0;
    for (std::int64_t k = 0; k < len; ++k) {
        gv[k] = 0.0f;   // dL/dv_post[t], carried backwards in time
        acc[k] = 0.0f;  // sum over t of dL/dx[t] (bias gradient before the batch sum)
    }
    for (std::int64_t t = T - 1; t >= 0; --t) {
        float* vr = vpre + t * N + i0;
        const G* gr = g + t * g_st + (GBCAST ? 0 : i0);
        const float gscalar = GBCAST ? load_f(gr, 0) : 0.0f;
        G* dr;
        if constexpr (std::is_same_v<G, float>)
            dr = vr;
        else
            dr = dy + t * N + i0;
        for (std::int64_t k = 0; k < len; ++k) {
            const float vp = vr[k];
            const float s = vp >= theta ? 1.0f : 0.0f;
            const float sg = surrogate<SUR>(vp - theta, c);
            const float gs = GBCAST ? gscalar : load_f(gr, k);
            const float via_spike = SUBTRACT ? -theta : -vp;  // d v_post / d s
            const float direct = SUBTRACT ? 1.0f : 1.0f - s;  // d v_post / d v_pre, s fixed
            const float gvk = gv[k];
            // keep = 0 detaches the reset: (gvk * via) * 0 adds exactly zero
            const float total = gs + (gvk * via_spike) * keep;
            const float gvp = total * sg + gvk * direct;
            store_f(dr, k, gvp);
            acc[k] += gvp;
            gv[k] = beta * gvp;
        }
    }
}

template <typename G, int SUR, bool SUBTRACT>
void backward_dispatch_g(bool gbcast, float* vpre, const G* g, std::int64_t g_st, G* dy,
                         float* acc, float* gv, std::int64_t T, std::int64_t N,
                         std::int64_t i0, std::int64_t i1, float beta, float theta,
                         const SurrogateConsts& c, float keep) {
    if (gbcast)
        backward_range<G, SUR, SUBTRACT, true>(vpre, g, g_st, dy, acc, gv, T, N, i0, i1, beta,
                                               theta, c, keep);
    else
        backward_range<G, SUR, SUBTRACT, false>(vpre, g, g_st, dy, acc, gv, T, N, i0, i1,
                                                beta, theta, c, keep);
}

template <typename G>
int backward_impl(float* vpre, const void* g, std::int64_t g_st, int gbcast, void* dy,
                  float* db, std::int64_t T, std::int64_t B, std::int64_t n, float beta,
                  float theta, float slope, int reset, int sur, int detach, int nthreads) {
    const std::int64_t N = B * n;
    // the per-element time sums, reduced over the batch after the scan
    float* acc = static_cast<float*>(std::malloc(sizeof(float) * N));
    if (acc == nullptr) return 1;
    const SurrogateConsts c{slope, slope / 2.0f, static_cast<float>(M_PI / 2.0) * slope};
    const float keep = detach ? 0.0f : 1.0f;
    // the sigmoid surrogate (exp and a division) makes an element cost about 4.5 times more
    const int nt = threads_for(sur == SIGMOID ? 5 * T * N : T * N, nthreads);
    const G* ge = static_cast<const G*>(g);
    G* de = static_cast<G*>(dy);
    const bool gb = gbcast != 0;
    // gv: the gradient through the membrane of the thread's columns
    const int failed = parallel_columns(N, nt, [&](std::int64_t i0, std::int64_t i1, float* gv) {
        float* a = acc + i0;
#define SNN_BWD(SUR, SUB)                                                                 \
    backward_dispatch_g<G, SUR, SUB>(gb, vpre, ge, g_st, de, a, gv, T, N, i0, i1, beta, theta, \
                                     c, keep)
        if (reset == 0) {
            if (sur == FAST_SIGMOID) SNN_BWD(FAST_SIGMOID, true);
            else if (sur == ATAN) SNN_BWD(ATAN, true);
            else SNN_BWD(SIGMOID, true);
        } else {
            if (sur == FAST_SIGMOID) SNN_BWD(FAST_SIGMOID, false);
            else if (sur == ATAN) SNN_BWD(ATAN, false);
            else SNN_BWD(SIGMOID, false);
        }
#undef SNN_BWD
    });
    if (!failed && db != nullptr) {
        for (std::int64_t j = 0; j < n; ++j) db[j] = acc[j];
        for (std::int64_t b = 1; b < B; ++b) {
            const float* row = acc + b * n;
            for (std::int64_t j = 0; j < n; ++j) db[j] += row[j];
        }
    }
    std::free(acc);
    return failed;
}

// dst (cols, rows) = src (rows, cols)^T, both contiguous float32, in 16x16 tiles (each tile
// read row by row and written row by row through a local buffer, so both sides stream whole
// cache lines). Exact: a copy.
void transpose_range(const float* __restrict src, float* __restrict dst, std::int64_t rows,
                     std::int64_t cols, std::int64_t r_begin, std::int64_t r_end) {
    constexpr std::int64_t K = 16;
    for (std::int64_t r0 = r_begin; r0 < r_end; r0 += K) {
        const std::int64_t r1 = r0 + K < r_end ? r0 + K : r_end;
        for (std::int64_t c0 = 0; c0 < cols; c0 += K) {
            const std::int64_t c1 = c0 + K < cols ? c0 + K : cols;
            if (r1 - r0 == K && c1 - c0 == K) {
                float tile[K][K];
                for (std::int64_t r = 0; r < K; ++r)
                    for (std::int64_t c = 0; c < K; ++c) tile[c][r] = src[(r0 + r) * cols + c0 + c];
                for (std::int64_t c = 0; c < K; ++c)
                    for (std::int64_t r = 0; r < K; ++r) dst[(c0 + c) * rows + r0 + r] = tile[c][r];
            } else {
                for (std::int64_t r = r0; r < r1; ++r)
                    for (std::int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
            }
        }
    }
}

}  // namespace

extern "C" {

// dst (cols, rows) = src (rows, cols)^T, contiguous float32. Splits the rows (in multiples of
// 16) over threads_for(rows * cols) threads.
void snn_transpose_f32(const float* src, float* dst, std::int64_t rows, std::int64_t cols,
                       int nthreads) {
    const int nt = threads_for(rows * cols, nthreads);
#pragma omp parallel num_threads(nt)
    {
        const std::int64_t blocks = (rows + 15) / 16;
        const int tid = omp_get_thread_num(), nthr = omp_get_num_threads();
        const std::int64_t per = blocks / nthr, extra = blocks % nthr;
        const std::int64_t b0 = tid * per + (tid < extra ? tid : extra);
        const std::int64_t b1 = b0 + per + (tid < extra ? 1 : 0);
        const std::int64_t r0 = b0 * 16 < rows ? b0 * 16 : rows;
        const std::int64_t r1 = b1 * 16 < rows ? b1 * 16 : rows;
        if (r1 > r0) transpose_range(src, dst, rows, cols, r0, r1);
    }
}

// dtype codes: 0 float32, 1 bfloat16, 2 float16. Returns 0, or 1 when out of memory.
int snn_lif_forward(const void* y, float* vpre, void* spikes, int dtype, std::int64_t T,
                    std::int64_t N, float beta, float theta, int reset, int nthreads) {
    switch (dtype) {
        case 0: return forward_impl<float>(y, vpre, spikes, T, N, beta, theta, reset, nthreads);
        case 1: return forward_impl<bf16_t>(y, vpre, spikes, T, N, beta, theta, reset, nthreads);
        case 2: return forward_impl<f16_t>(y, vpre, spikes, T, N, beta, theta, reset, nthreads);
        default: return 2;
    }
}

// vpre (T, B*n) float32; for float32 dY is written over vpre (dy ignored). grad_s rows:
// contiguous with row stride g_st, or (gbcast) one value per step at g + t*g_st.
// db (n floats) may be null. Returns 0, 1 (out of memory) or 2 (bad dtype).
int snn_lif_backward(float* vpre, const void* g, std::int64_t g_st, int gbcast, void* dy,
                     float* db, int dtype, std::int64_t T, std::int64_t B, std::int64_t n,
                     float beta, float theta, float slope, int reset, int surrogate,
                     int detach, int nthreads) {
    switch (dtype) {
        case 0: return backward_impl<float>(vpre, g, g_st, gbcast, dy, db, T, B, n, beta, theta,
                                            slope, reset, surrogate, detach, nthreads);
        case 1: return backward_impl<bf16_t>(vpre, g, g_st, gbcast, dy, db, T, B, n, beta,
                                             theta, slope, reset, surrogate, detach, nthreads);
        case 2: return backward_impl<f16_t>(vpre, g, g_st, gbcast, dy, db, T, B, n, beta,
                                            theta, slope, reset, surrogate, detach, nthreads);
        default: return 2;
    }
}

int snn_lif_abi_version(void) { return 2; }

}  // extern "C"
"""
