/* mount: the FUSE low-level operations over core/ (see mount.h).
 *
 * One file past 1,200 lines: the operations share the mount's state (the
 * inode table, pending replies, pollers, the notifier) and the rules of
 * when a reply may be sent and from which thread; they are kept together
 * so those rules are read in one place. */
#define FUSE_USE_VERSION 312

#include "mount.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mountinfo.h"
#include "mountopts.h"
#include "service.h"
#include "nodes.h"
#include "runs.h"
#include "statelock.h"
#include "view.h"

/* Cache lifetimes (DESIGN.md D7): files of skills and configurations only
 * change when the disk does, and are then invalidated explicitly. */
#define STATIC_TIMEOUT 3600.0

/* Request threads at most (libfuse makes them as requests wait, and keeps
 * them). Waits on runs/<id>/wait hold none; each request that waits on the
 * store or on a render holds one until it is answered. */
#define MOUNT_THREADS_MAX 16

/* What the run manager hands back to wait_done: it owns it until it
 * calls wait_done, or until runs_wait_cancel takes the wait back. */
struct wait_ticket {
	struct mount *m;
	uint64_t key;
};

/* A read of runs/<id>/wait, answered when the run settles (files under
 * runs/ are direct I/O, so the read reaches us whatever the size). */
struct wait_req {
	uint64_t key;    /* ours, passed to runs_wait and the interrupt hook */
	uint64_t handle; /* the run manager's; 0 until registered with it */
	bool interrupted; /* before it was registered */
	struct wait_ticket *ticket;
	fuse_req_t req;
	size_t size;
	off_t off;
	struct wait_req *next;
};

/* A poll() on runs/<id>/status waiting for the run to settle. */
struct poll_req {
	char id[RUN_ID_MAX + 1];
	struct fuse_pollhandle *ph;
	struct poll_req *next;
};

/* A run change waiting to be turned into kernel invalidations. */
struct run_note {
	char id[RUN_ID_MAX + 1];
	unsigned what; /* enum run_change_what bits */
	struct run_note *next;
};

/* A directory's listing kept between the READDIR requests that read it:
 * one too big for a reply takes several, and listing it again for each
 * made `ls` of n entries cost O(n^2). */
#define LISTINGS_KEPT 8
struct listing {
	fuse_ino_t ino; /* 0: free */
	uint32_t gen;   /* which listing of ino: the high half of its offsets */
	struct view_dirent *ents;
	size_t n;
	uint64_t used; /* when last read, for eviction */
};

struct mount {
	struct engine *engine;
	struct runs *runs;
	struct fuse_session *se;
	struct nodes nodes;
	const char *mountpoint;
	char *mountpoint_real; /* resolved before mounting: how mountinfo names it */
	long mount_id;         /* ours in /proc/self/mountinfo; 0: unknown */
	uid_t uid;
	gid_t gid;
	volatile int stopping;
	pthread_t loop_thread; /* the one in fuse_session_loop */
	int loop_done;         /* atomic: the loop has returned */
	int stop_told;         /* atomic: STOPPING=1 was sent (service.h) */

	pthread_mutex_t wait_lock; /* guards waits, polls, next_key */
	struct wait_req *waits;
	struct poll_req *polls;
	uint64_t next_key;

	/* Invalidations are sent from their own thread: sending one from a
	 * request handler can deadlock on a page the request holds. */
	pthread_mutex_t note_lock;
	pthread_cond_t note_cond;
	struct run_note *notes, **notes_tail;
	bool notes_stop;
	pthread_t note_thread;
	bool note_thread_started;

	/* Files open under runs/: freed at release, or at exit for those
	 * still open then. opens_lock guards the list (each open's bytes
	 * have their own lock, struct run_open). */
	pthread_mutex_t opens_lock;
	struct run_open *opens;
	/* Listings being read, see do_readdir; listing_lock guards the
	 * table and the counters below (a listing taken out of it is its
	 * taker's alone until it is put back). */
	pthread_mutex_t listing_lock;
	struct listing listings[LISTINGS_KEPT];
	uint64_t listing_clock;  /* counts READDIRs: struct listing.used */
	uint32_t listing_gen;    /* the last listing's struct listing.gen */
	uint64_t listings_taken; /* for the stats */
};

