/* store: the run database (see store.h).
 *
 * One file past 1,200 lines: the schema, its migrations and every statement
 * that reads or writes it stay together, so that a change of the schema is
 * seen whole, with every query it affects. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "grow.h"

/* How long the checkpointer's connection waits for a lock another process
 * holds. */
#define BUSY_TIMEOUT_MS 5000
/* How long one statement of the daemon's connection waits for a lock held
 * by another process. It waits holding the connection (and its caller's
 * locks), so every other user of the store would wait with it: kept short.
 * A request that is to commit waits for the database beforehand, holding
 * nothing (store_wait_writable); a worker's commit is tried again with
 * backoff (agent_env.store_wait). */
#define WRITER_BUSY_MS 100
/* store_wait_writable's pause between two looks. */
#define WRITABLE_POLL_MS 20

/* Prepared statements are kept for reuse, keyed by the address of their
 * SQL text (every statement is a constant string): parsing SQL anew on
 * each call cost more than running it. */
#define STMT_CACHE_MAX 64

struct cached_stmt {
	const char *sql;
	sqlite3_stmt *stmt;
	bool in_use;
};

/* The WAL is copied back into the database by its own thread and
 * connection once it holds this many pages: a checkpoint syncs the disk,
 * and done inside a commit it held up every request waiting for the store
 * (about 20 ms at the 99th percentile under load). */
#define CHECKPOINT_PAGES 1000
/* When the WAL starts over, its file is cut back to this (bytes). */
#define WAL_SIZE_LIMIT "16777216"

struct store {
	sqlite3 *db;
	char *path;           /* for messages */
	pthread_mutex_t lock; /* held around every use of db */
	struct cached_stmt cache[STMT_CACHE_MAX];
	size_t ncache;
	int owner_fd;         /* flock'ed: one daemon per database */
	uint64_t writes;      /* rows this connection changed (atomic) */
	/* The -shm file SQLite maps (see shm_check): open until SQLite is
	 * done with it, as closing any descriptor of a file drops the
	 * process's fcntl locks on it, SQLite's among them. -1: none. */
	int shm_fd;
	off_t shm_size;       /* its largest size seen */
	int shm_bad;          /* the errno it last failed with (logged), 0: usable */

	/* the checkpointer */
	sqlite3 *ckpt_db;
	pthread_t ckpt_thread;
	bool ckpt_started;
	pthread_mutex_t ckpt_lock;
	pthread_cond_t ckpt_cond;
	bool ckpt_wanted, ckpt_stop;
};

/* migrations[i] takes a database from version i to version i + 1. Never
 * edit a released step: add a new one. */
static const char *const migrations[] = {
	/* 0 -> 1: the first schema (no stored allow-list). */
	"CREATE TABLE runs ("
	"  id TEXT PRIMARY KEY NOT NULL,"
	"  seq INTEGER UNIQUE,"
	"  config TEXT NOT NULL DEFAULT 'default',"
	"  prompt TEXT,"
	"  forced_skills TEXT NOT NULL DEFAULT '[]',"
	"  state TEXT NOT NULL,"
	"  mode TEXT,"
	"  chat_id TEXT,"
	"  model TEXT,"
	"  error TEXT,"
	"  result TEXT,"
	"  pending TEXT,"
	"  input TEXT,"
	"  usage TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL,"
	"  started_at INTEGER,"
	"  finished_at INTEGER"
	");"
	"CREATE INDEX runs_by_state ON runs(state, seq);"
	"CREATE TABLE messages ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  chat_id TEXT NOT NULL,"
	"  seq INTEGER NOT NULL,"
	"  role TEXT NOT NULL,"
	"  json TEXT NOT NULL,"
	"  ts INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, chat_id, seq)"
	");"
	"CREATE TABLE chats ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  chat_id TEXT NOT NULL,"
	"  parent_chat TEXT,"
	"  skill TEXT,"
	"  state TEXT NOT NULL,"
	"  result TEXT,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, chat_id)"
	");"
	"CREATE TABLE events ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  seq INTEGER NOT NULL,"
	"  ts INTEGER NOT NULL,"
	"  type TEXT NOT NULL,"
	"  json TEXT NOT NULL,"
	"  PRIMARY KEY (run_id, seq)"
	");",
	/* 1 -> 2: the allow-list resolved at enqueue (R6); NULL for runs
	 * enqueued by version 1 (R8). */
	"ALTER TABLE runs ADD COLUMN allowed_tools TEXT;",
	/* 2 -> 3: the tools a sub-agent was offered; NULL for older chats. */
	"ALTER TABLE chats ADD COLUMN tools TEXT;",
	/* 3 -> 4: fewer pages written per commit. The state index is gone
	 * (only a start reads runs by state, and scanning them is cheap);
	 * events, small rows, live in their key's b-tree alone. */
	"DROP INDEX runs_by_state;"
	"CREATE TABLE events_v4 ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  seq INTEGER NOT NULL,"
	"  ts INTEGER NOT NULL,"
	"  type TEXT NOT NULL,"
	"  json TEXT NOT NULL,"
	"  PRIMARY KEY (run_id, seq)"
	") WITHOUT ROWID;"
	"INSERT INTO events_v4 SELECT run_id, seq, ts, type, json FROM events;"
	"DROP TABLE events;"
	"ALTER TABLE events_v4 RENAME TO events;",
	/* 4 -> 5: who made the run (the uid and gid of its mkdir); NULL for
	 * runs made before, which belong to the daemon's user. */
	"ALTER TABLE runs ADD COLUMN owner_uid INTEGER;"
	"ALTER TABLE runs ADD COLUMN owner_gid INTEGER;",
	/* 5 -> 6: the project directory the run works in (runs/<id>/
	 * workdir); NULL for runs without one, as every older run is. */
	"ALTER TABLE runs ADD COLUMN workdir TEXT;",
	/* 6 -> 7: the steps that have started (a tool call with side
	 * effects, a model call), committed before they run: after a crash,
	 * one started without a result is known as interrupted (at most
	 * once). Older runs have none. */
	"CREATE TABLE step_starts ("
	"  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
	"  chat_id TEXT NOT NULL,"
	"  msg_seq INTEGER NOT NULL,"
	"  call INTEGER NOT NULL,"
	"  what TEXT NOT NULL,"
	"  ts INTEGER NOT NULL,"
	"  PRIMARY KEY (run_id, chat_id, msg_seq, call)"
	") WITHOUT ROWID;",
	/* 7 -> 8: each message's size as an element of messages.json
	 * (store_message_rendered_bytes), so that the file's size is known
	 * without rendering it; NULL for older messages (their chat's size
	 * is then rendered). The index covers the sum of a chat's sizes: the
	 * rows themselves hold the (large) texts. */
	"ALTER TABLE messages ADD COLUMN rendered_bytes INTEGER;"
	"CREATE INDEX messages_rendered_bytes ON messages(run_id, chat_id, rendered_bytes);",
	/* 8 -> 9 (issue 19): what each run saw of its skills when it was
	 * enqueued (runs.provenance; NULL for older runs); the audit trail of
	 * catalogue changes, each row the JSON line the audit file shows at
	 * byte pos of everything ever written (the file starts at the first
	 * row kept); the catalogue as the trail last saw it (audit_state),
	 * so changes made while no skillfs ran are recorded at the next
	 * mount; and the files of each pinned source when it last matched
	 * (pin_matches), to say which differ when it does not. */
	"ALTER TABLE runs ADD COLUMN provenance TEXT;"
	"CREATE TABLE audit ("
	"  seq INTEGER PRIMARY KEY,"
	"  ts INTEGER NOT NULL,"
	"  pos INTEGER NOT NULL UNIQUE,"
	"  line TEXT NOT NULL"
	");"
	"CREATE TABLE audit_state ("
	"  key TEXT PRIMARY KEY NOT NULL,"
	"  json TEXT NOT NULL"
	") WITHOUT ROWID;"
	"CREATE TABLE pin_matches ("
	"  source TEXT PRIMARY KEY NOT NULL,"
	"  digest TEXT NOT NULL,"
	"  lines TEXT NOT NULL,"
	"  ts INTEGER NOT NULL"
	") WITHOUT ROWID;",
};

_Static_assert(sizeof migrations / sizeof *migrations == STORE_SCHEMA_VERSION,
	       "one migration per schema version");

/* ---- small helpers ---------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void set_err(char **err, const char *fmt, ...)
{
	if (!err)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(*err);
	*err = s;
}

/* The errno for an SQLite result; sys_errno is the system call's errno
 * behind an I/O error (0: unknown), which tells a full disk or a
 * read-only file system from a failing one. */
static int errno_of_sys(int sqlite_rc, int sys_errno)
{
	if ((sqlite_rc & 0xff) == SQLITE_IOERR || (sqlite_rc & 0xff) == SQLITE_CANTOPEN) {
		switch (sys_errno) {
		case ENOSPC:
			return -ENOSPC;
		case EDQUOT:
			return -EDQUOT;
		case EROFS:
			return -EROFS;
		default:
			break;
		}
	}
	switch (sqlite_rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EAGAIN; /* held elsewhere past the busy timeout */
	default:
		return -EIO;
	}
}

static int errno_of(int sqlite_rc)
{
	return errno_of_sys(sqlite_rc, 0);
}

/* Logs damage found in the database (a row or page that cannot be
 * read): the daemon's log is where an operator looks when a read says
 * EIO. */
__attribute__((format(printf, 1, 2)))
static void log_damage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	fprintf(stderr, "skillfs: %s\n", s ? s : "the state database holds a damaged row");
	free(s);
}

/* Reports the connection's last error about `what`; returns its errno. */
static int db_fail(struct store *st, char **err, const char *what)
{
	int code = sqlite3_extended_errcode(st->db);
	set_err(err, "state database %s: %s: %s", st->path, what,
		sqlite3_errmsg(st->db));
	if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB)
		log_damage("state database %s is damaged (%s): %s", st->path, what,
			   sqlite3_errmsg(st->db));
	return errno_of_sys(code, sqlite3_system_errno(st->db));
}

