/* Tests for core/store: the SQLite run store (DESIGN.md section 6, R6-R8). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json_text.h"
#include "statelock.h"
#include "store.h"

struct fx {
	char dir[256];
	char db[300];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof f->dir, "%s/skillfs-store-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->db, sizeof f->db, "%s/state.db", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	DIR *d = opendir(f->dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[600];
			snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct store *open_ok(const char *path)
{
	char *err = NULL;
	struct store *st = store_open(path, &err);
	if (!st)
		fail_msg("store_open: %s", err ? err : "(no message)");
	free(err);
	return st;
}

/* Runs sql on a separate raw connection and returns column 0 of its first
 * row as an integer (-1 when there is no row). */
static long long raw_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	long long v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0)
						    : -1;
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

static json_t *jparse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
	if (!v)
		fail_msg("bad JSON in test: %s", je.text);
	return v;
}

static void assert_json_eq(const json_t *a, const char *want)
{
	json_t *w = jparse(want);
	if (!json_equal(a, w)) {
		char *got = a ? json_dumps(a, JSON_ENCODE_ANY) : NULL;
		fail_msg("JSON %s != %s", got ? got : "NULL", want);
	}
	json_decref(w);
}

/* Creates and enqueues run id with an allow-list of ["read"]. */
static int64_t make_queued(struct store *st, const char *id)
{
	json_t *forced = jparse("[]"), *allowed = jparse("[\"read\"]");
	int64_t seq = 0;
	assert_int_equal(store_run_create(st, id, NULL), 0);
	assert_int_equal(store_run_enqueue(st, id, "default", "do it", forced,
					   allowed, &seq, NULL), 0);
	json_decref(forced);
	json_decref(allowed);
	return seq;
}

static enum runstate state_of(struct store *st, const char *id)
{
	enum runstate s = (enum runstate)-1;
	assert_int_equal(store_run_state(st, id, &s, NULL), 0);
	return s;
}

static void assert_ids(const struct strlist *l, const char *const *want,
		       size_t n)
{
	assert_int_equal(l->n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(l->items[i], want[i]);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- schema and migrations ---------------------------------------------- */

static void test_fresh_database_gets_latest_schema(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	store_close(st);
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"),
			 STORE_SCHEMA_VERSION);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM "
			 "pragma_table_info('runs') WHERE name = 'allowed_tools'"),
			 1);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM "
			 "pragma_table_info('runs') WHERE name IN "
			 "('owner_uid', 'owner_gid')"), 2);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM "
			 "pragma_table_info('runs') WHERE name = 'workdir'"), 1);
	for (const char *const *t = (const char *const[]){"runs", "messages",
			"chats", "events", NULL}; *t; t++) {
		char sql[128];
		snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master "
			 "WHERE type = 'table' AND name = '%s'", *t);
		assert_int_equal(raw_int(f->db, sql), 1);
	}
	/* WAL is a persistent property of the file. */
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	sqlite3_stmt *s;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s,
					    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
	sqlite3_finalize(s);
	sqlite3_close(db);
	/* Private: runs hold prompts. */
	struct stat sb;
	assert_int_equal(stat(f->db, &sb), 0);
	assert_int_equal(sb.st_mode & 077, 0);
}

/* The schema an older skillfs (version 1) wrote: no allowed_tools. */
static const char v1_schema[] =
	"CREATE TABLE runs ("
	"  id TEXT PRIMARY KEY NOT NULL, seq INTEGER UNIQUE,"
	"  config TEXT NOT NULL DEFAULT 'default', prompt TEXT,"
	"  forced_skills TEXT NOT NULL DEFAULT '[]', state TEXT NOT NULL,"
	"  mode TEXT, chat_id TEXT, model TEXT, error TEXT, result TEXT,"
	"  pending TEXT, input TEXT, usage TEXT,"
	"  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
	"  started_at INTEGER, finished_at INTEGER);"
	"CREATE INDEX runs_by_state ON runs(state, seq);"
	"CREATE TABLE messages ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  chat_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,"
	"  json TEXT NOT NULL, ts INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, chat_id, seq));"
	"CREATE TABLE chats ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  chat_id TEXT NOT NULL, parent_chat TEXT, skill TEXT,"
	"  state TEXT NOT NULL, result TEXT,"
	"  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, chat_id));"
	"CREATE TABLE events ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  seq INTEGER NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL,"
	"  json TEXT NOT NULL, PRIMARY KEY (run_id, seq));"
	"PRAGMA user_version = 1;";

static void test_R8_v1_database_migrates_and_legacy_run_has_no_allow_list(
	void **state)
{
	struct fx *f = *state;
	raw_exec(f->db, v1_schema);
	raw_exec(f->db,
		"INSERT INTO runs (id, seq, config, prompt, forced_skills, state,"
		" mode, chat_id, model, pending, usage, created_at, updated_at,"
		" started_at) VALUES ('legacy', 7, 'review', 'fix the bug',"
		" '[\"pdf\"]', 'queued', 'inline', 'main-1', 'm1',"
		" '{\"tool\":\"bash\"}', '{\"tokens\":3}', 100, 200, 150);"
		"INSERT INTO chats VALUES ('legacy', 'skill-pdf-1', 'main-1', 'pdf',"
		" 'completed', 'digest', 110, 140);"
		"INSERT INTO messages VALUES ('legacy', 'main-1', 1, 'user',"
		" '{\"role\":\"user\",\"content\":\"fix the bug\"}', 120);"
		"INSERT INTO events VALUES ('legacy', 1, 130, 'note', '{\"a\":1}');");
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"), 1);

	struct store *st = open_ok(f->db);
	struct run_row r;
	int64_t seq = 0;
	assert_int_equal(store_run_get(st, "legacy", &r, NULL), 0);
	assert_null(r.allowed_tools); /* R8: resolve now when it continues */
	assert_string_equal(r.id, "legacy");
	assert_int_equal(r.seq, 7);
	assert_string_equal(r.config, "review");
	assert_string_equal(r.prompt, "fix the bug");
	assert_json_eq(r.forced_skills, "[\"pdf\"]");
	assert_int_equal(r.state, RUNSTATE_QUEUED);
	assert_string_equal(r.mode, "inline");
	assert_string_equal(r.chat_id, "main-1");
	assert_string_equal(r.model, "m1");
	assert_null(r.error);
	assert_null(r.result);
	assert_null(r.input);
	assert_json_eq(r.pending, "{\"tool\":\"bash\"}");
	assert_json_eq(r.usage, "{\"tokens\":3}");
	assert_int_equal(r.created_at, 100);
	assert_int_equal(r.updated_at, 200);
	assert_int_equal(r.started_at, 150);
	assert_int_equal(r.finished_at, 0);
	/* Made before owners were kept: none recorded (the daemon's user). */
	assert_int_equal(r.owner_uid, -1);
	assert_int_equal(r.owner_gid, -1);
	assert_null(r.workdir);
	run_row_free(&r);
	int64_t uid = 0, gid = 0;
	assert_int_equal(store_run_owner(st, "legacy", &uid, &gid, NULL), 0);
	assert_int_equal(uid, -1);
	assert_int_equal(gid, -1);

	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, "legacy", "main-1", &msgs, NULL), 0);
	assert_json_eq(msgs, "[{\"role\":\"user\",\"content\":\"fix the bug\"}]");
	json_decref(msgs);

	struct strlist q = {0};
	assert_int_equal(store_runs_in_state(st, RUNSTATE_QUEUED, &q, NULL), 0);
	assert_ids(&q, (const char *[]){"legacy"}, 1);
	strlist_free(&q);

	/* A chat of version 1 has no recorded tools; a new one has them. */
	struct chat_row *rows = NULL;
	size_t n = 0;
	assert_int_equal(store_chats(st, "legacy", &rows, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].result, "digest");
	assert_null(rows[0].tools);
	chat_rows_free(rows, n);
	json_t *tools = jparse("[\"read\"]");
	assert_int_equal(store_chat_create(st, "legacy", "skill-pdf-2", "main-1", "pdf",
					   tools, NULL), 0);
	json_decref(tools);
	assert_int_equal(store_chats(st, "legacy", &rows, &n, NULL), 0);
	assert_int_equal(n, 2);
	assert_json_eq(rows[1].tools, "[\"read\"]");
	chat_rows_free(rows, n);

	/* The log keeps its event and numbering across the migrations. */
	assert_int_equal(store_event_append(st, "legacy", "later", NULL, &seq, NULL), 0);
	assert_int_equal(seq, 2);
	struct buf log = {0};
	assert_int_equal(store_events_text(st, "legacy", &log, NULL), 0);
	assert_non_null(strstr(log.data, "\"seq\":1"));
	assert_non_null(strstr(log.data, "\"type\":\"note\""));
	assert_non_null(strstr(log.data, "\"a\":1"));
	assert_non_null(strstr(log.data, "\"type\":\"later\""));
	assert_int_equal(strchr(strchr(log.data, '\n') + 1, '\n') - log.data + 1, (long)log.len);
	buf_free(&log);

	/* A run enqueued now goes after the legacy one and stores its list. */
	assert_int_equal(make_queued(st, "new"), 8);
	assert_int_equal(store_run_get(st, "new", &r, NULL), 0);
	assert_json_eq(r.allowed_tools, "[\"read\"]");
	run_row_free(&r);
	store_close(st);
	/* Read by another connection once the store is closed. */
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"),
			 STORE_SCHEMA_VERSION);
}

/* Schema 6: a database of version 5 (owners kept, no workdir) opens with
 * its runs as they were and no workdir; a created run can then be given
 * one (and have it taken away), an enqueued one cannot. */
