/* Unit tests for core/runs: who a run belongs to, what its files show of
 * it, and which ids name a run (DESIGN.md section 6; issue "Confinement").
 * The engine is opened without its watcher; the run manager with its
 * workers, over a state database in a temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "engine.h"
#include "filecache.h"
#include "runs.h"
#include "store.h"
#include "strlist.h"
#include "view.h"

#include "testutil.h"

struct fixture {
	char *root;
	char *skills;
	char *db;
	struct engine *e;
};

static void start_runs(struct fixture *f)
{
	char *err = NULL;
	if (runs_attach(f->e, f->db, &err) < 0)
		fail_msg("runs_attach: %s", err ? err : "?");
	assert_non_null(engine_runs(f->e));
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->root = test_tmpdir("runstest");
	f->skills = test_join(f->root, "skills");
	assert_int_equal(mkdir(f->skills, 0755), 0);
	char *dir = test_join(f->skills, "alpha");
	assert_int_equal(mkdir(dir, 0755), 0);
	char *md = test_join(dir, "SKILL.md");
	test_write_text(md, "---\nname: alpha\ndescription: a skill\n---\nBody.\n");
	free(md);
	free(dir);
	f->db = test_join(f->root, "state/state.db");
	struct engine_options opt = { 0 };
	const char *dirs[1] = { f->skills };
	opt.dirs = dirs;
	opt.ndirs = 1;
	char *err = NULL;
	f->e = engine_open(&opt, &err);
	if (!f->e)
		fail_msg("engine_open: %s", err ? err : "?");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	runs_detach(f->e);
	engine_close(f->e);
	free(f->skills);
	free(f->db);
	test_rm_tree(f->root);
	free(f);
	return 0;
}

/* A string of n copies of c followed by tail. */
static char *repeat(char c, size_t n, const char *tail)
{
	char *s = malloc(n + strlen(tail) + 1);
	assert_non_null(s);
	memset(s, c, n);
	strcpy(s + n, tail);
	return s;
}

static int attr_rc(struct engine *e, const char *path, struct view_attr *a)
{
	struct snapshot *s = engine_snapshot(e);
	int rc = view_getattr(s, path, a);
	snapshot_unref(s);
	return rc;
}

static int attr_rc_f(struct engine *e, struct view_attr *a, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int attr_rc_f(struct engine *e, struct view_attr *a, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof path, fmt, ap);
	va_end(ap);
	return attr_rc(e, path, a);
}

/* A workspace left under an id (a removal that could not take all of it)
 * is never handed to a new run of that id. */
static void test_sec7_new_run_never_inherits_a_workspace(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	char *ws = test_join(f->root, "state/workspaces/stale");
	assert_int_equal(mkdir(ws, 0700), 0);
	char *file = test_join(ws, "secret");
	test_write_text(file, "of an earlier run\n");
	assert_int_equal(runs_create(r, "stale", getuid(), getgid()), -EEXIST);
	struct view_attr a;
	assert_int_equal(attr_rc(f->e, "runs/stale", &a), -ENOENT);
	assert_int_equal(runs_create(r, "fresh", getuid(), getgid()), 0);
	free(file);
	free(ws);
}

/* Section 6: an id is 1-64 characters. One longer is no run at all, not
 * the run of its first 64 characters (it was cut to fit a buffer). */
