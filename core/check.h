/* check: the report of `skillfs check` (DESIGN.md section 9): every skill's
 * validity, trust, source and warnings, then every configuration's
 * resolution. */
#ifndef SKILLFS_CHECK_H
#define SKILLFS_CHECK_H

#include <stdbool.h>

#include "buf.h"
#include "catalog.h"
#include "config.h"

/* Appends a human-readable, line-oriented report to out; every line starts
 * with its subject ("config:", "skill <name>:", "catalog:",
 * "configuration <name>:") so it can be grepped, and the last line is
 * "errors: N". c may be NULL when the config failed to load (config_error
 * then says why); cat may be NULL. Errors: a config error, an orphaned
 * attachment, an invalid attached skill (an invalid skill nobody attaches
 * is reported, not counted). Returns the number of errors, or -1 on ENOMEM. */
int check_report(const struct config *c, const struct catalog *cat,
		 const char *config_error, struct buf *out);

/* The inotify watches a mount of the config and catalogue needs, and
 * those the system leaves it (watcher_dirs_needed, watch_limit_read). */
struct check_watch {
	size_t needed;       /* directories a mount watches */
	long limit;          /* the watch limit */
	const char *sysctl;  /* the sysctl that sets it */
	long in_use;         /* watches this user's processes hold; -1: unknown */
};

/* What check_report_opts adds to the report. */
struct check_options {
	/* Each configuration's Claude Code settings (claude.h): a line
	 * "configuration <name>: claude settings.json: " followed by the
	 * object of configs/<name>/claude/settings.json on one line, and a
	 * line "configuration <name>: claude warning: ..." for each line of
	 * its warnings file. */
	bool claude;
	/* When not NULL: a line "catalog: warning: the inotify watch limit
	 * is too low ..." when a mount needs more watches than are left
	 * (the limit less those in use), naming the sysctl to raise. */
	const struct check_watch *watch;
};

/* check_report with options (NULL: none, as check_report). */
int check_report_opts(const struct config *c, const struct catalog *cat,
		      const char *config_error, const struct check_options *opts,
		      struct buf *out);

#endif