static void test_v5_database_migrates_and_runs_have_no_workdir(void **state)
{
	struct fx *f = *state;
	raw_exec(f->db, v1_schema);
	raw_exec(f->db,
		"ALTER TABLE runs ADD COLUMN allowed_tools TEXT;"
		"ALTER TABLE chats ADD COLUMN tools TEXT;"
		"ALTER TABLE runs ADD COLUMN owner_uid INTEGER;"
		"ALTER TABLE runs ADD COLUMN owner_gid INTEGER;"
		"INSERT INTO runs (id, config, forced_skills, state, created_at,"
		" updated_at, owner_uid, owner_gid) VALUES ('old', 'review', '[]',"
		" 'created', 100, 100, 1000, 1001);"
		"PRAGMA user_version = 5;");
	struct store *st = open_ok(f->db);
	struct run_row r;
	assert_int_equal(store_run_get(st, "old", &r, NULL), 0);
	assert_null(r.workdir);
	assert_string_equal(r.config, "review");
	assert_int_equal(r.owner_uid, 1000);
	assert_int_equal(r.owner_gid, 1001);
	run_row_free(&r);

	assert_int_equal(store_run_set_workdir(st, "old", "/srv/projects/a", NULL), 0);
	assert_int_equal(store_run_get(st, "old", &r, NULL), 0);
	assert_string_equal(r.workdir, "/srv/projects/a");
	run_row_free(&r);
	assert_int_equal(store_run_set_workdir(st, "old", NULL, NULL), 0);
	assert_int_equal(store_run_get(st, "old", &r, NULL), 0);
	assert_null(r.workdir);
	run_row_free(&r);

	char *err = NULL;
	assert_int_equal(store_run_set_workdir(st, "old", "relative/dir", &err), -EINVAL);
	free(err);
	err = NULL;
	assert_int_equal(store_run_set_workdir(st, "none", "/srv", &err), -ENOENT);
	free(err);
	err = NULL;
	make_queued(st, "q");
	assert_int_equal(store_run_set_workdir(st, "q", "/srv", &err), -EBUSY);
	assert_non_null(err);
	free(err);
	store_close(st);
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM "
			 "pragma_table_info('runs') WHERE name = 'workdir'"), 1);
}

static void test_reopen_is_idempotent(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r1");
	store_close(st);
	for (int i = 0; i < 3; i++) {
		st = open_ok(f->db);
		assert_int_equal(state_of(st, "r1"), RUNSTATE_QUEUED);
		store_close(st);
		assert_int_equal(raw_int(f->db, "PRAGMA user_version"),
				 STORE_SCHEMA_VERSION);
	}
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM runs"), 1);
}

static void test_newer_schema_is_refused(void **state)
{
	struct fx *f = *state;
	store_close(open_ok(f->db));
	char sql[64];
	snprintf(sql, sizeof sql, "PRAGMA user_version = %d",
		 STORE_SCHEMA_VERSION + 1);
	raw_exec(f->db, sql);

	char *err = NULL;
	assert_null(store_open(f->db, &err));
	assert_non_null(err);
	assert_non_null(strstr(err, "newer"));
	char num[16];
	snprintf(num, sizeof num, "%d", STORE_SCHEMA_VERSION + 1);
	assert_non_null(strstr(err, num));
	free(err);
	/* Left as it was. */
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"),
			 STORE_SCHEMA_VERSION + 1);
}

static void test_foreign_or_broken_files_are_refused(void **state)
{
	struct fx *f = *state;
	char *err = NULL;

	/* An SQLite database that is not ours. */
	raw_exec(f->db, "CREATE TABLE contacts (name TEXT);");
	assert_null(store_open(f->db, &err));
	assert_non_null(err);
	assert_non_null(strstr(err, "not a skillfs state database"));
	free(err);
	err = NULL;
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM sqlite_master "
				 "WHERE name = 'runs'"), 0);

	/* Not a database at all. */
	char junk[320];
	snprintf(junk, sizeof junk, "%s/junk.db", f->dir);
	FILE *fp = fopen(junk, "w");
	assert_non_null(fp);
	for (int i = 0; i < 200; i++)
		fputs("this is not an sqlite database\n", fp);
	fclose(fp);
	assert_null(store_open(junk, &err));
	assert_non_null(err);
	assert_non_null(strstr(err, junk));
	free(err);
	err = NULL;

	/* A directory that does not exist: named in the message. */
	char missing[320];
	snprintf(missing, sizeof missing, "%s/no/such/state.db", f->dir);
	assert_null(store_open(missing, &err));
	assert_non_null(err);
	assert_non_null(strstr(err, missing));
	free(err);
	err = NULL;

	assert_null(store_open("", &err));
	assert_non_null(err);
	free(err);
}

/* ---- runs ------------------------------------------------------------------ */

static void test_section6_run_create_and_duplicate_id(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	char *err = NULL;

	assert_int_equal(store_run_create(st, "a", NULL), 0);
	assert_int_equal(store_run_create(st, "a", &err), -EEXIST);
	assert_non_null(strstr(err, "'a'"));
	free(err);
	err = NULL;
	assert_int_equal(store_run_create(st, "", NULL), -EINVAL);

	struct run_row r;
	assert_int_equal(store_run_get(st, "a", &r, NULL), 0);
	assert_int_equal(r.state, RUNSTATE_CREATED);
	assert_string_equal(r.config, "default");
	assert_json_eq(r.forced_skills, "[]");
	assert_null(r.allowed_tools);
	assert_null(r.prompt);
	assert_int_equal(r.seq, 0);
	assert_true(r.created_at > 0);
	assert_int_equal(r.started_at, 0);
	run_row_free(&r);

	assert_int_equal(store_run_get(st, "zz", &r, &err), -ENOENT);
	assert_null(r.id);
	assert_non_null(strstr(err, "zz"));
	free(err);
	enum runstate s;
	assert_int_equal(store_run_state(st, "zz", &s, NULL), -ENOENT);
	store_close(st);
}

/* A run's owner (the uid and gid of its mkdir) is stored with it; none
 * is recorded by store_run_create, and a bad one is refused. */
static void test_run_owner_is_stored(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	char *err = NULL;
	assert_int_equal(store_run_create_owned(st, "n", 65534, 65533, NULL), 0);
	assert_int_equal(store_run_create_owned(st, "root", 0, 0, NULL), 0);
	assert_int_equal(store_run_create(st, "none", NULL), 0);
	assert_int_equal(store_run_create_owned(st, "n", 1, 1, NULL), -EEXIST);
	assert_int_equal(store_run_create_owned(st, "half", 5, -1, &err), -EINVAL);
	assert_non_null(strstr(err, "half"));
	free(err);
	assert_int_equal(store_run_create_owned(st, "big", 4294967295LL, 0, NULL), -EINVAL);
	assert_int_equal(store_run_create_owned(st, "neg", -2, -2, NULL), -EINVAL);
	assert_int_equal(store_run_create_owned(st, "", 1, 1, NULL), -EINVAL);

	int64_t uid = 0, gid = 0;
	assert_int_equal(store_run_owner(st, "n", &uid, &gid, NULL), 0);
	assert_int_equal(uid, 65534);
	assert_int_equal(gid, 65533);
	assert_int_equal(store_run_owner(st, "root", &uid, &gid, NULL), 0);
	assert_int_equal(uid, 0);
	assert_int_equal(gid, 0);
	assert_int_equal(store_run_owner(st, "none", &uid, &gid, NULL), 0);
	assert_int_equal(uid, -1);
	assert_int_equal(gid, -1);
	assert_int_equal(store_run_owner(st, "half", &uid, &gid, NULL), -ENOENT);
	struct run_row r;
	assert_int_equal(store_run_get(st, "n", &r, NULL), 0);
	assert_int_equal(r.owner_uid, 65534);
	assert_int_equal(r.owner_gid, 65533);
	run_row_free(&r);
	store_close(st);

	/* Survives a reopen; an owner that is no uid reads as an error, never
	 * as some uid. */
	raw_exec(f->db, "UPDATE runs SET owner_uid = 'x' WHERE id = 'root';"
			"UPDATE runs SET owner_uid = 7 WHERE id = 'none';");
	st = open_ok(f->db);
	assert_int_equal(store_run_owner(st, "n", &uid, &gid, NULL), 0);
	assert_int_equal(uid, 65534);
	assert_int_equal(store_run_owner(st, "root", &uid, &gid, NULL), -EIO);
	assert_int_equal(uid, -1);
	assert_int_equal(gid, -1);
	assert_int_equal(store_run_owner(st, "none", &uid, &gid, NULL), -EIO);
	assert_int_equal(uid, -1);
	assert_int_equal(gid, -1);
	store_close(st);
}

