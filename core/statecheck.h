/* statecheck: the report of `skillfs check --state DB` (DESIGN.md section
 * 9): whether a state database can be used, read without changing it. */
#ifndef SKILLFS_STATECHECK_H
#define SKILLFS_STATECHECK_H

#include "buf.h"
#include "pins.h"

/* Opens the database at path read-only (no migration, no lock: a mounted
 * daemon may hold it meanwhile) and appends lines starting "state:" to
 * out: its schema version (current; older, migrated at the next mount;
 * newer than this skillfs, an error; not a skillfs database, an error),
 * PRAGMA integrity_check's verdict (any problem is an error, each line of
 * it shown), the number of runs in each state, and each run a mount would
 * take up again (running: resumed from its last committed message;
 * queued: started in its turn; created: waiting for its prompt; waiting
 * for a person), in enqueue order, and last "state: errors: N". A file
 * that cannot be opened or is not a database is an error. Returns the number of errors, or -1 on ENOMEM. */
int statecheck_report(const char *path, struct buf *out);

/* What the state database at path remembers of pinned sources, opened
 * read-only as statecheck_report opens it: the files of each when it last
 * matched (pins.h), for `skillfs check` to say which differ. NULL when
 * there is no database there or it cannot be opened (a database older
 * than schema 9 answers that nothing is recorded). */
struct statecheck_pins;
struct statecheck_pins *statecheck_pins_open(const char *path);
/* Its pin_history, valid until statecheck_pins_close (NULL for NULL). */
const struct pin_history *statecheck_pins(struct statecheck_pins *p);
void statecheck_pins_close(struct statecheck_pins *p);

#endif
