#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "strlist.h"

/* How much of a model-supplied path an error message quotes. */
#define PATH_QUOTE_MAX 256

static void ws_msg(struct buf *err, const char *what, const char *path)
{
	size_t n = strlen(path);
	if (n > PATH_QUOTE_MAX)
		buf_printf(err, "%s: %.*s...", what, PATH_QUOTE_MAX, path);
	else
		buf_printf(err, "%s: %s", what, path);
}

/* The message for a failed resolution or open, with errno e. */
static void ws_errno_msg(struct buf *err, int e, const char *path)
{
	switch (e) {
	case EXDEV:
		ws_msg(err, "path escapes the workspace", path);
		break;
	case ENOENT:
		ws_msg(err, "no such file", path);
		break;
	case ENOTDIR:
		ws_msg(err, "a component of the path is not a directory", path);
		break;
	case EISDIR:
		ws_msg(err, "is a directory", path);
		break;
	case ELOOP:
		ws_msg(err, "cannot follow symbolic link", path);
		break;
	case EACCES:
	case EPERM:
		ws_msg(err, "permission denied", path);
		break;
	case ENAMETOOLONG:
		ws_msg(err, "path too long", path);
		break;
	case ENOMEM:
		ws_msg(err, "out of memory", path);
		break;
	default:
		ws_msg(err, strerror(e), path);
		break;
	}
}

/* Lexically normalises p: empty and "." components and repeated or trailing
 * slashes go; ".." is kept (only the kernel may interpret it, because of
 * symbolic links). An absolute path keeps its leading '/'; a relative path
 * that names the start directory becomes "". Returns NULL on ENOMEM. */
static char *norm_path(const char *p)
{
	return workspace_norm_path(p);
}

char *workspace_norm_path(const char *p)
{
	size_t n = strlen(p);
	char *out = malloc(n + 2);
	if (!out)
		return NULL;
	size_t o = 0;
	if (p[0] == '/')
		out[o++] = '/';
	const char *s = p;
	while (*s) {
		while (*s == '/')
			s++;
		const char *e = s;
		while (*e && *e != '/')
			e++;
		size_t len = (size_t)(e - s);
		if (len && !(len == 1 && s[0] == '.')) {
			if (o && out[o - 1] != '/')
				out[o++] = '/';
			memcpy(out + o, s, len);
			o += len;
		}
		s = e;
	}
	out[o] = '\0';
	return out;
}

/* The part of the normalised absolute path abs below the normalised root,
 * or NULL when abs is not inside root. */
static const char *below(const char *abs, const char *root)
{
	if (!root)
		return NULL;
	if (strcmp(root, "/") == 0)
		return abs + 1;
	size_t n = strlen(root);
	if (strncmp(abs, root, n) != 0)
		return NULL;
	if (abs[n] == '\0')
		return abs + n;
	if (abs[n] == '/')
		return abs + n + 1;
	return NULL;
}

/* Turns a model path into a normalised path relative to the root ("." for
 * the root itself). Returns NULL with a message in err. */
static char *ws_relative(const struct workspace *ws, const char *path,
			 struct buf *err)
{
	if (!path || !*path) {
		buf_puts(err, "empty path");
		return NULL;
	}
	char *norm = norm_path(path);
	if (!norm) {
		ws_errno_msg(err, ENOMEM, path);
		return NULL;
	}
	const char *rel = norm;
	if (norm[0] == '/') {
		rel = below(norm, ws->alias);
		if (!rel)
			rel = below(norm, ws->root);
		if (!rel)
			rel = below(norm, ws->real);
		if (!rel) {
			free(norm);
			ws_errno_msg(err, EXDEV, path);
			return NULL;
		}
	}
	/* Refuse a path that climbs above the root when read lexically, even
	 * where the kernel would stop earlier (a missing directory) or a
	 * symbolic link would bring it back: clearer, and never wider. */
	long depth = 0;
	for (const char *s = rel; *s;) {
		const char *e = strchrnul(s, '/');
		if (e - s == 2 && s[0] == '.' && s[1] == '.')
			depth--;
		else
			depth++;
		if (depth < 0) {
			free(norm);
			ws_errno_msg(err, EXDEV, path);
			return NULL;
		}
		s = *e ? e + 1 : e;
	}
	char *out = strdup(*rel ? rel : ".");
	free(norm);
	if (!out)
		ws_errno_msg(err, ENOMEM, path);
	return out;
}

