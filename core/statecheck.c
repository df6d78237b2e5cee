/* statecheck: `skillfs check --state DB`. */
#include "statecheck.h"

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runstate.h"
#include "store.h"

/* Long enough for a mounted daemon's commit, short enough for a person. */
#define STATECHECK_BUSY_MS 5000

struct sc {
	const char *path;
	sqlite3 *db;
	struct buf *out;
	int errors;
	bool oom;
};

__attribute__((format(printf, 2, 3)))
static void line(struct sc *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (buf_puts(c->out, "state: ") < 0 || buf_vprintf(c->out, fmt, ap) < 0 ||
	    buf_puts(c->out, "\n") < 0)
		c->oom = true;
	va_end(ap);
}

/* Reports the connection's last error about what as an error. */
static void db_error(struct sc *c, const char *what)
{
	line(c, "error: %s: %s (%s)", what, sqlite3_errmsg(c->db),
	     sqlite3_errstr(sqlite3_extended_errcode(c->db)));
	c->errors++;
}

/* The schema version, or -1 after an error was reported. Sets *tables to
 * the number of tables. */
static int schema(struct sc *c, int *tables)
{
	sqlite3_stmt *s = NULL;
	int version = -1;
	if (sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW) {
		db_error(c, "reading the schema version");
		sqlite3_finalize(s);
		return -1;
	}
	version = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	s = NULL;
	if (sqlite3_prepare_v2(c->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
			       -1, &s, NULL) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
		db_error(c, "reading the list of tables");
		sqlite3_finalize(s);
		return -1;
	}
	*tables = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return version;
}

static void integrity(struct sc *c)
{
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(c->db, "PRAGMA integrity_check", -1, &s, NULL) != SQLITE_OK) {
		db_error(c, "integrity check");
		return;
	}
	int rc, rows = 0;
	bool ok = false;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(s, 0);
		if (rows++ == 0 && t && strcmp(t, "ok") == 0) {
			ok = true;
			continue;
		}
		ok = false;
		line(c, "integrity: %s", t ? t : "(no text)");
	}
	if (rc != SQLITE_DONE) {
		db_error(c, "integrity check");
	} else if (ok && rows == 1) {
		line(c, "integrity: ok");
	} else {
		line(c, "error: the integrity check found the problems above: the "
		     "database is damaged (restore it from a copy, or move it "
		     "aside to start a new one)");
		c->errors++;
	}
	sqlite3_finalize(s);
}

static const char *what_next(enum runstate st)
{
	switch (st) {
	case RUNSTATE_RUNNING:
		return "was running: the next mount resumes it from its last "
		       "committed message";
	case RUNSTATE_QUEUED:
		return "queued: the next mount starts it in its turn";
	case RUNSTATE_CREATED:
		return "created: waits for its prompt";
	case RUNSTATE_WAITING_FOR_APPROVAL:
		return "waiting_for_approval: waits for approve or deny in ctl";
	case RUNSTATE_WAITING_FOR_INPUT:
		return "waiting_for_input: waits for an answer in input";
	default:
		return NULL;
	}
}

/* The count of runs in each state, then each one a mount takes up again:
 * the interrupted first, then the queue, as the run manager does. */
static void runs(struct sc *c)
{
	static const char sql[] =
		"SELECT id, state FROM runs ORDER BY state <> 'running', "
		"seq IS NULL, seq, id";
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(c->db, sql, -1, &s, NULL) != SQLITE_OK) {
		db_error(c, "reading the runs");
		return;
	}
	size_t n[RUNSTATE_COUNT] = {0}, total = 0, unknown = 0;
	struct buf pend = {0};
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(s, 0);
		const char *t = (const char *)sqlite3_column_text(s, 1);
		enum runstate st;
		total++;
		if (!runstate_parse(t, &st)) {
			unknown++;
			line(c, "error: run %s has unknown state '%s' (it reads as an "
			     "I/O error)", id ? id : "?", t ? t : "(null)");
			c->errors++;
			continue;
		}
		n[st]++;
		const char *next = what_next(st);
		if (next && buf_printf(&pend, "state: run %s: %s\n", id ? id : "?", next) < 0)
			c->oom = true;
	}
	if (rc != SQLITE_DONE)
		db_error(c, "reading the runs");
	sqlite3_finalize(s);
	struct buf counts = {0};
	for (int i = 0; i < RUNSTATE_COUNT; i++)
		if (n[i] && buf_printf(&counts, "%s%zu %s", counts.len ? ", " : "", n[i],
				       runstate_name((enum runstate)i)) < 0)
			c->oom = true;
	if (unknown && buf_printf(&counts, "%s%zu unknown", counts.len ? ", " : "",
				  unknown) < 0)
		c->oom = true;
	line(c, "runs: %zu%s%s%s", total, total ? " (" : "", counts.data ? counts.data : "",
	     total ? ")" : "");
	size_t pending = n[RUNSTATE_RUNNING] + n[RUNSTATE_QUEUED] + n[RUNSTATE_CREATED] +
			 n[RUNSTATE_WAITING_FOR_APPROVAL] + n[RUNSTATE_WAITING_FOR_INPUT];
	line(c, "runs to take up again at the next mount: %zu", pending);
	if (pend.len && buf_append(c->out, pend.data, pend.len) < 0)
		c->oom = true;
	buf_free(&pend);
	buf_free(&counts);
}

