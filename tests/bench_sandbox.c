/* bench_sandbox: the cost of the sandbox, for scripts/bench (not a test).
 *   bench_sandbox [CALLS]   (default 50)
 * Runs the bash tool's `true` CALLS times in rounds, sandboxed (bubblewrap)
 * and unsandboxed (tools.sandbox: none), alternating, and prints the
 * median milliseconds per call of each and the difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "sandbox.h"
#include "tools.h"

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

static double one_call(const struct tool_ctx *ctx, json_t *args)
{
	struct tool_result r;
	double t0 = now_ms();
	if (tools_exec(ctx, "bash", args, &r) < 0 || r.is_error) {
		fprintf(stderr, "bench_sandbox: bash failed: %s\n", r.text ? r.text : "out of memory");
		exit(1);
	}
	double t = now_ms() - t0;
	tool_result_free(&r);
	return t;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 50;
	if (n < 1)
		n = 1;
	char ws[] = "/tmp/skillfs-bench-sandbox-XXXXXX";
	if (!mkdtemp(ws)) {
		perror("mkdtemp");
		return 1;
	}
	char wsdir[sizeof ws + 4], wsbare[sizeof ws + 8];
	snprintf(wsdir, sizeof wsdir, "%s/ws", ws);
	snprintf(wsbare, sizeof wsbare, "%s/bare", ws);
	struct tools_config boxed_cfg = {0}, bare_cfg = {.sandbox = SANDBOX_NONE};
	struct sandbox boxed, bare;
	if (sandbox_probe(&boxed_cfg, &boxed) < 0 || sandbox_probe(&bare_cfg, &bare) < 0)
		return 1;
	if (!sandbox_usable(&boxed)) {
		fprintf(stderr, "bench_sandbox: no sandbox: %s\n", boxed.why);
		return 1;
	}
	json_t *args = json_pack("{s:s}", "command", "true");
	struct tool_ctx cb = {.workspace = wsdir, .sandbox = &boxed, .timeout_ms = 10000};
	struct tool_ctx cn = {.workspace = wsbare, .sandbox = &bare, .timeout_ms = 10000};
	double *tb = calloc((size_t)n, sizeof *tb), *tn = calloc((size_t)n, sizeof *tn);
	if (!args || !tb || !tn)
		return 1;
	one_call(&cb, args); /* warm the page cache for both */
	one_call(&cn, args);
	for (int i = 0; i < n; i++) {
		tb[i] = one_call(&cb, args);
		tn[i] = one_call(&cn, args);
	}
	qsort(tb, (size_t)n, sizeof *tb, cmp_double);
	qsort(tn, (size_t)n, sizeof *tn, cmp_double);
	double mb = tb[n / 2], mn = tn[n / 2];
	printf("  bash 'true', median of %d calls: sandboxed %.2f ms, unsandboxed %.2f ms, "
	       "added %.2f ms per call (target < 15 ms)\n", n, mb, mn, mb - mn);
	json_decref(args);
	free(tb);
	free(tn);
	sandbox_free(&boxed);
	sandbox_free(&bare);
	char cmd[sizeof ws + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", ws);
	return system(cmd) == 0 ? 0 : 1;
}
