/* bench_resolve DIR N: loads the skills in DIR, attaches the first N to one
 * configuration, and prints the median milliseconds to resolve it and
 * assemble its prompt (DESIGN.md sections 3 and 4). Used by scripts/bench. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "resolution.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bench_resolve DIR N\n");
		return 2;
	}
	const char *dirs[] = { argv[1] };
	struct config *c = config_default(dirs, 1);
	struct catalog *cat = c ? catalog_build(c, NULL, NULL, NULL) : NULL;
	if (!cat) {
		fprintf(stderr, "bench_resolve: cannot load %s\n", argv[1]);
		return 1;
	}
	size_t n = strtoul(argv[2], NULL, 10);
	if (n > cat->n)
		n = cat->n;
	struct configuration cfg = { .name = "bench" };
	cfg.att = calloc(n ? n : 1, sizeof *cfg.att);
	if (!cfg.att)
		return 1;
	for (size_t i = 0; i < n; i++)
		cfg.att[i] = (struct attachment){ cat->entries[i].skill->name, true };
	cfg.n = n;
	enum { RUNS = 21 };
	double t[RUNS];
	for (int r = 0; r < RUNS; r++) {
		double s = now_ms();
		struct resolution *res = resolution_build(c, cat, &cfg, NULL, 0);
		t[r] = now_ms() - s;
		if (!res)
			return 1;
		resolution_free(res);
	}
	qsort(t, RUNS, sizeof *t, cmp_double);
	printf("%.3f\n", t[RUNS / 2]);
	free(cfg.att);
	catalog_free(cat);
	config_free(c);
	return 0;
}
