/* watcher: the inotify watcher (see watcher.h). One thread reads the
 * events, gathers each burst of them, works out which directories changed
 * and has the host reload with them; then it watches what the new
 * catalogue brought. The directories the inotify watch limit keeps
 * unwatched (watchlimit.h) are looked at again every watch.rescan_seconds
 * on the same thread, and their watches tried again (rescan). */
#include "watcher.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "discover.h"
#include "watchlimit.h"

/* What a watched directory is to us (a directory can be several). */
enum watch_role {
	WATCH_SOURCE = 1,        /* a source: skills come and go in it */
	WATCH_CONFIG_DIR = 2,    /* holds the config file (as given, or where its
	                            links lead): only that name matters, and
	                            links in the given path changing */
	WATCH_TREE = 4,          /* in a source: a skill's files, or a directory
	                            that may become a skill */
	WATCH_SOURCE_PARENT = 8, /* holds sources: only their names matter */
	WATCH_CONFIG_PATH = 16,  /* on the way to the config file, or through a
	                            link on the way: a name coming or going
	                            may be a link retargeted */
};

/* What one inotify watch descriptor watches. */
struct watch {
	int wd;
	char *path;
	size_t root_len;      /* WATCH_SOURCE, WATCH_TREE: path's first root_len
	                         bytes are the source it lies in; else 0 */
	unsigned roles;       /* enum watch_role bits */
	struct strlist names; /* WATCH_SOURCE_PARENT: the sources (paths) in it */
	uint64_t marked;      /* the burst of events that last marked it dirty */
};

struct watcher {
	struct watcher_host host;
	int inotify_fd;
	int stop_pipe[2];
	int reload_pipe[2];       /* a byte asks for watcher_reload_all */
	pthread_mutex_t asked_lock; /* guards the two counts below */
	pthread_cond_t asked_cond;
	uint64_t reloads_asked, reloads_done; /* watcher_reload_all's tickets */
	bool watcher_ended;       /* the thread returned (asked_lock) */
	pthread_t thread;
	bool thread_running;
	bool unwatching;          /* set by watcher_stop (atomic): stop early */
	struct watch *watches;    /* by descriptor; only the watcher thread uses it */
	size_t capwatches;
	uint64_t burst;           /* bursts of events read (watcher thread) */
	pthread_mutex_t warning_lock; /* guards watch_warning */
	char *watch_warning;      /* while the watch limit keeps directories
	                             unwatched: what the catalogue warns */
	bool watch_warning_new;   /* changed, not yet in a catalogue (watcher
	                             thread) */
	char *warning_path;       /* the first directory not watched, which the
	                             warning names; NULL: none */
	struct unwatched_set unwatched; /* the directories the watch limit keeps
	                                   unwatched (watcher thread) */
	bool sig_at_add;          /* a directory found unwatched is looked at
	                             at once: the catalogue is read after it */
	long rescan_seconds;      /* watch.rescan_seconds of the current config */
	uint64_t next_rescan_ms;  /* CLOCK_MONOTONIC; 0: none due */
	size_t nwatches;          /* watches held (for max_watches) */
	size_t max_watches;       /* host.max_watches, watcher_cap_watches
	                             (atomic); 0: no cap */
	bool dry;                 /* watcher_dirs_needed: count, watch nothing */
};

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | \
		    IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
/* The config file's directory only: a save ends in a close or a rename,
 * and the writes of other files there (a state database kept beside the
 * config, say) would otherwise wake the watcher on every commit. */
#define CONFIG_DIR_MASK (WATCH_MASK & ~IN_MODIFY)
/* A source's parent: only names appearing, going or changing owner or mode
 * (a source created, removed, replaced, or a symlink to it retargeted);
 * for the same reason as above, not the writes of other files there. */
#define SOURCE_PARENT_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | \
			    IN_ONLYDIR)
/* Links followed on the way to the config file when watching them. */
#define CONFIG_LINK_HOPS 8
/* The longest a burst of events is collected before it is acted on. */
#define BURST_MAX_MS 250

/* Watches are indexed by their descriptor (the kernel hands them out as
 * small increasing integers), so an event finds its watch in O(1). */
static struct watch *watch_find(struct watcher *wr, int wd)
{
	if (wd < 0 || (size_t)wd >= wr->capwatches || !wr->watches[wd].path)
		return NULL;
	return &wr->watches[wd];
}

/* Drops what we know of watch wd (the kernel has dropped the watch). */
static void watch_forget(struct watcher *wr, int wd)
{
	struct watch *w = watch_find(wr, wd);
	if (!w)
		return;
	free(w->path);
	strlist_free(&w->names);
	*w = (struct watch){ 0 };
	wr->nwatches--;
}

/* Sets the warning the catalogue shows (text NULL: none), to be put there
 * by the next reload (watch_warning_new). */
static void warning_set(struct watcher *wr, char *text)
{
	pthread_mutex_lock(&wr->warning_lock);
	char *was = wr->watch_warning;
	wr->watch_warning = text;
	pthread_mutex_unlock(&wr->warning_lock);
	free(was);
	wr->watch_warning_new = true;
}

/* The warning while the watch limit keeps directories unwatched: where
 * (the first directory refused) and how they are followed now. NULL when
 * out of memory. */
