/*
 * nofall-mpi.h -- one command sharded over the ranks of an mpirun job
 * (docs/cli.md "Running on a cluster with mpirun"; src/mpi/mpi-shard.c,
 * the library nofall-mpi, which links MPI when the build found it;
 * libnofall never does). Errors as in nofall.h.
 */
#ifndef NOFALL_MPI_H
#define NOFALL_MPI_H

#include "nofall.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Under a launcher (its environment variables) in a build with MPI
 * (NF_HAVE_MPI): MPI initialised, this process's rank. Otherwise rank 0 of 1,
 * active 0, and every function below is a no-op on this one process. */
struct nf_mpi {
    int active;                 /* MPI initialised for this command */
    int owns_init;              /* nf_mpi_init called MPI_Init      */
    int rank, size;             /* in MPI_COMM_WORLD                */
    int local_rank, local_size; /* among the ranks on this node     */
};
NF_API int nf_mpi_launched(void); /* started by mpirun / srun / hydra (and built with MPI) */
NF_API int nf_mpi_init(int * argc, char *** argv, struct nf_mpi * m, nf_err * err);
NF_API void nf_mpi_finalize(struct nf_mpi * m);
/* --device for this rank: "cuda" -> "cuda:<local rank>", "opencl" ->
 * "opencl:<local rank>" under MPI; anything else (cpu, cuda:N) as given */
NF_API void nf_mpi_device(const struct nf_mpi * m, const char * device, char * out, size_t n);
/* Collective: did any rank fail? Every rank passes its rc (err holding its
 * message when rc != NF_OK). NF_OK on every rank when none failed; else
 * err = "rank R of N: R's message", R's code returned, *failed_rank = R (may
 * be NULL): R is the rank itself when it failed, else the lowest failing
 * rank (so rank 0 reports the lowest one). */
NF_API int nf_mpi_agree(const struct nf_mpi * m, int rc, nf_err * err, int * failed_rank);
/* Collective: v[0..n) summed over the ranks, on every rank */
NF_API int nf_mpi_sum_i64(const struct nf_mpi * m, int64_t * v, int n, nf_err * err);
NF_API int nf_mpi_sum_f64(const struct nf_mpi * m, double * v, int n, nf_err * err);
/* Collective: every rank's n bytes to rank 0, in rank order: *all (free it)
 * holds them back to back, lens[r] (m->size entries) their lengths; other
 * ranks get *all = NULL. Fails (on every rank) past 2^31-1 bytes in all. */
NF_API int nf_mpi_gather(const struct nf_mpi * m, const void * data, int64_t n, char ** all, int64_t * lens,
                         nf_err * err);
/* stderr to /dev/null on ranks other than 0 (what every rank would print
 * alike, e.g. usage errors), and back; begin returns what end takes */
NF_API int nf_mpi_quiet_begin(const struct nf_mpi * m);
NF_API void nf_mpi_quiet_end(int saved);

#ifdef __cplusplus
}
#endif

#endif