static int oom(char **err)
{
	set_err(err, "out of memory");
	return -ENOMEM;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool empty(const char *s)
{
	return !s || !*s;
}

static bool state_ok(enum runstate s)
{
	return (int)s >= 0 && (int)s < RUNSTATE_COUNT;
}

/* Whether the -shm file can still be written through SQLite's shared
 * mapping of it: 0, or -EIO (-EROFS) with why. A write to a mapped page
 * of a file made immutable (ext4 and others refuse it at the page fault),
 * cut short by another program, or on a file system remounted read-only
 * is a SIGBUS that kills the daemon; checked before each transaction, such
 * a file fails the request instead, until it is usable again. (A change
 * made in the middle of a transaction is not caught.) Call with the lock
 * held. */
static int shm_check(struct store *st, char **err)
{
	if (st->shm_fd < 0)
		return 0;
	struct stat sb;
	struct statvfs vfs;
	int flags = 0;
	const char *why = NULL;
	int rc = -EIO;
	if (fstat(st->shm_fd, &sb) < 0)
		why = "cannot be examined";
	else if (sb.st_size < st->shm_size)
		why = "was cut short by another program";
	else if (ioctl(st->shm_fd, FS_IOC_GETFLAGS, &flags) == 0 &&
		 (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)))
		why = "was made immutable or append-only";
	else if (fstatvfs(st->shm_fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) {
		why = "is on a file system that is read-only now";
		rc = -EROFS;
	}
	if (!why) {
		if (sb.st_size > st->shm_size)
			st->shm_size = sb.st_size;
		if (st->shm_bad)
			fprintf(stderr, "skillfs: state database %s: its -shm file is usable "
				"again\n", st->path);
		st->shm_bad = 0;
		return 0;
	}
	set_err(err, "state database %s: its -shm file %s: nothing is read or written "
		"until it is usable again", st->path, why);
	if (st->shm_bad != -rc)
		fprintf(stderr, "skillfs: state database %s: its -shm file %s: requests "
			"that need the database fail with %s until it is usable again\n",
			st->path, why, strerror(-rc));
	st->shm_bad = -rc;
	return rc;
}

/* A ready statement for sql (a constant string): the cached one when it
 * is free, else a new one that is cached when there is room. Give it back
 * with release(). The first statement of a transaction checks the -shm
 * file first (shm_check). */
static int prepare(struct store *st, const char *sql, sqlite3_stmt **out,
		   char **err)
{
	if (sqlite3_get_autocommit(st->db)) {
		int rc = shm_check(st, err);
		if (rc) {
			*out = NULL;
			return rc;
		}
	}
	for (size_t i = 0; i < st->ncache; i++) {
		struct cached_stmt *c = &st->cache[i];
		if (c->sql == sql && !c->in_use) {
			c->in_use = true;
			*out = c->stmt;
			return 0;
		}
	}
	bool keep = st->ncache < STMT_CACHE_MAX;
	if (sqlite3_prepare_v3(st->db, sql, -1, keep ? SQLITE_PREPARE_PERSISTENT : 0, out,
			       NULL) != SQLITE_OK) {
		*out = NULL;
		return db_fail(st, err, "preparing a statement");
	}
	if (keep)
		st->cache[st->ncache++] = (struct cached_stmt){ sql, *out, true };
	return 0;
}

/* Gives a statement from prepare() back: reset for its next use, or
 * finalized when it was not cached. NULL is ignored. */
static void release(struct store *st, sqlite3_stmt *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < st->ncache; i++) {
		if (st->cache[i].stmt == s) {
			sqlite3_reset(s);
			sqlite3_clear_bindings(s);
			st->cache[i].in_use = false;
			return;
		}
	}
	sqlite3_finalize(s);
}

static int exec(struct store *st, const char *sql, char **err)
{
	int rc = sqlite3_get_autocommit(st->db) ? shm_check(st, err) : 0;
	if (rc)
		return rc;
	if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(st, err, sql);
	return 0;
}

/* Runs a statement that returns no rows; releases it. */
static int step_done(struct store *st, sqlite3_stmt *s, const char *what,
		     char **err)
{
	int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : db_fail(st, err, what);
	release(st, s);
	return rc;
}

/* Runs a constant statement with no parameters and no rows. */
static int exec_cached(struct store *st, const char *sql, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, sql, &s, err);
	return rc ? rc : step_done(st, s, sql, err);
}

static int begin(struct store *st, char **err)
{
	return exec_cached(st, "BEGIN IMMEDIATE", err);
}

/* Commits when rc == 0, else rolls back; returns the final result. */
static int finish(struct store *st, int rc, char **err)
{
	if (rc == 0)
		rc = exec_cached(st, "COMMIT", err);
	if (rc != 0 && !sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static void lock(struct store *st)
{
	pthread_mutex_lock(&st->lock);
}

static void unlock(struct store *st)
{
	/* Every write is counted before the lock goes (store_writes). */
	__atomic_store_n(&st->writes, (uint64_t)sqlite3_total_changes64(st->db),
			 __ATOMIC_RELEASE);
	pthread_mutex_unlock(&st->lock);
}

uint64_t store_writes(struct store *st)
{
	return __atomic_load_n(&st->writes, __ATOMIC_ACQUIRE);
}

int store_wait_writable(struct store *st, int timeout_ms)
{
	int64_t t0 = clock_ms();
	for (;;) {
		lock(st);
		/* A look, not a wait: the connection is held only for it. */
		sqlite3_busy_timeout(st->db, 0);
		int rc = begin(st, NULL);
		if (rc == 0 && sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK)
			rc = -EIO;
		sqlite3_busy_timeout(st->db, WRITER_BUSY_MS);
		unlock(st);
		if (rc != -EAGAIN)
			return rc;
		if (clock_ms() - t0 >= timeout_ms)
			return -EAGAIN;
		struct timespec pause = { 0, WRITABLE_POLL_MS * 1000000L };
		nanosleep(&pause, NULL);
	}
}

/* Compact JSON text of v (any JSON value), or NULL with *rc set. */
static char *dump(const json_t *v, int *rc, char **err)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		*rc = oom(err);
	return s;
}

static int col_str(sqlite3_stmt *s, int i, char **out, char **err)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	*out = NULL;
	if (!t)
		return 0;
	*out = strdup((const char *)t);
	return *out ? 0 : oom(err);
}

static int col_json(sqlite3_stmt *s, int i, json_t **out, const char *what,
		    const char *id, char **err)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	*out = NULL;
	if (!t)
		return 0;
	json_error_t je;
	*out = json_loads(t, JSON_DECODE_ANY, &je);
	if (!*out) {
		set_err(err, "state database: run '%s': %s is not JSON: %s",
			id, what, je.text);
		log_damage("state database: run '%s': %s is not JSON (%s): the "
			   "file that shows it reads as EIO", id, what, je.text);
		return -EIO;
	}
	return 0;
}

static int col_state(sqlite3_stmt *s, int i, enum runstate *out,
		     const char *id, char **err)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	if (!runstate_parse(t, out)) {
		set_err(err, "state database: run '%s' has unknown state '%s'",
			id, t ? t : "(null)");
		log_damage("state database: run '%s' has unknown state '%s'", id,
			   t ? t : "(null)");
		return -EIO;
	}
	return 0;
}

static int no_run(const char *id, char **err)
{
	set_err(err, "no run '%s'", id);
	return -ENOENT;
}

/* ---- opening and migrating -------------------------------------------- */

static int pragma_int(struct store *st, const char *sql, int *out, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, sql, &s, err);
	if (rc)
		return rc;
	if (sqlite3_step(s) == SQLITE_ROW)
		*out = sqlite3_column_int(s, 0);
	else
		rc = db_fail(st, err, sql);
	release(st, s);
	return rc;
}

static int set_journal_wal(struct store *st, const char *path, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "PRAGMA journal_mode=WAL", &s, err);
	if (rc)
		return rc;
	if (sqlite3_step(s) != SQLITE_ROW) {
		rc = db_fail(st, err, "setting the WAL journal");
	} else {
		const char *mode = (const char *)sqlite3_column_text(s, 0);
		if (!mode || strcmp(mode, "wal") != 0) {
			set_err(err, "state database %s: cannot use a WAL "
				"journal here (got '%s'); put it on a local "
				"filesystem", path, mode ? mode : "?");
			rc = -EIO;
		}
	}
	release(st, s);
	return rc;
}

static int migrate(struct store *st, const char *path, char **err)
{
	int rc = begin(st, err);
	if (rc)
		return rc;
	int version = 0;
	rc = pragma_int(st, "PRAGMA user_version", &version, err);
	if (rc == 0 && (version < 0 || version > STORE_SCHEMA_VERSION)) {
		set_err(err, "state database %s has schema version %d, newer "
			"than this skillfs understands (%d): use a newer skillfs "
			"or another state file", path, version,
			STORE_SCHEMA_VERSION);
		rc = -EINVAL;
	}
	if (rc == 0 && version == 0) {
		int tables = 0;
		rc = pragma_int(st, "SELECT count(*) FROM sqlite_master",
				&tables, err);
		if (rc == 0 && tables > 0) {
			set_err(err, "%s is an SQLite database but not a "
				"skillfs state database (no schema version)",
				path);
			rc = -EINVAL;
		}
	}
	for (int v = version; rc == 0 && v < STORE_SCHEMA_VERSION; v++) {
		if (sqlite3_exec(st->db, migrations[v], NULL, NULL, NULL) !=
		    SQLITE_OK) {
			set_err(err, "state database %s: migrating to schema "
				"version %d: %s", path, v + 1,
				sqlite3_errmsg(st->db));
			rc = errno_of(sqlite3_errcode(st->db));
		}
	}
	if (rc == 0 && version != STORE_SCHEMA_VERSION) {
		char sql[64];
		snprintf(sql, sizeof sql, "PRAGMA user_version = %d",
			 STORE_SCHEMA_VERSION);
		rc = exec(st, sql, err);
	}
	return finish(st, rc, err);
}