static void test_section6_config_and_skills_writable_only_while_created(
	void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "r", NULL), 0);
	json_t *skills = jparse("[\"pdf\",\"review\"]");
	assert_int_equal(store_run_set_config(st, "r", "strict", NULL), 0);
	assert_int_equal(store_run_set_forced_skills(st, "r", skills, NULL), 0);
	struct run_row r;
	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	assert_string_equal(r.config, "strict");
	assert_json_eq(r.forced_skills, "[\"pdf\",\"review\"]");
	run_row_free(&r);

	assert_int_equal(store_run_set_config(st, "r", "", NULL), -EINVAL);
	json_t *notarr = jparse("\"pdf\"");
	assert_int_equal(store_run_set_forced_skills(st, "r", notarr, NULL),
			 -EINVAL);
	json_decref(notarr);
	assert_int_equal(store_run_set_config(st, "nope", "x", NULL), -ENOENT);

	json_t *allowed = jparse("[]");
	assert_int_equal(store_run_enqueue(st, "r", "strict", "go", skills,
					   allowed, NULL, NULL), 0);
	char *err = NULL;
	assert_int_equal(store_run_set_config(st, "r", "other", &err), -EBUSY);
	assert_non_null(strstr(err, "queued"));
	free(err);
	assert_int_equal(store_run_set_forced_skills(st, "r", allowed, NULL),
			 -EBUSY);
	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	assert_string_equal(r.config, "strict");
	assert_json_eq(r.forced_skills, "[\"pdf\",\"review\"]");
	run_row_free(&r);
	json_decref(skills);
	json_decref(allowed);
	store_close(st);
}

static void test_R6_enqueue_stores_allow_list_and_numbers_in_order(
	void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	const char *ids[] = {"zeta", "alpha", "mid"};
	int64_t last = 0;
	for (size_t i = 0; i < 3; i++) {
		int64_t seq = make_queued(st, ids[i]);
		assert_true(seq > last);
		last = seq;
	}

	json_t *forced = jparse("[\"pdf\"]");
	json_t *allowed = jparse("[\"bash\",\"read\"]");
	assert_int_equal(store_run_create(st, "full", NULL), 0);
	int64_t seq = 0;
	assert_int_equal(store_run_enqueue(st, "full", "review", "summarise",
					   forced, allowed, &seq, NULL), 0);
	assert_true(seq > last);
	struct run_row r;
	assert_int_equal(store_run_get(st, "full", &r, NULL), 0);
	assert_int_equal(r.state, RUNSTATE_QUEUED);
	assert_int_equal(r.seq, seq);
	assert_string_equal(r.config, "review");
	assert_string_equal(r.prompt, "summarise");
	assert_json_eq(r.forced_skills, "[\"pdf\"]");
	assert_json_eq(r.allowed_tools, "[\"bash\",\"read\"]");
	run_row_free(&r);

	/* The move is logged. */
	struct buf ev = {0};
	assert_int_equal(store_events_text(st, "full", &ev, NULL), 0);
	assert_non_null(strstr(ev.data, "\"from\":\"created\""));
	assert_non_null(strstr(ev.data, "\"to\":\"queued\""));
	buf_free(&ev);

	/* Only once, and only with everything R6 needs. */
	assert_int_equal(store_run_enqueue(st, "full", "review", "again",
					   forced, allowed, NULL, NULL), -EBUSY);
	assert_int_equal(store_run_create(st, "x", NULL), 0);
	assert_int_equal(store_run_enqueue(st, "x", "default", "go", forced,
					   NULL, NULL, NULL), -EINVAL);
	json_t *jnull = json_null();
	assert_int_equal(store_run_enqueue(st, "x", "default", "go", forced,
					   jnull, NULL, NULL), -EINVAL);
	assert_int_equal(store_run_enqueue(st, "x", "default", "", forced,
					   allowed, NULL, NULL), -EINVAL);
	assert_int_equal(store_run_enqueue(st, "x", "default", "go", allowed,
					   allowed, NULL, NULL), 0);
	assert_int_equal(store_run_enqueue(st, "ghost", "default", "go", forced,
					   allowed, NULL, NULL), -ENOENT);
	assert_int_equal(state_of(st, "x"), RUNSTATE_QUEUED);
	json_decref(forced);
	json_decref(allowed);
	store_close(st);
}

/* Listing with states leaves out a run whose state cannot be read, as
 * reading that run's state alone fails. */
static void test_run_ids_with_states_skip_unreadable(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "good", NULL), 0);
	store_close(st);
	raw_exec(f->db, "INSERT INTO runs (id, state, created_at, updated_at)"
			" VALUES ('odd', 'sleeping', 1, 1);");
	st = open_ok(f->db);
	struct strlist l = {0};
	assert_int_equal(store_run_ids(st, &l, NULL, NULL, NULL), 0);
	assert_ids(&l, (const char *[]){"good", "odd"}, 2);
	strlist_free(&l);
	enum runstate *states = NULL, s;
	assert_int_equal(store_run_ids(st, &l, &states, NULL, NULL), 0);
	assert_ids(&l, (const char *[]){"good"}, 1);
	assert_int_equal(states[0], RUNSTATE_CREATED);
	assert_int_equal(store_run_state(st, "odd", &s, NULL), -EIO);
	free(states);
	strlist_free(&l);
	store_close(st);
}

static void test_section6_runs_in_state_follow_enqueue_order(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "idle", NULL), 0);
	make_queued(st, "b");
	make_queued(st, "c");
	make_queued(st, "a");

	struct strlist l = {0};
	assert_int_equal(store_run_ids(st, &l, NULL, NULL, NULL), 0);
	assert_ids(&l, (const char *[]){"a", "b", "c", "idle"}, 4);
	strlist_free(&l);
	/* With their states, in one query. */
	enum runstate *states = NULL;
	assert_int_equal(store_run_ids(st, &l, &states, NULL, NULL), 0);
	assert_ids(&l, (const char *[]){"a", "b", "c", "idle"}, 4);
	assert_non_null(states);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(states[i], RUNSTATE_QUEUED);
	assert_int_equal(states[3], RUNSTATE_CREATED);
	free(states);
	strlist_free(&l);

	assert_int_equal(store_runs_in_state(st, RUNSTATE_QUEUED, &l, NULL), 0);
	assert_ids(&l, (const char *[]){"b", "c", "a"}, 3);
	strlist_free(&l);

	assert_int_equal(store_run_transition(st, "c", RUNSTATE_QUEUED,
					      RUNSTATE_RUNNING, NULL, NULL), 0);
	assert_int_equal(store_runs_in_state(st, RUNSTATE_QUEUED, &l, NULL), 0);
	assert_ids(&l, (const char *[]){"b", "a"}, 2);
	strlist_free(&l);
	assert_int_equal(store_runs_in_state(st, RUNSTATE_RUNNING, &l, NULL), 0);
	assert_ids(&l, (const char *[]){"c"}, 1);
	strlist_free(&l);
	assert_int_equal(store_runs_in_state(st, RUNSTATE_CREATED, &l, NULL), 0);
	assert_ids(&l, (const char *[]){"idle"}, 1);
	strlist_free(&l);

	/* Crash recovery: a re-queued run keeps its place. */
	assert_int_equal(store_run_transition(st, "c", RUNSTATE_RUNNING,
					      RUNSTATE_QUEUED, NULL, NULL), 0);
	assert_int_equal(store_runs_in_state(st, RUNSTATE_QUEUED, &l, NULL), 0);
	assert_ids(&l, (const char *[]){"b", "c", "a"}, 3);
	strlist_free(&l);

	assert_int_equal(store_runs_in_state(st, (enum runstate)99, &l, NULL),
			 -EINVAL);
	store_close(st);
}

static void test_section6_illegal_transition_refused_state_unchanged(
	void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	struct buf before = {0}, after = {0};
	assert_int_equal(store_events_text(st, "r", &before, NULL), 0);

	struct run_change ch = {.result = "should not be stored"};
	char *err = NULL;
	/* Not a legal move at all. */
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED,
					      RUNSTATE_COMPLETED, &ch, &err),
			 -EINVAL);
	assert_non_null(strstr(err, "queued"));
	assert_non_null(strstr(err, "completed"));
	free(err);
	err = NULL;
	/* Legal, but the run is not in `from` (compare and set). */
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_RUNNING,
					      RUNSTATE_COMPLETED, &ch, &err),
			 -EBUSY);
	assert_non_null(strstr(err, "queued"));
	free(err);
	/* created -> queued belongs to enqueue. */
	assert_int_equal(store_run_create(st, "c", NULL), 0);
	assert_int_equal(store_run_transition(st, "c", RUNSTATE_CREATED,
					      RUNSTATE_QUEUED, NULL, NULL),
			 -EINVAL);
	assert_int_equal(state_of(st, "c"), RUNSTATE_CREATED);
	assert_int_equal(store_run_transition(st, "ghost", RUNSTATE_QUEUED,
					      RUNSTATE_RUNNING, NULL, NULL),
			 -ENOENT);

	struct run_row r;
	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	assert_int_equal(r.state, RUNSTATE_QUEUED);
	assert_null(r.result);
	assert_int_equal(r.finished_at, 0);
	run_row_free(&r);
	assert_int_equal(store_events_text(st, "r", &after, NULL), 0);
	assert_string_equal(after.data, before.data);
	buf_free(&before);
	buf_free(&after);

	/* Terminal is final. */
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED,
					      RUNSTATE_CANCELLED, NULL, NULL), 0);
	for (int to = 0; to < RUNSTATE_COUNT; to++)
		if (to != RUNSTATE_CANCELLED)
			assert_int_equal(store_run_transition(st, "r",
				RUNSTATE_CANCELLED, (enum runstate)to, NULL,
				NULL), -EINVAL);
	assert_int_equal(state_of(st, "r"), RUNSTATE_CANCELLED);
	store_close(st);
}

/* Approval round trip: the assistant's tool call, the pending description
 * and the state move commit together; resuming clears pending. */
