/* libFuzzer target: writes to the run files (core/runs.c): prompt, config,
 * skills, workdir and ctl of a created run, and input of a run waiting for
 * an answer, as the mount hands them to the run manager (runs_write,
 * runs_truncate, runs_open_writer / runs_close_writer), then each file
 * read back as a stat would (runs_stat_file).
 *
 * The run manager works on a database in a temporary directory, made once;
 * every input gets a fresh created run (removed at its end), so inputs do
 * not depend on each other. The run waiting for input is never answered
 * (its input is never closed) and its ctl never written, so it stays
 * waiting; its input is emptied after each input.
 *
 * An input is a series of records: one byte op (bits 0-2: the file, bits
 * 3-4: write at 0, write at an offset, truncate, open and close), one byte
 * of length, one of offset, then that many bytes of data. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ftw.h>

#include "engine.h"
#include "runs.h"
#include "store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[256];
static struct engine *engine;
static unsigned long serial;

#define ASKING "asking"

static const char *const files[] = { "prompt", "config", "skills", "workdir", "ctl",
				     "input", "ctl", "config" };

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_run_files: %s: %s\n", what, detail ? detail : "?");
	abort();
}

static void put(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", root, rel);
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		die("cannot write", path);
}

static void sub(const char *rel)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", root, rel);
	if (mkdir(path, 0755) < 0)
		die("cannot mkdir", path);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static void cleanup(void)
{
	if (engine) {
		runs_detach(engine);
		engine_close(engine);
		engine = NULL;
	}
	if (root[0])
		nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A run of the database at db left waiting for input. Done in a child
 * process: the stacks of the store's threads, gone when it closes, would
 * otherwise leave AddressSanitizer's marks on memory that SQLite (not
 * instrumented) maps there next. */
static void make_asking_run(const char *db)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork", strerror(errno));
	if (pid > 0) {
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			die("cannot make the waiting run", db);
		return;
	}
	char *err = NULL;
	struct store *st = store_open(db, &err);
	if (!st)
		die("store_open", err);
	json_t *none = json_array();
	if (store_run_create_owned(st, ASKING, getuid(), getgid(), &err) < 0 ||
	    store_run_enqueue(st, ASKING, "default", "question?", none, none, NULL, &err) < 0 ||
	    store_run_transition(st, ASKING, RUNSTATE_QUEUED, RUNSTATE_RUNNING, NULL, &err) < 0 ||
	    store_run_transition(st, ASKING, RUNSTATE_RUNNING, RUNSTATE_WAITING_FOR_INPUT, NULL,
				 &err) < 0)
		die("cannot make the waiting run", err);
	json_decref(none);
	store_close(st);
	_exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *tmp = getenv("TMPDIR");
	snprintf(root, sizeof root, "%s/skillfs-fuzz-runs.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root))
		die("mkdtemp", root);
	atexit(cleanup);
	sub("skills");
	sub("skills/alpha");
	sub("skills/beta");
	sub("work");
	sub("state");
	put("skills/alpha/SKILL.md", "---\nname: alpha\ndescription: a skill\n---\nAlpha.\n");
	put("skills/beta/SKILL.md", "---\nname: beta\ndescription: another\n---\nBeta.\n");
	put("config.yaml", "sources:\n  - path: skills\n    trust: first_party\n"
			   "model: {provider: echo}\n"
			   "runs: {workers: 1, workdir_roots: [work]}\n"
			   "configurations:\n  default: {skills: [alpha]}\n"
			   "  other: {skills: [alpha, beta]}\n");
	char cfg[512], db[512];
	snprintf(cfg, sizeof cfg, "%s/config.yaml", root);
	snprintf(db, sizeof db, "%s/state/state.db", root);
	make_asking_run(db);
	struct engine_options opt = { .config_path = cfg };
	char *err = NULL;
	engine = engine_open(&opt, &err);
	if (!engine)
		die("engine_open", err);
	if (runs_attach(engine, db, &err) < 0)
		die("runs_attach", err);
	enum runstate s;
	if (runs_state(engine_runs(engine), ASKING, &s) < 0 || s != RUNSTATE_WAITING_FOR_INPUT)
		die("the run does not wait for input", ASKING);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct runs *r = engine_runs(engine);
	char id[32];
	snprintf(id, sizeof id, "f%lu", serial++);
	if (runs_create(r, id, getuid(), getgid()) < 0)
		die("runs_create", id);
	size_t i = 0;
	while (i + 3 <= size) {
		unsigned op = data[i];
		size_t len = data[i + 1];
		off_t off = data[i + 2];
		i += 3;
		if (len > size - i)
			len = size - i;
		const char *name = files[op & 7];
		const char *run = strcmp(name, "input") == 0 ? ASKING : id;
		const char *bytes = (const char *)data + i;
		i += len;
		switch ((op >> 3) & 3) {
		case 0:
			runs_write(r, run, name, bytes, len, 0);
			break;
		case 1:
			runs_write(r, run, name, bytes, len, off);
			break;
		case 2:
			runs_truncate(r, run, name, off);
			break;
		case 3:
			/* A close of prompt would start the run, and one of
			 * input answer the waiting run: neither is a write. */
			if (strcmp(name, "prompt") != 0 && strcmp(name, "input") != 0) {
				uint64_t t = runs_open_writer(r, run, name);
				runs_close_writer(r, run, name, t, false);
				runs_close_writer(r, run, name, t, true);
			}
			break;
		}
	}
	for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
		struct run_file f = { 0 };
		const char *run = strcmp(files[k], "input") == 0 ? ASKING : id;
		if (runs_stat_file(r, run, files[k], &f) == 0)
			buf_free(&f.data);
	}
	runs_truncate(r, ASKING, "input", 0);
	int rc = runs_remove(r, id, getuid());
	if (rc < 0 && rc != -EBUSY)
		die("runs_remove", strerror(-rc));
	/* A run a ctl write started cannot be removed now: cancel it, then
	 * wait for it to settle. */
	while (rc == -EBUSY) {
		runs_write(r, id, "ctl", "cancel\n", 7, 0);
		usleep(1000);
		rc = runs_remove(r, id, getuid());
	}
	enum runstate s;
	if (runs_state(r, ASKING, &s) < 0 || s != RUNSTATE_WAITING_FOR_INPUT)
		die("the waiting run moved on", ASKING);
	return 0;
}
