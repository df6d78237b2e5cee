/* engine: the one object that owns skillfs's state — the current snapshot
 * of config and catalogue (rebuilt when files change on disk) and, later,
 * the run machinery. Everything else borrows from it. */
#ifndef SKILLFS_ENGINE_H
#define SKILLFS_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "skill.h"

struct resolution;
struct runs;

/* The deepest path the mount shows (VIEW_MAX_DEPTH), and so the depth to
 * which the watcher follows a skill's directories. */
#define ENGINE_MAX_DEPTH 64

struct engine_options {
	const char *config_path;  /* NULL: the no-config default (section 9) */
	const char *const *dirs;  /* -s and -r directories, in command-line order */
	const bool *recursive;    /* per dirs[i]: a -r directory, searched at any
	                             depth (NULL: none is) */
	size_t ndirs;
	struct skill_limits limits;
	bool watch;               /* follow changes on disk (inotify) */
};

/* Per-skill texts derived in the context of one snapshot (trust, source and
 * execution mode come from the config), built on first use. */
struct snapshot_skill_texts {
	char *json;
	size_t json_len;
	char *mode;
	size_t mode_len;
};

/* An immutable view of config + catalogue. Hold a reference while using it;
 * derived texts are built lazily and cached inside it. */
struct snapshot {
	int refs;
	uint64_t generation;
	struct timespec built;      /* when this snapshot was made */
	struct shared_config *cfg;  /* refcounted; see config() */
	struct catalog *catalog;
	char *config_error;         /* last failed reload, or NULL */

	pthread_mutex_t lock;       /* guards the lazy caches below */
	struct snapshot_skill_texts *texts; /* per catalogue entry */
	struct resolution **res;    /* per configuration index */
	char *tools_text;
	size_t tools_len;
	uint64_t *resolutions_built; /* engine counter, for the benchmark */
	bool have_python;           /* the python tool can run: python3 in the
	                               sandbox's PATH (R13 sub-agent set) */
	struct engine *engine;      /* the engine it came from */
};

/* The snapshot's config. */
const struct config *snapshot_config(const struct snapshot *s);

struct sandbox;
/* How the snapshot's config confines process tools (probed at its load). */
const struct sandbox *snapshot_sandbox(const struct snapshot *s);

struct engine;

/* Called after a rebuild with the old and new snapshot (both valid during
 * the call), from the watcher thread. */
typedef void (*engine_change_fn)(void *ctx, const struct snapshot *old,
				 const struct snapshot *now);

/* Loads config and catalogue. On error returns NULL and *err (caller frees)
 * says what to fix (e.g. the config file's line and key). */
struct engine *engine_open(const struct engine_options *opt, char **err);

/* Starts following changes on disk; fn is called after each rebuild. The
 * watches are set up on the watcher thread, followed by one rescan, so the
 * mount can answer at once and nothing that changed meanwhile is missed.
 * Returns 0 or -1 with errno. */
int engine_watch(struct engine *e, engine_change_fn fn, void *ctx);

/* Stops following changes (joins the watcher thread); no callback runs
 * after it returns. Idempotent. */
void engine_unwatch(struct engine *e);

/* The current snapshot, with a reference the caller must drop. */
struct snapshot *engine_snapshot(struct engine *e);
void snapshot_unref(struct snapshot *s);

/* Rescans now (what the watcher does after a change). config_changed
 * reloads the config file; dirty lists skill directories to re-read even
 * when their SKILL.md looks unchanged. When the config is not reloaded and
 * every skill is unchanged, the current snapshot stays (and fn is not
 * called). Returns 0, or -1 on ENOMEM. */
int engine_reload(struct engine *e, bool config_changed, const struct strlist *dirty);

/* engine_reload after a change the caller followed in full: dirty names
 * every directory that changed since the current snapshot was made (each
 * one that changed and those above it up to its source, and each name that
 * came or went in a source), so the catalogue is updated in O(what
 * changed) where catalog_update can follow the change, and built afresh
 * where it cannot. What the watcher does after a burst of events. */
int engine_update(struct engine *e, const struct strlist *dirty);

/* Reloads the config file and re-reads every skill now, as the watcher
 * does after events were lost (skillfs reloads so on SIGHUP), and returns
 * once that is done (fn has been called when something changed). With a
 * watcher running (engine_watch) the watcher thread does it, so what the
 * new config names is watched too; else the calling thread does. The
 * outcome is in the current snapshot (config_error when the file could not
 * be taken). Returns 0, or -1 on ENOMEM. */
int engine_reload_all(struct engine *e);

/* skill.json and mode texts of catalogue entry i of s, built once. */
const struct snapshot_skill_texts *snapshot_skill_texts(struct snapshot *s, size_t i);

/* The resolution (effective skills, grants, prompt, file texts) of
 * configuration index ci of s, built once per snapshot. NULL on ENOMEM. */
const struct resolution *snapshot_resolution(struct snapshot *s, size_t ci);

/* The text of the `tools` file: registered tools, one per line. */
const char *snapshot_tools_text(struct snapshot *s, size_t *len);

/* How many resolutions were built since start (benchmark counter). */
uint64_t engine_resolutions_built(struct engine *e);

/* The run database's path: state_path when given, else the config's
 * `state`, else $XDG_STATE_HOME/skillfs/state.db (or
 * ~/.local/state/skillfs/state.db, the home directory from the password
 * database when HOME is unset). A new string, or NULL on ENOMEM. */
char *engine_state_path(struct engine *e, const char *state_path);

/* The run manager attached to the engine (runs_attach), or NULL. The engine
 * only keeps the pointer, for the mount's views: whoever attached it stops
 * it (runs_detach) before engine_close. */
struct runs *engine_runs(struct engine *e);
void engine_set_runs(struct engine *e, struct runs *r);

/* Called after each reload that made a new snapshot, with the snapshot
 * before and the new one, in the order they were made (one reload at a
 * time: the next waits for it), on the thread that reloaded, before the
 * engine_watch callback. */
typedef void (*engine_reload_fn)(void *ctx, const struct snapshot *old,
				 const struct snapshot *now);

/* Sets (fn NULL: clears) the reload hook; returns once a reload in
 * progress has finished with the one before. */
void engine_set_reload_hook(struct engine *e, engine_reload_fn fn, void *ctx);

struct pin_history;

/* Calls first(ctx, now) with the snapshot now current, then sets the
 * reload hook (fn, ctx) and the pinned sources' history h (pins.h), all
 * in one hold of the lock that keeps reloads one at a time: every reload
 * after the snapshot first saw reaches fn, and none waits longer than
 * first takes. */
void engine_follow_reloads(struct engine *e,
			   void (*first)(void *ctx, const struct snapshot *now),
			   engine_reload_fn fn, void *ctx, const struct pin_history *h);

/* What pinned sources held when they last matched (pins.h), for the
 * warnings of those that do not match, from the next reload on (NULL:
 * none). The engine keeps the pointer: h lives until it is set again or
 * the engine is closed. */
void engine_set_pin_history(struct engine *e, const struct pin_history *h);

/* Stops the watcher and frees everything (the run manager must be stopped
 * first). */
void engine_close(struct engine *e);

#endif
