/* engine: the snapshots of config and catalogue, their lazily derived
 * texts, and the watcher that rebuilds them when the disk changes (see
 * engine.h).
 *
 * One file past 1,200 lines: the watcher (from "watching the disk" on)
 * reads and replaces the engine's private state (the current snapshot,
 * the reload lock, the config's resolved paths) at every step, so it lives
 * beside it; it is the part to move into a file of its own, behind a small
 * interface, when the watch limit and incremental rebuilds (scale) rework
 * it. */
#include "engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "discover.h"
#include "json_text.h"
#include "mode.h"
#include "resolution.h"
#include "sandbox.h"
#include "tools.h"

/* A config shared by successive snapshots until the file changes. */
struct shared_config {
	int refs;
	struct config *c;
	struct sandbox sandbox; /* probed for c when it was loaded */
};

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

struct engine {
	struct engine_options opt;
	char *config_given;       /* absolute, links kept; or NULL */
	char *config_path;        /* config_given resolved at the last load
	                             (guarded by reload_lock) */
	struct strlist dirs;      /* -s and -r directories */
	bool *dirs_recursive;     /* per dirs item: a -r directory */

	pthread_mutex_t lock;     /* guards current and generation */
	pthread_mutex_t reload_lock; /* one reload at a time; guards config_st */
	struct stat config_st;    /* the config file when it was last read */
	struct snapshot *current;
	uint64_t generation;
	uint64_t resolutions_built;
	struct runs *runs;        /* attached by runs_attach, or NULL */
	const struct pin_history *pin_history; /* engine_set_pin_history, or NULL */
	engine_reload_fn reload_hook;  /* engine_set_reload_hook, or NULL */
	void *reload_ctx;

	/* watcher */
	int inotify_fd;
	int stop_pipe[2];
	int reload_pipe[2];       /* a byte asks the watcher for engine_reload_all */
	pthread_mutex_t asked_lock; /* guards the two counts below */
	pthread_cond_t asked_cond;
	uint64_t reloads_asked, reloads_done; /* engine_reload_all's tickets */
	bool watcher_ended;       /* the watcher thread returned (asked_lock) */
	pthread_t thread;
	bool thread_running;
	bool unwatching;          /* set by engine_unwatch (atomic): stop early */
	engine_change_fn on_change;
	void *on_change_ctx;
	struct watch *watches;    /* by descriptor; only the watcher thread uses it */
	size_t capwatches;
	uint64_t burst;           /* bursts of events read (watcher thread) */
	char *watch_warning;      /* set once (atomic) when the watch limit is hit */
	bool watch_warning_new;   /* not yet in a snapshot (watcher thread) */
};

/* Takes c (the caller keeps it on failure); probes what its tools need
 * (tools_probe). */
static struct shared_config *shared_config_new(struct config *c)
{
	struct shared_config *sc = calloc(1, sizeof *sc);
	if (!sc || tools_probe(c, &sc->sandbox) < 0) {
		free(sc);
		return NULL;
	}
	sc->refs = 1;
	sc->c = c;
	return sc;
}

