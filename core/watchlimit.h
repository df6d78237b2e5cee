/* watchlimit: the inotify watch limit (what it is, and what is in use),
 * and the directories it keeps the watcher from watching: a set of them
 * by path, with a signature of what each held when last looked at, so
 * that a rescan can tell one changed although no event said so. */
#ifndef SKILLFS_WATCHLIMIT_H
#define SKILLFS_WATCHLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strlist.h"

/* A directory not watched. path is the set's; the rest is its user's. */
struct unwatched {
	char *path;
	size_t root_len;      /* the length of the source path that begins path,
	                         or 0 (the watcher's struct watch has the same) */
	unsigned roles;       /* what the directory is to the watcher */
	struct strlist names; /* the paths on the way to sources it holds */
	uint64_t sig;         /* what it held when last looked at */
	bool looked;          /* sig is set */
	bool watched;         /* watched since: looked at once more, then dropped */
	bool drop;            /* to be dropped by unwatched_compact */
};

/* Directories not watched, found by path in O(1) (an open-addressing
 * index of item index + 1, 0 empty, its size a power of two). Zeroed is
 * empty. */
struct unwatched_set {
	struct unwatched *items;
	size_t n, cap;
	size_t *index;
	size_t nindex;
};

/* The entry of path, or NULL. */
struct unwatched *unwatched_find(const struct unwatched_set *set, const char *path);

/* The entry of path, made (all zero but path) when there is none, with
 * drop cleared. Entries may move when one is made. NULL on ENOMEM. */
struct unwatched *unwatched_get(struct unwatched_set *set, const char *path);

/* Drops the entries marked drop (the others may move). */
void unwatched_compact(struct unwatched_set *set);

/* Frees every entry; leaves set empty and reusable. */
void unwatched_free(struct unwatched_set *set);

/* What directory path holds, as a number that changes when it does: the
 * directory itself and each entry in it (name, identity, kind, size,
 * times; links not followed), whatever their order. A file written in
 * place changes its times; a name come, gone or renamed changes the
 * directory's. A directory that cannot be read gives a number of its
 * error. */
uint64_t dir_signature(const char *path);

/* What the paths are, as a number that changes when one does: each one's
 * identity, kind and times, as a link and through it. */
uint64_t paths_signature(const struct strlist *paths);

/* The inotify watch limit that applies to this process, as /proc shows it. */
struct watch_limit {
	long limit;          /* the lowest of the limits that apply; -1: unknown */
	const char *sysctl;  /* the sysctl that sets it */
	long in_use;         /* watches this user's processes hold, of those
	                        that can be looked at; -1: unknown */
};

/* Reads the watch limit (the sysctls fs.inotify.max_user_watches and, in
 * a user namespace, user.max_inotify_watches: the lower wins) and counts
 * the watches in use by this user's processes whose descriptors can be
 * read (/proc/PID/fdinfo). */
void watch_limit_read(struct watch_limit *out);

#endif
