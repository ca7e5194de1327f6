/*
 * cuda-emu.h -- a small host emulator of the parts of the CUDA runtime and
 * cuBLAS that the cuda backend uses. TEST BUILDS ONLY (NOFALL_CUDA_EMU=ON).
 *
 * Why: CI and most development machines have no GPU. With this header the
 * backend's host code (cuda.c, cuda-ops.c) and kernel code (cuda-kernels-*.cu, compiled
 * as C++) run unchanged on the CPU, so the conformance suite and `nofall
 * verify --device cuda:0` exercise the indexing, the launch geometry, the
 * barrier structure, the chunking and the cuBLAS argument mapping of the
 * real backend. What it cannot check: real cuBLAS/CUB behaviour, device
 * rounding (expf/erff ulps), timing, memory placement.
 *
 * Kernel model: each launch runs its blocks one after another; the threads
 * of a block are fibers (cuda-emu-fiber.h) on the launching host thread, so
 * __syncthreads, __syncthreads_or and __shfl_xor_sync are barriers and
 * exchanges among them (a thread that leaves the kernel drops out of the
 * barriers, as on the device); a fiber switch costs far less than waking
 * one of hundreds of host threads on a machine with few cores. (The
 * stack switches are not annotated for AddressSanitizer: the emulator is
 * not for sanitizer builds.)
 * __shared__ is `static`: one block at a time, so that is block-shared.
 * Device memory is malloc'ed, filled with 0xFF bytes (NaN) so that reads of
 * unwritten memory show up, and every copy and GEMM operand is checked to
 * lie inside one allocation.
 *
 * Environment: NF_CUDA_EMU_DEVICES=0 makes cudaGetDeviceCount fail with
 * cudaErrorNoDevice; NF_CUDA_EMU_MEM=<bytes> caps the emulated memory
 * (default 4 GiB) to test out-of-memory paths.
 *
 * Layout: the C part (types, runtime and cuBLAS declarations) is usable
 * from C; the kernel part needs C++20; the implementation is compiled once,
 * in the translation unit that defines NF_CUDA_EMU_IMPLEMENTATION.
 */
#ifndef NF_CUDA_EMU_H
#define NF_CUDA_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- runtime ------------------------------------------------------------- */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorLaunchFailure = 719
} cudaError_t;

typedef struct nf_emu_stream * cudaStream_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void * devicePointer;
    void * hostPointer;
};
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int major, minor;
    int multiProcessorCount;
};
#define cudaStreamNonBlocking 0x01u

const char * cudaGetErrorName(cudaError_t e);
const char * cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDeviceCount(int * count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp * prop, int device);
cudaError_t cudaRuntimeGetVersion(int * v);
cudaError_t cudaDriverGetVersion(int * v);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t * s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaMalloc(void ** p, size_t size);
cudaError_t cudaFree(void * p);
cudaError_t cudaMemGetInfo(size_t * free_bytes, size_t * total_bytes);
cudaError_t cudaMemcpyAsync(void * dst, const void * src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes * a, const void * p);

/* ---- cuBLAS -------------------------------------------------------------- */
typedef struct nf_emu_blas * cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_ATOMICS_NOT_ALLOWED = 0, CUBLAS_ATOMICS_ALLOWED = 1 } cublasAtomicsMode_t;
typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType; /* CUDA's values */
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

cublasStatus_t cublasCreate(cublasHandle_t * h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t mode);
cublasStatus_t cublasGetVersion(cublasHandle_t h, int * v);
const char * cublasGetStatusName(cublasStatus_t s);
const char * cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void * alpha, const void * A, cudaDataType At, int lda, const void * B,
                            cudaDataType Bt, int ldb, const void * beta, void * C, cudaDataType Ct, int ldc,
                            cublasComputeType_t ct, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void * alpha, const void * A, cudaDataType At, int lda,
                                          long long sA, const void * B, cudaDataType Bt, int ldb, long long sB,
                                          const void * beta, void * C, cudaDataType Ct, int ldc, long long sC,
                                          int batch, cublasComputeType_t ct, cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif

/* ---- kernel side (C++) ------------------------------------------------------ */
#ifdef __cplusplus
#include <cstring>
#include <functional>
#include <math.h>
#include <type_traits>

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int a = 1, unsigned int b = 1, unsigned int c = 1) : x(a), y(b), z(c) {}
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__      static

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

