/* runlist: one line's worth of each run (id, state, configuration, when it
 * was made, the first line of its prompt), for `skillfs runs`. The mount
 * shows the same in runs/<id>/info.json and prompt; this reads it from a
 * run database, read-only, even while a mount holds it. */
#ifndef SKILLFS_RUNLIST_H
#define SKILLFS_RUNLIST_H

#include <stddef.h>
#include <stdint.h>

struct run_summary {
	char *id;
	char *state;       /* a runstate name, as stored */
	char *config;      /* the configuration's name */
	int64_t created_ns; /* wall clock, nanoseconds since the epoch; 0: unknown */
	char *prompt_line; /* the prompt's first line, or NULL before it is written */
};

/* Reads every run of the database at path, oldest first, without changing
 * the file (opened read-only; waits up to 5 s for a writer). Returns 0 with
 * *out (runlist_free) and *n, or -1 with *err (caller frees) saying why. */
int runlist_read(const char *path, struct run_summary **out, size_t *n, char **err);

/* The first line of text (up to a line break, at most 200 bytes), newly
 * allocated, or NULL when out of memory. */
char *runlist_first_line(const char *text);

void runlist_free(struct run_summary *runs, size_t n);

#endif