static char *warning_text(const char *path, long rescan)
{
	char *msg;
	int n = rescan > 0
			? asprintf(&msg,
				   "the inotify watch limit is reached: changes in %s (and in the "
				   "other directories not watched) are found by a rescan every "
				   "%ld s (watch.rescan_seconds) instead of at once; raise the "
				   "sysctl fs.inotify.max_user_watches",
				   path, rescan)
			: asprintf(&msg,
				   "the inotify watch limit is reached: changes in %s (and in the "
				   "other directories not watched) are not followed "
				   "(watch.rescan_seconds is 0); raise the sysctl "
				   "fs.inotify.max_user_watches, then send SIGHUP or remount",
				   path);
	return n < 0 ? NULL : msg;
}

/* Records that the inotify watch limit kept path (and so whatever lies
 * below it) from being watched: the warning, made once while directories
 * stay unwatched, joins the catalogue's warnings from the next reload on
 * (reload_and_watch). */
static void watch_limit_reached(struct watcher *wr, const char *path)
{
	if (wr->warning_path)
		return;
	char *p = strdup(path), *msg = p ? warning_text(path, wr->rescan_seconds) : NULL;
	if (!msg) {
		free(p);
		return; /* out of memory: the next directory refused tries again */
	}
	wr->warning_path = p;
	warning_set(wr, msg);
}

/* Notes that the watch limit keeps path from being watched in the given
 * roles (watch_add's arguments), merged into what is noted already. NULL
 * when out of memory. */
static struct unwatched *unwatched_note(struct unwatched_set *set, const char *path,
					size_t root_len, unsigned roles, const char *source)
{
	struct unwatched *u = unwatched_get(set, path);
	if (!u)
		return NULL;
	if ((roles & (WATCH_SOURCE | WATCH_TREE)) && (!u->root_len || root_len < u->root_len))
		u->root_len = root_len; /* in two sources: the outer one */
	u->roles |= roles;
	if ((roles & WATCH_SOURCE_PARENT) && source && !strlist_has(&u->names, source) &&
	    strlist_add(&u->names, source) < 0)
		return NULL;
	return u;
}

/* u's signature: what its directory holds (a source or a directory in
 * one) and what the sources it holds are (a source's parent). */
static uint64_t unwatched_signature(const struct unwatched *u)
{
	uint64_t h = 0;
	if (u->roles & (WATCH_SOURCE | WATCH_TREE))
		h = dir_signature(u->path);
	if (u->roles & WATCH_SOURCE_PARENT)
		h = h * 31 + paths_signature(&u->names);
	return h;
}

/* Watches directory path in the given roles; a directory given several
 * roles gets the union of their masks (IN_MASK_ADD), whatever their order.
 * root_len (WATCH_SOURCE, WATCH_TREE): the length of the source's path,
 * which begins path. source (WATCH_SOURCE_PARENT): the source in path.
 * A directory seen again under another path (moved) takes the new one.
 * Nothing is watched when path is gone; when the watch limit is reached,
 * that is recorded (watch_limit_reached) and the directory is kept among
 * the unwatched, to be rescanned. Returns 0, or -1 with errno when path
 * is not watched (ENOSPC: the limit). */
static int watch_add(struct watcher *wr, const char *path, size_t root_len, unsigned roles,
		     const char *source)
{
	if (wr->dry) {
		/* watcher_dirs_needed: each directory counted once */
		return unwatched_note(&wr->unwatched, path, root_len, roles, NULL) ? 0 : -1;
	}
	uint32_t mask = IN_MASK_ADD;
	if (roles & (WATCH_SOURCE | WATCH_TREE))
		mask |= WATCH_MASK;
	if (roles & WATCH_CONFIG_DIR)
		mask |= CONFIG_DIR_MASK;
	if (roles & (WATCH_SOURCE_PARENT | WATCH_CONFIG_PATH))
		mask |= SOURCE_PARENT_MASK;
	int wd = inotify_add_watch(wr->inotify_fd, path, mask);
	size_t max = __atomic_load_n(&wr->max_watches, __ATOMIC_RELAXED);
	if (wd >= 0 && max && wr->nwatches >= max &&
	    ((size_t)wd >= wr->capwatches || !wr->watches[wd].path)) {
		/* watcher_cap_watches: a new watch past the cap is refused as
		 * the kernel refuses one past its limit */
		inotify_rm_watch(wr->inotify_fd, wd);
		wd = -1;
		errno = ENOSPC;
	}
	if (wd < 0) {
		int err = errno;
		if (err == ENOSPC) {
			struct unwatched *u = unwatched_note(&wr->unwatched, path, root_len, roles,
							     source);
			if (u && !u->looked && wr->sig_at_add) {
				u->sig = unwatched_signature(u);
				u->looked = true;
			}
			watch_limit_reached(wr, path);
		}
		errno = err;
		return -1; /* gone already, or not a directory: nothing to follow */
	}
	struct unwatched *u = unwatched_find(&wr->unwatched, path);
	if (u)
		u->watched = true; /* a rescan looks at it once more, then drops it */
	if ((size_t)wd >= wr->capwatches) {
		size_t cap = wr->capwatches ? wr->capwatches : 64;
		while (cap <= (size_t)wd)
			cap *= 2;
		struct watch *p = realloc(wr->watches, cap * sizeof *p);
		if (!p)
			return 0; /* its events are dropped; the next refresh tries again */
		memset(p + wr->capwatches, 0, (cap - wr->capwatches) * sizeof *p);
		wr->watches = p;
		wr->capwatches = cap;
	}
	struct watch *w = &wr->watches[wd];
	bool in_source = roles & (WATCH_SOURCE | WATCH_TREE);
	if (!w->path || (in_source && strcmp(w->path, path) != 0)) {
		char *p = strdup(path);
		if (!p)
			return 0;
		if (!w->path)
			wr->nwatches++;
		free(w->path);
		*w = (struct watch){ wd, p, 0, w->roles, w->names, w->marked };
	}
	if (in_source && strcmp(w->path, path) == 0 && (!w->root_len || root_len < w->root_len))
		w->root_len = root_len; /* in two sources: the outer one */
	if ((roles & WATCH_SOURCE_PARENT) && source && !strlist_has(&w->names, source) &&
	    strlist_add(&w->names, source) < 0)
		return 0; /* out of memory: that source is not followed from here */
	w->roles |= roles;
	return 0;
}