namespace nf_emu {
void run(dim3 grid, dim3 block, const std::function<void()> & body);
void syncthreads();
int syncthreads_or(int p);
void shfl_xor_bytes(void * v, size_t size, int lane_mask);

template <typename... P> struct launcher {
    void (*kern)(P...);
    dim3 grid, block;
    template <typename... A> void operator()(A &&... a) const {
        auto k = kern;
        run(grid, block, [&]() { k(a...); });
    }
};
template <typename... P> launcher<P...> launch(void (*k)(P...), dim3 g, dim3 b) { return launcher<P...>{k, g, b}; }
} // namespace nf_emu

#define NF_LAUNCH(kern, grid, block, stream) ((void) (stream), nf_emu::launch(kern, dim3(grid), dim3(block)))

inline void __syncthreads() { nf_emu::syncthreads(); }
inline int __syncthreads_or(int p) { return nf_emu::syncthreads_or(p); }
template <typename T> inline T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a scalar");
    (void) mask;
    (void) width;
    nf_emu::shfl_xor_bytes(&v, sizeof(T), lane_mask);
    return v;
}
#endif /* __cplusplus */

/* ---- implementation ---------------------------------------------------------- */
#if defined(__cplusplus) && defined(NF_CUDA_EMU_IMPLEMENTATION)
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <vector>

