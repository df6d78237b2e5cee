#include "audit.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "fingerprint.h"
#include "pins.h"
#include "scan.h"

/* How long a reload's record waits for a database locked elsewhere. */
#define AUDIT_STORE_WAIT_MS 5000

/* How long a read of the audit file waits for the catch-up at mount. */
#define AUDIT_CATCH_UP_WAIT_MS 30000

struct audit {
	struct engine *engine;
	struct store *store;
	struct pin_history hist;
	pthread_mutex_t lock;   /* guards changed and caught_up */
	struct timespec changed;
	pthread_cond_t caught_up_cond;
	bool caught_up;         /* the catch-up has ended, recorded or not */
	pthread_t thread;       /* audit_start's catch-up */
	bool thread_started;
	int stop;               /* atomic: audit_close is waiting */
	int rc;                 /* the catch-up's result, with err */
	char *err;
};

/* ---- states and their differences (pure) ---- */

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* A skill as the trail remembers it. */
static json_t *skill_state(const struct config *c, const struct catalog_entry *e)
{
	char d[FP_TEXT_SIZE];
	if (e->scan)
		fp_format(e->scan->digest, d);
	return json_pack("{s:o, s:o, s:b, s:o}", "source",
			 str_or_null(e->source < c->nsources ? c->sources[e->source].path : NULL),
			 "digest", e->scan ? json_string(d) : json_null(), "valid", e->skill->valid,
			 "error", str_or_null(e->skill->error));
}

/* A pinned source as the trail remembers it. */
static json_t *pin_state(const struct source_pin *p)
{
	return json_pack("{s:s, s:s, s:b, s:o}", "expected", p->expected, "actual", p->actual,
			 "matched", p->matched, "message", str_or_null(p->message));
}

/* Member k of o, null when absent (for json_pack's "O"). */
static json_t *get(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return v ? v : json_null();
}

static const char *get_str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static bool same_str(const json_t *a, const json_t *b, const char *k)
{
	const char *x = get_str(a, k), *y = get_str(b, k);
	return (!x && !y) || (x && y && strcmp(x, y) == 0);
}

static int add(json_t *events, json_t *e)
{
	return e && json_array_append_new(events, e) == 0 ? 0 : -1;
}

static int skill_diff(const char *name, const json_t *was, const json_t *now, json_t *events)
{
	bool valid_was = json_is_true(get(was, "valid"));
	bool valid_now = json_is_true(get(now, "valid"));
	int rc = 0;
	if (!was) {
		rc = add(events, json_pack("{s:s, s:s, s:O, s:O, s:b}", "event", "skill_added",
					   "skill", name, "source", get(now, "source"),
					   "digest", get(now, "digest"), "valid",
					   valid_now));
	} else if (!now) {
		return add(events, json_pack("{s:s, s:s, s:O, s:O}", "event", "skill_removed",
					     "skill", name, "source", get(was, "source"),
					     "digest", get(was, "digest")));
	} else if (!same_str(was, now, "digest") || !same_str(was, now, "source")) {
		rc = add(events, json_pack("{s:s, s:s, s:O, s:O, s:O}", "event", "skill_changed",
					   "skill", name, "source", get(now, "source"),
					   "old_digest", get(was, "digest"), "new_digest",
					   get(now, "digest")));
	}
	if (rc == 0 && !valid_now && (!was || valid_was))
		rc = add(events, json_pack("{s:s, s:s, s:O}", "event", "skill_invalid", "skill",
					   name, "reason", get(now, "error")));
	else if (rc == 0 && was && valid_now && !valid_was)
		rc = add(events, json_pack("{s:s, s:s}", "event", "skill_valid", "skill", name));
	return rc;
}

