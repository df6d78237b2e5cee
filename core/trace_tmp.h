#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static inline void trace_tmp(const char *what, const char *arg)
{
	static int on = -1;
	if (on < 0) on = getenv("SKILLFS_TRACE") != NULL;
	if (!on) return;
	struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "T %ld.%06ld %ld %s %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000, (long)syscall(SYS_gettid), what, arg ? arg : "");
}
