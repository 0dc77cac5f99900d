/*
 * Open MPI's side of the comparison: the same operations, sizes, iteration counts and
 * output as bench-collectives (main.go), with Open MPI's blocking collectives called
 * from C, so that no Go overhead is counted. Allreduce is MPI_Allreduce in place on
 * MPI_FLOAT with MPI_SUM; allgather is MPI_Allgatherv of BYTES/RANKS bytes from each rank,
 * what AllGatherV does; alltoallv is MPI_Alltoallv of BYTES/RANKS bytes from each rank to
 * each rank, what AllToAllV does.
 *
 * Build: mpicc -O2 -o ompi_bench ompi_bench.c (run.sh does)
 * Run:   mpirun -np 2 ./ompi_bench [-sizes 1K,64K] [-ops allreduce,allgather,alltoallv] [-batches 5]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iterations(long size) {
	long n = (256L << 20) / size;
	if (n < 3) n = 3;
	if (n > 2000) n = 2000;
	return (int)n;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static long parse_size(const char *s) {
	char *end;
	long n = strtol(s, &end, 10);
	if (*end == 'K') n <<= 10;
	else if (*end == 'M') n <<= 20;
	return n;
}

static int run(const char *op, float *floats, long size, char *block, char *sendbuf, char *all,
		int *counts, int *displs, int n) {
	for (int i = 0; i < n; i++) {
		int rc;
		if (strcmp(op, "allreduce") == 0)
			rc = MPI_Allreduce(MPI_IN_PLACE, floats, (int)(size / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		else if (strcmp(op, "allgather") == 0)
			rc = MPI_Allgatherv(block, counts[0], MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
		else /* alltoallv: the same block to every rank, as bench-collectives sends */
			rc = MPI_Alltoallv(sendbuf, counts, displs, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) return rc;
	}
	return MPI_SUCCESS;
}

int main(int argc, char **argv) {
	const char *sizes = "1K,4K,16K,64K,256K,1M,4M,16M,100M,256M", *ops = "allreduce,allgather,alltoallv";
	int batches = 5;
	MPI_Init(&argc, &argv);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "-sizes") == 0) sizes = argv[i + 1];
		else if (strcmp(argv[i], "-ops") == 0) ops = argv[i + 1];
		else if (strcmp(argv[i], "-batches") == 0) batches = atoi(argv[i + 1]);
	}
	if (batches < 1) batches = 1;
	int rank, P;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &P);
	if (rank == 0) printf("transport Open MPI %d ranks\n", P);

	char *opsCopy = strdup(ops);
	for (char *op = strtok(opsCopy, ","); op; op = strtok(NULL, ",")) {
		char *sizesCopy = strdup(sizes), *save = NULL;
		for (char *s = strtok_r(sizesCopy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
			long size = parse_size(s);
			float *floats = malloc(size);
			for (long i = 0; i < size / 4; i++) floats[i] = (float)(rank + i % 7) * 0.25f;
			long per = size / P;
			char *block = calloc(per ? per : 1, 1), *all = malloc(per * P > 0 ? per * P : 1);
			char *sendbuf = calloc(per * P > 0 ? per * P : 1, 1);
			int *counts = malloc(P * sizeof(int)), *displs = malloc(P * sizeof(int));
			for (int q = 0; q < P; q++) counts[q] = (int)per, displs[q] = (int)(per * q);

			int n = iterations(size);
			double *times = malloc(batches * sizeof(double));
			run(op, floats, size, block, sendbuf, all, counts, displs, n / 10 > 0 ? n / 10 : 1);
			for (int b = 0; b < batches; b++) {
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				run(op, floats, size, block, sendbuf, all, counts, displs, n);
				MPI_Barrier(MPI_COMM_WORLD);
				times[b] = (MPI_Wtime() - t0) * 1e3 / n;
			}
			qsort(times, batches, sizeof(double), cmp_double);
			if (rank == 0) printf("result %s %ld %d %.6f\n", op, size, P, times[batches / 2]);
			fflush(stdout);
			free(floats), free(block), free(sendbuf), free(all), free(counts), free(displs), free(times);
		}
		free(sizesCopy);
	}
	free(opsCopy);
	MPI_Finalize();
	return 0;
}