#include "cuda-emu-fiber.h" /* the fiber switch */

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace nf_emu {

[[noreturn]] static void die(const char * what) {
    fprintf(stderr, "nofall cuda emulator: %s\n", what);
    abort();
}

/* Kernel threads are fibers (cuda-emu-fiber.h) run by the launching host thread: a
 * fiber runs until it waits at a barrier (__syncthreads, a warp shuffle) or
 * leaves the kernel, then the next runnable one runs. The sweeps over a
 * block's fibers alternate between ascending and descending thread order,
 * so a read of another thread's write that lacks a barrier in between sees
 * the write in one phase and misses it in the next. A sweep in which no
 * fiber can run is a deadlock (a barrier not reached by every thread). */
struct fiber;

/* A barrier whose participants may leave (drop) mid-phase. */
struct barrier {
    int expected = 0, count = 0;
    unsigned long gen = 0;
    void reset(int n) {
        expected = n;
        count = 0;
    }
    void release() {
        count = 0;
        gen++;
    }
    void wait();
    void drop() {
        expected--;
        if (count > 0 && count >= expected) release();
    }
};

struct fiber {
    fiber_ctx ctx;
    bool done = false;
    const barrier * waiting = nullptr; /* the barrier it waits at (phase wait_gen) */
    unsigned long wait_gen = 0;
};

struct launch_state {
    unsigned int nthreads = 0;
    barrier block;
    std::vector<barrier> warps;
    std::vector<int> flags;
    std::vector<unsigned char> lanes; /* 8 bytes per thread */
    std::vector<fiber> fibers;
    fiber_ctx sched;
    fiber * cur = nullptr;
    const std::function<void()> * body = nullptr;
};

static std::mutex g_launch_mutex;
static launch_state * g_cur = nullptr;
static thread_local unsigned int t_tid;
static cudaError_t g_last_error = cudaSuccess;

/* fiber stacks (a guard page below each), kept for later launches */
static const size_t k_stack_size = 256 * 1024;
static std::vector<unsigned char *> g_stacks;

static unsigned char * stack_of(unsigned int t) {
    while (g_stacks.size() <= t) {
        const size_t page = 4096;
        void * p = mmap(nullptr, k_stack_size + page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) die("cannot map a fiber stack");
        if (mprotect(p, page, PROT_NONE) != 0) die("cannot protect a fiber stack's guard page");
        g_stacks.push_back((unsigned char *) p + page);
    }
    return g_stacks[t];
}

static void fiber_make(fiber & f, unsigned int t, void (*fn)()) {
    f.done = false;
    f.waiting = nullptr;
    fiber_ctx_make(f.ctx, stack_of(t), k_stack_size, fn);
}
static void fiber_switch(fiber_ctx * from, fiber_ctx * to) { fiber_ctx_switch(*from, *to); }

void barrier::wait() {
    if (++count >= expected) {
        release();
        return;
    }
    fiber * f = g_cur->cur;
    f->waiting = this;
    f->wait_gen = gen;
    fiber_switch(&f->ctx, &g_cur->sched);
}

static unsigned int warp_size_of(const launch_state & L, unsigned int w) {
    unsigned int left = L.nthreads - w * 32;
    return left < 32 ? left : 32;
}

static void fiber_main() {
    launch_state & L = *g_cur;
    (*L.body)();
    L.block.drop();
    L.warps[t_tid / 32].drop();
    L.cur->done = true;
    fiber_switch(&L.cur->ctx, &L.sched); /* for the last time: never resumed */
    die("a finished fiber resumed");
}

void run(dim3 grid, dim3 block, const std::function<void()> & body) {
    const unsigned long long nt = (unsigned long long) block.x * block.y * block.z;
    const unsigned long long nb = (unsigned long long) grid.x * grid.y * grid.z;
    if (nt == 0 || nt > 1024 || block.z > 64 || nb == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
        g_last_error = cudaErrorInvalidConfiguration;
        return;
    }
    std::lock_guard<std::mutex> lock(g_launch_mutex);
    launch_state L;
    L.nthreads = (unsigned int) nt;
    L.body = &body;
    const unsigned int nw = (L.nthreads + 31) / 32;
    L.warps = std::vector<barrier>(nw);
    L.flags.assign(nt, 0);
    L.lanes.assign(nt * 8, 0);
    L.fibers = std::vector<fiber>(nt);
    g_cur = &L;
    blockDim = block;
    gridDim = grid;
    const uint3 saved_t = threadIdx, saved_b = blockIdx;
    const unsigned int saved_tid = t_tid;
    for (unsigned long long b = 0; b < nb; b++) {
        blockIdx = uint3{(unsigned int) (b % grid.x), (unsigned int) ((b / grid.x) % grid.y),
                         (unsigned int) (b / ((unsigned long long) grid.x * grid.y))};
        L.block.reset((int) L.nthreads);
        for (unsigned int w = 0; w < nw; w++) L.warps[w].reset((int) warp_size_of(L, w));
        for (unsigned int t = 0; t < nt; t++) fiber_make(L.fibers[t], t, fiber_main);
        unsigned long long live = nt;
        bool up = true;
        while (live > 0) {
            bool progress = false;
            for (unsigned int k = 0; k < nt; k++) {
                const unsigned int t = up ? k : (unsigned int) nt - 1 - k;
                fiber & f = L.fibers[t];
                if (f.done || (f.waiting && f.waiting->gen == f.wait_gen)) continue;
                f.waiting = nullptr;
                L.cur = &f;
                t_tid = t;
                threadIdx = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                fiber_switch(&L.sched, &f.ctx);
                progress = true;
                if (f.done) live--;
            }
            if (!progress) die("barrier deadlock (a __syncthreads or warp shuffle not reached by every thread)");
            up = !up;
        }
    }
    g_cur = nullptr;
    threadIdx = saved_t;
    blockIdx = saved_b;
    t_tid = saved_tid;
}

void syncthreads() { g_cur->block.wait(); }

int syncthreads_or(int p) {
    launch_state & L = *g_cur;
    L.flags[t_tid] = p ? 1 : 0;
    L.block.wait();
    int r = 0;
    for (unsigned int i = 0; i < L.nthreads; i++) r |= L.flags[i];
    L.block.wait();
    return r;
}

void shfl_xor_bytes(void * v, size_t size, int lane_mask) {
    launch_state & L = *g_cur;
    const unsigned int w = t_tid / 32, lane = t_tid % 32;
    memcpy(&L.lanes[t_tid * 8], v, size);
    L.warps[w].wait();
    const unsigned int src = lane ^ (unsigned int) lane_mask;
    if (src < warp_size_of(L, w)) memcpy(v, &L.lanes[(w * 32 + src) * 8], size);
    L.warps[w].wait();
}

/* ---- memory ---- */
static std::mutex g_mem_mutex;
static std::map<uintptr_t, size_t> g_allocs;
static size_t g_used = 0;

static size_t mem_limit() {
    const char * s = getenv("NF_CUDA_EMU_MEM");
    return s ? (size_t) strtoull(s, nullptr, 10) : ((size_t) 4 << 30);
}

/* true if [p, p+n) lies inside one allocation */
static bool in_alloc(const void * p, size_t n) {
    std::lock_guard<std::mutex> l(g_mem_mutex);
    const uintptr_t a = (uintptr_t) p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}

} // namespace nf_emu