static struct mount *M(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* A file directly in a run directory (runs/<id>/<name>). */
struct run_ref {
	char path[4096];
	char id[RUN_ID_MAX + 1];
	const char *name; /* inside path */
};

/* What an open file under runs/<id>/ has read: its bytes, rendered once
 * and kept while the run does not change, so a reader paging through a
 * long transcript gets one consistent copy and the daemon renders it once
 * instead of once per read. */
struct run_open {
	pthread_mutex_t lock; /* guards data, len, have and changed: two
				 threads may read one open at once */
	char *data;
	size_t len;
	bool have;
	struct timespec changed; /* the run's change time they were made at */
	uint64_t writer;         /* runs_open_writer's ticket, 0: none */
	char held[RUN_ID_MAX + 1]; /* the run it holds (runs_hold); "": none */
	pid_t opener;            /* who opened it, for a writer's FLUSH */
	struct run_open *prev, *next; /* mount.opens */
};

/* Whether inode ino is a run file (and the run store is open); fills ref. */
static bool run_file_of(struct mount *m, fuse_ino_t ino, struct run_ref *ref)
{
	return m->runs && nodes_path(&m->nodes, ino, ref->path, sizeof ref->path) == 0 &&
	       view_run_file(ref->path, ref->id, sizeof ref->id, &ref->name);
}

static void fill_stat(const struct mount *m, uint64_t ino, const struct view_attr *a,
		      struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = (a->type == VIEW_DIR ? S_IFDIR : S_IFREG) | a->perm;
	st->st_nlink = a->type == VIEW_DIR ? 2 : 1;
	/* A run and its files are its owner's; the kernel checks the modes
	 * against them (default_permissions). */
	st->st_uid = a->owned ? a->uid : m->uid;
	st->st_gid = a->owned ? a->gid : m->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_atim = st->st_mtim = st->st_ctim = a->mtime;
}

static double timeout_of(const struct view_attr *a)
{
	return a->cache == VIEW_STATIC ? STATIC_TIMEOUT : 0.0;
}

/* Fills the timeouts of an entry reply: a name that cannot vanish while
 * its directory exists is cached even when its attributes are not (rmdir
 * of a run drops the kernel's entries with it). */
static void set_timeouts(struct fuse_entry_param *e, const struct view_attr *a)
{
	e->attr_timeout = timeout_of(a);
	e->entry_timeout = a->name_stable ? STATIC_TIMEOUT : e->attr_timeout;
}

/* Whether the caller of req may reach into path when it is a run's
 * directory or anything in it (runs/<id>, runs/<id>/...): the run manager
 * decides (runs_access). The kernel checks the same through the modes
 * (default_permissions); this holds even where it would not. Returns 0
 * (also for any other path, and for no such run: the view says ENOENT) or
 * -EACCES. */
static int run_access(struct mount *m, fuse_req_t req, const char *path)
{
	char id[RUN_ID_MAX + 1];
	if (!m->runs || strncmp(path, "runs/", 5) != 0)
		return 0;
	if (!view_run_of(path, id, sizeof id)) {
		const char *p = path + 5;
		if (strchr(p, '/') || strlen(p) >= sizeof id || strcmp(p, "new") == 0)
			return 0;
		memcpy(id, p, strlen(p) + 1);
	}
	return runs_access(m->runs, id, fuse_req_ctx(req)->uid) == -EACCES ? -EACCES : 0;
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

/* The attributes of path in the current snapshot: 0 or a negative errno. */
static int attr_of(struct mount *m, const char *path, struct view_attr *a)
{
	struct snapshot *s = engine_snapshot(m->engine);
	int rc = view_getattr(s, path, a);
	snapshot_unref(s);
	return rc;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount *m = M(req);
	char path[4096], ppath[4096];
	int rc = child_path(m, parent, name, path, sizeof path, ppath, sizeof ppath);
	if (rc == 0)
		rc = run_access(m, req, ppath);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct view_attr a;
	rc = attr_of(m, path, &a);
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
	set_timeouts(&e, &a);
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

static void start_wait(struct mount *m, fuse_req_t req, const char *id, size_t size, off_t off);

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct mount *m = M(req);
	char path[4096];
	struct view_attr a;
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	if (rc == 0)
		rc = attr_of(m, path, &a);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct stat st;
	fill_stat(m, ino, &a, &st);
	fuse_reply_attr(req, &st, timeout_of(&a));
}


/* Skill and configuration files: cached by the kernel until we invalidate
 * them (keep_cache), no FLUSH on close, and a write open is refused here.
 * Run files: direct I/O, so every read sees the run as it is now and a
 * `wait` read can block whatever the size said. A prompt opened for
 * writing starts its run at its opener's close (FLUSH) or at the release
 * of its last writer (op_flush). */
static void run_open_end(struct mount *m, fuse_ino_t ino, struct run_open *ro);

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = M(req);
	char path[4096];
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (strncmp(path, "runs/", 5) == 0) {
		/* O_TRUNC arrives here (atomic_o_trunc), not as a SETATTR. */
		char id[RUN_ID_MAX + 1];
		const char *name;
		rc = run_access(m, req, path);
		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		/* A file that cannot be written now cannot be opened to
		 * write either (root passes default_permissions). */
		bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
		if (writing || (fi->flags & O_TRUNC)) {
			/* runs_truncate checks as runs_writable does. */
			if (!m->runs || !view_run_file(path, id, sizeof id, &name))
				rc = -EACCES;
			else if (fi->flags & O_TRUNC)
				rc = runs_truncate(m->runs, id, name, 0);
			else
				rc = runs_writable(m->runs, id, name);
			if (rc < 0) {
				fuse_reply_err(req, -rc);
				return;
			}
		}
		fi->direct_io = 1;
		fi->keep_cache = 0;
		/* A distinct handle per open (poll needs one), holding what
		 * reads of a run's file render (run_open). */
		struct run_open *ro = calloc(1, sizeof *ro);
		if (!ro) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		pthread_mutex_init(&ro->lock, NULL);
		if ((fi->flags & O_ACCMODE) != O_RDONLY && m->runs &&
		    view_run_file(path, id, sizeof id, &name))
			ro->writer = runs_open_writer(m->runs, id, name);
		/* A writer's FLUSH can start the run (runs_close_writer). */
		fi->noflush = !ro->writer;
		ro->opener = fuse_req_ctx(req)->pid;
		/* runs.keep leaves a run alone while a file of it is open. */
		if (m->runs && view_run_of(path, ro->held, sizeof ro->held))
			runs_hold(m->runs, ro->held, true);
		pthread_mutex_lock(&m->opens_lock);
		ro->next = m->opens;
		if (m->opens)
			m->opens->prev = ro;
		m->opens = ro;
		pthread_mutex_unlock(&m->opens_lock);
		fi->fh = (uintptr_t)ro;
	} else {
		if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
			fuse_reply_err(req, EACCES);
			return;
		}
		/* A file that grows while read (audit): every read reaches us,
		 * whatever size the kernel last saw. */
		fi->direct_io = view_direct_io(path);
		fi->keep_cache = !fi->direct_io;
		fi->noflush = 1;
	}
	/* Not delivered (the opener was interrupted): no RELEASE will come. */
	if (fuse_reply_open(req, fi) != 0 && fi->fh)
		run_open_end(m, ino, (struct run_open *)(uintptr_t)fi->fh);
}

/* Directories need no open round trip: answering ENOSYS once turns
 * OPENDIR off for the connection and lets the kernel cache listings until
 * we invalidate them (D7). */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}


/* Answers a read of size bytes at off from data[0..len). */
static void reply_range(fuse_req_t req, const char *data, size_t len, size_t size, off_t off)
{
	if ((size_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, data + off, len - (size_t)off < size ? len - (size_t)off : size);
}

/* Answers a read of an open under runs/ from its bytes (rc: 0, or the
 * negative errno to answer with), and lets go of its lock: what is sent
 * is copied first, since once a reply is out the reader may close and
 * the RELEASE free ro, and another read of the same open may make its
 * bytes anew. */
static void reply_open_range(fuse_req_t req, struct run_open *ro, int rc, size_t size, off_t off)
{
	char *copy = NULL;
	size_t n = 0;
	if (rc == 0 && (size_t)off < ro->len) {
		n = ro->len - (size_t)off < size ? ro->len - (size_t)off : size;
		copy = malloc(n);
		if (copy)
			memcpy(copy, ro->data + off, n);
		else
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&ro->lock);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, copy, n);
	free(copy);
}

