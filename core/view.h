/* view: the mount as a pure model — what exists at each path, its type,
 * size and bytes — over an engine snapshot. fs/ maps FUSE requests onto
 * these calls and adds nothing but inode bookkeeping and caching. Paths are
 * relative to the mount root, without a leading slash ("" is the root). */
#ifndef SKILLFS_VIEW_H
#define SKILLFS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "engine.h"

/* The most components a mount path may have; deeper paths are refused
 * (ENAMETOOLONG). The watcher follows skills' directories this deep. */
#define VIEW_MAX_DEPTH ENGINE_MAX_DEPTH

enum view_type { VIEW_DIR, VIEW_FILE };

/* How long the kernel may cache a node: STATIC nodes change only when the
 * disk or config changes (and are then invalidated); LIVE ones (runs/)
 * change at any time and must never be cached. */
enum view_cache { VIEW_STATIC, VIEW_LIVE };

struct view_attr {
	enum view_type type;
	mode_t perm;          /* 0444 / 0555, or writable run files, or a
	                         run's own (runs_set_allow_other) */
	bool owned;           /* under runs/<id>: uid and gid are the run's
	                         owner; else the mount's user owns it */
	uid_t uid;
	gid_t gid;
	uint64_t size;        /* exactly the bytes a read returns */
	struct timespec mtime;
	enum view_cache cache;
	/* The name lives as long as its directory (runs/<id> until rmdir,
	 * and the files every run has): its entry may be cached even when
	 * its attributes may not. */
	bool name_stable;
};

struct view_dirent {
	char *name;
	enum view_type type;
};

/* Attributes of path. Returns 0 or a negative errno (-ENOENT, ...). */
int view_getattr(struct snapshot *s, const char *path, struct view_attr *a);

/* The sorted entries of directory path (caller frees with
 * view_dirents_free). Returns 0 or a negative errno (-ENOTDIR, ...). */
int view_readdir(struct snapshot *s, const char *path, struct view_dirent **ents, size_t *n);
void view_dirents_free(struct view_dirent *ents, size_t n);

/* Reads up to size bytes at off of file path into dst. Returns the byte
 * count (0 at end) or a negative errno. */
ssize_t view_read(struct snapshot *s, const char *path, uint64_t off, size_t size, char *dst);

/* The whole of a generated file (not one backed by a skill's file on
 * disk): *data (malloc'd, NUL-terminated) and *len. Returns 0, or a
 * negative errno (-EISDIR, -EINVAL for a backed file, -ENOENT, ...). */
int view_read_all(struct snapshot *s, const char *path, char **data, size_t *len);

/* Whether reads of file path must reach the daemon each time (direct
 * I/O, nothing kept in the page cache): its bytes change while it is open
 * (the files under runs/, and the audit file, which grows). */
bool view_direct_io(const char *path);

/* Whether path is the directory of a skill in the catalogue (the unit of
 * invalidation), and which: sets *name to the component after "skills/". */
bool view_skill_of(const char *path, const char **name, size_t *len);

/* Whether path is a skill's directory in a gate view or inside it
 * (configs/<cfg>/skills/<name>[/...] or configs/<cfg>/claude/skills/<name>
 * [/...]), and which: sets *name to the component after "skills/". */
bool view_gate_skill_of(const char *path, const char **name, size_t *len);

/* Whether path is runs/<id>/<name> (a file directly in a run directory):
 * copies the id into id (size bytes) and points *name at the file name. */
bool view_run_file(const char *path, char *id, size_t size, const char **name);

/* Whether path is inside a run directory (runs/<id>/..., at any depth)
 * and <id> is a valid run id (runs_id_valid) that fits id (size bytes):
 * copies it there. */
bool view_run_of(const char *path, char *id, size_t size);

#endif
