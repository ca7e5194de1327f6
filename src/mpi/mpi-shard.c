/* mpi-shard.c -- the front ends' MPI layer (README "Running on a cluster with
 * mpirun"): a command started by mpirun (or another MPI launcher) runs as
 * one rank of a job; started plainly it is rank 0 of 1 and MPI is never
 * initialised, so a plain run is the same program as in a build without MPI.
 *
 * What a sharded command needs and nothing more: rank/size and the rank on
 * this node (one device per local rank), a collective "did any rank fail"
 * that carries the lowest failing rank's message to every rank, sums of
 * counters and byte blobs gathered to rank 0 in rank order. MPI errors keep
 * MPI's default handler (MPI_ERRORS_ARE_FATAL: the launcher ends the whole
 * job), so every function here returns NF_OK or the rc it was given.
 *
 * A library of its own (nofall-mpi): only it and the CLI link MPI;
 * libnofall does not. */
#include "nofall-mpi.h"
#include "base/nf-base.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NF_HAVE_MPI
#include <mpi.h>
#include <limits.h>
#endif

int nf_mpi_launched(void) {
#ifdef NF_HAVE_MPI
    /* Open MPI's mpirun, PMIx launchers (Slurm's srun, prrte), MPICH's hydra */
    static const char * const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return 1;
#endif
    return 0;
}

int nf_mpi_init(int * argc, char *** argv, struct nf_mpi * m, nf_err * err) {
    memset(m, 0, sizeof(*m));
    m->size = m->local_size = 1;
#ifdef NF_HAVE_MPI
    if (!nf_mpi_launched()) return NF_OK;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS)
        return nf__err_set(err, NF_ERR_IO, "MPI_Init failed (started by an MPI launcher, as its environment says)");
    m->active = 1;
    m->owns_init = !inited;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &m->local_rank);
    MPI_Comm_size(node, &m->local_size);
    MPI_Comm_free(&node);
#else
    (void) argc;
    (void) argv;
    /* started as one of several ranks by a build without MPI: every rank
     * would run the whole command and write the same output */
    static const char * const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    for (int i = 0; vars[i]; i++) {
        const char * v = getenv(vars[i]);
        if (v && atoi(v) > 1)
            return nf__err_set(err, NF_ERR_ARG,
                               "started as one of %d MPI ranks (%s), but this build has no MPI (install "
                               "libopenmpi-dev and rebuild, README \"Running on a cluster with mpirun\")",
                               atoi(v), vars[i]);
    }
#endif
    return NF_OK;
}

void nf_mpi_finalize(struct nf_mpi * m) {
#ifdef NF_HAVE_MPI
    if (m->active && m->owns_init) {
        int done = 0;
        MPI_Finalized(&done);
        /* no rank leaves before rank 0 has printed the job's error and
         * removed its temporary output: a launcher ends the job at the first
         * rank that exits non-zero */
        if (!done) {
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Finalize();
        }
    }
#endif
    m->active = 0;
}

void nf_mpi_device(const struct nf_mpi * m, const char * device, char * out, size_t n) {
    if (m->active && (strcmp(device, "cuda") == 0 || strcmp(device, "opencl") == 0))
        snprintf(out, n, "%s:%d", device, m->local_rank);
    else
        snprintf(out, n, "%s", device);
}

int nf_mpi_agree(const struct nf_mpi * m, int rc, nf_err * err, int * failed_rank) {
    if (failed_rank) *failed_rank = rc != NF_OK ? m->rank : -1;
#ifdef NF_HAVE_MPI
    if (!m->active || m->size == 1) return rc;
    int mine = rc != NF_OK ? m->rank : m->size, first = m->size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == m->size) return NF_OK;
    struct {
        int code;
        char msg[sizeof(err->msg)];
    } e;
    memset(&e, 0, sizeof(e));
    if (m->rank == first || rc != NF_OK) {
        e.code = rc;
        snprintf(e.msg, sizeof(e.msg), "%s", err->msg);
    }
    /* the lowest failing rank's message to every rank; a rank that failed
     * itself keeps its own */
    char mine_msg[sizeof(err->msg)];
    const int mine_code = e.code;
    memcpy(mine_msg, e.msg, sizeof(mine_msg));
    MPI_Bcast(&e, (int) sizeof(e), MPI_BYTE, first, MPI_COMM_WORLD);
    if (rc != NF_OK) {
        e.code = mine_code;
        memcpy(e.msg, mine_msg, sizeof(mine_msg));
        first = m->rank;
    }
    if (failed_rank) *failed_rank = first;
    return nf__err_set(err, e.code != NF_OK ? e.code : NF_ERR_IO, "rank %d of %d: %s", first, m->size, e.msg);
