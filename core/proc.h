/* proc: run a program with stdin bytes, a timeout and an output cap, in its
 * own process group, and collect its output. Used by the command model
 * provider and by the process tools. */
#ifndef SKILLFS_PROC_H
#define SKILLFS_PROC_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

struct proc_spec {
	const char *const *argv; /* argv[0] is looked up in PATH when it has no '/' */
	const char *cwd;         /* NULL = inherit */
	const char *const *envp; /* NULL = inherit the daemon's environment */
	const char *stdin_data;  /* may be NULL (stdin is then /dev/null) */
	size_t stdin_len;
	int timeout_ms;          /* > 0; the whole process group is killed after it */
	size_t output_max;       /* cap for stdout and for stderr, each; > 0 */
	bool merge_stderr;       /* stderr goes into out (tools), not err */
	bool rlimits;            /* apply CPU/file-size/process/memory rlimits */
};

struct proc_result {
	struct buf out;
	struct buf err;
	int exit_code;      /* exit status, or -1 when killed by a signal */
	int signal;         /* the signal that ended it, or 0 */
	bool timed_out;
	bool out_truncated; /* output over output_max: the rest was discarded */
	bool err_truncated;
};

/* Runs the program to completion (or timeout). Returns 0 when it ran (look
 * at exit_code/timed_out), or -1 with errno when it could not be started;
 * *res is filled in either case and must be released with proc_result_free.
 * Never leaves a child or a process group member behind. Thread-safe. */
int proc_run(const struct proc_spec *spec, struct proc_result *res);

void proc_result_free(struct proc_result *res);

#endif
