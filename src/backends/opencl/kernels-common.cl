/*
 * kernels-common.cl -- nofall OpenCL kernels (OpenCL C 1.2): what every
 * kernel file shares. The program is the kernel files concatenated in the
 * order CMakeLists.txt in this directory lists them (this one first),
 * embedded into the library at build time; the binary cache is keyed by
 * that whole source (opencl-program.c). One file per op family:
 *   kernels-tabular.cl    QUANTILE, BUCKETIZE_NORM, EMBED_FEATURES, LABEL_TOKENS
 *   kernels-norm.cl       LAYER_NORM, BATCH_NORM
 *   kernels-gemm.cl       LINEAR (GEMM + epilogue), CONV1D (im2col + GEMM)
 *   kernels-attention.cl  ATTENTION, BUCKET_ROUTE, BUCKET_GATHER
 *   kernels-elementwise.cl FILL, AXIAL_POS, GATHER_ROWS
 *   kernels-train.cl      GEMM, COL_SUM, ACT, ACT_BACKWARD, LAYER_NORM_BACKWARD,
 *                         ADAMW, COPY (the training ops, set A)
 *   kernels-train-b.cl    ATTENTION_BACKWARD, EMBED_FEATURES_BACKWARD,
 *                         LABEL_TOKENS_BACKWARD, CROSS_ENTROPY, MSE_LOSS
 *   kernels-train-c.cl    SCATTER_ADD_ROWS, CLIP_GRAD_NORM, SCALE
 *   kernels-bf16.cl       --precision bf16-autocast: LINEAR epilogue, ATTENTION,
 *                         EMBED_FEATURES, LABEL_TOKENS with bf16 rounding
 *
 * Exact fp32:
 *  - the program is built WITHOUT -cl-fast-relaxed-math, -cl-mad-enable,
 *    -cl-unsafe-math-optimizations and -cl-finite-math-only;
 *  - FP_CONTRACT is OFF below, so a*b+c is two roundings unless fma() is
 *    written explicitly;
 *  - division and sqrt are correctly rounded: either the device honours
 *    -cl-fp32-correctly-rounded-divide-sqrt (NF_CR_DIVSQRT), or they are done
 *    in double and rounded once (exact for +-*÷√: 53 >= 2*24+2);
 *  - with cl_khr_fp64 (NF_FP64) exp() and erf() are evaluated in double and
 *    rounded to float, which matches a correctly rounded expf/erff (and glibc)
 *    except in astronomically rare cases; without fp64 the OpenCL float
 *    built-ins are used (<= 3 ulp exp, <= 16 ulp erf by the spec).
 *  - no atomics, every reduction has a fixed order: results are bitwise
 *    reproducible run to run on one device.
 *
 * Offsets and strides are in elements (long); the host passes a tensor's
 * byte offset divided by the element size.
 */
#pragma OPENCL FP_CONTRACT OFF

#ifdef NF_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double nf_acc;
#define NF_ACC_DIV(a, b) ((float)((a) / (b)))   /* double divide: always correctly rounded */
#else
typedef float nf_acc;
#define NF_ACC_DIV(a, b) NF_DIV((a), (b))
#endif

#if defined(NF_CR_DIVSQRT)
#define NF_DIV(a, b) ((a) / (b))
#define NF_SQRT(a)   sqrt(a)
#elif defined(NF_FP64)
#define NF_DIV(a, b) ((float)((double)(a) / (double)(b)))
#define NF_SQRT(a)   ((float)sqrt((double)(a)))
#else
#define NF_DIV(a, b) ((a) / (b))
#define NF_SQRT(a)   sqrt(a)
#endif

#ifdef NF_FP64
#define NF_EXP(a)       ((float)exp((double)(a)))
#define NF_ERF(a)       ((float)erf((double)(a)))
#else
#define NF_EXP(a)       exp(a)
#define NF_ERF(a)       erf(a)
#endif
/* as the cpu reference: erff(t * 0.70710678f), a float multiply */
#define NF_GELU_ARG(t)  ((t) * 0.70710678118654752440f)

/* --precision bf16-autocast (kernels-bf16.cl, and the kernels with a bf16 flag): */
/* round to the nearest bf16 value, ties to even; a NaN stays a (quiet) NaN */
float nf__bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return as_float(((u >> 16) | 0x0040u) << 16);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return as_float(u & 0xffff0000u);
}