/* ---- the checkpointer ---------------------------------------------------- */

static void *checkpointer_main(void *arg)
{
	struct store *st = arg;
	pthread_mutex_lock(&st->ckpt_lock);
	for (;;) {
		while (!st->ckpt_wanted && !st->ckpt_stop)
			pthread_cond_wait(&st->ckpt_cond, &st->ckpt_lock);
		if (st->ckpt_stop)
			break;
		st->ckpt_wanted = false;
		pthread_mutex_unlock(&st->ckpt_lock);
		/* The checkpoint writes the -shm file too. */
		lock(st);
		int usable = shm_check(st, NULL) == 0;
		unlock(st);
		if (!usable) {
			pthread_mutex_lock(&st->ckpt_lock);
			continue;
		}
		/* PASSIVE: copies what no reader still needs, never waits for
		 * or blocks the writer; the next commit after a complete one
		 * starts the WAL over. */
		int log = 0;
		(void)sqlite3_wal_checkpoint_v2(st->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE,
						&log, NULL);
		/* The WAL starts over only when a transaction begins with all
		 * of it copied back, which a steady stream of commits never
		 * allows. Past four times the threshold, copy the little that
		 * came meanwhile with the writers held (the store's lock), so
		 * that the next commit starts it over. */
		if (log >= 4 * CHECKPOINT_PAGES) {
			lock(st);
			(void)sqlite3_wal_checkpoint_v2(st->ckpt_db, NULL,
							SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
			unlock(st);
		}
		pthread_mutex_lock(&st->ckpt_lock);
	}
	pthread_mutex_unlock(&st->ckpt_lock);
	return NULL;
}

/* Called by SQLite after each commit on the main connection. */
static int wal_grew(void *arg, sqlite3 *db, const char *name, int pages)
{
	(void)db;
	(void)name;
	struct store *st = arg;
	if (pages >= CHECKPOINT_PAGES) {
		pthread_mutex_lock(&st->ckpt_lock);
		st->ckpt_wanted = true;
		pthread_cond_signal(&st->ckpt_cond);
		pthread_mutex_unlock(&st->ckpt_lock);
	}
	return SQLITE_OK;
}

static int checkpointer_start(struct store *st, char **err)
{
	int rc = sqlite3_open_v2(st->path, &st->ckpt_db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		set_err(err, "cannot open state database %s: %s", st->path,
			st->ckpt_db ? sqlite3_errmsg(st->ckpt_db) : sqlite3_errstr(rc));
		return -EIO;
	}
	sqlite3_busy_timeout(st->ckpt_db, BUSY_TIMEOUT_MS);
	/* A new connection learns the journal mode when it first reads. */
	if (sqlite3_exec(st->ckpt_db, "PRAGMA journal_mode=WAL;", NULL, NULL, NULL) != SQLITE_OK) {
		set_err(err, "state database %s: %s", st->path, sqlite3_errmsg(st->ckpt_db));
		return -EIO;
	}
	rc = pthread_create(&st->ckpt_thread, NULL, checkpointer_main, st);
	if (rc != 0) {
		set_err(err, "state database: cannot start its checkpointer: %s", strerror(rc));
		return -rc;
	}
	pthread_setname_np(st->ckpt_thread, "skillfs-ckpt");
	st->ckpt_started = true;
	sqlite3_wal_hook(st->db, wal_grew, st);
	return 0;
}

static void checkpointer_stop(struct store *st)
{
	if (!st->ckpt_started)
		return;
	sqlite3_wal_hook(st->db, NULL, NULL);
	pthread_mutex_lock(&st->ckpt_lock);
	st->ckpt_stop = true;
	pthread_cond_signal(&st->ckpt_cond);
	pthread_mutex_unlock(&st->ckpt_lock);
	pthread_join(st->ckpt_thread, NULL);
	st->ckpt_started = false;
}

struct store *store_open(const char *path, char **err)
{
	if (empty(path)) {
		set_err(err, "state database: no path given");
		return NULL;
	}
	/* Create the file ourselves so that it (and the -wal and -shm files
	 * SQLite derives from it) is private: runs hold prompts. */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		set_err(err, "cannot open state database %s: %s", path,
			strerror(errno));
		return NULL;
	}
	/* One daemon owns the database (SQLite's own locks are fcntl locks,
	 * which this does not touch). */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		set_err(err, "state database %s is in use%s", path,
			errno == EWOULDBLOCK ? " by another skillfs" : "");
		close(fd);
		return NULL;
	}

	struct store *st = calloc(1, sizeof *st);
	if (!st) {
		oom(err);
		close(fd);
		return NULL;
	}
	st->owner_fd = fd;
	st->shm_fd = -1;
	st->path = strdup(path);
	if (!st->path) {
		oom(err);
		close(fd);
		free(st);
		return NULL;
	}
	pthread_mutex_init(&st->ckpt_lock, NULL);
	pthread_cond_init(&st->ckpt_cond, NULL);
	int prc = pthread_mutex_init(&st->lock, NULL);
	if (prc != 0) {
		set_err(err, "state database: mutex: %s", strerror(prc));
		close(fd);
		free(st->path);
		free(st);
		return NULL;
	}
	/* Our mutex serialises every use of the connection. */
	int rc = sqlite3_open_v2(path, &st->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
				 NULL);
	if (rc != SQLITE_OK) {
		set_err(err, "cannot open state database %s: %s", path,
			st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		goto fail;
	}
	/* Opening and migrating may wait for another process as long as the
	 * checkpointer does; afterwards statements wait WRITER_BUSY_MS. */
	sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
	rc = set_journal_wal(st, path, err);
	if (rc == 0)
		rc = exec(st, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
			      "PRAGMA wal_autocheckpoint=0; "
			      "PRAGMA journal_size_limit=" WAL_SIZE_LIMIT ";", err);
	if (rc == 0)
		rc = migrate(st, path, err);
	if (rc == 0)
		sqlite3_busy_timeout(st->db, WRITER_BUSY_MS);
	if (rc == 0) {
		/* SQLite made the -shm file at its first read in WAL mode. */
		char *shm = NULL;
		if (asprintf(&shm, "%s-shm", path) < 0) {
			rc = oom(err);
		} else {
			st->shm_fd = open(shm, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			free(shm);
			rc = shm_check(st, err);
		}
	}
	if (rc == 0)
		rc = checkpointer_start(st, err);
	if (rc != 0)
		goto fail;
	return st;
fail:
	store_close(st);
	return NULL;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	checkpointer_stop(st);
	for (size_t i = 0; i < st->ncache; i++)
		sqlite3_finalize(st->cache[i].stmt);
	sqlite3_close_v2(st->db);
	sqlite3_close_v2(st->ckpt_db);
	if (st->owner_fd >= 0)
		close(st->owner_fd);
	if (st->shm_fd >= 0)
		close(st->shm_fd); /* SQLite has let go of it */
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->ckpt_lock);
	pthread_cond_destroy(&st->ckpt_cond);
	free(st->path);
	free(st);
}

int store_file_stat(struct store *st, struct stat *out)
{
	return fstat(st->owner_fd, out) < 0 ? -errno : 0;
}

/* ---- runs --------------------------------------------------------------- */

int store_run_create(struct store *st, const char *id, char **err)
{
	return store_run_create_owned(st, id, -1, -1, err);
}

/* An owner id as stored: NULL (-1, unknown) or a uid/gid of 0 .. 2^32-2. */
static void bind_owner(sqlite3_stmt *s, int i, int64_t v)
{
	if (v < 0)
		sqlite3_bind_null(s, i);
	else
		sqlite3_bind_int64(s, i, v);
}

static bool owner_ok(int64_t v)
{
	return v >= -1 && v < (int64_t)UINT32_MAX;
}

int store_run_create_owned(struct store *st, const char *id, int64_t uid, int64_t gid,
			   char **err)
{
	if (empty(id)) {
		set_err(err, "a run id cannot be empty");
		return -EINVAL;
	}
	if (!owner_ok(uid) || !owner_ok(gid) || (uid < 0) != (gid < 0)) {
		set_err(err, "run '%s': a bad owner (uid %lld, gid %lld)", id,
			(long long)uid, (long long)gid);
		return -EINVAL;
	}
	lock(st);
	sqlite3_stmt *s;
	int rc = prepare(st,
		"INSERT OR IGNORE INTO runs (id, state, created_at, updated_at, "
		"owner_uid, owner_gid) VALUES (?1, ?2, ?3, ?3, ?4, ?5)", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, runstate_name(RUNSTATE_CREATED), -1,
				  SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, now_ns());
		bind_owner(s, 4, uid);
		bind_owner(s, 5, gid);
		rc = step_done(st, s, "creating a run", err);
	}
	if (rc == 0 && sqlite3_changes(st->db) == 0) {
		set_err(err, "run '%s' already exists", id);
		rc = -EEXIST;
	}
	unlock(st);
	return rc;
}

/* Column i as an owner id: -1 when NULL (a run made before schema 5), or
 * -EIO for anything that is no uid or gid. */
static int col_owner(sqlite3_stmt *s, int i, int64_t *out, const char *id, char **err)
{
	*out = -1;
	if (sqlite3_column_type(s, i) == SQLITE_NULL)
		return 0;
	int64_t v = sqlite3_column_int64(s, i);
	if (sqlite3_column_type(s, i) != SQLITE_INTEGER || v < 0 || !owner_ok(v)) {
		set_err(err, "state database: run '%s' has a bad owner", id);
		return -EIO;
	}
	*out = v;
	return 0;
}

