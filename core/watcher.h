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

/* What a host's reload reads again besides the directories named dirty. */
enum watcher_reload {
	/* each skill whose SKILL.md looks changed */
	WATCHER_RELOAD_DIRTY,
	/* nothing: dirty names every directory that changed since the current
	 * catalogue was made (it can then be updated in O(what changed)) */
	WATCHER_RELOAD_COMPLETE,
	/* each skill whose SKILL.md or any other file looks changed (dirty is
	 * NULL): the rescan once the watches are set up, which must see a
	 * change made before a directory was watched */
	WATCHER_RELOAD_CHECK,
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
	 * how says what else is read again. Keeps the current catalogue when
	 * nothing changed. Returns 0, or -1 on ENOMEM. */
	int (*reload)(void *ctx, bool config_changed, const struct strlist *dirty,
		      enum watcher_reload how);
	/* How deep below a skill's directory its directories are followed. */
	int max_depth;
	/* For tests: at most this many watches are held, a new one past it
	 * refused as one past the kernel's limit is (0: no cap; see
	 * watcher_cap_watches). */
	size_t max_watches;
};


struct watcher;

/* A watcher for host (copied), not started yet: the host can keep it
 * (for watcher_warning) before its first call comes. Returns NULL with
 * errno. */
struct watcher *watcher_new(const struct watcher_host *host);

/* Starts the watcher thread, which sets up the watches, rescans once (so
 * nothing that changed before a watch was in place is missed), then asks
 * host->reload after each burst of changes until watcher_stop. Returns 0,
 * or -1 with errno. */
int watcher_start(struct watcher *wr);

/* Has the watcher thread reload the config file and every skill, as after
 * lost events, and returns once it has (so what a new config names is
 * watched too). Returns 0, or -1 when the thread has ended or cannot be
 * asked: the caller then reloads by itself. Any thread. */
int watcher_reload_all(struct watcher *wr);

/* What the watcher could not follow, for the catalogue's warnings (the
 * inotify watch limit reached): a new string, or NULL when nothing (or
 * out of memory). Any thread. */
char *watcher_warning(struct watcher *wr);

/* For tests: from now on, a new watch past max watches held is refused as
 * one past the kernel's limit is (0: no cap). Any thread. */
void watcher_cap_watches(struct watcher *wr, size_t max);

/* How many directories a watcher watches for config c (its file c->path,
 * if any) and catalogue cat, following a skill's directories max_depth
 * deep: the config file's directory and those above it, the sources,
 * those above them and the directories in them, and every directory of
 * every skill. Each directory counts once. SIZE_MAX when out of memory. */
size_t watcher_dirs_needed(const struct config *c, const struct catalog *cat, int max_depth);

/* Stops the thread and waits for it; no host call happens after it
 * returns. Idempotent; wr may be NULL. */
void watcher_stop(struct watcher *wr);

/* Stops (watcher_stop) and frees. wr may be NULL. */
void watcher_free(struct watcher *wr);

#endif
