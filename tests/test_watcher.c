/* Unit tests for core/watcher: what a mount watches, the report of a
 * watch limit too low for it, and directories the watch limit keeps
 * unwatched found changed by the rescan (watch.rescan_seconds), with a
 * host standing in for the engine and the watches capped (the kernel's
 * limit is the same refusal, ENOSPC). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "catalog.h"
#include "check.h"
#include "config.h"
#include "strlist.h"
#include "watcher.h"

#include "testutil.h"

static int setup(void **state)
{
	*state = test_tmpdir("watchertest");
	return 0;
}

static int teardown(void **state)
{
	test_rm_tree(*state);
	return 0;
}

static char *path_of(const char *root, const char *rel)
{
	return test_join(root, rel);
}

static void make_dir(const char *root, const char *rel)
{
	char *d = path_of(root, rel);
	assert_int_equal(mkdir(d, 0755), 0);
	free(d);
}

/* <root>/<rel>/SKILL.md naming the skill and describing it as desc. */
static void write_skill(const char *root, const char *rel, const char *name, const char *desc)
{
	char *md = NULL;
	assert_true(asprintf(&md, "%s/%s/SKILL.md", root, rel) > 0);
	char text[256];
	snprintf(text, sizeof text, "---\nname: %s\ndescription: %s\n---\nbody\n", name, desc);
	test_write_text(md, text);
	free(md);
}

/* The config of root/config.yaml holding text. */
static struct config *config_at(const char *root, const char *text)
{
	char *path = path_of(root, "config.yaml");
	struct config *c = NULL;
	char *err = NULL;
	assert_int_equal(config_parse(text, strlen(text), path, root, &c, &err), 0);
	assert_null(err);
	free(path);
	return c;
}

/* The directories from path up to the root, path and "/" included. */
static size_t dirs_up_to_root(const char *path)
{
	size_t n = 1;
	for (const char *p = path; *p; p++)
		n += *p == '/';
	return path[1] ? n : 1;
}

/* A mount watches the config file's directory and those above it, the
 * source, each directory in it (a skill or not; hidden ones skipped), and
 * every directory of every skill: each once. */
static void test_dirs_needed_counts_each_directory_once(void **state)
{
	const char *root = *state;
	make_dir(root, "skills");
	make_dir(root, "skills/a");
	write_skill(root, "skills/a", "a", "skill a");
	make_dir(root, "skills/a/sub");
	make_dir(root, "skills/a/sub/deeper");
	make_dir(root, "skills/b");
	write_skill(root, "skills/b", "b", "skill b");
	make_dir(root, "skills/notyet");
	make_dir(root, "skills/.hidden");
	struct config *c = config_at(root, "sources: [{path: skills}]\n");
	struct skill_limits lim = { 0 };
	struct catalog *cat = catalog_build(c, NULL, &lim, NULL);
	assert_non_null(cat);
	assert_int_equal(cat->n, 2);
	/* root and above (the config's directory, the source's parents),
	 * skills, a, b, notyet, a/sub, a/sub/deeper */
	assert_int_equal(watcher_dirs_needed(c, cat, 64), dirs_up_to_root(root) + 6);
	/* deeper than max_depth below a skill's directory: not followed */
	assert_int_equal(watcher_dirs_needed(c, cat, 1), dirs_up_to_root(root) + 5);
	catalog_free(cat);
	config_free(c);
}

/* skillfs check says when a mount needs more watches than are left, with
 * the numbers, the rescan interval and the sysctl to raise; and nothing
 * when they suffice. */
static void test_check_reports_a_watch_limit_too_low(void **state)
{
	const char *root = *state;
	make_dir(root, "skills");
	struct config *c = config_at(root, "sources: [{path: skills}]\nwatch: {rescan_seconds: 7}\n");
	struct check_watch w = { .needed = 10, .limit = 8, .sysctl = "fs.inotify.max_user_watches",
				 .in_use = 2 };
	struct check_options opts = { .watch = &w };
	struct buf out = { 0 };
	assert_true(check_report_opts(c, NULL, NULL, &opts, &out) >= 0);
	assert_non_null(out.data);
	assert_non_null(strstr(out.data, "catalog: warning: the inotify watch limit is too low for "
					 "these skills: a mount watches 10 directories and 6 "
					 "watches are left (fs.inotify.max_user_watches is 8, 2 "
					 "in use); changes in the others are found by a rescan "
					 "every 7 s (watch.rescan_seconds) instead of at once; raise "
					 "the sysctl fs.inotify.max_user_watches\n"));
	buf_free(&out);
	/* in use unknown: compared with the limit */
	w.in_use = -1;
	w.needed = 9;
	assert_true(check_report_opts(c, NULL, NULL, &opts, &out) >= 0);
	assert_non_null(strstr(out.data, "a mount watches 9 directories and "
					 "fs.inotify.max_user_watches is 8;"));
	buf_free(&out);
	/* enough: no line */
	w.needed = 8;
	assert_true(check_report_opts(c, NULL, NULL, &opts, &out) >= 0);
	assert_null(strstr(out.data, "inotify"));
	buf_free(&out);
	config_free(c);
}