int store_run_owner(struct store *st, const char *id, int64_t *uid, int64_t *gid,
		    char **err)
{
	*uid = *gid = -1;
	if (empty(id))
		return no_run("", err);
	lock(st);
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT owner_uid, owner_gid FROM runs WHERE id = ?1", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
		int step = sqlite3_step(s);
		if (step == SQLITE_ROW) {
			rc = col_owner(s, 0, uid, id, err);
			if (rc == 0)
				rc = col_owner(s, 1, gid, id, err);
			/* Both or neither: half an owner is none. */
			if (rc == 0 && (*uid < 0) != (*gid < 0)) {
				set_err(err, "state database: run '%s' has half an owner", id);
				rc = -EIO;
			}
			if (rc != 0)
				*uid = *gid = -1;
		} else if (step == SQLITE_DONE) {
			rc = no_run(id, err);
		} else {
			rc = db_fail(st, err, "reading a run's owner");
		}
		release(st, s);
	}
	unlock(st);
	return rc;
}

static int read_run(sqlite3_stmt *s, struct run_row *r, char **err)
{
	const char *id = (const char *)sqlite3_column_text(s, 0);
	int rc = col_str(s, 0, &r->id, err);
	if (rc == 0) {
		r->seq = sqlite3_column_int64(s, 1);
		rc = col_str(s, 2, &r->config, err);
	}
	if (rc == 0)
		rc = col_str(s, 3, &r->prompt, err);
	if (rc == 0)
		rc = col_json(s, 4, &r->forced_skills, "forced_skills", id, err);
	if (rc == 0 && !r->forced_skills && !(r->forced_skills = json_array()))
		rc = oom(err);
	if (rc == 0)
		rc = col_json(s, 5, &r->allowed_tools, "allowed_tools", id, err);
	if (rc == 0)
		rc = col_state(s, 6, &r->state, id, err);
	if (rc == 0)
		rc = col_str(s, 7, &r->mode, err);
	if (rc == 0)
		rc = col_str(s, 8, &r->chat_id, err);
	if (rc == 0)
		rc = col_str(s, 9, &r->model, err);
	if (rc == 0)
		rc = col_str(s, 10, &r->error, err);
	if (rc == 0)
		rc = col_str(s, 11, &r->result, err);
	if (rc == 0)
		rc = col_json(s, 12, &r->pending, "pending", id, err);
	if (rc == 0)
		rc = col_str(s, 13, &r->input, err);
	if (rc == 0)
		rc = col_json(s, 14, &r->usage, "usage", id, err);
	if (rc == 0) {
		r->created_at = sqlite3_column_int64(s, 15);
		r->updated_at = sqlite3_column_int64(s, 16);
		r->started_at = sqlite3_column_int64(s, 17);
		r->finished_at = sqlite3_column_int64(s, 18);
		rc = col_owner(s, 19, &r->owner_uid, id, err);
	}
	if (rc == 0)
		rc = col_owner(s, 20, &r->owner_gid, id, err);
	if (rc == 0)
		rc = col_str(s, 21, &r->workdir, err);
	if (rc == 0)
		rc = col_json(s, 22, &r->provenance, "provenance", id, err);
	return rc;
}

int store_run_get(struct store *st, const char *id, struct run_row *out,
		  char **err)
{
	memset(out, 0, sizeof *out);
	if (empty(id))
		return no_run("", err);
	lock(st);
	sqlite3_stmt *s;
	int rc = prepare(st,
		"SELECT id, seq, config, prompt, forced_skills, allowed_tools, "
		"state, mode, chat_id, model, error, result, pending, input, "
		"usage, created_at, updated_at, started_at, finished_at, "
		"owner_uid, owner_gid, workdir, provenance FROM runs WHERE id = ?1", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
		int step = sqlite3_step(s);
		if (step == SQLITE_ROW)
			rc = read_run(s, out, err);
		else if (step == SQLITE_DONE)
			rc = no_run(id, err);
		else
			rc = db_fail(st, err, "reading a run");
		release(st, s);
	}
	unlock(st);
	if (rc != 0)
		run_row_free(out);
	return rc;
}

void run_row_free(struct run_row *r)
{
	if (!r)
		return;
	free(r->id);
	free(r->config);
	free(r->prompt);
	json_decref(r->forced_skills);
	json_decref(r->allowed_tools);
	free(r->mode);
	free(r->chat_id);
	free(r->model);
	free(r->error);
	free(r->result);
	json_decref(r->pending);
	free(r->input);
	json_decref(r->usage);
	free(r->workdir);
	json_decref(r->provenance);
	memset(r, 0, sizeof *r);
}

/* The state of run id, with the lock held. */
static int state_locked(struct store *st, const char *id, enum runstate *out,
			char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT state FROM runs WHERE id = ?1", &s, err);
	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	int step = sqlite3_step(s);
	if (step == SQLITE_ROW)
		rc = col_state(s, 0, out, id, err);
	else if (step == SQLITE_DONE)
		rc = no_run(id, err);
	else
		rc = db_fail(st, err, "reading a run's state");
	release(st, s);
	return rc;
}

int store_run_state(struct store *st, const char *id, enum runstate *out,
		    char **err)
{
	if (empty(id))
		return no_run("", err);
	lock(st);
	int rc = state_locked(st, id, out, err);
	unlock(st);
	return rc;
}

/* Appends column 0 of every row of s (bound by the caller) to out, and
 * with states, column 1 as a run state to *states (index for index; a row
 * whose state cannot be read is left out). Releases s. */
static int collect_ids(struct store *st, sqlite3_stmt *s, struct strlist *out,
		       enum runstate **states, int64_t **updated, char **err)
{
	int rc = 0, step;
	size_t cap = 0;
	if (states)
		*states = NULL;
	if (updated)
		*updated = NULL;
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(s, 0);
		enum runstate state = RUNSTATE_CREATED;
		if (!t || (states && !runstate_parse((const char *)sqlite3_column_text(s, 1),
						     &state)))
			continue; /* unreadable: as store_run_state fails on it */
		if ((states || updated) && out->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			enum runstate *p = states ? realloc(*states, ncap * sizeof *p) : NULL;
			if (states && p)
				*states = p;
			int64_t *u = updated ? realloc(*updated, ncap * sizeof *u) : NULL;
			if (updated && u)
				*updated = u;
			if ((states && !p) || (updated && !u)) {
				rc = oom(err);
				break;
			}
			cap = ncap;
		}
		if (strlist_add(out, t) < 0) {
			rc = oom(err);
			break;
		}
		if (states)
			(*states)[out->n - 1] = state;
		if (updated)
			(*updated)[out->n - 1] = sqlite3_column_int64(s, 2);
	}
	if (rc == 0 && step != SQLITE_DONE)
		rc = db_fail(st, err, "listing runs");
	release(st, s);
	return rc;
}

int store_run_ids(struct store *st, struct strlist *out, enum runstate **states,
		  int64_t **updated, char **err)
{
	lock(st);
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT id, state, updated_at FROM runs ORDER BY id", &s, err);
	if (rc == 0)
		rc = collect_ids(st, s, out, states, updated, err);
	unlock(st);
	return rc;
}

int store_runs_in_state(struct store *st, enum runstate state,
			struct strlist *out, char **err)
{
	if (!state_ok(state)) {
		set_err(err, "invalid run state %d", (int)state);
		return -EINVAL;
	}
	lock(st);
	sqlite3_stmt *s;
	int rc = prepare(st,
		"SELECT id FROM runs WHERE state = ?1 ORDER BY seq, id", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, runstate_name(state), -1, SQLITE_STATIC);
		rc = collect_ids(st, s, out, NULL, NULL, err);
	}
	unlock(st);
	return rc;
}

/* Checks, with the lock held and a transaction open, that run id is in
 * state want; -EBUSY naming `doing` otherwise. */
static int expect_state_locked(struct store *st, const char *id,
			       enum runstate want, const char *doing,
			       char **err)
{
	enum runstate cur;
	int rc = state_locked(st, id, &cur, err);
	if (rc == 0 && cur != want) {
		set_err(err, "run '%s' is %s, not %s: cannot %s", id,
			runstate_name(cur), runstate_name(want), doing);
		rc = -EBUSY;
	}
	return rc;
}

/* UPDATE sql (?1 value, ?2 now, ?3 id) on a run that must be created. */
static int set_created_field(struct store *st, const char *id,
			     const char *sql, const char *value,
			     const char *doing, char **err)
{
	lock(st);
	int rc = begin(st, err);
	if (rc == 0)
		rc = expect_state_locked(st, id, RUNSTATE_CREATED, doing, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st, sql, &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, value, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, now_ns());
		sqlite3_bind_text(s, 3, id, -1, SQLITE_STATIC);
		rc = step_done(st, s, doing, err);
	}
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

int store_run_set_config(struct store *st, const char *id, const char *config,
			 char **err)
{
	if (empty(id))
		return no_run("", err);
	if (empty(config)) {
		set_err(err, "a configuration name cannot be empty");
		return -EINVAL;
	}
	return set_created_field(st, id,
		"UPDATE runs SET config = ?1, updated_at = ?2 WHERE id = ?3",
		config, "change its config", err);
}

int store_run_set_workdir(struct store *st, const char *id, const char *workdir,
			  char **err)
{
	if (empty(id))
		return no_run("", err);
	if (workdir && workdir[0] != '/') {
		set_err(err, "a workdir must be an absolute path");
		return -EINVAL;
	}
	return set_created_field(st, id,
		"UPDATE runs SET workdir = ?1, updated_at = ?2 WHERE id = ?3",
		workdir, "change its workdir", err);
}

int store_run_set_forced_skills(struct store *st, const char *id,
				const json_t *skills, char **err)
{
	if (empty(id))
		return no_run("", err);
	if (!json_is_array(skills)) {
		set_err(err, "forced skills must be a JSON array");
		return -EINVAL;
	}
	int rc = 0;
	char *text = dump(skills, &rc, err);
	if (!text)
		return rc;
	rc = set_created_field(st, id,
		"UPDATE runs SET forced_skills = ?1, updated_at = ?2 WHERE id = ?3",
		text, "change its skills", err);
	free(text);
	return rc;
}

/* Bumps the run's updated_at; -ENOENT when there is no such run. */
static int touch_locked(struct store *st, const char *id, int64_t now,
			char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "UPDATE runs SET updated_at = ?1 WHERE id = ?2",
			 &s, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(s, 1, now);
	sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
	rc = step_done(st, s, "updating a run", err);
	if (rc == 0 && sqlite3_changes(st->db) == 0)
		rc = no_run(id, err);
	return rc;
}