/* openat(2) without following a symbolic link, turning "it was a symbolic
 * link" into ELOOP whatever the flags made the kernel say. */
static int openat_nofollow(int dirfd, const char *name, int flags)
{
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOTDIR) {
		struct stat st;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode))
			errno = ELOOP;
		else
			errno = ENOTDIR;
	}
	return fd;
}

/* The fallback resolution: rel is walked component by component from the
 * root; ".." is applied lexically and may not climb above the root;
 * symbolic links are never followed. */
static int ws_openat_walk(const struct workspace *ws, const char *rel,
			  int flags)
{
	struct strlist comps = {0};
	int ret = -1, saved = 0;
	const char *s = rel;
	while (*s) {
		const char *e = strchrnul(s, '/');
		size_t len = (size_t)(e - s);
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			if (comps.n == 0) {
				saved = EXDEV;
				goto out;
			}
			free(comps.items[--comps.n]);
		} else if (len && !(len == 1 && s[0] == '.')) {
			if (strlist_addf(&comps, "%.*s", (int)len, s) < 0) {
				saved = ENOMEM;
				goto out;
			}
		}
		s = *e ? e + 1 : e;
	}
	if (comps.n == 0) {
		ret = openat(ws->dirfd, ".", flags | O_CLOEXEC);
		saved = errno;
		goto out;
	}
	int cur = ws->dirfd;
	for (size_t i = 0; i + 1 < comps.n; i++) {
		int next = openat_nofollow(cur, comps.items[i],
					   O_PATH | O_DIRECTORY);
		saved = errno;
		if (cur != ws->dirfd)
			close(cur);
		if (next < 0)
			goto out;
		cur = next;
	}
	ret = openat_nofollow(cur, comps.items[comps.n - 1], flags);
	saved = errno;
	if (cur != ws->dirfd)
		close(cur);
out:
	strlist_free(&comps);
	if (ret < 0)
		errno = saved;
	return ret;
}

/* Opens rel (already relative and normalised) beneath the root. Returns an
 * fd, or -1 with errno (EXDEV when the path leads out of the workspace). */
static int ws_openat(const struct workspace *ws, const char *rel, int flags)
{
	if (!ws->no_openat2) {
		struct open_how how = {
			.flags = (uint64_t)(flags | O_CLOEXEC),
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
		};
		for (int tries = 0; tries < 8; tries++) {
			long fd = syscall(SYS_openat2, ws->dirfd, rel, &how,
					  sizeof how);
			if (fd >= 0)
				return (int)fd;
			/* EAGAIN: a concurrent rename; the kernel asks
			 * for a retry. */
			if (errno != EAGAIN && errno != EINTR)
				break;
		}
		if (errno != ENOSYS)
			return -1;
	}
	return ws_openat_walk(ws, rel, flags);
}

/* Opens the directory rel beneath the root as O_PATH, creating missing
 * components (mode 0755) one at a time, each checked like any other path. */