static void test_sec6_overlong_id_names_no_run(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	char *id64 = repeat('a', RUN_ID_MAX, "");
	char *id65 = repeat('a', RUN_ID_MAX, "b");
	char *id100 = repeat('a', 100, "");
	assert_int_equal(runs_create(r, id64, getuid(), getgid()), 0);
	struct view_attr a;
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s", id64), 0);
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s/status", id64), 0);

	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s", id65), -ENOENT);
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s/status", id65), -ENOENT);
	assert_int_equal(attr_rc_f(f->e, &a, "runs/%s/prompt", id100), -ENOENT);
	struct snapshot *s = engine_snapshot(f->e);
	struct view_dirent *ents = NULL;
	size_t n = 0;
	char path[256];
	snprintf(path, sizeof path, "runs/%s", id65);
	assert_int_equal(view_readdir(s, path, &ents, &n), -ENOENT);
	char *data = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "runs/%s/status", id65);
	assert_int_equal(view_read_all(s, path, &data, &len), -ENOENT);
	snapshot_unref(s);
	char id[RUN_ID_MAX + 1];
	assert_false(view_run_of(path, id, sizeof id));

	/* Every entry point of the run manager: no such run. */
	assert_false(runs_exists(r, id65));
	struct run_file rf;
	assert_int_equal(runs_stat_file(r, id65, "", &rf), -ENOENT);
	assert_int_equal(runs_stat_file(r, id65, "prompt", &rf), -ENOENT);
	struct strlist names = { 0 };
	assert_int_equal(runs_readdir(r, id65, "", &names), -ENOENT);
	assert_int_equal(runs_write(r, id65, "prompt", "x", 1, 0), -ENOENT);
	assert_int_equal(runs_write(r, id65, "ctl", "cancel\n", 7, 0), -ENOENT);
	assert_int_equal(runs_writable(r, id65, "prompt"), -ENOENT);
	assert_int_equal(runs_truncate(r, id65, "prompt", 0), -ENOENT);
	enum runstate st;
	assert_int_equal(runs_state(r, id65, &st), -ENOENT);
	struct timespec ts;
	assert_int_equal(runs_changed_at(r, id65, &ts), -ENOENT);
	char status[64];
	uint64_t handle = 0;
	assert_int_equal(runs_wait(r, id65, NULL, NULL, status, sizeof status, &handle), -ENOENT);
	assert_int_equal(runs_access(r, id65, getuid()), -ENOENT);
	assert_int_equal(runs_remove(r, id65, getuid()), -ENOENT);
	/* mkdir: within NAME_MAX, so EINVAL (not ENAMETOOLONG). */
	assert_int_equal(runs_create(r, id65, getuid(), getgid()), -EINVAL);
	assert_int_equal(runs_create(r, "bad:id", getuid(), getgid()), -EINVAL);
	/* The names of runs/' own files are no run's: a run "ERROR" would be
	 * hidden by runs/ERROR once the database is gone. */
	assert_int_equal(runs_create(r, "ERROR", getuid(), getgid()), -EINVAL);
	assert_int_equal(runs_create(r, "new", getuid(), getgid()), -EINVAL);
	assert_true(runs_exists(r, id64));
	assert_int_equal(runs_list(r, &names), 0);
	assert_int_equal(names.n, 1);
	assert_string_equal(names.items[0], id64);
	strlist_free(&names);
	assert_int_equal(runs_remove(r, id64, getuid()), 0);
	free(id64);
	free(id65);
	free(id100);
}

/* A run is its maker's: the uid and gid of its mkdir, on its directory and
 * on every file in it; the modes stay as they were while the mount is the
 * mounting user's alone. */
static void test_owner_is_reported_without_allow_other(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	assert_int_equal(runs_create(r, "r1", 65534, 65533), 0);
	struct view_attr a;
	assert_int_equal(attr_rc(f->e, "runs", &a), 0);
	assert_int_equal(a.perm, 0755);
	assert_false(a.owned);
	assert_int_equal(attr_rc(f->e, "runs/new", &a), 0);
	assert_false(a.owned);
	const struct {
		const char *path;
		mode_t perm;
	} want[] = {
		{ "runs/r1", 0555 }, { "runs/r1/prompt", 0644 }, { "runs/r1/ctl", 0644 },
		{ "runs/r1/status", 0444 }, { "runs/r1/wait", 0444 }, { "runs/r1/input", 0444 },
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		assert_int_equal(attr_rc(f->e, want[i].path, &a), 0);
		assert_true(a.owned);
		assert_int_equal(a.uid, 65534);
		assert_int_equal(a.gid, 65533);
		assert_int_equal(a.perm, want[i].perm);
	}
	/* Anyone who reaches the mount (only its user) may use the run. */
	assert_int_equal(runs_access(r, "r1", 65532), 0);
	assert_int_equal(runs_remove(r, "r1", 65532), 0);
}