static int source_diff(const char *path, const json_t *was, const json_t *now, json_t *events)
{
	if (!now)
		return add(events, json_pack("{s:s, s:s, s:O}", "event", "source_unpinned",
					     "source", path, "expected",
					     get(was, "expected")));
	bool matched = json_is_true(get(now, "matched"));
	if (was && json_is_true(get(was, "matched")) == matched &&
	    same_str(was, now, "actual") && same_str(was, now, "expected"))
		return 0;
	if (matched)
		return add(events, json_pack("{s:s, s:s, s:O}", "event", "source_pin_matched",
					     "source", path, "digest",
					     get(now, "actual")));
	return add(events, json_pack("{s:s, s:s, s:O, s:O, s:O}", "event", "source_pin_mismatch",
				     "source", path, "expected", get(now, "expected"),
				     "actual", get(now, "actual"), "reason",
				     get(now, "message")));
}

int audit_diff(const char *key, const json_t *was, const json_t *now, json_t *events)
{
	if (!was && !now)
		return 0;
	if (strncmp(key, "skill:", 6) == 0)
		return skill_diff(key + 6, was, now, events);
	if (strncmp(key, "source:", 7) == 0)
		return source_diff(key + 7, was, now, events);
	return 0;
}

/* Diffs one key and, when its state changed, keeps the new one (or null)
 * in states. Takes was and now. */
static int diff_key(const char *key, json_t *was, json_t *now, json_t *events, json_t *states)
{
	int rc = audit_diff(key, was, now, events);
	if (rc == 0 && !json_equal(was, now))
		rc = json_object_set(states, key, now ? now : json_null());
	json_decref(was);
	json_decref(now);
	return rc;
}

static int entry_key(char *key, size_t size, const char *name)
{
	return snprintf(key, size, "skill:%s", name) < (int)size ? 0 : -1;
}

static int config_events(const struct snapshot *old, const struct snapshot *now, json_t *events)
{
	const struct config *c = snapshot_config(now);
	if (now->config_error &&
	    (!old->config_error || strcmp(old->config_error, now->config_error) != 0))
		return add(events, json_pack("{s:s, s:o, s:s}", "event", "config_refused", "path",
					     str_or_null(c->path), "error", now->config_error));
	if (old->cfg != now->cfg)
		return add(events, json_pack("{s:s, s:o}", "event", "config_reloaded", "path",
					     str_or_null(c->path)));
	return 0;
}

/* The pin of source path in s, or NULL. */
static const struct source_pin *pin_at(const struct snapshot *s, const char *path)
{
	const struct config *c = snapshot_config(s);
	for (size_t i = 0; i < c->nsources && i < s->catalog->npins; i++)
		if (s->catalog->pins[i] && strcmp(c->sources[i].path, path) == 0)
			return s->catalog->pins[i];
	return NULL;
}

/* The events of pinned sources: each of now's whose pin is not the very
 * same as old's of that path, then each of old's no longer pinned. */
static int pin_changes(const struct snapshot *old, const struct snapshot *now, json_t *events,
		       json_t *states)
{
	char key[4200];
	int rc = 0;
	const struct config *c = snapshot_config(now);
	for (size_t i = 0; i < now->catalog->npins && i < c->nsources && rc == 0; i++) {
		const struct source_pin *p = now->catalog->pins[i];
		const struct source_pin *q = p ? pin_at(old, c->sources[i].path) : NULL;
		if (!p || p == q ||
		    snprintf(key, sizeof key, "source:%s", c->sources[i].path) >= (int)sizeof key)
			continue;
		json_t *was = q ? pin_state(q) : NULL, *is = pin_state(p);
		if (!is || (q && !was)) {
			json_decref(was);
			json_decref(is);
			return -1;
		}
		rc = diff_key(key, was, is, events, states);
	}
	c = snapshot_config(old);
	for (size_t i = 0; i < old->catalog->npins && i < c->nsources && rc == 0; i++) {
		const struct source_pin *p = old->catalog->pins[i];
		if (!p || pin_at(now, c->sources[i].path) ||
		    snprintf(key, sizeof key, "source:%s", c->sources[i].path) >= (int)sizeof key)
			continue;
		json_t *was = pin_state(p);
		rc = was ? diff_key(key, was, NULL, events, states) : -1;
	}
	return rc;
}

/* The events and states for the skill whose entry was x (in config ca;
 * NULL: it came) and is y (in cb; NULL: it went). 0 or -1 (ENOMEM). */
