/* workspace: a run's working directory, and file access confined to it.
 *
 * Paths come from the model: relative ("notes/a.txt"), or absolute inside the
 * workspace (the workspace prefix, or its alias, the path the sandboxed
 * processes see it at, is stripped). Any other absolute path, a
 * `..` that climbs out, or a symbolic link leading out is refused. Resolution
 * uses openat2(RESOLVE_BENEATH) on a directory fd; on kernels without openat2
 * it walks component by component with O_NOFOLLOW (symbolic links are then
 * not followed at all). Error messages are written for the model and name
 * the path as it was given, e.g. "path escapes the workspace: ../x". */
#ifndef SKILLFS_WORKSPACE_H
#define SKILLFS_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"

/* Default cap for workspace_read. */
#define WORKSPACE_READ_MAX ((size_t)1 << 20)

struct workspace {
	int dirfd;       /* O_PATH|O_DIRECTORY fd of the root */
	char *root;      /* the root as given, without trailing slashes */
	char *real;      /* the canonical root (symbolic links resolved) */
	bool no_openat2; /* resolve without openat2 (set when the kernel lacks
	                  * it; may be set by a caller to force that path) */
	uid_t uid;       /* the owner of the workspace and of what the file */
	gid_t gid;       /* tools make in it */
	bool give;       /* uid/gid are not the daemon's: chown what is made */
	char *alias;     /* where the tools' processes see the root (e.g.
	                  * "/workspace"), or NULL */
	bool readonly;   /* workspace_write refuses (a skill's directory) */
};

/* Opens the workspace at the absolute path root, owned by the daemon's
 * user: workspace_open_as(ws, root, geteuid(), getegid(), err). */
int workspace_open(struct workspace *ws, const char *root, struct buf *err);

/* Opens the workspace at the absolute path root for tools that run as
 * uid/gid. The directory above root is the daemon's own (made, mode 0700,
 * when missing; refused when another user owns it or group or others may
 * write it); root itself is made with mode 0700 when absent, opened
 * without following a symbolic link, and refused unless it is a directory
 * owned by uid or by the daemon's user; it is then given to uid/gid and
 * made 0700. Files and directories the file tools make in it get the same
 * owner. Returns 0, or -1 with a message appended to err naming the path
 * and why; ws is then left closed (workspace_close is harmless). */
int workspace_open_as(struct workspace *ws, const char *root, uid_t uid, gid_t gid,
		      struct buf *err);

/* Opens the existing directory at the absolute path root as a confined
 * root, changing nothing of it (a project directory, a skill's directory).
 * With no_symlinks, no component of root may be a symbolic link (root was
 * resolved when it was checked: a link found now was planted since).
 * Files and directories the file tools make in it get uid/gid. Returns 0,
 * or -1 with a message appended to err naming the path and why; ws is
 * then left closed. */
int workspace_open_dir(struct workspace *ws, const char *root, uid_t uid, gid_t gid,
		       bool no_symlinks, struct buf *err);

/* Sets where the tools' processes see the root (an absolute path such as
 * "/workdir"): absolute model paths under it are taken as inside the root.
 * Returns 0, or -1 on ENOMEM. */
int workspace_set_alias(struct workspace *ws, const char *alias);

/* p normalised by its text: empty and "." components and repeated or
 * trailing slashes dropped, ".." kept (only the kernel may interpret it);
 * an absolute path keeps its leading '/'. A new string, or NULL on
 * ENOMEM. */
char *workspace_norm_path(const char *p);

/* Reads the whole regular file at path into out (appended; NUL-terminated).
 * max is the size cap (0 = WORKSPACE_READ_MAX); a bigger file is refused
 * with a message giving its size and the cap. Returns 0, or -1 with a
 * message appended to err. Never blocks on FIFOs or devices. */
int workspace_read(const struct workspace *ws, const char *path, size_t max,
		   struct buf *out, struct buf *err);

/* Creates or replaces the file at path with len bytes of data, creating
 * missing parent directories inside the workspace. The replacement is
 * atomic (temporary file + rename in the same directory): readers see the
 * old or the new content, a symbolic link at path is replaced rather than
 * followed, and an existing file keeps its permission bits. Returns 0, or -1
 * with a message appended to err (no temporary file is left behind). */
int workspace_write(const struct workspace *ws, const char *path,
		    const void *data, size_t len, struct buf *err);

/* The model's path made relative to the root and normalised lexically
 * ("." for the root itself), under the rules above (an absolute path
 * outside, or a `..` climbing out, is refused). Returns a malloc'd string,
 * or NULL with a message appended to err. */
char *workspace_relative(const struct workspace *ws, const char *path, struct buf *err);

/* Opens the model's path beneath the root with open(2) flags (O_CLOEXEC
 * added). Returns the fd, or -1 with errno and a message appended to err. */
int workspace_open_path(const struct workspace *ws, const char *path, int flags,
			struct buf *err);

/* How deep workspace_walk descends below its start. */
#define WORKSPACE_WALK_DEPTH 64

/* One entry met by workspace_walk. */
struct workspace_entry {
	const char *path; /* relative to the workspace root, e.g. "src/a.c" */
	const char *name; /* its last component */
	int dirfd;        /* the directory holding it: openat(dirfd, name, ...) */
	mode_t type;      /* S_IFREG, S_IFDIR, S_IFLNK, ... of the entry itself */
	off_t size;
	int depth;        /* 1 for the entries of the start directory */
};

/* What a workspace_walk callback returns (or -1: out of memory, the walk
 * ends). */
enum {
	WORKSPACE_WALK_NEXT, /* go on */
	WORKSPACE_WALK_SKIP, /* do not enter this directory */
	WORKSPACE_WALK_STOP, /* end the walk here */
};
typedef int (*workspace_walk_fn)(void *arg, const struct workspace_entry *e);

/* Walks the directory at the model's path dir (resolved beneath the root as
 * workspace_read resolves a file; NULL or "" is the root) depth first, each
 * directory's entries in byte order of their names, calling fn for every
 * entry below it (not for dir itself). Below the start nothing is followed:
 * a symbolic link is reported as one and never entered, each directory is
 * opened with O_NOFOLLOW from its parent's descriptor; a directory that
 * cannot be opened is skipped; at most WORKSPACE_WALK_DEPTH levels are
 * entered. Returns 0 when the walk went through, 1 when fn stopped it, or
 * -1 with a message appended to err and errno set: dir cannot be walked
 * (ENOTDIR when it is not a directory, ENOENT, EXDEV...) or memory ran out
 * (ENOMEM, also when fn returned -1). */
int workspace_walk(const struct workspace *ws, const char *dir, workspace_walk_fn fn,
		   void *arg, struct buf *err);

/* Releases the fd and strings; leaves ws closed. Safe to call again, and
 * after a failed workspace_open. */
void workspace_close(struct workspace *ws);

/* mkdir -p for a path of the daemon's own (trusted, not a model's): every
 * missing directory is made with mode. Returns 0, or -1 with errno
 * (ENOTDIR when a part exists but is not a directory). */
int workspace_mkdirs(const char *dir, mode_t mode);

#endif