/* SELECT COALESCE(MAX(seq), 0) + 1 ... with ?1 (and ?2) bound to a, b. */
static int next_seq_locked(struct store *st, const char *sql, const char *a,
			   const char *b, int64_t *out, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, sql, &s, err);
	if (rc)
		return rc;
	if (a)
		sqlite3_bind_text(s, 1, a, -1, SQLITE_STATIC);
	if (b)
		sqlite3_bind_text(s, 2, b, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW)
		*out = sqlite3_column_int64(s, 0);
	else
		rc = db_fail(st, err, "numbering");
	release(st, s);
	return rc;
}

/* Inserts an event; data_text is JSON text. Lock held, transaction open. */
static int event_insert_locked(struct store *st, const char *run_id,
			       const char *type, const char *data_text,
			       int64_t now, int64_t *seq, char **err)
{
	int64_t n = 0;
	int rc = next_seq_locked(st,
		"SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run_id = ?1",
		run_id, NULL, &n, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"INSERT INTO events (run_id, seq, ts, type, json) "
			"VALUES (?1, ?2, ?3, ?4, ?5)", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, n);
		sqlite3_bind_int64(s, 3, now);
		sqlite3_bind_text(s, 4, type, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 5, data_text, -1, SQLITE_STATIC);
		rc = step_done(st, s, "appending an event", err);
	}
	if (rc == 0 && seq)
		*seq = n;
	return rc;
}

/* The text of a {"from", "to"} state event, or NULL with *rc set. */
static char *state_event(enum runstate from, enum runstate to, int *rc,
			 char **err)
{
	json_t *o = json_pack("{s:s, s:s}", "from", runstate_name(from), "to",
			      runstate_name(to));
	if (!o) {
		*rc = oom(err);
		return NULL;
	}
	char *text = dump(o, rc, err);
	json_decref(o);
	return text;
}

int store_run_enqueue(struct store *st, const char *id, const char *config,
		      const char *prompt, const json_t *forced_skills,
		      const json_t *allowed_tools, int64_t *seq, char **err)
{
	return store_run_enqueue_with(st, id, config, prompt, forced_skills, allowed_tools, NULL,
				      seq, err);
}

int store_run_enqueue_with(struct store *st, const char *id, const char *config,
			   const char *prompt, const json_t *forced_skills,
			   const json_t *allowed_tools, const json_t *provenance, int64_t *seq,
			   char **err)
{
	if (empty(id))
		return no_run("", err);
	if (empty(config) || empty(prompt)) {
		set_err(err, "run '%s': enqueueing needs a configuration name "
			"and a non-empty prompt", id);
		return -EINVAL;
	}
	if (!json_is_array(forced_skills)) {
		set_err(err, "run '%s': forced skills must be a JSON array", id);
		return -EINVAL;
	}
	if (!allowed_tools || json_is_null(allowed_tools)) {
		set_err(err, "run '%s': the allow-list must be resolved and "
			"stored when the run is enqueued", id);
		return -EINVAL;
	}
	int rc = 0;
	char *forced = dump(forced_skills, &rc, err);
	char *allowed = forced ? dump(allowed_tools, &rc, err) : NULL;
	char *prov = allowed && provenance ? dump(provenance, &rc, err) : NULL;
	char *event = allowed && (prov || !provenance)
			      ? state_event(RUNSTATE_CREATED, RUNSTATE_QUEUED, &rc, err)
			      : NULL;
	if (!event)
		goto out;

	lock(st);
	int64_t now = now_ns(), n = 0;
	rc = begin(st, err);
	if (rc == 0)
		rc = expect_state_locked(st, id, RUNSTATE_CREATED, "enqueue it",
					 err);
	if (rc == 0)
		rc = next_seq_locked(st,
			"SELECT COALESCE(MAX(seq), 0) + 1 FROM runs", NULL, NULL,
			&n, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"UPDATE runs SET state = ?1, seq = ?2, config = ?3, "
			"prompt = ?4, forced_skills = ?5, allowed_tools = ?6, "
			"updated_at = ?7, provenance = ?9 WHERE id = ?8", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, runstate_name(RUNSTATE_QUEUED), -1,
				  SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, n);
		sqlite3_bind_text(s, 3, config, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 4, prompt, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 5, forced, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 6, allowed, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 7, now);
		sqlite3_bind_text(s, 8, id, -1, SQLITE_STATIC);
		if (prov)
			sqlite3_bind_text(s, 9, prov, -1, SQLITE_STATIC);
		else
			sqlite3_bind_null(s, 9);
		rc = step_done(st, s, "enqueueing a run", err);
	}
	if (rc == 0)
		rc = event_insert_locked(st, id, "state", event, now, NULL, err);
	rc = finish(st, rc, err);
	unlock(st);
	if (rc == 0 && seq)
		*seq = n;
out:
	free(forced);
	free(allowed);
	free(prov);
	free(event);
	return rc;
}

/* Checks that msg is a JSON object with a non-empty string "role". */
static int check_message(const json_t *msg, char **err)
{
	const char *role = json_string_value(json_object_get(msg, "role"));
	if (!json_is_object(msg) || empty(role)) {
		set_err(err, "a message must be a JSON object with a \"role\"");
		return -EINVAL;
	}
	return 0;
}

/* The size of stored message text as an element of messages.json, read
 * back as store_messages does; -1 when it cannot be measured (no memory:
 * the chat's size is then rendered). */
static int64_t rendered_bytes_of(const char *text)
{
	json_t *m = json_loads(text, JSON_DECODE_ANY, NULL);
	int64_t n = m ? store_message_rendered_bytes(m) : -1;
	json_decref(m);
	return n;
}

/* Appends a checked message to a chat. Lock held, transaction open. */
static int message_insert_locked(struct store *st, const char *run_id,
				 const char *chat_id, const json_t *msg,
				 int64_t now, int64_t *seq, char **err)
{
	int rc = 0;
	char *text = dump(msg, &rc, err);
	if (!text)
		return rc;
	int64_t n = 0;
	rc = next_seq_locked(st,
		"SELECT COALESCE(MAX(seq), 0) + 1 FROM messages "
		"WHERE run_id = ?1 AND chat_id = ?2", run_id, chat_id, &n, err);
	int64_t rendered = rendered_bytes_of(text);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"INSERT INTO messages (run_id, chat_id, seq, role, json, ts, "
			"rendered_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, n);
		sqlite3_bind_text(s, 4,
			json_string_value(json_object_get(msg, "role")), -1,
			SQLITE_STATIC);
		sqlite3_bind_text(s, 5, text, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, now);
		if (rendered >= 0)
			sqlite3_bind_int64(s, 7, rendered);
		else
			sqlite3_bind_null(s, 7);
		rc = step_done(st, s, "appending a message", err);
	}
	free(text);
	if (rc == 0 && seq)
		*seq = n;
	return rc;
}

/* Binds JSON field v of a run_change to ?flag (1 = change) and ?val. */
static void bind_json_change(sqlite3_stmt *s, int flag, int val,
			     const json_t *v, const char *text)
{
	sqlite3_bind_int(s, flag, v != NULL);
	if (text)
		sqlite3_bind_text(s, val, text, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, val);
}

int store_run_transition(struct store *st, const char *id,
			 enum runstate from, enum runstate to,
			 const struct run_change *ch, char **err)
{
	static const struct run_change none;
	if (!ch)
		ch = &none;
	if (empty(id))
		return no_run("", err);
	if (!state_ok(from) || !state_ok(to) ||
	    (from != to && !runstate_can_move(from, to))) {
		set_err(err, "run '%s': cannot move from %s to %s", id,
			runstate_name(from), runstate_name(to));
		return -EINVAL;
	}
	if (from == RUNSTATE_CREATED && to == RUNSTATE_QUEUED) {
		set_err(err, "run '%s': a run is queued only by enqueueing its "
			"prompt", id);
		return -EINVAL;
	}
	if ((ch->msg || json_array_size(ch->msgs)) && empty(ch->msg_chat)) {
		set_err(err, "run '%s': a message needs a chat id", id);
		return -EINVAL;
	}
	if (ch->msgs && !json_is_array(ch->msgs)) {
		set_err(err, "run '%s': messages must be an array", id);
		return -EINVAL;
	}
	int rc = ch->msg ? check_message(ch->msg, err) : 0;
	for (size_t i = 0; rc == 0 && i < json_array_size(ch->msgs); i++)
		rc = check_message(json_array_get(ch->msgs, i), err);
	if (rc)
		return rc;
	char *pending = NULL, *usage = NULL, *event = NULL;
	if (ch->pending && !json_is_null(ch->pending) &&
	    !(pending = dump(ch->pending, &rc, err)))
		goto out;
	if (ch->usage && !json_is_null(ch->usage) &&
	    !(usage = dump(ch->usage, &rc, err)))
		goto out;
	if (from != to && !(event = state_event(from, to, &rc, err)))
		goto out;

	lock(st);
	int64_t now = now_ns();
	rc = begin(st, err);
	if (rc == 0)
		rc = expect_state_locked(st, id, from, "change it", err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"UPDATE runs SET state = ?1, updated_at = ?2, "
			"started_at = CASE WHEN ?3 THEN COALESCE(started_at, ?2) "
			"  ELSE started_at END, "
			"finished_at = CASE WHEN ?4 THEN ?2 ELSE finished_at END, "
			"error = COALESCE(?5, error), "
			"result = COALESCE(?6, result), "
			"input = COALESCE(?7, input), "
			"mode = COALESCE(?8, mode), "
			"chat_id = COALESCE(?9, chat_id), "
			"model = COALESCE(?10, model), "
			"pending = CASE WHEN ?11 THEN ?12 ELSE pending END, "
			"usage = CASE WHEN ?13 THEN ?14 ELSE usage END "
			"WHERE id = ?15", &s, err);
	if (rc == 0) {
		bool moved = from != to;
		sqlite3_bind_text(s, 1, runstate_name(to), -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, now);
		sqlite3_bind_int(s, 3, moved && to == RUNSTATE_RUNNING);
		sqlite3_bind_int(s, 4, moved && runstate_is_terminal(to));
		sqlite3_bind_text(s, 5, ch->error, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 6, ch->result, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 7, ch->input, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 8, ch->mode, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 9, ch->chat_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 10, ch->model, -1, SQLITE_STATIC);
		bind_json_change(s, 11, 12, ch->pending, pending);
		bind_json_change(s, 13, 14, ch->usage, usage);
		sqlite3_bind_text(s, 15, id, -1, SQLITE_STATIC);
		rc = step_done(st, s, "changing a run", err);
	}
	if (rc == 0 && ch->msg)
		rc = message_insert_locked(st, id, ch->msg_chat, ch->msg, now,
					   NULL, err);
	for (size_t i = 0; rc == 0 && i < json_array_size(ch->msgs); i++)
		rc = message_insert_locked(st, id, ch->msg_chat, json_array_get(ch->msgs, i),
					   now, NULL, err);
	if (rc == 0 && event)
		rc = event_insert_locked(st, id, "state", event, now, NULL, err);
	rc = finish(st, rc, err);
	unlock(st);
out:
	free(pending);
	free(usage);
	free(event);
	return rc;
}