static int diff_entry(const struct config *ca, const struct catalog_entry *x,
		      const struct config *cb, const struct catalog_entry *y, json_t *events,
		      json_t *states)
{
	char key[128];
	if (entry_key(key, sizeof key, x ? x->skill->name : y->skill->name) < 0)
		return 0;
	json_t *was = x ? skill_state(ca, x) : NULL, *is = y ? skill_state(cb, y) : NULL;
	if ((x && !was) || (y && !is)) {
		json_decref(was);
		json_decref(is);
		return -1;
	}
	return diff_key(key, was, is, events, states);
}

int audit_changes(const struct snapshot *old, const struct snapshot *now, json_t *events,
		  json_t *states)
{
	const struct catalog *a = old->catalog, *b = now->catalog;
	const struct config *ca = snapshot_config(old), *cb = snapshot_config(now);
	int rc = config_events(old, now, events);
	if (rc == 0)
		rc = pin_changes(old, now, events, states);
	size_t i = 0, k = 0;
	/* An update of a's catalogue: only the skills it names can differ. */
	bool delta = b->delta.base == a && ca == cb;
	for (size_t d = 0; delta && rc == 0 && d < b->delta.names.n; d++) {
		const char *name = b->delta.names.items[d];
		const struct catalog_entry *x = catalog_find(a, name), *y = catalog_find(b, name);
		if (!(x && y && x->skill == y->skill && x->scan == y->scan && x->source == y->source))
			rc = diff_entry(ca, x, cb, y, events, states);
	}
	while (!delta && rc == 0 && (i < a->n || k < b->n)) {
		const struct catalog_entry *x = i < a->n ? &a->entries[i] : NULL;
		const struct catalog_entry *y = k < b->n ? &b->entries[k] : NULL;
		int c = !x ? 1 : !y ? -1 : strcmp(x->skill->name, y->skill->name);
		if (c == 0) {
			i++;
			k++;
			const char *px = x->source < ca->nsources ? ca->sources[x->source].path : "";
			const char *py = y->source < cb->nsources ? cb->sources[y->source].path : "";
			if (x->skill == y->skill && x->scan == y->scan && strcmp(px, py) == 0)
				continue;
		} else if (c < 0) {
			i++;
			y = NULL;
		} else {
			k++;
			x = NULL;
		}
		rc = diff_entry(ca, x, cb, y, events, states);
	}
	return rc;
}

/* ---- recording ---- */

static int64_t keep_of(const struct snapshot *s)
{
	long k = snapshot_config(s)->audit_keep;
	return k > 0 ? k : CONFIG_DEFAULT_AUDIT_KEEP;
}

static int last_match(void *ctx, const char *source, const char *digest, struct strlist *lines)
{
	struct audit *a = ctx;
	int rc = store_pin_match(a->store, source, digest, lines, NULL);
	return rc < 0 ? (rc == -ENOMEM ? -1 : 0) : rc;
}

/* Remembers the files of each pinned source of s that matches where its
 * state changed (in states): what a later mismatch is compared with. */
static void remember_matches(struct audit *a, const struct snapshot *s, const json_t *states)
{
	const struct config *c = snapshot_config(s);
	char key[4200], *err = NULL;
	for (size_t i = 0; i < s->catalog->npins && i < c->nsources; i++) {
		const struct source_pin *p = s->catalog->pins[i];
		if (!p || !p->matched ||
		    snprintf(key, sizeof key, "source:%s", c->sources[i].path) >= (int)sizeof key ||
		    !json_object_get(states, key))
			continue;
		if (store_pin_match_put(a->store, c->sources[i].path, p->actual, &p->lines, &err) < 0)
			fprintf(stderr, "skillfs: audit: cannot record the files of pinned source %s: "
				"%s\n", c->sources[i].path, err ? err : "out of memory");
		free(err);
		err = NULL;
	}
}

/* Stores events and states (both may be empty); says so in the log when
 * the database does not take them. */