/* With allow_other, runs/ takes anyone's mkdir (01777), a run is 0700 and
 * its files 0600 or 0400, and no one but its owner and root gets in or
 * removes it. */
static void test_allow_other_makes_runs_private(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	runs_set_allow_other(r, true);
	assert_int_equal(runs_dir_perm(r), 01777);
	assert_int_equal(runs_create(r, "mine", 65534, 65534), 0);
	struct view_attr a;
	assert_int_equal(attr_rc(f->e, "runs", &a), 0);
	assert_int_equal(a.perm, 01777);
	assert_int_equal(attr_rc(f->e, "runs/new", &a), 0);
	assert_int_equal(a.perm, 0444); /* everyone may read a fresh id */
	const struct {
		const char *path;
		mode_t perm;
	} want[] = {
		{ "runs/mine", 0700 }, { "runs/mine/prompt", 0600 }, { "runs/mine/config", 0600 },
		{ "runs/mine/skills", 0600 }, { "runs/mine/ctl", 0600 },
		{ "runs/mine/status", 0400 }, { "runs/mine/wait", 0400 },
		{ "runs/mine/input", 0400 }, { "runs/mine/transcript", 0400 },
		{ "runs/mine/info.json", 0400 },
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		assert_int_equal(attr_rc(f->e, want[i].path, &a), 0);
		assert_true(a.owned);
		assert_int_equal(a.uid, 65534);
		assert_int_equal(a.gid, 65534);
		assert_int_equal(a.perm, want[i].perm);
	}
	assert_int_equal(runs_access(r, "mine", 65534), 0);
	assert_int_equal(runs_access(r, "mine", 0), 0);
	assert_int_equal(runs_access(r, "mine", 65533), -EACCES);
	assert_int_equal(runs_access(r, "mine", 1000), -EACCES);
	assert_int_equal(runs_remove(r, "mine", 65533), -EPERM);
	assert_true(runs_exists(r, "mine"));
	/* Started: the prompt is read-only now, 0400. */
	assert_int_equal(runs_write(r, "mine", "prompt", "hi", 2, 0), 2);
	uint64_t t = runs_open_writer(r, "mine", "prompt");
	assert_int_equal(runs_close_writer(r, "mine", "prompt", t, true), 0);
	assert_int_equal(attr_rc(f->e, "runs/mine/prompt", &a), 0);
	assert_int_equal(a.perm, 0400);
	char status[64];
	uint64_t handle = 0;
	for (int i = 0; i < 500; i++) {
		enum runstate st;
		assert_int_equal(runs_state(r, "mine", &st), 0);
		if (runstate_is_terminal(st))
			break;
		usleep(10000);
	}
	assert_int_equal(runs_wait(r, "mine", NULL, NULL, status, sizeof status, &handle), 0);
	assert_string_equal(status, "completed");
	assert_int_equal(runs_remove(r, "mine", 65533), -EPERM);
	assert_int_equal(runs_remove(r, "mine", 65534), 0);
	/* Root may remove anyone's. */
	assert_int_equal(runs_create(r, "theirs", 65533, 65533), 0);
	assert_int_equal(runs_remove(r, "theirs", 0), 0);
}

/* The owner is stored with the run; a run made before owners were kept
 * (no owner recorded) is the daemon's user's. */