#else
    (void) m;
    (void) err;
    return rc;
#endif
}

int nf_mpi_sum_i64(const struct nf_mpi * m, int64_t * v, int n, nf_err * err) {
    (void) err;
#ifdef NF_HAVE_MPI
    if (m->active && m->size > 1 && n > 0) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
#else
    (void) m;
    (void) v;
    (void) n;
#endif
    return NF_OK;
}

int nf_mpi_sum_f64(const struct nf_mpi * m, double * v, int n, nf_err * err) {
    (void) err;
#ifdef NF_HAVE_MPI
    if (m->active && m->size > 1 && n > 0) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void) m;
    (void) v;
    (void) n;
#endif
    return NF_OK;
}

int nf_mpi_gather(const struct nf_mpi * m, const void * data, int64_t n, char ** all, int64_t * lens, nf_err * err) {
    *all = NULL;
    if (!m->active || m->size == 1) {
        lens[0] = n;
        if (!(*all = malloc(n > 0 ? (size_t) n : 1))) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        if (n > 0) memcpy(*all, data, (size_t) n);
        return NF_OK;
    }
#ifdef NF_HAVE_MPI
    /* the lengths first: every rank learns whether the total fits Gatherv's int counts */
    int64_t * ln = malloc((size_t) m->size * sizeof(int64_t));
    int *cnt = malloc((size_t) m->size * sizeof(int)), *dsp = malloc((size_t) m->size * sizeof(int));
    if (!ln || !cnt || !dsp) {
        free(ln);
        free(cnt);
        free(dsp);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    MPI_Allgather(&n, 1, MPI_INT64_T, ln, 1, MPI_INT64_T, MPI_COMM_WORLD);
    int64_t total = 0;
    for (int r = 0; r < m->size; r++) total += ln[r];
    int rc = NF_OK;
    if (total > INT_MAX) {
        rc = nf__err_set(err, NF_ERR_ARG, "rank %d: %lld bytes to gather on rank 0, over MPI's %d", m->rank,
                         (long long) total, INT_MAX);
    } else {
        for (int r = 0, off = 0; r < m->size; r++) {
            cnt[r] = (int) ln[r];
            dsp[r] = off;
            off += cnt[r];
        }
        char * buf = NULL;
        if (m->rank == 0) buf = malloc(total > 0 ? (size_t) total : 1);
        /* rank 0 out of memory: every rank learns it here, skips the
         * Gatherv and returns the error (the caller's agree carries it) */
        const int ok0 = m->rank != 0 || buf != NULL;
        int all_ok = 0;
        MPI_Allreduce(&ok0, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok) {
            rc = nf__err_set(err, NF_ERR_NOMEM, "rank 0: out of memory for %lld gathered bytes", (long long) total);
        } else {
            MPI_Gatherv(data, (int) n, MPI_BYTE, buf, cnt, dsp, MPI_BYTE, 0, MPI_COMM_WORLD);
            if (m->rank == 0) {
                for (int r = 0; r < m->size; r++) lens[r] = ln[r];
                *all = buf;
            }
        }
    }
    free(ln);
    free(cnt);
    free(dsp);
    return rc;
#else
    return nf__err_set(err, NF_ERR_ARG, "this build has no MPI");
#endif
}

int nf_mpi_quiet_begin(const struct nf_mpi * m) {
    if (m->rank == 0) return -1;
    fflush(stderr);
    const int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (saved < 0 || null < 0 || dup2(null, 2) < 0) {
        if (saved >= 0) close(saved);
        if (null >= 0) close(null);
        return -1;
    }
    close(null);
    return saved;
}

void nf_mpi_quiet_end(int saved) {
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}
