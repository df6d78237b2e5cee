/* runs: the run manager (see runs.h).
 *
 * One file past 1,200 lines: the table of runs, the queue, the workers, the
 * run files and the writers all work on `struct run` under one lock, and
 * the lock's rules (what may be touched while held, what is done outside
 * it) are easier to keep right when they are read in one place. */
#include "runs.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "audit.h"
#include "clock.h"
#include "dbwatch.h"
#include "engine.h"
#include "filecache.h"
#include "grants.h"
#include "grow.h"
#include "json_text.h"
#include "model.h"
#include "provenance.h"
#include "resolution.h"
#include "statelock.h"
#include "store.h"
#include "tools.h"
#include "workdir.h"
#include "workspace.h"

_Static_assert(RUN_ID_MAX <= FILECACHE_ID_MAX, "every run id fits a file cache entry");

#define INPUT_MAX (256 * 1024)
#define CONFIG_NAME_MAX 64
#define SKILLS_FILE_MAX (64 * 1024)
/* What the cache of rendered large run files keeps at most (filecache). */
#define FILECACHE_ENTRIES 32
#define FILECACHE_BYTES ((size_t)512 << 20)

/* What the mount needs to know about a run without asking the store. */
struct run {
	char id[RUN_ID_MAX + 1];
	uint64_t serial;         /* tells this run from an earlier one of its id */
	uid_t uid;               /* who made it (its mkdir's caller) */
	gid_t gid;
	enum runstate state;
	struct timespec changed; /* last change of anything: the files' mtime */
	/* Before the prompt is closed: */
	struct buf prompt;
	bool prompt_written;
	bool prompt_refused; /* a write was refused: nothing starts until the
				prompt is written again from its start (D9:
				nothing half-done) */
	unsigned prompt_writers; /* opens of prompt that may write: the last */
	unsigned input_writers;  /* close of one starts the run (or answers) */
	char *config;
	struct strlist forced;
	/* While waiting for input: */
	struct buf input;
	bool input_written;
	struct buf config_file; /* config / skills bytes as written, before */
	struct buf skills_file; /* they are checked and taken */
	char *workdir;          /* the project directory, resolved; NULL: none */
	struct buf workdir_file; /* workdir bytes as written */
	uint64_t workdir_gen;   /* counts changes of workdir_file */
	bool busy;             /* a worker is running it */
	unsigned holds;        /* files of it open (runs_hold): runs.keep spares it */
	bool cancel_requested; /* ctl cancel while busy */
	/* Its worker waits for the store (wait_for_store): */
	int64_t store_failed_ms; /* CLOCK_MONOTONIC of the first failed try */
	int64_t parked_ms;       /* ... and of parking it; 0: not parked */
	char *parked;            /* why it is parked (info.json), or NULL */
	/* Its worker found a skill's text stale (stale_wait): since when
	 * (CLOCK_MONOTONIC), 0: not. */
	int64_t stale_ms;
	/* A model reply streaming in (agent_env.partial), shown in the
	 * transcript until it is committed: */
	struct buf partial;
	char *partial_chat; /* NULL: none */
	size_t partial_after;
};

struct waiter {
	uint64_t handle;
	char id[RUN_ID_MAX + 1];
	runs_wait_fn fn;
	void *arg;
	struct waiter *next;
};

/* How long a model prepared for a prompt being written waits for its run
 * before it is ended (the prompt was kept open, or never closed). */
#define SPARE_MAX_AGE_MS 3000

struct runs {
	struct engine *engine;
	struct store *store;
	struct audit *audit; /* the catalogue's audit trail in the store
	                        (runs_attach), or NULL */
	char *state_dir;  /* the state database's directory */
	char *workspaces; /* directory holding one workspace per run */
	struct tool_schemas tool_schemas; /* parsed and encoded once (agent_env) */

	pthread_mutex_t lock;
	pthread_cond_t work;
	struct run **runs; /* sorted by id */
	size_t n, cap;
	struct strlist queue; /* ids, FIFO from queue_head */
	size_t queue_head;
	struct waiter *waiters;
	uint64_t next_handle;
	uint64_t next_serial;
	/* A model made and prepared ahead of the next run (struct spare),
	 * wanted when a prompt is opened for writing, made by an idle
	 * worker, taken by the next run a worker starts. */
	struct spare *spare;
	bool spare_wanted, spare_making;
	bool stopping;

	pthread_t *workers; /* the run workers, then the keeper (runs.keep) */
	int nworkers;
	pthread_cond_t keep_cond; /* wakes the keeper: a run settled, or a stop */
	pthread_cond_t let_go;    /* a worker let go of its run (busy cleared) */
	bool keep_due;

	runs_change_fn change_fn;
	void *change_arg;

	struct filecache *files; /* rendered transcripts, messages.json, events */

	bool allow_other; /* other users reach the mount: runs are private */
	uid_t daemon_uid; /* the owner of runs made before owners were kept */
	gid_t daemon_gid;

	struct timespec listing_changed; /* runs/ mtime: a run came or went */
	struct timespec opened; /* runs/new's mtime: its content is new at
				   each read, its attributes never change (tar
				   checks them around a read) */
	struct dbwatch dbwatch; /* the database's file deleted or replaced */
};

/* ---- the table of runs (call with lock held) ---- */

static long run_index(struct runs *r, const char *id, bool *found)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(id, r->runs[mid]->id);
		if (c == 0) {
			*found = true;
			return (long)mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = false;
	return (long)lo;
}

/* The run called id, or NULL. An id that is not valid names no run: it
 * is never cut to fit (a 65-character name is not the run of its first
 * 64). */
static struct run *run_find(struct runs *r, const char *id)
{
	if (!runs_id_valid(id))
		return NULL;
	bool found;
	long i = run_index(r, id, &found);
	return found ? r->runs[i] : NULL;
}

static void run_free(struct run *run)
{
	if (!run)
		return;
	buf_free(&run->prompt);
	buf_free(&run->input);
	buf_free(&run->config_file);
	buf_free(&run->skills_file);
	buf_free(&run->workdir_file);
	free(run->workdir);
	free(run->config);
	free(run->parked);
	buf_free(&run->partial);
	free(run->partial_chat);
	strlist_free(&run->forced);
	free(run);
}

static struct run *run_insert(struct runs *r, const char *id, enum runstate state, uid_t uid,
			      gid_t gid)
{
	if (!runs_id_valid(id))
		return NULL;
	bool found;
	long i = run_index(r, id, &found);
	if (found)
		return r->runs[i];
	struct run **p = grow(r->runs, &r->cap, r->n, sizeof *p, 64);
	if (!p)
		return NULL;
	r->runs = p;
	struct run *run = calloc(1, sizeof *run);
	if (!run)
		return NULL;
	snprintf(run->id, sizeof run->id, "%s", id);
	run->serial = ++r->next_serial;
	run->state = state;
	run->uid = uid;
	run->gid = gid;
	run->config = strdup("default");
	if (!run->config) {
		free(run);
		return NULL;
	}
	clock_gettime(CLOCK_REALTIME, &run->changed);
	memmove(&r->runs[i + 1], &r->runs[i], (r->n - (size_t)i) * sizeof *r->runs);
	r->runs[i] = run;
	r->n++;
	return run;
}

static void run_delete(struct runs *r, const char *id)
{
	bool found;
	long i = run_index(r, id, &found);
	if (!found)
		return;
	run_free(r->runs[i]);
	memmove(&r->runs[i], &r->runs[i + 1], (r->n - (size_t)i - 1) * sizeof *r->runs);
	r->n--;
}

static int queue_push(struct runs *r, const char *id)
{
	if (r->queue_head > 64 && r->queue_head * 2 > r->queue.n) {
		/* Drop the consumed prefix now and then. */
		for (size_t i = 0; i < r->queue_head; i++)
			free(r->queue.items[i]);
		memmove(r->queue.items, r->queue.items + r->queue_head,
			(r->queue.n - r->queue_head) * sizeof *r->queue.items);
		r->queue.n -= r->queue_head;
		r->queue_head = 0;
	}
	int rc = strlist_add(&r->queue, id);
	if (rc == 0)
		pthread_cond_signal(&r->work);
	return rc;
}

/* ---- notifications ---- */

static void notify(struct runs *r, const char *id, unsigned what)
{
	if (r->change_fn && what)
		r->change_fn(r->change_arg, id, what);
}

/* Takes the waiters of id that should be answered now (all of them when
 * err is set), for calling outside the lock. */
static struct waiter *take_waiters(struct runs *r, const char *id, bool all)
{
	struct waiter *done = NULL, **pp = &r->waiters;
	while (*pp) {
		struct waiter *w = *pp;
		if (all || strcmp(w->id, id) == 0) {
			*pp = w->next;
			w->next = done;
			done = w;
		} else {
			pp = &w->next;
		}
	}
	return done;
}

static void answer_waiters(struct waiter *w, int err, const char *status)
{
	while (w) {
		struct waiter *next = w->next;
		w->fn(w->arg, err, status);
		free(w);
		w = next;
	}
}

/* Re-reads the state of a run after the store changed it, and tells
 * waiters, and the mount when what it lists may have changed: the state
 * (result, error, pending come and go with it) or, with new_files, the
 * sub-agents. Other files of a run are never cached by the kernel. From a
 * worker (not a request handler), the mount shows the change before the
 * waiters are answered, so a script that lists the run after `cat wait`
 * sees its result. */
static void refresh_files(struct runs *r, const char *id, bool new_files, bool worker)
{
	enum runstate st = RUNSTATE_CREATED;
	struct waiter *ready = NULL;
	bool state_changed = false;
	/* The store is read under the lock, so the last refresh to take the
	 * lock sees the last state written: no stale state can win. */
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	if (run) {
		bool have = store_run_state(r->store, id, &st, NULL) == 0;
		clock_gettime(CLOCK_REALTIME, &run->changed);
		if (have && st != run->state) {
			run->state = st;
			state_changed = true;
		}
		if (have && runstate_is_settled(st))
			ready = take_waiters(r, id, false);
		if (state_changed && runstate_is_terminal(st)) {
			r->keep_due = true; /* runs.keep.count may now be passed */
			pthread_cond_signal(&r->keep_cond);
		}
	}
	pthread_mutex_unlock(&r->lock);
	unsigned what = (state_changed ? RUN_CHANGED_STATE : 0) |
			(new_files ? RUN_CHANGED_SUBAGENTS : 0);
	if (worker && what)
		notify(r, id, what | RUN_CHANGED_NOW);
	answer_waiters(ready, 0, runstate_name(st));
	if (!worker)
		notify(r, id, what);
}

static void refresh(struct runs *r, const char *id)
{
	refresh_files(r, id, false, false);
}

/* refresh from a worker thread. */
static void refresh_from_worker(struct runs *r, const char *id)
{
	refresh_files(r, id, false, true);
}

/* ---- ids ---- */

bool runs_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > RUN_ID_MAX || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return false;
	/* The names of runs/' own files. */
	if (strcmp(id, "new") == 0 || strcmp(id, RUNS_ERROR_NAME) == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* A new id from the clock and a little randomness: sorts by creation time
 * in `ls runs`, and scripts that read runs/new at the same moment get
 * different ids (24 random bits). Called with the lock held. */
static void make_id(struct runs *r, char *out, size_t size)
{
	do {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		struct tm tm;
		gmtime_r(&ts.tv_sec, &tm);
		unsigned char rnd[3] = { 0 };
		if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
			rnd[0] = (unsigned char)ts.tv_nsec;
			rnd[1] = (unsigned char)(ts.tv_nsec >> 8);
			rnd[2] = (unsigned char)(ts.tv_nsec >> 16);
		}
		snprintf(out, size, "%04d%02d%02d-%02d%02d%02d-%02x%02x%02x", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rnd[0], rnd[1],
			 rnd[2]);
	} while (run_find(r, out));
}

void runs_new_id(struct runs *r, char *out, size_t size, struct timespec *mtime)
{
	pthread_mutex_lock(&r->lock);
	make_id(r, out, size);
	pthread_mutex_unlock(&r->lock);
	if (mtime)
		*mtime = r->opened;
}

/* ---- the workers ---- */

static bool run_cancelled(void *arg)
{
	struct run *run = arg;
	return __atomic_load_n(&run->cancel_requested, __ATOMIC_ACQUIRE);
}

struct worker_ctx {
	struct runs *r;
};

static bool runs_stopping(void *arg)
{
	struct runs *r = arg;
	return __atomic_load_n(&r->stopping, __ATOMIC_ACQUIRE);
}

static void progress(void *arg, const char *id, bool new_files)
{
	refresh_files(arg, id, new_files, true);
}

/* The resolution of configuration cfg with forced skills: the snapshot's
 * own (built once per snapshot and kept by it) when nothing is forced,
 * else a new one returned in *owned for the caller to free. */