int store_run_delete(struct store *st, const char *id, char **err)
{
	static const char *const sql[] = {
		"DELETE FROM messages WHERE run_id = ?1",
		"DELETE FROM events WHERE run_id = ?1",
		"DELETE FROM chats WHERE run_id = ?1",
		"DELETE FROM step_starts WHERE run_id = ?1",
		"DELETE FROM runs WHERE id = ?1",
	};
	if (empty(id))
		return no_run("", err);
	lock(st);
	int rc = begin(st, err);
	for (size_t i = 0; rc == 0 && i < sizeof sql / sizeof *sql; i++) {
		sqlite3_stmt *s;
		rc = prepare(st, sql[i], &s, err);
		if (rc == 0) {
			sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
			rc = step_done(st, s, "deleting a run", err);
		}
	}
	if (rc == 0 && sqlite3_changes(st->db) == 0)
		rc = no_run(id, err);
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

/* ---- messages ------------------------------------------------------------ */

int store_message_append(struct store *st, const char *run_id,
			 const char *chat_id, const json_t *msg, int64_t *seq,
			 char **err)
{
	if (empty(run_id))
		return no_run("", err);
	if (empty(chat_id)) {
		set_err(err, "run '%s': a message needs a chat id", run_id);
		return -EINVAL;
	}
	int rc = check_message(msg, err);
	if (rc)
		return rc;
	lock(st);
	int64_t now = now_ns();
	rc = begin(st, err);
	if (rc == 0)
		rc = touch_locked(st, run_id, now, err);
	if (rc == 0)
		rc = message_insert_locked(st, run_id, chat_id, msg, now, seq,
					   err);
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

/* -ENOENT unless run id exists. Lock held. */
static int exists_locked(struct store *st, const char *id, char **err)
{
	enum runstate ignored;
	return state_locked(st, id, &ignored, err);
}

int store_messages(struct store *st, const char *run_id, const char *chat_id,
		   json_t **out, char **err)
{
	*out = NULL;
	if (empty(run_id))
		return no_run("", err);
	/* The texts are copied out under the lock and parsed after it: a
	 * large chat took the store from every other user for as long as
	 * parsing it took. */
	struct strlist texts = {0};
	lock(st);
	int rc = exists_locked(st, run_id, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"SELECT json FROM messages WHERE run_id = ?1 AND "
			"chat_id = ?2 ORDER BY seq", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id ? chat_id : "", -1,
				  SQLITE_STATIC);
		int step;
		while ((step = sqlite3_step(s)) == SQLITE_ROW) {
			const char *t = (const char *)sqlite3_column_text(s, 0);
			if (strlist_add(&texts, t ? t : "") < 0) {
				rc = oom(err);
				break;
			}
		}
		if (rc == 0 && step != SQLITE_DONE)
			rc = db_fail(st, err, "reading messages");
		release(st, s);
	}
	unlock(st);
	json_t *arr = rc == 0 ? json_array() : NULL;
	if (rc == 0 && !arr)
		rc = oom(err);
	for (size_t i = 0; rc == 0 && i < texts.n; i++) {
		json_error_t je;
		json_t *m = json_loads(texts.items[i], JSON_DECODE_ANY, &je);
		if (!m) {
			set_err(err, "state database: run '%s': a message is not JSON: %s",
				run_id, je.text);
			log_damage("state database: run '%s': a message is not JSON (%s): the "
				   "file that shows it reads as EIO", run_id, je.text);
			rc = -EIO;
		} else if (json_array_append_new(arr, m) < 0) {
			rc = oom(err);
		}
	}
	strlist_free(&texts);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

int64_t store_message_rendered_bytes(const json_t *msg)
{
	/* Measured, not derived: the message alone in an array, at the
	 * depth it has in the chat's, less that array's framing ("[\n  "
	 * and "\n]"). */
	json_t *arr = json_array();
	if (!arr || json_array_append(arr, (json_t *)msg) < 0) {
		json_decref(arr);
		return -1;
	}
	size_t n = json_dumpb(arr, NULL, 0, STORE_MESSAGES_JSON_FLAGS);
	json_decref(arr);
	return n >= STORE_MESSAGES_JSON_ONE ? (int64_t)(n - STORE_MESSAGES_JSON_ONE) : -1;
}

int store_messages_json_size(struct store *st, const char *run_id, const char *chat_id,
			     uint64_t *size, char **err)
{
	*size = 0;
	if (empty(run_id))
		return no_run("", err);
	int64_t n = 0, with = 0, bytes = 0;
	lock(st);
	int rc = exists_locked(st, run_id, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"SELECT COUNT(*), COUNT(rendered_bytes), "
			"COALESCE(SUM(rendered_bytes), 0) FROM messages "
			"INDEXED BY messages_rendered_bytes "
			"WHERE run_id = ?1 AND chat_id = ?2", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id ? chat_id : "", -1, SQLITE_STATIC);
		if (sqlite3_step(s) == SQLITE_ROW) {
			n = sqlite3_column_int64(s, 0);
			with = sqlite3_column_int64(s, 1);
			bytes = sqlite3_column_int64(s, 2);
		} else {
			rc = db_fail(st, err, "reading the sizes of messages");
		}
		release(st, s);
	}
	unlock(st);
	if (rc)
		return rc;
	if (with != n || n < 0 || bytes < 0) {
		set_err(err, "run '%s': messages stored before their sizes were kept", run_id);
		return -EAGAIN;
	}
	/* the framing json_dumps writes around the elements, and the
	 * newline json_text_append adds */
	*size = n == 0 ? STORE_MESSAGES_JSON_EMPTY + 1
		       : (uint64_t)bytes + STORE_MESSAGES_JSON_ONE +
				 (uint64_t)(n - 1) * STORE_MESSAGES_JSON_SEP + 1;
	return 0;
}

size_t store_message_bytes(const json_t *msg)
{
	/* the flags of dump(), which writes the messages table */
	return msg ? json_dumpb(msg, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
}

int store_run_totals(struct store *st, const char *run_id, struct run_totals *out,
		     char **err)
{
	*out = (struct run_totals){ 0 };
	if (empty(run_id))
		return no_run("", err);
	lock(st);
	int rc = exists_locked(st, run_id, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"SELECT (SELECT COUNT(*) FROM messages WHERE run_id = ?1 AND "
			"        role = 'assistant'), "
			"       (SELECT COALESCE(SUM(length(CAST(json AS BLOB))), 0) "
			"        FROM messages WHERE run_id = ?1), "
			"       (SELECT COUNT(*) FROM chats WHERE run_id = ?1 AND "
			"        chat_id IS NOT (SELECT chat_id FROM runs WHERE id = ?1))",
			&s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		if (sqlite3_step(s) == SQLITE_ROW) {
			out->assistant_messages = sqlite3_column_int64(s, 0);
			out->message_bytes = sqlite3_column_int64(s, 1);
			out->subagent_chats = sqlite3_column_int64(s, 2);
		} else {
			rc = db_fail(st, err, "reading what a run has stored");
		}
		release(st, s);
	}
	unlock(st);
	return rc;
}

/* ---- chats --------------------------------------------------------------- */

int store_chat_create(struct store *st, const char *run_id,
		      const char *chat_id, const char *parent_chat,
		      const char *skill, const json_t *tools, char **err)
{
	if (empty(run_id))
		return no_run("", err);
	if (empty(chat_id)) {
		set_err(err, "run '%s': a chat id cannot be empty", run_id);
		return -EINVAL;
	}
	if (tools && !json_is_array(tools)) {
		set_err(err, "run '%s': the tools of chat '%s' must be an array", run_id,
			chat_id);
		return -EINVAL;
	}
	int rc = 0;
	char *tools_text = tools ? dump(tools, &rc, err) : NULL;
	if (rc)
		return rc;
	lock(st);
	int64_t now = now_ns();
	rc = begin(st, err);
	if (rc == 0)
		rc = touch_locked(st, run_id, now, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"INSERT OR IGNORE INTO chats (run_id, chat_id, parent_chat, "
			"skill, state, created_at, updated_at, tools) "
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, parent_chat, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 4, skill, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 5, runstate_name(RUNSTATE_RUNNING), -1,
				  SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, now);
		sqlite3_bind_text(s, 7, tools_text, -1, SQLITE_STATIC);
		rc = step_done(st, s, "creating a chat", err);
	}
	if (rc == 0 && sqlite3_changes(st->db) == 0) {
		set_err(err, "run '%s' already has a chat '%s'", run_id, chat_id);
		rc = -EEXIST;
	}
	rc = finish(st, rc, err);
	unlock(st);
	free(tools_text);
	return rc;
}

int store_chat_transition(struct store *st, const char *run_id,
			  const char *chat_id, enum runstate to,
			  const char *result, char **err)
{
	if (empty(run_id))
		return no_run("", err);
	if (empty(chat_id) || !state_ok(to)) {
		set_err(err, "run '%s': a chat move needs a chat id and a state",
			run_id);
		return -EINVAL;
	}
	lock(st);
	int64_t now = now_ns();
	int rc = begin(st, err);
	if (rc == 0)
		rc = touch_locked(st, run_id, now, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st, "SELECT state FROM chats WHERE run_id = ?1 "
			     "AND chat_id = ?2", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id, -1, SQLITE_STATIC);
		int step = sqlite3_step(s);
		enum runstate cur;
		if (step == SQLITE_DONE) {
			set_err(err, "run '%s' has no chat '%s'", run_id, chat_id);
			rc = -ENOENT;
		} else if (step != SQLITE_ROW) {
			rc = db_fail(st, err, "reading a chat");
		} else if ((rc = col_state(s, 0, &cur, run_id, err)) == 0 &&
			   !runstate_can_move(cur, to)) {
			set_err(err, "run '%s': chat '%s' cannot move from %s "
				"to %s", run_id, chat_id, runstate_name(cur),
				runstate_name(to));
			rc = -EINVAL;
		}
		release(st, s);
	}
	if (rc == 0)
		rc = prepare(st,
			"UPDATE chats SET state = ?1, result = COALESCE(?2, result), "
			"updated_at = ?3 WHERE run_id = ?4 AND chat_id = ?5",
			&s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, runstate_name(to), -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, result, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, now);
		sqlite3_bind_text(s, 4, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 5, chat_id, -1, SQLITE_STATIC);
		rc = step_done(st, s, "changing a chat", err);
	}
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