static int ws_open_dir(const struct workspace *ws, const char *rel)
{
	int fd = ws_openat(ws, rel, O_PATH | O_DIRECTORY);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	char *p = strdup(rel);
	if (!p)
		return -1;
	size_t len = strlen(p);
	for (size_t i = 1; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		char save = p[i];
		p[i] = '\0';
		int f = ws_openat(ws, p, O_PATH | O_DIRECTORY);
		if (f < 0 && errno == ENOENT) {
			char *slash = strrchr(p, '/');
			const char *name = slash ? slash + 1 : p;
			if (slash)
				*slash = '\0';
			int pf = ws_openat(ws, slash ? p : ".",
					   O_PATH | O_DIRECTORY);
			if (slash)
				*slash = '/';
			if (pf < 0) {
				int e = errno;
				free(p);
				errno = e;
				return -1;
			}
			int r = mkdirat(pf, name, 0755);
			int e = errno;
			if (r == 0 && ws->give &&
			    fchownat(pf, name, ws->uid, ws->gid, AT_SYMLINK_NOFOLLOW) < 0) {
				r = -1;
				e = errno;
			}
			close(pf);
			if (r < 0 && e != EEXIST) {
				free(p);
				errno = e;
				return -1;
			}
			f = ws_openat(ws, p, O_PATH | O_DIRECTORY);
		}
		p[i] = save;
		if (f < 0) {
			int e = errno;
			free(p);
			errno = e;
			return -1;
		}
		if (i == len) {
			free(p);
			return f;
		}
		close(f);
	}
	free(p);
	errno = ENOENT;
	return -1;
}

int workspace_mkdirs(const char *dir, mode_t mode)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = path + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char save = *s;
		*s = '\0';
		int r = mkdir(path, mode);
		int e = errno;
		struct stat st;
		if (r < 0 && !(e == EEXIST && stat(path, &st) == 0 &&
			       S_ISDIR(st.st_mode))) {
			*s = save;
			errno = e == EEXIST ? ENOTDIR : e;
			return -1;
		}
		*s = save;
		if (!save)
			return 0;
	}
}

/* Notes whether this kernel has openat2 (else resolution walks). */
static void probe_openat2(struct workspace *ws)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH};
	long fd = syscall(SYS_openat2, ws->dirfd, ".", &how, sizeof how);
	if (fd >= 0)
		close((int)fd);
	else if (errno == ENOSYS)
		ws->no_openat2 = true;
}

int workspace_open(struct workspace *ws, const char *root, struct buf *err)
{
	return workspace_open_as(ws, root, geteuid(), getegid(), err);
}

int workspace_open_as(struct workspace *ws, const char *root, uid_t uid, gid_t gid,
		      struct buf *err)
{
	*ws = (struct workspace){.dirfd = -1};
	int pfd = -1;
	if (!root || root[0] != '/') {
		buf_printf(err, "workspace path must be absolute: %s",
			   root ? root : "(none)");
		return -1;
	}
	ws->root = norm_path(root);
	if (!ws->root)
		goto nomem;
	/* The parent is the daemon's own (made with its parents when
	 * missing); the workspace itself is opened without following a link
	 * and must be a directory of the daemon's user or of uid. */
	char *slash = strrchr(ws->root, '/');
	const char *name = slash[1] ? slash + 1 : ".";
	*slash = '\0';
	const char *parent = slash == ws->root ? "/" : ws->root;
	pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0 && errno == ENOENT && workspace_mkdirs(parent, 0700) == 0)
		pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		buf_printf(err, "cannot open the workspaces' directory %s: %s", parent,
			   strerror(errno));
		*slash = '/';
		goto fail;
	}
	/* Whoever else may write the parent can rename the workspace away
	 * and put a link in its place while it is used by path. */
	struct stat pst;
	if (fstat(pfd, &pst) < 0) {
		buf_printf(err, "cannot check the workspaces' directory %s: %s", parent,
			   strerror(errno));
		*slash = '/';
		goto fail;
	}
	if (pst.st_uid != geteuid() || (pst.st_mode & 022)) {
		buf_printf(err, "the workspaces' directory %s is writable by other users "
			   "or not owned by uid %ld: refusing to use it; make it 0700 and "
			   "owned by that user, or choose another state directory", parent,
			   (long)geteuid());
		*slash = '/';
		goto fail;
	}
	*slash = '/';
	bool made = mkdirat(pfd, name, 0700) == 0;
	if (!made && errno != EEXIST) {
		buf_printf(err, "cannot create workspace %s: %s", ws->root, strerror(errno));
		goto fail;
	}
	ws->dirfd = openat(pfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (ws->dirfd < 0 || fstat(ws->dirfd, &st) < 0) {
		int e = errno;
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
			buf_printf(err, "workspace %s exists but is not a directory (%s): "
				   "refusing to use it", ws->root,
				   S_ISLNK(st.st_mode) ? "a symbolic link" : "another file");
		else
			buf_printf(err, "cannot open workspace %s: %s", ws->root, strerror(e));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode) || (st.st_uid != uid && st.st_uid != geteuid())) {
		buf_printf(err, "workspace %s is not a directory owned by uid %ld (it "
			   "belongs to uid %ld): refusing to use it", ws->root,
			   (long)uid, (long)st.st_uid);
		goto fail;
	}
	/* Ours (made now, or by an earlier version): given to uid, whom the
	 * sandboxed tools run as, and closed to everybody else. */
	if ((st.st_uid != uid || st.st_gid != gid) &&
	    fchownat(ws->dirfd, "", uid, gid, AT_EMPTY_PATH) < 0) {
		buf_printf(err, "cannot give workspace %s to uid %ld: %s", ws->root,
			   (long)uid, strerror(errno));
		goto fail;
	}
	if ((st.st_mode & 07777) != 0700 && !made) {
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", ws->dirfd);
		if (chmod(proc, 0700) < 0) {
			buf_printf(err, "cannot make workspace %s private: %s", ws->root,
				   strerror(errno));
			goto fail;
		}
	}
	ws->uid = uid;
	ws->gid = gid;
	ws->give = uid != geteuid() || gid != getegid();
	close(pfd);
	pfd = -1;
	char *real = realpath(ws->root, NULL);
	if (!real) {
		buf_printf(err, "cannot resolve workspace %s: %s", ws->root,
			   strerror(errno));
		goto fail;
	}
	ws->real = norm_path(real);
	free(real);
	if (!ws->real)
		goto nomem;
	probe_openat2(ws);
	return 0;