static const struct resolution *resolve_run(struct snapshot *s, const struct configuration *cfg,
					    const char **forced, size_t nforced,
					    struct resolution **owned)
{
	const struct config *c = snapshot_config(s);
	*owned = NULL;
	if (nforced == 0)
		return snapshot_resolution(s, (size_t)(cfg - c->configs));
	*owned = resolution_build(c, s->catalog, cfg, forced, nforced);
	return *owned;
}

/* A line in the daemon's log (its stderr) about run id. */
__attribute__((format(printf, 2, 3)))
static void run_log(const char *id, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "skillfs: run %s: %s\n", id, line);
}

/* A worker's commit that failed for a reason the store may get over is
 * tried again after STORE_RETRY_FIRST_MS, doubling up to
 * STORE_RETRY_MAX_MS; past STORE_PARK_AFTER_MS of failures the run is
 * parked (its state as it was, a log line and info.json say why) and
 * tried every STORE_RETRY_MAX_MS until the store takes it. */
#define STORE_RETRY_FIRST_MS 50
#define STORE_RETRY_MAX_MS 1000
#define STORE_PARK_AFTER_MS 3000

/* Sleeps ms unless the daemon stops meanwhile; false when it does. */
static bool nap(struct runs *r, int64_t ms)
{
	int64_t until = clock_ms() + ms;
	for (;;) {
		if (__atomic_load_n(&r->stopping, __ATOMIC_ACQUIRE))
			return false;
		int64_t left = until - clock_ms();
		if (left <= 0)
			return true;
		if (left > 100)
			left = 100;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = left * 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* agent_env.partial for the workers: keeps the text streaming in for the
 * transcript, and marks the run changed so that a reader (a `tail -f`
 * that looks at its size, an open file that renders again) sees it. */
static void show_partial(void *arg, const char *id, const char *chat_id, size_t after,
			 const char *text, size_t len)
{
	struct runs *r = arg;
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	if (run) {
		buf_free(&run->partial);
		free(run->partial_chat);
		run->partial_chat = NULL;
		/* Out of memory: shown without it, as if not streamed. */
		if (text && buf_append(&run->partial, text, len) == 0 &&
		    !(run->partial_chat = strdup(chat_id)))
			buf_free(&run->partial);
		run->partial_after = after;
		clock_gettime(CLOCK_REALTIME, &run->changed);
	}
	pthread_mutex_unlock(&r->lock);
}

/* agent_env.store_wait for the workers (see agent.h): backs off, parks
 * the run past STORE_PARK_AFTER_MS, and tells when the store took a
 * commit again (a log line; events "parked" and "resumed" are stored
 * then, as they could not be before). */
static bool wait_for_store(void *arg, const char *id, int rc, const char *err,
			   unsigned attempt)
{
	struct runs *r = arg;
	int64_t now = clock_ms();
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	if (!run) {
		pthread_mutex_unlock(&r->lock);
		return false;
	}
	if (rc == 0) {
		char *why = run->parked;
		int64_t parked_ms = run->parked_ms;
		run->parked = NULL;
		if (parked_ms)
			clock_gettime(CLOCK_REALTIME, &run->changed); /* info.json */
		run->parked_ms = run->store_failed_ms = 0;
		pthread_mutex_unlock(&r->lock);
		if (parked_ms) {
			double secs = (double)(now - parked_ms) / 1000.0;
			run_log(id, "resumed: the state database takes its commits again "
				"(parked %.1f s)", secs);
			json_t *ev = json_pack("{s:s?}", "reason", why);
			char *e = NULL;
			if (!ev || store_event_append(r->store, id, "parked", ev, NULL, &e) < 0)
				run_log(id, "the event saying it was parked was not stored: %s",
					e ? e : "out of memory");
			json_decref(ev);
			free(e);
			ev = json_pack("{s:f}", "parked_seconds", secs);
			e = NULL;
			if (!ev || store_event_append(r->store, id, "resumed", ev, NULL, &e) < 0)
				run_log(id, "the event saying it resumed was not stored: %s",
					e ? e : "out of memory");
			json_decref(ev);
			free(e);
			refresh_from_worker(r, id);
		}
		free(why);
		return false;
	}
	if (attempt == 0 && !run->parked_ms)
		run->store_failed_ms = now;
	bool park = !run->parked_ms && now - run->store_failed_ms >= STORE_PARK_AFTER_MS;
	if (park) {
		char *why = NULL;
		if (asprintf(&why, "the state database cannot take the run's next step (%s): %s",
			     strerror(-rc), err ? err : "no detail") < 0)
			why = NULL;
		free(run->parked);
		run->parked = why;
		run->parked_ms = now;
		/* info.json says so: a rendering of it from before is old. */
		clock_gettime(CLOCK_REALTIME, &run->changed);
	}
	pthread_mutex_unlock(&r->lock);
	if (park)
		run_log(id, "parked, state unchanged: the state database cannot commit its next "
			"step (%s): %s; it is tried again every %d ms and goes on by itself once "
			"the store works", strerror(-rc), err ? err : "no detail",
			STORE_RETRY_MAX_MS);
	int64_t delay = STORE_RETRY_FIRST_MS;
	for (unsigned i = 0; i < attempt && delay < STORE_RETRY_MAX_MS; i++)
		delay *= 2;
	return nap(r, delay < STORE_RETRY_MAX_MS ? delay : STORE_RETRY_MAX_MS);
}

/* Fails a run that cannot start, from whatever state it is in; a store
 * that cannot take that now is waited for as a worker's commit is (the
 * run stays as it is when the daemon stops meanwhile). */
static void fail_run(struct runs *r, const char *id, enum runstate from, const char *msg)
{
	struct run_change ch = { .error = msg };
	char *err = NULL;
	int rc;
	for (unsigned attempt = 0;; attempt++) {
		rc = store_run_transition(r->store, id, from, RUNSTATE_FAILED, &ch, &err);
		bool recoverable = rc == -EAGAIN || rc == -ENOSPC || rc == -EDQUOT ||
				   rc == -EROFS || rc == -EIO;
		if (rc == 0 && attempt)
			wait_for_store(r, id, 0, NULL, attempt);
		if (rc == 0 || !recoverable || !wait_for_store(r, id, rc, err, attempt))
			break;
		free(err);
		err = NULL;
	}
	if (rc < 0 && rc != -EBUSY)
		run_log(id, "could not be failed (%s): %s; it is left as it is", msg,
			err ? err : strerror(-rc));
	free(err);
	refresh_from_worker(r, id);
}

/* A model made and prepared when a prompt was opened for writing, for
 * the run about to come: its program loads while the prompt is written
 * and the run stored. Good for the snapshot it was made from, for at most
 * SPARE_MAX_AGE_MS. */
struct spare {
	struct model *model;
	struct snapshot *snapshot;
	int64_t made_ms; /* CLOCK_MONOTONIC */
};

static void spare_free(struct spare *sp)
{
	if (!sp)
		return;
	model_free(sp->model);
	if (sp->snapshot)
		snapshot_unref(sp->snapshot);
	free(sp);
}

/* A spare, or NULL when the model's provider has nothing to prepare (or
 * it failed: the run itself reports that). */
static struct spare *spare_make(struct runs *r)
{
	struct spare *sp = calloc(1, sizeof *sp);
	if (!sp)
		return NULL;
	sp->snapshot = engine_snapshot(r->engine);
	char *err = NULL;
	sp->model = model_new(&snapshot_config(sp->snapshot)->model, &err);
	free(err);
	if (!model_prepare(sp->model)) {
		spare_free(sp);
		return NULL;
	}
	sp->made_ms = clock_ms();
	return sp;
}

/* The spare's model (the caller's from now) when it was made from
 * snapshot s, else NULL; frees the spare. */
static struct model *spare_take(struct spare *sp, const struct snapshot *s)
{
	struct model *m = NULL;
	if (sp && sp->snapshot == s) {
		m = sp->model;
		sp->model = NULL;
	}
	spare_free(sp);
	return m;
}

/* workdir_check under config c: its roots, and nothing skillfs keeps to
 * itself (the state directory, the skill sources). */
static int check_workdir(struct runs *r, const struct config *c, const char *path,
			 char **resolved, char **why)
{
	struct strlist avoid = { 0 };
	int rc = strlist_add(&avoid, r->state_dir) < 0 ? -ENOMEM : 0;
	for (size_t i = 0; rc == 0 && i < c->nsources; i++)
		if (strlist_add(&avoid, c->sources[i].path) < 0)
			rc = -ENOMEM;
	if (rc == 0)
		rc = workdir_check(&c->workdir_roots, path, &avoid, resolved, why);
	strlist_free(&avoid);
	return rc;
}

/* A knowledge skill's text is read from its SKILL.md when the system
 * prompt is assembled; a file changed on disk since the snapshot was made
 * reads as stale (ESTALE) until the watcher has reloaded it, moments
 * later. A run meeting that goes back to the queue, taken again after
 * STALE_NAP_MS with the snapshot then current, for STALE_WAIT_MS at most
 * in all; then it fails saying why. */
#define STALE_NAP_MS 50
#define STALE_WAIT_MS 5000

/* For execute, whose run id (from: its state) met a stale skill text:
 * 1 when it is to go back to the queue (after the nap); 0 when it has
 * waited long enough (fail it); -1 when the daemon stops meanwhile (left
 * as it is) or a cancel came (cancelled here). */
static int stale_wait(struct runs *r, struct run *run, enum runstate from)
{
	int64_t now = clock_ms();
	pthread_mutex_lock(&r->lock);
	if (!run->stale_ms)
		run->stale_ms = now;
	bool more = now - run->stale_ms < STALE_WAIT_MS;
	pthread_mutex_unlock(&r->lock);
	if (!more)
		return 0;
	if (!nap(r, STALE_NAP_MS))
		return -1;
	if (!run_cancelled(run))
		return 1;
	/* ctl cancel while busy: the agent would have seen it; not started */
	if (store_run_transition(r->store, run->id, from, RUNSTATE_CANCELLED, NULL, NULL) < 0)
		run_log(run->id, "a cancel while it waited for a skill's reload was not stored");
	return -1;
}

/* Runs (or resumes) run; queued says it was taken from the queue not yet
 * started, as far as memory knows (the store decides). Returns true when
 * the run is to go back to the queue (stale_wait). */
static bool execute(struct runs *r, struct run *run, bool queued, struct spare *spare)
{
	const char *id = run->id;
	struct snapshot *s = engine_snapshot(r->engine);
	const struct config *c = snapshot_config(s);
	/* The model is the same for every run. A run that has not started
	 * calls it first: its program loads while the run is read, set up
	 * and its start committed (if no spare has it loading already). */
	char *merr = NULL;
	struct model *model = spare_take(spare, s);
	if (!model) {
		model = model_new(&c->model, &merr);
		if (model && queued)
			model_prepare(model);
	}
	struct run_row row;
	char *gerr = NULL;
	int grc;
	enum runstate st = RUNSTATE_CREATED;
	bool damaged = false;
	for (unsigned attempt = 0;; attempt++) {
		grc = store_run_get(r->store, id, &row, &gerr);
		/* A row that cannot be read while its state can is damaged:
		 * the run can never go on. Anything else is the store's and
		 * is waited for. */
		damaged = grc < 0 && grc != -ENOENT &&
			  store_run_state(r->store, id, &st, NULL) == 0;
		if (grc == 0 && attempt)
			wait_for_store(r, id, 0, NULL, attempt);
		if (grc == 0 || grc == -ENOENT || damaged ||
		    !wait_for_store(r, id, grc, gerr, attempt))
			break;
		free(gerr);
		gerr = NULL;
	}
	if (grc < 0) {
		if (damaged && (st == RUNSTATE_QUEUED || st == RUNSTATE_RUNNING)) {
			char why[1024];
			snprintf(why, sizeof why, "the run's stored row cannot be read: %s",
				 gerr ? gerr : strerror(-grc));
			run_log(id, "%s", why);
			fail_run(r, id, st, why);
		}
		free(gerr);
		model_free(model);
		free(merr);
		snapshot_unref(s);
		return false;
	}
	free(gerr);
	enum runstate from = row.state;
	if (from != RUNSTATE_QUEUED && from != RUNSTATE_RUNNING) {
		model_free(model);
		free(merr);
		snapshot_unref(s);
		run_row_free(&row);
		return false;
	}
	bool again = false;
	char msg[PATH_MAX + 256];
	struct resolution *owned = NULL;
	const struct resolution *res = NULL;
	struct grants stored = { 0 }, allow = { 0 };
	bool have_stored = false;
	const char **forced = NULL;
	char *workdir = NULL;

	const struct configuration *cfg = config_find(c, row.config);
	if (!cfg) {
		snprintf(msg, sizeof msg,
			 "configuration '%s' no longer exists in the config file; the run cannot start",
			 row.config);
		fail_run(r, id, from, msg);
		goto out;
	}
	if (!model) {
		snprintf(msg, sizeof msg, "cannot start the model: %s", merr ? merr : "out of memory");
		fail_run(r, id, from, msg);
		goto out;
	}
	size_t nforced = json_array_size(row.forced_skills);
	forced = calloc(nforced ? nforced : 1, sizeof *forced);
	if (!forced)
		goto out;
	for (size_t i = 0; i < nforced; i++)
		forced[i] = json_string_value(json_array_get(row.forced_skills, i));
	res = resolve_run(s, cfg, forced, nforced, &owned);
	if (!res) {
		fail_run(r, id, from, "out of memory while resolving the configuration");
		goto out;
	}
	if (res->prompt.error) {
		int w = res->prompt.error == ESTALE ? stale_wait(r, run, from) : 0;
		again = w > 0;
		if (w == 0 && res->prompt.error == ESTALE)
			snprintf(msg, sizeof msg, "the system prompt cannot be assembled: skill "
				 "'%s' changed on disk, and the catalogue was not reloaded "
				 "within %d ms", res->prompt.error_skill, STALE_WAIT_MS);
		else if (w == 0)
			snprintf(msg, sizeof msg, "the system prompt cannot be assembled: the "
				 "text of skill '%s' cannot be read: %s",
				 res->prompt.error_skill, strerror(res->prompt.error));
		if (w == 0)
			fail_run(r, id, from, msg);
		goto out;
	}
	/* R7: stored ∩ now; R8: a run with no stored list uses now. A stored
	 * list that cannot be read fails the run: it must never widen. */
	if (row.allowed_tools) {
		char *gerr = NULL;
		if (grants_from_json(row.allowed_tools, &stored, &gerr) < 0) {
			snprintf(msg, sizeof msg, "the stored allow-list cannot be read: %s",
				 gerr ? gerr : "out of memory");
			free(gerr);
			fail_run(r, id, from, msg);
			goto out;
		}
		have_stored = true;
	}
	if (grants_intersect(have_stored ? &stored : NULL, &res->grants, &allow) < 0) {
		fail_run(r, id, from, "out of memory while intersecting the allow-list");
		goto out;
	}
	/* The workspace: made now, or refused when something else took its
	 * place (a link, a file, another user's directory). */
	char ws[PATH_MAX];
	snprintf(ws, sizeof ws, "%s/%s", r->workspaces, id);
	struct workspace wsd;
	struct buf wserr = {0};
	if (tools_workspace_open(snapshot_sandbox(s), ws, &wsd, &wserr) < 0) {
		snprintf(msg, sizeof msg, "%s", wserr.data ? wserr.data : "out of memory");
		buf_free(&wserr);
		fail_run(r, id, from, msg);
		goto out;
	}
	workspace_close(&wsd);
	/* The workdir: still a directory under the roots in force now, and
	 * still where it led when it was written. */
	if (row.workdir) {
		char *why = NULL;
		int wrc = check_workdir(r, c, row.workdir, &workdir, &why);
		if (wrc == 0 && strcmp(workdir, row.workdir) != 0) {
			snprintf(msg, sizeof msg, "workdir %s now leads to %s: the run cannot "
				 "start (write the workdir again)", row.workdir, workdir);
		} else if (wrc < 0) {
			snprintf(msg, sizeof msg, "%s: the run cannot start",
				 why ? why : "out of memory");
		}
		free(why);
		if (wrc < 0 || strcmp(workdir, row.workdir) != 0) {
			fail_run(r, id, from, msg);
			goto out;
		}
	}
	struct agent_env env = {
		.store = r->store,
		.model = model,
		.config = c,
		.catalog = s->catalog,
		.res = res,
		.allow = &allow,
		.row = &row,
		.workspace = ws,
		.workdir = workdir,
		.have_python = s->have_python,
		.tool_schemas = &r->tool_schemas,
		.start_mode = c->execution_mode == EXEC_SUBAGENT ? "subagent" : "inline",
		.start_model = c->model.model ? c->model.model : model_provider(model),
		.sandbox = snapshot_sandbox(s),
		.cancelled = run_cancelled,
		.cancel_arg = run,
		.stopping = runs_stopping,
		.stopping_arg = r,
		.progress = progress,
		.progress_arg = r,
		.store_wait = wait_for_store,
		.store_wait_arg = r,
		.partial = show_partial,
		.partial_arg = r,
	};
	if (agent_run(&env, id) < 0)
		fail_run(r, id, RUNSTATE_RUNNING, "internal error: the state database failed");
out:
	model_free(model);
	free(merr);
	grants_free(&allow);
	if (have_stored)
		grants_free(&stored);
	resolution_free(owned);
	free(forced);
	free(workdir);
	snapshot_unref(s);
	run_row_free(&row);
	/* Parked no more, whatever ended it (a stop, a failure); nothing
	 * streams any more. */
	pthread_mutex_lock(&r->lock);
	free(run->parked);
	run->parked = NULL;
	buf_free(&run->partial);
	free(run->partial_chat);
	run->partial_chat = NULL;
	run->parked_ms = run->store_failed_ms = 0;
	if (!again)
		run->stale_ms = 0;
	pthread_mutex_unlock(&r->lock);
	refresh_from_worker(r, id);
	return again;
}

/* Makes the wanted spare outside the lock (held on entry and return). */
static void make_spare_locked(struct runs *r)
{
	r->spare_wanted = false;
	r->spare_making = true;
	pthread_mutex_unlock(&r->lock);
	struct spare *sp = spare_make(r);
	pthread_mutex_lock(&r->lock);
	r->spare_making = false;
	if (sp && !r->spare && !r->stopping) {
		r->spare = sp;
		sp = NULL;
	}
	/* Wake workers waiting for it, and one that now waits on its age. */
	pthread_cond_broadcast(&r->work);
	if (sp) {
		pthread_mutex_unlock(&r->lock);
		spare_free(sp);
		pthread_mutex_lock(&r->lock);
	}
}

/* Waits for work with the lock held; ends a spare that got too old. */
static void idle_wait_locked(struct runs *r)
{
	if (!r->spare) {
		pthread_cond_wait(&r->work, &r->lock);
		return;
	}
	int64_t until = r->spare->made_ms + SPARE_MAX_AGE_MS;
	struct timespec ts = clock_ms_timespec(until);
	if (pthread_cond_clockwait(&r->work, &r->lock, CLOCK_MONOTONIC, &ts) != ETIMEDOUT ||
	    !r->spare || clock_ms() < r->spare->made_ms + SPARE_MAX_AGE_MS)
		return;
	struct spare *old = r->spare;
	r->spare = NULL;
	pthread_mutex_unlock(&r->lock);
	spare_free(old);
	pthread_mutex_lock(&r->lock);
}

/* ---- retention (runs.keep) ---- */

static int remove_run(struct runs *r, const char *id, const uid_t *uid);

/* The keeper looks again within a quarter of runs.keep.days (at least
 * every KEEP_LOOK_MAX_MS), and after a run settles, but never more often
 * than every KEEP_LOOK_MIN_MS: a burst of finishing runs costs one look. */
#define KEEP_LOOK_MIN_MS 1000
#define KEEP_LOOK_MAX_MS 60000

struct finished {
	char id[RUN_ID_MAX + 1];
	struct timespec at;
};

static int newest_first(const void *a, const void *b)
{
	const struct timespec *x = &((const struct finished *)a)->at;
	const struct timespec *y = &((const struct finished *)b)->at;
	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? 1 : -1;
	return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

/* Removes the finished runs that runs.keep no longer keeps: older than
 * keep.days since they last changed (their end), or past the newest
 * keep.count. A run with a file open (a reader, a `tail -f`) or being
 * waited on is left for a later look. */
static void keep_sweep(struct runs *r, const struct run_keep *keep)
{
	pthread_mutex_lock(&r->lock);
	size_t n = 0;
	struct finished *fin = malloc((r->n ? r->n : 1) * sizeof *fin);
	for (size_t i = 0; fin && i < r->n; i++) {
		const struct run *run = r->runs[i];
		if (!runstate_is_terminal(run->state) || run->busy)
			continue;
		snprintf(fin[n].id, sizeof fin[n].id, "%s", run->id);
		fin[n++].at = run->changed;
	}
	pthread_mutex_unlock(&r->lock);
	if (!fin)
		return; /* out of memory: the next look tries again */
	qsort(fin, n, sizeof *fin, newest_first);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (size_t i = 0; i < n && !__atomic_load_n(&r->stopping, __ATOMIC_ACQUIRE); i++) {
		double age_s = (double)(now.tv_sec - fin[i].at.tv_sec) +
			       (double)(now.tv_nsec - fin[i].at.tv_nsec) / 1e9;
		bool old = keep->days > 0 && age_s > keep->days * 86400.0;
		bool beyond = keep->count > 0 && i >= (size_t)keep->count;
		if ((old || beyond) && remove_run(r, fin[i].id, NULL) == 0)
			fprintf(stderr, "skillfs: run %s removed (runs.keep: %s)\n", fin[i].id,
				old ? "finished longer ago than keep.days"
				    : "older than the newest keep.count finished runs");
	}
	free(fin);
}

static void *keeper_main(void *arg)
{
	struct runs *r = arg;
	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		r->keep_due = false;
		pthread_mutex_unlock(&r->lock);
		struct snapshot *s = engine_snapshot(r->engine);
		struct run_keep keep = snapshot_config(s)->keep;
		snapshot_unref(s);
		if (keep.days > 0 || keep.count > 0)
			keep_sweep(r, &keep);
		int64_t every = KEEP_LOOK_MAX_MS;
		if (keep.days > 0 && keep.days * 86400.0 * 1000 / 4 < (double)every)
			every = (int64_t)(keep.days * 86400.0 * 1000 / 4);
		if (every < KEEP_LOOK_MIN_MS)
			every = KEEP_LOOK_MIN_MS;
		int64_t start = clock_ms();
		pthread_mutex_lock(&r->lock);
		for (;;) {
			int64_t now = clock_ms();
			bool soon_enough = now - start >= KEEP_LOOK_MIN_MS;
			if (r->stopping || now - start >= every || (r->keep_due && soon_enough))
				break;
			int64_t until = r->keep_due ? start + KEEP_LOOK_MIN_MS : start + every;
			struct timespec ts = clock_ms_timespec(until);
			pthread_cond_clockwait(&r->keep_cond, &r->lock, CLOCK_MONOTONIC, &ts);
		}
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static void *worker_main(void *arg)
{
	struct runs *r = arg;
	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		if (r->queue_head == r->queue.n) {
			if (r->spare_wanted && !r->spare && !r->spare_making)
				make_spare_locked(r);
			else
				idle_wait_locked(r);
			continue;
		}
		/* A spare being made is for this run: wait for it. */
		if (r->spare_making) {
			pthread_cond_wait(&r->work, &r->lock);
			continue;
		}
		char *id = r->queue.items[r->queue_head];
		r->queue.items[r->queue_head++] = NULL;
		struct run *run = run_find(r, id);
		free(id);
		/* The store is the truth; execute() checks the state again. */
		if (!run || run->busy)
			continue;
		run->busy = true;
		bool queued = run->state == RUNSTATE_QUEUED;
		struct spare *spare = r->spare;
		r->spare = NULL;
		/* A prompt opened before this run was queued was likely its
		 * own: no spare for it once the queue is empty. */
		r->spare_wanted = false;
		pthread_mutex_unlock(&r->lock);
		bool again = execute(r, run, queued, spare);
		pthread_mutex_lock(&r->lock);
		run->busy = false;
		run->cancel_requested = false;
		/* Back in the queue once not busy, so no worker passes it by;
		 * a queue that cannot grow leaves it to the store (a remount). */
		if (again && !r->stopping && queue_push(r, run->id) < 0)
			run_log(run->id, "out of memory: it waits in the store for a remount");
		pthread_cond_broadcast(&r->let_go);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- opening and closing ---- */

struct runs *runs_open(struct engine *e, const char *state_path, char **err)
{
	*err = NULL;
	struct runs *r = calloc(1, sizeof *r);
	if (!r)
		goto oom;
	r->engine = e;
	clock_gettime(CLOCK_REALTIME, &r->listing_changed);
	r->opened = r->listing_changed;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->work, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->keep_cond, &ca);
	pthread_cond_init(&r->let_go, &ca);
	pthread_condattr_destroy(&ca);
	r->next_handle = 1;
	r->files = filecache_new(FILECACHE_ENTRIES, FILECACHE_BYTES);
	if (!r->files)
		goto oom;
	r->daemon_uid = getuid();
	r->daemon_gid = getgid();

	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", state_path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	int rc = workspace_mkdirs(dir, 0700) < 0 ? -errno : 0;
	if (rc < 0) {
		if (asprintf(err, "cannot create the state directory %s: %s", dir, strerror(-rc)) < 0)
			*err = NULL;
		goto fail;
	}
	if (asprintf(&r->workspaces, "%s/workspaces", dir) < 0) {
		r->workspaces = NULL;
		goto oom;
	}
	r->state_dir = realpath(dir, NULL);
	if (!r->state_dir && !(r->state_dir = strdup(dir)))
		goto oom;
	rc = workspace_mkdirs(r->workspaces, 0700) < 0 ? -errno : 0;
	if (rc < 0) {
		if (asprintf(err, "cannot create %s: %s", r->workspaces, strerror(-rc)) < 0)
			*err = NULL;
		goto fail;
	}
	if (tool_schemas_init(&r->tool_schemas) < 0)
		goto oom;
	r->store = store_open(state_path, err);
	if (!r->store)
		goto fail;
	struct stat dbst;
	if (store_file_stat(r->store, &dbst) == 0 &&
	    dbwatch_init(&r->dbwatch, state_path, &dbst) < 0)
		goto oom;

	/* Load every run; re-queue interrupted ones first, then the queue. */
	struct strlist ids = { 0 }, interrupted = { 0 }, queued = { 0 };
	enum runstate *states = NULL;
	int64_t *updated = NULL;
	if (store_run_ids(r->store, &ids, &states, &updated, err) < 0 ||
	    store_runs_in_state(r->store, RUNSTATE_RUNNING, &interrupted, err) < 0 ||
	    store_runs_in_state(r->store, RUNSTATE_QUEUED, &queued, err) < 0) {
		strlist_free(&ids);
		free(states);
		free(updated);
		strlist_free(&interrupted);
		strlist_free(&queued);
		goto fail;
	}
	int bad = 0;
	for (size_t i = 0; i < ids.n && !bad; i++) {
		enum runstate st = states[i];
		/* Written by no skillfs: it could not be shown, and is never cut
		 * to an id it is not. */
		if (!runs_id_valid(ids.items[i]))
			continue;
		/* A run made before owners were kept (or whose owner cannot be
		 * read) is the daemon's user's, as it was then. */
		int64_t uid = -1, gid = -1;
		if (store_run_owner(r->store, ids.items[i], &uid, &gid, NULL) < 0 || uid < 0 ||
		    gid < 0) {
			uid = r->daemon_uid;
			gid = r->daemon_gid;
		}
		struct run *run = run_insert(r, ids.items[i], st, (uid_t)uid, (gid_t)gid);
		if (!run) {
			bad = 1;
			break;
		}
		/* Its files' time, and for runs.keep its end: its last change. */
		if (updated[i] > 0)
			run->changed = (struct timespec){ .tv_sec = updated[i] / 1000000000,
							  .tv_nsec = updated[i] % 1000000000 };
		if (st == RUNSTATE_CREATED) {
			struct run_row row;
			if (store_run_get(r->store, run->id, &row, NULL) == 0) {
				free(run->config);
				run->config = strdup(row.config ? row.config : "default");
				for (size_t k = 0; k < json_array_size(row.forced_skills); k++)
					strlist_add(&run->forced,
						    json_string_value(json_array_get(row.forced_skills, k)));
				if (row.workdir &&
				    (!(run->workdir = strdup(row.workdir)) ||
				     buf_printf(&run->workdir_file, "%s\n", row.workdir) < 0))
					bad = 1;
				run_row_free(&row);
				if (!run->config)
					bad = 1;
			}
		}
	}
	/* A run that was running when the daemon died resumes from its last
	 * committed message: it goes first, in enqueue order (R7 applies when
	 * it starts). */
	for (size_t i = 0; i < interrupted.n && !bad; i++)
		bad = queue_push(r, interrupted.items[i]) < 0;
	for (size_t i = 0; i < queued.n && !bad; i++)
		bad = queue_push(r, queued.items[i]) < 0;
	strlist_free(&ids);
	free(states);
	free(updated);
	strlist_free(&interrupted);
	strlist_free(&queued);
	if (bad)
		goto oom;

	struct snapshot *s = engine_snapshot(e);
	int nw = snapshot_config(s)->workers;
	snapshot_unref(s);
	r->workers = calloc((size_t)(nw > 0 ? nw : 1) + 1, sizeof *r->workers);
	if (!r->workers)
		goto oom;
	for (int i = 0; i <= nw; i++) {
		if (pthread_create(&r->workers[i], NULL, i < nw ? worker_main : keeper_main, r) != 0) {
			*err = strdup("cannot start the run workers");
			goto fail;
		}
		pthread_setname_np(r->workers[i], i < nw ? "skillfs-run" : "skillfs-keep");
		r->nworkers++;
	}
	return r;
oom:
	if (!*err)
		*err = strdup("out of memory");
fail:
	if (!*err)
		*err = strdup("cannot open the run store");
	runs_close(r);
	return NULL;
}

void runs_set_change_fn(struct runs *r, runs_change_fn fn, void *arg)
{
	r->change_fn = fn;
	r->change_arg = arg;
}

void runs_set_allow_other(struct runs *r, bool allow_other)
{
	r->allow_other = allow_other;
}

mode_t runs_dir_perm(const struct runs *r)
{
	return r->allow_other ? 01777 : 0755;
}

/* Whether uid may look into and act on run: always when the mount is the
 * mounting user's alone; else its owner and root only. */
static bool may_use(const struct runs *r, const struct run *run, uid_t uid)
{
	return !r->allow_other || uid == 0 || uid == run->uid;
}

int runs_access(struct runs *r, const char *id, uid_t uid)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc = !run ? -ENOENT : may_use(r, run, uid) ? 0 : -EACCES;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void runs_stop(struct runs *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	__atomic_store_n(&r->stopping, true, __ATOMIC_RELEASE);
	struct waiter *all = take_waiters(r, NULL, true);
	pthread_cond_broadcast(&r->work);
	pthread_cond_broadcast(&r->keep_cond);
	pthread_mutex_unlock(&r->lock);
	answer_waiters(all, EINTR, NULL);
}

/* Joins the workers, waiting at most until deadline (CLOCK_REALTIME; NULL:
 * for ever). Returns how many are still running. */
static int join_workers(struct runs *r, const struct timespec *deadline)
{
	int left = 0;
	for (int i = 0; i < r->nworkers; i++) {
		if (!r->workers[i])
			continue;
		int rc = deadline ? pthread_timedjoin_np(r->workers[i], NULL, deadline)
				  : pthread_join(r->workers[i], NULL);
		if (rc == 0)
			r->workers[i] = 0;
		else
			left++;
	}
	return left;
}

static void close_joined(struct runs *r);

void runs_close(struct runs *r)
{
	if (!r)
		return;
	runs_stop(r);
	join_workers(r, NULL);
	close_joined(r);
}

bool runs_close_within(struct runs *r, int timeout_ms)
{
	if (!r)
		return true;
	runs_stop(r);
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	if (join_workers(r, &deadline) > 0)
		return false; /* r stays as it is: they still use it */
	close_joined(r);
	return true;
}

/* Frees r once no worker runs. */
static void close_joined(struct runs *r)
{
	free(r->workers);
	spare_free(r->spare);
	audit_close(r->audit);
	store_close(r->store);
	dbwatch_free(&r->dbwatch);
	for (size_t i = 0; i < r->n; i++)
		run_free(r->runs[i]);
	free(r->runs);
	strlist_free(&r->queue);
	free(r->workspaces);
	free(r->state_dir);
	tool_schemas_free(&r->tool_schemas);
	filecache_free(r->files);
	pthread_cond_destroy(&r->work);
	pthread_cond_destroy(&r->keep_cond);
	pthread_cond_destroy(&r->let_go);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* ---- mkdir, rmdir, listing ---- */

/* What happened to the state database's file, once it is found deleted or
 * replaced (checked now when now is set, else at most once a second): the
 * first to notice says so in the log and shows runs/ERROR. */
static const char *store_file_gone(struct runs *r, bool now)
{
	bool first;
	const char *gone = dbwatch_check(&r->dbwatch, now, &first);
	if (first) {
		fprintf(stderr, "skillfs: %s\n", gone);
		notify(r, RUNS_ERROR_NAME, RUN_CHANGED_CREATED);
	}
	return gone;
}

const char *runs_store_gone(struct runs *r)
{
	return store_file_gone(r, false);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
		return 0; /* keep going: remove what can be removed */
	return 0;
}

/* Removes a directory tree without following symlinks out of it. */
static void remove_tree(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* How long a request that commits waits for the database while another
 * process holds its write lock, before it fails with EAGAIN. A mkdir or
 * rmdir waits less: the kernel holds runs/ locked while it waits, and
 * with it every listing of runs/ and every lookup of a name not seen yet. */
#define REQUEST_STORE_WAIT_MS 5000
#define DIR_STORE_WAIT_MS 250

/* A request that commits first waits for the store (store_wait_writable)
 * and then takes the lock: its wait for another process holds up no other
 * request. */

int runs_create(struct runs *r, const char *id, uid_t uid, gid_t gid)
{
	if (!runs_id_valid(id))
		return -EINVAL;
	if (store_file_gone(r, true))
		return -EIO;
	int ready = store_wait_writable(r->store, DIR_STORE_WAIT_MS);
	if (ready < 0)
		return ready;
	pthread_mutex_lock(&r->lock);
	if (run_find(r, id)) {
		pthread_mutex_unlock(&r->lock);
		return -EEXIST;
	}
	/* A new run starts with an empty workspace: a workspace left under
	 * this id (by a run whose removal could not take all of it, e.g. a
	 * tree deeper than PATH_MAX) would hand its files to whoever takes
	 * the id next. */
	char ws[PATH_MAX];
	struct stat st;
	if (snprintf(ws, sizeof ws, "%s/%s", r->workspaces, id) >= (int)sizeof ws ||
	    lstat(ws, &st) == 0) {
		pthread_mutex_unlock(&r->lock);
		return -EEXIST;
	}
	int rc = store_run_create_owned(r->store, id, (int64_t)uid, (int64_t)gid, NULL);
	if (rc == 0 && !run_insert(r, id, RUNSTATE_CREATED, uid, gid)) {
		/* Not shown, so not made: a row left behind shows at the next
		 * mount as a created run, which rmdir removes. */
		char *err = NULL;
		if (store_run_delete(r->store, id, &err) < 0)
			run_log(id, "out of memory making it, and its row stays stored: %s",
				err ? err : "the store failed");
		free(err);
		rc = -ENOMEM;
	}
	if (rc == 0)
		clock_gettime(CLOCK_REALTIME, &r->listing_changed);
	pthread_mutex_unlock(&r->lock);
	if (rc == 0)
		notify(r, id, RUN_CHANGED_CREATED | RUN_CHANGED_STATE);
	return rc;
}

/* Removes run id with its row and workspace. uid: the remover, who must
 * be allowed to (rmdir); NULL: runs.keep, which takes only a finished run
 * that no file of is open. Returns 0 or a negative errno. */
/* How long a removal waits for the worker of a finished run to let go
 * of it. */
#define LET_GO_WAIT_MS 2000

static int remove_run(struct runs *r, const char *id, const uid_t *uid)
{
	int ready = store_wait_writable(r->store, DIR_STORE_WAIT_MS);
	if (ready < 0)
		return ready;
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	/* Finished, but its worker has not let go of it yet (a waiter was
	 * told before): a moment, not EBUSY, for `cat wait; rmdir`. */
	int64_t until = clock_ms() + LET_GO_WAIT_MS;
	while (run && run->busy && runstate_is_terminal(run->state) && clock_ms() < until) {
		struct timespec ts = clock_ms_timespec(until);
		pthread_cond_clockwait(&r->let_go, &r->lock, CLOCK_MONOTONIC, &ts);
		run = run_find(r, id);
	}
	int rc = 0;
	if (!run)
		rc = -ENOENT;
	else if (uid && !may_use(r, run, *uid))
		rc = -EPERM; /* as the sticky bit of runs/ says */
	else if (run->busy || (run->state != RUNSTATE_CREATED && !runstate_is_terminal(run->state)))
		rc = -EBUSY;
	else if (!uid && (run->holds || !runstate_is_terminal(run->state)))
		rc = -EBUSY;
	else
		rc = store_run_delete(r->store, id, NULL);
	struct waiter *gone = NULL;
	if (rc == 0) {
		run_delete(r, id);
		gone = take_waiters(r, id, false);
		clock_gettime(CLOCK_REALTIME, &r->listing_changed);
	}
	pthread_mutex_unlock(&r->lock);
	if (rc == 0) {
		char ws[PATH_MAX];
		if (snprintf(ws, sizeof ws, "%s/%s", r->workspaces, id) < (int)sizeof ws)
			remove_tree(ws); /* the workspace goes with the run */
		notify(r, id, RUN_CHANGED_REMOVED | RUN_CHANGED_STATE);
		answer_waiters(gone, ENOENT, NULL);
	}
	return rc;
}

int runs_remove(struct runs *r, const char *id, uid_t uid)
{
	return remove_run(r, id, &uid);
}

void runs_hold(struct runs *r, const char *id, bool hold)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	if (run && hold) {
		run->holds++;
	} else if (run && run->holds && --run->holds == 0 && runstate_is_terminal(run->state)) {
		r->keep_due = true; /* it may be past runs.keep now */
		pthread_cond_signal(&r->keep_cond);
	}
	pthread_mutex_unlock(&r->lock);
}

int runs_list(struct runs *r, struct strlist *out)
{
	pthread_mutex_lock(&r->lock);
	int rc = 0;
	for (size_t i = 0; i < r->n && rc == 0; i++)
		rc = strlist_add(out, r->runs[i]->id);
	pthread_mutex_unlock(&r->lock);
	return rc < 0 ? -ENOMEM : 0;
}

void runs_dir_mtime(struct runs *r, struct timespec *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->listing_changed;
	pthread_mutex_unlock(&r->lock);
}

bool runs_exists(struct runs *r, const char *id)
{
	pthread_mutex_lock(&r->lock);
	bool e = run_find(r, id) != NULL;
	pthread_mutex_unlock(&r->lock);
	return e;
}

int runs_state(struct runs *r, const char *id, enum runstate *out)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	if (run)
		*out = run->state;
	pthread_mutex_unlock(&r->lock);
	return run ? 0 : -ENOENT;
}

/* ---- the files of a run ---- */

/* What a file needs from the in-memory run, copied under the lock. */
struct run_view {
	uint64_t serial;
	enum runstate state;
	uid_t uid;
	gid_t gid;
	struct timespec changed;
	struct buf prompt;
	char config[CONFIG_NAME_MAX + 1];
	struct buf forced; /* one per line */
	char *workdir;     /* NULL: none */
	char *parked;      /* why its worker waits for the store; NULL: it does not */
	bool busy;
	struct buf partial; /* a reply streaming in (struct run) */
	char *partial_chat;
	size_t partial_after;
};

static int run_view_get(struct runs *r, const char *id, struct run_view *v)
{
	memset(v, 0, sizeof *v);
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc = run ? 0 : -ENOENT;
	if (run) {
		v->serial = run->serial;
		v->state = run->state;
		v->uid = run->uid;
		v->gid = run->gid;
		v->changed = run->changed;
		v->busy = run->busy;
		snprintf(v->config, sizeof v->config, "%s", run->config);
		if (run->prompt.len)
			rc = buf_append(&v->prompt, run->prompt.data, run->prompt.len);
		for (size_t i = 0; rc == 0 && i < run->forced.n; i++)
			rc = buf_printf(&v->forced, "%s\n", run->forced.items[i]);
		if (rc == 0 && run->workdir && !(v->workdir = strdup(run->workdir)))
			rc = -1;
		if (rc == 0 && run->parked && !(v->parked = strdup(run->parked)))
			rc = -1;
		if (rc == 0 && run->partial_chat) {
			rc = buf_append(&v->partial, run->partial.data ? run->partial.data : "",
					run->partial.len);
			if (rc == 0 && !(v->partial_chat = strdup(run->partial_chat)))
				rc = -1;
			v->partial_after = run->partial_after;
		}
		if (rc < 0)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

static void run_view_free(struct run_view *v)
{
	buf_free(&v->prompt);
	buf_free(&v->forced);
	free(v->workdir);
	free(v->parked);
	buf_free(&v->partial);
	free(v->partial_chat);
}

/* The reply streaming in for a run's transcripts, or NULL. */
static const struct agent_partial *partial_of(const struct run_view *v, struct agent_partial *p)
{
	if (!v->partial_chat)
		return NULL;
	*p = (struct agent_partial){ .chat_id = v->partial_chat, .after = v->partial_after,
				     .text = v->partial.data ? v->partial.data : "",
				     .len = v->partial.len };
	return p;
}

static int iso_time(struct buf *b, int64_t ns)
{
	if (!ns)
		return buf_puts(b, "null");
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	return buf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"", tm.tm_year + 1900,
			  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			  (int)(ns / 1000000 % 1000));
}

static json_t *iso_json(int64_t ns)
{
	struct buf b = { 0 };
	json_t *j = NULL;
	if (iso_time(&b, ns) == 0)
		j = json_loads(b.data, JSON_DECODE_ANY, NULL);
	buf_free(&b);
	return j ? j : json_null();
}

static int put_json(struct buf *out, json_t *j)
{
	if (!j)
		return -ENOMEM;
	int rc = json_text_append(out, j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	return rc < 0 ? -ENOMEM : 0;
}

static int render_info(struct runs *r, const struct run_view *v, const struct run_row *row,
		       struct buf *out)
{
	json_t *msgs = NULL;
	size_t nmsg = 0;
	int rc = row->chat_id ? store_messages(r->store, row->id, row->chat_id, &msgs, NULL) : 0;
	nmsg = json_array_size(msgs);
	json_decref(msgs);
	if (rc < 0)
		return rc; /* a damaged row reads as EIO, as messages.json does */
	struct chat_row *chats = NULL;
	size_t nchats = 0;
	rc = store_chats(r->store, row->id, &chats, &nchats, NULL);
	chat_rows_free(chats, nchats);
	if (rc < 0)
		return rc;
	json_t *j = json_object();
	if (!j)
		return -ENOMEM;
	json_object_set_new(j, "id", json_string(row->id));
	json_object_set_new(j, "state", json_string(runstate_name(row->state)));
	json_object_set_new(j, "config", json_string(row->config ? row->config : "default"));
	json_object_set_new(j, "forced_skills", json_incref(row->forced_skills));
	json_object_set_new(j, "workdir", row->workdir ? json_string(row->workdir) : json_null());
	json_object_set_new(j, "mode", row->mode ? json_string(row->mode) : json_null());
	json_object_set_new(j, "chat_id", row->chat_id ? json_string(row->chat_id) : json_null());
	json_object_set_new(j, "model", row->model ? json_string(row->model) : json_null());
	json_object_set_new(j, "created_at", iso_json(row->created_at));
	json_object_set_new(j, "started_at", iso_json(row->started_at));
	json_object_set_new(j, "finished_at", iso_json(row->finished_at));
	json_object_set_new(j, "updated_at", iso_json(row->updated_at));
	json_object_set_new(j, "messages", json_integer((json_int_t)nmsg));
	json_object_set_new(j, "subagents", json_integer((json_int_t)nchats));
	json_object_set_new(j, "usage", row->usage ? json_incref(row->usage) : json_null());
	json_object_set_new(j, "allow_list_stored", json_boolean(row->allowed_tools != NULL));
	/* What it saw of its skills when enqueued (null: before schema 9). */
	json_object_set_new(j, "provenance",
			    row->provenance ? json_incref(row->provenance) : json_null());
	json_object_set_new(j, "error", row->error ? json_string(row->error) : json_null());
	/* Why its worker waits for the store, state unchanged (null: it
	 * does not). */
	json_object_set_new(j, "parked", v->parked ? json_string(v->parked) : json_null());
	return put_json(out, j);
}

static int render_pending(const struct run_row *row, struct buf *out)
{
	const json_t *p = row->pending;
	const char *kind = json_string_value(json_object_get(p, "kind"));
	/* A sub-agent's call or question names its chat (subagents/<chat>). */
	const char *chat = json_string_value(json_object_get(p, "chat_id"));
	const char *main_chat = row->chat_id ? row->chat_id : AGENT_MAIN_CHAT;
	const char *sub = chat && strcmp(chat, main_chat) != 0 ? chat : NULL;
	int rc;
	if (kind && strcmp(kind, "question") == 0) {
		rc = buf_printf(out, "question: %s\n%s%s%swrite the answer to input\n",
				json_string_value(json_object_get(p, "question")) ?: "",
				sub ? "in sub-agent: " : "", sub ? sub : "", sub ? "\n" : "");
	} else {
		char *args = json_dumps(json_object_get(p, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
		const char *a = json_string_value(json_object_get(p, "arguments"));
		rc = buf_printf(out, "approval: %s %s\n%s%s%swrite approve or deny to ctl\n",
				json_string_value(json_object_get(p, "tool")) ?: "?",
				a ? a : args ? args : "",
				sub ? "in sub-agent: " : "", sub ? sub : "", sub ? "\n" : "");
		free(args);
	}
	return rc < 0 ? -ENOMEM : 0;
}

static int text_with_newline(struct buf *out, const char *s)
{
	size_t n = strlen(s);
	if (buf_append(out, s, n) < 0 || ((n == 0 || s[n - 1] != '\n') && buf_puts(out, "\n") < 0))
		return -ENOMEM;
	return 0;
}

int runs_changed_at(struct runs *r, const char *id, struct timespec *out)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	if (run)
		*out = run->changed;
	pthread_mutex_unlock(&r->lock);
	return run ? 0 : -ENOENT;
}

/* Every file a run directory can show, sorted, and when it is there. */
enum run_file_when { SHOWN_ALWAYS, SHOWN_IF_STORED_LIST, SHOWN_IF_FAILED, SHOWN_IF_WAITING,
		     SHOWN_IF_COMPLETED, SHOWN_IF_CHATS };

static const struct {
	const char *name;
	enum run_file_when when;
} run_files[] = {
	{ "allowed-tools", SHOWN_IF_STORED_LIST },
	{ "config", SHOWN_ALWAYS },
	{ "ctl", SHOWN_ALWAYS },
	{ "error", SHOWN_IF_FAILED },
	{ "events", SHOWN_ALWAYS },
	{ "info.json", SHOWN_ALWAYS },
	{ "input", SHOWN_ALWAYS },
	{ "messages.json", SHOWN_ALWAYS },
	{ "pending", SHOWN_IF_WAITING },
	{ "prompt", SHOWN_ALWAYS },
	{ "result", SHOWN_IF_COMPLETED },
	{ "skills", SHOWN_ALWAYS },
	{ "status", SHOWN_ALWAYS },
	{ "subagents", SHOWN_IF_CHATS },
	{ "transcript", SHOWN_ALWAYS },
	{ "wait", SHOWN_ALWAYS },
	{ "workdir", SHOWN_ALWAYS },
};

bool runs_file_always_present(const char *name)
{
	for (size_t i = 0; i < sizeof run_files / sizeof *run_files; i++)
		if (strcmp(name, run_files[i].name) == 0)
			return run_files[i].when == SHOWN_ALWAYS;
	return false;
}

/* Names of the files a run shows now, in sorted order. */
static int run_names(const struct run_view *v, const struct run_row *row, bool has_chats,
		     struct strlist *out)
{
	const bool shown[] = {
		[SHOWN_ALWAYS] = true,
		[SHOWN_IF_STORED_LIST] = row->allowed_tools != NULL,
		[SHOWN_IF_FAILED] = v->state == RUNSTATE_FAILED,
		[SHOWN_IF_WAITING] = runstate_is_waiting(v->state),
		[SHOWN_IF_COMPLETED] = v->state == RUNSTATE_COMPLETED,
		[SHOWN_IF_CHATS] = has_chats,
	};
	for (size_t i = 0; i < sizeof run_files / sizeof *run_files; i++)
		if (shown[run_files[i].when] && strlist_add(out, run_files[i].name) < 0)
			return -ENOMEM;
	return 0;
}

/* A rendering's result as an errno: the buf helpers' -1 is ENOMEM; the
 * store's errors are as it says (-EIO for a damaged row, logged by it). */
static int errno_of_render(int rc)
{
	return rc >= 0 ? 0 : rc == -1 ? -ENOMEM : rc;
}

/* For a stat (size_only), the size of messages.json of chat without
 * rendering it, in f; -EAGAIN when it must be rendered
 * (messages stored before their sizes were kept). */
static int messages_json_sized(struct runs *r, const char *id, const char *chat, bool size_only,
			       struct run_file *f)
{
	if (!size_only)
		return -EAGAIN;
	int rc = agent_messages_json_size(r->store, id, chat, &f->size);
	if (rc == 0)
		f->sized = true;
	return rc;
}

/* The bytes and mode of one top-level file of a run (for a stat,
 * size_only, the size of messages.json may come without its bytes). */
static int run_file(struct runs *r, const struct run_view *v, const struct run_row *row,
		    const char *name, bool size_only, struct run_file *f)
{
	bool created = v->state == RUNSTATE_CREATED;
	int rc = 0;
	f->perm = 0444;
	struct buf *out = &f->data;
	if (strcmp(name, "status") == 0) {
		rc = buf_printf(out, "%s\n", runstate_name(v->state));
	} else if (strcmp(name, "prompt") == 0) {
		f->perm = created ? 0644 : 0444;
		if (created)
			rc = v->prompt.len ? buf_append(out, v->prompt.data, v->prompt.len) : 0;
		else if (row->prompt)
			rc = buf_puts(out, row->prompt);
	} else if (strcmp(name, "config") == 0) {
		f->perm = created ? 0644 : 0444;
		rc = buf_printf(out, "%s\n", created ? v->config : row->config);
	} else if (strcmp(name, "skills") == 0) {
		f->perm = created ? 0644 : 0444;
		if (created) {
			rc = v->forced.len ? buf_append(out, v->forced.data, v->forced.len) : 0;
		} else {
			for (size_t i = 0; rc == 0 && i < json_array_size(row->forced_skills); i++)
				rc = buf_printf(out, "%s\n",
						json_string_value(json_array_get(row->forced_skills, i)));
		}
	} else if (strcmp(name, "workdir") == 0) {
		f->perm = created ? 0644 : 0444;
		const char *w = created ? v->workdir : row->workdir;
		if (w)
			rc = buf_printf(out, "%s\n", w);
	} else if (strcmp(name, "ctl") == 0) {
		f->perm = runstate_is_terminal(v->state) ? 0444 : 0644;
	} else if (strcmp(name, "input") == 0) {
		f->perm = v->state == RUNSTATE_WAITING_FOR_INPUT ? 0644 : 0444;
		if (row->input && row->input[0]) /* "" until a question is answered */
			rc = text_with_newline(out, row->input);
	} else if (strcmp(name, "info.json") == 0) {
		return render_info(r, v, row, out);
	} else if (strcmp(name, "allowed-tools") == 0) {
		if (!row->allowed_tools)
			return -ENOENT;
		struct grants g = { 0 };
		if (grants_from_json(row->allowed_tools, &g, NULL) < 0)
			return buf_puts(out, "(the stored allow-list cannot be read)\n") < 0 ? -ENOMEM : 0;
		rc = grants_format_lines(&g, out);
		grants_free(&g);
	} else if (strcmp(name, "transcript") == 0) {
		struct agent_partial p;
		rc = agent_transcript(r->store, row->id, partial_of(v, &p), out);
	} else if (strcmp(name, "messages.json") == 0) {
		rc = messages_json_sized(r, row->id, row->chat_id ? row->chat_id : AGENT_MAIN_CHAT,
					 size_only, f);
		if (rc == -EAGAIN)
			rc = agent_messages_json(r->store, row->id, NULL, out);
	} else if (strcmp(name, "events") == 0) {
		rc = store_events_text(r->store, row->id, out, NULL);
	} else if (strcmp(name, "pending") == 0) {
		if (!runstate_is_waiting(v->state) || !row->pending)
			return -ENOENT;
		return render_pending(row, out);
	} else if (strcmp(name, "result") == 0) {
		if (v->state != RUNSTATE_COMPLETED)
			return -ENOENT;
		rc = text_with_newline(out, row->result ? row->result : "");
	} else if (strcmp(name, "error") == 0) {
		if (v->state != RUNSTATE_FAILED)
			return -ENOENT;
		rc = text_with_newline(out, row->error ? row->error : "failed");
	} else if (strcmp(name, "wait") == 0) {
		/* Settled: exactly what a read returns now. Otherwise empty to
		 * a stat; a reader is held until the run settles (fs/). */
		if (runstate_is_settled(v->state))
			rc = buf_printf(out, "%s\n", runstate_name(v->state));
	} else {
		return -ENOENT;
	}
	return errno_of_render(rc);
}

/* The chat rows of a run (sub-agents). */
static int chats_of(struct runs *r, const char *id, struct chat_row **rows, size_t *n)
{
	*rows = NULL;
	*n = 0;
	return store_chats(r->store, id, rows, n, NULL);
}

/* The names of a JSON array, one per line, as offered. */
static int tools_lines(const json_t *tools, struct buf *out)
{
	size_t i;
	json_t *t;
	json_array_foreach(tools, i, t)
		if (buf_printf(out, "%s\n", json_string_value(t) ?: "") < 0)
			return -ENOMEM;
	return 0;
}

static int subagent_file(struct runs *r, const struct run_view *v, const struct run_row *row,
			 const struct chat_row *c, const char *name, bool size_only,
			 struct run_file *f)
{
	f->perm = 0444;
	int rc;
	struct agent_partial p;
	if (strcmp(name, "transcript") == 0)
		rc = agent_chat_transcript(r->store, row->id, c->chat_id, partial_of(v, &p),
					   &f->data);
	else if (strcmp(name, "messages.json") == 0) {
		rc = messages_json_sized(r, row->id, c->chat_id, size_only, f);
		if (rc == -EAGAIN)
			rc = agent_messages_json(r->store, row->id, c->chat_id, &f->data);
	}
	else if (strcmp(name, "result") == 0 && c->result)
		rc = text_with_newline(&f->data, c->result);
	else if (strcmp(name, "state") == 0)
		rc = buf_printf(&f->data, "%s\n", runstate_name(c->state));
	else if (strcmp(name, "tools") == 0 && c->tools)
		rc = tools_lines(c->tools, &f->data);
	else
		return -ENOENT;
	return errno_of_render(rc);
}

/* Whether showing runs/<id>/<sub> needs the run's row and chats from the
 * store; the run directory itself, status, wait, ctl, and what a created
 * run holds in memory are answered without it (the hot path of a script:
 * create, write the prompt, wait). */
static bool needs_store(const struct run_view *v, const char *sub, bool listing)
{
	if (listing)
		return true;
	if (sub[0] == '\0' || strcmp(sub, "status") == 0 || strcmp(sub, "wait") == 0 ||
	    strcmp(sub, "ctl") == 0)
		return false;
	if (v->state == RUNSTATE_CREATED &&
	    (strcmp(sub, "prompt") == 0 || strcmp(sub, "config") == 0 ||
	     strcmp(sub, "skills") == 0 || strcmp(sub, "workdir") == 0))
		return false;
	return true;
}

/* Shared by readdir and stat: resolves runs/<id>/<sub>. With names set,
 * lists a directory; with f set, fills a file or directory. */
/* Whether runs/<id>/<sub> is a file that grows with its run and is
 * rendered from all of its messages or events (filecache keeps it).
 * info.json reads every message too (a damaged one makes it EIO); what
 * it shows of the run beyond the store (parked) changes the run's time. */
static bool cached_file(const char *sub)
{
	const char *name = strrchr(sub, '/');
	bool in_chat = name != NULL;
	name = name ? name + 1 : sub;
	if (in_chat && strncmp(sub, "subagents/", 10) != 0)
		return false;
	return strcmp(name, "transcript") == 0 || strcmp(name, "messages.json") == 0 ||
	       (!in_chat && (strcmp(name, "events") == 0 || strcmp(name, "info.json") == 0));
}

/* The owner, group and mode bits every file of a run gets at the end. */
static void run_file_finish(const struct runs *r, const struct run_view *v, struct run_file *f)
{
	f->uid = v->uid;
	f->gid = v->gid;
	/* Shared with other users: the run is its owner's alone (the
	 * kernel checks these modes: default_permissions). */
	if (r->allow_other)
		f->perm = f->dir ? 0700 : (f->perm & 0222) ? 0600 : 0400;
}

/* size_only: for a stat (runs_attr_file). */
static int run_lookup(struct runs *r, const char *id, const char *sub, struct strlist *names,
		      bool size_only, struct run_file *f)
{
	struct run_view v;
	int rc = run_view_get(r, id, &v);
	if (rc < 0)
		return rc;
	/* Rendered already at this version of the run: no store, no render. */
	bool cached = f && cached_file(sub);
	struct filecache_version ver = { v.changed, store_writes(r->store) };
	struct file_bytes *fb = cached ? filecache_get(r->files, id, v.serial, sub, ver) : NULL;
	if (fb) {
		memset(f, 0, sizeof *f);
		f->mtime = v.changed;
		f->perm = 0444;
		f->bytes = fb;
		run_file_finish(r, &v, f);
		run_view_free(&v);
		return 0;
	}
	struct run_row row = { 0 };
	struct chat_row *chats = NULL;
	size_t nchats = 0;
	if (needs_store(&v, sub, names != NULL)) {
		rc = store_run_get(r->store, id, &row, NULL);
		if (rc < 0) {
			run_view_free(&v);
			return rc;
		}
		/* The in-memory state leads: the store may be a step ahead of
		 * what waiters have been told, never behind. */
		row.state = v.state;
		rc = chats_of(r, id, &chats, &nchats);
		if (rc < 0) {
			run_row_free(&row);
			run_view_free(&v);
			return rc;
		}
	}
	if (f) {
		memset(f, 0, sizeof *f);
		f->mtime = v.changed;
	}
	const char *slash = strchr(sub, '/');
	if (sub[0] == '\0') {
		if (names)
			rc = run_names(&v, &row, nchats > 0, names);
		else
			f->dir = true, f->perm = 0555;
	} else if (strncmp(sub, "subagents", 9) == 0 && (sub[9] == '\0' || sub[9] == '/')) {
		if (!nchats) {
			rc = -ENOENT;
		} else if (sub[9] == '\0') {
			if (names)
				for (size_t i = 0; i < nchats && rc == 0; i++)
					rc = strlist_add(names, chats[i].chat_id) < 0 ? -ENOMEM : 0;
			else
				f->dir = true, f->perm = 0555;
		} else {
			const char *chat = sub + 10;
			const char *rest = strchr(chat, '/');
			size_t clen = rest ? (size_t)(rest - chat) : strlen(chat);
			const struct chat_row *c = NULL;
			for (size_t i = 0; i < nchats && !c; i++)
				if (strlen(chats[i].chat_id) == clen &&
				    strncmp(chats[i].chat_id, chat, clen) == 0)
					c = &chats[i];
			if (!c) {
				rc = -ENOENT;
			} else if (!rest) {
				if (names) {
					const char *n5[] = { "messages.json", c->result ? "result" : NULL,
							     "state", c->tools ? "tools" : NULL,
							     "transcript" };
					for (size_t i = 0; i < 5 && rc == 0; i++)
						if (n5[i])
							rc = strlist_add(names, n5[i]) < 0 ? -ENOMEM : 0;
				} else {
					f->dir = true, f->perm = 0555;
				}
			} else if (names) {
				rc = -ENOTDIR;
			} else {
				rc = subagent_file(r, &v, &row, c, rest + 1, size_only, f);
			}
		}
	} else if (slash) {
		rc = -ENOENT;
	} else if (names) {
		rc = -ENOTDIR;
	} else {
		rc = run_file(r, &v, &row, sub, size_only, f);
	}
	if (rc < 0 && f)
		buf_free(&f->data);
	if (rc == 0 && f && cached && !f->dir && !f->sized) {
		/* Kept for the stats and reads that follow at this version
		 * (stamped with the run's change time and the store's write
		 * count taken before rendering: a write that landed meanwhile
		 * makes the next one render; the store's count sees the
		 * writes that do not change the run's time, such as an
		 * event). */
		if ((f->bytes = file_bytes_from_buf(&f->data)))
			filecache_put(r->files, id, v.serial, sub, ver, f->bytes);
	}
	if (rc == 0 && f)
		run_file_finish(r, &v, f);
	chat_rows_free(chats, nchats);
	run_row_free(&row);
	run_view_free(&v);
	return rc;
}

int runs_readdir(struct runs *r, const char *id, const char *sub, struct strlist *out)
{
	return run_lookup(r, id, sub, out, false, NULL);
}

int runs_stat_file(struct runs *r, const char *id, const char *sub, struct run_file *f)
{
	return run_lookup(r, id, sub, NULL, false, f);
}

int runs_attr_file(struct runs *r, const char *id, const char *sub, struct run_file *f)
{
	return run_lookup(r, id, sub, NULL, true, f);
}

/* ---- writes (validated at once, D9) ---- */

/* b with len bytes of data written at off (a gap is zero-filled), into
 * out. Returns 0 or -ENOMEM. */
static int apply_write(const struct buf *b, const char *data, size_t len, off_t off,
		       struct buf *out)
{
	size_t o = (size_t)off;
	if (o > b->len)
		return -EINVAL; /* the hole would read as NUL bytes: not text */
	if (buf_append(out, b->data ? b->data : "", o) < 0)
		return -ENOMEM;
	if (buf_append(out, data, len) < 0)
		return -ENOMEM;
	if (b->len > o + len && buf_append(out, b->data + o + len, b->len - o - len) < 0)
		return -ENOMEM;
	return 0;
}

/* Splits text into trimmed, non-empty lines. */
static int split_lines(const char *text, size_t len, struct strlist *out)
{
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && text[j] != '\n')
			j++;
		size_t a = i, z = j;
		while (a < z && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
			a++;
		while (z > a && (text[z - 1] == ' ' || text[z - 1] == '\t' || text[z - 1] == '\r'))
			z--;
		if (z > a && strlist_add_owned(out, strndup(text + a, z - a)) < 0)
			return -ENOMEM;
		i = j + 1;
	}
	return 0;
}

/* Whether s is valid UTF-8 (what JSON and the model need). */
static bool utf8_valid(const char *s)
{
	json_t *j = json_string(s);
	json_decref(j);
	return j != NULL;
}

/* Whether s[0..len) is valid UTF-8 but for a sequence at its end that the
 * next write may complete. */
static bool utf8_valid_so_far(const char *s, size_t len)
{
	size_t cut = len;
	for (size_t k = 1; k <= 3 && k <= len; k++) {
		unsigned char c = (unsigned char)s[len - k];
		if ((c & 0xC0) == 0x80)
			continue; /* a continuation byte: look further back */
		size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
		if (need > k)
			cut = len - k; /* its sequence is not finished yet */
		break;
	}
	json_t *j = json_stringn(s ? s : "", cut);
	json_decref(j);
	return j != NULL;
}

static bool has_nul(const char *data, size_t len)
{
	return memchr(data, '\0', len) != NULL;
}

/* The configuration name in text (one line), checked against the config in
 * force: 0 and *name, or -EINVAL. */
static int check_config_name(struct runs *r, const struct buf *text, char **name)
{
	struct strlist lines = { 0 };
	int rc = split_lines(text->data ? text->data : "", text->len, &lines);
	if (rc == 0 && lines.n != 1)
		rc = lines.n == 0 ? -EAGAIN : -EINVAL;
	if (rc == 0) {
		struct snapshot *s = engine_snapshot(r->engine);
		if (!config_find(snapshot_config(s), lines.items[0]))
			rc = -EINVAL;
		snapshot_unref(s);
	}
	if (rc == 0) {
		*name = lines.items[0];
		lines.items[0] = NULL;
	}
	strlist_free(&lines);
	return rc;
}

/* Forced skills in text, one per line, each a catalogue skill. */
static int check_skills(struct runs *r, const struct buf *text, struct strlist *out)
{
	int rc = split_lines(text->data ? text->data : "", text->len, out);
	if (rc < 0)
		return rc;
	struct snapshot *s = engine_snapshot(r->engine);
	for (size_t i = 0; i < out->n && rc == 0; i++)
		if (!catalog_find(s->catalog, out->items[i]))
			rc = -EINVAL;
	snapshot_unref(s);
	return rc;
}

/* Checks the skills file's text and makes its names the run's forced
 * skills, in the store and in memory. Lock held. 0 or a negative errno
 * (-EINVAL: an unknown skill), with nothing changed. */
static int take_skills(struct runs *r, struct run *run, const struct buf *text)
{
	struct strlist forced = { 0 };
	int rc = check_skills(r, text, &forced);
	json_t *j = rc == 0 ? strlist_to_json(&forced) : NULL;
	if (rc == 0 && !j)
		rc = -ENOMEM;
	if (rc == 0)
		rc = store_run_set_forced_skills(r->store, run->id, j, NULL);
	json_decref(j);
	if (rc == 0) {
		strlist_free(&run->forced);
		run->forced = forced;
	} else {
		strlist_free(&forced);
	}
	return rc;
}

/* ctl: cancel, approve, deny. Called with the lock held; returns with it
 * held. */
static int apply_ctl(struct runs *r, struct run *run, const char *cmd)
{
	enum runstate st = run->state;
	struct run_change ch = { 0 };
	if (strcmp(cmd, "cancel") == 0) {
		if (runstate_is_terminal(st))
			return -EINVAL;
		/* A worker has it: the store may already say running while
		 * this copy still says queued. The agent polls the flag. */
		if (run->busy) {
			__atomic_store_n(&run->cancel_requested, true, __ATOMIC_RELEASE);
			return 0;
		}
		return store_run_transition(r->store, run->id, st, RUNSTATE_CANCELLED, NULL, NULL);
	}
	if (strcmp(cmd, "approve") == 0 || strcmp(cmd, "deny") == 0) {
		if (st != RUNSTATE_WAITING_FOR_APPROVAL)
			return -EINVAL;
		ch.input = cmd;
		int rc = store_run_transition(r->store, run->id, st, RUNSTATE_RUNNING, &ch, NULL);
		if (rc == 0) {
			run->state = RUNSTATE_RUNNING;
			rc = queue_push(r, run->id) < 0 ? -ENOMEM : 0;
		}
		return rc;
	}
	return -EINVAL;
}

/* Whether file name of run may be written now: 0 or -EACCES. */
static int writable_locked(const struct run *run, const char *name)
{
	if (strcmp(name, "ctl") == 0)
		return runstate_is_terminal(run->state) ? -EACCES : 0;
	if (strcmp(name, "input") == 0)
		return run->state == RUNSTATE_WAITING_FOR_INPUT ? 0 : -EACCES;
	if (strcmp(name, "prompt") == 0 || strcmp(name, "config") == 0 ||
	    strcmp(name, "skills") == 0 || strcmp(name, "workdir") == 0)
		return run->state == RUNSTATE_CREATED ? 0 : -EACCES;
	return -EACCES;
}

/* The longest workdir file: one path and its newline. */
#define WORKDIR_FILE_MAX (PATH_MAX + 1)

/* Checks text as the content of runs/<id>/workdir (blank: no workdir) and
 * takes it, when run id is still the one of serial, still created, and
 * its workdir file still at generation gen. Called without the lock held:
 * the check resolves the path, which may lead anywhere (a slow disk, this
 * very mount). Returns 0 or a negative errno, with nothing changed on
 * error: -EINVAL when the path is refused, its reason then logged as an
 * event "workdir_refused" {"path", "reason"} (a write can only say
 * EINVAL), -EBUSY when another write changed the file meanwhile. */
static int take_workdir(struct runs *r, const char *id, uint64_t serial, uint64_t gen,
			struct buf *text)
{
	struct strlist lines = { 0 };
	char *resolved = NULL, *why = NULL;
	int rc = split_lines(text->data ? text->data : "", text->len, &lines);
	if (rc == 0 && lines.n > 1) {
		rc = -EINVAL;
		why = strdup("workdir holds one absolute path, on one line");
	} else if (rc == 0 && lines.n == 1) {
		struct snapshot *s = engine_snapshot(r->engine);
		rc = check_workdir(r, snapshot_config(s), lines.items[0], &resolved, &why);
		snapshot_unref(s);
	}
	if (rc == 0) {
		pthread_mutex_lock(&r->lock);
		struct run *run = run_find(r, id);
		if (!run || run->serial != serial)
			rc = -ENOENT;
		else if ((rc = writable_locked(run, "workdir")) < 0)
			; /* started meanwhile */
		else if (run->workdir_gen != gen)
			rc = -EBUSY;
		else if ((rc = store_run_set_workdir(r->store, id, resolved, NULL)) == 0) {
			free(run->workdir);
			run->workdir = resolved;
			resolved = NULL;
			buf_free(&run->workdir_file);
			run->workdir_file = *text;
			*text = (struct buf){ 0 };
			run->workdir_gen++;
			clock_gettime(CLOCK_REALTIME, &run->changed);
		}
		pthread_mutex_unlock(&r->lock);
		if (rc == 0)
			refresh(r, id);
	} else if (rc == -EINVAL && why) {
		json_t *ev = json_pack("{s:s?, s:s}", "path", lines.n == 1 ? lines.items[0] : NULL,
				       "reason", why);
		/* The write fails with EINVAL either way; the reason goes to the
		 * log when the events cannot take it. */
		char *err = NULL;
		if (!ev || store_event_append(r->store, id, "workdir_refused", ev, NULL, &err) < 0)
			run_log(id, "workdir %s refused: %s (the event was not stored: %s)",
				lines.n == 1 ? lines.items[0] : "(several lines)", why,
				err ? err : "out of memory");
		free(err);
		json_decref(ev);
	}
	strlist_free(&lines);
	free(resolved);
	free(why);
	return rc;
}

/* A write of runs/<id>/workdir (D9: checked now). */
static ssize_t write_workdir(struct runs *r, const char *id, const char *data, size_t len,
			     off_t off)
{
	if ((uint64_t)off + len > WORKDIR_FILE_MAX)
		return -EFBIG;
	if (has_nul(data, len))
		return -EINVAL;
	struct buf tmp = { 0 };
	uint64_t serial = 0, gen = 0;
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc = run ? writable_locked(run, "workdir") : -ENOENT;
	if (rc == 0) {
		rc = apply_write(&run->workdir_file, data, len, off, &tmp);
		serial = run->serial;
		gen = run->workdir_gen;
	}
	pthread_mutex_unlock(&r->lock);
	if (rc == 0)
		rc = take_workdir(r, id, serial, gen, &tmp);
	buf_free(&tmp);
	return rc < 0 ? rc : (ssize_t)len;
}

/* A truncate of runs/<id>/workdir: what is left is checked again (to
 * nothing: the run has no workdir). */
static int truncate_workdir(struct runs *r, const char *id, off_t size)
{
	struct buf cut = { 0 };
	uint64_t serial = 0, gen = 0;
	bool shorter = false;
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc = run ? writable_locked(run, "workdir") : -ENOENT;
	if (rc == 0 && (size_t)size < run->workdir_file.len) {
		shorter = true;
		if (buf_append(&cut, run->workdir_file.data, (size_t)size) < 0)
			rc = -ENOMEM;
		serial = run->serial;
		gen = run->workdir_gen;
	}
	pthread_mutex_unlock(&r->lock);
	if (rc == 0 && shorter)
		rc = take_workdir(r, id, serial, gen, &cut);
	buf_free(&cut);
	return rc;
}

ssize_t runs_write(struct runs *r, const char *id, const char *name, const char *data,
		   size_t len, off_t off)
{
	if (off < 0)
		return -EINVAL;
	/* prompt and input are kept until their close; the others commit. */
	if (strcmp(name, "prompt") != 0 && strcmp(name, "input") != 0) {
		int ready = store_wait_writable(r->store, REQUEST_STORE_WAIT_MS);
		if (ready < 0)
			return ready;
	}
	if (strcmp(name, "workdir") == 0)
		return write_workdir(r, id, data, len, off);
	struct snapshot *s = engine_snapshot(r->engine);
	long prompt_max = snapshot_config(s)->prompt_max_bytes;
	snapshot_unref(s);
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	ssize_t rc = 0;
	bool changed = false;
	struct buf tmp = { 0 };
	if (!run) {
		rc = -ENOENT;
	} else if (strcmp(name, "ctl") != 0 && (rc = writable_locked(run, name)) < 0) {
		/* read-only now (a ctl command says itself when it cannot be) */
	} else if (strcmp(name, "prompt") == 0) {
		if ((uint64_t)off + len > (uint64_t)prompt_max)
			rc = -EFBIG;
		else if (has_nul(data, len))
			rc = -EINVAL;
		else if ((rc = apply_write(&run->prompt, data, len, off, &tmp)) == 0) {
			buf_free(&run->prompt);
			run->prompt = tmp;
			tmp = (struct buf){ 0 };
			run->prompt_written = true;
			if (off == 0)
				run->prompt_refused = false; /* written again from the start */
			changed = true;
		}
		if (rc == -EFBIG || rc == -EINVAL) {
			/* Drop what came before too: a prompt cut short must not
			 * start a run when the file is closed. */
			buf_free(&run->prompt);
			run->prompt_written = false;
			run->prompt_refused = true;
			changed = true;
		}
	} else if (strcmp(name, "config") == 0 || strcmp(name, "skills") == 0) {
		bool is_config = name[0] == 'c';
		struct buf *file = is_config ? &run->config_file : &run->skills_file;
		if ((uint64_t)off + len > (is_config ? CONFIG_NAME_MAX + 2 : SKILLS_FILE_MAX))
			rc = -EFBIG;
		else if (has_nul(data, len))
			rc = -EINVAL;
		else
			rc = apply_write(file, data, len, off, &tmp);
		if (rc == 0 && is_config) {
			char *cfg = NULL;
			rc = check_config_name(r, &tmp, &cfg);
			if (rc == -EAGAIN) {
				rc = 0; /* blank so far: nothing to take yet */
			} else if (rc == 0) {
				rc = store_run_set_config(r->store, id, cfg, NULL);
				if (rc == 0) {
					free(run->config);
					run->config = cfg;
					cfg = NULL;
				}
			}
			free(cfg);
		} else if (rc == 0) {
			rc = take_skills(r, run, &tmp);
		}
		if (rc == 0) {
			buf_free(file);
			*file = tmp;
			tmp = (struct buf){ 0 };
			changed = true;
		}
	} else if (strcmp(name, "ctl") == 0) {
		struct strlist words = { 0 };
		rc = split_lines(data, len, &words);
		if (rc == 0)
			rc = words.n == 1 ? apply_ctl(r, run, words.items[0]) : -EINVAL;
		strlist_free(&words);
		changed = rc == 0;
	} else if (strcmp(name, "input") == 0) {
		if ((uint64_t)off + len > INPUT_MAX)
			rc = -EFBIG;
		else if (has_nul(data, len))
			rc = -EINVAL;
		else if ((rc = apply_write(&run->input, data, len, off, &tmp)) == 0 &&
			 !utf8_valid_so_far(tmp.data, tmp.len))
			rc = -EINVAL; /* refused now: an error at close is not seen */
		else if (rc == 0) {
			buf_free(&run->input);
			run->input = tmp;
			tmp = (struct buf){ 0 };
			run->input_written = true;
		}
		if (rc == -EFBIG || rc == -EINVAL) {
			/* As for the prompt: an answer cut short is not sent;
			 * one written again from its start is. */
			buf_free(&run->input);
			run->input_written = false;
		}
	}
	if (changed)
		clock_gettime(CLOCK_REALTIME, &run->changed);
	pthread_mutex_unlock(&r->lock);
	buf_free(&tmp);
	if (changed)
		refresh(r, id);
	return rc < 0 ? rc : (ssize_t)len;
}

int runs_writable(struct runs *r, const char *id, const char *name)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc = run ? writable_locked(run, name) : -ENOENT;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int runs_truncate(struct runs *r, const char *id, const char *name, off_t size)
{
	if (size < 0)
		return -EINVAL;
	if (strcmp(name, "prompt") != 0 && strcmp(name, "input") != 0) {
		int ready = store_wait_writable(r->store, REQUEST_STORE_WAIT_MS);
		if (ready < 0)
			return ready;
	}
	if (strcmp(name, "workdir") == 0)
		return truncate_workdir(r, id, size);
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc = 0;
	struct buf *b = NULL;
	if (!run)
		rc = -ENOENT;
	else
		rc = writable_locked(run, name);
	if (rc == 0 && strcmp(name, "input") == 0) {
		b = &run->input;
	} else if (rc == 0 && strcmp(name, "prompt") == 0) {
		b = &run->prompt;
		run->prompt_refused = false; /* written anew from here */
	} else if (rc == 0 && strcmp(name, "config") == 0) {
		b = &run->config_file;
	} else if (rc == 0 && strcmp(name, "skills") == 0) {
		b = &run->skills_file;
	}
	bool changed = false;
	if (rc == 0 && b && (size_t)size < b->len) {
		struct buf cut = { 0 };
		if (buf_append(&cut, b->data, (size_t)size) < 0)
			rc = -ENOMEM;
		/* The forced skills follow the file (`: > skills` clears them). */
		else if (b == &run->skills_file)
			rc = take_skills(r, run, &cut);
		if (rc == 0) {
			buf_free(b);
			*b = cut;
			changed = true;
			clock_gettime(CLOCK_REALTIME, &run->changed);
		} else {
			buf_free(&cut);
		}
	}
	pthread_mutex_unlock(&r->lock);
	if (changed)
		refresh(r, id);
	return rc;
}

/* Enqueues a created run whose prompt was closed (R6): the allow-list is
 * resolved now and stored with it. */
/* Enqueues run id when its prompt was written (R6: its allow-list is
 * resolved and stored now). Returns 0 when the run is queued and stored
 * (or failed and stored, for a configuration that is gone), or when there
 * was nothing to start; a negative errno when the store could not commit
 * (-EAGAIN: the database is locked elsewhere; -ENOSPC, -EROFS, -EIO): the
 * run then stays created, as it was, and writing the prompt again starts
 * it. */
static int enqueue(struct runs *r, const char *id)
{
	/* Started now, the run would write to a file no later mount sees. */
	if (store_file_gone(r, true))
		return -EIO;
	/* Nothing to start: no commit, so no wait for the store either. */
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	bool starts = run && run->state == RUNSTATE_CREATED && run->prompt_written &&
		      run->prompt.len && !run->prompt_refused;
	pthread_mutex_unlock(&r->lock);
	if (!starts)
		return 0;
	int writable = store_wait_writable(r->store, REQUEST_STORE_WAIT_MS);
	pthread_mutex_lock(&r->lock);
	run = run_find(r, id);
	if (writable < 0) {
		/* The close says it failed: nothing starts until the prompt is
		 * written again (not the release that follows this close). */
		if (run)
			run->prompt_written = false;
		pthread_mutex_unlock(&r->lock);
		return writable;
	}
	if (!run || run->state != RUNSTATE_CREATED || !run->prompt_written || !run->prompt.len ||
	    run->prompt_refused) {
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	run->prompt_written = false;
	char *prompt = strndup(run->prompt.data, run->prompt.len);
	char *config = strdup(run->config);
	json_t *forced = strlist_to_json(&run->forced);
	const char **names = calloc(run->forced.n ? run->forced.n : 1, sizeof *names);
	size_t nforced = run->forced.n;
	for (size_t i = 0; names && i < nforced; i++)
		names[i] = run->forced.items[i];
	struct snapshot *s = engine_snapshot(r->engine);
	const struct config *c = snapshot_config(s);
	const struct configuration *cfg = config ? config_find(c, config) : NULL;
	struct resolution *owned = NULL;
	const struct resolution *res = NULL;
	json_t *allow = NULL, *prov = NULL;
	const char *error = NULL;
	char msg[256];
	if (!prompt || !config || !forced || !names) {
		error = "out of memory while enqueueing the run";
	} else if (!cfg) {
		snprintf(msg, sizeof msg,
			 "configuration '%s' does not exist (any more) in the config file", config);
		error = msg;
	} else if (!utf8_valid(prompt)) {
		error = "the prompt is not valid UTF-8";
	} else if (!(res = resolve_run(s, cfg, names, nforced, &owned)) ||
		   !(allow = grants_to_json(&res->grants)) ||
		   !(prov = provenance_of(c, s->catalog, res))) {
		error = "out of memory while resolving the allow-list";
	}
	/* The state is written to the store and to memory under the lock, so
	 * no refresh is needed: tell the mount and waiters directly. */
	int rc;
	bool refresh_needed = false;
	struct waiter *ready = NULL;
	if (error) {
		rc = store_run_transition(r->store, id, RUNSTATE_CREATED, RUNSTATE_FAILED,
					  &(struct run_change){ .error = error }, NULL);
		if (rc == 0) {
			run->state = RUNSTATE_FAILED;
			ready = take_waiters(r, id, false);
		}
	} else if ((rc = store_run_enqueue_with(r->store, id, config, prompt, forced, allow, prov,
					      NULL, NULL)) == 0) {
		/* Stored: that is the acknowledgment; a queue that cannot grow
		 * leaves the run to the store (refresh below, a remount). */
		run->state = RUNSTATE_QUEUED;
		if (queue_push(r, id) < 0)
			refresh_needed = true;
	}
	clock_gettime(CLOCK_REALTIME, &run->changed);
	pthread_mutex_unlock(&r->lock);
	resolution_free(owned);
	json_decref(allow);
	json_decref(prov);
	snapshot_unref(s);
	json_decref(forced);
	free(names);
	free(prompt);
	free(config);
	if (rc < 0 || refresh_needed) {
		refresh(r, id); /* the store is the truth */
		return rc;
	}
	/* Blocked readers first, as refresh_files does. */
	answer_waiters(ready, 0, runstate_name(RUNSTATE_FAILED));
	notify(r, id, RUN_CHANGED_STATE);
	return 0;
}

/* The writer counter of run's file name, or NULL when closing that file
 * starts nothing. */
static unsigned *writers_of(struct run *run, const char *name)
{
	if (strcmp(name, "prompt") == 0)
		return &run->prompt_writers;
	if (strcmp(name, "input") == 0)
		return &run->input_writers;
	return NULL;
}

uint64_t runs_open_writer(struct runs *r, const char *id, const char *name)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	unsigned *n = run ? writers_of(run, name) : NULL;
	uint64_t ticket = 0;
	if (n) {
		++*n;
		ticket = run->serial;
		/* A run is about to be queued: an idle worker may get its
		 * model ready meanwhile. */
		if (n == &run->prompt_writers && run->state == RUNSTATE_CREATED &&
		    !r->spare && !r->spare_making && !r->spare_wanted) {
			r->spare_wanted = true;
			pthread_cond_signal(&r->work);
		}
	}
	pthread_mutex_unlock(&r->lock);
	return ticket;
}

int runs_close_writer(struct runs *r, const char *id, const char *name, uint64_t ticket,
		      bool release)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	unsigned *n = run && run->serial == ticket ? writers_of(run, name) : NULL;
	bool last = n && *n > 0 && (release ? --*n == 0 : *n == 1);
	pthread_mutex_unlock(&r->lock);
	if (!last)
		return 0;
	if (strcmp(name, "prompt") == 0)
		return enqueue(r, id);
	int ready = store_wait_writable(r->store, REQUEST_STORE_WAIT_MS);
	pthread_mutex_lock(&r->lock);
	run = run_find(r, id);
	if (ready < 0) {
		/* Failed, so not taken: not by the release after it either. */
		if (run && run->serial == ticket)
			run->input_written = false;
		pthread_mutex_unlock(&r->lock);
		return ready;
	}
	int rc = 0;
	bool moved = false;
	if (run && run->serial == ticket && run->state == RUNSTATE_WAITING_FOR_INPUT &&
	    run->input_written) {
		run->input_written = false;
		char *text = strndup(run->input.data ? run->input.data : "", run->input.len);
		if (!text) {
			rc = -ENOMEM;
		} else if (!utf8_valid(text)) {
			rc = -EINVAL;
		} else {
			rc = store_run_transition(r->store, id, RUNSTATE_WAITING_FOR_INPUT,
						  RUNSTATE_RUNNING,
						  &(struct run_change){ .input = text }, NULL);
			if (rc == 0) {
				run->state = RUNSTATE_RUNNING;
				rc = queue_push(r, id) < 0 ? -ENOMEM : 0;
			}
			moved = rc == 0;
		}
		free(text);
		buf_free(&run->input);
	}
	pthread_mutex_unlock(&r->lock);
	if (moved)
		refresh(r, id);
	return rc;
}

/* ---- waiting ---- */

int runs_wait(struct runs *r, const char *id, runs_wait_fn fn, void *arg, char *status,
	      size_t size, uint64_t *handle)
{
	pthread_mutex_lock(&r->lock);
	struct run *run = run_find(r, id);
	int rc;
	if (!run) {
		rc = -ENOENT;
	} else if (r->stopping) {
		rc = -EINTR;
	} else if (runstate_is_settled(run->state)) {
		snprintf(status, size, "%s", runstate_name(run->state));
		rc = 0;
	} else {
		struct waiter *w = calloc(1, sizeof *w);
		if (!w) {
			rc = -ENOMEM;
		} else {
			w->handle = r->next_handle++;
			snprintf(w->id, sizeof w->id, "%s", id);
			w->fn = fn;
			w->arg = arg;
			w->next = r->waiters;
			r->waiters = w;
			*handle = w->handle;
			rc = 1;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

bool runs_wait_cancel(struct runs *r, uint64_t handle)
{
	pthread_mutex_lock(&r->lock);
	bool found = false;
	for (struct waiter **pp = &r->waiters; *pp; pp = &(*pp)->next) {
		if ((*pp)->handle == handle) {
			struct waiter *w = *pp;
			*pp = w->next;
			free(w);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return found;
}

int runs_attach(struct engine *e, const char *state_path, char **err)
{
	char *path = engine_state_path(e, state_path);
	if (!path) {
		*err = strdup("out of memory");
		return -1;
	}
	struct runs *r = runs_open(e, path, err);
	free(path);
	if (!r)
		return -1;
	/* The audit trail lives in the same database; what changed while
	 * unmounted is recorded while the mount already answers. */
	if (!(r->audit = audit_start(e, r->store, err))) {
		runs_close(r);
		return -1;
	}
	engine_set_runs(e, r);
	return 0;
}

struct audit *runs_audit(struct runs *r)
{
	return r ? r->audit : NULL;
}

/* Creates the directory of the database at path; 0, or -1 with *err. */
static int make_state_dir(const char *path, char **err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	if (workspace_mkdirs(dir, 0700) == 0)
		return 0;
	if (asprintf(err, "cannot create the state directory %s: %s", dir, strerror(errno)) < 0)
		*err = NULL;
	return -1;
}

int runs_check_store(struct engine *e, const char *state_path, char **err)
{
	*err = NULL;
	char *path = engine_state_path(e, state_path);
	if (!path) {
		*err = strdup("out of memory");
		return -1;
	}
	int rc = -1;
	if (make_state_dir(path, err) == 0) {
		struct store *st = store_open(path, err);
		if (st) {
			store_close(st);
			rc = 0;
		}
	}
	free(path);
	if (rc < 0 && !*err)
		*err = strdup("cannot open the run database");
	return rc;
}

int runs_lock_state(struct engine *e, const char *state_path, char **err)
{
	*err = NULL;
	char *path = engine_state_path(e, state_path);
	if (!path) {
		*err = strdup("out of memory");
		return -1;
	}
	int fd = make_state_dir(path, err) == 0 ? statelock_take(path, err) : -1;
	free(path);
	return fd;
}

void runs_detach(struct engine *e)
{
	struct runs *r = engine_runs(e);
	engine_set_runs(e, NULL);
	runs_close(r);
}

bool runs_detach_within(struct engine *e, int timeout_ms)
{
	struct runs *r = engine_runs(e);
	if (!runs_close_within(r, timeout_ms))
		return false; /* still attached: the workers use the engine */
	engine_set_runs(e, NULL);
	return true;
}