static void test_section6_transition_applies_changes_atomically(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	struct run_change start = {.chat_id = "main", .model = "echo",
				   .mode = "inline"};
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED,
					      RUNSTATE_RUNNING, &start, NULL), 0);
	struct run_row r;
	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	int64_t started = r.started_at;
	assert_true(started > 0);
	assert_string_equal(r.chat_id, "main");
	assert_string_equal(r.model, "echo");
	run_row_free(&r);

	json_t *call = jparse("{\"role\":\"assistant\",\"content\":null,"
			      "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
			      "\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}");
	json_t *pending = jparse("{\"tool\":\"bash\",\"call_id\":\"c1\"}");
	struct run_change wait = {.pending = pending, .msg_chat = "main",
				  .msg = call};
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_RUNNING,
		RUNSTATE_WAITING_FOR_APPROVAL, &wait, NULL), 0);
	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	assert_int_equal(r.state, RUNSTATE_WAITING_FOR_APPROVAL);
	assert_json_eq(r.pending, "{\"tool\":\"bash\",\"call_id\":\"c1\"}");
	run_row_free(&r);
	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, "r", "main", &msgs, NULL), 0);
	assert_int_equal(json_array_size(msgs), 1);
	assert_true(json_equal(json_array_get(msgs, 0), call));
	json_decref(msgs);

	/* A failing move applies none of its changes, message included. */
	json_t *other = jparse("{\"role\":\"assistant\",\"content\":\"x\"}");
	struct run_change bad = {.msg_chat = "main", .msg = other,
				 .error = "nope"};
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_RUNNING,
		RUNSTATE_FAILED, &bad, NULL), -EBUSY);
	assert_int_equal(store_messages(st, "r", "main", &msgs, NULL), 0);
	assert_int_equal(json_array_size(msgs), 1);
	json_decref(msgs);
	/* A message without a role is refused before anything happens. */
	json_t *norole = jparse("{\"content\":\"x\"}");
	struct run_change bad2 = {.msg_chat = "main", .msg = norole};
	assert_int_equal(store_run_transition(st, "r",
		RUNSTATE_WAITING_FOR_APPROVAL, RUNSTATE_RUNNING, &bad2, NULL),
		-EINVAL);
	assert_int_equal(state_of(st, "r"), RUNSTATE_WAITING_FOR_APPROVAL);

	/* Approve: back to running, pending cleared with json_null(). */
	json_t *jnull = json_null();
	struct run_change resume = {.pending = jnull};
	assert_int_equal(store_run_transition(st, "r",
		RUNSTATE_WAITING_FOR_APPROVAL, RUNSTATE_RUNNING, &resume, NULL),
		0);
	/* from == to updates fields only. */
	json_t *usage = jparse("{\"prompt_tokens\":10}");
	struct run_change u = {.usage = usage};
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_RUNNING,
		RUNSTATE_RUNNING, &u, NULL), 0);
	struct run_change done = {.result = "all done", .msg_chat = "main",
				  .msg = other};
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_RUNNING,
		RUNSTATE_COMPLETED, &done, NULL), 0);

	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	assert_int_equal(r.state, RUNSTATE_COMPLETED);
	assert_null(r.pending);
	assert_null(r.error);
	assert_string_equal(r.result, "all done");
	assert_json_eq(r.usage, "{\"prompt_tokens\":10}");
	assert_int_equal(r.started_at, started); /* first start kept */
	assert_true(r.finished_at >= started);
	assert_string_equal(r.mode, "inline");
	run_row_free(&r);
	assert_int_equal(store_messages(st, "r", "main", &msgs, NULL), 0);
	assert_int_equal(json_array_size(msgs), 2);
	json_decref(msgs);

	/* Every real move was logged, the field-only update was not. */
	struct buf ev = {0};
	assert_int_equal(store_events_text(st, "r", &ev, NULL), 0);
	assert_int_equal(count_lines(ev.data), 5);
	assert_non_null(strstr(ev.data,
		"\"from\":\"running\",\"to\":\"completed\""));
	buf_free(&ev);

	json_decref(call);
	json_decref(pending);
	json_decref(other);
	json_decref(norole);
	json_decref(jnull);
	json_decref(usage);
	store_close(st);
}

/* ---- messages, chats, events ---------------------------------------------- */

static void test_section6_messages_round_trip_in_order_per_chat(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	const char *chats[] = {"main", "skill-pdf-123"};
	char text[64];
	for (int i = 0; i < 6; i++) {
		const char *chat = chats[i % 2];
		snprintf(text, sizeof text, "%s #%d", chat, i / 2);
		json_t *m = json_pack("{s:s, s:s}", "role",
				      i % 3 ? "assistant" : "user", "content",
				      text);
		int64_t seq = 0;
		assert_int_equal(store_message_append(st, "r", chat, m, &seq,
						      NULL), 0);
		assert_int_equal(seq, i / 2 + 1);
		json_decref(m);
	}
	for (int c = 0; c < 2; c++) {
		json_t *msgs = NULL;
		assert_int_equal(store_messages(st, "r", chats[c], &msgs, NULL),
				 0);
		assert_int_equal(json_array_size(msgs), 3);
		for (int k = 0; k < 3; k++) {
			snprintf(text, sizeof text, "%s #%d", chats[c], k);
			json_t *m = json_array_get(msgs, (size_t)k);
			assert_string_equal(json_string_value(
				json_object_get(m, "content")), text);
			int i = k * 2 + c;
			assert_string_equal(json_string_value(
				json_object_get(m, "role")),
				i % 3 ? "assistant" : "user");
		}
		json_decref(msgs);
	}
	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, "r", "unknown-chat", &msgs, NULL), 0);
	assert_int_equal(json_array_size(msgs), 0);
	json_decref(msgs);
	assert_int_equal(store_messages(st, "ghost", "main", &msgs, NULL),
			 -ENOENT);
	assert_null(msgs);

	json_t *bad = jparse("[\"role\", \"user\"]");
	assert_int_equal(store_message_append(st, "r", "main", bad, NULL, NULL),
			 -EINVAL);
	json_decref(bad);
	json_t *ok = jparse("{\"role\":\"user\",\"content\":\"hi\"}");
	assert_int_equal(store_message_append(st, "ghost", "main", ok, NULL,
					      NULL), -ENOENT);
	assert_int_equal(store_message_append(st, "r", "", ok, NULL, NULL),
			 -EINVAL);
	json_decref(ok);
	store_close(st);
}

/* A transition carries several messages into one commit, in order; a
 * bad one among them leaves the run and its messages unchanged. */
static void test_transition_appends_several_messages_at_once(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	json_t *two = jparse("[{\"role\":\"system\",\"content\":\"s\"},"
			     "{\"role\":\"user\",\"content\":\"u\"}]");
	json_t *one = jparse("{\"role\":\"assistant\",\"content\":\"a\"}");
	json_t *bad = jparse("[{\"role\":\"user\",\"content\":\"ok\"}, [1]]");
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED, RUNSTATE_RUNNING,
					      &(struct run_change){ .msgs = two }, NULL),
			 -EINVAL); /* no chat id */
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED, RUNSTATE_RUNNING,
					      &(struct run_change){ .msg_chat = "main",
								    .msgs = bad },
					      NULL),
			 -EINVAL);
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED, RUNSTATE_RUNNING,
					      &(struct run_change){ .msg_chat = "main",
								    .msgs = one },
					      NULL),
			 -EINVAL); /* not an array */
	enum runstate s;
	assert_int_equal(store_run_state(st, "r", &s, NULL), 0);
	assert_int_equal(s, RUNSTATE_QUEUED);
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED, RUNSTATE_RUNNING,
					      &(struct run_change){ .msg_chat = "main",
								    .msg = one,
								    .msgs = two },
					      NULL),
			 0);
	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, "r", "main", &msgs, NULL), 0);
	assert_int_equal(json_array_size(msgs), 3);
	const char *want[] = { "a", "s", "u" };
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, i),
								      "content")),
				    want[i]);
	json_decref(msgs);
	json_decref(two);
	json_decref(one);
	json_decref(bad);
	store_close(st);
}

static void test_R12_subagent_chats_are_recorded(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	json_t *tools = jparse("[\"read\", \"bash\"]");
	json_t *not_list = jparse("{\"read\": true}");
	assert_int_equal(store_chat_create(st, "r", "skill-pdf-1", "main", "pdf",
					   tools, NULL), 0);
	assert_int_equal(store_chat_create(st, "r", "skill-ocr-2",
					   "skill-pdf-1", "ocr", NULL, NULL), 0);
	assert_int_equal(store_chat_create(st, "r", "skill-pdf-1", NULL, NULL,
					   NULL, NULL), -EEXIST);
	assert_int_equal(store_chat_create(st, "r", "skill-x-3", NULL, NULL,
					   not_list, NULL), -EINVAL);
	assert_int_equal(store_chat_create(st, "ghost", "c", NULL, NULL, NULL, NULL),
			 -ENOENT);
	assert_int_equal(store_chat_transition(st, "r", "skill-ocr-2",
		RUNSTATE_COMPLETED, "text found", NULL), 0);
	assert_int_equal(store_chat_transition(st, "r", "skill-ocr-2",
		RUNSTATE_RUNNING, NULL, NULL), -EINVAL);
	assert_int_equal(store_chat_transition(st, "r", "nope",
		RUNSTATE_COMPLETED, NULL, NULL), -ENOENT);

	struct chat_row *rows = NULL;
	size_t n = 0;
	assert_int_equal(store_chats(st, "r", &rows, &n, NULL), 0);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].chat_id, "skill-pdf-1");
	assert_string_equal(rows[0].parent_chat, "main");
	assert_string_equal(rows[0].skill, "pdf");
	assert_int_equal(rows[0].state, RUNSTATE_RUNNING);
	assert_null(rows[0].result);
	assert_true(json_equal(rows[0].tools, tools));
	assert_string_equal(rows[1].chat_id, "skill-ocr-2");
	assert_string_equal(rows[1].parent_chat, "skill-pdf-1");
	assert_int_equal(rows[1].state, RUNSTATE_COMPLETED);
	assert_string_equal(rows[1].result, "text found");
	assert_null(rows[1].tools);
	chat_rows_free(rows, n);
	json_decref(tools);
	json_decref(not_list);
	assert_int_equal(store_chats(st, "ghost", &rows, &n, NULL), -ENOENT);
	assert_null(rows);
	store_close(st);
}