static int read_chat(sqlite3_stmt *s, struct chat_row *c, const char *run_id,
		     char **err)
{
	int rc = col_str(s, 0, &c->chat_id, err);
	if (rc == 0)
		rc = col_str(s, 1, &c->parent_chat, err);
	if (rc == 0)
		rc = col_str(s, 2, &c->skill, err);
	if (rc == 0)
		rc = col_state(s, 3, &c->state, run_id, err);
	if (rc == 0)
		rc = col_str(s, 4, &c->result, err);
	c->created_at = sqlite3_column_int64(s, 5);
	c->updated_at = sqlite3_column_int64(s, 6);
	if (rc == 0)
		rc = col_json(s, 7, &c->tools, "a chat's tools", run_id, err);
	if (rc == 0 && c->tools && !json_is_array(c->tools)) {
		set_err(err, "state database: run '%s': the tools of chat '%s' are not a list",
			run_id, c->chat_id);
		rc = -EIO;
	}
	return rc;
}

int store_chats(struct store *st, const char *run_id, struct chat_row **rows,
		size_t *n, char **err)
{
	*rows = NULL;
	*n = 0;
	if (empty(run_id))
		return no_run("", err);
	struct chat_row *v = NULL;
	size_t len = 0, cap = 0;
	lock(st);
	int rc = exists_locked(st, run_id, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st,
			"SELECT chat_id, parent_chat, skill, state, result, "
			"created_at, updated_at, tools FROM chats WHERE run_id = ?1 "
			"ORDER BY created_at, rowid", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		int step;
		while ((step = sqlite3_step(s)) == SQLITE_ROW) {
			struct chat_row *p = grow(v, &cap, len, sizeof *p, 4);
			if (!p) {
				rc = oom(err);
				break;
			}
			v = p;
			memset(&v[len], 0, sizeof v[len]);
			rc = read_chat(s, &v[len], run_id, err);
			len++;
			if (rc)
				break;
		}
		if (rc == 0 && step != SQLITE_DONE)
			rc = db_fail(st, err, "reading chats");
		release(st, s);
	}
	unlock(st);
	if (rc) {
		chat_rows_free(v, len);
		return rc;
	}
	*rows = v;
	*n = len;
	return 0;
}

void chat_rows_free(struct chat_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++) {
		free(rows[i].chat_id);
		free(rows[i].parent_chat);
		free(rows[i].skill);
		free(rows[i].result);
		json_decref(rows[i].tools);
	}
	free(rows);
}

/* ---- events -------------------------------------------------------------- */

int store_event_append(struct store *st, const char *run_id, const char *type,
		       const json_t *data, int64_t *seq, char **err)
{
	if (empty(run_id))
		return no_run("", err);
	if (empty(type)) {
		set_err(err, "run '%s': an event needs a type", run_id);
		return -EINVAL;
	}
	int rc = 0;
	char *text = data ? dump(data, &rc, err) : strdup("{}");
	if (!text)
		return rc ? rc : oom(err);
	lock(st);
	int64_t now = now_ns();
	rc = begin(st, err);
	if (rc == 0)
		rc = touch_locked(st, run_id, now, err);
	if (rc == 0)
		rc = event_insert_locked(st, run_id, type, text, now, seq, err);
	rc = finish(st, rc, err);
	unlock(st);
	free(text);
	return rc;
}

/* ---- started steps -------------------------------------------------- */

int store_step_start(struct store *st, const char *run_id, const char *chat_id,
		     int64_t msg_seq, int call, const char *what, char **err)
{
	if (empty(run_id))
		return no_run("", err);
	if (empty(chat_id) || empty(what) || msg_seq < 0 || call < STORE_STEP_MODEL) {
		set_err(err, "run '%s': a started step needs a chat, a message, a call and a name",
			run_id);
		return -EINVAL;
	}
	lock(st);
	int64_t now = now_ns();
	int rc = begin(st, err);
	if (rc == 0)
		rc = touch_locked(st, run_id, now, err);
	sqlite3_stmt *s = NULL;
	if (rc == 0)
		rc = prepare(st, "INSERT OR REPLACE INTO step_starts (run_id, chat_id, msg_seq, "
				 "call, what, ts) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, msg_seq);
		sqlite3_bind_int(s, 4, call);
		sqlite3_bind_text(s, 5, what, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, now);
		rc = step_done(st, s, "recording a started step", err);
	}
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

int store_step_started(struct store *st, const char *run_id, const char *chat_id,
		       int64_t msg_seq, int call, bool *started, char **err)
{
	*started = false;
	if (empty(run_id))
		return no_run("", err);
	if (empty(chat_id))
		return 0;
	lock(st);
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT 1 FROM step_starts WHERE run_id = ?1 AND chat_id = ?2 "
			     "AND msg_seq = ?3 AND call = ?4", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, chat_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, msg_seq);
		sqlite3_bind_int(s, 4, call);
		int step = sqlite3_step(s);
		if (step == SQLITE_ROW)
			*started = true;
		else if (step != SQLITE_DONE)
			rc = db_fail(st, err, "reading the started steps");
		release(st, s);
	}
	unlock(st);
	return rc;
}

/* ISO 8601 UTC with milliseconds. */
static void format_ts(int64_t ns, char out[32])
{
	if (ns < 0)
		ns = 0;
	time_t secs = (time_t)(ns / 1000000000);
	int ms = (int)((ns % 1000000000) / 1000000);
	struct tm tm;
	char date[24] = "1970-01-01T00:00:00";
	if (gmtime_r(&secs, &tm))
		strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 32, "%s.%03dZ", date, ms);
}

/* One events row as a JSON line appended to out. */
static int event_line(sqlite3_stmt *s, const char *run_id, struct buf *out,
		      char **err)
{
	char ts[32];
	format_ts(sqlite3_column_int64(s, 1), ts);
	const char *type = (const char *)sqlite3_column_text(s, 2);
	json_t *data = NULL;
	int rc = col_json(s, 3, &data, "an event", run_id, err);
	if (rc)
		return rc;
	json_t *o = json_pack("{s:I, s:s, s:s}", "seq",
			      (json_int_t)sqlite3_column_int64(s, 0), "ts", ts,
			      "type", type ? type : "");
	if (!o) {
		rc = oom(err);
	} else if (json_is_object(data)) {
		if (json_object_update_missing(o, data) < 0)
			rc = oom(err);
	} else if (data && !json_is_null(data)) {
		if (json_object_set(o, "data", data) < 0)
			rc = oom(err);
	}
	char *line = rc == 0 ? dump(o, &rc, err) : NULL;
	if (line && (buf_puts(out, line) < 0 || buf_puts(out, "\n") < 0))
		rc = oom(err);
	free(line);
	json_decref(o);
	json_decref(data);
	return rc;
}

int store_events_text(struct store *st, const char *run_id, struct buf *out,
		      char **err)
{
	if (empty(run_id))
		return no_run("", err);
	struct buf b = {0};
	lock(st);
	int rc = exists_locked(st, run_id, err);
	sqlite3_stmt *s;
	if (rc == 0)
		rc = prepare(st, "SELECT seq, ts, type, json FROM events "
			     "WHERE run_id = ?1 ORDER BY seq", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
		int step;
		while ((step = sqlite3_step(s)) == SQLITE_ROW)
			if ((rc = event_line(s, run_id, &b, err)) != 0)
				break;
		if (rc == 0 && step != SQLITE_DONE)
			rc = db_fail(st, err, "reading events");
		release(st, s);
	}
	unlock(st);
	if (rc == 0 && b.len && buf_append(out, b.data, b.len) < 0)
		rc = oom(err);
	buf_free(&b);
	return rc;
}

/* ---- the audit trail and what it remembers (issue 19) ----------------- */

/* The byte just past the last line written (0 for none), lock held. */
static int audit_end_locked(struct store *st, int64_t *end, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT pos + length(CAST(line AS BLOB)) FROM audit "
			 "ORDER BY seq DESC LIMIT 1", &s, err);
	if (rc)
		return rc;
	int step = sqlite3_step(s);
	*end = step == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		rc = db_fail(st, err, "reading the audit trail");
	release(st, s);
	return rc;
}