/* ---- a watcher over a host standing in for the engine ---- */

#define MAX_CATALOGS 256

struct fake {
	pthread_mutex_t lock;
	struct config *c;
	struct catalog *cur;
	struct catalog *all[MAX_CATALOGS]; /* kept until the end: views hold them */
	size_t nall;
	int reloads;
	int complete_with_dir; /* reloads with complete and dirty naming dir */
	int checks;            /* reloads that looked at every skill's files */
	const char *dir;
	struct watcher *wr;
	bool warned;  /* the watcher's warning when the catalogue was last made */
};

static void fake_hold(void *ctx, struct watcher_view *v)
{
	struct fake *f = ctx;
	pthread_mutex_lock(&f->lock);
	*v = (struct watcher_view){ f->c, f->cur, NULL };
	pthread_mutex_unlock(&f->lock);
}

static void fake_release(void *ctx, struct watcher_view *v)
{
	(void)ctx;
	(void)v;
}

static void fake_config_paths(void *ctx, char **given, char **real)
{
	(void)ctx;
	*given = *real = NULL;
}

static bool fake_config_changed(void *ctx)
{
	(void)ctx;
	return false;
}

static int fake_reload(void *ctx, bool config_changed, const struct strlist *dirty,
		       enum watcher_reload how)
{
	bool complete = how == WATCHER_RELOAD_COMPLETE;
	struct fake *f = ctx;
	(void)config_changed;
	struct skill_limits lim = { 0 };
	pthread_mutex_lock(&f->lock);
	struct catalog *cat = how == WATCHER_RELOAD_CHECK
				      ? catalog_build_checked(f->c, f->cur, &lim, NULL)
				      : catalog_build(f->c, f->cur, &lim, dirty);
	assert_non_null(cat);
	f->checks += how == WATCHER_RELOAD_CHECK;
	assert_true(f->nall < MAX_CATALOGS);
	f->all[f->nall++] = cat;
	f->cur = cat;
	f->reloads++;
	if (complete && dirty && strlist_has(dirty, f->dir))
		f->complete_with_dir++;
	struct watcher *wr = __atomic_load_n(&f->wr, __ATOMIC_ACQUIRE);
	char *w = wr ? watcher_warning(wr) : NULL;
	f->warned = w != NULL;
	free(w);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* The host f is, holding at most max_watches watches (0: no cap). */
static struct watcher_host fake_host(struct fake *f, size_t max_watches)
{
	return (struct watcher_host){ .ctx = f,
				      .hold = fake_hold,
				      .release = fake_release,
				      .config_paths = fake_config_paths,
				      .config_changed = fake_config_changed,
				      .reload = fake_reload,
				      .max_depth = 64,
				      .max_watches = max_watches };
}

/* The description of skill name in the host's current catalogue. */
static bool fake_shows(struct fake *f, const char *name, const char *desc)
{
	pthread_mutex_lock(&f->lock);
	const struct catalog_entry *e = catalog_find(f->cur, name);
	bool yes = e && e->skill->description && strcmp(e->skill->description, desc) == 0;
	pthread_mutex_unlock(&f->lock);
	return yes;
}

static bool fake_warned(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	bool w = f->warned;
	pthread_mutex_unlock(&f->lock);
	return w;
}

static int fake_reloads(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	int n = f->reloads;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Waits up to secs for cond(f, ...) to hold; the seconds it took, or -1. */
#define WAIT_FOR(secs, cond)                                             \
	({                                                               \
		double t0_ = now_s(), took_ = -1;                        \
		while (now_s() - t0_ < (secs)) {                         \
			if (cond) {                                      \
				took_ = now_s() - t0_;                   \
				break;                                   \
			}                                                \
			usleep(10000);                                   \
		}                                                        \
		took_;                                                   \
	})

/* With the watches capped so that no skill's directory can be watched, an
 * edit in one is found by the rescan within watch.rescan_seconds, and
 * reloaded as a change named in full (complete, the directory dirty); a
 * rescan that finds nothing changed reloads nothing; once the cap goes,
 * every directory is watched, the warning goes and the rescans stop. */
static void test_rescan_finds_edits_in_unwatched_directories(void **state)
{
	const char *root = *state;
	make_dir(root, "skills");
	static const char *const names[] = { "a", "b", "c" };
	for (size_t i = 0; i < 3; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "skills/%s", names[i]);
		make_dir(root, rel);
		write_skill(root, rel, names[i], "first");
	}
	make_dir(root, "skills/a/scripts");
	char *adir = path_of(root, "skills/a");
	struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER, .dir = adir };
	f.c = config_at(root, "sources: [{path: skills}]\nwatch: {rescan_seconds: 1}\n");
	struct skill_limits lim = { 0 };
	f.cur = f.all[f.nall++] = catalog_build(f.c, NULL, &lim, NULL);
	assert_int_equal(f.cur->n, 3);
	/* The source's parents and the source itself, and nothing more. */
	struct watcher_host host = fake_host(&f, dirs_up_to_root(root) + 1);
	struct watcher *wr = watcher_new(&host);
	assert_non_null(wr);
	__atomic_store_n(&f.wr, wr, __ATOMIC_RELEASE);
	assert_int_equal(watcher_start(wr), 0);

