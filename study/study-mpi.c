/*
 * build/falcon-study-mpi: the stability study over MPI (mk/study.mk builds
 * it where mpicc exists).
 *
 *   mpirun -np P build/falcon-study-mpi stability [falcon stability options]
 *
 * Rank 0 holds the work queue: the streams by decreasing estimated cost
 * (stab_order), less those a --resume finds finished. Every other rank asks
 * rank 0 for a stream, runs it and sends its results back, until the queue
 * is empty. Rank 0 runs streams from the same queue on a second thread
 * meanwhile (its main thread only answers the other ranks, so MPI needs
 * MPI_THREAD_FUNNELED; without it rank 0 only answers). Rank 0 writes each
 * stream's result as it arrives (DIR/streams/, what --resume reads back)
 * and, at the end, the outputs one process writes: the same bytes, the
 * results of a stream not depending on where it ran (timings aside).
 * Every rank saves the state of the stream it runs in DIR/resume/ (a file
 * system shared by the ranks lets --resume continue them anywhere).
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "falcon.h"
#include "stability.h"

enum { TAG_ASK = 1, TAG_WORK = 2, TAG_STOP = 3, TAG_RESULT = 4 };

typedef struct queue {
    int order[64], n, next;
} queue;

static int queue_take(queue *q)
{
    int i;
#pragma omp critical(mpi_queue)
    i = q->next < q->n ? q->order[q->next++] : -1;
    return i;
}

/* Rank 0's main thread: answer every other rank until each was told to
 * stop and every stream handed out came back. */
static int serve(study_stab *st, queue *q, int size, int *remote)
{
    int stopped = 0, out = 0, bad = 0;
    while (stopped < size - 1 || out > 0) {
        int flag;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
        if (!flag) {
            const struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        if (status.MPI_TAG == TAG_ASK) {
            int dummy;
            MPI_Recv(&dummy, 1, MPI_INT, status.MPI_SOURCE, TAG_ASK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            const int i = queue_take(q);
            if (i >= 0) out++;
            else stopped++;
            MPI_Send(&i, 1, MPI_INT, status.MPI_SOURCE, i >= 0 ? TAG_WORK : TAG_STOP, MPI_COMM_WORLD);
        } else if (status.MPI_TAG == TAG_RESULT) {
            int len;
            MPI_Get_count(&status, MPI_BYTE, &len);
            char *msg = malloc((size_t)len + 1);
            if (!msg) MPI_Abort(MPI_COMM_WORLD, 2);
            MPI_Recv(msg, len, MPI_BYTE, status.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int head[2] = {-1, -1}; /* stream index, run status */
            if (len >= (int)sizeof head) memcpy(head, msg, sizeof head);
            if (len < (int)sizeof head ||
                stab_store(st, head[0], msg + sizeof head, (size_t)len - sizeof head, head[1])) {
                fprintf(stderr, "falcon-study-mpi: error: rank %d sent a result that is not one of this study's\n",
                        status.MPI_SOURCE);
                bad = 1;
            }
            free(msg);
            out--, ++*remote;
        } else {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    return bad;
}

static void work(study_stab *st)
{
    for (;;) {
        int i, ask = 0;
        MPI_Status status;
        MPI_Send(&ask, 1, MPI_INT, 0, TAG_ASK, MPI_COMM_WORLD);
        MPI_Recv(&i, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
        if (status.MPI_TAG == TAG_STOP) return;
        const int rc = stab_run_one(st, i, 0);
        size_t len;
        const void *bytes = stab_bytes(st, i, &len);
        int head[2] = {i, rc};
        char *msg = malloc(sizeof head + len);
        if (!msg) MPI_Abort(MPI_COMM_WORLD, 2);
        memcpy(msg, head, sizeof head), memcpy(msg + sizeof head, bytes, len);
        MPI_Send(msg, (int)(sizeof head + len), MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
        free(msg);
    }
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        if (rank == 0) printf("falcon-study-mpi %s\n", falcon_version());
        MPI_Finalize();
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "stability")) {
        if (rank == 0)
            fprintf(argc > 1 && strcmp(argv[1], "--help") ? stderr : stdout,
                    "usage: mpirun -np P falcon-study-mpi stability [options]   (falcon-study stability --help)\n"
                    "The stability study with its streams spread over the MPI ranks; rank 0 writes the outputs.\n");
        MPI_Finalize();
        return argc > 1 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    /* --shard K/N or --shard=K/N (stab_open takes both, util/opts.h). */
    for (int i = 2; i < argc; i++) {
        const size_t len = strcspn(argv[i], "=");
        if ((len == 7 && !strncmp(argv[i], "--shard", 7)) || !strcmp(argv[i], "--learning")) {
            if (rank == 0) fprintf(stderr, "falcon-study-mpi: error: %.*s: not with MPI\n", (int)len, argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    study_stab *st;
    /* Every rank parses the same options and builds the same streams. */
    int rc = stab_open(argc - 1, argv + 1, rank != 0, &st);
    if (!st) {
        MPI_Finalize();
        return rc;
    }
    if (rank == 0) {
        queue q = {.n = 0, .next = 0};
        int order[64];
        stab_order(st, order);
        for (int j = 0; j < stab_count(st); j++)
            if (!stab_prepare(st, order[j])) q.order[q.n++] = order[j];
        printf("MPI: %d ranks; %d streams to run%s\n", size, q.n,
               provided >= MPI_THREAD_FUNNELED ? ", rank 0 among them" : " (rank 0 only hands them out)");
        fflush(stdout);
        int bad = 0, remote = 0;
        if (provided >= MPI_THREAD_FUNNELED) {
#pragma omp parallel num_threads(2)
            {
                if (omp_get_thread_num() == 0) bad = serve(st, &q, size, &remote);
                else
                    for (int i; (i = queue_take(&q)) >= 0;) stab_run_one(st, i, 1);
            }
        } else {
            bad = serve(st, &q, size, &remote);
        }
        /* Whatever no thread took (one thread only, or a single rank). */
        for (int i; (i = queue_take(&q)) >= 0;) stab_run_one(st, i, 1);
        rc = stab_finish(st);
        printf("MPI: %d streams run by the other ranks, %d by rank 0\n", remote, q.n - remote);
        if (bad && !rc) rc = 1;
    } else {
        work(st);
        rc = 0;
    }
    stab_close(st);
    MPI_Finalize();
    return rc;
}
