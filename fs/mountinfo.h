/* mountinfo: this process's mount table (/proc/self/mountinfo), read to
 * tell when our mount went away: a lazy unmount (fusermount3 -uz) takes it
 * out of the table at once, even while files of it are open and the FUSE
 * connection lives on, so no request tells the daemon. */
#ifndef SKILLFS_MOUNTINFO_H
#define SKILLFS_MOUNTINFO_H

#include <stdbool.h>

/* The id of the newest FUSE mount whose mount point is dir (absolute,
 * every link resolved, as the table names it), or 0 when there is none or
 * the table cannot be read. */
long mountinfo_fuse_at(const char *dir);

/* Whether mount id is still in the table; true when id <= 0 (unknown) or
 * the table cannot be read (nothing is stopped on a guess). */
bool mountinfo_has(long id);

#endif
