/* Tests for where the tools find a run's directories (issue "Skill files in
 * reach" and "A project directory"): /skills/<name> holds the files of the
 * run's skills, read-only, for the file tools and inside the sandbox alike
 * (scripts keep their exec bit); a workdir is the tools' working directory
 * (relative paths resolve there, processes start there) while the
 * workspace stays at /workspace for scratch. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "sandbox.h"
#include "tools.h"
#include "tooltest.h"
#include "workspace.h"

#include "testutil.h"

/* The sandbox of this machine, probed once (bubblewrap, as CI installs). */
static struct sandbox box;

struct fx {
	char *tmp;     /* scratch, 0700 as made: the tools' user may not
	                  traverse it when they run as another user */
	char *ws;      /* tmp/ws: the run's workspace */
	char *wd;      /* tmp/project: the workdir, when set */
	char *skill;   /* tmp/skills/hello: a skill's directory */
	struct tool_skill_dir skills[1];
	struct tool_ctx ctx;
};

static char *path_in(const char *dir, const char *name)
{
	return test_join(dir, name);
}

static void put(const char *dir, const char *name, const char *text, mode_t mode)
{
	char *p = path_in(dir, name);
	test_write_text(p, text);
	assert_int_equal(chmod(p, mode), 0);
	free(p);
}

static char *slurp(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	FILE *fp = fopen(p, "r");
	free(p);
	if (!fp)
		return NULL;
	struct buf b = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0)
		assert_int_equal(buf_append(&b, chunk, n), 0);
	fclose(fp);
	assert_int_equal(buf_puts(&b, ""), 0);
	return buf_steal(&b, NULL);
}

/* The owner the tools' files get: the sandbox's user when it switches. */
static void tools_ids(uid_t *uid, gid_t *gid)
{
	bool sw = box.switch_user && box.mode == SANDBOX_BWRAP;
	*uid = sw ? box.uid : geteuid();
	*gid = sw ? box.gid : getegid();
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->tmp = test_tmpdir("skillfs-paths");
	assert_int_equal(chmod(f->tmp, 0700), 0);
	f->ws = path_in(f->tmp, "ws");
	char *skills = path_in(f->tmp, "skills");
	assert_int_equal(mkdir(skills, 0755), 0);
	f->skill = path_in(skills, "hello");
	free(skills);
	assert_int_equal(mkdir(f->skill, 0755), 0);
	put(f->skill, "SKILL.md", "---\nname: hello\ndescription: greets\n---\n"
		      "Run `scripts/hello.sh`.\n", 0644);
	char *scripts = path_in(f->skill, "scripts");
	assert_int_equal(mkdir(scripts, 0755), 0);
	put(scripts, "hello.sh", "#!/bin/sh\necho \"hello from $(basename \"$0\") in $(pwd)\"\n",
	    0755);
	free(scripts);
	f->skills[0] = (struct tool_skill_dir){.name = "hello", .dir = f->skill};
	f->ctx = (struct tool_ctx){.workspace = f->ws, .sandbox = &box, .skills = f->skills,
				   .nskills = 1};
	*state = f;
	return 0;
}

/* The same with a workdir the tools' user may write. */
static int setup_workdir(void **state)
{
	setup(state);
	struct fx *f = *state;
	f->wd = path_in(f->tmp, "project");
	assert_int_equal(mkdir(f->wd, 0755), 0);
	uid_t uid;
	gid_t gid;
	tools_ids(&uid, &gid);
	assert_int_equal(chown(f->wd, uid, gid), 0);
	put(f->wd, "README", "project readme\n", 0644);
	f->ctx.workdir = f->wd;
	return 0;
}

static int need_sandbox(void)
{
	if (!sandbox_usable(&box)) {
		if (getenv("CI"))
			fail_msg("no usable sandbox under CI: %s", box.why ? box.why : "?");
		return -1;
	}
	return 0;
}

static int setup_sandboxed(void **state)
{
	if (need_sandbox() < 0)
		skip();
	return setup(state);
}

static int setup_workdir_sandboxed(void **state)
{
	if (need_sandbox() < 0)
		skip();
	return setup_workdir(state);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	free(f->ws);
	free(f->wd);
	free(f->skill);
	test_rm_tree(f->tmp);
	free(f);
	return 0;
}