static void read_run_file(struct mount *m, fuse_req_t req, struct run_open *ro,
			  const char *path, const char *id, size_t size, off_t off)
{
	pthread_mutex_lock(&ro->lock);
	struct timespec changed;
	int rc = runs_changed_at(m->runs, id, &changed);
	if (rc == 0 && (!ro->have || changed.tv_sec != ro->changed.tv_sec ||
			changed.tv_nsec != ro->changed.tv_nsec)) {
		/* The change time is taken first: a change that lands while
		 * rendering only makes the next read render again. */
		char *data;
		size_t len;
		struct snapshot *s = engine_snapshot(m->engine);
		rc = view_read_all(s, path, &data, &len);
		snapshot_unref(s);
		if (rc == 0) {
			free(ro->data);
			ro->data = data;
			ro->len = len;
			ro->have = true;
			ro->changed = changed;
		}
	}
	reply_open_range(req, ro, rc, size, off);
}

/* runs/new: one fresh id per open, kept for that open's reads, so each
 * `cat runs/new` gets its own and a reader reading twice sees one. */
static void read_new_id(struct mount *m, fuse_req_t req, struct run_open *ro, size_t size,
			off_t off)
{
	pthread_mutex_lock(&ro->lock);
	int rc = 0;
	if (!ro->have) {
		struct snapshot *s = engine_snapshot(m->engine);
		rc = view_read_all(s, "runs/new", &ro->data, &ro->len);
		snapshot_unref(s);
		ro->have = rc == 0;
	}
	reply_open_range(req, ro, rc, size, off);
}

static void run_open_free(struct mount *m, struct run_open *ro)
{
	pthread_mutex_lock(&m->opens_lock);
	if (ro->prev)
		ro->prev->next = ro->next;
	else
		m->opens = ro->next;
	if (ro->next)
		ro->next->prev = ro->prev;
	pthread_mutex_unlock(&m->opens_lock);
	pthread_mutex_destroy(&ro->lock);
	free(ro->data);
	free(ro);
}

/* The last close of an open under runs/: a writer's may start the run. */
static void run_open_end(struct mount *m, fuse_ino_t ino, struct run_open *ro)
{
	struct run_ref ref;
	if (ro->writer && run_file_of(m, ino, &ref))
		runs_close_writer(m->runs, ref.id, ref.name, ro->writer, true);
	if (ro->held[0])
		runs_hold(m->runs, ro->held, false);
	run_open_free(m, ro);
}

/* A close of a descriptor. The opener's close of a prompt it alone has
 * open starts the run before close() returns (queued and stored when the
 * shell's `echo > prompt` is done); the close of a copy by another process
 * (each command of `{ echo; cat; } > prompt`) does not: the last release
 * does, then. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = M(req);
	struct run_open *ro = (struct run_open *)(uintptr_t)fi->fh;
	struct run_ref ref;
	int rc = 0;
	/* A run the store could not take fails the close with why (EAGAIN
	 * for a database locked elsewhere, ENOSPC...): the run stays
	 * created, and writing the prompt again starts it. */
	if (ro && ro->writer && fuse_req_ctx(req)->pid == ro->opener && run_file_of(m, ino, &ref))
		rc = runs_close_writer(m->runs, ref.id, ref.name, ro->writer, false);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct run_open *ro = (struct run_open *)(uintptr_t)fi->fh;
	if (ro)
		run_open_end(M(req), ino, ro);
	fuse_reply_err(req, 0);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct mount *m = M(req);
	char path[4096];
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	char id[RUN_ID_MAX + 1];
	const char *name;
	if (m->runs && view_run_file(path, id, sizeof id, &name) && strcmp(name, "wait") == 0) {
		start_wait(m, req, id, size, off);
		return;
	}
	struct run_open *ro = (struct run_open *)(uintptr_t)fi->fh;
	if (ro && m->runs && view_run_of(path, id, sizeof id)) {
		read_run_file(m, req, ro, path, id, size, off);
		return;
	}
	if (ro && strcmp(path, "runs/new") == 0) {
		read_new_id(m, req, ro, size, off);
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

static void listing_drop(struct listing *l)
{
	view_dirents_free(l->ents, l->n);
	*l = (struct listing){ 0 };
}

/* A directory offset names the listing it comes from and a place in it:
 * two readers of one directory (opendir is off: the kernel sends no
 * handle) each go on in their own listing, even when one starts over
 * after a change. Place 1 = after ".", 2 = after "..", 2 + i + 1 = after
 * entry i. Kept below 2^63 (off_t). */
static off_t listing_offset(const struct listing *l, size_t place)
{
	return (off_t)(((uint64_t)l->gen << 32) | (uint64_t)place);
}

/* Takes the listing of ino for a READDIR at off out of the table into
 * *l: afresh at offset 0 (an opendir or a rewinddir: it shows what is
 * there now), else the one the offset names, or a fresh one when that was
 * evicted. Out of the table it is the caller's alone (listing_put gives it
 * back), and no lock is held while the directory is listed. *place: where
 * in it to go on. Returns 0 or a negative errno. */
static int listing_take(struct mount *m, fuse_ino_t ino, const char *path, struct snapshot *s,
			off_t off, struct listing *l, size_t *place)
{
	uint32_t gen = (uint32_t)((uint64_t)off >> 32);
	*place = (size_t)((uint64_t)off & 0xffffffffu);
	bool found = false;
	pthread_mutex_lock(&m->listing_lock);
	for (size_t i = 0; off != 0 && !found && i < LISTINGS_KEPT; i++) {
		struct listing *c = &m->listings[i];
		if (c->ino == ino && c->gen == gen) {
			*l = *c;
			*c = (struct listing){ 0 };
			found = true;
		}
	}
	pthread_mutex_unlock(&m->listing_lock);
	if (found)
		return 0;
	struct view_dirent *ents = NULL;
	size_t n = 0;
	int rc = view_readdir(s, path, &ents, &n);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&m->listing_lock);
	m->listing_gen = (m->listing_gen + 1) & 0x7fffffffu;
	if (!m->listing_gen)
		m->listing_gen = 1;
	*l = (struct listing){ .ino = ino, .gen = m->listing_gen, .ents = ents, .n = n };
	m->listings_taken++;
	pthread_mutex_unlock(&m->listing_lock);
	return 0;
}