static void test_owner_survives_a_remount_and_old_runs_are_the_daemons(void **state)
{
	struct fixture *f = *state;
	char *dir = test_join(f->root, "state");
	assert_int_equal(mkdir(dir, 0700), 0);
	free(dir);
	char *err = NULL;
	struct store *st = store_open(f->db, &err);
	assert_non_null(st);
	assert_int_equal(store_run_create(st, "legacy", NULL), 0);
	store_close(st);

	start_runs(f);
	struct runs *r = engine_runs(f->e);
	runs_set_allow_other(r, true);
	assert_int_equal(runs_create(r, "kept", 65534, 65533), 0);
	struct view_attr a;
	assert_int_equal(attr_rc(f->e, "runs/legacy", &a), 0);
	assert_int_equal(a.uid, getuid());
	assert_int_equal(a.gid, getgid());
	assert_int_equal(a.perm, 0700);
	runs_detach(f->e);

	start_runs(f);
	r = engine_runs(f->e);
	runs_set_allow_other(r, true);
	assert_int_equal(attr_rc(f->e, "runs/kept/prompt", &a), 0);
	assert_int_equal(a.uid, 65534);
	assert_int_equal(a.gid, 65533);
	assert_int_equal(a.perm, 0600);
	assert_int_equal(runs_access(r, "kept", 65533), -EACCES);
	assert_int_equal(runs_access(r, "legacy", getuid()), 0);
}

/* A fixture whose engine reads a config file with runs.workdir_roots:
 * [projects] (relative to the config's directory). */
static int setup_roots(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->root = test_tmpdir("runstest");
	f->skills = test_join(f->root, "skills");
	assert_int_equal(mkdir(f->skills, 0755), 0);
	char *p = test_join(f->root, "projects");
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
	char *cfg = test_join(f->root, "config.yaml");
	test_write_text(cfg, "sources: [{path: skills}]\n"
			     "runs: {workdir_roots: [projects]}\n"
			     "configurations: {default: {skills: []}}\n");
	f->db = test_join(f->root, "state/state.db");
	struct engine_options opt = { .config_path = cfg };
	char *err = NULL;
	f->e = engine_open(&opt, &err);
	if (!f->e)
		fail_msg("engine_open: %s", err ? err : "?");
	free(cfg);
	*state = f;
	return 0;
}

/* The bytes of runs/<id>/<name>, as a new string. */
static char *run_text(struct runs *r, const char *id, const char *name)
{
	struct run_file rf;
	assert_int_equal(runs_stat_file(r, id, name, &rf), 0);
	char *t = rf.bytes ? strndup(rf.bytes->data, rf.bytes->len)
			   : strndup(rf.data.data ? rf.data.data : "", rf.data.len);
	assert_non_null(t);
	buf_free(&rf.data);
	file_bytes_unref(rf.bytes);
	return t;
}

static ssize_t write_str(struct runs *r, const char *id, const char *name, const char *text)
{
	return runs_write(r, id, name, text, strlen(text), 0);
}

/* The run's events hold a workdir refusal whose reason contains want. */
static void assert_refused_because(struct fixture *f, const char *id, const char *want)
{
	char *ev = run_text(engine_runs(f->e), id, "events");
	const char *at = strstr(ev, "\"workdir_refused\"");
	if (!at || !strstr(at, want))
		fail_msg("events lack a workdir refusal saying '%s': %s", want, ev);
	free(ev);
}

/* Issue "A project directory": with no runs.workdir_roots, any workdir
 * write is EINVAL, and the run's events say why. */
static void test_workdir_is_off_without_roots(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	assert_int_equal(runs_create(r, "w", getuid(), getgid()), 0);
	char *line = test_join(f->skills, "\n");
	assert_int_equal(write_str(r, "w", "workdir", line), -EINVAL);
	free(line);
	assert_refused_because(f, "w", "runs.workdir_roots is empty: workdir is off");
	char *t = run_text(r, "w", "workdir");
	assert_string_equal(t, "");
	free(t);
}

/* D9 for workdir: outside the roots, a file, a link leading out of them
 * and a missing directory are EINVAL at write, and leave the run as it
 * was; a directory under a root is taken resolved, shown in the file
 * and in info.json, and `: > workdir` takes it away. */