static struct tool_result run2(struct fx *f, const char *tool, const char *k1, const char *v1,
			       const char *k2, const char *v2)
{
	return tooltest_run_kv(&f->ctx, tool, k1, v1, k2, v2);
}

static struct tool_result run1(struct fx *f, const char *tool, const char *k, const char *v)
{
	return run2(f, tool, k, v, NULL, NULL);
}




/* ---- the file tools ---- */

static void test_read_reaches_a_skills_files(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run1(f, "read", "path", "/skills/hello/scripts/hello.sh");
	expect_ok_has(&r, "echo \"hello from");
	r = run1(f, "read", "path", "//skills/./hello//SKILL.md");
	expect_ok_has(&r, "Run `scripts/hello.sh`.");
	/* Only the run's skills, and nothing above their directories. */
	r = run1(f, "read", "path", "/skills/other/SKILL.md");
	expect_error_has(&r, "read: no skill named 'other' in /skills");
	r = run1(f, "read", "path", "/skills/hello/../hello/SKILL.md");
	expect_error_has(&r, "path escapes");
	r = run1(f, "read", "path", "/skills/hello/../../ws/x");
	expect_error_has(&r, "path escapes");
	r = run1(f, "read", "path", "/skills");
	expect_error_has(&r, "holds one directory per skill");
	/* A link in the skill's directory leading out of it is not followed
	 * out. */
	char *out = path_in(f->tmp, "secret");
	test_write_text(out, "secret\n");
	char *link = path_in(f->skill, "leak");
	assert_int_equal(symlink(out, link), 0);
	r = run1(f, "read", "path", "/skills/hello/leak");
	expect_error_has(&r, "path escapes");
	free(link);
	free(out);
	/* Without skills in the context, /skills holds none. */
	f->ctx.nskills = 0;
	r = run1(f, "read", "path", "/skills/hello/SKILL.md");
	expect_error_has(&r, "no skill named 'hello'");
}

static void test_skill_files_are_read_only(void **state)
{
	struct fx *f = *state;
	char *before = slurp(f->skill, "SKILL.md");
	struct tool_result r = run2(f, "write", "path", "/skills/hello/x", "content", "x");
	expect_error_has(&r, "write: skill files are read-only: /skills/hello/x");
	r = run2(f, "write", "path", "/skills/hello/SKILL.md", "content", "pwned");
	expect_error_has(&r, "skill files are read-only: /skills/hello/SKILL.md");
	json_t *args = json_pack("{s:s, s:s, s:s}", "path", "/skills/hello/SKILL.md",
				 "old_string", "Run", "new_string", "Delete");
	struct tool_result e;
	assert_int_equal(tools_exec(&f->ctx, "edit", args, &e), 0);
	json_decref(args);
	expect_error_has(&e, "edit: skill files are read-only: /skills/hello/SKILL.md");
	char *p = path_in(f->skill, "x");
	assert_int_equal(access(p, F_OK), -1);
	free(p);
	char *after = slurp(f->skill, "SKILL.md");
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* Without a workdir: relative and /workspace paths are the workspace;
 * /workdir is refused. */
static void test_workspace_paths_without_a_workdir(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run2(f, "write", "path", "a.txt", "content", "A");
	expect_ok(&r, NULL);
	r = run1(f, "read", "path", "/workspace/a.txt");
	expect_ok(&r, "A");
	r = run2(f, "write", "path", "/workspace/sub/b.txt", "content", "B");
	expect_ok(&r, NULL);
	char *t = slurp(f->ws, "sub/b.txt");
	assert_string_equal(t, "B");
	free(t);
	r = run1(f, "read", "path", "/workdir/a.txt");
	expect_error_has(&r, "read: the run has no workdir: /workdir/a.txt");
	r = run1(f, "read", "path", "/workspace/../ws/a.txt");
	expect_error_has(&r, "path escapes");
}

/* With a workdir: relative paths and /workdir are the project, /workspace
 * the scratch workspace; files made in the project belong to the tools'
 * user, as those their processes make. */
static void test_workdir_is_the_working_directory(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run1(f, "read", "path", "README");
	expect_ok(&r, "project readme\n");
	r = run1(f, "read", "path", "/workdir/README");
	expect_ok(&r, "project readme\n");
	char host[4096];
	snprintf(host, sizeof host, "%s/README", f->wd);
	r = run1(f, "read", "path", host);
	expect_ok(&r, "project readme\n");
	r = run2(f, "write", "path", "src/new.c", "content", "int x;\n");
	expect_ok(&r, NULL);
	char *t = slurp(f->wd, "src/new.c");
	assert_string_equal(t, "int x;\n");
	free(t);
	struct stat st;
	char *p = path_in(f->wd, "src/new.c");
	assert_int_equal(stat(p, &st), 0);
	free(p);
	uid_t uid;
	gid_t gid;
	tools_ids(&uid, &gid);
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_gid, gid);
	r = run2(f, "write", "path", "/workspace/scratch.txt", "content", "s");
	expect_ok(&r, NULL);
	t = slurp(f->ws, "scratch.txt");
	assert_string_equal(t, "s");
	free(t);
	p = path_in(f->wd, "scratch.txt");
	assert_int_equal(access(p, F_OK), -1);
	free(p);
	json_t *args = json_pack("{s:s, s:s, s:s}", "path", "/workdir/README", "old_string",
				 "readme", "new_string", "notes");
	struct tool_result e;
	assert_int_equal(tools_exec(&f->ctx, "edit", args, &e), 0);
	json_decref(args);
	expect_ok(&e, NULL);
	t = slurp(f->wd, "README");
	assert_string_equal(t, "project notes\n");
	free(t);
	/* Nothing above the workdir. */
	r = run1(f, "read", "path", "../ws/scratch.txt");
	expect_error_has(&r, "path escapes");
	r = run1(f, "read", "path", "/workdir/../ws/scratch.txt");
	expect_error_has(&r, "path escapes");
	r = run1(f, "read", "path", "/etc/passwd");
	expect_error_has(&r, "path escapes");
}

