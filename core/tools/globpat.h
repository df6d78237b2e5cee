/* globpat: the path patterns of the glob tool (and grep's glob filter).
 *
 * A pattern is a relative path whose '/'-separated parts are fnmatch(3)
 * patterns matched against one path component each (so '*', '?' and
 * '[...]' never cross a '/'; they do match a leading '.'), and where a
 * part that is exactly "**" matches any number of components, none
 * included: "*.c" matches a.c only at the top, and after a "**" part at
 * any depth; a "src" part followed by "*.h" matches the headers directly
 * in src. Empty and "." parts are ignored; an absolute pattern, a ".."
 * part and an empty pattern are refused. */
#ifndef SKILLFS_GLOBPAT_H
#define SKILLFS_GLOBPAT_H

#include <stdbool.h>

#include "strlist.h"

/* Longest pattern accepted, in bytes. */
#define GLOBPAT_MAX 1024

struct globpat {
	struct strlist parts; /* repeated "**" parts collapsed into one */
};

/* Parses pattern into *g. Returns 0, or -1 with *why a static message for
 * the model (g is then empty) or, out of memory, errno ENOMEM and *why
 * NULL. */
int globpat_parse(struct globpat *g, const char *pattern, const char **why);

/* Whether the relative path (components separated by single '/', no "."
 * or "..") matches g. */
bool globpat_match(const struct globpat *g, const char *path);

/* Whether a path below the directory dir (relative, like globpat_match's
 * path; "" for the start itself) might match g: false means no entry
 * under dir can, so a walk need not enter it. */
bool globpat_may_match_below(const struct globpat *g, const char *dir);

void globpat_free(struct globpat *g);

#endif