	/* The warning reaches the catalogue, naming the sysctl and the interval. */
	assert_true(WAIT_FOR(5, fake_warned(&f)) >= 0);
	char *w = watcher_warning(wr);
	assert_non_null(w);
	assert_non_null(strstr(w, "fs.inotify.max_user_watches"));
	assert_non_null(strstr(w, "every 1 s (watch.rescan_seconds)"));
	free(w);

	/* Rescans that find nothing changed reload nothing. */
	usleep(300000);
	int before = fake_reloads(&f);
	usleep(2300000);
	assert_int_equal(fake_reloads(&f), before);

	/* An edit in place (no event would say so: not watched) is found. */
	write_skill(root, "skills/a", "a", "second, longer");
	double took = WAIT_FOR(3, fake_shows(&f, "a", "second, longer"));
	assert_true(took >= 0);
	assert_true(took < 2.5); /* one interval, and the time to reload */
	pthread_mutex_lock(&f.lock);
	assert_true(f.complete_with_dir >= 1);
	pthread_mutex_unlock(&f.lock);
	/* A file other than SKILL.md, deeper in the skill, is a change too. */
	before = fake_reloads(&f);
	char *script = path_of(root, "skills/a/scripts/run.sh");
	test_write_text(script, "echo hi\n");
	free(script);
	assert_true(WAIT_FOR(3, fake_reloads(&f) > before) >= 0);

	/* The limit raised: every directory is watched, the warning goes. */
	watcher_cap_watches(wr, 0);
	assert_true(WAIT_FOR(4, !fake_warned(&f)) >= 0);
	w = watcher_warning(wr);
	assert_null(w);
	/* and an edit now is seen through its watch */
	write_skill(root, "skills/b", "b", "third");
	assert_true(WAIT_FOR(3, fake_shows(&f, "b", "third")) >= 0);

	watcher_free(wr);
	for (size_t i = 0; i < f.nall; i++)
		catalog_free(f.all[i]);
	config_free(f.c);
	free(adir);
}

/* The skill named name in the host's current catalogue (its object). */
static const struct skill *fake_skill(struct fake *f, const char *name)
{
	pthread_mutex_lock(&f->lock);
	const struct catalog_entry *e = catalog_find(f->cur, name);
	const struct skill *s = e ? e->skill : NULL;
	pthread_mutex_unlock(&f->lock);
	return s;
}

/* A file below a skill's directory changed after the first scan and
 * before the watches were set up (no event says so) is found by the
 * rescan that follows them: that skill is loaded afresh; the others,
 * unchanged, are kept as they were. */
static void test_first_rescan_finds_files_changed_before_the_watches(void **state)
{
	const char *root = *state;
	make_dir(root, "skills");
	make_dir(root, "skills/a");
	make_dir(root, "skills/b");
	write_skill(root, "skills/a", "a", "first");
	write_skill(root, "skills/b", "b", "first");
	make_dir(root, "skills/a/notes");
	char *note = path_of(root, "skills/a/notes/n.md");
	test_write_text(note, "v1\n");
	struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER };
	f.c = config_at(root, "sources: [{path: skills}]\n");
	struct skill_limits lim = { 0 };
	f.cur = f.all[f.nall++] = catalog_build(f.c, NULL, &lim, NULL);
	assert_int_equal(f.cur->n, 2);
	const struct skill *a0 = fake_skill(&f, "a"), *b0 = fake_skill(&f, "b");
	/* In place, the same size: only its bytes and times change. */
	test_write_text(note, "v2\n");
	struct watcher_host host = fake_host(&f, 0);
	struct watcher *wr = watcher_new(&host);
	assert_non_null(wr);
	__atomic_store_n(&f.wr, wr, __ATOMIC_RELEASE);
	assert_int_equal(watcher_start(wr), 0);
	assert_true(WAIT_FOR(5, fake_skill(&f, "a") != a0) >= 0);
	pthread_mutex_lock(&f.lock);
	assert_int_equal(f.checks, 1);
	const struct catalog_entry *e = catalog_find(f.cur, "a");
	const struct scan_file *sf = scan_find(e->scan, "notes/n.md");
	assert_non_null(sf);
	unsigned char want[FP_SIZE];
	fp_sha256("v2\n", 3, want);
	assert_memory_equal(sf->sha, want, FP_SIZE);
	pthread_mutex_unlock(&f.lock);
	assert_ptr_equal(fake_skill(&f, "b"), b0);
	watcher_free(wr);
	for (size_t i = 0; i < f.nall; i++)
		catalog_free(f.all[i]);
	config_free(f.c);
	free(note);
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test_setup_teardown(test_dirs_needed_counts_each_directory_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_check_reports_a_watch_limit_too_low, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rescan_finds_edits_in_unwatched_directories,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_first_rescan_finds_files_changed_before_the_watches, setup, teardown),
	};
	return cmocka_run_group_tests(t, NULL, NULL);
}
