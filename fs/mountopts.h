/* mountopts: `-o` option strings as mount(8) and mount.fuse3 pass them
 * (comma separated; a backslash takes the next character as it is, or
 * three octal digits as one byte, as libfuse reads them).
 *
 * skillfs takes its own options out of them, so that an /etc/fstab line
 * or `mount -t fuse.skillfs CONFIG MOUNTPOINT -o OPTS` can say everything
 * the command line can: state=DB (--state), skills=DIR[:DIR...] (-s),
 * recursive=DIR[:DIR...] (-r). The options mount(8) keeps for itself
 * (nofail, _netdev, noauto, auto, defaults, user, users, nouser, x-*, and
 * comment=) are dropped should they reach skillfs; all others go on to
 * libfuse, which refuses one it does not know. */
#ifndef SKILLFS_MOUNTOPTS_H
#define SKILLFS_MOUNTOPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "strlist.h"

/* Reads the next option of *p (unescaped) into tok (size bytes) and moves
 * *p past it and its comma. Returns false at the end of the string; sets
 * *over when the option did not fit in tok (tok then holds its start). */
bool mountopts_next(const char **p, char *tok, size_t size, bool *over);

/* What skillfs's own options said. */
struct mountopts {
	char *state;            /* state=, or NULL */
	struct strlist dirs;    /* skills= and recursive= directories, in order */
	struct strlist recursive; /* "1" or "0" per dirs item */
	struct buf rest;        /* every other option for libfuse, escaped again */
};

/* Splits opts (NULL: none) into o. Returns 0, or -1 with *err (caller
 * frees) naming the option that cannot be taken (an empty value, an option
 * too long, or out of memory). */
int mountopts_parse(const char *opts, struct mountopts *o, char **err);

void mountopts_free(struct mountopts *o);

#endif