static void test_workdir_write_is_validated(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	assert_int_equal(runs_create(r, "w", getuid(), getgid()), 0);
	char *projects = test_join(f->root, "projects");
	char *app = test_join(projects, "app");
	assert_int_equal(mkdir(app, 0755), 0);
	char *outside = test_join(f->root, "outside");
	assert_int_equal(mkdir(outside, 0755), 0);
	char *file = test_join(projects, "notes.txt");
	test_write_text(file, "x\n");
	char *link = test_join(projects, "escape");
	assert_int_equal(symlink(outside, link), 0);
	char *missing = test_join(projects, "missing");
	char line[4096];
	const struct {
		const char *path, *why;
	} bad[] = {
		{ outside, "is not under runs.workdir_roots" },
		{ file, "is not a directory" },
		{ link, "which is not under runs.workdir_roots" },
		{ missing, "no such directory" },
		{ "projects/app", "must be an absolute path" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(line, sizeof line, "%s\n", bad[i].path);
		assert_int_equal(write_str(r, "w", "workdir", line), -EINVAL);
		assert_refused_because(f, "w", bad[i].why);
		char *t = run_text(r, "w", "workdir");
		assert_string_equal(t, "");
		free(t);
	}
	snprintf(line, sizeof line, "%s\n%s\n", app, app);
	assert_int_equal(write_str(r, "w", "workdir", line), -EINVAL);

	/* Accepted, resolved: written through a path with a detour. */
	snprintf(line, sizeof line, "%s/./app/../app/\n", projects);
	assert_int_equal(write_str(r, "w", "workdir", line), (ssize_t)strlen(line));
	snprintf(line, sizeof line, "%s\n", app);
	char *t = run_text(r, "w", "workdir");
	assert_string_equal(t, line);
	free(t);
	t = run_text(r, "w", "info.json");
	json_t *info = json_loads(t, 0, NULL);
	assert_non_null(info);
	assert_string_equal(json_string_value(json_object_get(info, "workdir")), app);
	json_decref(info);
	free(t);
	/* A refused write leaves the workdir as it was. */
	snprintf(line, sizeof line, "%s\n", outside);
	assert_int_equal(write_str(r, "w", "workdir", line), -EINVAL);
	t = run_text(r, "w", "workdir");
	snprintf(line, sizeof line, "%s\n", app);
	assert_string_equal(t, line);
	free(t);
	/* Cleared by truncation. */
	assert_int_equal(runs_truncate(r, "w", "workdir", 0), 0);
	t = run_text(r, "w", "workdir");
	assert_string_equal(t, "");
	free(t);
	t = run_text(r, "w", "info.json");
	assert_non_null(strstr(t, "\"workdir\": null"));
	free(t);
	assert_int_equal(runs_writable(r, "w", "workdir"), 0);
	free(missing);
	free(link);
	free(file);
	free(outside);
	free(app);
	free(projects);
}

/* A created run's workdir survives a remount (it is in the store). */
static void test_workdir_survives_a_remount(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	assert_int_equal(runs_create(r, "w", getuid(), getgid()), 0);
	char *projects = test_join(f->root, "projects");
	char line[4096];
	snprintf(line, sizeof line, "%s\n", projects);
	assert_int_equal(write_str(r, "w", "workdir", line), (ssize_t)strlen(line));
	runs_detach(f->e);
	start_runs(f);
	r = engine_runs(f->e);
	char *t = run_text(r, "w", "workdir");
	assert_string_equal(t, line);
	free(t);
	free(projects);
}

/* Issue 14: a message row that is not JSON makes the files that show it
 * read as EIO (it was ENOMEM), info.json too; status still reads. */
static void test_a_damaged_message_row_reads_as_eio(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	assert_int_equal(runs_create(r, "dmg", getuid(), getgid()), 0);
	assert_int_equal(runs_write(r, "dmg", "prompt", "hi", 2, 0), 2);
	uint64_t t = runs_open_writer(r, "dmg", "prompt");
	assert_int_equal(runs_close_writer(r, "dmg", "prompt", t, true), 0);
	enum runstate st = RUNSTATE_CREATED;
	for (int i = 0; i < 1000 && !runstate_is_terminal(st); i++) {
		assert_int_equal(runs_state(r, "dmg", &st), 0);
		usleep(10000);
	}
	assert_int_equal(st, RUNSTATE_COMPLETED);
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE messages SET json = '{not json' "
				      "WHERE run_id = 'dmg' AND role = 'user'", NULL, NULL, NULL),
			 SQLITE_OK);
	assert_true(sqlite3_changes(db) > 0);
	sqlite3_close(db);
	const char *names[] = { "messages.json", "transcript", "info.json" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		struct run_file rf;
		int rc = runs_stat_file(r, "dmg", names[i], &rf);
		if (rc == 0)
			buf_free(&rf.data);
		if (rc != -EIO)
			fail_msg("%s: %d, not -EIO", names[i], rc);
	}
	char *text = run_text(r, "dmg", "status");
	assert_string_equal(text, "completed\n");
	free(text);
}

