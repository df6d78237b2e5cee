/* engine: the snapshots of config and catalogue, their lazily derived
 * texts, and the reload that replaces them (see engine.h). Following the
 * disk is the watcher's (watcher.h): it sees the engine only through the
 * struct watcher_host made at the end of this file (the current snapshot,
 * the config file's paths, a reload). */
#include "engine.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "json_text.h"
#include "mode.h"
#include "resolution.h"
#include "sandbox.h"
#include "tools.h"
#include "watcher.h"

/* A config shared by successive snapshots until the file changes. */
struct shared_config {
	int refs;
	struct config *c;
	struct sandbox sandbox; /* probed for c when it was loaded */
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

	struct watcher *watcher;  /* engine_watch, or NULL (atomic) */
	engine_change_fn on_change;
	void *on_change_ctx;
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
 * dirty (catalog_build_with); how WATCHER_RELOAD_COMPLETE: dirty names
 * every directory that changed since prev, for the same config, so the
 * catalogue can be updated in O(what changed) (catalog_update) where it
 * can follow it; WATCHER_RELOAD_CHECK: every skill's files are looked at
 * again (catalog_build_checked). */
static struct snapshot *snapshot_new(struct engine *e, struct shared_config *sc,
				     const struct catalog *prev, const struct strlist *dirty,
				     const char *config_error, enum watcher_reload how)
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
	switch (how) {
	case WATCHER_RELOAD_CHECK:
		s->catalog = catalog_build_checked(sc->c, prev, &e->opt.limits, e->pin_history);
		break;
	case WATCHER_RELOAD_COMPLETE:
		s->catalog = catalog_update(sc->c, prev, &e->opt.limits, dirty, e->pin_history);
		/* A change it cannot follow is built afresh. */
		if (s->catalog || errno != EAGAIN)
			break;
		/* fall through */
	case WATCHER_RELOAD_DIRTY:
		s->catalog = catalog_build_with(sc->c, prev, &e->opt.limits, dirty,
						e->pin_history);
		break;
	}
	if (config_error)
		s->config_error = strdup(config_error);
	/* What the watcher could not follow is a catalogue warning: it is
	 * shown in every configuration's warnings. */
	char *ww = watcher_warning(__atomic_load_n(&e->watcher, __ATOMIC_ACQUIRE));
	if (!s->catalog || (config_error && !s->config_error) ||
	    (ww && strlist_add_owned(&s->catalog->warnings, ww) < 0)) {
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
	e->current = snapshot_new(e, sc, NULL, NULL, NULL, WATCHER_RELOAD_DIRTY);
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
		  enum watcher_reload how);

int engine_reload(struct engine *e, bool config_changed, const struct strlist *dirty)
{
	return reload(e, config_changed, dirty, WATCHER_RELOAD_DIRTY);
}

int engine_update(struct engine *e, const struct strlist *dirty)
{
	return reload(e, false, dirty, WATCHER_RELOAD_COMPLETE);
}

/* engine_reload, reading again what how says besides dirty (snapshot_new;
 * a changed config makes an update a build). */
static int reload(struct engine *e, bool config_changed, const struct strlist *dirty,
		  enum watcher_reload how)
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
	if (config_changed && how == WATCHER_RELOAD_COMPLETE)
		how = WATCHER_RELOAD_DIRTY;
	struct snapshot *now = snapshot_new(e, sc, old->catalog, dirty, config_error, how);
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

/* ---- following the disk (watcher.h) ---- */

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

/* The watcher's view of the engine (struct watcher_host). */
static void host_hold(void *ctx, struct watcher_view *v)
{
	struct snapshot *s = engine_snapshot(ctx);
	*v = (struct watcher_view){ snapshot_config(s), s->catalog, s };
}

static void host_release(void *ctx, struct watcher_view *v)
{
	(void)ctx;
	snapshot_unref(v->held);
	*v = (struct watcher_view){ 0 };
}

static void host_config_paths(void *ctx, char **given, char **real)
{
	config_paths(ctx, given, real);
}

static bool host_config_changed(void *ctx)
{
	return config_file_changed(ctx);
}

static int host_reload(void *ctx, bool config_changed, const struct strlist *dirty,
		       enum watcher_reload how)
{
	return reload(ctx, config_changed, dirty, how);
}

int engine_reload_all(struct engine *e)
{
	if (watcher_reload_all(__atomic_load_n(&e->watcher, __ATOMIC_ACQUIRE)) == 0)
		return 0;
	return engine_reload(e, true, NULL);
}

int engine_watch(struct engine *e, engine_change_fn fn, void *ctx)
{
	e->on_change = fn;
	e->on_change_ctx = ctx;
	struct watcher_host host = {
		.ctx = e,
		.hold = host_hold,
		.release = host_release,
		.config_paths = host_config_paths,
		.config_changed = host_config_changed,
		.reload = host_reload,
		.max_depth = ENGINE_MAX_DEPTH,
	};
	/* Kept before it starts: each snapshot asks it for its warning. */
	struct watcher *w = watcher_new(&host);
	if (!w)
		return -1;
	__atomic_store_n(&e->watcher, w, __ATOMIC_RELEASE);
	return watcher_start(w);
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

void engine_follow_reloads(struct engine *e,
			   void (*first)(void *ctx, const struct snapshot *now),
			   engine_reload_fn fn, void *ctx, const struct pin_history *h)
{
	pthread_mutex_lock(&e->reload_lock);
	struct snapshot *now = engine_snapshot(e);
	first(ctx, now);
	snapshot_unref(now);
	e->reload_hook = fn;
	e->reload_ctx = ctx;
	e->pin_history = h;
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
	watcher_stop(__atomic_load_n(&e->watcher, __ATOMIC_ACQUIRE));
}

void engine_close(struct engine *e)
{
	if (!e)
		return;
	engine_unwatch(e);
	watcher_free(e->watcher);
	snapshot_unref(e->current);
	free(e->config_given);
	free(e->config_path);
	strlist_free(&e->dirs);
	free(e->dirs_recursive);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->reload_lock);
	free(e);
}