/* runs.budget: what a run has stored, every chat counted, in bytes (not
 * characters), sub-agent chats apart from a main chat that has a row. */
static void test_budget_run_totals_count_what_is_stored(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	make_queued(st, "other");
	struct run_totals t;
	assert_int_equal(store_run_totals(st, "r", &t, NULL), 0);
	assert_int_equal(t.assistant_messages, 0);
	assert_int_equal(t.message_bytes, 0);
	assert_int_equal(t.subagent_chats, 0);
	assert_int_equal(store_run_transition(st, "r", RUNSTATE_QUEUED, RUNSTATE_RUNNING,
					      &(struct run_change){ .chat_id = "main" },
					      NULL), 0);
	const char *texts[][3] = {
		{ "main", "user", "caf\u00e9 \u2192" }, /* 2 + 3 bytes in UTF-8 */
		{ "main", "assistant", "a" },
		{ "skill-x-1", "assistant", "b" },
		{ "skill-x-1", "tool", "c" },
		{ "main", "assistant", "d" },
	};
	size_t bytes = 0;
	for (size_t i = 0; i < 5; i++) {
		char text[128];
		snprintf(text, sizeof text, "{\"role\":\"%s\",\"content\":\"%s\"}",
			 texts[i][1], texts[i][2]);
		json_t *m = jparse(text);
		bytes += store_message_bytes(m);
		assert_int_equal(store_message_append(st, "r", texts[i][0], m, NULL, NULL), 0);
		json_decref(m);
	}
	json_t *m = jparse("{\"role\":\"assistant\",\"content\":\"elsewhere\"}");
	assert_int_equal(store_message_append(st, "other", "main", m, NULL, NULL), 0);
	json_decref(m);
	/* {"role":"user","content":"café →"}: 34 characters, 37 bytes */
	m = jparse("{\"role\":\"user\",\"content\":\"caf\u00e9 \u2192\"}");
	assert_int_equal(store_message_bytes(m), 37);
	json_decref(m);
	assert_int_equal(store_chat_create(st, "r", "main", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(store_chat_create(st, "r", "skill-x-1", "main", "x", NULL, NULL), 0);
	assert_int_equal(store_chat_create(st, "r", "skill-y-2", "main", "y", NULL, NULL), 0);
	assert_int_equal(store_chat_create(st, "other", "skill-z-3", "main", "z", NULL,
					   NULL), 0);

	assert_int_equal(store_run_totals(st, "r", &t, NULL), 0);
	assert_int_equal(t.assistant_messages, 3);
	assert_int_equal(t.message_bytes, (int64_t)bytes);
	assert_int_equal(t.subagent_chats, 2);
	char *err = NULL;
	assert_int_equal(store_run_totals(st, "ghost", &t, &err), -ENOENT);
	assert_non_null(err);
	free(err);
	store_close(st);
}

static void test_section8_events_text_is_json_lines(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "r", NULL), 0);
	json_t *obj = jparse("{\"tool\":\"bash\",\"seq\":999,\"type\":\"spoof\"}");
	json_t *str = jparse("\"plain text\"");
	int64_t seq = 0;
	assert_int_equal(store_event_append(st, "r", "tool_refused", obj, &seq,
					    NULL), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(store_event_append(st, "r", "note", str, &seq, NULL), 0);
	assert_int_equal(seq, 2);
	assert_int_equal(store_event_append(st, "r", "tick", NULL, &seq, NULL), 0);
	assert_int_equal(seq, 3);
	assert_int_equal(store_event_append(st, "r", "", obj, NULL, NULL),
			 -EINVAL);
	assert_int_equal(store_event_append(st, "ghost", "x", obj, NULL, NULL),
			 -ENOENT);

	struct buf b = {0};
	buf_puts(&b, "kept\n"); /* events are appended to what is there */
	assert_int_equal(store_events_text(st, "r", &b, NULL), 0);
	assert_int_equal(count_lines(b.data), 4);
	assert_int_equal(strncmp(b.data, "kept\n", 5), 0);
	assert_int_equal(b.data[b.len - 1], '\n');

	const char *types[] = {"tool_refused", "note", "tick"};
	char *line = b.data + 5;
	for (int i = 0; i < 3; i++) {
		char *nl = strchr(line, '\n');
		assert_non_null(nl);
		*nl = '\0';
		json_error_t je;
		json_t *o = json_loads(line, 0, &je);
		if (!o)
			fail_msg("line %d is not JSON: %s (%s)", i, line, je.text);
		assert_true(json_is_object(o));
		assert_int_equal(json_integer_value(json_object_get(o, "seq")),
				 i + 1);
		assert_string_equal(json_string_value(json_object_get(o, "type")),
				    types[i]);
		const char *ts = json_string_value(json_object_get(o, "ts"));
		assert_non_null(ts);
		assert_int_equal(strlen(ts), 24); /* 2025-01-02T03:04:05.678Z */
		assert_int_equal(ts[10], 'T');
		assert_int_equal(ts[23], 'Z');
		if (i == 0)
			assert_string_equal(json_string_value(
				json_object_get(o, "tool")), "bash");
		if (i == 1)
			assert_string_equal(json_string_value(
				json_object_get(o, "data")), "plain text");
		if (i == 2)
			assert_int_equal(json_object_size(o), 3);
		json_decref(o);
		line = nl + 1;
	}
	buf_free(&b);
	assert_int_equal(store_events_text(st, "ghost", &b, NULL), -ENOENT);
	buf_free(&b);
	json_decref(obj);
	json_decref(str);
	store_close(st);
}

/* ---- deletion, durability, concurrency ------------------------------------ */

static void test_section6_delete_removes_everything(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	const char *ids[] = {"gone", "kept"};
	json_t *m = jparse("{\"role\":\"user\",\"content\":\"hi\"}");
	for (int i = 0; i < 2; i++) {
		make_queued(st, ids[i]);
		assert_int_equal(store_message_append(st, ids[i], "main", m,
						      NULL, NULL), 0);
		assert_int_equal(store_chat_create(st, ids[i], "sub", "main",
						   "pdf", NULL, NULL), 0);
		assert_int_equal(store_message_append(st, ids[i], "sub", m,
						      NULL, NULL), 0);
		assert_int_equal(store_event_append(st, ids[i], "note", m, NULL,
						    NULL), 0);
	}
	json_decref(m);
	assert_int_equal(store_run_delete(st, "gone", NULL), 0);
	struct run_row r;
	assert_int_equal(store_run_get(st, "gone", &r, NULL), -ENOENT);
	assert_int_equal(store_run_delete(st, "gone", NULL), -ENOENT);
	struct strlist l = {0};
	assert_int_equal(store_run_ids(st, &l, NULL, NULL, NULL), 0);
	assert_ids(&l, (const char *[]){"kept"}, 1);
	strlist_free(&l);
	store_close(st);

	const char *tables[] = {"messages", "chats", "events"};
	for (int i = 0; i < 3; i++) {
		char sql[128];
		snprintf(sql, sizeof sql,
			 "SELECT count(*) FROM %s WHERE run_id = 'gone'",
			 tables[i]);
		assert_int_equal(raw_int(f->db, sql), 0);
		snprintf(sql, sizeof sql,
			 "SELECT count(*) FROM %s WHERE run_id = 'kept'",
			 tables[i]);
		assert_true(raw_int(f->db, sql) > 0);
	}
	/* The id is free again. */
	st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "gone", NULL), 0);
	store_close(st);
}

/* A child process commits, then dies without closing the database; every
 * acknowledged write is there for the next open. */
/* One daemon per database: a second open is refused while the first is
 * open (and names why), and works once it is closed. */
static void test_second_open_is_refused_while_open(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	char *err = NULL;
	assert_null(store_open(f->db, &err));
	assert_non_null(err);
	assert_non_null(strstr(err, "in use"));
	free(err);
	store_close(st);
	st = open_ok(f->db);
	store_close(st);
}

/* One daemon per database by a lock beside it: a second taker is refused
 * with a message naming the holder, also once the database file was
 * replaced or deleted (the lock is not the database's inode), and gets it
 * once the first released it. */
static void test_state_lock_holds_whatever_becomes_of_the_database(void **state)
{
	struct fx *f = *state;
	store_close(open_ok(f->db));
	char *err = NULL;
	int fd = statelock_take(f->db, &err);
	assert_true(fd >= 0);
	char pid[32];
	snprintf(pid, sizeof pid, "(pid %ld)", (long)getpid());
	for (int round = 0; round < 3; round++) {
		if (round == 1) { /* replaced: a new file in its place */
			char tmp[PATH_MAX + 8];
			snprintf(tmp, sizeof tmp, "%s.new", f->db);
			store_close(open_ok(tmp));
			assert_int_equal(rename(tmp, f->db), 0);
		} else if (round == 2) {
			assert_int_equal(unlink(f->db), 0);
		}
		assert_int_equal(statelock_take(f->db, &err), -1);
		assert_non_null(err);
		assert_non_null(strstr(err, "is in use by another skillfs"));
		assert_non_null(strstr(err, pid));
		free(err);
		err = NULL;
	}
	statelock_release(fd);
	fd = statelock_take(f->db, &err);
	assert_true(fd >= 0);
	statelock_release(fd);
	assert_int_equal(statelock_take("", &err), -1);
	free(err);
}

