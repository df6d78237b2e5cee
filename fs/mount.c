#define FUSE_USE_VERSION 312

#include "mount.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodes.h"
#include "view.h"

/* Cache lifetimes (DESIGN.md D7): files of skills and configurations only
 * change when the disk does, and are then invalidated explicitly. */
#define STATIC_TIMEOUT 3600.0

struct mount {
	struct engine *engine;
	struct fuse_session *se;
	struct nodes nodes;
	const char *mountpoint;
	uid_t uid;
	gid_t gid;
	volatile int stopping;
};

static struct mount *M(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_stat(const struct mount *m, uint64_t ino, const struct view_attr *a,
		      struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = (a->type == VIEW_DIR ? S_IFDIR : S_IFREG) | a->perm;
	st->st_nlink = a->type == VIEW_DIR ? 2 : 1;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_atim = st->st_mtim = st->st_ctim = a->mtime;
}

static double timeout_of(const struct view_attr *a)
{
	return a->cache == VIEW_STATIC ? STATIC_TIMEOUT : 0.0;
}

/* The path of a (parent, name) pair. Returns 0 or a negative errno. */
static int child_path(struct mount *m, fuse_ino_t parent, const char *name, char *buf,
		      size_t size, char *parent_path, size_t psize)
{
	int rc = nodes_path(&m->nodes, parent, parent_path, psize);
	if (rc < 0)
		return rc;
	int w = parent_path[0] ? snprintf(buf, size, "%s/%s", parent_path, name)
			       : snprintf(buf, size, "%s", name);
	return w < 0 || (size_t)w >= size ? -ENAMETOOLONG : 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount *m = M(req);
	char path[4096], ppath[4096];
	int rc = child_path(m, parent, name, path, sizeof path, ppath, sizeof ppath);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct snapshot *s = engine_snapshot(m->engine);
	struct view_attr a;
	rc = view_getattr(s, path, &a);
	snapshot_unref(s);
	if (rc < 0) {
		/* Negative entries are never cached: a file that appears later
		 * (a new skill, a run's result) is seen at once. */
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.ino = nodes_lookup(&m->nodes, parent, ppath, name);
	if (!e.ino) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fill_stat(m, e.ino, &a, &e.attr);
	e.attr_timeout = e.entry_timeout = timeout_of(&a);
	if (fuse_reply_entry(req, &e) != 0)
		nodes_forget(&m->nodes, e.ino, 1);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	nodes_forget(&M(req)->nodes, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		nodes_forget(&M(req)->nodes, f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct mount *m = M(req);
	char path[4096];
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	struct view_attr a;
	if (rc == 0) {
		struct snapshot *s = engine_snapshot(m->engine);
		rc = view_getattr(s, path, &a);
		snapshot_unref(s);
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct stat st;
	fill_stat(m, ino, &a, &st);
	fuse_reply_attr(req, &st, timeout_of(&a));
}

/* No open round trip (D7): answering ENOSYS once turns OPEN and OPENDIR off
 * for the connection; the kernel then keeps file and directory caches
 * until we invalidate them. */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)fi;
	struct mount *m = M(req);
	char path[4096];
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct snapshot *s = engine_snapshot(m->engine);
	ssize_t n = view_read(s, path, (uint64_t)off, size, buf);
	snapshot_unref(s);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct mount *m = M(req);
	char path[4096];
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	struct view_dirent *ents = NULL;
	size_t n = 0;
	struct snapshot *s = engine_snapshot(m->engine);
	if (rc == 0)
		rc = view_readdir(s, path, &ents, &n);
	if (rc < 0) {
		snapshot_unref(s);
		fuse_reply_err(req, -rc);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		snapshot_unref(s);
		view_dirents_free(ents, n);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	/* Offsets: 1 = ".", 2 = "..", 2 + i + 1 = entry i. */
	for (size_t i = (size_t)off; i < n + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : ents[i - 2].name;
		struct stat st;
		memset(&st, 0, sizeof st);
		size_t need;
		if (!plus || i < 2) {
			st.st_ino = i == 0 ? ino : 1; /* ".." (a zero inode hides it) */
			st.st_mode = (i < 2 || ents[i - 2].type == VIEW_DIR) ? S_IFDIR : S_IFREG;
			if (!plus) {
				need = fuse_add_direntry(req, buf + used, size - used, name, &st,
							 (off_t)i + 1);
			} else {
				struct fuse_entry_param e = { .attr = st };
				need = fuse_add_direntry_plus(req, buf + used, size - used, name,
							      &e, (off_t)i + 1);
			}
			if (need > size - used)
				break;
			used += need;
			continue;
		}
		char cpath[4096];
		struct view_attr a;
		int w = path[0] ? snprintf(cpath, sizeof cpath, "%s/%s", path, name)
				: snprintf(cpath, sizeof cpath, "%s", name);
		if (w < 0 || (size_t)w >= sizeof cpath || view_getattr(s, cpath, &a) < 0)
			continue;
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		/* Measure first: an entry that does not fit must not count as
		 * a lookup. */
		need = fuse_add_direntry_plus(req, NULL, 0, name, &e, (off_t)i + 1);
		if (need > size - used)
			break;
		e.ino = nodes_lookup(&m->nodes, ino, path, name);
		if (!e.ino)
			break;
		fill_stat(m, e.ino, &a, &e.attr);
		e.attr_timeout = e.entry_timeout = timeout_of(&a);
		used += fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
					       (off_t)i + 1);
	}
	snapshot_unref(s);
	view_dirents_free(ents, n);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Everything outside runs/ is read-only: refuse, never pretend. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)attr;
	(void)to_set;
	(void)fi;
	fuse_reply_err(req, EACCES);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	(void)buf;
	(void)size;
	(void)off;
	(void)fi;
	fuse_reply_err(req, EACCES);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent;
	(void)name;
	(void)mode;
	fuse_reply_err(req, EACCES);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	(void)parent;
	(void)name;
	(void)mode;
	(void)rdev;
	fuse_reply_err(req, EACCES);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent;
	(void)name;
	(void)mode;
	(void)fi;
	fuse_reply_err(req, EACCES);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent;
	(void)name;
	fuse_reply_err(req, EACCES);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	(void)parent;
	(void)name;
	(void)newparent;
	(void)newname;
	(void)flags;
	fuse_reply_err(req, EACCES);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	fuse_reply_err(req, EACCES);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	fuse_reply_err(req, EACCES);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* Synchronous reads: a read that waits (runs/<id>/wait) must not take
	 * one of the kernel's few background request slots. */
	conn->want &= ~FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.open = op_open,
	.opendir = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.mkdir = op_mkdir,
	.mknod = op_mknod,
	.create = op_create,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.rename = op_rename,
	.link = op_link,
	.symlink = op_symlink,
	.statfs = op_statfs,
};

/* ---- invalidation after changes on disk ---- */

static bool entry_changed(const struct catalog_entry *a, const struct catalog_entry *b)
{
	if (!a || !b)
		return a != b;
	if (a->skill != b->skill || a->trust != b->trust || a->disabled != b->disabled ||
	    a->source != b->source || a->nref_subs != b->nref_subs ||
	    a->is_referenced_sub != b->is_referenced_sub || a->warnings.n != b->warnings.n)
		return true;
	for (size_t i = 0; i < a->warnings.n; i++)
		if (strcmp(a->warnings.items[i], b->warnings.items[i]) != 0)
			return true;
	return false;
}

static bool catalog_names_changed(const struct catalog *a, const struct catalog *b)
{
	if (a->n != b->n)
		return true;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->entries[i].skill->name, b->entries[i].skill->name) != 0)
			return true;
	return false;
}