/* A workdir whose path holds a symbolic link now (one was planted after
 * it was checked) is refused rather than followed. */
static void test_workdir_behind_a_planted_link_is_refused(void **state)
{
	struct fx *f = *state;
	char *moved = path_in(f->tmp, "moved");
	assert_int_equal(rename(f->wd, moved), 0);
	assert_int_equal(symlink(moved, f->wd), 0);
	struct tool_result r = run1(f, "read", "path", "README");
	expect_error_has(&r, "symbolic link");
	free(moved);
}

/* ---- the sandbox ---- */

/* The skill's script runs from its directory at /skills/<name> with its
 * exec bit; writes there fail and the source stays as it was. */
static void test_sandbox_runs_a_skills_script_read_only(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run1(f, "bash", "command", "/skills/hello/scripts/hello.sh");
	expect_ok(&r, "hello from hello.sh in /workspace\n[exit 0]");
	r = run1(f, "bash", "command", "ls /skills; cat /skills/hello/SKILL.md | tail -1");
	expect_ok(&r, "hello\nRun `scripts/hello.sh`.\n[exit 0]");
	r = run1(f, "bash", "command",
		 "echo x > /skills/hello/x; echo rc=$?; echo y >> /skills/hello/SKILL.md; "
		 "echo rc=$?; rm -f /skills/hello/scripts/hello.sh; echo rc=$?; "
		 "mkdir /skills/new; echo rc=$?");
	assert_non_null(strstr(r.text, "Read-only file system"));
	if (strstr(r.text, "rc=0"))
		fail_msg("a write in /skills worked: %s", r.text);
	tool_result_free(&r);
	char *p = path_in(f->skill, "x");
	assert_int_equal(access(p, F_OK), -1);
	free(p);
	char *t = slurp(f->skill, "SKILL.md");
	assert_string_equal(t, "---\nname: hello\ndescription: greets\n---\nRun `scripts/hello.sh`.\n");
	free(t);
	p = path_in(f->skill, "scripts/hello.sh");
	assert_int_equal(access(p, X_OK), 0);
	free(p);
	/* Only the run's skills are bound. */
	f->ctx.nskills = 0;
	r = run1(f, "bash", "command", "ls /skills/hello 2>&1; echo end");
	assert_non_null(strstr(r.text, "No such file or directory"));
	tool_result_free(&r);
}