/* R7, at most once: a started step is committed before it runs and is
 * known after a crash (a new connection sees it); steps are told apart by
 * chat, message and call, a model call's from a tool call's; a start
 * again replaces the record; the records go with the run. */
static void test_R7_started_steps_are_recorded_and_survive(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	make_queued(st, "other");
	bool started = true;
	assert_int_equal(store_step_started(st, "r", "main", 3, 0, &started, NULL), 0);
	assert_false(started);
	assert_int_equal(store_step_start(st, "r", "main", 3, 0, "bash", NULL), 0);
	assert_int_equal(store_step_start(st, "r", "main", 3, 0, "bash", NULL), 0);
	assert_int_equal(store_step_start(st, "r", "main", 2, STORE_STEP_MODEL, "model", NULL),
			 0);
	char *err = NULL;
	assert_int_equal(store_step_start(st, "none", "main", 3, 0, "bash", &err), -ENOENT);
	free(err);
	err = NULL;
	assert_int_equal(store_step_start(st, "r", "", 3, 0, "bash", &err), -EINVAL);
	free(err);
	err = NULL;
	assert_int_equal(store_step_start(st, "r", "main", 3, -2, "bash", &err), -EINVAL);
	free(err);
	store_close(st);

	st = open_ok(f->db); /* as after a crash: a new connection */
	struct { const char *run, *chat; int64_t seq; int call; bool want; } cases[] = {
		{ "r", "main", 3, 0, true },
		{ "r", "main", 2, STORE_STEP_MODEL, true },
		{ "r", "main", 3, 1, false },           /* another call of it */
		{ "r", "main", 3, STORE_STEP_MODEL, false },
		{ "r", "main", 2, 0, false },
		{ "r", "sub", 3, 0, false },            /* another chat */
		{ "other", "main", 3, 0, false },       /* another run */
		{ "none", "main", 3, 0, false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		started = !cases[i].want;
		assert_int_equal(store_step_started(st, cases[i].run, cases[i].chat, cases[i].seq,
						    cases[i].call, &started, NULL), 0);
		assert_int_equal(started, cases[i].want);
	}
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM step_starts"), 2);
	assert_int_equal(store_run_delete(st, "r", NULL), 0);
	assert_int_equal(store_run_create(st, "r", NULL), 0);
	assert_int_equal(store_step_started(st, "r", "main", 3, 0, &started, NULL), 0);
	assert_false(started);
	store_close(st);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM step_starts"), 0);
}

/* A database of version 6 gains step_starts, empty: its runs resume as
 * before (nothing recorded as started). */
static void test_v6_database_migrates_with_no_started_steps(void **state)
{
	struct fx *f = *state;
	raw_exec(f->db, v1_schema);
	raw_exec(f->db,
		"ALTER TABLE runs ADD COLUMN allowed_tools TEXT;"
		"ALTER TABLE chats ADD COLUMN tools TEXT;"
		"ALTER TABLE runs ADD COLUMN owner_uid INTEGER;"
		"ALTER TABLE runs ADD COLUMN owner_gid INTEGER;"
		"ALTER TABLE runs ADD COLUMN workdir TEXT;"
		"INSERT INTO runs (id, config, forced_skills, state, created_at,"
		" updated_at) VALUES ('old', 'default', '[]', 'running', 100, 100);"
		"PRAGMA user_version = 6;");
	struct store *st = open_ok(f->db);
	bool started = true;
	assert_int_equal(store_step_started(st, "old", "main", 3, 0, &started, NULL), 0);
	assert_false(started);
	assert_int_equal(store_step_start(st, "old", "main", 3, 0, "bash", NULL), 0);
	assert_int_equal(store_step_started(st, "old", "main", 3, 0, &started, NULL), 0);
	assert_true(started);
	store_close(st);
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
}

/* Under a stream of commits the WAL is copied back into the database by
 * the checkpointer, and starts over (cut back to 16 MiB) once it is. */
static void test_wal_is_checkpointed_and_starts_over(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	struct stat db0, db1, w;
	assert_int_equal(stat(f->db, &db0), 0);
	json_t *m = jparse("{\"role\":\"user\",\"content\":"
			   "\"a message long enough to fill some pages of the log quickly\"}");
	for (int i = 0; i < 3000; i++)
		assert_int_equal(store_message_append(st, "r", "main", m, NULL, NULL), 0);
	/* Let the checkpointer catch up: the database file stops growing. */
	off_t last = -1;
	for (int i = 0; i < 100; i++) {
		assert_int_equal(stat(f->db, &db1), 0);
		if (db1.st_size == last)
			break;
		last = db1.st_size;
		usleep(50 * 1000);
	}
	assert_true(db1.st_size > db0.st_size + 200 * 1024); /* the rows reached it */
	/* A commit after the checkpointer has copied everything starts the WAL
	 * over and cuts its file back. On a loaded machine the checkpointer
	 * may still be copying: commit again, for up to 10 s. */
	char wal[sizeof f->db + 8];
	snprintf(wal, sizeof wal, "%s-wal", f->db);
	int commits = 0;
	for (;;) {
		assert_int_equal(store_message_append(st, "r", "main", m, NULL, NULL), 0);
		commits++;
		assert_int_equal(stat(wal, &w), 0);
		if (w.st_size <= 16 * 1024 * 1024 + 65536 || commits == 100)
			break;
		usleep(100 * 1000);
	}
	json_decref(m);
	if (w.st_size > 16 * 1024 * 1024 + 65536)
		fail_msg("the WAL is still %lld bytes after %d commits in 10 s",
			 (long long)w.st_size, commits);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM messages"), 3000 + commits);
	store_close(st);
}

static void test_section6_committed_writes_survive_a_crash(void **state)
{
	struct fx *f = *state;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct store *st = store_open(f->db, NULL);
		if (!st)
			_exit(2);
		json_t *forced = json_pack("[s]", "pdf");
		json_t *allowed = json_pack("[s]", "read");
		json_t *m = json_pack("{s:s, s:s}", "role", "user", "content",
				      "hello");
		struct run_change run = {.chat_id = "main"};
		int bad = store_run_create(st, "r1", NULL) ||
			  store_run_enqueue(st, "r1", "default", "hello", forced,
					    allowed, NULL, NULL) ||
			  store_run_transition(st, "r1", RUNSTATE_QUEUED,
					       RUNSTATE_RUNNING, &run, NULL) ||
			  store_message_append(st, "r1", "main", m, NULL, NULL) ||
			  store_run_create(st, "r2", NULL) ||
			  store_run_enqueue(st, "r2", "default", "later", forced,
					    allowed, NULL, NULL);
		_exit(bad ? 3 : 0); /* no store_close: a crash */
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* The commits live only in the write-ahead log so far. */
	char wal[320];
	snprintf(wal, sizeof wal, "%s-wal", f->db);
	struct stat sb;
	assert_int_equal(stat(wal, &sb), 0);
	assert_true(sb.st_size > 0);

	struct store *st = open_ok(f->db);
	struct run_row r;
	assert_int_equal(store_run_get(st, "r1", &r, NULL), 0);
	assert_int_equal(r.state, RUNSTATE_RUNNING);
	assert_string_equal(r.prompt, "hello");
	assert_json_eq(r.allowed_tools, "[\"read\"]");
	assert_string_equal(r.chat_id, "main");
	run_row_free(&r);
	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, "r1", "main", &msgs, NULL), 0);
	assert_json_eq(msgs, "[{\"role\":\"user\",\"content\":\"hello\"}]");
	json_decref(msgs);
	/* What remount does: the interrupted run goes back to the queue,
	 * ahead of the one enqueued after it. */
	assert_int_equal(store_run_transition(st, "r1", RUNSTATE_RUNNING,
					      RUNSTATE_QUEUED, NULL, NULL), 0);
	struct strlist q = {0};
	assert_int_equal(store_runs_in_state(st, RUNSTATE_QUEUED, &q, NULL), 0);
	assert_ids(&q, (const char *[]){"r1", "r2"}, 2);
	strlist_free(&q);
	store_close(st);
}

#define THREADS 4
#define PER_THREAD 50

struct worker {
	struct store *st;
	int n;
	int64_t seqs[PER_THREAD];
	int64_t event_seqs[PER_THREAD];
	int failures;
};

static void *append_many(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < PER_THREAD; i++) {
		json_t *m = json_pack("{s:s, s:i, s:i}", "role", "tool",
				      "thread", w->n, "i", i);
		if (!m || store_message_append(w->st, "r", "main", m,
					       &w->seqs[i], NULL) != 0)
			w->failures++;
		if (!m || store_event_append(w->st, "r", "tick", m,
					     &w->event_seqs[i], NULL) != 0)
			w->failures++;
		json_decref(m);
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void assert_one_to_n(int64_t *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp_i64);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], (int64_t)i + 1);
}

