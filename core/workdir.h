/* workdir: the project directory a run may work on instead of an empty
 * workspace (runs/<id>/workdir, runs.workdir_roots; DESIGN.md section 7).
 * It is checked when written (D9) and again when the run starts: only a
 * directory at or under one of the configured roots is accepted, with
 * every symbolic link resolved first, so a link leading out of the roots
 * is refused. */
#ifndef SKILLFS_WORKDIR_H
#define SKILLFS_WORKDIR_H

#include <stdbool.h>

#include "strlist.h"

/* Checks path (as a user wrote it: absolute) against roots (absolute
 * directories; their own symbolic links are resolved here, and a root
 * that does not exist admits nothing). path is resolved with realpath(3)
 * and must then be a directory equal to or inside a resolved root. avoid
 * (may be NULL) lists directories skillfs keeps to itself (the state
 * directory, the skill sources: a model writing there could change its
 * own grants) that the workdir may neither be, lie inside, nor contain;
 * nor may it be in or contain a skillfs mount (/proc/self/mountinfo),
 * through which the tools could drive runs, approvals included.
 * Returns 0 with *resolved the resolved path (malloc'd); -EINVAL with *why
 * a malloc'd reason a user can act on, e.g. "runs.workdir_roots is empty:
 * workdir is off" or "/tmp/x is not under runs.workdir_roots (/srv/p)"
 * (*why NULL when out of memory meanwhile); or -ENOMEM. */
int workdir_check(const struct strlist *roots, const char *path, const struct strlist *avoid,
		  char **resolved, char **why);

/* Whether the absolute, normalised path p is dir itself or inside it. */
bool workdir_is_within(const char *p, const char *dir);

#endif