static void record(struct audit *a, const struct snapshot *now, json_t *events, json_t *states)
{
	if (!json_array_size(events) && !json_object_size(states))
		return;
	char *err = NULL;
	/* A database locked by another process is waited for here, on the
	 * watcher's thread (the new snapshot already shows), holding nothing
	 * that a request needs. */
	int ready = store_wait_writable(a->store, AUDIT_STORE_WAIT_MS);
	if (ready < 0)
		fprintf(stderr, "skillfs: audit: the state database stayed locked by another "
			"process for %d ms: recording anyway\n", AUDIT_STORE_WAIT_MS);
	if (store_audit_record(a->store, events, states, keep_of(now), &err) < 0)
		fprintf(stderr, "skillfs: audit: %zu catalogue changes not recorded: %s\n",
			json_array_size(events), err ? err : "out of memory");
	free(err);
	remember_matches(a, now, states);
	if (json_array_size(events)) {
		pthread_mutex_lock(&a->lock);
		clock_gettime(CLOCK_REALTIME, &a->changed);
		pthread_mutex_unlock(&a->lock);
	}
}

static void on_reload(void *ctx, const struct snapshot *old, const struct snapshot *now)
{
	struct audit *a = ctx;
	json_t *events = json_array(), *states = json_object();
	if (!events || !states || audit_changes(old, now, events, states) < 0)
		fprintf(stderr, "skillfs: audit: out of memory: catalogue changes not recorded\n");
	else
		record(a, now, events, states);
	json_decref(events);
	json_decref(states);
}

/* catch_up goes through the stored states and the catalogue this many
 * keys at a time, recording each part in a transaction of its own: what
 * it holds does not grow with the catalogue (every skill's state and
 * event at once took 90 MB at 50,000 skills, which the allocator kept). */
#define CATCH_UP_CHUNK 512

struct catch_up {
	struct audit *a;
	const struct snapshot *s;
	json_t *events, *states;
	char **err;
};

/* Records what c gathered: the trail is trimmed (keep) only by the last
 * part, as when everything was one transaction. Returns 0 or -errno. */
static int catch_up_flush(struct catch_up *c, bool last)
{
	if (!last && !json_array_size(c->events) && !json_object_size(c->states))
		return 0;
	int rc = store_audit_record(c->a->store, c->events, c->states,
				    last ? keep_of(c->s) : INT64_MAX / 4, c->err);
	if (rc == 0)
		remember_matches(c->a, c->s, c->states);
	json_array_clear(c->events);
	json_object_clear(c->states);
	return rc;
}

/* Diffs key (was: its stored state or NULL; now: NULL when gone; both
 * taken) into c, recording once a chunk's worth has gathered. */
static int catch_up_key(struct catch_up *c, const char *key, json_t *was, json_t *now)
{
	if (diff_key(key, was, now, c->events, c->states) < 0)
		return -ENOMEM;
	if (json_object_size(c->states) < CATCH_UP_CHUNK &&
	    json_array_size(c->events) < CATCH_UP_CHUNK)
		return 0;
	return catch_up_flush(c, false);
}

/* Whether audit_close is waiting: the catch-up stops before its next
 * part (what it recorded stays; the next catch-up records the rest). */
static bool cut_short(const struct catch_up *c)
{
	return __atomic_load_n(&c->a->stop, __ATOMIC_ACQUIRE);
}

/* Whether key is one of snapshot s's: a skill of its catalogue, or a
 * pinned source. */
static bool key_now(const struct snapshot *s, const char *key)
{
	if (strncmp(key, "skill:", 6) == 0)
		return catalog_find(s->catalog, key + 6) != NULL;
	if (strncmp(key, "source:", 7) == 0)
		return pin_at(s, key + 7) != NULL;
	return false;
}