static void test_section6_concurrent_appends_all_land(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	struct worker w[THREADS];
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].st = st;
		w[i].n = i;
		assert_int_equal(pthread_create(&t[i], NULL, append_many, &w[i]),
				 0);
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);

	int64_t all[THREADS * PER_THREAD], ev[THREADS * PER_THREAD];
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(w[i].failures, 0);
		memcpy(all + i * PER_THREAD, w[i].seqs, sizeof w[i].seqs);
		memcpy(ev + i * PER_THREAD, w[i].event_seqs,
		       sizeof w[i].event_seqs);
	}
	assert_one_to_n(all, THREADS * PER_THREAD);
	/* One event was the enqueue's state move. */
	for (size_t i = 0; i < THREADS * PER_THREAD; i++)
		ev[i] -= 1;
	assert_one_to_n(ev, THREADS * PER_THREAD);

	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, "r", "main", &msgs, NULL), 0);
	assert_int_equal(json_array_size(msgs), THREADS * PER_THREAD);
	int next[THREADS] = {0};
	size_t k;
	json_t *m;
	json_array_foreach(msgs, k, m) {
		int th = (int)json_integer_value(json_object_get(m, "thread"));
		assert_in_range(th, 0, THREADS - 1);
		/* Each thread's messages in the order it wrote them. */
		assert_int_equal(json_integer_value(json_object_get(m, "i")),
				 next[th]++);
	}
	json_decref(msgs);
	store_close(st);
}

/* Issue 14: a -shm file made immutable while the store has it mapped
 * fails the store's calls with EIO (a write through the mapping was a
 * SIGBUS that killed the process), and they work again once it is
 * usable. Needs a file system with immutable files and the right to set
 * them (root); skipped otherwise. */
static void test_an_immutable_shm_fails_calls_with_eio_not_sigbus(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "a", NULL), 0);
	char shm[320];
	snprintf(shm, sizeof shm, "%s-shm", f->db);
	/* Kept open until the store is closed: closing a descriptor of the
	 * file would drop SQLite's locks on it. */
	int fd = open(shm, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	int flags = 0;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0) {
		store_close(st);
		close(fd);
		skip();
	}
	int on = flags | FS_IMMUTABLE_FL;
	if (ioctl(fd, FS_IOC_SETFLAGS, &on) < 0) {
		store_close(st);
		close(fd);
		skip();
	}
	char *err = NULL;
	int rc = store_run_create(st, "b", &err);
	enum runstate rs;
	int rrc = store_run_state(st, "a", &rs, NULL);
	assert_int_equal(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
	assert_int_equal(rc, -EIO);
	assert_non_null(err);
	assert_non_null(strstr(err, "immutable"));
	free(err);
	assert_int_equal(rrc, -EIO);
	assert_int_equal(store_run_create(st, "b", NULL), 0);
	assert_int_equal(store_run_state(st, "b", &rs, NULL), 0);
	assert_int_equal(rs, RUNSTATE_CREATED);
	store_close(st);
	close(fd);
}

/* Issue 14: SQLite's errors say why: a database locked by another
 * connection past the busy timeout is EAGAIN, and the run is unchanged. */
static void test_a_database_locked_elsewhere_is_eagain(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	assert_int_equal(store_run_create(st, "a", NULL), 0);
	sqlite3 *other = NULL;
	assert_int_equal(sqlite3_open(f->db, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	char *err = NULL;
	assert_int_equal(store_run_set_config(st, "a", "other", &err), -EAGAIN);
	free(err);
	assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);
	struct run_row row;
	assert_int_equal(store_run_get(st, "a", &row, NULL), 0);
	assert_string_equal(row.config, "default");
	run_row_free(&row);
	assert_int_equal(store_run_set_config(st, "a", "other", NULL), 0);
	store_close(st);
}

/* messages.json of a chat, rendered as agent_messages_json does. */
static void render_messages_json(struct store *st, const char *id, const char *chat,
				 struct buf *b)
{
	json_t *msgs = NULL;
	assert_int_equal(store_messages(st, id, chat, &msgs, NULL), 0);
	assert_int_equal(json_text_append(b, msgs, STORE_MESSAGES_JSON_FLAGS), 0);
	json_decref(msgs);
}

/* The size of messages.json from the sizes kept per message equals the
 * bytes rendered. */
static void assert_size_is_rendered(struct store *st, const char *id, const char *chat)
{
	struct buf b = { 0 };
	uint64_t size = 0;
	render_messages_json(st, id, chat, &b);
	assert_int_equal(store_messages_json_size(st, id, chat, &size, NULL), 0);
	assert_int_equal(size, b.len);
	buf_free(&b);
}

static void test_messages_json_size_equals_its_rendering(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	make_queued(st, "r");
	static const char *const shapes[] = {
		"{\"role\":\"user\",\"content\":\"\"}",
		"{\"role\":\"user\",\"content\":\"h\\u00e9llo \\u65e5\\u672c \\ud83d\\ude00\"}",
		"{\"role\":\"user\",\"content\":\"quote \\\" back \\\\ slash / nl \\n tab \\t cr \\r"
		" bell \\u0007 del \\u007f\"}",
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
		"\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":"
		"\"{\\\"path\\\": \\\"a/b\\\"}\"}},{\"id\":\"c2\",\"type\":\"function\","
		"\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}",
		"{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"x\",\"meta\":"
		"{\"a\":[],\"b\":{},\"c\":[[],[{}],[1,[2,[3,{\"d\":[]}]]]],\"e\":{\"f\":{\"g\":{}}}}}",
		"{\"role\":\"assistant\",\"n\":[0,-1,1234567890123,3.5,1e-07,-0.0,"
		"1.7976931348623157e308,true,false,null],\"usage\":{\"tokens\":12}}",
		"{\"role\":\"system\"}",
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\\nb\\nc\"}]}",
	};
	const char *const chats[] = { "main", "skill-pdf-1" };
	for (int c = 0; c < 2; c++)
		assert_size_is_rendered(st, "r", chats[c]); /* no message: "[]\n" */
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
		json_t *m = jparse(shapes[i]);
		/* alone in a chat of its own, then among the others */
		char alone[32];
		snprintf(alone, sizeof alone, "alone-%zu", i);
		assert_int_equal(store_message_append(st, "r", alone, m, NULL, NULL), 0);
		assert_size_is_rendered(st, "r", alone);
		for (int c = 0; c < 2; c++) {
			assert_int_equal(store_message_append(st, "r", chats[c], m, NULL, NULL), 0);
			assert_size_is_rendered(st, "r", chats[c]);
		}
		json_decref(m);
	}
	/* a very long string, with lines and escapes */
	size_t n = 3 * 1024 * 1024;
	char *big = malloc(n + 1);
	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		big[i] = "ab\n\"\\c\t/"[i % 8];
	big[n] = '\0';
	json_t *m = json_pack("{s:s, s:s}", "role", "tool", "content", big);
	free(big);
	assert_int_equal(store_message_append(st, "r", "main", m, NULL, NULL), 0);
	assert_int_equal(store_message_append(st, "r", "long", m, NULL, NULL), 0);
	json_decref(m);
	assert_size_is_rendered(st, "r", "main");
	assert_size_is_rendered(st, "r", "long");
	uint64_t size;
	assert_int_equal(store_messages_json_size(st, "ghost", "main", &size, NULL), -ENOENT);
	store_close(st);
}

/* A database of schema 7 gets the sizes' column; its messages have none,
 * so the size says it must be rendered (-EAGAIN) until the chat has only
 * messages stored since, and what is rendered is unchanged. */
/* What schema versions 2 to 7 added to version 1 (the tables as they
 * were then, without data), for the migration tests from 7 and 8. */
static const char v2_to_v7[] =
	"ALTER TABLE runs ADD COLUMN allowed_tools TEXT;"
	"ALTER TABLE chats ADD COLUMN tools TEXT;"
	"ALTER TABLE runs ADD COLUMN owner_uid INTEGER;"
	"ALTER TABLE runs ADD COLUMN owner_gid INTEGER;"
	"ALTER TABLE runs ADD COLUMN workdir TEXT;"
	"CREATE TABLE step_starts (run_id TEXT NOT NULL REFERENCES runs(id) "
	" ON DELETE CASCADE, chat_id TEXT NOT NULL, msg_seq INTEGER NOT NULL,"
	" call INTEGER NOT NULL, what TEXT NOT NULL, ts INTEGER NOT NULL,"
	" PRIMARY KEY (run_id, chat_id, msg_seq, call)) WITHOUT ROWID;";

static void test_v7_database_migrates_and_old_messages_are_rendered(void **state)
{
	struct fx *f = *state;
	raw_exec(f->db, v1_schema);
	raw_exec(f->db, v2_to_v7);
	raw_exec(f->db,
		"INSERT INTO runs (id, config, forced_skills, state, chat_id, created_at,"
		" updated_at) VALUES ('old', 'default', '[]', 'running', 'main', 100, 100);"
		"INSERT INTO messages (run_id, chat_id, seq, role, json, ts) VALUES"
		" ('old', 'main', 1, 'user', '{\"role\":\"user\",\"content\":\"h\\u00e9\\nllo\"}', 100);"
		"PRAGMA user_version = 7;");
	struct store *st = open_ok(f->db);
	uint64_t size = 0;
	char *err = NULL;
	assert_int_equal(store_messages_json_size(st, "old", "main", &size, &err), -EAGAIN);
	assert_non_null(err);
	free(err);
	struct buf b = { 0 };
	render_messages_json(st, "old", "main", &b);
	assert_string_equal(b.data, "[\n  {\n    \"role\": \"user\",\n    \"content\": "
			    "\"h\xc3\xa9\\nllo\"\n  }\n]\n");
	buf_free(&b);
	json_t *m = jparse("{\"role\":\"assistant\",\"content\":\"ok\"}");
	assert_int_equal(store_message_append(st, "old", "main", m, NULL, NULL), 0);
	assert_int_equal(store_messages_json_size(st, "old", "main", &size, NULL), -EAGAIN);
	/* a chat of new messages only is sized */
	assert_int_equal(store_message_append(st, "old", "sub", m, NULL, NULL), 0);
	json_decref(m);
	assert_size_is_rendered(st, "old", "sub");
	store_close(st);
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM "
			 "pragma_table_info('messages') WHERE name = 'rendered_bytes'"), 1);
	assert_int_equal(raw_int(f->db, "SELECT count(*) FROM messages "
			 "WHERE rendered_bytes IS NULL"), 1);
}