/* Gives a listing from listing_take back for the READDIRs that go on in
 * it (the least recently read of LISTINGS_KEPT goes), or drops it when it
 * was read to its end: nothing more will be asked of it. */
static void listing_put(struct mount *m, struct listing *l, bool done)
{
	if (done) {
		listing_drop(l);
		return;
	}
	pthread_mutex_lock(&m->listing_lock);
	struct listing *oldest = &m->listings[0];
	for (size_t i = 1; i < LISTINGS_KEPT; i++)
		if (m->listings[i].used < oldest->used)
			oldest = &m->listings[i];
	listing_drop(oldest);
	*oldest = *l;
	oldest->used = ++m->listing_clock;
	pthread_mutex_unlock(&m->listing_lock);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct mount *m = M(req);
	char path[4096];
	int rc = nodes_path(&m->nodes, ino, path, sizeof path);
	if (rc == 0)
		rc = run_access(m, req, path);
	struct snapshot *s = engine_snapshot(m->engine);
	size_t place = 0;
	struct listing taken = { 0 };
	if (rc == 0)
		rc = listing_take(m, ino, path, s, off, &taken, &place);
	if (rc < 0) {
		snapshot_unref(s);
		fuse_reply_err(req, -rc);
		return;
	}
	struct listing *l = &taken;
	const struct view_dirent *ents = l->ents;
	size_t n = l->n;
	char *buf = malloc(size);
	if (!buf) {
		snapshot_unref(s);
		listing_put(m, l, false);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	for (size_t i = place; i < n + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : ents[i - 2].name;
		struct stat st;
		memset(&st, 0, sizeof st);
		size_t need;
		if (!plus || i < 2) {
			st.st_ino = i == 0 ? ino : 1; /* ".." (a zero inode hides it) */
			st.st_mode = (i < 2 || ents[i - 2].type == VIEW_DIR) ? S_IFDIR : S_IFREG;
			if (!plus) {
				need = fuse_add_direntry(req, buf + used, size - used, name, &st,
							 listing_offset(l, i + 1));
			} else {
				struct fuse_entry_param e = { .attr = st };
				need = fuse_add_direntry_plus(req, buf + used, size - used, name,
							      &e, listing_offset(l, i + 1));
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
		need = fuse_add_direntry_plus(req, NULL, 0, name, &e, listing_offset(l, i + 1));
		if (need > size - used)
			break;
		e.ino = nodes_lookup(&m->nodes, ino, path, name);
		if (!e.ino)
			break;
		fill_stat(m, e.ino, &a, &e.attr);
		set_timeouts(&e, &a);
		used += fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
					       listing_offset(l, i + 1));
	}
	snapshot_unref(s);
	listing_put(m, l, place >= n + 2);
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

/* ---- runs/<id>/wait: a read answered when the run settles (D8) ---- */

static void reply_status(fuse_req_t req, const char *status, size_t size, off_t off)
{
	char text[64];
	int n = snprintf(text, sizeof text, "%s\n", status);
	reply_range(req, text, n < 0 ? 0 : (size_t)n, size, off);
}

static struct wait_req *wait_take(struct mount *m, uint64_t key)
{
	for (struct wait_req **pp = &m->waits; *pp; pp = &(*pp)->next) {
		if ((*pp)->key == key) {
			struct wait_req *w = *pp;
			*pp = w->next;
			return w;
		}
	}
	return NULL;
}

/* From the run manager (a worker thread, or shutdown). */
static void wait_done(void *arg, int err, const char *status)
{
	struct wait_ticket *t = arg;
	struct mount *m = t->m;
	uint64_t key = t->key;
	free(t);
	pthread_mutex_lock(&m->wait_lock);
	struct wait_req *w = wait_take(m, key);
	pthread_mutex_unlock(&m->wait_lock);
	if (!w)
		return;
	if (err)
		fuse_reply_err(w->req, err);
	else
		reply_status(w->req, status, w->size, w->off);
	free(w);
}

/* The reader was interrupted (a signal): release it at once. */
static void wait_interrupted(fuse_req_t req, void *data)
{
	(void)req;
	struct mount *m = fuse_req_userdata(req);
	uint64_t key = (uint64_t)(uintptr_t)data;
	pthread_mutex_lock(&m->wait_lock);
	struct wait_req *w = NULL;
	for (struct wait_req *p = m->waits; p; p = p->next)
		if (p->key == key)
			w = p;
	if (w && !w->handle) {
		w->interrupted = true; /* start_wait answers it */
		w = NULL;
	} else if (w && runs_wait_cancel(m->runs, w->handle)) {
		w = wait_take(m, key);
	} else {
		w = NULL; /* wait_done has it */
	}
	pthread_mutex_unlock(&m->wait_lock);
	if (w) {
		fuse_reply_err(w->req, EINTR);
		free(w->ticket); /* cancelled: the run manager will not call back */
		free(w);
	}
}

static void start_wait(struct mount *m, fuse_req_t req, const char *id, size_t size, off_t off)
{
	struct wait_req *w = calloc(1, sizeof *w);
	struct wait_ticket *t = calloc(1, sizeof *t);
	if (!w || !t) {
		free(w);
		free(t);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->req = req;
	w->size = size;
	w->off = off;
	pthread_mutex_lock(&m->wait_lock);
	w->key = ++m->next_key;
	w->next = m->waits;
	m->waits = w;
	t->m = m;
	t->key = w->key;
	w->ticket = t;
	pthread_mutex_unlock(&m->wait_lock);
	/* Before the run manager knows the request: once it does, a worker
	 * may answer it, which frees it, at any moment. An interrupt that
	 * came already calls wait_interrupted now, which marks w. */
	fuse_req_interrupt_func(req, wait_interrupted, (void *)(uintptr_t)w->key);
	char status[64];
	uint64_t handle = 0;
	pthread_mutex_lock(&m->wait_lock);
	/* Registered under wait_lock: wait_done blocks on it until w->handle
	 * is set. */
	int rc = w->interrupted ? -EINTR
				: runs_wait(m->runs, id, wait_done, t, status, sizeof status, &handle);
	w->handle = handle;
	if (rc != 1)
		wait_take(m, w->key);
	pthread_mutex_unlock(&m->wait_lock);
	if (rc == 1)
		return;
	free(t);
	free(w);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_status(req, status, size, off);
}

/* ---- poll() on runs/<id>/status ---- */

static void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		    struct fuse_pollhandle *ph)
{
	(void)fi;
	struct mount *m = M(req);
	struct run_ref ref;
	const char *id = ref.id;
	unsigned revents = POLLIN | POLLRDNORM;
	enum runstate st;
	if (ph && run_file_of(m, ino, &ref) && strcmp(ref.name, "status") == 0 &&
	    runs_state(m->runs, id, &st) == 0 && !runstate_is_settled(st)) {
		/* Not settled: no event until the run's state changes. */
		struct poll_req *p = calloc(1, sizeof *p);
		if (p) {
			snprintf(p->id, sizeof p->id, "%s", id);
			p->ph = ph;
			pthread_mutex_lock(&m->wait_lock);
			p->next = m->polls;
			m->polls = p;
			pthread_mutex_unlock(&m->wait_lock);
			ph = NULL;
			revents = 0;
		}
	}
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, revents);
}

/* Wakes pollers of run id (or all, id NULL) so the kernel polls again. */
static void wake_pollers(struct mount *m, const char *id)
{
	struct poll_req *woken = NULL;
	pthread_mutex_lock(&m->wait_lock);
	for (struct poll_req **pp = &m->polls; *pp;) {
		struct poll_req *p = *pp;
		if (!id || strcmp(p->id, id) == 0) {
			*pp = p->next;
			p->next = woken;
			woken = p;
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&m->wait_lock);
	while (woken) {
		struct poll_req *next = woken->next;
		if (!m->stopping)
			fuse_lowlevel_notify_poll(woken->ph);
		fuse_pollhandle_destroy(woken->ph);
		free(woken);
		woken = next;
	}
}

/* Drops what the kernel caches of run id and wakes its pollers. Files
 * under runs/ have timeout 0 and direct_io, so the kernel keeps nothing of
 * them; only the listings of the directories that changed are cached. */
static void apply_run_note(struct mount *m, const char *id, unsigned what)
{
	char path[4096];
	uint64_t runs_ino = nodes_find(&m->nodes, "runs");
	if ((what & (RUN_CHANGED_CREATED | RUN_CHANGED_REMOVED)) && runs_ino)
		fuse_lowlevel_notify_inval_inode(m->se, runs_ino, 0, 0);
	/* A run just made by mkdir: the kernel has its directory's attributes
	 * from that reply, and it has no sub-agents yet. */
	static const char *const dirs[] = { "", "/subagents" };
	for (size_t i = 0; !(what & RUN_CHANGED_CREATED) && i < sizeof dirs / sizeof *dirs; i++) {
		snprintf(path, sizeof path, "runs/%s%s", id, dirs[i]);
		uint64_t ino = nodes_find(&m->nodes, path);
		if (ino)
			fuse_lowlevel_notify_inval_inode(m->se, ino, 0, 0);
	}
	/* Each sub-agent's directory (its result comes with its end). */
	struct node_ref *refs = NULL;
	size_t nrefs = 0;
	snprintf(path, sizeof path, "runs/%s/subagents", id);
	if ((what & RUN_CHANGED_SUBAGENTS) && nodes_subtree(&m->nodes, path, 1, &refs, &nrefs) == 0) {
		for (size_t i = 1; i < nrefs; i++) /* [0] is subagents/ itself */
			fuse_lowlevel_notify_inval_inode(m->se, refs[i].ino, 0, 0);
		nodes_refs_free(refs, nrefs);
	}
	if ((what & RUN_CHANGED_REMOVED) && runs_ino)
		fuse_lowlevel_notify_inval_entry(m->se, runs_ino, id, strlen(id));
	if (what & (RUN_CHANGED_STATE | RUN_CHANGED_REMOVED))
		wake_pollers(m, id);
}

static void *note_main(void *arg)
{
	struct mount *m = arg;
	pthread_mutex_lock(&m->note_lock);
	for (;;) {
		while (!m->notes && !m->notes_stop)
			pthread_cond_wait(&m->note_cond, &m->note_lock);
		if (!m->notes)
			break;
		struct run_note *n = m->notes;
		m->notes = n->next;
		if (!m->notes)
			m->notes_tail = &m->notes;
		pthread_mutex_unlock(&m->note_lock);
		if (!m->stopping)
			apply_run_note(m, n->id, n->what);
		free(n);
		pthread_mutex_lock(&m->note_lock);
	}
	pthread_mutex_unlock(&m->note_lock);
	return NULL;
}

/* The run manager says run id changed (possibly from inside a request
 * handler): queue it for the notifier thread. */
static void on_run_change(void *arg, const char *id, unsigned what)
{
	struct mount *m = arg;
	if (m->stopping)
		return;
	if (what & RUN_CHANGED_NOW) {
		/* A worker's: never a request handler, which must not wait on
		 * the kernel for its own inodes. */
		apply_run_note(m, id, what);
		return;
	}
	struct run_note *n = calloc(1, sizeof *n);
	if (!n)
		return; /* out of memory: listings stay as they were until the next change */
	snprintf(n->id, sizeof n->id, "%s", id);
	n->what = what;
	pthread_mutex_lock(&m->note_lock);
	*m->notes_tail = n;
	m->notes_tail = &n->next;
	pthread_cond_signal(&m->note_cond);
	pthread_mutex_unlock(&m->note_lock);
}

static void notes_stop(struct mount *m)
{
	if (!m->note_thread_started)
		return;
	pthread_mutex_lock(&m->note_lock);
	m->notes_stop = true;
	pthread_cond_signal(&m->note_cond);
	pthread_mutex_unlock(&m->note_lock);
	pthread_join(m->note_thread, NULL);
	m->note_thread_started = false;
}

/* Everything outside runs/ is read-only: refuse, never pretend. Inside a
 * run, only its writable files take writes; the run manager validates
 * them at once (D9). */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct mount *m = M(req);
	struct run_ref ref;
	int rc = run_file_of(m, ino, &ref) ? run_access(m, req, ref.path) : -EACCES;
	if (rc == 0 && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = -EACCES;
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		rc = runs_truncate(m->runs, ref.id, ref.name, attr->st_size);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* Times on a writable run file (touch) are accepted and not kept. */
	op_getattr(req, ino, NULL);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)fi;
	struct mount *m = M(req);
	struct run_ref ref;
	ssize_t rc = run_file_of(m, ino, &ref) ? runs_write(m->runs, ref.id, ref.name, buf, size, off)
					       : -EACCES;
	if (rc < 0)
		fuse_reply_err(req, (int)-rc);
	else
		fuse_reply_write(req, (size_t)rc);
}

/* The parent directory is runs/: the only place a directory can be made
 * or removed. */
static bool in_runs_dir(struct mount *m, fuse_ino_t parent)
{
	char path[4096];
	return m->runs && nodes_path(&m->nodes, parent, path, sizeof path) == 0 &&
	       strcmp(path, "runs") == 0;
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)mode;
	struct mount *m = M(req);
	if (!in_runs_dir(m, parent)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	/* The run is its maker's (runs_set_allow_other). */
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int rc = runs_create(m->runs, name, ctx->uid, ctx->gid);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	op_lookup(req, parent, name);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount *m = M(req);
	if (!in_runs_dir(m, parent)) {
		fuse_reply_err(req, EACCES);
		return;
	}
	int rc = runs_remove(m->runs, name, fuse_req_ctx(req)->uid);
	char path[4096], ppath[4096];
	/* The kernel keeps the removed directory dead: a run made again under
	 * its name needs a new inode. */
	if (rc == 0 && child_path(m, parent, name, path, sizeof path, ppath, sizeof ppath) == 0)
		nodes_unlink(&m->nodes, path);
	fuse_reply_err(req, rc < 0 ? -rc : 0);
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
	.opendir = op_opendir,
	.read = op_read,
	.release = op_release,
	.flush = op_flush,
	.write = op_write,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.mkdir = op_mkdir,
	.mknod = op_mknod,
	.create = op_create,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.poll = op_poll,
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
	return a->skill != b->skill || a->trust != b->trust || a->disabled != b->disabled ||
	       a->source != b->source || a->nref_subs != b->nref_subs ||
	       a->is_referenced_sub != b->is_referenced_sub ||
	       !strlist_equal(&a->warnings, &b->warnings);
}

/* Into names (sorted), each skill whose catalogue entry differs between
 * old and now, and whether a name came or went: an update's delta as it
 * is, else both catalogues walked side by side (each sorted by name).
 * Returns 0 or -1 (ENOMEM). */
static int changed_skills(const struct snapshot *old, const struct snapshot *now,
			  struct strlist *names, bool *names_changed)
{
	const struct catalog *a = old->catalog, *b = now->catalog;
	if (b->delta.base == a) {
		*names_changed = b->delta.names_changed;
		return strlist_extend(names, &b->delta.names);
	}
	*names_changed = false;
	for (size_t i = 0, k = 0; i < a->n || k < b->n;) {
		const struct catalog_entry *x = i < a->n ? &a->entries[i] : NULL;
		const struct catalog_entry *y = k < b->n ? &b->entries[k] : NULL;
		int c = !x ? 1 : !y ? -1 : strcmp(x->skill->name, y->skill->name);
		i += c <= 0;
		k += c >= 0;
		*names_changed |= c != 0;
		if ((c != 0 || entry_changed(x, y)) &&
		    strlist_add(names, c <= 0 ? x->skill->name : y->skill->name) < 0)
			return -1;
	}
	return 0;
}

/* Whether the skill named name[0..len) is in names (changed_skills). */
static bool skill_changed(const struct strlist *names, const char *name, size_t len)
{
	char nm[256];
	if (len >= sizeof nm)
		return false;
	memcpy(nm, name, len);
	nm[len] = '\0';
	return strlist_sorted_has(names, nm);
}

static void invalidate(struct mount *m, const struct node_ref *r)
{
	const char *slash = strrchr(r->path, '/');
	const char *name = slash ? slash + 1 : r->path;
	fuse_lowlevel_notify_inval_entry(m->se, r->parent, name, strlen(name));
	fuse_lowlevel_notify_inval_inode(m->se, r->ino, 0, 0);
}

/* Prints the warnings of now that old did not have. */
static void log_new_warnings(const struct strlist *old, const struct strlist *now)
{
	for (size_t i = 0; i < now->n; i++)
		if (!strlist_has(old, now->items[i]))
			fprintf(stderr, "skillfs: warning: %s\n", now->items[i]);
}

/* The daemon's log (stderr) says when an edit of the config file is
 * refused, when the config is taken again after that, and the warnings
 * an edit brings; the mount shows them in configs/ as well. */
static void log_change(const struct snapshot *old, const struct snapshot *now)
{
	if (now->config_error &&
	    (!old->config_error || strcmp(old->config_error, now->config_error) != 0))
		fprintf(stderr, "skillfs: the config file was not reloaded (the last good one "
				"stays in use): %s\n",
			now->config_error);
	else if (!now->config_error && old->config_error)
		fprintf(stderr, "skillfs: the config file was reloaded\n");
	if (old->cfg != now->cfg)
		log_new_warnings(&snapshot_config(old)->warnings, &snapshot_config(now)->warnings);
	log_new_warnings(&old->catalog->warnings, &now->catalog->warnings);
}

/* Invalidates what the kernel knows of the paths below path (depth
 * levels down) for which hit says so (NULL: all of them), in
 * O(what is below path). */
static void invalidate_below(struct mount *m, const char *path, unsigned depth,
			     bool (*hit)(const char *path, const struct strlist *changed),
			     const struct strlist *changed)
{
	struct node_ref *refs;
	size_t n;
	if (nodes_subtree(&m->nodes, path, depth, &refs, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (!hit || hit(refs[i].path, changed))
			invalidate(m, &refs[i]);
	nodes_refs_free(refs, n);
}

/* Under configs/, when skills changed: a skill's gate directory follows
 * that skill; every other file follows any change (the catalogue's
 * warnings, the resolutions). */
static bool configs_hit(const char *p, const struct strlist *changed)
{
	const char *name;
	size_t len;
	return !view_gate_skill_of(p, &name, &len) || skill_changed(changed, name, len);
}

/* After a new snapshot: drops what the kernel caches of what it changed,
 * found through the nodes below skills/<name> of each changed skill (all
 * of skills/ when the config changed), tools and configs/. */
static void on_change(void *ctx, const struct snapshot *old, const struct snapshot *now)
{
	struct mount *m = ctx;
	if (m->stopping)
		return;
	log_change(old, now);
	/* A config broken in a new way changes configs/ERROR's text. */
	bool config_changed = old->cfg != now->cfg ||
			      (old->config_error == NULL) != (now->config_error == NULL) ||
			      (old->config_error &&
			       strcmp(old->config_error, now->config_error) != 0);
	struct strlist changed = { 0 };
	bool names_changed;
	if (changed_skills(old, now, &changed, &names_changed) < 0) {
		/* out of memory: whatever the kernel holds, it may all be old */
		strlist_free(&changed);
		config_changed = names_changed = true;
	}
	/* The catalogue-wide warnings show in every configuration's. */
	bool any_skill_changed = changed.n ||
				 !strlist_equal(&old->catalog->warnings, &now->catalog->warnings);
	char path[4096];
	if (names_changed || config_changed)
		fuse_lowlevel_notify_inval_inode(m->se, 1, 0, 0);
	if (names_changed)
		invalidate_below(m, "skills", 0, NULL, &changed);
	if (config_changed) {
		invalidate_below(m, "tools", 0, NULL, &changed);
		invalidate_below(m, "skills", UINT_MAX, NULL, &changed);
	}
	for (size_t i = 0; !config_changed && i < changed.n; i++)
		if (snprintf(path, sizeof path, "skills/%s", changed.items[i]) < (int)sizeof path)
			invalidate_below(m, path, UINT_MAX, NULL, &changed);
	if (config_changed || any_skill_changed)
		invalidate_below(m, "configs", UINT_MAX, config_changed ? NULL : configs_hit,
				 &changed);
	strlist_free(&changed);
}

/* ---- signals and the loop ---- */

/* How long the workers get to end their step at a stop. */
#define STOP_WORKERS_MS 1500

/* Sends the session one request of our own, so a worker blocked in read()
 * sees the exit flag (libfuse 3.14 does not wake the loop). Detached: if
 * the loop has already ended, the request fails when the connection goes. */
static void *wake_main(void *arg)
{
	struct stat st;
	stat(arg, &st);
	free(arg);
	return NULL;
}

/* Begins the stop (D10): every pending wait is answered with EINTR now,
 * while the mount still serves (a wait read later gets EINTR at once), the
 * workers are told to stop (a model or tool call in flight is killed, and
 * its run stays resumable), and the loop is told to end. */
static void begin_stop(struct mount *m)
{
	service_stopping(&m->stop_told);
	m->stopping = 1;
	runs_stop(m->runs);
	fuse_session_exit(m->se);
	char *wake = NULL;
	pthread_t t;
	pthread_attr_t attr;
	if (asprintf(&wake, "%s/.skillfs-stop", m->mountpoint) < 0)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, wake_main, wake) != 0)
		free(wake);
	pthread_attr_destroy(&attr);
}

/* How often the signal thread looks whether the mount went away. */
#define UNMOUNT_CHECK_MS 200
/* How long the loop gets to end after a stop before its read() of the
 * device is interrupted (SIGUSR2): after a lazy unmount no request of
 * ours reaches it, and one that a process still using the mount sends
 * may never come. */
#define LOOP_KICK_MS 500

static void on_kick(int sig)
{
	(void)sig; /* only interrupts the loop's read() (no SA_RESTART) */
}

/* After begin_stop: waits for the loop to end, interrupting its read()
 * when it does not within LOOP_KICK_MS, until it ends (SIGUSR1 from
 * mount_run, which the loop's end leads to). */
static void kick_loop(struct mount *m, sigset_t *set)
{
	for (;;) {
		struct timespec t = { LOOP_KICK_MS / 1000, (LOOP_KICK_MS % 1000) * 1000000L };
		int sig = sigtimedwait(set, NULL, &t);
		if (sig == SIGUSR1)
			return;
		if (sig < 0 && !__atomic_load_n(&m->loop_done, __ATOMIC_ACQUIRE))
			pthread_kill(m->loop_thread, SIGUSR2);
	}
}

static void *signal_main(void *arg)
{
	struct mount *m = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	for (;;) {
		struct timespec tick = { 0, UNMOUNT_CHECK_MS * 1000000L };
		int sig = sigtimedwait(&set, NULL, m->mount_id > 0 ? &tick : NULL);
		if (sig == SIGUSR1)
			return NULL; /* the loop ended on its own (unmounted) */
		if (sig == SIGHUP) {
			if (!m->stopping)
				service_reload(m->engine);
			continue;
		}
		if (sig > 0) {
			begin_stop(m);
			kick_loop(m, &set);
			return NULL;
		}
		/* A lazy unmount with files still open (readers blocked in
		 * wait) ends no loop by itself: it is seen here. */
		if (m->mount_id > 0 && !mountinfo_has(m->mount_id)) {
			fprintf(stderr, "skillfs: %s was unmounted: stopping\n", m->mountpoint);
			begin_stop(m);
			kick_loop(m, &set);
			return NULL;
		}
	}
}

/* Whether the mount options opts (comma separated, or NULL) hold option
 * name, split and unescaped as libfuse does. */
static bool has_option(const char *opts, const char *name)
{
	char tok[64];
	bool over;
	for (const char *p = opts; mountopts_next(&p, tok, sizeof tok, &over);)
		if (!over && strcmp(tok, name) == 0)
			return true;
	return false;
}

int mount_run(struct engine *e, const struct mount_options *opt)
{
	struct mount m;
	memset(&m, 0, sizeof m);
	m.engine = e;
	m.mountpoint = opt->mountpoint;
	m.uid = getuid();
	m.gid = getgid();
	pthread_mutex_init(&m.wait_lock, NULL);
	pthread_mutex_init(&m.note_lock, NULL);
	pthread_mutex_init(&m.opens_lock, NULL);
	pthread_mutex_init(&m.listing_lock, NULL);
	pthread_cond_init(&m.note_cond, NULL);
	m.notes_tail = &m.notes;
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
	/* One daemon per state database: its lock is taken before anything
	 * else and kept until we exit (the descriptor crosses the fork of
	 * daemonising). Then the database must open and migrate before we
	 * detach (errors are still seen), but nothing runs yet: SQLite
	 * connections do not cross fork(), and neither do threads. The run
	 * manager opens it for use, loads the runs and starts the workers
	 * only once the mount is up. */
	char *err = NULL;
	int state_lock = runs_lock_state(e, opt->state_path, &err);
	if (state_lock < 0 || runs_check_store(e, opt->state_path, &err) < 0) {
		fprintf(stderr, "skillfs: %s\n", err ? err : "cannot open the run database");
		free(err);
		statelock_release(state_lock);
		fuse_opt_free_args(&args);
		nodes_destroy(&m.nodes);
		return 1;
	}
	m.se = fuse_session_new(&args, &ops, sizeof ops, &m);
	fuse_opt_free_args(&args);
	if (!m.se)
		goto out_nodes;
	/* Resolved now: once mounted, a lookup of the mount point would wait
	 * for the loop. */
	m.mountpoint_real = realpath(opt->mountpoint, NULL);
	if (fuse_session_mount(m.se, opt->mountpoint) != 0)
		goto out_session;
	if (m.mountpoint_real)
		m.mount_id = mountinfo_fuse_at(m.mountpoint_real);
	if (fuse_daemonize(opt->foreground) != 0)
		goto out_unmount;
	statelock_note_owner(state_lock);

	/* Threads start only now: daemonising forks. Signals go to one thread. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	/* SIGUSR2 interrupts the loop's read() (kick_loop): blocked in every
	 * other thread, which inherit this mask. */
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction kick = { .sa_handler = on_kick }; /* no SA_RESTART */
	sigemptyset(&kick.sa_mask);
	sigaction(SIGUSR2, &kick, NULL);
	m.loop_thread = pthread_self();
	pthread_t sig_thread;
	if (pthread_create(&sig_thread, NULL, signal_main, &m) != 0) {
		fprintf(stderr, "skillfs: cannot start the signal thread\n");
		goto out_unmount;
	}
	pthread_setname_np(sig_thread, "skillfs-signals");
	if (runs_attach(e, opt->state_path, &err) < 0) {
		fprintf(stderr, "skillfs: %s\n", err ? err : "cannot open the run database");
		free(err);
		m.stopping = 1;
		pthread_kill(sig_thread, SIGUSR1);
		pthread_join(sig_thread, NULL);
		goto out_unmount;
	}
	m.runs = engine_runs(e);
	/* Other users reach the mount with allow_other, and with allow_root
	 * (libfuse mounts it allow_other and turns away all but root and us):
	 * each run is then its maker's alone. */
	runs_set_allow_other(m.runs, has_option(opt->fuse_opts, "allow_other") ||
					     has_option(opt->fuse_opts, "allow_root"));
	if (pthread_create(&m.note_thread, NULL, note_main, &m) == 0) {
		pthread_setname_np(m.note_thread, "skillfs-notes");
		m.note_thread_started = true;
	}
	runs_set_change_fn(m.runs, on_run_change, &m);
	if (engine_watch(e, on_change, &m) < 0)
		fprintf(stderr, "skillfs: warning: not following changes on disk: %s\n",
			strerror(errno));

	/* A pool of request threads: a request that has to wait (the store
	 * locked by another process, a large run file read from the store, a
	 * skill's file read from a slow disk) holds one thread, not the
	 * mount. A wait read holds none (it is answered later). Threads are
	 * kept once made, so a walk finds one warm. libfuse's threads block
	 * every signal: SIGUSR2 (kick_loop) reaches this thread, whose wait
	 * for the loop's end it interrupts, and the loop then ends its
	 * threads. */
	sigset_t kickset;
	sigemptyset(&kickset);
	sigaddset(&kickset, SIGUSR2);
	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	if (!loop) {
		fprintf(stderr, "skillfs: out of memory\n");
		status = 1;
	} else {
		fuse_loop_cfg_set_max_threads(loop, MOUNT_THREADS_MAX);
		fuse_loop_cfg_set_idle_threads(loop, MOUNT_THREADS_MAX);
		fuse_loop_cfg_set_clone_fd(loop, 0);
		pthread_sigmask(SIG_UNBLOCK, &kickset, NULL);
		service_ready_when_answering(opt->mountpoint);
		status = fuse_session_loop_mt(m.se, loop) == 0 ? 0 : 1;
		pthread_sigmask(SIG_BLOCK, &kickset, NULL);
		fuse_loop_cfg_destroy(loop);
	}
	__atomic_store_n(&m.loop_done, 1, __ATOMIC_RELEASE);
	service_stopping(&m.stop_told);
	m.stopping = 1;
	/* The signal thread goes first: seeing the mount gone, it would
	 * begin a stop of the run manager that runs_detach_within frees. */
	pthread_kill(sig_thread, SIGUSR1);
	pthread_join(sig_thread, NULL);
	engine_unwatch(e);
	/* Workers end their current step, a model or tool call in flight
	 * being killed; runs stay resumable. One that does not end in time
	 * (D10: the daemon exits within 2 s) is left behind: the process
	 * exits under it, which SQLite takes as a crash (nothing committed
	 * is lost), without freeing what it still uses. */
	if (!runs_detach_within(e, STOP_WORKERS_MS)) {
		fprintf(stderr, "skillfs: a run worker did not stop within %d ms: exiting "
			"without it (its run resumes at the next mount)\n", STOP_WORKERS_MS);
		fuse_session_unmount(m.se);
		fflush(NULL);
		_exit(status);
	}
	notes_stop(&m);
	wake_pollers(&m, NULL);
	/* Files still open when the loop ended get no release. */
	while (m.opens)
		run_open_free(&m, m.opens);
	for (size_t i = 0; i < LISTINGS_KEPT; i++)
		listing_drop(&m.listings[i]);
	if (opt->listings)
		*opt->listings = m.listings_taken;
out_unmount:
	fuse_session_unmount(m.se);
out_session:
	fuse_session_destroy(m.se);
out_nodes:
	nodes_destroy(&m.nodes);
	free(m.mountpoint_real);
	statelock_release(state_lock);
	return status;
}
