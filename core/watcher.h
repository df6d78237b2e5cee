/* watcher: follows the skills' sources and the config file on disk with
 * inotify, on a thread of its own, and asks its host (the engine) to
 * reload after each burst of changes, naming the directories that
 * changed. It knows the host only through struct watcher_host: the
 * current config and catalogue, the config file's paths, and a reload. */
#ifndef SKILLFS_WATCHER_H
#define SKILLFS_WATCHER_H

#include <stdbool.h>

#include "catalog.h"
#include "config.h"
#include "strlist.h"

/* The host's current config and catalogue, held (a reference the host
 * keeps in held) from hold to release. */
struct watcher_view {
	const struct config *config;
	const struct catalog *catalog;
	void *held;
};

/* What the watcher asks of its host; every call comes from the watcher
 * thread. */
struct watcher_host {
	void *ctx;
	/* Fills v with the current config and catalogue, holding them. */
	void (*hold)(void *ctx, struct watcher_view *v);
	/* Drops what hold took. */
	void (*release)(void *ctx, struct watcher_view *v);
	/* The config file as given and as its links led at the last load,
	 * both malloc'd (NULL without a config file, or out of memory). */
	void (*config_paths)(void *ctx, char **given, char **real);
	/* Whether the config file, followed through its links, is another
	 * file or was changed since it was last read. */
	bool (*config_changed)(void *ctx);
	/* Rescans: config_changed reloads the config file; dirty lists
	 * directories to read again even when their SKILL.md looks unchanged;
	 * complete: dirty names every directory that changed since the
	 * current catalogue was made (it can then be updated in O(what
	 * changed)). Keeps the current catalogue when nothing changed.
	 * Returns 0, or -1 on ENOMEM. */
	int (*reload)(void *ctx, bool config_changed, const struct strlist *dirty,
		      bool complete);
	/* How deep below a skill's directory its directories are followed. */
	int max_depth;
};

struct watcher;

/* Starts the watcher thread, which sets up the watches, rescans once (so
 * nothing that changed before a watch was in place is missed), then asks
 * host->reload after each burst of changes until watcher_stop. host is
 * copied. Returns NULL with errno. */
struct watcher *watcher_start(const struct watcher_host *host);

/* Has the watcher thread reload the config file and every skill, as after
 * lost events, and returns once it has (so what a new config names is
 * watched too). Returns 0, or -1 when the thread has ended or cannot be
 * asked: the caller then reloads by itself. Any thread. */
int watcher_reload_all(struct watcher *wr);

/* What the watcher could not follow, for the catalogue's warnings (the
 * inotify watch limit reached): a new string, or NULL when nothing (or
 * out of memory). Any thread. */
char *watcher_warning(struct watcher *wr);

/* Stops the thread and waits for it; no host call happens after it
 * returns. Idempotent; wr may be NULL. */
void watcher_stop(struct watcher *wr);

/* Stops (watcher_stop) and frees. wr may be NULL. */
void watcher_free(struct watcher *wr);

#endif
