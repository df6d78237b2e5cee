/* dbwatch: notices the state database's file deleted or replaced under an
 * open store (the store keeps working on the file it opened, which no
 * later mount would see). Compares the path's device and inode with the
 * opened file's: one stat, made at most once a second unless asked now. */
#ifndef SKILLFS_DBWATCH_H
#define SKILLFS_DBWATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct dbwatch {
	pthread_mutex_t lock;
	char *path;
	dev_t dev;
	ino_t ino;
	int64_t next_ms; /* monotonic: the next check that is not forced */
	char *gone;      /* what happened, once noticed (never cleared) */
};

/* Starts watching path, whose open file opened describes (fstat of the
 * store's file). Returns 0, or -1 (ENOMEM). */
int dbwatch_init(struct dbwatch *w, const char *path, const struct stat *opened);

/* What happened to the database's file, once it is noticed that path no
 * longer names the opened file (deleted, or another file in its place):
 * a message saying so and what to do, valid until dbwatch_free; NULL while
 * path still names it (or cannot be checked: an error other than ENOENT
 * is no proof). Checks again when now is set, or when a second passed
 * since the last check; *first (may be NULL) is set when this call noticed
 * it. Thread-safe. */
const char *dbwatch_check(struct dbwatch *w, bool now, bool *first);

/* Frees what w holds. */
void dbwatch_free(struct dbwatch *w);

#endif