nomem:
	buf_puts(err, "out of memory");
fail:
	if (pfd >= 0)
		close(pfd);
	workspace_close(ws);
	return -1;
}

int workspace_open_dir(struct workspace *ws, const char *root, uid_t uid, gid_t gid,
		       bool no_symlinks, struct buf *err)
{
	*ws = (struct workspace){.dirfd = -1};
	if (!root || root[0] != '/') {
		buf_printf(err, "directory path must be absolute: %s", root ? root : "(none)");
		return -1;
	}
	if (!(ws->root = norm_path(root)))
		goto nomem;
	int e = 0;
	if (no_symlinks) {
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
		long fd = syscall(SYS_openat2, AT_FDCWD, ws->root, &how, sizeof how);
		ws->dirfd = fd >= 0 ? (int)fd : -1;
		e = errno;
	}
	if (!no_symlinks || (ws->dirfd < 0 && e == ENOSYS)) {
		ws->dirfd = open(ws->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		e = errno;
	}
	if (ws->dirfd < 0) {
		buf_printf(err, "cannot open directory %s: %s", ws->root,
			   e == ELOOP ? "a symbolic link is in its path now" : strerror(e));
		goto fail;
	}
	char *real = realpath(ws->root, NULL);
	if (!real) {
		buf_printf(err, "cannot resolve directory %s: %s", ws->root, strerror(errno));
		goto fail;
	}
	ws->real = norm_path(real);
	free(real);
	if (!ws->real)
		goto nomem;
	if (no_symlinks && strcmp(ws->real, ws->root) != 0) {
		buf_printf(err, "cannot open directory %s: a symbolic link is in its path now",
			   ws->root);
		goto fail;
	}
	ws->uid = uid;
	ws->gid = gid;
	ws->give = uid != geteuid() || gid != getegid();
	probe_openat2(ws);
	return 0;
nomem:
	buf_puts(err, "out of memory");
fail:
	workspace_close(ws);
	return -1;
}

int workspace_set_alias(struct workspace *ws, const char *alias)
{
	char *a = norm_path(alias);
	if (!a)
		return -1;
	free(ws->alias);
	ws->alias = a;
	return 0;
}

void workspace_close(struct workspace *ws)
{
	if (ws->dirfd >= 0)
		close(ws->dirfd);
	ws->dirfd = -1;
	free(ws->root);
	free(ws->real);
	free(ws->alias);
	ws->root = ws->real = ws->alias = NULL;
	ws->readonly = false;
}

static void too_large(struct buf *err, const char *path, uintmax_t size,
		      size_t max)
{
	ws_msg(err, "file is too large to read", path);
	buf_printf(err, " (%ju bytes; the limit is %zu bytes)", size, max);
}

int workspace_read(const struct workspace *ws, const char *path, size_t max,
		   struct buf *out, struct buf *err)
{
	if (!max)
		max = WORKSPACE_READ_MAX;
	char *rel = ws_relative(ws, path, err);
	if (!rel)
		return -1;
	int fd = ws_openat(ws, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	int e = errno;
	free(rel);
	if (fd < 0) {
		ws_errno_msg(err, e, path);
		return -1;
	}
	size_t start = out->len;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		ws_errno_msg(err, errno, path);
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		ws_errno_msg(err, EISDIR, path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ws_msg(err, "not a regular file", path);
		goto fail;
	}
	if ((uintmax_t)st.st_size > max) {
		too_large(err, path, (uintmax_t)st.st_size, max);
		goto fail;
	}
	size_t total = 0;
	for (;;) {
		char chunk[65536];
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ws_errno_msg(err, errno, path);
			goto fail;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		if (total > max) { /* it grew while being read */
			too_large(err, path, total, max);
			goto fail;
		}
		if (buf_append(out, chunk, (size_t)n) < 0) {
			ws_errno_msg(err, ENOMEM, path);
			goto fail;
		}
	}
	if (!out->data && buf_append(out, "", 0) < 0) {
		ws_errno_msg(err, ENOMEM, path);
		goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	if (out->data) {
		out->len = start;
		out->data[start] = '\0';
	}
	return -1;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Creates a fresh temporary file in dfd; its name goes to name. */
static int create_temp(int dfd, char name[static 32])
{
	for (int tries = 0; tries < 16; tries++) {
		uint64_t r;
		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
			return -1;
		snprintf(name, 32, ".tmp-write-%016llx", (unsigned long long)r);
		int fd = openat(dfd, name,
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
					O_CLOEXEC,
				0644);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

int workspace_write(const struct workspace *ws, const char *path,
		    const void *data, size_t len, struct buf *err)
{
	size_t plen = path ? strlen(path) : 0;
	if (ws->readonly) {
		ws_msg(err, "read-only directory", path ? path : "");
		return -1;
	}
	if (plen && path[plen - 1] == '/') {
		ws_msg(err, "not a file path (ends with '/')", path);
		return -1;
	}
	char *rel = ws_relative(ws, path, err);
	if (!rel)
		return -1;
	char *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel;
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		free(rel);
		ws_msg(err, "not a file path", path);
		return -1;
	}
	if (slash)
		*slash = '\0';
	int dfd = ws_open_dir(ws, slash ? rel : ".");
	if (dfd < 0) {
		ws_errno_msg(err, errno, path);
		free(rel);
		return -1;
	}
	int ret = -1;
	mode_t keep = 0;
	bool has_keep = false;
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISDIR(st.st_mode)) {
			ws_errno_msg(err, EISDIR, path);
			goto out;
		}
		if (S_ISREG(st.st_mode)) {
			keep = st.st_mode & 0777; /* never set-id bits */
			has_keep = true;
		}
	}
	char tmp[32];
	int fd = create_temp(dfd, tmp);
	if (fd < 0) {
		ws_errno_msg(err, errno, path);
		goto out;
	}
	int r = write_all(fd, data, len);
	if (r == 0 && has_keep)
		r = fchmod(fd, keep);
	if (r == 0 && ws->give)
		r = fchown(fd, ws->uid, ws->gid);
	int e = errno;
	if (close(fd) < 0 && r == 0) {
		r = -1;
		e = errno;
	}
	if (r == 0 && renameat(dfd, tmp, dfd, base) < 0) {
		r = -1;
		e = errno;
	}
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		ws_errno_msg(err, e, path);
		goto out;
	}
	ret = 0;
out:
	close(dfd);
	free(rel);
	return ret;
}

char *workspace_relative(const struct workspace *ws, const char *path, struct buf *err)
{
	return ws_relative(ws, path, err);
}

int workspace_open_path(const struct workspace *ws, const char *path, int flags,
			struct buf *err)
{
	char *rel = ws_relative(ws, path, err);
	if (!rel) {
		errno = EINVAL;
		return -1;
	}
	int fd = ws_openat(ws, rel, flags);
	int e = errno;
	free(rel);
	if (fd < 0) {
		ws_errno_msg(err, e, path);
		errno = e;
	}
	return fd;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One directory of a walk: dfd (owned: closed here) holds the entries of
 * path (relative to the root; "" for the root). */
static int walk_dir(int dfd, struct buf *path, int depth, workspace_walk_fn fn, void *arg)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0; /* unreadable: skipped */
	}
	struct strlist names = {0};
	int rc = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (strlist_add(&names, de->d_name) < 0) {
			rc = -1;
			goto out;
		}
	}
	if (names.n > 1)
		qsort(names.items, names.n, sizeof *names.items, cmp_name);
	size_t base = path->len;
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.items[i];
		struct stat st;
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		path->len = base;
		if (buf_printf(path, "%s%s", base ? "/" : "", name) < 0) {
			rc = -1;
			break;
		}
		struct workspace_entry e = {
			.path = path->data, .name = name, .dirfd = dirfd(d),
			.type = st.st_mode & S_IFMT, .size = st.st_size, .depth = depth,
		};
		int r = fn(arg, &e);
		if (r < 0 || r == WORKSPACE_WALK_STOP) {
			rc = r < 0 ? -1 : 1;
			break;
		}
		if (r == WORKSPACE_WALK_SKIP || !S_ISDIR(st.st_mode) ||
		    depth >= WORKSPACE_WALK_DEPTH)
			continue;
		int sub = openat(dirfd(d), name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			rc = walk_dir(sub, path, depth + 1, fn, arg);
	}
	path->len = base;
	if (path->data)
		path->data[base] = '\0';
out:
	strlist_free(&names);
	closedir(d);
	return rc;
}

