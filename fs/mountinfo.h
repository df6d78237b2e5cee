/* mountinfo: this process's mount table (/proc/self/mountinfo), read to
 * find skillfs mounts (for `skillfs run`) and to tell when our mount went
 * away: a lazy unmount (fusermount3 -uz) takes it
 * out of the table at once, even while files of it are open and the FUSE
 * connection lives on, so no request tells the daemon. */
#ifndef SKILLFS_MOUNTINFO_H
#define SKILLFS_MOUNTINFO_H

#include <stdbool.h>

#include "strlist.h"

/* The id of the newest FUSE mount whose mount point is dir (absolute,
 * every link resolved, as the table names it), or 0 when there is none or
 * the table cannot be read. */
long mountinfo_fuse_at(const char *dir);

/* Whether mount id is still in the table; true when id <= 0 (unknown) or
 * the table cannot be read (nothing is stopped on a guess). */
bool mountinfo_has(long id);

/* Appends the mount point of every skillfs mount in the table (type
 * fuse.skillfs), in the table's order (oldest first). Returns 0, or -1
 * when the table cannot be read or memory ran out. */
int mountinfo_skillfs_mounts(struct strlist *out);

#endif