/* A skill directory that went away since the run started is left out; the
 * call still runs. */
static void test_sandbox_skips_a_vanished_skill(void **state)
{
	struct fx *f = *state;
	struct tool_skill_dir two[2] = {
		{.name = "gone", .dir = "/nonexistent/skillfs/gone"},
		f->skills[0],
	};
	f->ctx.skills = two;
	f->ctx.nskills = 2;
	struct tool_result r = run1(f, "bash", "command", "ls /skills");
	expect_ok(&r, "hello\n[exit 0]");
	f->ctx.skills = f->skills;
}

/* TOOLS_SKILLS_MAX skills are all bound (the staging area holds them). */
static void test_sandbox_binds_many_skills(void **state)
{
	struct fx *f = *state;
	struct tool_skill_dir *many = calloc(TOOLS_SKILLS_MAX, sizeof *many);
	char **names = calloc(TOOLS_SKILLS_MAX, sizeof *names);
	assert_non_null(many);
	assert_non_null(names);
	for (size_t i = 0; i < TOOLS_SKILLS_MAX; i++) {
		assert_true(asprintf(&names[i], "skill-%03zu", i) > 0);
		many[i] = (struct tool_skill_dir){.name = names[i], .dir = f->skill};
	}
	f->ctx.skills = many;
	f->ctx.nskills = TOOLS_SKILLS_MAX;
	struct tool_result r = run1(f, "bash", "command",
				    "ls /skills | wc -l; /skills/skill-255/scripts/hello.sh");
	char want[128];
	snprintf(want, sizeof want, "%d\nhello from hello.sh in /workspace\n[exit 0]",
		 TOOLS_SKILLS_MAX);
	expect_ok(&r, want);
	f->ctx.skills = f->skills;
	for (size_t i = 0; i < TOOLS_SKILLS_MAX; i++)
		free(names[i]);
	free(names);
	free(many);
}

/* With a workdir, processes start in it (read-write) and the workspace
 * stays at /workspace, also HOME. */
static void test_sandbox_works_in_the_workdir(void **state)
{
	struct fx *f = *state;
	struct tool_result r = run1(f, "bash", "command",
				    "pwd; echo $HOME; cat README; echo made > made.txt; "
				    "echo tmp > /workspace/tmp.txt; /skills/hello/scripts/hello.sh");
	expect_ok(&r, "/workdir\n/workspace\nproject readme\nhello from hello.sh in /workdir\n"
		      "[exit 0]");
	char *t = slurp(f->wd, "made.txt");
	assert_string_equal(t, "made\n");
	free(t);
	t = slurp(f->ws, "tmp.txt");
	assert_string_equal(t, "tmp\n");
	free(t);
	/* Nothing else of the host is there. */
	r = run1(f, "bash", "command", "ls ../ws 2>&1; ls /workdir/..; echo end");
	assert_null(strstr(r.text, "tmp.txt"));
	tool_result_free(&r);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TW(fn) cmocka_unit_test_setup_teardown(fn, setup_workdir, teardown)
#define TS(fn) cmocka_unit_test_setup_teardown(fn, setup_sandboxed, teardown)
#define TSW(fn) cmocka_unit_test_setup_teardown(fn, setup_workdir_sandboxed, teardown)
	const struct CMUnitTest tests[] = {
		T(test_read_reaches_a_skills_files),
		T(test_skill_files_are_read_only),
		T(test_workspace_paths_without_a_workdir),
		TW(test_workdir_is_the_working_directory),
		TW(test_workdir_behind_a_planted_link_is_refused),
		TS(test_sandbox_runs_a_skills_script_read_only),
		TS(test_sandbox_skips_a_vanished_skill),
		TS(test_sandbox_binds_many_skills),
		TSW(test_sandbox_works_in_the_workdir),
	};
	struct tools_config tc = {0};
	if (sandbox_probe(&tc, &box) < 0)
		return 1;
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	sandbox_free(&box);
	return rc;
}