int workspace_walk(const struct workspace *ws, const char *dir, workspace_walk_fn fn,
		   void *arg, struct buf *err)
{
	if (!dir || !*dir)
		dir = ".";
	char *rel = ws_relative(ws, dir, err);
	if (!rel) {
		errno = EINVAL;
		return -1;
	}
	int dfd = ws_openat(ws, rel, O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		int e = errno;
		if (e == ENOTDIR) {
			struct stat st;
			int f = ws_openat(ws, rel, O_PATH);
			if (f >= 0 && fstat(f, &st) == 0 && !S_ISDIR(st.st_mode))
				ws_msg(err, "not a directory", dir);
			else
				ws_errno_msg(err, e, dir);
			if (f >= 0)
				close(f);
		} else {
			ws_errno_msg(err, e, dir);
		}
		free(rel);
		errno = e;
		return -1;
	}
	struct buf path = {0};
	int rc = buf_puts(&path, strcmp(rel, ".") ? rel : "");
	free(rel);
	if (rc < 0) {
		close(dfd);
		buf_free(&path);
		ws_errno_msg(err, ENOMEM, dir);
		errno = ENOMEM;
		return -1;
	}
	rc = walk_dir(dfd, &path, 1, fn, arg);
	buf_free(&path);
	if (rc < 0) {
		ws_errno_msg(err, ENOMEM, dir);
		errno = ENOMEM;
	}
	return rc;
}