/* runs/<id>/<sub> for a stat (runs_attr_file): its size, sized or not. */
static uint64_t attr_size(struct runs *r, const char *id, const char *sub, bool *sized)
{
	struct run_file rf;
	assert_int_equal(runs_attr_file(r, id, sub, &rf), 0);
	uint64_t n = rf.sized ? rf.size : rf.bytes ? rf.bytes->len : rf.data.len;
	*sized = rf.sized;
	if (rf.sized) {
		assert_null(rf.bytes);
		assert_int_equal(rf.data.len, 0);
	}
	buf_free(&rf.data);
	file_bytes_unref(rf.bytes);
	return n;
}

/* Adds message json to chat of run id from outside (as an older skillfs
 * would: no size kept, unless sized). */
static void add_message(sqlite3 *db, const char *id, const char *chat, int seq, const char *json,
			bool sized)
{
	sqlite3_stmt *s;
	assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO messages (run_id, chat_id, seq, role, "
					    "json, ts, rendered_bytes) VALUES (?1, ?2, ?3, 'tool', ?4, 1, ?5)",
					    -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, chat, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 3, seq);
	sqlite3_bind_text(s, 4, json, -1, SQLITE_STATIC);
	if (sized) {
		json_t *m = json_loads(json, 0, NULL);
		assert_non_null(m);
		sqlite3_bind_int64(s, 5, store_message_rendered_bytes(m));
		json_decref(m);
	} else {
		sqlite3_bind_null(s, 5);
	}
	assert_int_equal(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
}

/* Issue 14: a stat of messages.json (the main chat's, a sub-agent's) gets
 * its size from the sizes the store keeps, without rendering it, and it is
 * the size of the bytes read; a chat with messages from before schema 8 is
 * rendered for its size. */
static void test_messages_json_is_sized_without_rendering(void **state)
{
	struct fixture *f = *state;
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	assert_int_equal(runs_create(r, "sz", getuid(), getgid()), 0);
	assert_int_equal(runs_write(r, "sz", "prompt", "h\xc3\xa9llo \"x\"\n", 10, 0), 10);
	uint64_t t = runs_open_writer(r, "sz", "prompt");
	assert_int_equal(runs_close_writer(r, "sz", "prompt", t, true), 0);
	enum runstate st = RUNSTATE_CREATED;
	for (int i = 0; i < 1000 && !runstate_is_terminal(st); i++) {
		assert_int_equal(runs_state(r, "sz", &st), 0);
		usleep(10000);
	}
	assert_int_equal(st, RUNSTATE_COMPLETED);

	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"INSERT INTO chats (run_id, chat_id, parent_chat, skill, state, created_at, "
		" updated_at) VALUES ('sz', 'sub-new', 'main', 'alpha', 'completed', 1, 1), "
		" ('sz', 'sub-old', 'main', 'alpha', 'completed', 1, 1), "
		" ('sz', 'sub-none', 'main', 'alpha', 'completed', 1, 1)", NULL, NULL, NULL),
		SQLITE_OK);
	const char *m1 = "{\"role\":\"tool\",\"content\":\"a\\nb \\u00e9\",\"x\":{\"y\":[[],{}],\"z\":1.5}}";
	const char *m2 = "{\"role\":\"tool\",\"tool_calls\":[{\"id\":\"c\",\"function\":{\"arguments\":\"{}\"}}]}";
	add_message(db, "sz", "sub-new", 1, m1, true);
	add_message(db, "sz", "sub-new", 2, m2, true);
	add_message(db, "sz", "sub-old", 1, m1, true);
	add_message(db, "sz", "sub-old", 2, m2, false);
	sqlite3_close(db);

	static const char *const subs[] = { "messages.json", "subagents/sub-new/messages.json",
					    "subagents/sub-none/messages.json" };
	for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
		bool sized = false;
		uint64_t n = attr_size(r, "sz", subs[i], &sized);
		if (!sized)
			fail_msg("%s: a stat rendered it", subs[i]);
		char *text = run_text(r, "sz", subs[i]);
		assert_int_equal(n, strlen(text));
		free(text);
		/* rendered now: the next stat is answered from those bytes */
		assert_int_equal(attr_size(r, "sz", subs[i], &sized), n);
		assert_false(sized);
	}
	bool sized = true;
	uint64_t n = attr_size(r, "sz", "subagents/sub-old/messages.json", &sized);
	assert_false(sized);
	char *text = run_text(r, "sz", "subagents/sub-old/messages.json");
	assert_int_equal(n, strlen(text));
	free(text);

	/* through the view as a stat sees it */
	struct view_attr a;
	assert_int_equal(attr_rc(f->e, "runs/sz/messages.json", &a), 0);
	text = run_text(r, "sz", "messages.json");
	assert_int_equal(a.size, strlen(text));
	free(text);
	assert_int_equal(runs_attr_file(r, "nope", "messages.json", &(struct run_file){ 0 }), -ENOENT);
}