/* ---- issue 19: provenance, the audit trail, pinned sources ---- */

static void test_v8_database_migrates_with_no_provenance_and_no_audit(void **state)
{
	struct fx *f = *state;
	raw_exec(f->db, v1_schema);
	raw_exec(f->db, v2_to_v7);
	raw_exec(f->db,
		"ALTER TABLE messages ADD COLUMN rendered_bytes INTEGER;"
		"INSERT INTO runs (id, seq, config, prompt, forced_skills, state, allowed_tools,"
		" created_at, updated_at) VALUES ('old', 1, 'default', 'p', '[]', 'queued',"
		" '{\"policy\":\"all\",\"tools\":[]}', 100, 100);"
		"PRAGMA user_version = 8;");
	struct store *st = open_ok(f->db);
	struct run_row r;
	assert_int_equal(store_run_get(st, "old", &r, NULL), 0);
	assert_null(r.provenance); /* enqueued before schema 9 */
	assert_non_null(r.allowed_tools);
	run_row_free(&r);
	uint64_t size = 1;
	assert_int_equal(store_audit_size(st, &size, NULL), 0);
	assert_int_equal(size, 0);
	store_close(st);
	assert_int_equal(raw_int(f->db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
}

/* Issue 19 item 4: what the run saw is stored with it, atomically with
 * its enqueue. */
static void test_enqueue_stores_provenance(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	json_t *forced = jparse("[]"), *allowed = jparse("{\"policy\":\"all\",\"tools\":[]}");
	json_t *prov = jparse("{\"ceiling\":null,\"skills\":[{\"name\":\"a\",\"digest\":\"sha256:00\"}]}");
	assert_int_equal(store_run_create(st, "r", NULL), 0);
	assert_int_equal(store_run_enqueue_with(st, "r", "default", "p", forced, allowed, prov,
						NULL, NULL), 0);
	struct run_row r;
	assert_int_equal(store_run_get(st, "r", &r, NULL), 0);
	assert_true(json_equal(r.provenance, prov));
	run_row_free(&r);
	json_decref(forced);
	json_decref(allowed);
	json_decref(prov);
	store_close(st);
}

/* The lines of the audit file (DESIGN.md section 8: "tail -f works"):
 * the size is the bytes a read returns, a read at any offset gives those
 * bytes, a line once written never changes, and trimming drops whole lines
 * from the start, past twice the cap only. */
static void test_audit_trail_grows_reads_and_trims(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	struct buf all = { 0 }, part = { 0 };
	for (int i = 0; i < 5; i++) {
		json_t *ev = json_pack("[{s:s, s:i}]", "event", "skill_added", "n", i);
		assert_int_equal(store_audit_record(st, ev, NULL, 100, NULL), 0);
		json_decref(ev);
	}
	uint64_t size = 0;
	assert_int_equal(store_audit_size(st, &size, NULL), 0);
	assert_int_equal(store_audit_read(st, 0, 1 << 20, &all, NULL), 0);
	assert_int_equal(all.len, size);
	assert_int_equal(count_lines(all.data), 5);
	assert_true(strncmp(all.data, "{\"seq\":1,\"ts\":\"", 15) == 0);
	assert_non_null(strstr(all.data, "\"event\":\"skill_added\",\"n\":0}\n{\"seq\":2,"));
	/* any window: the same bytes */
	for (uint64_t off = 0; off < size; off += 7) {
		buf_free(&part);
		assert_int_equal(store_audit_read(st, off, 13, &part, NULL), 0);
		size_t want = size - off < 13 ? size - off : 13;
		assert_int_equal(part.len, want);
		assert_memory_equal(part.data, all.data + off, want);
	}
	/* more lines: what was there stays byte for byte */
	json_t *ev = json_pack("[{s:s}, {s:s}]", "event", "a", "event", "b");
	assert_int_equal(store_audit_record(st, ev, NULL, 100, NULL), 0);
	json_decref(ev);
	buf_free(&part);
	assert_int_equal(store_audit_read(st, 0, 1 << 20, &part, NULL), 0);
	assert_int_equal(count_lines(part.data), 7);
	assert_memory_equal(part.data, all.data, all.len);
	/* trim to 3: the file starts at the 5th line */
	assert_int_equal(store_audit_trim(st, 3, NULL), 0);
	buf_free(&part);
	assert_int_equal(store_audit_size(st, &size, NULL), 0);
	assert_int_equal(store_audit_read(st, 0, 1 << 20, &part, NULL), 0);
	assert_int_equal(part.len, size);
	assert_int_equal(count_lines(part.data), 3);
	assert_true(strncmp(part.data, "{\"seq\":5,", 9) == 0);
	/* keep 1: past 2 lines it goes back to 1 */
	ev = json_pack("[{s:s}]", "event", "c");
	assert_int_equal(store_audit_record(st, ev, NULL, 1, NULL), 0);
	json_decref(ev);
	buf_free(&part);
	assert_int_equal(store_audit_read(st, 0, 1 << 20, &part, NULL), 0);
	assert_int_equal(count_lines(part.data), 1);
	assert_true(strncmp(part.data, "{\"seq\":8,", 9) == 0);
	assert_int_equal(store_audit_record(st, NULL, NULL, 0, NULL), -EINVAL);
	buf_free(&all);
	buf_free(&part);
	store_close(st);
}

/* What the trail remembers: the catalogue's state and each pinned source's
 * files at its last match, replaced and forgotten as told. */
static void test_audit_state_and_pin_matches(void **state)
{
	struct fx *f = *state;
	struct store *st = open_ok(f->db);
	json_t *states = jparse("{\"skill:a\": {\"valid\": true}, \"skill:b\": {\"valid\": false}}");
	assert_int_equal(store_audit_record(st, NULL, states, 10, NULL), 0);
	json_decref(states);
	states = jparse("{\"skill:a\": null}");
	assert_int_equal(store_audit_record(st, NULL, states, 10, NULL), 0);
	json_decref(states);
	json_t *known = NULL;
	assert_int_equal(store_audit_state(st, &known, NULL), 0);
	assert_json_eq(known, "{\"skill:b\": {\"valid\": false}}");
	json_decref(known);

	struct strlist lines = { 0 }, back = { 0 };
	assert_int_equal(strlist_add(&lines, "00  a/SKILL.md"), 0);
	assert_int_equal(store_pin_match_put(st, "/src", "sha256:1", &lines, NULL), 0);
	assert_int_equal(store_pin_match(st, "/src", "sha256:1", &back, NULL), 1);
	assert_true(strlist_equal(&lines, &back));
	strlist_free(&back);
	assert_int_equal(store_pin_match(st, "/src", "sha256:2", &back, NULL), 0);
	assert_int_equal(store_pin_match(st, "/other", "sha256:1", &back, NULL), 0);
	assert_int_equal(back.n, 0);
	/* a new match replaces the old one */
	assert_int_equal(store_pin_match_put(st, "/src", "sha256:2", &lines, NULL), 0);
	assert_int_equal(store_pin_match(st, "/src", "sha256:1", &back, NULL), 0);
	strlist_free(&lines);
	store_close(st);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_an_immutable_shm_fails_calls_with_eio_not_sigbus),
		T(test_a_database_locked_elsewhere_is_eagain),
		T(test_fresh_database_gets_latest_schema),
		T(test_R8_v1_database_migrates_and_legacy_run_has_no_allow_list),
		T(test_v5_database_migrates_and_runs_have_no_workdir),
		T(test_reopen_is_idempotent),
		T(test_newer_schema_is_refused),
		T(test_foreign_or_broken_files_are_refused),
		T(test_section6_run_create_and_duplicate_id),
		T(test_run_owner_is_stored),
		T(test_section6_config_and_skills_writable_only_while_created),
		T(test_R6_enqueue_stores_allow_list_and_numbers_in_order),
		T(test_section6_runs_in_state_follow_enqueue_order),
		T(test_run_ids_with_states_skip_unreadable),
		T(test_section6_illegal_transition_refused_state_unchanged),
		T(test_section6_transition_applies_changes_atomically),
		T(test_section6_messages_round_trip_in_order_per_chat),
		T(test_transition_appends_several_messages_at_once),
		T(test_R12_subagent_chats_are_recorded),
		T(test_budget_run_totals_count_what_is_stored),
		T(test_section8_events_text_is_json_lines),
		T(test_section6_delete_removes_everything),
		T(test_second_open_is_refused_while_open),
		T(test_state_lock_holds_whatever_becomes_of_the_database),
		T(test_R7_started_steps_are_recorded_and_survive),
		T(test_v6_database_migrates_with_no_started_steps),
		T(test_wal_is_checkpointed_and_starts_over),
		T(test_messages_json_size_equals_its_rendering),
		T(test_v7_database_migrates_and_old_messages_are_rendered),
		T(test_v8_database_migrates_with_no_provenance_and_no_audit),
		T(test_enqueue_stores_provenance),
		T(test_audit_trail_grows_reads_and_trims),
		T(test_audit_state_and_pin_matches),
		T(test_section6_committed_writes_survive_a_crash),
		T(test_section6_concurrent_appends_all_land),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
