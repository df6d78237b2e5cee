/* Unit tests for core/view: the mount as a pure model over an engine
 * snapshot (DESIGN.md section 8, D1, D3). No threads are started: the
 * engine is used without its watcher and without runs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "engine.h"
#include "strlist.h"
#include "view.h"

#include "testutil.h"

/* ------------------------------------------------------------- helpers */

/* Writes root/rel, creating nothing else. */
static void put(const char *root, const char *rel, const char *text)
{
	char *p = test_join(root, rel);
	test_write_text(p, text);
	free(p);
}

static void mk(const char *root, const char *rel)
{
	char *p = test_join(root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
}

static void ln(const char *target, const char *root, const char *rel)
{
	char *p = test_join(root, rel);
	assert_int_equal(symlink(target, p), 0);
	free(p);
}

/* The whole of a file on disk (caller frees). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	struct buf b = { 0 };
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		assert_int_equal(buf_append(&b, chunk, n), 0);
	fclose(f);
	char *s = buf_steal(&b, len);
	assert_non_null(s);
	return s;
}

/* The whole of a view file, checked against its getattr size; read both
 * in one call and in small pieces, which must agree (caller frees). */
static char *view_slurp(struct snapshot *s, const char *path, size_t *len)
{
	struct view_attr a;
	int rc = view_getattr(s, path, &a);
	if (rc != 0)
		fail_msg("getattr %s: %s", path, strerror(-rc));
	assert_int_equal(a.type, VIEW_FILE);
	size_t size = (size_t)a.size;
	char *whole = malloc(size + 64);
	assert_non_null(whole);
	ssize_t n = view_read(s, path, 0, size + 64, whole);
	if (n < 0 || (size_t)n != size)
		fail_msg("%s: stat size %zu, read returned %zd", path, size, n);
	assert_int_equal(view_read(s, path, size, 64, whole + size), 0);
	/* In 7-byte pieces. */
	char *pieces = malloc(size + 8);
	assert_non_null(pieces);
	size_t off = 0;
	for (;;) {
		ssize_t k = view_read(s, path, off, 7, pieces + off);
		assert_true(k >= 0 && k <= 7);
		if (k == 0)
			break;
		off += (size_t)k;
		assert_true(off <= size);
	}
	assert_int_equal(off, size);
	assert_memory_equal(whole, pieces, size);
	free(pieces);
	/* And whole at once, for a generated file (a backed one says so). */
	char *all = NULL;
	size_t all_len = 0;
	rc = view_read_all(s, path, &all, &all_len);
	if (rc != -EINVAL) {
		assert_int_equal(rc, 0);
		assert_int_equal(all_len, size);
		assert_memory_equal(all, whole, size);
		assert_int_equal(all[size], '\0');
	}
	free(all);
	whole[size] = '\0';
	*len = size;
	return whole;
}

static char *view_text(struct snapshot *s, const char *path)
{
	size_t len;
	char *t = view_slurp(s, path, &len);
	assert_int_equal(strlen(t), len);
	return t;
}

/* The listing of path joined as "a b c" (caller frees). */
static char *listing(struct snapshot *s, const char *path)
{
	struct view_dirent *e = NULL;
	size_t n = 0;
	int rc = view_readdir(s, path, &e, &n);
	if (rc != 0)
		fail_msg("readdir %s: %s", path, strerror(-rc));
	struct buf b = { 0 };
	for (size_t i = 0; i < n; i++)
		assert_int_equal(buf_printf(&b, "%s%s", i ? " " : "", e[i].name), 0);
	view_dirents_free(e, n);
	size_t len;
	char *t = buf_steal(&b, &len);
	assert_non_null(t);
	return t;
}

static void assert_listing(struct snapshot *s, const char *path, const char *want)
{
	char *got = listing(s, path);
	if (strcmp(got, want) != 0)
		fail_msg("listing of '%s': got '%s', want '%s'", path, got, want);
	free(got);
}

static void assert_attr_err(struct snapshot *s, const char *path, int err)
{
	struct view_attr a;
	int rc = view_getattr(s, path, &a);
	if (rc != -err)
		fail_msg("getattr '%s': got %d, want %d", path, rc, -err);
}

static void assert_read_err(struct snapshot *s, const char *path, int err)
{
	char b[16];
	ssize_t rc = view_read(s, path, 0, sizeof b, b);
	if (rc != -err)
		fail_msg("read '%s': got %zd, want %d", path, rc, -err);
	char *all = NULL;
	size_t len;
	rc = view_read_all(s, path, &all, &len);
	if (rc != -err || all)
		fail_msg("read_all '%s': got %zd, want %d", path, rc, -err);
}

static void assert_readdir_err(struct snapshot *s, const char *path, int err)
{
	struct view_dirent *e = NULL;
	size_t n = 0;
	int rc = view_readdir(s, path, &e, &n);
	if (rc != -err)
		fail_msg("readdir '%s': got %d, want %d", path, rc, -err);
}

static void assert_same_as_disk(struct snapshot *s, const char *vpath, const char *disk)
{
	size_t dl, vl;
	char *d = slurp(disk, &dl);
	char *v = view_slurp(s, vpath, &vl);
	assert_int_equal(vl, dl);
	assert_memory_equal(v, d, dl);
	free(d);
	free(v);
}

/* Walks the whole tree from path: every listing is sorted and unique,
 * every entry's getattr agrees with its dirent type, modes are 0444/0555,
 * and every file's size equals the bytes read. Collects visited paths. */
/* The path of a SKILL.md that changed on disk after snapshot s was made
 * (walk_stale): its read fails with ESTALE (skill_read_text), and nothing
 * else may fail. */
static const char *walk_stale_md;

static bool stale_md(const char *path)
{
	if (!walk_stale_md)
		return false;
	size_t n = strlen(path), k = strlen(walk_stale_md);
	return n >= k && strcmp(path + n - k, walk_stale_md) == 0 &&
	       (n == k || path[n - k - 1] == '/');
}

static void walk(struct snapshot *s, const char *path, struct strlist *seen, int depth)
{
	assert_true(depth < 16);
	struct view_attr a;
	assert_int_equal(view_getattr(s, path, &a), 0);
	assert_int_equal(a.type, VIEW_DIR);
	assert_int_equal(a.perm, 0555);
	assert_int_equal(a.cache, VIEW_STATIC);
	struct view_dirent *e = NULL;
	size_t n = 0;
	assert_int_equal(view_readdir(s, path, &e, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (i)
			assert_true(strcmp(e[i - 1].name, e[i].name) < 0);
		assert_true(strcmp(e[i].name, ".") && strcmp(e[i].name, "..") && !strchr(e[i].name, '/'));
		char *p = NULL;
		assert_true(asprintf(&p, "%s%s%s", path, *path ? "/" : "", e[i].name) > 0);
		assert_int_equal(strlist_add(seen, p), 0);
		struct view_attr ca;
		int rc = view_getattr(s, p, &ca);
		if (rc != 0)
			fail_msg("listed '%s' but getattr: %s", p, strerror(-rc));
		assert_int_equal(ca.type, e[i].type);
		if (ca.type == VIEW_DIR) {
			walk(s, p, seen, depth + 1);
		} else {
			assert_int_equal(ca.perm, 0444);
			assert_int_equal(ca.cache, VIEW_STATIC);
			size_t len;
			char buf[64];
			if (stale_md(p))
				assert_int_equal(view_read(s, p, 0, sizeof buf, buf), -ESTALE);
			else
				free(view_slurp(s, p, &len));
			assert_readdir_err(s, p, ENOTDIR);
		}
		free(p);
	}
	view_dirents_free(e, n);
}

/* --------------------------------------------------------------- fixture */

static const char alpha_md[] =
	"---\n"
	"name: alpha\n"
	"description: Alpha does things\n"
	"allowed-tools: [Read, Write]\n"
	"---\n"
	"Alpha body.\n";
static const char beta_md[] =
	"---\r\n"
	"name: beta\r\n"
	"description: Beta declares nothing\r\n"
	"allowed-tools: []\r\n"
	"---\r\n"
	"Beta body.\r\n";
static const char gamma_md[] = "---\nname: gamma\n---\nGamma has no description.\n";
static const char parent_md[] =
	"---\n"
	"name: parent\n"
	"description: Has a reference file and a sub-skill\n"
	"allowed-tools:\n"
	"  - Edit\n"
	"  - Bash(git diff:*)\n"
	"---\n"
	"Parent body.\n";
static const char child_md[] = "---\nname: child\ndescription: The child\n---\nChild body.\n";
static const char broken_md[] = "---\nname: broken\ndescription: [oops\n---\nbody\n";

struct fixture {
	char *root;   /* temp dir */
	char *skills; /* root/skills */
	struct engine *e;
};

static void build_skills(const char *root)
{
	mk(root, "skills");
	char *sk = test_join(root, "skills");
	mk(sk, "alpha");
	put(sk, "alpha/SKILL.md", alpha_md);
	mk(sk, "alpha/references");
	put(sk, "alpha/references/guide.md", "# Guide\nline two\n");
	mk(sk, "alpha/scripts");
	put(sk, "alpha/scripts/run.sh", "#!/bin/sh\necho hi\n");
	ln("references/guide.md", sk, "alpha/link-in");
	ln("references", sk, "alpha/link-dir-in");
	ln(".", sk, "alpha/link-self");
	ln("/etc", sk, "alpha/link-out");
	ln("/etc/passwd", sk, "alpha/link-passwd");
	ln("../..", sk, "alpha/references/up");
	ln("nowhere", sk, "alpha/dangling");

	mk(sk, "beta");
	put(sk, "beta/SKILL.md", beta_md);
	mk(sk, "gamma");
	put(sk, "gamma/SKILL.md", gamma_md);

	mk(sk, "parent");
	put(sk, "parent/SKILL.md", parent_md);
	mk(sk, "parent/references");
	put(sk, "parent/references/ref.md", "reference text\n");
	mk(sk, "parent/skills");
	mk(sk, "parent/skills/child");
	put(sk, "parent/skills/child/SKILL.md", child_md);
	put(sk, "parent/skills/child/helper.txt", "child helper\n");

	mk(sk, "broken");
	put(sk, "broken/SKILL.md", broken_md);

	/* Not skills. */
	mk(sk, ".hidden");
	put(sk, ".hidden/SKILL.md", alpha_md);
	mk(sk, "empty");
	free(sk);
}

static struct engine *open_engine(const char *config, const char *dir)
{
	struct engine_options opt = { 0 };
	const char *dirs[1] = { dir };
	opt.config_path = config;
	opt.dirs = dir ? dirs : NULL;
	opt.ndirs = dir ? 1 : 0;
	char *err = NULL;
	struct engine *e = engine_open(&opt, &err);
	if (!e)
		fail_msg("engine_open: %s", err ? err : "?");
	assert_null(err);
	return e;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->root = test_tmpdir("viewtest");
	build_skills(f->root);
	f->skills = test_join(f->root, "skills");
	f->e = open_engine(NULL, f->skills);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	engine_close(f->e);
	free(f->skills);
	test_rm_tree(f->root);
	free(f);
	return 0;
}

/* ------------------------------------------------------------------ tests */

/* Section 8: the root and skills/ listings, sorted; no runs/ without a run
 * store. */
static void test_sec8_root_and_skills_listings(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	assert_listing(s, "", "README configs skills tools");
	assert_attr_err(s, "runs", ENOENT);
	assert_attr_err(s, "runs/new", ENOENT);
	assert_listing(s, "skills", "alpha beta broken gamma parent");
	assert_listing(s, "configs", "default");

	/* README and tools are files; tools lists the registered tools. */
	char *tools = view_text(s, "tools");
	const struct config *c = snapshot_config(s);
	struct buf want = { 0 };
	for (size_t i = 0; i < c->registered_tools.n; i++)
		assert_int_equal(buf_printf(&want, "%s\n", c->registered_tools.items[i]), 0);
	/* ...then each one that cannot work here, with why. */
	for (size_t i = 0; i < c->tools.unavailable.n; i++)
		assert_int_equal(buf_printf(&want, "%s unavailable: %s\n",
					    c->tools.unavailable.items[i],
					    c->tools.unavailable_why.items[i]), 0);
	assert_true(c->registered_tools.n > 0);
	/* webfetch needs no sandbox: registered and offered everywhere. */
	assert_true(strlist_has(&c->registered_tools, "webfetch"));
	assert_false(strlist_has(&c->tools.unavailable, "webfetch"));
	assert_string_equal(tools, want.data);
	buf_free(&want);
	free(tools);
	char *readme = view_text(s, "README");
	assert_non_null(strstr(readme, "skills/<name>/SKILL.md"));
	free(readme);
	snapshot_unref(s);
}

/* Section 8: a skill directory lists description only when there is one,
 * allowed-tools only when declared, sub-skills only when there are some;
 * findings always (issue 19), a sub-skill's being its parent's. */
static void test_sec8_skill_dir_listing(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	assert_listing(s, "skills/alpha",
		       "SKILL.md allowed-tools description files findings mode skill.json");
	assert_listing(s, "skills/beta",
		       "SKILL.md allowed-tools description files findings mode skill.json");
	assert_listing(s, "skills/gamma", "SKILL.md files findings mode skill.json");
	assert_listing(s, "skills/parent",
		       "SKILL.md allowed-tools description files findings mode skill.json "
		       "sub-skills");
	/* D1: an invalid skill declares [] and is listed. */
	assert_listing(s, "skills/broken",
		       "SKILL.md allowed-tools files findings mode skill.json");
	assert_listing(s, "skills/parent/sub-skills", "child");
	assert_listing(s, "skills/parent/sub-skills/child",
		       "SKILL.md description files skill.json");
	assert_attr_err(s, "skills/alpha/sub-skills", ENOENT);
	assert_attr_err(s, "skills/gamma/description", ENOENT);

	char *d = view_text(s, "skills/alpha/description");
	assert_string_equal(d, "Alpha does things\n");
	free(d);
	/* Directory sub-skills mode: subagent (R10). */
	char *m = view_text(s, "skills/parent/mode");
	assert_non_null(strstr(m, "subagent"));
	free(m);
	m = view_text(s, "skills/gamma/mode");
	assert_true(strncmp(m, "inline", 6) == 0);
	free(m);

	/* skill.json: parsed facts plus catalogue facts. */
	char *j = view_text(s, "skills/alpha/skill.json");
	json_error_t je;
	json_t *o = json_loads(j, 0, &je);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "alpha");
	assert_string_equal(json_string_value(json_object_get(o, "trust")), "first_party");
	assert_true(json_is_true(json_object_get(o, "valid")));
	json_decref(o);
	free(j);
	j = view_text(s, "skills/broken/skill.json");
	o = json_loads(j, 0, &je);
	assert_non_null(o);
	assert_true(json_is_false(json_object_get(o, "valid")));
	assert_true(json_is_string(json_object_get(o, "error")));
	json_decref(o);
	free(j);
	snapshot_unref(s);
}

/* Section 8: every reachable file's stat size is exactly what a read
 * returns; files 0444, directories 0555; listings sorted. */
static void test_sec8_walk_sizes_equal_bytes(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	struct strlist seen = { 0 };
	walk(s, "", &seen, 0);
	/* The walk reached every kind of node. */
	const char *must[] = {
		"README", "tools", "skills/alpha/SKILL.md", "skills/alpha/skill.json",
		"skills/alpha/files/references/guide.md", "skills/alpha/files/link-in",
		"skills/alpha/files/scripts/run.sh",
		"skills/parent/sub-skills/child/SKILL.md",
		"skills/parent/sub-skills/child/files/helper.txt",
		"skills/parent/files/references/ref.md", "configs/default/grants.json",
		"configs/default/system-prompt", "skills/broken/allowed-tools",
	};
	for (size_t i = 0; i < sizeof must / sizeof *must; i++)
		if (!strlist_has(&seen, must[i]))
			fail_msg("the walk did not reach %s", must[i]);
	/* Nothing outside a skill, no SKILL.md or skills/ under files/. */
	for (size_t i = 0; i < seen.n; i++) {
		const char *p = seen.items[i];
		assert_null(strstr(p, "link-out"));
		assert_null(strstr(p, "link-passwd"));
		assert_null(strstr(p, "dangling"));
		assert_null(strstr(p, "/up"));
		assert_null(strstr(p, "files/SKILL.md"));
		assert_null(strstr(p, "files/skills"));
		assert_null(strstr(p, "hidden"));
	}
	strlist_free(&seen);
	snapshot_unref(s);
}

/* Section 8: SKILL.md byte for byte (CRLF kept), whatever was parsed. */
static void test_sec8_skill_md_byte_for_byte(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	const char *names[] = { "alpha", "beta", "gamma", "parent", "broken" };
	for (size_t i = 0; i < 5; i++) {
		char *v = NULL, *d = NULL;
		assert_true(asprintf(&v, "skills/%s/SKILL.md", names[i]) > 0);
		assert_true(asprintf(&d, "%s/%s/SKILL.md", f->skills, names[i]) > 0);
		assert_same_as_disk(s, v, d);
		free(v);
		free(d);
	}
	char *d = test_join(f->skills, "parent/skills/child/SKILL.md");
	assert_same_as_disk(s, "skills/parent/sub-skills/child/SKILL.md", d);
	free(d);
	size_t len;
	char *b = view_slurp(s, "skills/beta/SKILL.md", &len);
	assert_int_equal(len, sizeof beta_md - 1);
	assert_memory_equal(b, beta_md, len);
	free(b);
	snapshot_unref(s);
}

/* Section 8 / R3 / D1: allowed-tools is absent when undeclared, empty when
 * declared [] (or invalid), else the declared items one per line. */
static void test_sec8_allowed_tools_file_tri_state(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	assert_attr_err(s, "skills/gamma/allowed-tools", ENOENT);
	assert_read_err(s, "skills/gamma/allowed-tools", ENOENT);
	struct view_attr a;
	assert_int_equal(view_getattr(s, "skills/beta/allowed-tools", &a), 0);
	assert_int_equal(a.type, VIEW_FILE);
	assert_int_equal(a.size, 0);
	assert_int_equal(view_getattr(s, "skills/broken/allowed-tools", &a), 0);
	assert_int_equal(a.size, 0);
	char *t = view_text(s, "skills/alpha/allowed-tools");
	assert_string_equal(t, "Read\nWrite\n");
	free(t);
	t = view_text(s, "skills/parent/allowed-tools");
	assert_string_equal(t, "Edit\nBash(git diff:*)\n");
	free(t);
	snapshot_unref(s);
}

/* Section 8: files/ mirrors the skill's other files: not SKILL.md, not the
 * skills/ directory of directory sub-skills, no symlink leaving the skill. */
static void test_sec8_files_mirror_and_symlinks(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	assert_listing(s, "skills/alpha/files", "link-in references scripts");
	assert_listing(s, "skills/alpha/files/references", "guide.md");
	assert_listing(s, "skills/parent/files", "references");
	assert_listing(s, "skills/parent/sub-skills/child/files", "helper.txt");
	assert_listing(s, "skills/gamma/files", "");

	char *guide = test_join(f->skills, "alpha/references/guide.md");
	assert_same_as_disk(s, "skills/alpha/files/references/guide.md", guide);
	/* A symlink pointing inside the skill is served. */
	assert_same_as_disk(s, "skills/alpha/files/link-in", guide);
	free(guide);
	/* A symlinked directory is not followed, even inside the skill: it
	 * could loop (link-self -> .) and show SKILL.md again. */
	assert_attr_err(s, "skills/alpha/files/link-dir-in", ENOENT);
	assert_attr_err(s, "skills/alpha/files/link-dir-in/guide.md", ENOENT);
	assert_attr_err(s, "skills/alpha/files/link-self", ENOENT);
	assert_attr_err(s, "skills/alpha/files/link-self/SKILL.md", ENOENT);
	assert_readdir_err(s, "skills/alpha/files/link-self", ENOENT);
	char *helper = test_join(f->skills, "parent/skills/child/helper.txt");
	assert_same_as_disk(s, "skills/parent/sub-skills/child/files/helper.txt", helper);
	free(helper);

	/* Not visible: SKILL.md, skills/, links leaving the skill. */
	assert_attr_err(s, "skills/alpha/files/SKILL.md", ENOENT);
	assert_read_err(s, "skills/alpha/files/SKILL.md", ENOENT);
	assert_attr_err(s, "skills/parent/files/skills", ENOENT);
	assert_attr_err(s, "skills/parent/files/skills/child/SKILL.md", ENOENT);
	assert_attr_err(s, "skills/parent/files/skills/child/helper.txt", ENOENT);
	assert_attr_err(s, "skills/alpha/files/link-out", ENOENT);
	assert_attr_err(s, "skills/alpha/files/link-out/passwd", ENOENT);
	assert_read_err(s, "skills/alpha/files/link-out/passwd", ENOENT);
	assert_readdir_err(s, "skills/alpha/files/link-out", ENOENT);
	assert_attr_err(s, "skills/alpha/files/link-passwd", ENOENT);
	assert_read_err(s, "skills/alpha/files/link-passwd", ENOENT);
	assert_attr_err(s, "skills/alpha/files/references/up", ENOENT);
	assert_attr_err(s, "skills/alpha/files/references/up/beta/SKILL.md", ENOENT);
	assert_read_err(s, "skills/alpha/files/references/up/beta/SKILL.md", ENOENT);
	assert_readdir_err(s, "skills/alpha/files/references/up/beta", ENOENT);
	assert_attr_err(s, "skills/alpha/files/dangling", ENOENT);
	snapshot_unref(s);
}

/* Section 8: "..", "." and unknown names do not exist; reading a directory
 * is EISDIR; listing a file is ENOTDIR. */
static void test_sec8_bad_paths_and_types(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	const char *enoent[] = {
		"..", ".", "skills/..", "skills/.", "skills/alpha/..", "skills/./alpha",
		"skills/alpha/../beta/SKILL.md", "skills/alpha/files/..",
		"skills/alpha/files/../SKILL.md", "skills/alpha/files/./references",
		"skills/alpha/files/references/../../SKILL.md", "configs/../README",
		"nope", "Skills", "skills/nope", "skills/alpha/nope", "skills/child",
		"skills/.hidden", "skills/empty", "skills/parent/sub-skills/nope",
		"configs/nope", "configs/default/nope", "configs/ERROR",
		"skills/alpha/files/nope", "README/x",
	};
	for (size_t i = 0; i < sizeof enoent / sizeof *enoent; i++) {
		assert_attr_err(s, enoent[i], ENOENT);
		char b[8];
		ssize_t r = view_read(s, enoent[i], 0, sizeof b, b);
		if (r != -ENOENT)
			fail_msg("read '%s': got %zd", enoent[i], r);
		assert_readdir_err(s, enoent[i], ENOENT);
	}
	const char *dirs[] = { "", "skills", "configs", "skills/alpha", "skills/alpha/files",
			       "skills/alpha/files/references", "configs/default",
			       "skills/parent/sub-skills", "skills/parent/sub-skills/child" };
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
		assert_read_err(s, dirs[i], EISDIR);
	const char *files[] = { "README", "tools", "skills/alpha/SKILL.md",
				"skills/alpha/mode", "skills/alpha/files/scripts/run.sh",
				"configs/default/effective" };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		assert_readdir_err(s, files[i], ENOTDIR);
	/* Below a generated file: not a directory. */
	struct view_attr a;
	assert_true(view_getattr(s, "skills/alpha/SKILL.md/x", &a) < 0);
	assert_true(view_getattr(s, "configs/default/effective/x", &a) < 0);
	/* A path too long for any file name. */
	char longp[PATH_MAX + 16];
	memset(longp, 'a', sizeof longp - 1);
	longp[sizeof longp - 1] = '\0';
	assert_true(view_getattr(s, longp, &a) < 0);
	snapshot_unref(s);
}

/* Section 8: configs/<cfg> holds the 8 resolution files, the gate view and
 * claude/; allowed-tools is
 * the union of the declared lists (R2), sorted, lower-cased (D3). */
static void test_R2_configs_default_files_and_allowed_tools(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	assert_listing(s, "configs/default",
		       "allowed-tools attachments available-skills claude effective grants.json "
		       "skill-block skills system-prompt warnings");
	char *t = view_text(s, "configs/default/allowed-tools");
	assert_string_equal(t, "bash(git diff:*)\nedit\nread\nwrite\n");
	free(t);
	/* No-config default: every skill attached, in name order. */
	t = view_text(s, "configs/default/effective");
	assert_non_null(strstr(t, "alpha\n"));
	assert_non_null(strstr(t, "parent\n"));
	assert_true(strstr(t, "alpha") < strstr(t, "gamma"));
	free(t);
	snapshot_unref(s);
}

/* Snapshots are immutable: after an edit and a reload the new snapshot
 * serves the new bytes, an old one still serves the old bytes. */
static void test_sec8_reload_new_snapshot_old_unchanged(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s1 = engine_snapshot(f->e);
	static const char new_md[] =
		"---\nname: alpha\ndescription: Alpha, rewritten at length\n"
		"allowed-tools: [Read]\n---\nNew alpha body, longer than before.\n";
	put(f->skills, "alpha/SKILL.md", new_md);
	put(f->skills, "gamma/extra.txt", "new file\n");
	assert_int_equal(engine_reload(f->e, false, NULL), 0);
	struct snapshot *s2 = engine_snapshot(f->e);
	assert_ptr_not_equal(s1, s2);
	assert_true(s2->generation > s1->generation);

	size_t len;
	char *v = view_slurp(s2, "skills/alpha/SKILL.md", &len);
	assert_int_equal(len, sizeof new_md - 1);
	assert_memory_equal(v, new_md, len);
	free(v);
	/* The old snapshot keeps the old file's size, but not its bytes: a
	 * read of them fails (ESTALE), never giving the new ones. */
	struct view_attr a;
	assert_int_equal(view_getattr(s1, "skills/alpha/SKILL.md", &a), 0);
	assert_int_equal(a.size, sizeof alpha_md - 1);
	char old[sizeof alpha_md + 64];
	assert_int_equal(view_read(s1, "skills/alpha/SKILL.md", 0, sizeof old, old), -ESTALE);
	assert_int_equal(view_read(s1, "configs/default/skills/alpha/SKILL.md", 0, sizeof old, old),
			 -ESTALE);

	v = view_text(s2, "skills/alpha/description");
	assert_string_equal(v, "Alpha, rewritten at length\n");
	free(v);
	v = view_text(s1, "skills/alpha/description");
	assert_string_equal(v, "Alpha does things\n");
	free(v);
	v = view_text(s2, "configs/default/allowed-tools");
	assert_string_equal(v, "bash(git diff:*)\nedit\nread\n");
	free(v);
	v = view_text(s1, "configs/default/allowed-tools");
	assert_string_equal(v, "bash(git diff:*)\nedit\nread\nwrite\n");
	free(v);
	/* Backing files are live from disk in both. */
	assert_listing(s2, "skills/gamma/files", "extra.txt");

	/* The old snapshot outlives the engine's move to a newer one. */
	assert_int_equal(engine_reload(f->e, false, NULL), 0);
	struct strlist seen = { 0 };
	walk_stale_md = "alpha/SKILL.md";
	walk(s1, "", &seen, 0);
	walk_stale_md = NULL;
	strlist_free(&seen);
	snapshot_unref(s2);
	snapshot_unref(s1);
}

/* Section 9: a config that fails to reload keeps the last good config and
 * shows configs/ERROR naming the problem; fixing it removes ERROR. */
static void test_sec9_bad_reload_keeps_last_good_config(void **state)
{
	struct fixture *f = *state;
	put(f->root, "config.yaml",
	    "sources:\n"
	    "  - path: skills\n"
	    "    trust: community\n"
	    "configurations:\n"
	    "  default:\n"
	    "    skills: [alpha, gamma]\n"
	    "  review:\n"
	    "    skills: [beta]\n");
	char *cfg = test_join(f->root, "config.yaml");
	struct engine *e = open_engine(cfg, NULL);
	struct snapshot *s1 = engine_snapshot(e);
	assert_null(s1->config_error);
	assert_listing(s1, "configs", "default review");
	assert_attr_err(s1, "configs/ERROR", ENOENT);

	const char *broken[] = {
		"sources:\n  - path: skills\nskills:\n  execution_mode: fast\n",
		"sources: [\n",
	};
	const char *mention[] = { "execution_mode", "config.yaml" };
	for (size_t k = 0; k < 2; k++) {
		put(f->root, "config.yaml", broken[k]);
		assert_int_equal(engine_reload(e, true, NULL), 0);
		struct snapshot *s = engine_snapshot(e);
		assert_non_null(s->config_error);
		assert_listing(s, "configs", "ERROR default review");
		char *t = view_text(s, "configs/ERROR");
		if (!strstr(t, mention[k]) || !strstr(t, "config.yaml"))
			fail_msg("configs/ERROR does not name the problem: %s", t);
		free(t);
		struct view_attr a;
		assert_int_equal(view_getattr(s, "configs/ERROR", &a), 0);
		assert_int_equal(a.perm, 0444);
		/* The last good config is in force. */
		assert_ptr_equal(snapshot_config(s), snapshot_config(s1));
		t = view_text(s, "configs/default/effective");
		assert_string_equal(t, "alpha\ngamma\n");
		free(t);
		t = view_text(s, "skills/alpha/skill.json");
		assert_non_null(strstr(t, "\"community\""));
		free(t);
		assert_listing(s, "skills", "alpha beta broken gamma parent");
		struct strlist seen = { 0 };
		walk(s, "", &seen, 0);
		assert_true(strlist_has(&seen, "configs/ERROR"));
		strlist_free(&seen);
		/* A reload for a skill change alone keeps showing the error. */
		assert_int_equal(engine_reload(e, false, NULL), 0);
		struct snapshot *s3 = engine_snapshot(e);
		assert_non_null(s3->config_error);
		assert_listing(s3, "configs", "ERROR default review");
		snapshot_unref(s3);
		snapshot_unref(s);
	}
	/* The old snapshot never saw the error. */
	assert_listing(s1, "configs", "default review");

	put(f->root, "config.yaml",
	    "sources:\n  - path: skills\n    trust: verified\n"
	    "configurations:\n  only:\n    skills: [beta]\n");
	assert_int_equal(engine_reload(e, true, NULL), 0);
	struct snapshot *s4 = engine_snapshot(e);
	assert_null(s4->config_error);
	assert_listing(s4, "configs", "only");
	assert_attr_err(s4, "configs/ERROR", ENOENT);
	char *t = view_text(s4, "skills/alpha/skill.json");
	assert_non_null(strstr(t, "\"verified\""));
	free(t);
	snapshot_unref(s4);
	snapshot_unref(s1);
	engine_close(e);
	free(cfg);
}

/* A SKILL.md over the size limit (D1) is still served byte for byte, from
 * disk, with a matching size. */
static void test_D1_oversized_skill_md_served_from_disk(void **state)
{
	struct fixture *f = *state;
	struct buf big = { 0 };
	assert_int_equal(buf_puts(&big, "---\nname: huge\ndescription: big\n---\n"), 0);
	for (int i = 0; i < 200; i++)
		assert_int_equal(buf_puts(&big, "padding line of the body\n"), 0);
	mk(f->skills, "huge");
	put(f->skills, "huge/SKILL.md", big.data);
	struct engine_options opt = { 0 };
	const char *dirs[] = { f->skills };
	opt.dirs = dirs;
	opt.ndirs = 1;
	opt.limits.file_max = 1024;
	char *err = NULL;
	struct engine *e = engine_open(&opt, &err);
	assert_non_null(e);
	struct snapshot *s = engine_snapshot(e);
	char *disk = test_join(f->skills, "huge/SKILL.md");
	assert_same_as_disk(s, "skills/huge/SKILL.md", disk);
	struct view_attr a;
	assert_int_equal(view_getattr(s, "skills/huge/SKILL.md", &a), 0);
	assert_int_equal(a.size, big.len);
	assert_int_equal(view_getattr(s, "skills/huge/allowed-tools", &a), 0);
	assert_int_equal(a.size, 0);
	char *j = view_text(s, "skills/huge/skill.json");
	assert_non_null(strstr(j, "\"valid\": false"));
	free(j);
	free(disk);
	buf_free(&big);
	snapshot_unref(s);
	engine_close(e);
}

static void assert_perm(struct snapshot *s, const char *path, mode_t want)
{
	struct view_attr a;
	int rc = view_getattr(s, path, &a);
	if (rc != 0)
		fail_msg("getattr %s: %s", path, strerror(-rc));
	if (a.perm != want)
		fail_msg("%s: mode %03o, want %03o", path, (unsigned)a.perm, (unsigned)want);
}

static void chmod_in(const char *root, const char *rel, mode_t m)
{
	char *p = test_join(root, rel);
	assert_int_equal(chmod(p, m), 0);
	free(p);
}

/* Issue 15, item 1: a file keeps its source's owner-exec bit (0555, else
 * 0444), SKILL.md as well; directories are 0555 whatever their source. */
static void test_modes_from_source(void **state)
{
	struct fixture *f = *state;
	chmod_in(f->skills, "alpha/scripts/run.sh", 0700);
	chmod_in(f->skills, "alpha/references/guide.md", 0644);
	chmod_in(f->skills, "alpha/references", 0700);
	chmod_in(f->skills, "gamma/SKILL.md", 0744);
	chmod_in(f->skills, "parent/skills/child/helper.txt", 0755);
	/* Group and others' bits alone do not make a file executable. */
	chmod_in(f->skills, "parent/references/ref.md", 0655);
	assert_int_equal(engine_reload(f->e, false, NULL), 0);
	struct snapshot *s = engine_snapshot(f->e);
	assert_perm(s, "skills/alpha/files/scripts/run.sh", 0555);
	assert_perm(s, "skills/alpha/files/references/guide.md", 0444);
	assert_perm(s, "skills/alpha/files/references", 0555);
	/* A symlink takes the mode of the file it names. */
	assert_perm(s, "skills/alpha/files/link-in", 0444);
	assert_perm(s, "skills/gamma/SKILL.md", 0555);
	assert_perm(s, "skills/alpha/SKILL.md", 0444);
	assert_perm(s, "skills/parent/sub-skills/child/files/helper.txt", 0555);
	assert_perm(s, "skills/parent/files/references/ref.md", 0444);
	/* The same in the gate view. */
	assert_perm(s, "configs/default/skills/alpha/scripts/run.sh", 0555);
	assert_perm(s, "configs/default/skills/alpha/references/guide.md", 0444);
	assert_perm(s, "configs/default/skills/alpha/references", 0555);
	assert_perm(s, "configs/default/skills/gamma/SKILL.md", 0555);
	assert_perm(s, "configs/default/skills/parent/skills/child/helper.txt", 0555);
	assert_perm(s, "configs/default/skills/parent/references/ref.md", 0444);
	/* Generated files stay 0444. */
	assert_perm(s, "skills/alpha/skill.json", 0444);
	assert_perm(s, "configs/default/effective", 0444);
	snapshot_unref(s);
}

/* The listing of a skill's gate directory equals that of its source
 * (less what the mount never shows: links leading out or to directories),
 * and every file there equals its source byte for byte. */
static void assert_gate_mirrors(struct snapshot *s, const char *vdir, const char *ddir)
{
	struct view_dirent *e = NULL;
	size_t n = 0;
	assert_int_equal(view_readdir(s, vdir, &e, &n), 0);
	for (size_t i = 0; i < n; i++) {
		char *vp = test_join(vdir, e[i].name), *dp = test_join(ddir, e[i].name);
		struct stat st;
		assert_int_equal(stat(dp, &st), 0);
		if (e[i].type == VIEW_DIR) {
			assert_true(S_ISDIR(st.st_mode));
			assert_gate_mirrors(s, vp, dp);
		} else {
			assert_true(S_ISREG(st.st_mode));
			assert_same_as_disk(s, vp, dp);
		}
		free(vp);
		free(dp);
	}
	view_dirents_free(e, n);
}

/* Issue 15, item 2: configs/<cfg>/skills/<name>/ is each effective skill's
 * directory whole, as on disk: SKILL.md and sub-skills included, files at
 * their own relative paths, byte for byte; nothing generated, no skill that
 * is not effective. The attachment report is configs/<cfg>/attachments. */
static void test_gate_view_default(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	/* broken is invalid (D1): attached but not effective. */
	assert_listing(s, "configs/default/skills", "alpha beta gamma parent");
	assert_listing(s, "configs/default/skills/alpha", "SKILL.md link-in references scripts");
	assert_listing(s, "configs/default/skills/alpha/references", "guide.md");
	assert_listing(s, "configs/default/skills/parent", "SKILL.md references skills");
	assert_listing(s, "configs/default/skills/parent/skills", "child");
	assert_listing(s, "configs/default/skills/parent/skills/child", "SKILL.md helper.txt");
	assert_listing(s, "configs/default/skills/gamma", "SKILL.md");
	const char *names[] = { "alpha", "beta", "gamma", "parent" };
	for (size_t i = 0; i < 4; i++) {
		char *v = NULL, *d = test_join(f->skills, names[i]);
		assert_true(asprintf(&v, "configs/default/skills/%s", names[i]) > 0);
		assert_gate_mirrors(s, v, d);
		free(v);
		free(d);
	}
	const char *enoent[] = {
		"configs/default/skills/broken", "configs/default/skills/broken/SKILL.md",
		"configs/default/skills/child", "configs/default/skills/.hidden",
		"configs/default/skills/empty", "configs/default/skills/nope",
		"configs/default/skills/alpha/skill.json", "configs/default/skills/alpha/files",
		"configs/default/skills/alpha/description", "configs/default/skills/alpha/mode",
		"configs/default/skills/alpha/link-out", "configs/default/skills/alpha/link-self",
		"configs/default/skills/alpha/link-dir-in", "configs/default/skills/alpha/dangling",
		"configs/default/skills/alpha/references/up",
		"configs/default/skills/alpha/references/up/beta/SKILL.md",
		"configs/default/skills/..", "configs/default/skills/alpha/..",
		"configs/default/skills/parent/sub-skills",
	};
	for (size_t i = 0; i < sizeof enoent / sizeof *enoent; i++) {
		assert_attr_err(s, enoent[i], ENOENT);
		assert_readdir_err(s, enoent[i], ENOENT);
	}
	assert_read_err(s, "configs/default/skills", EISDIR);
	assert_read_err(s, "configs/default/skills/alpha", EISDIR);
	assert_readdir_err(s, "configs/default/skills/alpha/SKILL.md", ENOTDIR);
	/* The attachment report moved; each attachment and its state. */
	char *t = view_text(s, "configs/default/attachments");
	assert_non_null(strstr(t, "alpha effective "));
	assert_non_null(strstr(t, "broken invalid "));
	free(t);
	struct view_attr a;
	assert_int_equal(view_getattr(s, "configs/default/skills", &a), 0);
	assert_int_equal(a.type, VIEW_DIR);
	assert_int_equal(a.cache, VIEW_STATIC);
	assert_int_equal(view_getattr(s, "configs/default/skills/alpha/SKILL.md", &a), 0);
	assert_int_equal(a.cache, VIEW_STATIC);
	snapshot_unref(s);
}

/* A skill disabled in the configuration, below the trust floor, or not
 * attached is not in the gate view; an edit of the config shows in the
 * next snapshot. */
static void test_gate_view_only_effective(void **state)
{
	struct fixture *f = *state;
	mk(f->root, "low");
	mk(f->root, "low/lowly");
	put(f->root, "low/lowly/SKILL.md", "---\nname: lowly\ndescription: Low trust\n---\nb\n");
	put(f->root, "config.yaml",
	    "sources:\n"
	    "  - {path: skills, trust: first_party}\n"
	    "  - {path: low, trust: community}\n"
	    "skills: {minTrustLevel: verified}\n"
	    "configurations:\n"
	    "  main:\n"
	    "    skills: [alpha, {name: beta, enabled: false}, lowly, parent]\n"
	    "  other:\n"
	    "    skills: [gamma]\n");
	char *cfg = test_join(f->root, "config.yaml");
	struct engine *e = open_engine(cfg, NULL);
	struct snapshot *s = engine_snapshot(e);
	assert_listing(s, "configs/main/skills", "alpha parent");
	assert_listing(s, "configs/main/claude/skills", "alpha parent");
	assert_listing(s, "configs/other/skills", "gamma");
	assert_attr_err(s, "configs/main/skills/beta", ENOENT);
	assert_attr_err(s, "configs/main/skills/lowly", ENOENT);
	assert_attr_err(s, "configs/main/skills/lowly/SKILL.md", ENOENT);
	assert_attr_err(s, "configs/main/skills/gamma", ENOENT);
	assert_attr_err(s, "configs/other/skills/alpha/SKILL.md", ENOENT);
	char *t = view_text(s, "configs/main/attachments");
	assert_non_null(strstr(t, "beta disabled "));
	assert_non_null(strstr(t, "lowly below-trust "));
	free(t);

	put(f->root, "config.yaml",
	    "sources:\n"
	    "  - {path: skills, trust: first_party}\n"
	    "  - {path: low, trust: community}\n"
	    "configurations:\n"
	    "  main:\n"
	    "    skills: [{name: alpha, enabled: false}, beta, lowly]\n");
	assert_int_equal(engine_reload(e, true, NULL), 0);
	struct snapshot *s2 = engine_snapshot(e);
	assert_listing(s2, "configs/main/skills", "beta lowly");
	assert_listing(s2, "configs/main/claude/skills", "beta lowly");
	assert_attr_err(s2, "configs/main/skills/alpha", ENOENT);
	char *d = test_join(f->root, "low/lowly/SKILL.md");
	assert_same_as_disk(s2, "configs/main/skills/lowly/SKILL.md", d);
	free(d);
	/* The old snapshot is unchanged. */
	assert_listing(s, "configs/main/skills", "alpha parent");
	snapshot_unref(s2);
	snapshot_unref(s);
	engine_close(e);
	free(cfg);
}

/* Section 8: configs/<cfg>/claude/ is a ready .claude directory: skills/
 * lists exactly the gate view's skills, each its source whole; settings.json
 * is the union the skills declare (R2) as Claude Code permissions, fail
 * closed, the invalid skill counting as [] (D1); warnings; all read-only,
 * sizes equal to the bytes read. */
static void test_sec8_claude_dir(void **state)
{
	struct fixture *f = *state;
	struct snapshot *s = engine_snapshot(f->e);
	assert_listing(s, "configs/default/claude", "settings.json skills warnings");
	char *gate = listing(s, "configs/default/skills");
	assert_listing(s, "configs/default/claude/skills", gate);
	free(gate);
	const char *names[] = { "alpha", "beta", "gamma", "parent" };
	for (size_t i = 0; i < 4; i++) {
		char *v = NULL, *d = test_join(f->skills, names[i]);
		assert_true(asprintf(&v, "configs/default/claude/skills/%s", names[i]) > 0);
		assert_gate_mirrors(s, v, d);
		free(v);
		free(d);
	}
	assert_attr_err(s, "configs/default/claude/skills/broken", ENOENT);
	assert_attr_err(s, "configs/default/claude/settings.local.json", ENOENT);
	assert_attr_err(s, "configs/default/claude/settings.json/x", ENOTDIR);
	assert_attr_err(s, "configs/nope/claude", ENOENT);
	struct view_attr a;
	assert_int_equal(view_getattr(s, "configs/default/claude", &a), 0);
	assert_int_equal(a.type, VIEW_DIR);
	assert_int_equal(a.perm, 0555);
	assert_int_equal(view_getattr(s, "configs/default/claude/settings.json", &a), 0);
	assert_int_equal(a.perm, 0444);
	assert_int_equal(a.cache, VIEW_STATIC);
	char *t = view_text(s, "configs/default/claude/settings.json");
	json_error_t err;
	json_t *j = json_loads(t, 0, &err);
	assert_non_null(j);
	json_t *perm = json_object_get(j, "permissions");
	assert_string_equal(json_string_value(json_object_get(perm, "defaultMode")), "dontAsk");
	json_t *allow = json_object_get(perm, "allow"), *deny = json_object_get(perm, "deny");
	struct buf b = { 0 };
	for (size_t i = 0; i < json_array_size(allow); i++)
		assert_int_equal(buf_printf(&b, "%s ", json_string_value(json_array_get(allow, i))),
				 0);
	assert_string_equal(b.data, "Bash(git diff:*) Edit Read Skill TaskCreate TaskGet TaskList "
				    "TaskUpdate TodoWrite ToolSearch Write ");
	buf_free(&b);
	bool denies_glob = false, denies_bash = false;
	for (size_t i = 0; i < json_array_size(deny); i++) {
		denies_glob |= strcmp(json_string_value(json_array_get(deny, i)), "Glob") == 0;
		denies_bash |= strcmp(json_string_value(json_array_get(deny, i)), "Bash") == 0;
	}
	assert_true(denies_glob);
	assert_false(denies_bash);
	json_decref(j);
	free(t);
	t = view_text(s, "configs/default/claude/warnings");
	assert_null(strstr(t, "python")); /* no skill grants it */
	free(t);
	snapshot_unref(s);
}

/* view_gate_skill_of: the skill a path of a gate view belongs to. */
static void test_view_gate_skill_of(void **state)
{
	(void)state;
	const char *name = NULL;
	size_t len = 0;
	assert_true(view_gate_skill_of("configs/main/skills/alpha", &name, &len));
	assert_int_equal(len, 5);
	assert_memory_equal(name, "alpha", 5);
	assert_true(view_gate_skill_of("configs/m/skills/alpha/scripts/run.sh", &name, &len));
	assert_int_equal(len, 5);
	assert_memory_equal(name, "alpha", 5);
	assert_false(view_gate_skill_of("configs/main/skills", &name, &len));
	assert_false(view_gate_skill_of("configs/main/skills/", &name, &len));
	assert_false(view_gate_skill_of("configs/main/attachments", &name, &len));
	assert_false(view_gate_skill_of("configs//skills/alpha", &name, &len));
	assert_false(view_gate_skill_of("configs/skills/alpha", &name, &len));
	assert_false(view_gate_skill_of("skills/alpha", &name, &len));
	assert_false(view_gate_skill_of("runs/a/skills/alpha", &name, &len));
	assert_false(view_gate_skill_of("", &name, &len));
	/* configs/<cfg>/claude/skills/ is the same gate view */
	assert_true(view_gate_skill_of("configs/main/claude/skills/alpha/SKILL.md", &name, &len));
	assert_int_equal(len, 5);
	assert_memory_equal(name, "alpha", 5);
	assert_false(view_gate_skill_of("configs/main/claude/skills", &name, &len));
	assert_false(view_gate_skill_of("configs/main/claude/settings.json", &name, &len));
	assert_false(view_gate_skill_of("configs/main/claude", &name, &len));
	assert_true(view_gate_skill_of("configs/claude/skills/alpha", &name, &len)); /* a config named claude */
}

/* view_skill_of: the skill directory a path belongs to. */
static void test_view_skill_of(void **state)
{
	(void)state;
	const char *name = NULL;
	size_t len = 0;
	assert_true(view_skill_of("skills/alpha", &name, &len));
	assert_int_equal(len, 5);
	assert_memory_equal(name, "alpha", 5);
	assert_true(view_skill_of("skills/alpha/files/references/guide.md", &name, &len));
	assert_int_equal(len, 5);
	assert_memory_equal(name, "alpha", 5);
	assert_true(view_skill_of("skills/x/SKILL.md", &name, &len));
	assert_int_equal(len, 1);
	assert_int_equal(name[0], 'x');
	assert_false(view_skill_of("skills", &name, &len));
	assert_false(view_skill_of("skills/", &name, &len));
	assert_false(view_skill_of("", &name, &len));
	assert_false(view_skill_of("configs/default", &name, &len));
	assert_false(view_skill_of("skillsx/alpha", &name, &len));
	assert_false(view_skill_of("runs/a/skills", &name, &len));
}

/* view_run_of: anything inside runs/<id>/, at any depth. */
static void test_view_run_of(void **state)
{
	(void)state;
	char id[16];
	assert_true(view_run_of("runs/abc/status", id, sizeof id));
	assert_string_equal(id, "abc");
	assert_true(view_run_of("runs/abc/subagents/x/transcript", id, sizeof id));
	assert_string_equal(id, "abc");
	assert_false(view_run_of("runs/abc", id, sizeof id));
	assert_false(view_run_of("runs/abc/", id, sizeof id));
	assert_false(view_run_of("runs/new", id, sizeof id));
	assert_false(view_run_of("skills/abc/status", id, sizeof id));
	assert_false(view_run_of("runs/0123456789abcdef/status", id, sizeof id));
	/* Not a run id: no run's path, whatever buffer it would fit. */
	char big[256];
	assert_false(view_run_of("runs/bad:id/status", big, sizeof big));
	assert_false(view_run_of("runs/../status", big, sizeof big));
	char long_path[128];
	snprintf(long_path, sizeof long_path, "runs/%065d/status", 0);
	assert_false(view_run_of(long_path, big, sizeof big));
	snprintf(long_path, sizeof long_path, "runs/%064d/status", 0);
	assert_true(view_run_of(long_path, big, sizeof big));
}

/* view_run_file: runs/<id>/<name> only, id copied when it fits. */
static void test_view_run_file(void **state)
{
	(void)state;
	char id[16];
	const char *name = NULL;
	assert_true(view_run_file("runs/abc/status", id, sizeof id, &name));
	assert_string_equal(id, "abc");
	assert_string_equal(name, "status");
	assert_true(view_run_file("runs/r.1_x-2/wait", id, sizeof id, &name));
	assert_string_equal(id, "r.1_x-2");
	assert_string_equal(name, "wait");
	assert_false(view_run_file("runs/abc", id, sizeof id, &name));
	assert_false(view_run_file("runs/abc/", id, sizeof id, &name));
	assert_false(view_run_file("runs", id, sizeof id, &name));
	assert_false(view_run_file("runs/new", id, sizeof id, &name));
	assert_false(view_run_file("runs/abc/subagents/x", id, sizeof id, &name));
	assert_false(view_run_file("skills/abc/status", id, sizeof id, &name));
	assert_false(view_run_file("runsx/abc/status", id, sizeof id, &name));
	/* An id that does not fit the buffer (with its NUL) is refused. */
	assert_false(view_run_file("runs/0123456789abcdef/status", id, sizeof id, &name));
	assert_true(view_run_file("runs/0123456789abcde/status", id, sizeof id, &name));
	assert_string_equal(id, "0123456789abcde");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_view_run_of),
		cmocka_unit_test_setup_teardown(test_sec8_root_and_skills_listings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec8_skill_dir_listing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec8_walk_sizes_equal_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec8_skill_md_byte_for_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec8_allowed_tools_file_tri_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec8_files_mirror_and_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sec8_bad_paths_and_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_R2_configs_default_files_and_allowed_tools, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sec8_reload_new_snapshot_old_unchanged, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sec9_bad_reload_keeps_last_good_config, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_D1_oversized_skill_md_served_from_disk, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_modes_from_source, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gate_view_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gate_view_only_effective, setup, teardown),
		cmocka_unit_test(test_view_skill_of),
		cmocka_unit_test_setup_teardown(test_sec8_claude_dir, setup, teardown),
		cmocka_unit_test(test_view_gate_skill_of),
		cmocka_unit_test(test_view_run_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
