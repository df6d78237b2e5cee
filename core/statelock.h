/* statelock: one daemon per state database. The lock is an exclusive
 * flock on a file beside the database (its path + ".lock"), not on the
 * database itself: it holds whatever happens to the database file (deleted
 * or replaced by another), and it never touches a descriptor of the
 * database, whose close would drop SQLite's own (POSIX) locks. */
#ifndef SKILLFS_STATELOCK_H
#define SKILLFS_STATELOCK_H

/* The lock file's name for the database at db_path: db_path + ".lock". */
#define STATELOCK_SUFFIX ".lock"

/* Takes the lock of the database at db_path (creating the lock file,
 * mode 0600, not its directory). Returns the descriptor holding it: keep
 * it open as long as the database is used; it stays held across fork (the
 * child of a daemonising fork keeps it when the parent exits) and is not
 * inherited by exec. Returns -1 with *err set when another process holds
 * it ("... is in use by another skillfs (pid N)") or the file cannot be
 * opened. */
int statelock_take(const char *db_path, char **err);

/* Writes the calling process's pid into the lock file held by fd (the
 * owner a refused daemon names): call it in the child after a fork. */
void statelock_note_owner(int fd);

/* Releases a lock from statelock_take (closes fd). -1 is ignored. The lock
 * file stays: deleting it would let a second daemon lock a new file while
 * the first still holds the old one. */
void statelock_release(int fd);

#endif