/* The stored keys that s no longer has, as gone, in key order. */
static int catch_up_gone(struct catch_up *c)
{
	char *from = NULL;
	int rc = 0;
	for (bool more = true; more && rc == 0;) {
		if (cut_short(c)) {
			free(from);
			return -ECANCELED;
		}
		json_t *known = NULL;
		rc = store_audit_state_range(c->a->store, from, NULL, CATCH_UP_CHUNK, &known,
					     c->err);
		more = rc == 0 && json_object_size(known) == CATCH_UP_CHUNK;
		const char *key, *last = NULL;
		json_t *v;
		json_object_foreach(known, key, v) {
			if (rc == 0 && !key_now(c->s, key))
				rc = catch_up_key(c, key, json_incref(v), NULL);
			last = key;
		}
		/* The next page starts at the least key after the last (no key
		 * holds a NUL, so that is last + "\x01"); keys recorded gone
		 * meanwhile are before it. */
		free(from);
		from = NULL;
		if (rc == 0 && more && asprintf(&from, "%s\x01", last) < 0) {
			from = NULL;
			rc = -ENOMEM;
		}
		json_decref(known);
	}
	free(from);
	return rc;
}

/* Every key of s and its state, in the catalogue's order (by name: the
 * stored keys' order too), then the pinned sources. */
static int catch_up_now(struct catch_up *c)
{
	const struct snapshot *s = c->s;
	const struct config *cf = snapshot_config(s);
	char key[4200], first[4200];
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < s->catalog->n; i += CATCH_UP_CHUNK) {
		size_t end = i + CATCH_UP_CHUNK < s->catalog->n ? i + CATCH_UP_CHUNK : s->catalog->n;
		json_t *known = NULL;
		if (cut_short(c))
			return -ECANCELED;
		if (entry_key(first, sizeof first, s->catalog->entries[i].skill->name) < 0 ||
		    entry_key(key, sizeof key, s->catalog->entries[end - 1].skill->name) < 0)
			rc = -ENAMETOOLONG; /* (names are 64 bytes at most) */
		else
			rc = store_audit_state_range(c->a->store, first, key, 0, &known, c->err);
		for (size_t k = i; rc == 0 && k < end; k++) {
			const struct catalog_entry *e = &s->catalog->entries[k];
			if (entry_key(key, sizeof key, e->skill->name) < 0)
				continue;
			json_t *now = skill_state(cf, e);
			rc = now ? catch_up_key(c, key, json_incref(json_object_get(known, key)), now)
				 : -ENOMEM;
		}
		json_decref(known);
	}
	for (size_t i = 0; rc == 0 && i < s->catalog->npins && i < cf->nsources; i++) {
		const struct source_pin *p = s->catalog->pins[i];
		if (!p || snprintf(key, sizeof key, "source:%s", cf->sources[i].path) >= (int)sizeof key)
			continue;
		json_t *known = NULL, *now = pin_state(p);
		rc = now ? store_audit_state_range(c->a->store, key, key, 1, &known, c->err) : -ENOMEM;
		if (rc == 0)
			rc = catch_up_key(c, key, json_incref(json_object_get(known, key)), now);
		else
			json_decref(now);
		json_decref(known);
	}
	return rc;
}

/* Records what changed since the trail last saw the catalogue: the keys
 * gone first, then each key now (audit_diff), a chunk at a time. */
static int catch_up(struct audit *a, const struct snapshot *s, char **err)
{
	struct catch_up c = { a, s, json_array(), json_object(), err };
	int rc = c.events && c.states ? catch_up_gone(&c) : -ENOMEM;
	if (rc == 0)
		rc = catch_up_now(&c);
	if (rc == 0)
		rc = catch_up_flush(&c, true);
	json_decref(c.events);
	json_decref(c.states);
	return rc;
}

/* Under the engine's reload lock (engine_follow_reloads), before the
 * hooks are set: trims the trail and records what changed since it last
 * saw the catalogue, into a->rc and a->err. */
static void catch_up_first(void *ctx, const struct snapshot *now)
{
	struct audit *a = ctx;
	a->rc = store_audit_trim(a->store, keep_of(now), &a->err);
	if (a->rc == 0)
		a->rc = catch_up(a, now, &a->err);
}

/* Catches up and follows the reloads from then on; a pinned source that
 * does not match says which files differ from the history only now at
 * hand: one more reload. */