static void invalidate(struct mount *m, const struct node_ref *r)
{
	const char *slash = strrchr(r->path, '/');
	const char *name = slash ? slash + 1 : r->path;
	fuse_lowlevel_notify_inval_entry(m->se, r->parent, name, strlen(name));
	fuse_lowlevel_notify_inval_inode(m->se, r->ino, 0, 0);
}

static void on_change(void *ctx, const struct snapshot *old, const struct snapshot *now)
{
	struct mount *m = ctx;
	if (m->stopping)
		return;
	bool config_changed = old->cfg != now->cfg || (old->config_error == NULL) !=
							      (now->config_error == NULL);
	bool names_changed = catalog_names_changed(old->catalog, now->catalog);
	bool any_skill_changed = names_changed;
	struct node_ref *refs;
	size_t n;
	if (nodes_snapshot(&m->nodes, &refs, &n) < 0)
		return;
	/* Which skills changed, decided once per skill name. */
	for (size_t i = 0; i < now->catalog->n && !any_skill_changed; i++) {
		const struct catalog_entry *b = &now->catalog->entries[i];
		any_skill_changed = entry_changed(catalog_find(old->catalog, b->skill->name), b);
	}
	if (names_changed || config_changed)
		fuse_lowlevel_notify_inval_inode(m->se, 1, 0, 0);
	for (size_t i = 0; i < n; i++) {
		const char *p = refs[i].path, *name;
		size_t len;
		bool hit = false;
		if (strcmp(p, "skills") == 0) {
			hit = names_changed;
		} else if (strcmp(p, "tools") == 0) {
			hit = config_changed;
		} else if (strncmp(p, "configs", 7) == 0 && (p[7] == '\0' || p[7] == '/')) {
			hit = config_changed || any_skill_changed;
		} else if (view_skill_of(p, &name, &len)) {
			char nm[256];
			if (len < sizeof nm) {
				memcpy(nm, name, len);
				nm[len] = '\0';
				hit = config_changed || entry_changed(catalog_find(old->catalog, nm),
								      catalog_find(now->catalog, nm));
			}
		}
		if (hit)
			invalidate(m, &refs[i]);
	}
	nodes_refs_free(refs, n);
}

