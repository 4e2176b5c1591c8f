/*
 * submit-util.c - the numeric helpers qgraph-submit's commands share (see
 * submit.h): test data, the error measure and the in-process reference they
 * check the daemon's results against.  Like submit-session.c, it calls no
 * command file, so that the command files call in here and never each other.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mulmat.h"
#include "qgraph.h"
#include "submit.h"
#include "wire.h"

/* At exit: standard output's last bytes are written, or the exit status says they were not. */
static void check_stdout(void)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return;
	/* errno is fflush's, or 0 when an earlier write failed and no error is at hand */
	fprintf(stderr, "qgraph-submit: writing standard output: %s\n", errno ? strerror(errno) : "an earlier write failed");
	_exit(EXIT_WRONG);
}

void check_stdout_at_exit(void)
{
	atexit(check_stdout);
}

void fill_random(float *x, size_t n, unsigned long long seed, float scale)
{
	unsigned long long s = seed * 2654435761ULL + 1;

	for (size_t i = 0; i < n; i++) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		x[i] = ((float)((s * 2685821657736338717ULL) >> 40) / 16777216.0f - 0.5f) * 2 * scale;
	}
}

int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double rel_err(const float *a, const float *b, size_t n)
{
	double maxd = 0, maxb = 1e-30;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (!(d <= maxd))
			maxd = d;
		if (fabs(b[i]) > maxb)
			maxb = fabs(b[i]);
	}
	return maxd / maxb;
}

void mlp_ref_layer(float *x, long d, long h, long n, void *const wq[3], enum qgraph_type t[3])
{
	float *nrm = malloc((size_t)n * d * 4), *up = malloc((size_t)n * h * 4), *gate = malloc((size_t)n * h * 4);
	float *down = malloc((size_t)n * d * 4);

	for (long r = 0; r < n; r++) {
		double ss = 0;
		for (long j = 0; j < d; j++)
			ss += (double)x[r * d + j] * x[r * d + j];
		float sc = (float)(1.0 / sqrt(ss / d + 1e-5));
		for (long j = 0; j < d; j++)
			nrm[r * d + j] = x[r * d + j] * sc;
	}
	float *outs[3] = { up, gate, down };
	const float *ins[3] = { nrm, nrm, up };
	long ms[3] = { h, h, d }, ks[3] = { d, d, h };
	for (int i = 0; i < 3; i++) {
		if (i == 2)
			for (long j = 0; j < n * h; j++)
				up[j] = gate[j] / (1.0f + expf(-gate[j])) * up[j];
		struct qg_mm mm = { .wtype = (enum qg_type)qg_wire_engine_type_of_public(t[i]), .w = wq[i], .m = ms[i], .k = ks[i], .x = ins[i],
				    .ldx = (size_t)ks[i], .n = n, .y = outs[i], .ldy = (size_t)ms[i] };
		void *scratch = aligned_alloc(64, (qg_mul_mat_scratch_size(&mm) + 63) & ~(size_t)63);
		qg_mul_mat(&mm, scratch);
		free(scratch);
	}
	for (long j = 0; j < n * d; j++)
		x[j] += down[j];
	free(nrm);
	free(up);
	free(gate);
	free(down);
}