/* Watches dir and the directories below it (not through symbolic links),
 * up to host.max_depth levels deep counting from depth, as lying in the
 * source whose path is dir's first root_len bytes. */
static void watch_tree(struct watcher *wr, const char *dir, size_t root_len, int depth)
{
	watch_add(wr, dir, root_len, WATCH_TREE, NULL);
	if (depth >= wr->host.max_depth || __atomic_load_n(&wr->unwatching, __ATOMIC_RELAXED))
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	char path[PATH_MAX];
	struct stat st;
	while ((de = readdir(d))) {
		if ((de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) ||
		    strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
			continue;
		if (de->d_type == DT_UNKNOWN && (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
			continue;
		watch_tree(wr, path, root_len, depth + 1);
	}
	closedir(d);
}

/* Whether path is dir or lies below it. */
static bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The length of the source path that begins dir (a skill's directory of
 * source index si in c), or of dir itself should it not begin with it. */
static size_t source_root_len(const struct config *c, size_t si, const char *dir)
{
	if (si < c->nsources && c->sources[si].path[0] && path_within(dir, c->sources[si].path))
		return strlen(c->sources[si].path);
	return strlen(dir);
}

/* Splits path at its last '/' into dir (at most size bytes, "/" for the
 * root) and returns the name after it. */
static const char *split_dir(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
	if (n >= size)
		n = 0;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return slash ? slash + 1 : path;
}

/* Watches every directory above path, up to the root, in roles; each is
 * given the path of its child on the way down (the name that matters in a
 * WATCH_SOURCE_PARENT). */
static void watch_ancestors(struct watcher *wr, const char *path, unsigned roles)
{
	char child[PATH_MAX], dir[PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof child)
		return;
	memcpy(child, path, len + 1);
	const char *slash;
	while ((slash = strrchr(child, '/')) && slash[1]) {
		size_t n = slash == child ? 1 : (size_t)(slash - child);
		memcpy(dir, child, n);
		dir[n] = '\0';
		watch_add(wr, dir, 0, roles, child);
		if (n == 1)
			break;
		memcpy(child, dir, n + 1);
	}
}

/* Watches what the config file's path goes through: the directories that
 * hold it as given and as last resolved (real), and every directory on
 * the way to it and through each link it passes, so that a link
 * retargeted anywhere on the way (a symlinked directory, a chain of links,
 * a ConfigMap's ..data) is seen. */
static void watch_config_path(struct watcher *wr, const char *given, const char *real)
{
	char dir[PATH_MAX];
	split_dir(given, dir, sizeof dir);
	watch_add(wr, dir, 0, WATCH_CONFIG_DIR, NULL);
	if (real) {
		split_dir(real, dir, sizeof dir);
		watch_add(wr, dir, 0, WATCH_CONFIG_DIR, NULL);
	}
	char *cur = strdup(given);
	for (int hop = 0; cur && hop < CONFIG_LINK_HOPS; hop++) {
		watch_ancestors(wr, cur, WATCH_CONFIG_PATH);
		struct stat st;
		char target[PATH_MAX];
		ssize_t n;
		if (lstat(cur, &st) < 0 || !S_ISLNK(st.st_mode) ||
		    (n = readlink(cur, target, sizeof target - 1)) < 0)
			break;
		target[n] = '\0';
		split_dir(cur, dir, sizeof dir);
		char *next = config_path_join(dir, target);
		free(cur);
		cur = next;
	}
	free(cur);
}

/* The source of c that path lies in, or -1. */
static long source_of(const struct config *c, const char *path)
{
	for (size_t i = 0; i < c->nsources; i++)
		if (path_within(path, c->sources[i].path))
			return (long)i;
	return -1;
}

/* After a burst that changed only the directories in dirty (see
 * watch_main): watches the directory of each one that lies in a plain
 * source, the tree of the skill directory it is in or is, and the
 * sources themselves. Returns false when a dirty directory lies in a
 * recursive source, where any directory can become a skill: the caller
 * then watches everything (watch_refresh). O(what changed). */
static bool watch_dirty(struct watcher *wr, const struct config *c, const struct strlist *dirty)
{
	char path[PATH_MAX];
	for (size_t i = 0; i < dirty->n; i++) {
		long si = source_of(c, dirty->items[i]);
		if (si >= 0 && c->sources[si].recursive)
			return false;
	}
	for (size_t i = 0; i < dirty->n; i++) {
		const char *d = dirty->items[i];
		long si = source_of(c, d);
		if (si < 0)
			continue;
		size_t root_len = strlen(c->sources[si].path);
		if (d[root_len] == '\0') {
			watch_add(wr, d, root_len, WATCH_SOURCE, NULL);
			continue;
		}
		/* The skill directory it is or lies in: the source's child. */
		const char *end = strchr(d + root_len + 1, '/');
		size_t n = end ? (size_t)(end - d) : strlen(d);
		if (n >= sizeof path || d[root_len + 1] == '.')
			continue;
		memcpy(path, d, n);
		path[n] = '\0';
		struct stat st;
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			watch_tree(wr, path, root_len, 0);
	}
	return true;
}

/* Adds watches for the config file's path (watch_config_path), every
 * source and its parent, and the directories of every skill of s that is
 * not also in old (all of them when old is NULL). Existing watches are
 * kept. dirty (may be NULL): only those directories changed since old,
 * and neither the config nor a source was replaced: only what lies there
 * is looked at (watch_dirty). */
static void watch_refresh(struct watcher *wr, const struct watcher_view *old,
			  const struct watcher_view *s, const struct strlist *dirty)
{
	const struct config *c = s->config;
	if (old && dirty && old->config == s->config && watch_dirty(wr, c, dirty))
		return;
	char *given, *real;
	wr->host.config_paths(wr->host.ctx, &given, &real);
	if (given)
		watch_config_path(wr, given, real);
	free(given);
	free(real);
	char path[PATH_MAX];
	for (size_t i = 0; i < c->nsources; i++) {
		const char *src = c->sources[i].path;
		size_t root_len = strlen(src);
		/* Its parent, and theirs up to the root, each for the name on
		 * the way to the source: the source (or a directory above it,
		 * a repository cloned again, say) may appear there, go, or be
		 * replaced (renamed over, a symlink retargeted), and a watch on
		 * the source itself sees none of that. */
		watch_ancestors(wr, src, WATCH_SOURCE_PARENT);
		/* The source, and each directory in it: a SKILL.md can appear in
		 * a directory that was not a skill a moment ago. */
		watch_add(wr, src, root_len, WATCH_SOURCE, NULL);
		if (c->sources[i].recursive) {
			/* Each directory its search went through (a skill can
			 * appear in any of them) and each skill directory it
			 * found, the catalogue's own trees watched below (one
			 * shadowed by a duplicate is not in it, yet may be
			 * renamed into a skill of its own). */
			static const struct discover_bounds deep = { DISCOVER_RECURSIVE_DEPTH,
								      DISCOVER_RECURSIVE_ENTRIES };
			struct discover found;
			if (discover_search(src, &deep, true, &found) < 0)
				continue; /* out of memory: the next refresh tries again */
			for (size_t k = 0; k < found.dirs.n + found.skills.n; k++) {
				const char *rel = k < found.dirs.n ? found.dirs.items[k]
								   : found.skills.items[k - found.dirs.n];
				if (snprintf(path, sizeof path, "%s/%s", src, rel) < (int)sizeof path)
					watch_add(wr, path, root_len, WATCH_TREE, NULL);
			}
			discover_free(&found);
			continue;
		}
		DIR *d = opendir(src);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.' ||
			    (de->d_type != DT_DIR && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN))
				continue;
			if (snprintf(path, sizeof path, "%s/%s", src, de->d_name) < (int)sizeof path)
				watch_add(wr, path, root_len, WATCH_TREE, NULL);
		}
		closedir(d);
	}
	for (size_t i = 0; i < s->catalog->n; i++) {
		if (__atomic_load_n(&wr->unwatching, __ATOMIC_RELAXED))
			return; /* shutting down: the watches are of no use */
		const struct catalog_entry *ce = &s->catalog->entries[i];
		const struct skill *sk = ce->skill;
		const struct catalog_entry *was = old ? catalog_find(old->catalog, sk->name) : NULL;
		if (sk->dir && (!was || was->skill != sk))
			watch_tree(wr, sk->dir, source_root_len(c, ce->source, sk->dir), 0);
	}
}

static void warning_show(struct watcher *wr);

/* Reloads (host.reload), then watches what the new catalogue brought
 * (rescan: also when the reload changed nothing, as after an event that
 * may have made a directory that is not a skill yet); when the watch limit
 * was first reached while doing so, reloads once more (the skills are
 * found unchanged) to put that warning in the catalogue, where every
 * configuration's warnings show it. */
static void reload_and_watch(struct watcher *wr, bool config_changed, const struct strlist *dirty,
			     bool rescan, enum watcher_reload how)
{
	struct watcher_view old, now;
	bool only_dirty = how == WATCHER_RELOAD_COMPLETE;
	wr->host.hold(wr->host.ctx, &old);
	wr->host.reload(wr->host.ctx, config_changed, dirty, how);
	wr->host.hold(wr->host.ctx, &now);
	/* Each catalogue is a snapshot's own: the same one, the same snapshot. */
	if (now.catalog != old.catalog || rescan)
		watch_refresh(wr, &old, &now, only_dirty && !config_changed ? dirty : NULL);
	wr->host.release(wr->host.ctx, &now);
	wr->host.release(wr->host.ctx, &old);
	warning_show(wr);
}

/* When the warning changed since the last reload, reloads to put it in the
 * catalogue (or take it out); the skills are found unchanged. */
static void warning_show(struct watcher *wr)
{
	if (!wr->watch_warning_new || __atomic_load_n(&wr->unwatching, __ATOMIC_RELAXED))
		return;
	wr->watch_warning_new = false;
	reload_and_watch(wr, false, NULL, false, WATCHER_RELOAD_DIRTY);
}

/* Takes the current config's watch.rescan_seconds; when it changed, the
 * warning that names it is made again. */
static void rescan_interval(struct watcher *wr)
{
	struct watcher_view v;
	wr->host.hold(wr->host.ctx, &v);
	long secs = v.config->watch_rescan_seconds;
	wr->host.release(wr->host.ctx, &v);
	if (secs == wr->rescan_seconds)
		return;
	wr->rescan_seconds = secs;
	wr->next_rescan_ms = 0;
	char *msg = wr->warning_path ? warning_text(wr->warning_path, secs) : NULL;
	if (msg)
		warning_set(wr, msg);
}

/* Sets up the watches, then looks at the disk again: whatever changed
 * after the first scan and before a watch was in place is found by this
 * rescan, a file below a skill's directory as well as its SKILL.md
 * (unchanged skills are reused, and a rescan that finds nothing keeps the
 * catalogue). */
static void watch_start(struct watcher *wr)
{
	struct watcher_view s;
	rescan_interval(wr);
	wr->host.hold(wr->host.ctx, &s);
	/* A directory the limit keeps unwatched now is looked at before the
	 * rescan below reads the disk: a change after that is one to it. */
	wr->sig_at_add = true;
	watch_refresh(wr, NULL, &s, NULL);
	wr->sig_at_add = false;
	wr->host.release(wr->host.ctx, &s);
	if (__atomic_load_n(&wr->unwatching, __ATOMIC_RELAXED))
		return;
	reload_and_watch(wr, wr->host.config_changed(wr->host.ctx), NULL, false,
			 WATCHER_RELOAD_CHECK);
}

/* The directories one burst of events made dirty (see catalog_build):
 * list, plus the last directory marked, to stop early on its ancestors. */
struct dirt {
	struct strlist list;
	char last[PATH_MAX];
	size_t last_len, last_root; /* last_len 0: none yet */
};

/* Marks directory path, whose first root_len bytes are its source, and
 * each directory above it, up to and including the source, dirty:
 * whichever skill owns the directory (the deepest skill directory above
 * it, or that skill's parent) is then loaded afresh, and no other.
 * Ancestors the previous mark added are not added again. Returns 0, or -1
 * when out of memory (the list is then incomplete). */
static int dirt_mark(struct dirt *d, const char *path, size_t root_len)
{
	size_t len = strlen(path);
	if (len >= sizeof d->last || root_len > len)
		return 0;
	char buf[PATH_MAX];
	memcpy(buf, path, len + 1);
	for (;;) {
		if (d->last_len && d->last_root == root_len && len <= d->last_len &&
		    memcmp(d->last, buf, len) == 0 && (d->last[len] == '/' || d->last[len] == '\0'))
			break; /* added, with what lies above it, by the previous mark */
		buf[len] = '\0';
		if (strlist_add(&d->list, buf) < 0) {
			d->last_len = 0;
			return -1;
		}
		if (len <= root_len)
			break;
		char *slash = strrchr(buf, '/');
		if (!slash)
			break;
		size_t up = slash == buf ? 1 : (size_t)(slash - buf);
		if (up < root_len)
			break;
		len = up;
	}
	memcpy(d->last, path, strlen(path) + 1);
	d->last_len = strlen(path);
	d->last_root = root_len;
	return 0;
}

/* Whether source (a path) is named name in its parent directory. */
static bool source_named(const char *source, const char *name)
{
	const char *slash = strrchr(source, '/');
	return strcmp(slash ? slash + 1 : source, name) == 0;
}

/* Whether path is one of dirs or lies below one of them. */
static bool under_any(const char *path, const struct strlist *dirs)
{
	for (size_t i = 0; i < dirs->n; i++)
		if (path_within(path, dirs->items[i]))
			return true;
	return false;
}

/* Marks every skill of the current catalogue dirty (all is set), or those
 * of the sources in or below the directories listed in replaced. Returns 0
 * or -1 (out of memory). */
static int dirt_mark_sources(struct watcher *wr, struct dirt *d, bool all,
			     const struct strlist *replaced)
{
	struct watcher_view s;
	wr->host.hold(wr->host.ctx, &s);
	const struct config *c = s.config;
	int rc = 0;
	for (size_t i = 0; i < s.catalog->n && rc == 0; i++) {
		const struct catalog_entry *ce = &s.catalog->entries[i];
		if (ce->skill->dir && (all || (ce->source < c->nsources &&
					       under_any(c->sources[ce->source].path, replaced))))
			rc = strlist_add(&d->list, ce->skill->dir);
	}
	wr->host.release(wr->host.ctx, &s);
	return rc;
}

/* Whether the config c still has u followed: its roles in or above a
 * source are kept only while a source is there, and only the names on the
 * way to a source (those of the config file's path are kept). */
static bool unwatched_needed(struct unwatched *u, const struct config *c)
{
	if ((u->roles & (WATCH_SOURCE | WATCH_TREE)) && source_of(c, u->path) < 0)
		u->roles &= ~(unsigned)(WATCH_SOURCE | WATCH_TREE);
	for (size_t k = u->names.n; k-- > 0;) {
		bool leads = false;
		for (size_t i = 0; i < c->nsources && !leads; i++)
			leads = path_within(c->sources[i].path, u->names.items[k]);
		if (!leads)
			strlist_remove(&u->names, u->names.items[k]);
	}
	if (!u->names.n)
		u->roles &= ~(unsigned)WATCH_SOURCE_PARENT;
	return u->roles != 0;
}

/* Once no directory is left unwatched: the warning goes, and the log says
 * so. */
static void all_watched(struct watcher *wr)
{
	if (wr->unwatched.n || !wr->warning_path)
		return;
	free(wr->warning_path);
	wr->warning_path = NULL;
	warning_set(wr, NULL);
	fprintf(stderr, "skillfs: every directory is watched again: the inotify watch "
			"limit no longer keeps any from being watched\n");
	warning_show(wr);
}

/* With the rescans off (watch.rescan_seconds 0): drops the directories
 * watched since (a full reload, SIGHUP's, read them again). */
static void unwatched_prune(struct watcher *wr)
{
	if (!wr->unwatched.n || wr->rescan_seconds > 0)
		return;
	for (size_t i = 0; i < wr->unwatched.n; i++)
		wr->unwatched.items[i].drop = wr->unwatched.items[i].watched;
	unwatched_compact(&wr->unwatched);
	all_watched(wr);
}

/* Looks at every directory the watch limit keeps unwatched again: tries
 * its watch again (the limit may have been raised, or watches freed), and
 * takes it as changed when what it holds is not what it held when last
 * looked at (or it was never looked at, or is gone); then reloads with
 * those directories dirty, as after a burst of events that named them.
 * A directory watched since is looked at this once more, then dropped;
 * once none is left, the warning goes. */
static void rescan(struct watcher *wr, struct dirt *dirt)
{
	bool any = false, everything = false, names_known = true;
	struct strlist replaced = { 0 }; /* sources a parent not watched may have replaced */
	memset(dirt, 0, sizeof *dirt);
	wr->next_rescan_ms = 0;
	bool config_check = false;
	struct watcher_view v;
	wr->host.hold(wr->host.ctx, &v);
	for (size_t i = 0; i < wr->unwatched.n; i++) {
		if (__atomic_load_n(&wr->unwatching, __ATOMIC_RELAXED))
			break;
		struct unwatched *u = &wr->unwatched.items[i];
		bool changed = false;
		if (!unwatched_needed(u, v.config)) {
			u->drop = true; /* the config no longer has it followed */
			continue;
		}
		if (!u->watched) {
			/* The same path again: a refusal finds this entry, adds
			 * no other, and the items stay where they are. */
			const char *first = u->names.n ? u->names.items[0] : NULL;
			int rc = watch_add(wr, u->path, u->root_len, u->roles, first);
			int err = errno;
			u = &wr->unwatched.items[i];
			for (size_t k = 1; rc == 0 && k < u->names.n; k++)
				watch_add(wr, u->path, 0, WATCH_SOURCE_PARENT, u->names.items[k]);
			if (rc < 0 && err != ENOSPC)
				u->drop = changed = true; /* gone, or no longer a directory */
		}
		if (!u->drop) {
			uint64_t sig = unwatched_signature(u);
			changed = !u->looked || sig != u->sig;
			u->sig = sig;
			u->looked = true;
			u->drop = u->watched;
		}
		if (u->roles & (WATCH_CONFIG_DIR | WATCH_CONFIG_PATH))
			config_check = true; /* the config file is looked at below */
		if (!changed)
			continue;
		if ((u->roles & (WATCH_SOURCE | WATCH_TREE)) && u->root_len) {
			any = true;
			if (dirt_mark(dirt, u->path, u->root_len) < 0)
				everything = true;
			/* The source itself: which names came or went in it is
			 * not known, so the catalogue is built afresh (skills
			 * whose files did not change are reused). */
			if (u->roles & WATCH_SOURCE)
				names_known = false;
		}
		for (size_t k = 0; (u->roles & WATCH_SOURCE_PARENT) && k < u->names.n; k++) {
			any = true;
			if (!strlist_has(&replaced, u->names.items[k]) &&
			    strlist_add(&replaced, u->names.items[k]) < 0)
				everything = true;
		}
	}
	wr->host.release(wr->host.ctx, &v);
	unwatched_compact(&wr->unwatched);
	bool config_changed = config_check && wr->host.config_changed(wr->host.ctx);
	any |= config_changed;
	if (any && (everything || replaced.n) &&
	    dirt_mark_sources(wr, dirt, everything, &replaced) < 0) {
		/* out of memory: a skill whose SKILL.md is unchanged is reused */
	}
	if (any && !__atomic_load_n(&wr->unwatching, __ATOMIC_RELAXED))
		reload_and_watch(wr, config_changed, &dirt->list, true,
				 names_known && !everything && replaced.n == 0
					 ? WATCHER_RELOAD_COMPLETE
					 : WATCHER_RELOAD_DIRTY);
	strlist_free(&replaced);
	strlist_free(&dirt->list);
	all_watched(wr);
}

/* poll's timeout until the next rescan: -1 when none is due (no directory
 * is unwatched, or watch.rescan_seconds is 0). */
static int rescan_timeout(struct watcher *wr)
{
	if (!wr->unwatched.n || wr->rescan_seconds <= 0) {
		wr->next_rescan_ms = 0;
		return -1;
	}
	uint64_t now = (uint64_t)clock_ms();
	if (!wr->next_rescan_ms)
		wr->next_rescan_ms = now + (uint64_t)wr->rescan_seconds * 1000;
	uint64_t left = wr->next_rescan_ms > now ? wr->next_rescan_ms - now : 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

/* The watcher thread: sets up the watches, then reloads after each burst
 * of events that concerns a source, a skill or the config file, until
 * watcher_stop. */
static void *watch_main(void *arg)
{
	struct watcher *wr = arg;
	watch_start(wr);
	char evbuf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	char gdir[PATH_MAX], rdir[PATH_MAX];
	struct dirt *dirt = malloc(sizeof *dirt);
	/* Out of memory: nothing is followed; the mount still answers. */
	while (dirt) {
		struct pollfd pfd[3] = { { wr->inotify_fd, POLLIN, 0 }, { wr->stop_pipe[0], POLLIN, 0 },
					 { wr->reload_pipe[0], POLLIN, 0 } };
		rescan_interval(wr);
		warning_show(wr); /* the interval it names changed */
		int ready = poll(pfd, 3, rescan_timeout(wr));
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		if (ready == 0 || rescan_timeout(wr) == 0) {
			/* A change the watcher did not see is found by the
			 * rescan; with events waiting too, the rescan goes
			 * first, and those come next time round. */
			rescan(wr, dirt);
			continue;
		}
		/* watcher_reload_all: the config and every skill, as after
		 * lost events; the tickets asked so far are answered by it. */
		bool forced = pfd[2].revents != 0;
		uint64_t answered = 0;
		if (forced) {
			char drain[64];
			while (read(wr->reload_pipe[0], drain, sizeof drain) > 0)
				;
			pthread_mutex_lock(&wr->asked_lock);
			answered = wr->reloads_asked;
			pthread_mutex_unlock(&wr->asked_lock);
		}
		bool config_changed = forced, any = forced, everything = forced;
		/* The config file's names as given and where its links led.
		 * Any other change on its way (a link retargeted, a directory
		 * renamed or made) has the file looked at again after the
		 * burst (config_check): reloaded only if it is another file
		 * or changed. */
		char *given, *real;
		wr->host.config_paths(wr->host.ctx, &given, &real);
		const char *gname = given ? split_dir(given, gdir, sizeof gdir) : NULL;
		const char *rname = real ? split_dir(real, rdir, sizeof rdir) : NULL;
		bool config_check = false;
		struct strlist replaced = { 0 }; /* sources whose name changed in their parent */
		memset(dirt, 0, sizeof *dirt);
		wr->burst++;
		/* Collect this burst of events, then settle for a moment so an
		 * editor's write-rename-chmod counts as one change; but for no
		 * longer than BURST_MAX_MS in all, or a file written without a
		 * pause (a log in a skill, one beside the config) would hold
		 * every change back for as long as it is written. */
		int settle_ms = 30;
		int64_t t0 = clock_ms();
		for (;;) {
			ssize_t n = read(wr->inotify_fd, evbuf, sizeof evbuf);
			if (n <= 0)
				break;
			for (char *p = evbuf; p < evbuf + n;) {
				struct inotify_event *ev = (struct inotify_event *)p;
				p += sizeof *ev + ev->len;
				if (ev->mask & IN_Q_OVERFLOW) {
					/* Events were lost: anything may have changed. */
					any = config_changed = everything = true;
					continue;
				}
				struct watch *w = watch_find(wr, ev->wd);
				if (!w)
					continue;
				if (ev->mask & IN_IGNORED) {
					watch_forget(wr, ev->wd);
					any = true;
					continue;
				}
				if (w->root_len) {
					any = true;
					if (w->marked != wr->burst) {
						w->marked = wr->burst;
						if (dirt_mark(dirt, w->path, w->root_len) < 0)
							everything = true;
					}
				}
				if (w->roles & WATCH_SOURCE) {
					any = true;
					/* A name come or gone in a source: that
					 * directory is what changed (it may be a
					 * skill now, or no more). */
					if (ev->len && ev->name[0] != '.' &&
					    strlist_addf(&dirt->list, "%s/%s", w->path, ev->name) < 0)
						everything = true;
				}
				/* In a source's parent only the source's own name
				 * matters: the rest of that directory is not ours. */
				for (size_t k = 0; (w->roles & WATCH_SOURCE_PARENT) && ev->len &&
						   k < w->names.n;
				     k++) {
					if (!source_named(w->names.items[k], ev->name))
						continue;
					any = true;
					if (!strlist_has(&replaced, w->names.items[k]) &&
					    strlist_add(&replaced, w->names.items[k]) < 0)
						everything = true;
				}
				/* Other files beside the config (the state database
				 * often) change all the time: they are not ours. */
				if ((w->roles & (WATCH_CONFIG_DIR | WATCH_CONFIG_PATH)) && gname) {
					if ((w->roles & WATCH_CONFIG_DIR) && ev->len &&
					    (strcmp(ev->name, gname) == 0 ||
					     (rname && strcmp(ev->name, rname) == 0)))
						any = config_changed = true;
					else
						config_check = true;
				}
			}
			int64_t left = BURST_MAX_MS - (clock_ms() - t0);
			struct pollfd more = { wr->inotify_fd, POLLIN, 0 };
			if (left <= 0 || poll(&more, 1, left < settle_ms ? (int)left : settle_ms) <= 0)
				break;
		}
		if (config_check && !config_changed && wr->host.config_changed(wr->host.ctx))
			any = config_changed = true;
		free(given);
		free(real);
		/* A source replaced (a symlink retargeted, say) can hold skills
		 * whose SKILL.md is the very same file: load them all afresh. */
		if (any && (everything || replaced.n) &&
		    dirt_mark_sources(wr, dirt, everything, &replaced) < 0) {
			/* out of memory: a skill whose SKILL.md is unchanged is
			 * reused, the best that can be done */
		}
		if (any)
			reload_and_watch(wr, config_changed, &dirt->list, true,
					 !everything && replaced.n == 0 ? WATCHER_RELOAD_COMPLETE
									: WATCHER_RELOAD_DIRTY);
		strlist_free(&replaced);
		strlist_free(&dirt->list);
		unwatched_prune(wr);
		if (forced) {
			pthread_mutex_lock(&wr->asked_lock);
			wr->reloads_done = answered;
			pthread_cond_broadcast(&wr->asked_cond);
			pthread_mutex_unlock(&wr->asked_lock);
		}
	}
	free(dirt);
	pthread_mutex_lock(&wr->asked_lock);
	wr->watcher_ended = true;
	pthread_cond_broadcast(&wr->asked_cond);
	pthread_mutex_unlock(&wr->asked_lock);
	return NULL;
}

int watcher_reload_all(struct watcher *wr)
{
	if (!wr || !__atomic_load_n(&wr->thread_running, __ATOMIC_ACQUIRE))
		return -1;
	pthread_mutex_lock(&wr->asked_lock);
	uint64_t ticket = ++wr->reloads_asked;
	pthread_mutex_unlock(&wr->asked_lock);
	/* One byte is enough however many are asked: a full pipe has one. */
	if (write(wr->reload_pipe[1], "r", 1) < 0 && errno != EAGAIN)
		return -1;
	pthread_mutex_lock(&wr->asked_lock);
	while (wr->reloads_done < ticket && !wr->watcher_ended)
		pthread_cond_wait(&wr->asked_cond, &wr->asked_lock);
	bool ended = wr->reloads_done < ticket;
	pthread_mutex_unlock(&wr->asked_lock);
	return ended ? -1 : 0;
}

char *watcher_warning(struct watcher *wr)
{
	if (!wr)
		return NULL;
	pthread_mutex_lock(&wr->warning_lock);
	char *w = wr->watch_warning ? strdup(wr->watch_warning) : NULL;
	pthread_mutex_unlock(&wr->warning_lock);
	return w;
}

void watcher_cap_watches(struct watcher *wr, size_t max)
{
	__atomic_store_n(&wr->max_watches, max, __ATOMIC_RELAXED);
}

/* watcher_dirs_needed's config paths: the file as loaded, both ways. */
static void dry_config_paths(void *ctx, char **given, char **real)
{
	const char *path = ctx;
	*given = path ? strdup(path) : NULL;
	*real = path ? strdup(path) : NULL;
}

size_t watcher_dirs_needed(const struct config *c, const struct catalog *cat, int max_depth)
{
	/* The watches watch_refresh would add, counted (dry) instead. */
	struct watcher wr = { .dry = true, .inotify_fd = -1 };
	wr.host = (struct watcher_host){ .ctx = c->path, .config_paths = dry_config_paths,
					 .max_depth = max_depth };
	struct watcher_view v = { c, cat, NULL };
	watch_refresh(&wr, NULL, &v, NULL);
	size_t n = wr.unwatched.n;
	unwatched_free(&wr.unwatched);
	return n;
}

struct watcher *watcher_new(const struct watcher_host *host)
{
	struct watcher *wr = calloc(1, sizeof *wr);
	if (!wr)
		return NULL;
	wr->host = *host;
	wr->max_watches = host->max_watches;
	wr->stop_pipe[0] = wr->stop_pipe[1] = -1;
	wr->reload_pipe[0] = wr->reload_pipe[1] = -1;
	pthread_mutex_init(&wr->asked_lock, NULL);
	pthread_cond_init(&wr->asked_cond, NULL);
	pthread_mutex_init(&wr->warning_lock, NULL);
	wr->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (wr->inotify_fd < 0 || pipe2(wr->stop_pipe, O_CLOEXEC) < 0 ||
	    pipe2(wr->reload_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		int err = errno;
		watcher_free(wr);
		errno = err;
		return NULL;
	}
	return wr;
}

int watcher_start(struct watcher *wr)
{
	/* The watches are set up by the watcher thread (watch_start): with
	 * tens of thousands of directories that takes a while, and the mount
	 * can answer meanwhile. */
	int rc = pthread_create(&wr->thread, NULL, watch_main, wr);
	if (rc) {
		errno = rc;
		return -1;
	}
	pthread_setname_np(wr->thread, "skillfs-watch");
	__atomic_store_n(&wr->thread_running, true, __ATOMIC_RELEASE);
	return 0;
}

void watcher_stop(struct watcher *wr)
{
	if (!wr || !__atomic_load_n(&wr->thread_running, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&wr->unwatching, true, __ATOMIC_RELAXED);
	if (write(wr->stop_pipe[1], "x", 1) < 0) {
		/* cannot happen: one byte into an empty pipe */
	}
	pthread_join(wr->thread, NULL);
	__atomic_store_n(&wr->thread_running, false, __ATOMIC_RELEASE);
}

void watcher_free(struct watcher *wr)
{
	if (!wr)
		return;
	watcher_stop(wr);
	if (wr->inotify_fd >= 0)
		close(wr->inotify_fd);
	for (int i = 0; i < 2; i++) {
		if (wr->stop_pipe[i] >= 0)
			close(wr->stop_pipe[i]);
		if (wr->reload_pipe[i] >= 0)
			close(wr->reload_pipe[i]);
	}
	for (size_t i = 0; i < wr->capwatches; i++) {
		free(wr->watches[i].path);
		strlist_free(&wr->watches[i].names);
	}
	free(wr->watches);
	free(wr->watch_warning);
	free(wr->warning_path);
	unwatched_free(&wr->unwatched);
	pthread_mutex_destroy(&wr->asked_lock);
	pthread_cond_destroy(&wr->asked_cond);
	pthread_mutex_destroy(&wr->warning_lock);
	free(wr);
}