/* A run whose knowledge skill's SKILL.md changed on disk after the
 * snapshot was made (its text reads as stale until the watcher reloads
 * it) waits in the queue for the reload, then runs with the new text in
 * its system prompt; it neither fails nor starts with a prompt missing
 * that skill. */
static void test_run_waits_for_a_stale_knowledge_skill(void **state)
{
	struct fixture *f = *state;
	char *dir = test_join(f->skills, "know"), *md = test_join(dir, "SKILL.md");
	assert_int_equal(mkdir(dir, 0755), 0);
	test_write_text(md, "---\nname: know\ndescription: k\ncategory: knowledge\n---\n"
			"Old knowledge.\n");
	assert_int_equal(engine_reload(f->e, false, NULL), 0);
	start_runs(f);
	struct runs *r = engine_runs(f->e);
	test_write_text(md, "---\nname: know\ndescription: k\ncategory: knowledge\n---\n"
			"New knowledge, longer.\n");
	assert_int_equal(runs_create(r, "st", getuid(), getgid()), 0);
	assert_int_equal(write_str(r, "st", "prompt", "hi"), 2);
	uint64_t t = runs_open_writer(r, "st", "prompt");
	assert_int_equal(runs_close_writer(r, "st", "prompt", t, true), 0);
	usleep(300000);
	enum runstate st;
	assert_int_equal(runs_state(r, "st", &st), 0);
	assert_int_equal(st, RUNSTATE_QUEUED);
	assert_int_equal(engine_reload(f->e, false, NULL), 0); /* the watcher's */
	for (int i = 0; i < 500; i++) {
		assert_int_equal(runs_state(r, "st", &st), 0);
		if (runstate_is_terminal(st))
			break;
		usleep(10000);
	}
	assert_int_equal(st, RUNSTATE_COMPLETED);
	char *msgs = run_text(r, "st", "messages.json");
	assert_non_null(strstr(msgs, "New knowledge, longer."));
	assert_null(strstr(msgs, "Old knowledge."));
	free(msgs);
	free(md);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sec7_new_run_never_inherits_a_workspace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec6_overlong_id_names_no_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_is_reported_without_allow_other, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_allow_other_makes_runs_private, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_owner_survives_a_remount_and_old_runs_are_the_daemons, setup, teardown),
		cmocka_unit_test_setup_teardown(test_workdir_is_off_without_roots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_workdir_write_is_validated, setup_roots,
						teardown),
		cmocka_unit_test_setup_teardown(test_workdir_survives_a_remount, setup_roots,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_damaged_message_row_reads_as_eio, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_run_waits_for_a_stale_knowledge_skill, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_messages_json_is_sized_without_rendering, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