/* ---- signals and the loop ---- */

static void *signal_main(void *arg)
{
	struct mount *m = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	int sig = 0;
	sigwait(&set, &sig);
	if (sig == SIGUSR1)
		return NULL; /* the loop ended on its own (unmounted) */
	m->stopping = 1;
	fuse_session_exit(m->se);
	/* libfuse 3.14 does not wake a loop blocked in read(): send it one
	 * request of our own so a worker sees the exit flag. */
	char wake[4096];
	if (snprintf(wake, sizeof wake, "%s/.skillfs-stop", m->mountpoint) < (int)sizeof wake) {
		struct stat st;
		stat(wake, &st);
	}
	return NULL;
}

int mount_run(struct engine *e, const struct mount_options *opt)
{
	struct mount m;
	memset(&m, 0, sizeof m);
	m.engine = e;
	m.mountpoint = opt->mountpoint;
	m.uid = getuid();
	m.gid = getgid();
	if (nodes_init(&m.nodes) < 0) {
		fprintf(stderr, "skillfs: out of memory\n");
		return 1;
	}

	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char optstr[4096];
	snprintf(optstr, sizeof optstr, "default_permissions,fsname=skillfs,subtype=skillfs%s%s",
		 opt->fuse_opts ? "," : "", opt->fuse_opts ? opt->fuse_opts : "");
	if (fuse_opt_add_arg(&args, "skillfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, optstr) || (opt->debug && fuse_opt_add_arg(&args, "-d"))) {
		fprintf(stderr, "skillfs: out of memory\n");
		nodes_destroy(&m.nodes);
		return 1;
	}
	int status = 1;
	m.se = fuse_session_new(&args, &ops, sizeof ops, &m);
	fuse_opt_free_args(&args);
	if (!m.se)
		goto out_nodes;
	if (fuse_session_mount(m.se, opt->mountpoint) != 0)
		goto out_session;
	if (fuse_daemonize(opt->foreground) != 0)
		goto out_unmount;

	/* Threads start only now: daemonising forks. Signals go to one thread. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	signal(SIGPIPE, SIG_IGN);
	pthread_t sig_thread;
	if (pthread_create(&sig_thread, NULL, signal_main, &m) != 0) {
		fprintf(stderr, "skillfs: cannot start the signal thread\n");
		goto out_unmount;
	}
	if (engine_watch(e, on_change, &m) < 0)
		fprintf(stderr, "skillfs: warning: not following changes on disk: %s\n",
			strerror(errno));

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc) {
		fprintf(stderr, "skillfs: out of memory\n");
		status = 1;
	} else {
		fuse_loop_cfg_set_max_threads(lc, 16);
		status = fuse_session_loop_mt(m.se, lc) == 0 ? 0 : 1;
		fuse_loop_cfg_destroy(lc);
	}
	m.stopping = 1;
	engine_unwatch(e);
	pthread_kill(sig_thread, SIGUSR1);
	pthread_join(sig_thread, NULL);
out_unmount:
	fuse_session_unmount(m.se);
out_session:
	fuse_session_destroy(m.se);
out_nodes:
	nodes_destroy(&m.nodes);
	return status;
}
