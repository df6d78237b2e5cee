/* runlist: the runs of a run database, one summary each (see runlist.h). */
#include "runlist.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grow.h"

#define RUNLIST_BUSY_MS 5000
#define RUNLIST_LINE_MAX 200

char *runlist_first_line(const char *text)
{
	size_t n = strcspn(text, "\r\n");
	if (n > RUNLIST_LINE_MAX)
		n = RUNLIST_LINE_MAX;
	return strndup(text, n);
}

static char *dup_col(sqlite3_stmt *s, int col, const char *dflt, int *oom)
{
	const char *t = (const char *)sqlite3_column_text(s, col);
	if (!t && !dflt)
		return NULL;
	char *r = strdup(t ? t : dflt);
	if (!r)
		*oom = 1;
	return r;
}

int runlist_read(const char *path, struct run_summary **out, size_t *n, char **err)
{
	*out = NULL;
	*n = 0;
	*err = NULL;
	struct stat st;
	/* SQLite would make an empty database of a missing file. */
	int bad = stat(path, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : -1;
	if (bad) {
		if (asprintf(err, "%s: %s", path, bad > 0 ? strerror(bad) : "not a regular file") < 0)
			*err = NULL;
		return -1;
	}
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, RUNLIST_BUSY_MS);
		rc = sqlite3_prepare_v2(db,
					"SELECT id, state, config, created_at, prompt FROM runs "
					"ORDER BY created_at, seq, id",
					-1, &s, NULL);
	}
	struct run_summary *v = NULL;
	size_t cnt = 0, cap = 0;
	int oom = 0;
	while (rc == SQLITE_OK && !oom) {
		int step = sqlite3_step(s);
		if (step == SQLITE_DONE)
			break;
		if (step != SQLITE_ROW) {
			rc = step;
			break;
		}
		struct run_summary *nv = grow(v, &cap, cnt, sizeof *nv, 16);
		if (!nv) {
			oom = 1;
			break;
		}
		v = nv;
		struct run_summary *r = &v[cnt++];
		memset(r, 0, sizeof *r);
		r->id = dup_col(s, 0, "", &oom);
		r->state = dup_col(s, 1, "?", &oom);
		r->config = dup_col(s, 2, "default", &oom);
		r->created_ns = sqlite3_column_int64(s, 3);
		const char *p = (const char *)sqlite3_column_text(s, 4);
		if (p && !(r->prompt_line = runlist_first_line(p)))
			oom = 1;
	}
	if (rc != SQLITE_OK || oom) {
		if (oom)
			*err = strdup("out of memory");
		else if (asprintf(err, "%s: %s", path,
				  db ? sqlite3_errmsg(db) : "out of memory") < 0)
			*err = NULL;
		runlist_free(v, cnt);
		v = NULL;
		cnt = 0;
	}
	sqlite3_finalize(s);
	sqlite3_close(db);
	if (rc != SQLITE_OK || oom)
		return -1;
	*out = v;
	*n = cnt;
	return 0;
}

void runlist_free(struct run_summary *runs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(runs[i].id);
		free(runs[i].state);
		free(runs[i].config);
		free(runs[i].prompt_line);
	}
	free(runs);
}