static void shared_config_unref(struct shared_config *sc)
{
	if (sc && __atomic_sub_fetch(&sc->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		config_free(sc->c);
		sandbox_free(&sc->sandbox);
		free(sc);
	}
}

const struct config *snapshot_config(const struct snapshot *s)
{
	return s->cfg->c;
}

const struct sandbox *snapshot_sandbox(const struct snapshot *s)
{
	return &s->cfg->sandbox;
}

void snapshot_unref(struct snapshot *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	const struct config *c = s->cfg->c;
	if (s->texts) {
		for (size_t i = 0; i < s->catalog->n; i++) {
			free(s->texts[i].json);
			free(s->texts[i].mode);
		}
		free(s->texts);
	}
	if (s->res) {
		for (size_t i = 0; i < c->nconfigs; i++)
			resolution_free(s->res[i]);
		free(s->res);
	}
	free(s->tools_text);
	catalog_free(s->catalog);
	shared_config_unref(s->cfg);
	free(s->config_error);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

struct snapshot *engine_snapshot(struct engine *e)
{
	pthread_mutex_lock(&e->lock);
	struct snapshot *s = e->current;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&e->lock);
	return s;
}

uint64_t engine_resolutions_built(struct engine *e)
{
	return __atomic_load_n(&e->resolutions_built, __ATOMIC_RELAXED);
}

/* Loads the config file (or the no-config default) plus the -s dirs. */
static int load_config(struct engine *e, struct config **out, char **err)
{
	struct config *c = NULL;
	if (e->config_given) {
		/* Taken before reading: a change after it shows as a change. */
		if (stat(e->config_given, &e->config_st) < 0)
			memset(&e->config_st, 0, sizeof e->config_st);
		/* Resolved afresh each time: a link in the path retargeted
		 * (a Kubernetes ConfigMap swaps one) leads to the new file,
		 * whose directory relative paths in it are taken from. */
		char *real = realpath(e->config_given, NULL);
		if (!real) {
			if (asprintf(err, "%s: %s", e->config_given, strerror(errno)) < 0)
				*err = NULL;
			return -1;
		}
		free(e->config_path);
		e->config_path = real;
		if (config_load(e->config_path, &c, err) < 0)
			return -1;
		if (config_add_sources(c, (const char *const *)e->dirs.items, e->dirs.n) < 0) {
			config_free(c);
			*err = strdup("out of memory");
			return -1;
		}
	} else {
		c = config_default((const char *const *)e->dirs.items, e->dirs.n);
		if (!c) {
			*err = strdup("out of memory");
			return -1;
		}
	}
	/* The -s and -r directories are the last sources, in their order. */
	for (size_t i = 0; i < e->dirs.n && e->dirs.n <= c->nsources; i++)
		c->sources[c->nsources - e->dirs.n + i].recursive = e->dirs_recursive[i];
	*out = c;
	return 0;
}

/* A new snapshot of sc's config over the catalogue built from prev and
 * dirty (catalog_build_with); complete: dirty names every directory that
 * changed since prev, for the same config, so the catalogue can be
 * updated in O(what changed) (catalog_update) where it can follow it. */
static struct snapshot *snapshot_new(struct engine *e, struct shared_config *sc,
				     const struct catalog *prev, const struct strlist *dirty,
				     const char *config_error, bool complete)
{
	struct snapshot *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->refs = 1;
	s->cfg = sc;
	__atomic_add_fetch(&sc->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_init(&s->lock, NULL);
	clock_gettime(CLOCK_REALTIME, &s->built);
	s->resolutions_built = &e->resolutions_built;
	/* R13: python is in the default sub-agent set when the python tool
	 * can run (python3 in the sandbox's PATH, a usable sandbox). */
	s->have_python = tools_unavailable_why("python", &sc->sandbox) == NULL;
	s->engine = e;
	s->catalog = complete ? catalog_update(sc->c, prev, &e->opt.limits, dirty, e->pin_history)
			      : NULL;
	if (!s->catalog && (!complete || errno == EAGAIN))
		s->catalog = catalog_build_with(sc->c, prev, &e->opt.limits, dirty,
						e->pin_history);
	if (config_error)
		s->config_error = strdup(config_error);
	/* What the watcher could not follow is a catalogue warning: it is
	 * shown in every configuration's warnings. */
	const char *ww = __atomic_load_n(&e->watch_warning, __ATOMIC_ACQUIRE);
	if (!s->catalog || (config_error && !s->config_error) ||
	    (ww && strlist_add(&s->catalog->warnings, ww) < 0)) {
		snapshot_unref(s);
		return NULL;
	}
	s->texts = calloc(s->catalog->n ? s->catalog->n : 1, sizeof *s->texts);
	s->res = calloc(sc->c->nconfigs ? sc->c->nconfigs : 1, sizeof *s->res);
	if (!s->texts || !s->res) {
		snapshot_unref(s);
		return NULL;
	}
	return s;
}

struct engine *engine_open(const struct engine_options *opt, char **err)
{
	*err = NULL;
	struct engine *e = calloc(1, sizeof *e);
	if (!e) {
		*err = strdup("out of memory");
		return NULL;
	}
	e->opt = *opt;
	e->inotify_fd = -1;
	e->stop_pipe[0] = e->stop_pipe[1] = -1;
	e->reload_pipe[0] = e->reload_pipe[1] = -1;
	pthread_mutex_init(&e->asked_lock, NULL);
	pthread_cond_init(&e->asked_cond, NULL);
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->reload_lock, NULL);
	if (opt->config_path) {
		e->config_given = config_path_absolute(opt->config_path);
		struct stat st;
		if (!e->config_given || stat(e->config_given, &st) < 0) {
			if (asprintf(err, "%s: %s", opt->config_path, strerror(errno)) < 0)
				*err = NULL;
			goto fail;
		}
	}
	if (opt->ndirs && !(e->dirs_recursive = calloc(opt->ndirs, sizeof *e->dirs_recursive)))
		goto fail;
	for (size_t i = 0; i < opt->ndirs; i++) {
		e->dirs_recursive[i] = opt->recursive && opt->recursive[i];
		/* Absolute now (a daemon leaves its directory), but through any
		 * symbolic link in it, as a source in the config file: a link
		 * retargeted later is followed. */
		char *abs = config_path_absolute(opt->dirs[i]);
		struct stat st;
		if (!abs || stat(abs, &st) < 0) {
			if (asprintf(err, "skills directory %s: %s", opt->dirs[i], strerror(errno)) < 0)
				*err = NULL;
			free(abs);
			goto fail;
		}
		if (strlist_add_owned(&e->dirs, abs) < 0)
			goto fail;
	}
	e->opt.config_path = e->config_given;
	e->opt.dirs = NULL;
	e->opt.recursive = NULL;
	e->opt.ndirs = 0;

	struct config *c;
	if (load_config(e, &c, err) < 0)
		goto fail;
	struct shared_config *sc = shared_config_new(c);
	if (!sc) {
		config_free(c);
		goto fail;
	}
	e->current = snapshot_new(e, sc, NULL, NULL, NULL, false);
	shared_config_unref(sc);
	if (!e->current)
		goto fail;
	e->current->generation = ++e->generation;
	return e;
fail:
	if (!*err)
		*err = strdup("out of memory");
	engine_close(e);
	return NULL;
}

/* Shares with now each resolution of old that the change from old's
 * catalogue to now's (an update of it: catalog_update) leaves as it was:
 * the same config, no name come or gone (the indexes it holds stay), the
 * same catalogue warnings (every configuration shows them), and none of
 * the skills it shows changed. */
static void share_resolutions(struct snapshot *old, struct snapshot *now)
{
	const struct catalog *a = old->catalog, *b = now->catalog;
	if (old->cfg != now->cfg || b->delta.base != a || b->delta.names_changed ||
	    !strlist_equal(&a->warnings, &b->warnings))
		return;
	const struct config *c = snapshot_config(now);
	pthread_mutex_lock(&old->lock);
	for (size_t i = 0; i < c->nconfigs; i++)
		if (old->res[i] && !resolution_touches(old->res[i], a, &b->delta.names))
			now->res[i] = resolution_ref(old->res[i]);
	pthread_mutex_unlock(&old->lock);
}

static int reload(struct engine *e, bool config_changed, const struct strlist *dirty,
		  bool complete);

int engine_reload(struct engine *e, bool config_changed, const struct strlist *dirty)
{
	return reload(e, config_changed, dirty, false);
}

int engine_update(struct engine *e, const struct strlist *dirty)
{
	return reload(e, false, dirty, true);
}

/* engine_reload; complete: dirty names every directory that changed since
 * the current snapshot was made (snapshot_new). */
static int reload(struct engine *e, bool config_changed, const struct strlist *dirty,
		  bool complete)
{
	/* Reloads run one at a time, so each builds on the last; the scan
	 * itself happens outside e->lock, which readers of the current
	 * snapshot (every FUSE request) take. */
	pthread_mutex_lock(&e->reload_lock);
	struct snapshot *old = engine_snapshot(e);
	struct shared_config *sc = old->cfg;
	char *cerr = NULL;
	const char *config_error = old->config_error;
	bool own_sc = false;
	if (config_changed) {
		struct config *c;
		if (load_config(e, &c, &cerr) == 0) {
			sc = shared_config_new(c);
			if (!sc) {
				config_free(c);
				snapshot_unref(old);
				pthread_mutex_unlock(&e->reload_lock);
				return -1;
			}
			own_sc = true;
			config_error = NULL;
		} else {
			config_error = cerr;
		}
	}
	struct snapshot *now = snapshot_new(e, sc, old->catalog, dirty, config_error,
					    complete && !config_changed);
	if (now && !config_changed && catalog_same(old->catalog, now->catalog)) {
		/* Nothing changed (an event that touched nothing we show):
		 * keep the snapshot, and what it has derived and cached. */
		snapshot_unref(now);
		pthread_mutex_unlock(&e->reload_lock);
		snapshot_unref(old);
		return 0;
	}
	if (now) {
		share_resolutions(old, now);
		pthread_mutex_lock(&e->lock);
		now->generation = ++e->generation;
		struct snapshot *prev = e->current;
		e->current = now;
		__atomic_add_fetch(&now->refs, 1, __ATOMIC_ACQ_REL);
		pthread_mutex_unlock(&e->lock);
		snapshot_unref(prev);
		/* In the order the snapshots were made (the audit trail). */
		if (e->reload_hook)
			e->reload_hook(e->reload_ctx, old, now);
	}
	pthread_mutex_unlock(&e->reload_lock);
	if (own_sc)
		shared_config_unref(sc);
	free(cerr);
	if (!now) {
		snapshot_unref(old);
		return -1;
	}
	if (e->on_change)
		e->on_change(e->on_change_ctx, old, now);
	snapshot_unref(now);
	snapshot_unref(old);
	return 0;
}

/* ---- lazily derived texts ---- */

/* skill.json's facts about the skill's files (issue 19): the digest of
 * its directory and of its SKILL.md, its injection findings, whether they
 * are acknowledged, and its source's pin. 0 or -1 (ENOMEM). */
static int put_trust_json(json_t *j, struct snapshot *s, const struct catalog_entry *ce)
{
	const struct config *c = snapshot_config(s);
	const struct skill_scan *sc = ce->scan;
	const struct scan_file *md = scan_find(sc, "SKILL.md");
	const struct source_pin *pin = ce->source < s->catalog->npins ? s->catalog->pins[ce->source]
								      : NULL;
	char d[FP_TEXT_SIZE], m[FP_TEXT_SIZE];
	if (sc)
		fp_format(sc->digest, d);
	if (md)
		fp_format(md->sha, m);
	json_t *jp = pin ? json_pack("{s:s, s:s, s:b, s:s?}", "expected", pin->expected, "actual",
				     pin->actual, "matched", pin->matched, "message", pin->message)
			 : json_null();
	json_t *f = sc ? scan_findings_json(sc) : json_array();
	return json_object_set_new(j, "digest", sc ? json_string(d) : json_null()) |
	       json_object_set_new(j, "skill_md_sha256", md ? json_string(m) : json_null()) |
	       json_object_set_new(j, "files_not_read",
				   sc && sc->error ? json_string(sc->error) : json_null()) |
	       json_object_set_new(j, "findings", f ? f : json_null()) |
	       json_object_set_new(j, "acknowledged",
				   json_boolean(config_skill_acknowledged(c, ce->skill->name))) |
	       json_object_set_new(j, "pin", jp ? jp : json_null()) | (jp && f ? 0 : -1);
}

static int build_skill_texts(struct snapshot *s, size_t i, struct snapshot_skill_texts *t)
{
	const struct config *c = snapshot_config(s);
	const struct catalog_entry *ce = &s->catalog->entries[i];
	struct buf mode = { 0 };
	if (mode_render(c, ce->skill, s->have_python, &mode) < 0) {
		buf_free(&mode);
		return -1;
	}
	json_t *j = skill_to_json(ce->skill);
	if (!j) {
		buf_free(&mode);
		return -1;
	}
	json_t *warn = json_array();
	for (size_t k = 0; warn && k < ce->warnings.n; k++)
		json_array_append_new(warn, json_string(ce->warnings.items[k]));
	json_t *refs = json_array();
	for (size_t k = 0; refs && k < ce->nref_subs; k++)
		json_array_append_new(refs, json_string(s->catalog->entries[ce->ref_subs[k]].skill->name));
	int rc = put_trust_json(j, s, ce) |
		 json_object_set_new(j, "source", json_string(c->sources[ce->source].path)) |
		 json_object_set_new(j, "trust", json_string(trust_name(ce->trust))) |
		 json_object_set_new(j, "disabled", json_boolean(ce->disabled)) |
		 json_object_set_new(j, "catalog_warnings", warn ? warn : json_null()) |
		 json_object_set_new(j, "resolved_sub_skills", refs ? refs : json_null()) |
		 json_object_set_new(j, "mode", json_stringn(mode.data ? mode.data : "", mode.len));
	struct buf text = { 0 };
	if (rc == 0 && json_text_append(&text, j, JSON_INDENT(2) | JSON_SORT_KEYS) == 0)
		t->json = buf_steal(&text, &t->json_len);
	buf_free(&text);
	json_decref(j);
	t->mode = buf_steal(&mode, &t->mode_len);
	if (!t->json || !t->mode) {
		free(t->json);
		free(t->mode);
		t->json = t->mode = NULL;
		return -1;
	}
	return 0;
}

const struct snapshot_skill_texts *snapshot_skill_texts(struct snapshot *s, size_t i)
{
	if (i >= s->catalog->n)
		return NULL;
	pthread_mutex_lock(&s->lock);
	struct snapshot_skill_texts *t = &s->texts[i];
	if (!t->json && build_skill_texts(s, i, t) < 0)
		t = NULL;
	pthread_mutex_unlock(&s->lock);
	return t;
}

const struct resolution *snapshot_resolution(struct snapshot *s, size_t ci)
{
	const struct config *c = snapshot_config(s);
	if (ci >= c->nconfigs)
		return NULL;
	pthread_mutex_lock(&s->lock);
	if (!s->res[ci]) {
		s->res[ci] = resolution_build(c, s->catalog, &c->configs[ci], NULL, 0);
		if (s->res[ci])
			__atomic_add_fetch(s->resolutions_built, 1, __ATOMIC_RELAXED);
	}
	const struct resolution *r = s->res[ci];
	pthread_mutex_unlock(&s->lock);
	return r;
}

const char *snapshot_tools_text(struct snapshot *s, size_t *len)
{
	pthread_mutex_lock(&s->lock);
	if (!s->tools_text) {
		const struct config *c = snapshot_config(s);
		const struct sandbox *sb = snapshot_sandbox(s);
		struct buf b = { 0 };
		int rc = 0;
		for (size_t i = 0; i < c->registered_tools.n && rc == 0; i++) {
			const char *t = c->registered_tools.items[i];
			bool bare = sb->mode == SANDBOX_NONE && tools_is_process(t);
			rc = buf_printf(&b, "%s%s\n", t, bare ? " (no sandbox)" : "");
		}
		for (size_t i = 0; i < c->tools.unavailable.n && rc == 0; i++)
			rc = buf_printf(&b, "%s unavailable: %s\n", c->tools.unavailable.items[i],
					c->tools.unavailable_why.items[i]);
		if (rc == 0)
			s->tools_text = buf_steal(&b, &s->tools_len);
		else
			buf_free(&b);
	}
	const char *t = s->tools_text;
	*len = s->tools_len;
	pthread_mutex_unlock(&s->lock);
	return t;
}

/* ---- watching the disk ---- */

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
/* Every directory the mount can show lies at most this deep in a skill
 * (a recursion bound too). */
#define WATCH_DEPTH_MAX ENGINE_MAX_DEPTH
/* Links followed on the way to the config file when watching them. */
#define CONFIG_LINK_HOPS 8
/* The longest a burst of events is collected before it is acted on. */
#define BURST_MAX_MS 250

/* Watches are indexed by their descriptor (the kernel hands them out as
 * small increasing integers), so an event finds its watch in O(1). */
static struct watch *watch_find(struct engine *e, int wd)
{
	if (wd < 0 || (size_t)wd >= e->capwatches || !e->watches[wd].path)
		return NULL;
	return &e->watches[wd];
}

/* Drops what we know of watch wd (the kernel has dropped the watch). */
static void watch_forget(struct engine *e, int wd)
{
	struct watch *w = watch_find(e, wd);
	if (!w)
		return;
	free(w->path);
	strlist_free(&w->names);
	*w = (struct watch){ 0 };
}

/* Records, once per engine, that the inotify watch limit kept path (and
 * so whatever lies below it) from being watched. The warning joins the
 * catalogue's warnings from the next snapshot on (reload_and_watch). */
static void watch_limit_reached(struct engine *e, const char *path)
{
	if (__atomic_load_n(&e->watch_warning, __ATOMIC_ACQUIRE))
		return;
	char *msg;
	if (asprintf(&msg,
		     "the inotify watch limit is reached: changes in %s (and in any other "
		     "directory not watched yet) are not followed; raise the sysctl "
		     "fs.inotify.max_user_watches, then remount",
		     path) < 0)
		return; /* out of memory: the next directory refused tries again */
	__atomic_store_n(&e->watch_warning, msg, __ATOMIC_RELEASE);
	e->watch_warning_new = true;
}

/* Watches directory path in the given roles; a directory given several
 * roles gets the union of their masks (IN_MASK_ADD), whatever their order.
 * root_len (WATCH_SOURCE, WATCH_TREE): the length of the source's path,
 * which begins path. source (WATCH_SOURCE_PARENT): the source in path.
 * A directory seen again under another path (moved) takes the new one.
 * Nothing is watched when path is gone; when the watch limit is reached,
 * that is recorded (watch_limit_reached). */
static void watch_add(struct engine *e, const char *path, size_t root_len, unsigned roles,
		      const char *source)
{
	uint32_t mask = IN_MASK_ADD;
	if (roles & (WATCH_SOURCE | WATCH_TREE))
		mask |= WATCH_MASK;
	if (roles & WATCH_CONFIG_DIR)
		mask |= CONFIG_DIR_MASK;
	if (roles & (WATCH_SOURCE_PARENT | WATCH_CONFIG_PATH))
		mask |= SOURCE_PARENT_MASK;
	int wd = inotify_add_watch(e->inotify_fd, path, mask);
	if (wd < 0) {
		if (errno == ENOSPC)
			watch_limit_reached(e, path);
		return; /* gone already, or not a directory: nothing to follow */
	}
	if ((size_t)wd >= e->capwatches) {
		size_t cap = e->capwatches ? e->capwatches : 64;
		while (cap <= (size_t)wd)
			cap *= 2;
		struct watch *p = realloc(e->watches, cap * sizeof *p);
		if (!p)
			return; /* its events are dropped; the next refresh tries again */
		memset(p + e->capwatches, 0, (cap - e->capwatches) * sizeof *p);
		e->watches = p;
		e->capwatches = cap;
	}
	struct watch *w = &e->watches[wd];
	bool in_source = roles & (WATCH_SOURCE | WATCH_TREE);
	if (!w->path || (in_source && strcmp(w->path, path) != 0)) {
		char *p = strdup(path);
		if (!p)
			return;
		free(w->path);
		*w = (struct watch){ wd, p, 0, w->roles, w->names, w->marked };
	}
	if (in_source && strcmp(w->path, path) == 0 && (!w->root_len || root_len < w->root_len))
		w->root_len = root_len; /* in two sources: the outer one */
	if ((roles & WATCH_SOURCE_PARENT) && source && !strlist_has(&w->names, source) &&
	    strlist_add(&w->names, source) < 0)
		return; /* out of memory: that source is not followed from here */
	w->roles |= roles;
}

/* Watches dir and the directories below it (not through symbolic links),
 * up to WATCH_DEPTH_MAX levels deep counting from depth, as lying in the
 * source whose path is dir's first root_len bytes. */
static void watch_tree(struct engine *e, const char *dir, size_t root_len, int depth)
{
	watch_add(e, dir, root_len, WATCH_TREE, NULL);
	if (depth >= WATCH_DEPTH_MAX || __atomic_load_n(&e->unwatching, __ATOMIC_RELAXED))
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
		watch_tree(e, path, root_len, depth + 1);
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

/* The config file as given and as its links led at the last load, both
 * malloc'd (NULL without a config file, or when out of memory). */
static void config_paths(struct engine *e, char **given, char **real)
{
	*given = *real = NULL;
	if (!e->config_given)
		return;
	pthread_mutex_lock(&e->reload_lock);
	*given = strdup(e->config_given);
	*real = e->config_path ? strdup(e->config_path) : NULL;
	pthread_mutex_unlock(&e->reload_lock);
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

/* Whether the config file, followed through its links, is another file or
 * was changed since it was last read. */
static bool config_file_changed(struct engine *e)
{
	if (!e->config_given)
		return false;
	struct stat st;
	pthread_mutex_lock(&e->reload_lock);
	bool changed = stat(e->config_given, &st) < 0 || st.st_dev != e->config_st.st_dev ||
		       st.st_ino != e->config_st.st_ino || st.st_size != e->config_st.st_size ||
		       st.st_mtim.tv_sec != e->config_st.st_mtim.tv_sec ||
		       st.st_mtim.tv_nsec != e->config_st.st_mtim.tv_nsec;
	pthread_mutex_unlock(&e->reload_lock);
	return changed;
}

/* Watches every directory above path, up to the root, in roles; each is
 * given the path of its child on the way down (the name that matters in a
 * WATCH_SOURCE_PARENT). */
static void watch_ancestors(struct engine *e, const char *path, unsigned roles)
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
		watch_add(e, dir, 0, roles, child);
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
static void watch_config_path(struct engine *e, const char *given, const char *real)
{
	char dir[PATH_MAX];
	split_dir(given, dir, sizeof dir);
	watch_add(e, dir, 0, WATCH_CONFIG_DIR, NULL);
	if (real) {
		split_dir(real, dir, sizeof dir);
		watch_add(e, dir, 0, WATCH_CONFIG_DIR, NULL);
	}
	char *cur = strdup(given);
	for (int hop = 0; cur && hop < CONFIG_LINK_HOPS; hop++) {
		watch_ancestors(e, cur, WATCH_CONFIG_PATH);
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
static bool watch_dirty(struct engine *e, const struct config *c, const struct strlist *dirty)
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
			watch_add(e, d, root_len, WATCH_SOURCE, NULL);
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
			watch_tree(e, path, root_len, 0);
	}
	return true;
}

/* Adds watches for the config file's path (watch_config_path), every
 * source and its parent, and the directories of every skill of s that is
 * not also in old (all of them when old is NULL). Existing watches are
 * kept. dirty (may be NULL): only those directories changed since old,
 * and neither the config nor a source was replaced: only what lies there
 * is looked at (watch_dirty). */
static void watch_refresh(struct engine *e, const struct snapshot *old, const struct snapshot *s,
			  const struct strlist *dirty)
{
	const struct config *c = snapshot_config(s);
	if (old && dirty && old->cfg == s->cfg && watch_dirty(e, c, dirty))
		return;
	char *given, *real;
	config_paths(e, &given, &real);
	if (given)
		watch_config_path(e, given, real);
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
		watch_ancestors(e, src, WATCH_SOURCE_PARENT);
		/* The source, and each directory in it: a SKILL.md can appear in
		 * a directory that was not a skill a moment ago. */
		watch_add(e, src, root_len, WATCH_SOURCE, NULL);
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
					watch_add(e, path, root_len, WATCH_TREE, NULL);
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
				watch_add(e, path, root_len, WATCH_TREE, NULL);
		}
		closedir(d);
	}
	for (size_t i = 0; i < s->catalog->n; i++) {
		if (__atomic_load_n(&e->unwatching, __ATOMIC_RELAXED))
			return; /* shutting down: the watches are of no use */
		const struct catalog_entry *ce = &s->catalog->entries[i];
		const struct skill *sk = ce->skill;
		const struct catalog_entry *was = old ? catalog_find(old->catalog, sk->name) : NULL;
		if (sk->dir && (!was || was->skill != sk))
			watch_tree(e, sk->dir, source_root_len(c, ce->source, sk->dir), 0);
	}
}

/* Reloads (engine_reload), then watches what the new snapshot brought
 * (rescan: also when the reload changed nothing, as after an event that
 * may have made a directory that is not a skill yet); when the watch limit
 * was first reached while doing so, reloads once more (the skills are
 * found unchanged) to put that warning in the catalogue, where every
 * configuration's warnings show it. */
static void reload_and_watch(struct engine *e, bool config_changed, const struct strlist *dirty,
			     bool rescan, bool only_dirty)
{
	struct snapshot *old = engine_snapshot(e);
	reload(e, config_changed, dirty, only_dirty);
	struct snapshot *now = engine_snapshot(e);
	if (now != old || rescan)
		watch_refresh(e, old, now, only_dirty && !config_changed ? dirty : NULL);
	snapshot_unref(now);
	snapshot_unref(old);
	if (e->watch_warning_new && !__atomic_load_n(&e->unwatching, __ATOMIC_RELAXED)) {
		e->watch_warning_new = false;
		reload_and_watch(e, false, NULL, false, false);
	}
}

/* Sets up the watches, then looks at the disk again: whatever changed
 * after the first scan and before a watch was in place is found by this
 * rescan (unchanged skills are reused, and a rescan that finds nothing
 * keeps the snapshot). */
static void watch_start(struct engine *e)
{
	struct snapshot *s = engine_snapshot(e);
	watch_refresh(e, NULL, s, NULL);
	snapshot_unref(s);
	if (__atomic_load_n(&e->unwatching, __ATOMIC_RELAXED))
		return;
	reload_and_watch(e, config_file_changed(e), NULL, false, false);
}

/* The directories one burst of events made dirty (see catalog_build):
 * list, plus the last directory marked, to stop early on its ancestors. */
struct dirt {
	struct strlist list;
	char last[PATH_MAX];
	size_t last_len, last_root; /* last_len 0: none yet */
};

/* Marks w's directory and each directory above it, up to and including
 * its source, dirty: whichever skill owns the directory (the deepest skill
 * directory above it, or that skill's parent) is then loaded afresh, and
 * no other. Ancestors the previous mark added are not added again.
 * Returns 0, or -1 when out of memory (the list is then incomplete). */
static int dirt_mark(struct dirt *d, const struct watch *w)
{
	size_t len = strlen(w->path);
	if (len >= sizeof d->last || w->root_len > len)
		return 0;
	char buf[PATH_MAX];
	memcpy(buf, w->path, len + 1);
	for (;;) {
		if (d->last_len && d->last_root == w->root_len && len <= d->last_len &&
		    memcmp(d->last, buf, len) == 0 && (d->last[len] == '/' || d->last[len] == '\0'))
			break; /* added, with what lies above it, by the previous mark */
		buf[len] = '\0';
		if (strlist_add(&d->list, buf) < 0) {
			d->last_len = 0;
			return -1;
		}
		if (len <= w->root_len)
			break;
		char *slash = strrchr(buf, '/');
		if (!slash)
			break;
		size_t up = slash == buf ? 1 : (size_t)(slash - buf);
		if (up < w->root_len)
			break;
		len = up;
	}
	memcpy(d->last, w->path, strlen(w->path) + 1);
	d->last_len = strlen(w->path);
	d->last_root = w->root_len;
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

/* Marks every skill of the current snapshot dirty (all is set), or those
 * of the sources in or below the directories listed in replaced. Returns 0
 * or -1 (out of memory). */
static int dirt_mark_sources(struct engine *e, struct dirt *d, bool all,
			     const struct strlist *replaced)
{
	struct snapshot *s = engine_snapshot(e);
	const struct config *c = snapshot_config(s);
	int rc = 0;
	for (size_t i = 0; i < s->catalog->n && rc == 0; i++) {
		const struct catalog_entry *ce = &s->catalog->entries[i];
		if (ce->skill->dir && (all || (ce->source < c->nsources &&
					       under_any(c->sources[ce->source].path, replaced))))
			rc = strlist_add(&d->list, ce->skill->dir);
	}
	snapshot_unref(s);
	return rc;
}

/* The watcher thread: sets up the watches, then reloads after each burst
 * of events that concerns a source, a skill or the config file, until
 * engine_unwatch. */
static void *watch_main(void *arg)
{
	struct engine *e = arg;
	watch_start(e);
	char evbuf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	char gdir[PATH_MAX], rdir[PATH_MAX];
	struct dirt *dirt = malloc(sizeof *dirt);
	if (!dirt)
		return NULL; /* nothing is followed; the mount still answers */
	for (;;) {
		struct pollfd pfd[3] = { { e->inotify_fd, POLLIN, 0 }, { e->stop_pipe[0], POLLIN, 0 },
					 { e->reload_pipe[0], POLLIN, 0 } };
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		/* engine_reload_all: the config and every skill, as after
		 * lost events; the tickets asked so far are answered by it. */
		bool forced = pfd[2].revents != 0;
		uint64_t answered = 0;
		if (forced) {
			char drain[64];
			while (read(e->reload_pipe[0], drain, sizeof drain) > 0)
				;
			pthread_mutex_lock(&e->asked_lock);
			answered = e->reloads_asked;
			pthread_mutex_unlock(&e->asked_lock);
		}
		bool config_changed = forced, any = forced, everything = forced;
		/* The config file's names as given and where its links led.
		 * Any other change on its way (a link retargeted, a directory
		 * renamed or made) has the file looked at again after the
		 * burst (config_check): reloaded only if it is another file
		 * or changed. */
		char *given, *real;
		config_paths(e, &given, &real);
		const char *gname = given ? split_dir(given, gdir, sizeof gdir) : NULL;
		const char *rname = real ? split_dir(real, rdir, sizeof rdir) : NULL;
		bool config_check = false;
		struct strlist replaced = { 0 }; /* sources whose name changed in their parent */
		memset(dirt, 0, sizeof *dirt);
		e->burst++;
		/* Collect this burst of events, then settle for a moment so an
		 * editor's write-rename-chmod counts as one change; but for no
		 * longer than BURST_MAX_MS in all, or a file written without a
		 * pause (a log in a skill, one beside the config) would hold
		 * every change back for as long as it is written. */
		int settle_ms = 30;
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			ssize_t n = read(e->inotify_fd, evbuf, sizeof evbuf);
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
				struct watch *w = watch_find(e, ev->wd);
				if (!w)
					continue;
				if (ev->mask & IN_IGNORED) {
					watch_forget(e, ev->wd);
					any = true;
					continue;
				}
				if (w->root_len) {
					any = true;
					if (w->marked != e->burst) {
						w->marked = e->burst;
						if (dirt_mark(dirt, w) < 0)
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
			clock_gettime(CLOCK_MONOTONIC, &t);
			long left = BURST_MAX_MS - ((t.tv_sec - t0.tv_sec) * 1000 +
						    (t.tv_nsec - t0.tv_nsec) / 1000000);
			struct pollfd more = { e->inotify_fd, POLLIN, 0 };
			if (left <= 0 || poll(&more, 1, left < settle_ms ? (int)left : settle_ms) <= 0)
				break;
		}
		if (config_check && !config_changed && config_file_changed(e))
			any = config_changed = true;
		free(given);
		free(real);
		/* A source replaced (a symlink retargeted, say) can hold skills
		 * whose SKILL.md is the very same file: load them all afresh. */
		if (any && (everything || replaced.n) &&
		    dirt_mark_sources(e, dirt, everything, &replaced) < 0) {
			/* out of memory: a skill whose SKILL.md is unchanged is
			 * reused, the best that can be done */
		}
		if (any)
			reload_and_watch(e, config_changed, &dirt->list, true,
					 !everything && replaced.n == 0);
		strlist_free(&replaced);
		strlist_free(&dirt->list);
		if (forced) {
			pthread_mutex_lock(&e->asked_lock);
			e->reloads_done = answered;
			pthread_cond_broadcast(&e->asked_cond);
			pthread_mutex_unlock(&e->asked_lock);
		}
	}
	free(dirt);
	pthread_mutex_lock(&e->asked_lock);
	e->watcher_ended = true;
	pthread_cond_broadcast(&e->asked_cond);
	pthread_mutex_unlock(&e->asked_lock);
	return NULL;
}

int engine_reload_all(struct engine *e)
{
	if (!__atomic_load_n(&e->thread_running, __ATOMIC_ACQUIRE))
		return engine_reload(e, true, NULL);
	pthread_mutex_lock(&e->asked_lock);
	uint64_t ticket = ++e->reloads_asked;
	pthread_mutex_unlock(&e->asked_lock);
	/* One byte is enough however many are asked: a full pipe has one. */
	if (write(e->reload_pipe[1], "r", 1) < 0 && errno != EAGAIN)
		return engine_reload(e, true, NULL);
	pthread_mutex_lock(&e->asked_lock);
	while (e->reloads_done < ticket && !e->watcher_ended)
		pthread_cond_wait(&e->asked_cond, &e->asked_lock);
	bool ended = e->reloads_done < ticket;
	pthread_mutex_unlock(&e->asked_lock);
	return ended ? engine_reload(e, true, NULL) : 0;
}

int engine_watch(struct engine *e, engine_change_fn fn, void *ctx)
{
	e->on_change = fn;
	e->on_change_ctx = ctx;
	e->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (e->inotify_fd < 0)
		return -1;
	if (pipe2(e->stop_pipe, O_CLOEXEC) < 0 ||
	    pipe2(e->reload_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	/* The watches are set up by the watcher thread (watch_start): with
	 * tens of thousands of directories that takes a while, and the mount
	 * can answer meanwhile. */
	int rc = pthread_create(&e->thread, NULL, watch_main, e);
	if (rc == 0)
		pthread_setname_np(e->thread, "skillfs-watch");
	if (rc) {
		errno = rc;
		return -1;
	}
	__atomic_store_n(&e->thread_running, true, __ATOMIC_RELEASE);
	return 0;
}

char *engine_state_path(struct engine *e, const char *state_path)
{
	if (state_path)
		return strdup(state_path);
	char *path = NULL;
	struct snapshot *s = engine_snapshot(e);
	const char *cs = snapshot_config(s)->state_path;
	path = cs ? strdup(cs) : NULL;
	snapshot_unref(s);
	if (!cs) {
		const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
		/* mount(8) runs mount.fuse3, and so skillfs, without HOME. */
		struct passwd pw, *pwp = NULL;
		char pwbuf[4096];
		if ((!home || !*home) && getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &pwp) == 0 &&
		    pwp)
			home = pwp->pw_dir;
		int n = xdg && *xdg ? asprintf(&path, "%s/skillfs/state.db", xdg)
				    : asprintf(&path, "%s/.local/state/skillfs/state.db",
					       home && *home ? home : ".");
		if (n < 0)
			path = NULL;
	}
	return path;
}

struct runs *engine_runs(struct engine *e)
{
	return e->runs;
}

void engine_set_reload_hook(struct engine *e, engine_reload_fn fn, void *ctx)
{
	pthread_mutex_lock(&e->reload_lock);
	e->reload_hook = fn;
	e->reload_ctx = ctx;
	pthread_mutex_unlock(&e->reload_lock);
}

void engine_set_pin_history(struct engine *e, const struct pin_history *h)
{
	pthread_mutex_lock(&e->reload_lock);
	e->pin_history = h;
	pthread_mutex_unlock(&e->reload_lock);
}

void engine_set_runs(struct engine *e, struct runs *r)
{
	e->runs = r;
}

void engine_unwatch(struct engine *e)
{
	if (!e->thread_running)
		return;
	__atomic_store_n(&e->unwatching, true, __ATOMIC_RELAXED);
	if (write(e->stop_pipe[1], "x", 1) < 0) {
		/* cannot happen: one byte into an empty pipe */
	}
	pthread_join(e->thread, NULL);
	__atomic_store_n(&e->thread_running, false, __ATOMIC_RELEASE);
}

void engine_close(struct engine *e)
{
	if (!e)
		return;
	engine_unwatch(e);
	if (e->inotify_fd >= 0)
		close(e->inotify_fd);
	for (int i = 0; i < 2; i++) {
		if (e->stop_pipe[i] >= 0)
			close(e->stop_pipe[i]);
		if (e->reload_pipe[i] >= 0)
			close(e->reload_pipe[i]);
	}
	for (size_t i = 0; i < e->capwatches; i++) {
		free(e->watches[i].path);
		strlist_free(&e->watches[i].names);
	}
	free(e->watches);
	free(e->watch_warning);
	snapshot_unref(e->current);
	free(e->config_given);
	free(e->config_path);
	strlist_free(&e->dirs);
	free(e->dirs_recursive);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->reload_lock);
	pthread_mutex_destroy(&e->asked_lock);
	pthread_cond_destroy(&e->asked_cond);
	free(e);
}