extern "C" {

const char * cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInitializationError: return "cudaErrorInitializationError";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}
const char * cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInitializationError: return "initialization error";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = nf_emu::g_last_error;
    nf_emu::g_last_error = cudaSuccess;
    return e;
}
static int nf_emu_devices(void) {
    const char * s = getenv("NF_CUDA_EMU_DEVICES");
    return s ? atoi(s) : 1;
}
cudaError_t cudaGetDeviceCount(int * count) {
    *count = nf_emu_devices();
    if (*count <= 0) {
        *count = 0;
        return nf_emu::g_last_error = cudaErrorNoDevice;
    }
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= nf_emu_devices()) return nf_emu::g_last_error = cudaErrorInvalidDevice;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp * prop, int device) {
    if (device < 0 || device >= nf_emu_devices()) return nf_emu::g_last_error = cudaErrorInvalidDevice;
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "nofall host emulator");
    prop->totalGlobalMem = nf_emu::mem_limit();
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int * v) {
    *v = 0;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int * v) {
    *v = 0;
    return cudaSuccess;
}

struct nf_emu_stream {
    int dummy;
};
cudaError_t cudaStreamCreateWithFlags(cudaStream_t * s, unsigned int flags) {
    (void) flags;
    *s = new nf_emu_stream();
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return s ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaMalloc(void ** p, size_t size) {
    std::lock_guard<std::mutex> l(nf_emu::g_mem_mutex);
    *p = nullptr;
    if (size == 0) return cudaSuccess;
    if (nf_emu::g_used + size > nf_emu::mem_limit()) return nf_emu::g_last_error = cudaErrorMemoryAllocation;
    void * q = malloc(size);
    if (!q) return nf_emu::g_last_error = cudaErrorMemoryAllocation;
    memset(q, 0xFF, size); /* NaN: unwritten memory must not look like data */
    nf_emu::g_allocs[(uintptr_t) q] = size;
    nf_emu::g_used += size;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFree(void * p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> l(nf_emu::g_mem_mutex);
    auto it = nf_emu::g_allocs.find((uintptr_t) p);
    if (it == nf_emu::g_allocs.end()) return nf_emu::g_last_error = cudaErrorInvalidDevicePointer;
    nf_emu::g_used -= it->second;
    nf_emu::g_allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t * free_bytes, size_t * total_bytes) {
    std::lock_guard<std::mutex> l(nf_emu::g_mem_mutex);
    *total_bytes = nf_emu::mem_limit();
    *free_bytes = *total_bytes - nf_emu::g_used;
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void * dst, const void * src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (!s) return nf_emu::g_last_error = cudaErrorInvalidValue;
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((dst_dev && !nf_emu::in_alloc(dst, n)) || (src_dev && !nf_emu::in_alloc(src, n)) ||
        (!dst_dev && nf_emu::in_alloc(dst, 1)) || (!src_dev && nf_emu::in_alloc(src, 1))) {
        fprintf(stderr, "nofall cuda emulator: cudaMemcpyAsync of %zu bytes outside an allocation (kind %d)\n", n,
                (int) kind);
        return nf_emu::g_last_error = cudaErrorInvalidValue;
    }
    if (n) memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes * a, const void * p) {
    memset(a, 0, sizeof(*a));
    if (nf_emu::in_alloc(p, 1)) {
        a->type = cudaMemoryTypeDevice;
        a->device = 0;
        a->devicePointer = (void *) p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->device = -2;
        a->hostPointer = (void *) p;
    }
    return cudaSuccess;
}

/* ---- cuBLAS reference ---- */
struct nf_emu_blas {
    cudaStream_t stream;
    cublasMath_t math;
    cublasAtomicsMode_t atomics;
};

cublasStatus_t cublasCreate(cublasHandle_t * h) {
    *h = new nf_emu_blas{nullptr, CUBLAS_DEFAULT_MATH, CUBLAS_ATOMICS_NOT_ALLOWED};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->atomics = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetVersion(cublasHandle_t h, int * v) {
    (void) h;
    *v = 0;
    return CUBLAS_STATUS_SUCCESS;
}
const char * cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}
const char * cublasGetStatusString(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "emulated cuBLAS rejected the call";
}

static float nf_emu_tf32(float x) {
    /* round to nearest even at 10 explicit mantissa bits */
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x0fffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

/* C = alpha op(A) op(B) (+ beta C): every dot product an fmaf chain in
 * ascending l from 0.0f. op(A) is first packed column-major (m x k, TF32
 * rounding applied there when asked) so that the m chains of a column of C
 * advance together. fmaf is exactly rounded whether the CPU has an FMA
 * instruction or libm computes it in software; on x86-64 a clone built for
 * FMA hardware is picked at run time (the same results, far faster). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("fma", "default")))
#endif
static void
nf_emu_gemm_loops(int m, int n, int k, float alpha, const float * Ab, size_t ai, size_t al, const float * Bb, size_t bl,
                  size_t bj, float beta, float * Cb, size_t ldc, bool tf32) {
    std::vector<float> Ap((size_t) m * (size_t) k), acc((size_t) m);
    for (int l = 0; l < k; l++)
        for (int i = 0; i < m; i++) {
            const float a = Ab[(size_t) i * ai + (size_t) l * al];
            Ap[(size_t) i + (size_t) l * (size_t) m] = tf32 ? nf_emu_tf32(a) : a;
        }
    float * ac = acc.data();
    for (int j = 0; j < n; j++) {
        const float * x = Bb + (size_t) j * bj;
        for (int i = 0; i < m; i++) ac[i] = 0.0f;
        for (int l = 0; l < k; l++) {
            const float * a = Ap.data() + (size_t) l * (size_t) m;
            const float xl = tf32 ? nf_emu_tf32(x[(size_t) l * bl]) : x[(size_t) l * bl];
            for (int i = 0; i < m; i++) ac[i] = fmaf(a[i], xl, ac[i]);
        }
        for (int i = 0; i < m; i++) {
            float * c = &Cb[i + (size_t) j * ldc];
            *c = beta == 0.0f ? alpha * ac[i] : fmaf(alpha, ac[i], beta * *c);
        }
    }
}

static cublasStatus_t nf_emu_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float * alpha, const float * A, int lda, long long sA, const float * B, int ldb,
                                  long long sB, const float * beta, float * C, int ldc, long long sC, int batch,
                                  cudaDataType At, cudaDataType Bt, cudaDataType Ct, cublasComputeType_t ct) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (At != CUDA_R_32F || Bt != CUDA_R_32F || Ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_PEDANTIC && ct != CUBLAS_COMPUTE_32F_FAST_TF32)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
        ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    const bool tf32 = ct == CUBLAS_COMPUTE_32F_FAST_TF32;
    for (int b = 0; b < batch; b++) {
        const float * Ab = A + b * sA;
        const float * Bb = B + b * sB;
        float * Cb = C + b * sC;
        if ((k > 0 && (!nf_emu::in_alloc(Ab, ((size_t) (ac - 1) * lda + ar) * 4) ||
                       !nf_emu::in_alloc(Bb, ((size_t) (bc - 1) * ldb + br) * 4))) ||
            !nf_emu::in_alloc(Cb, ((size_t) (n - 1) * ldc + m) * 4)) {
            fprintf(
                stderr,
                "nofall cuda emulator: GEMM operand outside device memory (batch %d, m=%d n=%d k=%d lda=%d ldb=%d ldc=%d)\n",
                b, m, n, k, lda, ldb, ldc);
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
        /* element (i, l) of op(A) at Ab[i * ai + l * al]; (l, j) of op(B) at Bb[l * bl + j * bj] */
        const size_t ai = ta == CUBLAS_OP_N ? 1 : (size_t) lda, al = ta == CUBLAS_OP_N ? (size_t) lda : 1;
        const size_t bl = tb == CUBLAS_OP_N ? 1 : (size_t) ldb, bj = tb == CUBLAS_OP_N ? (size_t) ldb : 1;
        nf_emu_gemm_loops(m, n, k, *alpha, Ab, ai, al, Bb, bl, bj, *beta, Cb, (size_t) ldc, tf32);
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* a host buffer registered as device memory for the duration of one GEMM */
struct nf_emu_host_operand {
    uintptr_t a;
    explicit nf_emu_host_operand(const std::vector<float> & v) : a((uintptr_t) v.data()) {
        std::lock_guard<std::mutex> l(nf_emu::g_mem_mutex);
        nf_emu::g_allocs[a] = v.size() * 4;
    }
    ~nf_emu_host_operand() {
        std::lock_guard<std::mutex> l(nf_emu::g_mem_mutex);
        nf_emu::g_allocs.erase(a);
    }
};

/* a bf16 operand (cols columns of rows bf16 values, ld apart) widened to fp32 (exact), same layout */
static bool nf_emu_widen_bf16(const void * P, int rows, int cols, int ld, std::vector<float> & out) {
    if (rows <= 0 || cols <= 0) return true;
    const size_t n = (size_t) (cols - 1) * (size_t) ld + (size_t) rows;
    if (!nf_emu::in_alloc(P, n * 2)) return false;
    const uint16_t * h = (const uint16_t *) P;
    out.assign(n, 0.0f);
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t) h[i] << 16;
        memcpy(&out[i], &u, 4);
    }
    return true;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void * alpha, const void * A, cudaDataType At, int lda, const void * B,
                            cudaDataType Bt, int ldb, const void * beta, void * C, cudaDataType Ct, int ldc,
                            cublasComputeType_t ct, cublasGemmAlgo_t algo) {
    (void) algo;
    if (At == CUDA_R_16BF || Bt == CUDA_R_16BF) {
        /* cuBLAS's bf16 x bf16 -> f32 with CUBLAS_COMPUTE_32F: the operands
         * widened to fp32 (exact), then the fp32 GEMM (products of bf16 values
         * are exact in fp32; only the order of the fp32 sums is the emulator's) */
        if (At != CUDA_R_16BF || Bt != CUDA_R_16BF || Ct != CUDA_R_32F || ct != CUBLAS_COMPUTE_32F)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
        std::vector<float> Aw, Bw;
        const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
        const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
        if (!nf_emu_widen_bf16(A, ar, ac, lda, Aw) || !nf_emu_widen_bf16(B, br, bc, ldb, Bw)) {
            fprintf(stderr, "nofall cuda emulator: bf16 GEMM operand outside device memory (m=%d n=%d k=%d)\n", m, n,
                    k);
            return CUBLAS_STATUS_EXECUTION_FAILED;
        }
        if (Aw.empty() || Bw.empty()) { /* k == 0 (or m, n == 0): C = beta C through the fp32 path */
            static float dummy[1];
            return nf_emu_gemm(h, ta, tb, m, n, k, (const float *) alpha, dummy, lda, 0, dummy, ldb, 0,
                               (const float *) beta, (float *) C, ldc, 0, 1, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                               CUBLAS_COMPUTE_32F);
        }
        nf_emu_host_operand wa(Aw), wb(Bw);
        return nf_emu_gemm(h, ta, tb, m, n, k, (const float *) alpha, Aw.data(), lda, 0, Bw.data(), ldb, 0,
                           (const float *) beta, (float *) C, ldc, 0, 1, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                           CUBLAS_COMPUTE_32F);
    }
    return nf_emu_gemm(h, ta, tb, m, n, k, (const float *) alpha, (const float *) A, lda, 0, (const float *) B, ldb, 0,
                       (const float *) beta, (float *) C, ldc, 0, 1, At, Bt, Ct, ct);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void * alpha, const void * A, cudaDataType At, int lda,
                                          long long sA, const void * B, cudaDataType Bt, int ldb, long long sB,
                                          const void * beta, void * C, cudaDataType Ct, int ldc, long long sC,
                                          int batch, cublasComputeType_t ct, cublasGemmAlgo_t algo) {
    (void) algo;
    return nf_emu_gemm(h, ta, tb, m, n, k, (const float *) alpha, (const float *) A, lda, sA, (const float *) B, ldb,
                       sB, (const float *) beta, (float *) C, ldc, sC, batch, At, Bt, Ct, ct);
}

} /* extern "C" */
#endif /* NF_CUDA_EMU_IMPLEMENTATION */

#endif /* NF_CUDA_EMU_H */