int statecheck_report(const char *path, struct buf *out)
{
	struct sc c = {.path = path, .out = out};
	struct stat st;
	line(&c, "database %s", path);
	if (stat(path, &st) < 0) {
		line(&c, "error: cannot open it: %s", strerror(errno));
		c.errors++;
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		line(&c, "error: not a regular file");
		c.errors++;
		goto done;
	}
	if (sqlite3_open_v2(path, &c.db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		if (c.db) {
			db_error(&c, "cannot open it");
		} else {
			line(&c, "error: cannot open it: out of memory");
			c.errors++;
		}
		goto done;
	}
	sqlite3_busy_timeout(c.db, STATECHECK_BUSY_MS);
	int tables = 0;
	int version = schema(&c, &tables);
	if (version < 0)
		goto done;
	if (version == 0 && tables == 0) {
		line(&c, "schema version 0: empty; the next mount makes it a state "
		     "database");
		goto done;
	}
	if (version == 0) {
		line(&c, "error: an SQLite database but not a skillfs state database "
		     "(no schema version); a mount refuses it");
		c.errors++;
		goto done;
	}
	if (version > STORE_SCHEMA_VERSION) {
		line(&c, "error: schema version %d, newer than this skillfs "
		     "understands (%d); a mount refuses it: use a newer skillfs",
		     version, STORE_SCHEMA_VERSION);
		c.errors++;
	} else if (version < STORE_SCHEMA_VERSION) {
		line(&c, "schema version %d, older than this skillfs's (%d): the "
		     "next mount migrates it", version, STORE_SCHEMA_VERSION);
	} else {
		line(&c, "schema version %d (current)", version);
	}
	integrity(&c);
	if (version <= STORE_SCHEMA_VERSION)
		runs(&c);
done:
	sqlite3_close_v2(c.db);
	if (c.oom)
		return -1;
	return buf_printf(out, "state: errors: %d\n", c.errors) < 0 ? -1 : c.errors;
}

/* ---- what the database remembers of pinned sources (issue 19) ---- */

struct statecheck_pins {
	sqlite3 *db;
	struct pin_history hist;
};

/* pin_history's last_match over pin_matches, read-only. */
static int pins_last_match(void *ctx, const char *source, const char *digest,
			   struct strlist *lines)
{
	struct statecheck_pins *p = ctx;
	sqlite3_stmt *s = NULL;
	int found = 0;
	if (sqlite3_prepare_v2(p->db, "SELECT lines FROM pin_matches WHERE source = ?1 AND "
			       "digest = ?2", -1, &s, NULL) != SQLITE_OK)
		return 0; /* an older schema: nothing recorded */
	sqlite3_bind_text(s, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, digest, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW) {
		const char *text = (const char *)sqlite3_column_text(s, 0);
		json_t *a = text ? json_loads(text, 0, NULL) : NULL;
		size_t i;
		json_t *v;
		found = json_is_array(a);
		json_array_foreach(a, i, v) {
			if (found > 0 && strlist_add(lines, json_string_value(v) ?: "") < 0)
				found = -1;
		}
		json_decref(a);
	}
	sqlite3_finalize(s);
	return found;
}

struct statecheck_pins *statecheck_pins_open(const char *path)
{
	struct stat st;
	if (!path || stat(path, &st) < 0)
		return NULL;
	struct statecheck_pins *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(p->db);
		free(p);
		return NULL;
	}
	sqlite3_busy_timeout(p->db, STATECHECK_BUSY_MS);
	p->hist = (struct pin_history){ pins_last_match, p, 1 };
	return p;
}

const struct pin_history *statecheck_pins(struct statecheck_pins *p)
{
	return p ? &p->hist : NULL;
}

void statecheck_pins_close(struct statecheck_pins *p)
{
	if (!p)
		return;
	sqlite3_close(p->db);
	free(p);
}