/* Keeps the newest keep rows of the trail, lock held. */
static int audit_trim_locked(struct store *st, int64_t keep, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "DELETE FROM audit WHERE seq <= "
			 "(SELECT COALESCE(MAX(seq), 0) FROM audit) - ?1", &s, err);
	if (rc == 0) {
		sqlite3_bind_int64(s, 1, keep);
		rc = step_done(st, s, "trimming the audit trail", err);
	}
	return rc;
}

/* Adds one event (an object) as the next line of the trail, lock held. */
static int audit_insert_locked(struct store *st, const json_t *event, int64_t now,
			       int64_t *end, char **err)
{
	char ts[32];
	int64_t seq = 0;
	format_ts(now, ts);
	int rc = next_seq_locked(st, "SELECT COALESCE(MAX(seq), 0) + 1 FROM audit", NULL, NULL,
				 &seq, err);
	json_t *o = rc == 0 ? json_pack("{s:I, s:s}", "seq", (json_int_t)seq, "ts", ts) : NULL;
	if (rc == 0 && (!o || json_object_update_missing(o, (json_t *)event) < 0))
		rc = oom(err);
	char *text = rc == 0 ? dump(o, &rc, err) : NULL;
	json_decref(o);
	char *line = NULL;
	if (text && asprintf(&line, "%s\n", text) < 0)
		rc = oom(err);
	free(text);
	sqlite3_stmt *s;
	if (rc == 0 && (rc = prepare(st, "INSERT INTO audit (seq, ts, pos, line) "
				     "VALUES (?1, ?2, ?3, ?4)", &s, err)) == 0) {
		sqlite3_bind_int64(s, 1, seq);
		sqlite3_bind_int64(s, 2, now);
		sqlite3_bind_int64(s, 3, *end);
		sqlite3_bind_text(s, 4, line, -1, SQLITE_STATIC);
		rc = step_done(st, s, "adding to the audit trail", err);
	}
	if (rc == 0)
		*end += (int64_t)strlen(line);
	free(line);
	return rc;
}

/* Sets (or, for a null state, deletes) one key of audit_state, lock held. */
static int audit_state_put_locked(struct store *st, const char *key, const json_t *state,
				  char **err)
{
	int rc = 0;
	char *text = json_is_null(state) ? NULL : dump(state, &rc, err);
	if (rc)
		return rc;
	sqlite3_stmt *s;
	rc = prepare(st, text ? "INSERT OR REPLACE INTO audit_state (key, json) VALUES (?1, ?2)"
			      : "DELETE FROM audit_state WHERE key = ?1", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
		if (text)
			sqlite3_bind_text(s, 2, text, -1, SQLITE_STATIC);
		rc = step_done(st, s, "recording the catalogue's state", err);
	}
	free(text);
	return rc;
}

int store_audit_record(struct store *st, const json_t *events, const json_t *states,
		       int64_t keep, char **err)
{
	if ((events && !json_is_array(events)) || (states && !json_is_object(states)) || keep < 1) {
		set_err(err, "audit: events must be a list and states an object");
		return -EINVAL;
	}
	lock(st);
	int64_t now = now_ns(), end = 0;
	int rc = begin(st, err);
	if (rc == 0)
		rc = audit_end_locked(st, &end, err);
	size_t i;
	const json_t *v;
	json_array_foreach(events, i, v) {
		if (rc != 0)
			break;
		rc = json_is_object(v) ? audit_insert_locked(st, v, now, &end, err) : -EINVAL;
	}
	const char *key;
	json_object_foreach((json_t *)states, key, v) {
		if (rc != 0)
			break;
		rc = audit_state_put_locked(st, key, v, err);
	}
	/* Past twice the cap, back to the cap: the file shrinks from its
	 * start seldom, so `tail -f` follows it. */
	int64_t rows = 0;
	if (rc == 0)
		rc = next_seq_locked(st, "SELECT COALESCE((SELECT MAX(seq) FROM audit) - "
				     "(SELECT MIN(seq) FROM audit) + 1, 0)", NULL, NULL, &rows, err);
	/* (the seqs kept are contiguous: trimming takes the oldest) */
	if (rc == 0 && rows > 2 * keep)
		rc = audit_trim_locked(st, keep, err);
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

int store_audit_trim(struct store *st, int64_t keep, char **err)
{
	if (keep < 1)
		return -EINVAL;
	lock(st);
	int rc = begin(st, err);
	if (rc == 0)
		rc = audit_trim_locked(st, keep, err);
	rc = finish(st, rc, err);
	unlock(st);
	return rc;
}

/* The pos of the trail's first line kept (0 for none), lock held. */
static int audit_start_locked(struct store *st, int64_t *start, char **err)
{
	sqlite3_stmt *s;
	int rc = prepare(st, "SELECT pos FROM audit ORDER BY seq LIMIT 1", &s, err);
	if (rc)
		return rc;
	int step = sqlite3_step(s);
	*start = step == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		rc = db_fail(st, err, "reading the audit trail");
	release(st, s);
	return rc;
}

int store_audit_size(struct store *st, uint64_t *size, char **err)
{
	lock(st);
	int64_t start = 0, end = 0;
	int rc = audit_start_locked(st, &start, err);
	if (rc == 0)
		rc = audit_end_locked(st, &end, err);
	unlock(st);
	*size = rc == 0 && end > start ? (uint64_t)(end - start) : 0;
	return rc;
}

int store_audit_read(struct store *st, uint64_t off, size_t size, struct buf *out, char **err)
{
	lock(st);
	int64_t start = 0;
	int rc = audit_start_locked(st, &start, err);
	sqlite3_stmt *s;
	int64_t from = start + (int64_t)off, to = from + (int64_t)size;
	if (rc == 0)
		rc = prepare(st, "SELECT pos, line FROM audit WHERE pos >= "
			     "(SELECT COALESCE(MAX(pos), 0) FROM audit WHERE pos <= ?1) "
			     "ORDER BY pos", &s, err);
	if (rc == 0) {
		sqlite3_bind_int64(s, 1, from);
		int step;
		while ((step = sqlite3_step(s)) == SQLITE_ROW) {
			int64_t pos = sqlite3_column_int64(s, 0);
			const char *line = (const char *)sqlite3_column_text(s, 1);
			int64_t len = sqlite3_column_bytes(s, 1);
			if (pos >= to)
				break;
			int64_t a = from > pos ? from - pos : 0;
			int64_t b = to < pos + len ? to - pos : len;
			if (line && b > a && buf_append(out, line + a, (size_t)(b - a)) < 0) {
				rc = oom(err);
				break;
			}
		}
		if (rc == 0 && step != SQLITE_ROW && step != SQLITE_DONE)
			rc = db_fail(st, err, "reading the audit trail");
		release(st, s);
	}
	unlock(st);
	return rc;
}

int store_audit_state(struct store *st, json_t **out, char **err)
{
	return store_audit_state_range(st, NULL, NULL, 0, out, err);
}

int store_audit_state_range(struct store *st, const char *from, const char *to, size_t limit,
			    json_t **out, char **err)
{
	*out = json_object();
	if (!*out)
		return oom(err);
	lock(st);
	sqlite3_stmt *s;
	/* (the table is WITHOUT ROWID: its rows are in key order) */
	int rc = prepare(st, to ? "SELECT key, json FROM audit_state WHERE key >= ?1 AND "
				  "key <= ?2 ORDER BY key LIMIT ?3"
				: "SELECT key, json FROM audit_state WHERE key >= ?1 "
				  "ORDER BY key LIMIT ?3", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, from ? from : "", -1, SQLITE_STATIC);
		if (to)
			sqlite3_bind_text(s, 2, to, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, limit ? (sqlite3_int64)limit : -1);
		int step;
		while ((step = sqlite3_step(s)) == SQLITE_ROW) {
			const char *key = (const char *)sqlite3_column_text(s, 0);
			json_t *v = NULL;
			rc = col_json(s, 1, &v, "the audit state", key ? key : "?", err);
			if (rc == 0 && (!key || !v || json_object_set_new(*out, key, v) < 0))
				rc = -EIO;
			if (rc)
				break;
		}
		if (rc == 0 && step != SQLITE_DONE)
			rc = db_fail(st, err, "reading the audit state");
		release(st, s);
	}
	unlock(st);
	if (rc) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

int store_pin_match(struct store *st, const char *source, const char *digest,
		    struct strlist *lines, char **err)
{
	lock(st);
	sqlite3_stmt *s;
	int found = 0;
	int rc = prepare(st, "SELECT lines FROM pin_matches WHERE source = ?1 AND digest = ?2",
			 &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, source, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, digest, -1, SQLITE_STATIC);
		int step = sqlite3_step(s);
		json_t *a = NULL;
		if (step == SQLITE_ROW) {
			rc = col_json(s, 0, &a, "a pinned source's files", source, err);
			size_t i;
			json_t *v;
			json_array_foreach(a, i, v) {
				if (rc == 0 && strlist_add(lines, json_string_value(v) ?: "") < 0)
					rc = oom(err);
			}
			found = rc == 0;
		} else if (step != SQLITE_DONE) {
			rc = db_fail(st, err, "reading a pinned source's files");
		}
		json_decref(a);
		release(st, s);
	}
	unlock(st);
	return rc ? rc : found;
}

int store_pin_match_put(struct store *st, const char *source, const char *digest,
			const struct strlist *lines, char **err)
{
	json_t *a = strlist_to_json(lines);
	int rc = a ? 0 : oom(err);
	char *text = rc == 0 ? dump(a, &rc, err) : NULL;
	json_decref(a);
	if (rc)
		return rc;
	lock(st);
	sqlite3_stmt *s;
	rc = prepare(st, "INSERT OR REPLACE INTO pin_matches (source, digest, lines, ts) "
		     "VALUES (?1, ?2, ?3, ?4)", &s, err);
	if (rc == 0) {
		sqlite3_bind_text(s, 1, source, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, digest, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, now_ns());
		rc = step_done(st, s, "recording a pinned source's files", err);
	}
	unlock(st);
	free(text);
	return rc;
}