static void catch_up_and_follow(struct audit *a)
{
	engine_follow_reloads(a->engine, catch_up_first, on_reload, a, &a->hist);
	pthread_mutex_lock(&a->lock);
	a->caught_up = true;
	pthread_cond_broadcast(&a->caught_up_cond);
	pthread_mutex_unlock(&a->lock);
	if (a->rc < 0 || __atomic_load_n(&a->stop, __ATOMIC_ACQUIRE))
		return;
	struct snapshot *s = engine_snapshot(a->engine);
	bool mismatch = false;
	for (size_t i = 0; i < s->catalog->npins; i++)
		mismatch |= s->catalog->pins[i] && !s->catalog->pins[i]->matched;
	snapshot_unref(s);
	if (mismatch)
		engine_reload(a->engine, false, NULL);
}

static void *catch_up_main(void *arg)
{
	struct audit *a = arg;
	catch_up_and_follow(a);
	if (a->rc < 0 && a->rc != -ECANCELED)
		fprintf(stderr, "skillfs: audit: what changed while unmounted is not "
			"recorded: %s\n", a->err ? a->err : strerror(-a->rc));
	return NULL;
}

static struct audit *audit_new(struct engine *e, struct store *st, char **err)
{
	*err = NULL;
	struct audit *a = calloc(1, sizeof *a);
	if (!a) {
		*err = strdup("out of memory");
		return NULL;
	}
	a->engine = e;
	a->store = st;
	a->hist = (struct pin_history){ last_match, a, 1 };
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->caught_up_cond, NULL);
	clock_gettime(CLOCK_REALTIME, &a->changed);
	return a;
}

static void audit_free(struct audit *a)
{
	engine_set_reload_hook(a->engine, NULL, NULL);
	engine_set_pin_history(a->engine, NULL);
	pthread_cond_destroy(&a->caught_up_cond);
	pthread_mutex_destroy(&a->lock);
	free(a->err);
	free(a);
}

struct audit *audit_open(struct engine *e, struct store *st, char **err)
{
	struct audit *a = audit_new(e, st, err);
	if (!a)
		return NULL;
	catch_up_and_follow(a);
	if (a->rc < 0) {
		*err = a->err ? a->err : strdup("out of memory");
		a->err = NULL;
		audit_free(a);
		return NULL;
	}
	return a;
}

struct audit *audit_start(struct engine *e, struct store *st, char **err)
{
	struct audit *a = audit_new(e, st, err);
	if (!a)
		return NULL;
	if (pthread_create(&a->thread, NULL, catch_up_main, a) != 0) {
		/* No thread: caught up here, as audit_open. */
		catch_up_main(a);
		return a;
	}
	pthread_setname_np(a->thread, "skillfs-audit");
	a->thread_started = true;
	return a;
}

void audit_close(struct audit *a)
{
	if (!a)
		return;
	__atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
	if (a->thread_started)
		pthread_join(a->thread, NULL);
	audit_free(a);
}

/* Waits (bounded) for the catch-up at mount: the file shows the trail
 * with what changed while unmounted, not without. */
static void wait_caught_up(struct audit *a)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += AUDIT_CATCH_UP_WAIT_MS / 1000;
	pthread_mutex_lock(&a->lock);
	while (!a->caught_up &&
	       pthread_cond_timedwait(&a->caught_up_cond, &a->lock, &until) == 0)
		;
	pthread_mutex_unlock(&a->lock);
}

int audit_file_size(struct audit *a, uint64_t *size, struct timespec *mtime)
{
	wait_caught_up(a);
	int rc = store_audit_size(a->store, size, NULL);
	pthread_mutex_lock(&a->lock);
	*mtime = a->changed;
	pthread_mutex_unlock(&a->lock);
	return rc;
}

ssize_t audit_file_read(struct audit *a, uint64_t off, size_t size, char *dst)
{
	wait_caught_up(a);
	struct buf b = { 0 };
	int rc = store_audit_read(a->store, off, size, &b, NULL);
	if (rc < 0) {
		buf_free(&b);
		return rc;
	}
	size_t n = b.len < size ? b.len : size;
	if (n)
		memcpy(dst, b.data, n);
	buf_free(&b);
	return (ssize_t)n;
}
