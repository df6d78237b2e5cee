/* The floor of the warm walk, for scripts/bench (not a test): the least a
 * FUSE file system on this machine's libfuse can do per file. It serves a
 * copy of a directory tree read-only, from a table made at start (no
 * system call to answer a lookup, an attribute or a listing), with the
 * kernel told to cache everything for an hour and keep file pages across
 * opens and directory listings, and with the same request loop as
 * skillfs (libfuse's threads, one shared descriptor). A warm walk through it still costs one OPEN and
 * one RELEASE a file, each a round trip to the daemon: what skillfs's walk
 * is compared with besides the source tree.
 *
 *   bench_fuse_floor SOURCE_DIR MOUNTPOINT     (stays in the foreground;
 *                                              FLOOR_DEBUG=1: libfuse -d) */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_SECONDS 3600.0

struct node {
	char *path;        /* in the source tree */
	const char *name;  /* its last component */
	struct stat st;
	fuse_ino_t parent;
	fuse_ino_t *kids;  /* sorted by name once the table is made */
	size_t nkids, cap;
};

/* The table: node i has inode i + 1 (the root is FUSE_ROOT_ID). Made
 * before the loop starts and only read after. */
static struct node *nodes;
static size_t nnodes, capnodes;

static struct node *node_of(fuse_ino_t ino)
{
	return ino >= 1 && ino <= nnodes ? &nodes[ino - 1] : NULL;
}

/* The directories on the way down while the table is made. */
static fuse_ino_t stack[PATH_MAX / 2];

static int add_node(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)type;
	if (nnodes == capnodes) {
		size_t cap = capnodes ? capnodes * 2 : 1024;
		struct node *p = realloc(nodes, cap * sizeof *p);
		if (!p)
			return -1;
		nodes = p;
		capnodes = cap;
	}
	struct node *n = &nodes[nnodes];
	memset(n, 0, sizeof *n);
	if (!(n->path = strdup(path)))
		return -1;
	n->name = n->path + ftw->base;
	n->st = *st;
	fuse_ino_t ino = ++nnodes;
	if (ftw->level > 0) {
		n->parent = stack[ftw->level - 1];
		struct node *p = node_of(n->parent);
		if (p->nkids == p->cap) {
			size_t cap = p->cap ? p->cap * 2 : 8;
			fuse_ino_t *k = realloc(p->kids, cap * sizeof *k);
			if (!k)
				return -1;
			p->kids = k;
			p->cap = cap;
		}
		p->kids[p->nkids++] = ino;
	}
	if (S_ISDIR(st->st_mode) && (size_t)ftw->level < sizeof stack / sizeof *stack)
		stack[ftw->level] = ino;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(node_of(*(const fuse_ino_t *)a)->name, node_of(*(const fuse_ino_t *)b)->name);
}

static void fill_entry(struct fuse_entry_param *e, fuse_ino_t ino)
{
	memset(e, 0, sizeof *e);
	e->ino = ino;
	e->attr = node_of(ino)->st;
	e->attr.st_ino = ino;
	e->attr_timeout = CACHE_SECONDS;
	e->entry_timeout = CACHE_SECONDS;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct node *p = node_of(parent);
	size_t lo = 0, hi = p ? p->nkids : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, node_of(p->kids[mid])->name);
		if (c == 0) {
			struct fuse_entry_param e;
			fill_entry(&e, p->kids[mid]);
			fuse_reply_entry(req, &e);
			return;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	fuse_reply_err(req, ENOENT);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st = n->st;
	st.st_ino = ino;
	fuse_reply_attr(req, &st, CACHE_SECONDS);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

/* ENOSYS once: no OPENDIR round trip, and the kernel keeps listings. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	struct node *n = node_of(ino);
	char *buf = malloc(size ? size : 1);
	int fd = n && buf ? open(n->path, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t got = fd >= 0 ? pread(fd, buf, size, off) : -1;
	int err = errno;
	if (fd >= 0)
		close(fd);
	if (got < 0)
		fuse_reply_err(req, n && buf ? err : ENOMEM);
	else
		fuse_reply_buf(req, buf, (size_t)got);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct node *d = node_of(ino);
	char *buf = malloc(size);
	if (!d || !buf) {
		free(buf);
		fuse_reply_err(req, d ? ENOMEM : ENOENT);
		return;
	}
	size_t used = 0;
	for (size_t i = (size_t)off; i < d->nkids; i++) {
		struct node *k = node_of(d->kids[i]);
		struct stat st = { .st_ino = d->kids[i], .st_mode = k->st.st_mode };
		size_t len = fuse_add_direntry(req, buf + used, size - used, k->name, &st,
					       (off_t)i + 1);
		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = op_lookup,
	.getattr = op_getattr,
	.open = op_open,
	.read = op_read,
	.opendir = op_opendir,
	.readdir = op_readdir,
};

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s SOURCE_DIR MOUNTPOINT\n", argv[0]);
		return 2;
	}
	if (nftw(argv[1], add_node, 64, FTW_PHYS) != 0 || !nnodes) {
		fprintf(stderr, "bench_fuse_floor: cannot read %s\n", argv[1]);
		return 1;
	}
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].nkids > 1)
			qsort(nodes[i].kids, nodes[i].nkids, sizeof *nodes[i].kids, by_name);
	char *fargs[] = { argv[0], "-o", "ro,default_permissions,fsname=floor", "-d" };
	struct fuse_args args = FUSE_ARGS_INIT(getenv("FLOOR_DEBUG") ? 4 : 3, fargs);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
	if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[2]) != 0) {
		fprintf(stderr, "bench_fuse_floor: cannot mount %s\n", argv[2]);
		return 1;
	}
	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	int rc = 1;
	if (loop) {
		fuse_loop_cfg_set_max_threads(loop, 16);
		fuse_loop_cfg_set_idle_threads(loop, 16);
		fuse_loop_cfg_set_clone_fd(loop, 0);
		rc = fuse_session_loop_mt(se, loop) == 0 ? 0 : 1;
		fuse_loop_cfg_destroy(loop);
	}
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return rc;
}
