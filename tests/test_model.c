/* Tests of core/proc (the process runner) and core/model (the model
 * providers echo, command and openai, and reply normalisation). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "model.h"
#include "model_stream.h"
#include "proc.h"

/* ---- shared helpers ---------------------------------------------------- */

struct fixture {
	char dir[PATH_MAX];
	char fake[PATH_MAX]; /* the fake_model program */
	int nfiles;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void find_fake_model(char *out, size_t n)
{
	const char *env = getenv("FAKE_MODEL");
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return;
	}
	/* Built next to this test. */
	char self[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
	if (l < 0)
		l = 0;
	self[l] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	struct buf b = { 0 };
	if (buf_printf(&b, "%s/fake_model", self) == 0)
		snprintf(out, n, "%s", b.data);
	buf_free(&b);
}

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(f->dir, sizeof f->dir, "%s/skillfs-model-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	find_fake_model(f->fake, sizeof f->fake);
	*state = f;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX + 32];
	for (int i = 0; i < f->nfiles; i++) {
		snprintf(p, sizeof p, "%s/script-%d.json", f->dir, i);
		unlink(p);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Writes a script file for the fake model; returns its path (static per
 * fixture slot, valid until teardown). */
static const char *write_script(struct fixture *f, const char *json)
{
	static char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/script-%d.json", f->dir, f->nfiles++);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	assert_true(fputs(json, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	return path;
}

static bool contains(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

/* ---- proc -------------------------------------------------------------- */

static int run_argv(struct proc_result *res, int timeout_ms, size_t cap, const char *a0,
		    const char *a1, const char *a2)
{
	const char *argv[] = { a0, a1, a2, NULL };
	struct proc_spec spec = { .argv = argv, .timeout_ms = timeout_ms, .output_max = cap };
	return proc_run(&spec, res);
}

static void test_proc_exit_codes(void **state)
{
	(void)state;
	struct proc_result res;
	assert_int_equal(run_argv(&res, 5000, 1024, "sh", "-c", "exit 7"), 0);
	assert_int_equal(res.exit_code, 7);
	assert_int_equal(res.signal, 0);
	assert_false(res.timed_out);
	proc_result_free(&res);

	assert_int_equal(run_argv(&res, 5000, 1024, "true", NULL, NULL), 0);
	assert_int_equal(res.exit_code, 0);
	proc_result_free(&res);

	assert_int_equal(run_argv(&res, 5000, 1024, "sh", "-c", "kill -TERM $$"), 0);
	assert_int_equal(res.exit_code, -1);
	assert_int_equal(res.signal, SIGTERM);
	proc_result_free(&res);
}

static void test_proc_captures_stdout_and_stderr(void **state)
{
	(void)state;
	struct proc_result res;
	assert_int_equal(run_argv(&res, 5000, 1024, "sh", "-c", "printf out; printf err >&2"), 0);
	assert_string_equal(res.out.data, "out");
	assert_string_equal(res.err.data, "err");
	assert_false(res.out_truncated);
	proc_result_free(&res);

	const char *argv[] = { "sh", "-c", "printf a; printf b >&2; printf c", NULL };
	struct proc_spec spec = { .argv = argv, .timeout_ms = 5000, .output_max = 1024,
				  .merge_stderr = true };
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_int_equal(res.out.len, 3);
	assert_true(contains(res.out.data, "a") && contains(res.out.data, "b") &&
		    contains(res.out.data, "c"));
	assert_int_equal(res.err.len, 0);
	proc_result_free(&res);
}

static void test_proc_output_cap_sets_truncated_and_child_finishes(void **state)
{
	(void)state;
	struct proc_result res;
	double t0 = now_s();
	assert_int_equal(run_argv(&res, 10000, 1000, "sh", "-c",
				  "head -c 3000000 /dev/zero; head -c 5000 /dev/zero >&2; exit 4"),
			 0);
	assert_true(now_s() - t0 < 8);
	assert_false(res.timed_out);
	assert_int_equal(res.exit_code, 4); /* it ran to its end: never blocked */
	assert_int_equal(res.out.len, 1000);
	assert_true(res.out_truncated);
	assert_int_equal(res.err.len, 1000);
	assert_true(res.err_truncated);
	proc_result_free(&res);

	assert_int_equal(run_argv(&res, 5000, 5, "printf", "12345", NULL), 0);
	assert_string_equal(res.out.data, "12345");
	assert_false(res.out_truncated);
	proc_result_free(&res);
}

static void test_proc_timeout_kills_sleep(void **state)
{
	(void)state;
	struct proc_result res;
	double t0 = now_s();
	assert_int_equal(run_argv(&res, 300, 1024, "sleep", "100", NULL), 0);
	double el = now_s() - t0;
	assert_true(el >= 0.25 && el < 3);
	assert_true(res.timed_out);
	assert_int_equal(res.signal, SIGKILL);
	assert_int_equal(res.exit_code, -1);
	proc_result_free(&res);
}

/* True when pid is gone or a zombie (killed, waiting for its new parent). */
static bool pid_dead(long pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%ld/stat", pid);
	FILE *fp = fopen(p, "r");
	if (!fp)
		return true;
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static bool wait_dead(long pid)
{
	for (int i = 0; i < 100; i++) {
		if (pid_dead(pid))
			return true;
		usleep(20000);
	}
	return false;
}

static void test_proc_timeout_kills_grandchild(void **state)
{
	(void)state;
	struct proc_result res;
	double t0 = now_s();
	assert_int_equal(run_argv(&res, 500, 1024, "sh", "-c", "sleep 100 & echo $!; sleep 100"), 0);
	assert_true(now_s() - t0 < 3);
	assert_true(res.timed_out);
	long gpid = strtol(res.out.data ? res.out.data : "0", NULL, 10);
	assert_true(gpid > 1);
	assert_true(wait_dead(gpid));
	proc_result_free(&res);
}

static void test_proc_group_killed_after_leader_exits(void **state)
{
	(void)state;
	struct proc_result res;
	double t0 = now_s();
	/* The background sleep keeps stdout open: proc_run must not wait for
	 * it, and must not leave it running. */
	assert_int_equal(run_argv(&res, 20000, 1024, "sh", "-c", "sleep 100 & echo $!; exit 3"), 0);
	assert_true(now_s() - t0 < 5);
	assert_false(res.timed_out);
	assert_int_equal(res.exit_code, 3);
	long gpid = strtol(res.out.data ? res.out.data : "0", NULL, 10);
	assert_true(gpid > 1);
	assert_true(wait_dead(gpid));
	proc_result_free(&res);
}

static void test_proc_big_stdin_through_cat(void **state)
{
	(void)state;
	size_t n = 1024 * 1024;
	char *data = malloc(n);
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)('a' + (i * 7) % 26);
	const char *argv[] = { "cat", NULL };
	struct proc_spec spec = { .argv = argv, .stdin_data = data, .stdin_len = n,
				  .timeout_ms = 20000, .output_max = 2 * n };
	struct proc_result res;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_int_equal(res.exit_code, 0);
	assert_int_equal(res.out.len, n);
	assert_memory_equal(res.out.data, data, n);
	proc_result_free(&res);

	/* A program that never reads its stdin: no SIGPIPE, no hang. */
	const char *argv2[] = { "true", NULL };
	spec.argv = argv2;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_int_equal(res.exit_code, 0);
	proc_result_free(&res);
	free(data);
}

static void test_proc_cwd(void **state)
{
	struct fixture *f = *state;
	char real[PATH_MAX];
	assert_non_null(realpath(f->dir, real));
	const char *argv[] = { "pwd", "-P", NULL };
	struct proc_spec spec = { .argv = argv, .cwd = f->dir, .timeout_ms = 5000,
				  .output_max = 4096 };
	struct proc_result res;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_int_equal(res.exit_code, 0);
	char want[PATH_MAX + 2];
	snprintf(want, sizeof want, "%s\n", real);
	assert_string_equal(res.out.data, want);
	proc_result_free(&res);

	spec.cwd = "/nonexistent-skillfs-dir";
	errno = 0;
	assert_int_equal(proc_run(&spec, &res), -1);
	assert_int_equal(errno, ENOENT);
	assert_true(contains(res.err.data, "cannot change directory"));
	proc_result_free(&res);
}

static void test_proc_envp_replaces_environment(void **state)
{
	(void)state;
	assert_int_equal(setenv("SKILLFS_TEST_SECRET", "leak", 1), 0);
	const char *argv[] = { "sh", "-c", "echo \"$FOO[$SKILLFS_TEST_SECRET]\"", NULL };
	const char *envp[] = { "FOO=bar", "PATH=/usr/bin:/bin", NULL };
	struct proc_spec spec = { .argv = argv, .envp = envp, .timeout_ms = 5000,
				  .output_max = 4096 };
	struct proc_result res;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_string_equal(res.out.data, "bar[]\n");
	proc_result_free(&res);

	spec.envp = NULL; /* inherit */
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_string_equal(res.out.data, "[leak]\n");
	proc_result_free(&res);
	unsetenv("SKILLFS_TEST_SECRET");
}

static void test_proc_missing_program_fails_to_start(void **state)
{
	(void)state;
	struct proc_result res;
	errno = 0;
	assert_int_equal(run_argv(&res, 5000, 1024, "skillfs-no-such-program", NULL, NULL), -1);
	assert_int_equal(errno, ENOENT);
	assert_true(contains(res.err.data, "cannot execute skillfs-no-such-program"));
	proc_result_free(&res);

	errno = 0;
	assert_int_equal(run_argv(&res, 5000, 1024, "/nonexistent/prog", NULL, NULL), -1);
	assert_int_equal(errno, ENOENT);
	proc_result_free(&res);

	const char *argv[] = { "true", NULL };
	struct proc_spec bad = { .argv = argv, .timeout_ms = 0, .output_max = 10 };
	assert_int_equal(proc_run(&bad, &res), -1);
	assert_int_equal(errno, EINVAL);
	proc_result_free(&res);
}

/* "Max file size   67108864   67108864   bytes" -> soft limit. */
static long limit_of(const char *limits, const char *name)
{
	const char *p = strstr(limits, name);
	if (!p)
		return -2;
	p += strlen(name);
	while (*p == ' ')
		p++;
	if (strncmp(p, "unlimited", 9) == 0)
		return -1;
	return strtol(p, NULL, 10);
}

static void test_proc_rlimits_applied_when_asked(void **state)
{
	(void)state;
	const char *argv[] = { "cat", "/proc/self/limits", NULL };
	struct proc_spec spec = { .argv = argv, .timeout_ms = 4500, .output_max = 65536,
				  .rlimits = true };
	struct proc_result res;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_int_equal(res.exit_code, 0);
	assert_int_equal(limit_of(res.out.data, "Max file size"), PROC_RLIMIT_FSIZE);
	assert_int_equal(limit_of(res.out.data, "Max core file size"), 0);
	assert_int_equal(limit_of(res.out.data, "Max cpu time"), 5);
	long as = limit_of(res.out.data, "Max address space");
	assert_true(as > 0 && as <= PROC_RLIMIT_AS);
	proc_result_free(&res);

	spec.rlimits = false;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_int_not_equal(limit_of(res.out.data, "Max file size"), PROC_RLIMIT_FSIZE);
	proc_result_free(&res);
}

static void test_proc_child_inherits_no_other_fds(void **state)
{
	(void)state;
	int fd = open("/dev/null", O_RDONLY); /* deliberately not O_CLOEXEC */
	assert_true(fd >= 3);
	char script[128];
	snprintf(script, sizeof script,
		 "if [ -e /proc/self/fd/%d ]; then echo leaked; else echo clean; fi", fd);
	struct proc_result res;
	assert_int_equal(run_argv(&res, 5000, 1024, "sh", "-c", script), 0);
	assert_string_equal(res.out.data, "clean\n");
	proc_result_free(&res);
	close(fd);
}

static void test_proc_started_program_waits_for_its_input(void **state)
{
	(void)state;
	/* cat prints what it is fed, however long after its start that is;
	 * the timeout counts from the feeding, not from the start. */
	const char *argv[] = { "cat", NULL };
	struct proc_spec spec = { .argv = argv, .timeout_ms = 300, .output_max = 1024 };
	struct proc_result res;
	struct proc *p = proc_start(&spec, &res);
	assert_non_null(p);
	proc_result_free(&res);
	usleep(500 * 1000);
	spec.stdin_data = "late input\n";
	spec.stdin_len = strlen(spec.stdin_data);
	assert_int_equal(proc_finish(p, &spec, &res), 0);
	assert_false(res.timed_out);
	assert_int_equal(res.exit_code, 0);
	assert_string_equal(res.out.data, "late input\n");
	proc_result_free(&res);

	/* A program that ends before it is fed: its output is kept, and
	 * feeding it raises no SIGPIPE. */
	const char *argv2[] = { "sh", "-c", "echo early; exit 4", NULL };
	spec.argv = argv2;
	p = proc_start(&spec, &res);
	assert_non_null(p);
	proc_result_free(&res);
	usleep(200 * 1000);
	assert_int_equal(proc_finish(p, &spec, &res), 0);
	assert_int_equal(res.exit_code, 4);
	assert_string_equal(res.out.data, "early\n");
	proc_result_free(&res);

	/* A program that cannot start says why at once. */
	const char *argv3[] = { "skillfs-no-such-program", NULL };
	spec.argv = argv3;
	errno = 0;
	assert_null(proc_start(&spec, &res));
	assert_int_equal(errno, ENOENT);
	assert_true(contains(res.err.data, "cannot execute skillfs-no-such-program"));
	proc_result_free(&res);
}

static void test_proc_discard_kills_the_started_group(void **state)
{
	struct fixture *f = *state;
	/* The leader notes the pid of a background sleep of its group, then
	 * waits for input that never comes. */
	char pidfile[PATH_MAX + 16], script[PATH_MAX + 64];
	snprintf(pidfile, sizeof pidfile, "%s/bg.pid", f->dir);
	snprintf(script, sizeof script, "sleep 100 & echo $! > '%s'; read line", pidfile);
	const char *argv[] = { "sh", "-c", script, NULL };
	struct proc_spec spec = { .argv = argv, .timeout_ms = 60000, .output_max = 1024 };
	struct proc_result res;
	struct proc *p = proc_start(&spec, &res);
	assert_non_null(p);
	proc_result_free(&res);
	long bg = 0;
	for (int i = 0; i < 500 && bg <= 1; i++) {
		FILE *fp = fopen(pidfile, "r");
		if (fp) {
			if (fscanf(fp, "%ld", &bg) != 1)
				bg = 0;
			fclose(fp);
		}
		if (bg <= 1)
			usleep(10000);
	}
	assert_true(bg > 1);
	assert_false(pid_dead(bg));
	proc_discard(p);
	assert_true(wait_dead(bg));
	unlink(pidfile);
	proc_discard(NULL);
}

static bool cancel_after(void *arg)
{
	return now_s() >= *(double *)arg;
}

static void test_proc_cancel_hook_stops_program(void **state)
{
	(void)state;
	double when = now_s() + 0.3;
	const char *argv[] = { "sleep", "100", NULL };
	struct proc_spec spec = { .argv = argv, .timeout_ms = 60000, .output_max = 1024,
				  .cancel = cancel_after, .cancel_arg = &when };
	struct proc_result res;
	assert_int_equal(proc_run(&spec, &res), 0);
	assert_true(now_s() - when < 2);
	assert_true(res.cancelled);
	assert_false(res.timed_out);
	assert_int_equal(res.signal, SIGKILL);
	proc_result_free(&res);
}

struct proc_job {
	int i;
	bool ok;
};

static void *proc_job_main(void *arg)
{
	struct proc_job *j = arg;
	char script[64], want[32];
	snprintf(script, sizeof script, "cat; echo %d; exit %d", j->i, j->i % 5);
	snprintf(want, sizeof want, "in%d\n%d\n", j->i, j->i);
	char in[16];
	int inlen = snprintf(in, sizeof in, "in%d\n", j->i);
	const char *argv[] = { "sh", "-c", script, NULL };
	struct proc_spec spec = { .argv = argv, .stdin_data = in, .stdin_len = (size_t)inlen,
				  .timeout_ms = 20000, .output_max = 4096 };
	j->ok = true;
	for (int k = 0; k < 10 && j->ok; k++) {
		struct proc_result res;
		j->ok = proc_run(&spec, &res) == 0 && res.exit_code == j->i % 5 &&
			res.out.data && strcmp(res.out.data, want) == 0;
		proc_result_free(&res);
	}
	return NULL;
}

static void test_proc_concurrent_calls(void **state)
{
	(void)state;
	enum { N = 8 };
	pthread_t t[N];
	struct proc_job jobs[N];
	for (int i = 0; i < N; i++) {
		jobs[i] = (struct proc_job){ .i = i };
		assert_int_equal(pthread_create(&t[i], NULL, proc_job_main, &jobs[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_true(jobs[i].ok);
	}
}

/* ---- requests ---------------------------------------------------------- */

static json_t *msgs_with_prompt(const char *prompt)
{
	json_t *m = json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content",
			      "You are a test.", "role", "user", "content", prompt);
	assert_non_null(m);
	return m;
}

static json_t *tools_named(const char *a, const char *b)
{
	json_t *t = json_pack(
		"[{s:s, s:{s:s, s:s, s:{s:s}}}, {s:s, s:{s:s, s:s, s:{s:s}}}]", "type",
		"function", "function", "name", a, "description", "first", "parameters", "type",
		"object", "type", "function", "function", "name", b, "description", "second",
		"parameters", "type", "object");
	assert_non_null(t);
	return t;
}

static int complete(struct model *m, json_t *msgs, json_t *tools, int turn,
		    struct model_reply *out, char **err)
{
	struct model_request req = { .messages = msgs, .tools = tools, .run_id = "run-1",
				     .chat_id = "main", .turn = turn };
	*err = NULL;
	return model_complete(m, &req, out, err);
}

static const char *content_of(const struct model_reply *r)
{
	return json_string_value(json_object_get(r->message, "content"));
}

/* ---- echo -------------------------------------------------------------- */

static void test_echo_states_prompt_and_offered_tools(void **state)
{
	(void)state;
	struct model_config mc = { .provider = "echo" };
	char *err = NULL;
	struct model *m = model_new(&mc, &err);
	assert_non_null(m);
	assert_string_equal(model_provider(m), "echo");
	json_t *msgs = msgs_with_prompt("hello there");
	json_t *tools = tools_named("read", "write");
	struct model_reply r;
	assert_int_equal(complete(m, msgs, tools, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "echo: hello there\ntools offered: read, write");
	assert_string_equal(json_string_value(json_object_get(r.message, "role")), "assistant");
	assert_null(json_object_get(r.message, "tool_calls"));
	model_reply_free(&r);
	json_decref(msgs);
	json_decref(tools);
	model_free(m);
}

static void test_R3_echo_without_tools_says_none(void **state)
{
	(void)state;
	struct model *m = model_new(NULL, NULL); /* no config: echo */
	assert_non_null(m);
	json_t *msgs = msgs_with_prompt("just talk");
	struct model_reply r;
	char *err;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "echo: just talk\ntools offered: none");
	model_reply_free(&r);
	json_t *empty = json_array();
	assert_int_equal(complete(m, msgs, empty, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "echo: just talk\ntools offered: none");
	model_reply_free(&r);
	json_decref(empty);
	json_decref(msgs);
	model_free(m);
}

/* ---- normalisation (custom provider) ----------------------------------- */

struct canned {
	const char *reply; /* JSON text */
	const char *fail;  /* error instead */
};

static int canned_complete(void *ctx, const struct model_request *req,
			   struct model_reply *out, char **err)
{
	(void)req;
	struct canned *c = ctx;
	if (c->fail) {
		*err = strdup(c->fail);
		return -1;
	}
	out->message = json_loads(c->reply, 0, NULL);
	return out->message ? 0 : -1;
}

static const struct model_ops canned_ops = { .name = "canned", .complete = canned_complete };

static void test_normalise_arguments_object_becomes_string_and_ids_generated(void **state)
{
	(void)state;
	struct canned c = {
		.reply = "{\"tool_calls\":[{\"function\":{\"name\":\"read\","
			 "\"arguments\":{\"path\":\"a.txt\"}}},"
			 "{\"id\":\"x1\",\"type\":\"function\",\"function\":{\"name\":\"bash\","
			 "\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}},"
			 "{\"id\":\"x1\",\"function\":{\"name\":\"write\"}}]}"
	};
	struct model *m = model_new_custom(&canned_ops, &c);
	assert_non_null(m);
	assert_string_equal(model_provider(m), "canned");
	json_t *msgs = msgs_with_prompt("go");
	struct model_reply r;
	char *err;
	assert_int_equal(complete(m, msgs, NULL, 7, &r, &err), 0);
	json_t *calls = json_object_get(r.message, "tool_calls");
	assert_int_equal(json_array_size(calls), 3);
	json_t *c0 = json_array_get(calls, 0), *c1 = json_array_get(calls, 1),
	       *c2 = json_array_get(calls, 2);
	assert_string_equal(json_string_value(json_object_get(c0, "id")), "call_7_0");
	assert_string_equal(json_string_value(json_object_get(c0, "type")), "function");
	json_t *a0 = json_object_get(json_object_get(c0, "function"), "arguments");
	assert_true(json_is_string(a0));
	assert_string_equal(json_string_value(a0), "{\"path\":\"a.txt\"}");
	assert_string_equal(json_string_value(json_object_get(c1, "id")), "x1");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(c1, "function"), "arguments")),
		"{\"command\":\"ls\"}");
	/* duplicate id replaced; missing arguments become "{}" */
	assert_string_equal(json_string_value(json_object_get(c2, "id")), "call_7_2");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(c2, "function"), "arguments")),
		"{}");
	assert_true(json_is_null(json_object_get(r.message, "content")));
	assert_string_equal(json_string_value(json_object_get(r.message, "role")), "assistant");
	model_reply_free(&r);
	json_decref(msgs);
	model_free(m);
}

static void test_normalise_rejects_bad_messages(void **state)
{
	(void)state;
	static const char *bad[] = {
		"{\"role\":\"user\",\"content\":\"hi\"}",
		"{\"role\":\"assistant\",\"content\":42}",
		"{\"role\":\"assistant\",\"tool_calls\":{}}",
		"{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}",
		"{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"web\",\"function\":{\"name\":\"x\"}}]}",
		"[1,2]",
	};
	char *err = NULL;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *v = json_loads(bad[i], 0, NULL);
		assert_non_null(v);
		json_t *n = model_normalise_message(v, 1, &err);
		assert_null(n);
		assert_true(contains(err, "model reply"));
		free(err);
		err = NULL;
		json_decref(v);
	}
	/* Empty content with no calls becomes "", text parts are joined,
	 * extra fields are dropped. */
	json_t *v = json_loads("{\"role\":\"assistant\",\"content\":null,\"refusal\":null}", 0, NULL);
	json_t *n = model_normalise_message(v, 1, &err);
	assert_non_null(n);
	assert_string_equal(json_string_value(json_object_get(n, "content")), "");
	assert_null(json_object_get(n, "refusal"));
	json_decref(n);
	json_decref(v);
	v = json_loads("{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
		       "\"text\":\"b\"}]}", 0, NULL);
	n = model_normalise_message(v, 1, &err);
	assert_non_null(n);
	assert_string_equal(json_string_value(json_object_get(n, "content")), "ab");
	json_decref(n);
	json_decref(v);
}

static void test_custom_provider_error_is_passed_on(void **state)
{
	(void)state;
	struct canned c = { .fail = "canned failure" };
	struct model *m = model_new_custom(&canned_ops, &c);
	json_t *msgs = msgs_with_prompt("go");
	struct model_reply r;
	char *err;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_string_equal(err, "canned failure");
	assert_null(r.message);
	free(err);
	/* A request without messages is refused before the provider. */
	struct model_request req = { .messages = NULL };
	assert_int_equal(model_complete(m, &req, &r, &err), -1);
	assert_non_null(err);
	free(err);
	json_decref(msgs);
	model_free(m);
}

/* ---- command ----------------------------------------------------------- */

static struct model *command_model(struct fixture *f, const char *script, int timeout)
{
	struct model_config mc = { .provider = "command", .model = "fake-1", .timeout = timeout };
	assert_int_equal(strlist_add(&mc.command, f->fake), 0);
	if (script)
		assert_int_equal(strlist_add(&mc.command, script), 0);
	char *err = NULL;
	struct model *m = model_new(&mc, &err);
	if (!m)
		fail_msg("model_new: %s", err ? err : "?");
	strlist_free(&mc.command);
	return m;
}

static void test_R3_command_request_carries_tools_only_when_given(void **state)
{
	struct fixture *f = *state;
	struct model *m = command_model(f, NULL, 20);
	json_t *msgs = msgs_with_prompt("list files");
	json_t *tools = tools_named("read", "bash");
	json_t *empty = json_array();
	struct model_reply r;
	char *err;

	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "echo: list files\ntools: no");
	model_reply_free(&r);

	assert_int_equal(complete(m, msgs, empty, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "echo: list files\ntools: no");
	model_reply_free(&r);

	assert_int_equal(complete(m, msgs, tools, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "echo: list files\ntools: yes");
	model_reply_free(&r);

	json_decref(msgs);
	json_decref(tools);
	json_decref(empty);
	model_free(m);
}

static void test_command_request_shape_has_model_messages_metadata(void **state)
{
	struct fixture *f = *state;
	struct model *m = command_model(f, write_script(f, "[{\"dump_request\":true}]"), 20);
	json_t *msgs = msgs_with_prompt("shape");
	json_t *tools = tools_named("read", "write");
	struct model_reply r;
	char *err;
	assert_int_equal(complete(m, msgs, tools, 1, &r, &err), 0);
	json_t *req = json_loads(content_of(&r), 0, NULL);
	assert_non_null(req);
	assert_string_equal(json_string_value(json_object_get(req, "model")), "fake-1");
	assert_true(json_equal(json_object_get(req, "messages"), msgs));
	assert_true(json_equal(json_object_get(req, "tools"), tools));
	json_t *meta = json_object_get(req, "metadata");
	assert_string_equal(json_string_value(json_object_get(meta, "run")), "run-1");
	assert_string_equal(json_string_value(json_object_get(meta, "chat_id")), "main");
	assert_int_equal(json_integer_value(json_object_get(meta, "turn")), 1);
	model_reply_free(&r);

	/* Tools given as text encoded once make the same request. */
	char *tools_text = json_dumps(tools, JSON_COMPACT);
	assert_non_null(tools_text);
	struct model_request with_text = { .messages = msgs, .tools = tools,
					   .tools_text = tools_text, .run_id = "run-1",
					   .chat_id = "main", .turn = 1 };
	assert_int_equal(model_complete(m, &with_text, &r, &err), 0);
	json_t *req2 = json_loads(content_of(&r), 0, NULL);
	assert_non_null(req2);
	assert_true(json_equal(req2, req));
	json_decref(req2);
	free(tools_text);
	json_decref(req);
	model_reply_free(&r);
	json_decref(msgs);
	json_decref(tools);
	model_free(m);
}

static void test_command_chat_completion_and_bare_replies(void **state)
{
	struct fixture *f = *state;
	const char *script = write_script(
		f,
		"[{\"reply\":{\"id\":\"cmpl-1\",\"object\":\"chat.completion\",\"choices\":[{"
		"\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"from choices\"},"
		"\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
		"\"completion_tokens\":2,\"total_tokens\":5}}},"
		" {\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\","
		"\"function\":{\"name\":\"read\",\"arguments\":{\"path\":\"x\"}}}]},"
		" {\"role\":\"assistant\",\"content\":\"bare\"}]");
	struct model *m = command_model(f, script, 20);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err;

	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "from choices");
	assert_non_null(r.usage);
	assert_int_equal(json_integer_value(json_object_get(r.usage, "total_tokens")), 5);
	model_reply_free(&r);

	assert_int_equal(complete(m, msgs, NULL, 2, &r, &err), 0);
	json_t *call = json_array_get(json_object_get(r.message, "tool_calls"), 0);
	assert_string_equal(json_string_value(json_object_get(call, "id")), "call_2_0");
	json_t *fn = json_object_get(call, "function");
	assert_string_equal(json_string_value(json_object_get(fn, "name")), "read");
	assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"path\":\"x\"}");
	assert_null(r.usage);
	model_reply_free(&r);

	assert_int_equal(complete(m, msgs, NULL, 3, &r, &err), 0);
	assert_string_equal(content_of(&r), "bare");
	model_reply_free(&r);

	/* past the end of the script: the fake model fails, naming the turn */
	assert_int_equal(complete(m, msgs, NULL, 4, &r, &err), -1);
	assert_true(contains(err, "exited with status 2"));
	assert_true(contains(err, "no reply scripted for turn: 4"));
	free(err);
	json_decref(msgs);
	model_free(m);
}

static void test_command_script_by_chat_prefix(void **state)
{
	struct fixture *f = *state;
	const char *script = write_script(
		f, "{\"*\":[{\"content\":\"main answer\"}],"
		   "\"skill-\":[{\"content\":\"sub answer\"}]}");
	struct model *m = command_model(f, script, 20);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err;
	struct model_request req = { .messages = msgs, .chat_id = "skill-pdf-123", .turn = 1 };
	assert_int_equal(model_complete(m, &req, &r, &err), 0);
	assert_string_equal(content_of(&r), "sub answer");
	model_reply_free(&r);
	req.chat_id = "main";
	assert_int_equal(model_complete(m, &req, &r, &err), 0);
	assert_string_equal(content_of(&r), "main answer");
	model_reply_free(&r);
	json_decref(msgs);
	model_free(m);
}

static void expect_command_error(struct fixture *f, const char *script_json, int timeout,
				 const char *want1, const char *want2, double max_s)
{
	struct model *m = command_model(f, write_script(f, script_json), timeout);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	double t0 = now_s();
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(now_s() - t0 < max_s);
	assert_null(r.message);
	assert_non_null(err);
	if (!contains(err, want1) || (want2 && !contains(err, want2)))
		fail_msg("error '%s' lacks '%s' / '%s'", err, want1, want2 ? want2 : "");
	free(err);
	json_decref(msgs);
	model_free(m);
}

static void test_command_nonzero_exit_reports_stderr(void **state)
{
	expect_command_error(*state, "[{\"exit\":3,\"stderr\":\"  quota exhausted\\n\"}]", 20,
			     "model command exited with status 3: quota exhausted", NULL, 10);
}

static void test_command_timeout(void **state)
{
	expect_command_error(*state, "[{\"stderr\":\"thinking\",\"sleep_ms\":30000}]", 1,
			     "model command timed out after 1 s", NULL, 5);
}

static void test_command_invalid_json(void **state)
{
	expect_command_error(*state, "[{\"raw\":\"not json\",\"stderr\":\"oops\"}]", 20,
			     "model command printed invalid JSON", "output starts: not json", 10);
}

static void test_command_oversized_output(void **state)
{
	expect_command_error(*state, "[{\"big\":5000000}]", 20, "printed more than", NULL, 10);
}

static void test_command_reply_of_neither_shape(void **state)
{
	expect_command_error(*state, "[{\"reply\":{\"answer\":42}}]", 20,
			     "neither a chat completion nor an assistant message", NULL, 10);
	expect_command_error(*state, "[{\"reply\":{\"choices\":[]}}]", 20,
			     "without choices[0].message", NULL, 10);
	expect_command_error(*state, "[{\"reply\":{\"error\":{\"message\":\"model overloaded\"}}}]",
			     20, "model overloaded", NULL, 10);
	expect_command_error(*state, "[{\"raw\":\"\"}]", 20, "printed nothing", NULL, 10);
}

/* The pids the fake model noted in path as it started, in order. */
static int started_pids(const char *path, long *pids, int max)
{
	FILE *fp = fopen(path, "r");
	int n = 0;
	if (!fp)
		return 0;
	while (n < max && fscanf(fp, "%ld", &pids[n]) == 1)
		n++;
	fclose(fp);
	return n;
}

static void test_command_prepare_starts_the_program_ahead_of_the_call(void **state)
{
	struct fixture *f = *state;
	char started[PATH_MAX + 16];
	snprintf(started, sizeof started, "%s/started", f->dir);
	unlink(started);
	assert_int_equal(setenv("FAKE_MODEL_STARTED", started, 1), 0);
	struct model *m = command_model(
		f, write_script(f, "[{\"dump_request\":true},{\"dump_request\":true}]"), 1);
	json_t *msgs = msgs_with_prompt("prepared");
	struct model_reply r;
	char *err = NULL;
	long pids[8];

	model_prepare(m);
	model_prepare(m); /* one program waits at a time */
	for (int i = 0; i < 500 && started_pids(started, pids, 8) == 0; i++)
		usleep(10000);
	assert_int_equal(started_pids(started, pids, 8), 1);
	assert_false(pid_dead(pids[0]));
	/* Longer than the 1 s timeout: it counts from the call. */
	usleep(1200 * 1000);
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	json_t *req = json_loads(content_of(&r), 0, NULL);
	assert_non_null(req);
	assert_true(json_equal(json_object_get(req, "messages"), msgs));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(req, "metadata"),
							    "turn")), 1);
	json_decref(req);
	model_reply_free(&r);
	/* The call fed the waiting program: no other started. */
	assert_int_equal(started_pids(started, pids, 8), 1);
	assert_true(pid_dead(pids[0]));

	/* Unprepared, a call starts its own. */
	assert_int_equal(complete(m, msgs, NULL, 2, &r, &err), 0);
	model_reply_free(&r);
	assert_int_equal(started_pids(started, pids, 8), 2);

	/* Prepared and never called: freeing the model ends it. */
	model_prepare(m);
	for (int i = 0; i < 500 && started_pids(started, pids, 8) < 3; i++)
		usleep(10000);
	assert_int_equal(started_pids(started, pids, 8), 3);
	assert_false(pid_dead(pids[2]));
	model_free(m);
	assert_true(wait_dead(pids[2]));
	unsetenv("FAKE_MODEL_STARTED");
	unlink(started);
	json_decref(msgs);
}

static void test_command_missing_program(void **state)
{
	(void)state;
	struct model_config mc = { .provider = "command", .timeout = 5 };
	assert_int_equal(strlist_add(&mc.command, "/nonexistent/skillfs-model"), 0);
	char *err = NULL;
	struct model *m = model_new(&mc, &err);
	assert_non_null(m);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	model_prepare(m); /* silent: the call says what is wrong */
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(contains(err, "cannot run model command"));
	assert_true(contains(err, "/nonexistent/skillfs-model"));
	free(err);
	json_decref(msgs);
	model_free(m);
	strlist_free(&mc.command);
}

static void test_model_new_rejects_bad_config(void **state)
{
	(void)state;
	char *err = NULL;
	struct model_config mc = { .provider = "command" };
	assert_null(model_new(&mc, &err));
	assert_true(contains(err, "model.command is empty"));
	free(err);
	mc.provider = "telepathy";
	assert_null(model_new(&mc, &err));
	assert_true(contains(err, "unknown model provider 'telepathy'"));
	free(err);
	mc.provider = "openai";
	assert_null(model_new(&mc, &err));
	assert_true(contains(err, "model.base_url"));
	free(err);
	mc.base_url = "ftp://example";
	assert_null(model_new(&mc, &err));
	assert_true(contains(err, "http://"));
	free(err);
}

struct model_job {
	struct model *m;
	int i;
	bool ok;
};

static void *model_job_main(void *arg)
{
	struct model_job *j = arg;
	char prompt[32], want[64];
	snprintf(prompt, sizeof prompt, "job %d", j->i);
	snprintf(want, sizeof want, "echo: job %d\ntools: no", j->i);
	json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", prompt);
	j->ok = msgs != NULL;
	for (int k = 0; k < 5 && j->ok; k++) {
		struct model_request req = { .messages = msgs, .turn = k + 1 };
		struct model_reply r;
		char *err = NULL;
		j->ok = model_complete(j->m, &req, &r, &err) == 0 && content_of(&r) &&
			strcmp(content_of(&r), want) == 0;
		model_reply_free(&r);
		free(err);
	}
	json_decref(msgs);
	return NULL;
}

static void test_command_concurrent_calls(void **state)
{
	struct fixture *f = *state;
	struct model *m = command_model(f, NULL, 20);
	enum { N = 6 };
	pthread_t t[N];
	struct model_job jobs[N];
	for (int i = 0; i < N; i++) {
		jobs[i] = (struct model_job){ .m = m, .i = i };
		assert_int_equal(pthread_create(&t[i], NULL, model_job_main, &jobs[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_true(jobs[i].ok);
	}
	model_free(m);
}

/* ---- openai, against a loopback HTTP server ---------------------------- */

#define MAX_EXCHANGES 8

struct canned_http {
	int status;
	const char *headers; /* extra header lines, each ending in \r\n */
	const char *body;
	const char *type; /* Content-Type; NULL: application/json */
};

struct http_server {
	int fd;
	int port;
	pthread_t thread;
	struct canned_http answers[MAX_EXCHANGES];
	int nanswers;
	char *requests[MAX_EXCHANGES]; /* head + body of each request served */
	int served;
};

static char *read_http_request(int c)
{
	struct buf b = { 0 };
	char chunk[4096];
	size_t head_end = 0, want = 0;
	for (;;) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		if (poll(&p, 1, 10000) <= 0)
			break;
		ssize_t n = read(c, chunk, sizeof chunk);
		if (n <= 0)
			break;
		if (buf_append(&b, chunk, (size_t)n) < 0)
			break;
		if (!head_end) {
			char *e = strstr(b.data, "\r\n\r\n");
			if (!e)
				continue;
			head_end = (size_t)(e - b.data) + 4;
			const char *cl = strcasestr(b.data, "\r\ncontent-length:");
			want = head_end + (cl ? strtoul(cl + 17, NULL, 10) : 0);
		}
		if (b.len >= want)
			return buf_steal(&b, NULL);
	}
	buf_free(&b);
	return NULL;
}

static void *http_server_main(void *arg)
{
	struct http_server *s = arg;
	while (s->served < s->nanswers) {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		if (poll(&p, 1, 15000) <= 0)
			break; /* nobody came: give up rather than hang */
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			break;
		char *req = read_http_request(c);
		const struct canned_http *a = &s->answers[s->served];
		s->requests[s->served++] = req;
		char head[512];
		size_t blen = strlen(a->body);
		int hl = snprintf(head, sizeof head,
				  "HTTP/1.1 %d Canned\r\nContent-Type: %s\r\n"
				  "Content-Length: %zu\r\nConnection: close\r\n%s\r\n",
				  a->status, a->type ? a->type : "application/json", blen,
				  a->headers ? a->headers : "");
		ssize_t w = write(c, head, (size_t)hl);
		if (w == hl && blen)
			w = write(c, a->body, blen);
		(void)w;
		close(c);
	}
	return NULL;
}

static void http_start(struct http_server *s)
{
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(s->fd, 8), 0);
	socklen_t al = sizeof a;
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, http_server_main, s), 0);
}

/* Waits for the server to finish its answers; the recorded requests stay
 * readable until http_free. */
static void http_stop(struct http_server *s)
{
	pthread_join(s->thread, NULL);
	close(s->fd);
}

static void http_free(struct http_server *s)
{
	for (int i = 0; i < s->served; i++)
		free(s->requests[i]);
}

/* The JSON body of a recorded request. */
static json_t *request_body(const char *req)
{
	const char *b = req ? strstr(req, "\r\n\r\n") : NULL;
	return b ? json_loads(b + 4, 0, NULL) : NULL;
}

static struct model *openai_model(int port, const char *suffix, const char *key_env)
{
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1%s", port, suffix);
	struct model_config mc = { .provider = "openai", .base_url = url, .model = "gpt-test",
				   .api_key_env = (char *)key_env, .timeout = 10 };
	char *err = NULL;
	struct model *m = model_new(&mc, &err);
	if (!m)
		fail_msg("model_new: %s", err ? err : "?");
	assert_string_equal(model_provider(m), "openai");
	return m;
}

#define OK_BODY                                                                        \
	"{\"id\":\"c1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"     \
	"\"message\":{\"role\":\"assistant\",\"content\":\"hello from http\"},"        \
	"\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,"                 \
	"\"completion_tokens\":3,\"total_tokens\":4}}"

static void test_R3_openai_success_without_tools_has_no_tools_field(void **state)
{
	(void)state;
	setenv("SKILLFS_TEST_KEY", "sk-test-123", 1);
	struct http_server s = { .nanswers = 2,
				 .answers = { { 200, NULL, OK_BODY }, { 200, NULL, OK_BODY } } };
	http_start(&s);
	struct model *m = openai_model(s.port, "/", "SKILLFS_TEST_KEY");
	json_t *msgs = msgs_with_prompt("hi over http");
	json_t *tools = tools_named("read", "write");
	struct model_reply r;
	char *err = NULL;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	assert_string_equal(content_of(&r), "hello from http");
	assert_int_equal(json_integer_value(json_object_get(r.usage, "total_tokens")), 4);
	model_reply_free(&r);
	assert_int_equal(complete(m, msgs, tools, 2, &r, &err), 0);
	model_reply_free(&r);
	model_free(m);
	http_stop(&s);

	assert_int_equal(s.served, 2);
	assert_true(contains(s.requests[0], "POST /v1/chat/completions HTTP/1.1\r\n"));
	assert_non_null(strcasestr(s.requests[0], "\r\nAuthorization: Bearer sk-test-123\r\n"));
	assert_non_null(strcasestr(s.requests[0], "\r\nContent-Type: application/json\r\n"));
	json_t *b0 = request_body(s.requests[0]);
	assert_non_null(b0);
	assert_string_equal(json_string_value(json_object_get(b0, "model")), "gpt-test");
	assert_true(json_equal(json_object_get(b0, "messages"), msgs));
	assert_null(json_object_get(b0, "tools"));
	json_t *b1 = request_body(s.requests[1]);
	assert_non_null(b1);
	assert_true(json_equal(json_object_get(b1, "tools"), tools));
	json_decref(b0);
	json_decref(b1);
	http_free(&s);
	json_decref(msgs);
	json_decref(tools);
	unsetenv("SKILLFS_TEST_KEY");
}

static void test_openai_no_authorization_when_key_variable_unset(void **state)
{
	(void)state;
	unsetenv("SKILLFS_TEST_UNSET_KEY");
	struct http_server s = { .nanswers = 1, .answers = { { 200, NULL, OK_BODY } } };
	http_start(&s);
	struct model *m = openai_model(s.port, "", "SKILLFS_TEST_UNSET_KEY");
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	model_reply_free(&r);
	model_free(m);
	http_stop(&s);
	assert_int_equal(s.served, 1);
	assert_null(strcasestr(s.requests[0], "Authorization:"));
	http_free(&s);
	json_decref(msgs);
}

static void test_openai_retries_503_honouring_retry_after(void **state)
{
	(void)state;
	setenv("SKILLFS_MODEL_BACKOFF_MS", "1", 1);
	struct http_server s = {
		.nanswers = 2,
		.answers = { { 503, "Retry-After: 1\r\n", "{\"error\":{\"message\":\"busy\"}}" },
			     { 200, NULL, OK_BODY } },
	};
	http_start(&s);
	struct model *m = openai_model(s.port, "", NULL);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	double t0 = now_s();
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), 0);
	double el = now_s() - t0;
	assert_true(el >= 1.0);
	assert_true(el < 5.0);
	assert_string_equal(content_of(&r), "hello from http");
	model_reply_free(&r);
	model_free(m);
	http_stop(&s);
	assert_int_equal(s.served, 2);
	http_free(&s);
	json_decref(msgs);
	unsetenv("SKILLFS_MODEL_BACKOFF_MS");
}

static void test_openai_400_reports_server_message_without_retry(void **state)
{
	(void)state;
	setenv("SKILLFS_MODEL_BACKOFF_MS", "1", 1);
	struct http_server s = {
		.nanswers = 1,
		.answers = { { 400, NULL,
			       "{\"error\":{\"message\":\"Invalid value for 'tools'\","
			       "\"type\":\"invalid_request_error\"}}" } },
	};
	http_start(&s);
	struct model *m = openai_model(s.port, "", NULL);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(contains(err, "HTTP 400"));
	assert_true(contains(err, "Invalid value for 'tools'"));
	assert_false(contains(err, "attempts"));
	free(err);
	model_free(m);
	http_stop(&s);
	assert_int_equal(s.served, 1);
	http_free(&s);
	json_decref(msgs);
	unsetenv("SKILLFS_MODEL_BACKOFF_MS");
}

static void test_openai_retries_exhausted_on_repeated_500(void **state)
{
	(void)state;
	setenv("SKILLFS_MODEL_BACKOFF_MS", "1", 1);
	struct http_server s = { .nanswers = MODEL_HTTP_MAX_RETRIES + 1 };
	for (int i = 0; i < s.nanswers; i++)
		s.answers[i] = (struct canned_http){ 500, NULL, "<html>internal oops</html>", NULL };
	http_start(&s);
	struct model *m = openai_model(s.port, "", NULL);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	double t0 = now_s();
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(now_s() - t0 < 5);
	assert_true(contains(err, "HTTP 500"));
	assert_true(contains(err, "after 5 attempts"));
	assert_true(contains(err, "internal oops")); /* not JSON: the body's start */
	free(err);
	model_free(m);
	http_stop(&s);
	assert_int_equal(s.served, MODEL_HTTP_MAX_RETRIES + 1);
	http_free(&s);
	json_decref(msgs);
	unsetenv("SKILLFS_MODEL_BACKOFF_MS");
}

static void test_openai_bad_success_bodies(void **state)
{
	(void)state;
	struct http_server s = { .nanswers = 2,
				 .answers = { { 200, NULL, "not json at all" },
					      { 200, NULL, "{\"choices\":[]}" } } };
	http_start(&s);
	struct model *m = openai_model(s.port, "", NULL);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(contains(err, "invalid JSON"));
	free(err);
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(contains(err, "no choices[0].message"));
	free(err);
	model_free(m);
	http_stop(&s);
	http_free(&s);
	json_decref(msgs);
}

static void test_openai_connection_refused_is_retried_then_reported(void **state)
{
	(void)state;
	setenv("SKILLFS_MODEL_BACKOFF_MS", "1", 1);
	/* A port that was just free and has no listener. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	socklen_t al = sizeof a;
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	struct model *m = openai_model(ntohs(a.sin_port), "", NULL);
	json_t *msgs = msgs_with_prompt("hi");
	struct model_reply r;
	char *err = NULL;
	assert_int_equal(complete(m, msgs, NULL, 1, &r, &err), -1);
	assert_true(contains(err, "cannot reach model server"));
	assert_true(contains(err, "after 5 attempts"));
	free(err);
	model_free(m);
	json_decref(msgs);
	unsetenv("SKILLFS_MODEL_BACKOFF_MS");
}

static void test_excerpt_sanitises_and_cuts(void **state)
{
	(void)state;
	struct buf b = { 0 };
	const char in[] = "  ok\x01\xff\xc3\xa9\r\nend  \n";
	assert_int_equal(model_append_excerpt(&b, in, sizeof in - 1, 100, false), 0);
	assert_string_equal(b.data, "ok??\xc3\xa9\nend");
	buf_free(&b);
	assert_int_equal(model_append_excerpt(&b, "abcdefgh", 8, 3, true), 0);
	assert_string_equal(b.data, "...fgh");
	buf_free(&b);
	assert_int_equal(model_append_excerpt(&b, "abcdefgh", 8, 3, false), 0);
	assert_string_equal(b.data, "abc...");
	buf_free(&b);
}


/* ---- streamed replies (server-sent events) ------------------------------ */

struct seen_texts {
	struct buf last; /* the text of the last call */
	int calls;
	int resets; /* calls with NULL */
};

static void on_partial(void *arg, const char *text, size_t len)
{
	struct seen_texts *t = arg;
	t->calls++;
	buf_free(&t->last);
	if (!text)
		t->resets++;
	else
		assert_int_equal(buf_append(&t->last, text, len), 0);
}

#define SSE_TEXT                                                                        \
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","             \
	"\"content\":\"Hel\"}}]}\r\n\r\n"                                                  \
	": keep-alive\n\n"                                                              \
	"event: message\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"      \
	"\"lo, str\"}}]}\n\n"                                                           \
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"eam\"},"             \
	"\"finish_reason\":\"stop\"}]}\n\n"                                             \
	"data: {\"choices\":[],\"usage\":{\"total_tokens\":7}}\n\n"                     \
	"data: [DONE]\n\n"

/* The parser takes the events however the body is cut into pieces. */
static void test_stream_assembles_text_across_any_split(void **state)
{
	(void)state;
	const char *body = SSE_TEXT;
	size_t len = strlen(body);
	for (size_t cut = 1; cut <= len; cut += 7) {
		struct seen_texts seen = { 0 };
		struct model_stream st;
		model_stream_init(&st, on_partial, &seen);
		for (size_t off = 0; off < len; off += cut)
			assert_int_equal(model_stream_feed(&st, body + off,
							   len - off < cut ? len - off : cut), 0);
		char *err = NULL;
		json_t *msg = model_stream_message(&st, &err);
		assert_null(err);
		assert_string_equal(json_string_value(json_object_get(msg, "content")),
				    "Hello, stream");
		assert_null(json_object_get(msg, "tool_calls"));
		assert_int_equal(json_integer_value(json_object_get(st.usage, "total_tokens")), 7);
		assert_true(st.done);
		assert_int_equal(seen.calls, 3); /* once per piece of text */
		assert_string_equal(seen.last.data, "Hello, stream");
		json_decref(msg);
		model_stream_free(&st);
		buf_free(&seen.last);
	}
}

/* Tool calls arrive as deltas by index: id and name once, arguments in
 * pieces; two calls interleaved. */
static void test_stream_assembles_tool_calls(void **state)
{
	(void)state;
	const char *body =
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c0\","
		"\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"\"}}]}}]}\n\n"
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c1\","
		"\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"path\\\"\"}}]}}]}\n\n"
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,"
		"\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\"}}]}}]}\n\n"
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,"
		"\"function\":{\"arguments\":\"\\\"ls\\\"}\"}}]}}]}\n\n"
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,"
		"\"function\":{\"arguments\":\":\\\"a\\\"}\"}}]}}]}\n\n"
		"data: [DONE]\n\n";
	struct model_stream st;
	model_stream_init(&st, NULL, NULL);
	assert_int_equal(model_stream_feed(&st, body, strlen(body)), 0);
	char *err = NULL;
	json_t *msg = model_stream_message(&st, &err);
	assert_null(err);
	json_t *calls = json_object_get(msg, "tool_calls");
	assert_int_equal(json_array_size(calls), 2);
	json_t *c0 = json_array_get(calls, 0), *c1 = json_array_get(calls, 1);
	assert_string_equal(json_string_value(json_object_get(c0, "id")), "c0");
	assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "function"),
								"name")), "bash");
	assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "function"),
								"arguments")), "{\"command\":\"ls\"}");
	assert_string_equal(json_string_value(json_object_get(c1, "id")), "c1");
	assert_string_equal(json_string_value(json_object_get(json_object_get(c1, "function"),
								"arguments")), "{\"path\":\"a\"}");
	json_decref(msg);
	model_stream_free(&st);
}

/* An error event, or a stream with nothing in it, is no reply. */
static void test_stream_error_event_and_empty_stream_fail(void **state)
{
	(void)state;
	const char *bodies[] = {
		"data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n"
		"data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
		"data: [DONE]\n\n",
		"",
	};
	const char *want[] = { "overloaded", "held no message", "without [DONE]" };
	for (size_t i = 0; i < 3; i++) {
		struct model_stream st;
		model_stream_init(&st, NULL, NULL);
		assert_int_equal(model_stream_feed(&st, bodies[i], strlen(bodies[i])), 0);
		char *err = NULL;
		assert_null(model_stream_message(&st, &err));
		assert_non_null(err);
		assert_non_null(strstr(err, want[i]));
		free(err);
		model_stream_free(&st);
	}
}

/* With a caller that takes the text as it comes, the request asks for a
 * stream; the reply is still the whole message, with its usage. A server
 * that answers with plain JSON anyway is read as before, and without a
 * caller for the text nothing asks for a stream. */
static void test_openai_streams_when_asked_and_falls_back_to_json(void **state)
{
	(void)state;
	struct http_server s = { .nanswers = 3,
				 .answers = { { 200, NULL, SSE_TEXT, "text/event-stream" },
					      { 200, NULL, OK_BODY, NULL },
					      { 200, NULL, OK_BODY, NULL } } };
	http_start(&s);
	struct model *m = openai_model(s.port, "", NULL);
	json_t *msgs = msgs_with_prompt("stream please");
	struct seen_texts seen = { 0 };
	struct model_request req = { .messages = msgs, .run_id = "run-1", .chat_id = "main",
				     .turn = 1, .partial = on_partial, .partial_arg = &seen };
	struct model_reply r;
	char *err = NULL;
	assert_int_equal(model_complete(m, &req, &r, &err), 0);
	assert_string_equal(content_of(&r), "Hello, stream");
	assert_int_equal(json_integer_value(json_object_get(r.usage, "total_tokens")), 7);
	assert_string_equal(seen.last.data, "Hello, stream");
	model_reply_free(&r);
	assert_int_equal(model_complete(m, &req, &r, &err), 0);
	assert_string_equal(content_of(&r), "hello from http");
	model_reply_free(&r);
	assert_int_equal(complete(m, msgs, NULL, 3, &r, &err), 0);
	model_reply_free(&r);
	model_free(m);
	http_stop(&s);
	json_t *b0 = request_body(s.requests[0]), *b2 = request_body(s.requests[2]);
	assert_true(json_is_true(json_object_get(b0, "stream")));
	assert_true(json_is_true(json_object_get(json_object_get(b0, "stream_options"),
						 "include_usage")));
	assert_non_null(strcasestr(s.requests[0], "\r\nAccept: text/event-stream"));
	assert_null(json_object_get(b2, "stream"));
	json_decref(b0);
	json_decref(b2);
	http_free(&s);
	buf_free(&seen.last);
	json_decref(msgs);
}

/* model.stream: false never asks for a stream. */
static void test_openai_stream_off_by_config(void **state)
{
	(void)state;
	struct http_server s = { .nanswers = 1, .answers = { { 200, NULL, OK_BODY, NULL } } };
	http_start(&s);
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", s.port);
	struct model_config mc = { .provider = "openai", .base_url = url, .timeout = 10,
				   .stream_off = true };
	char *err = NULL;
	struct model *m = model_new(&mc, &err);
	assert_non_null(m);
	json_t *msgs = msgs_with_prompt("no stream");
	struct seen_texts seen = { 0 };
	struct model_request req = { .messages = msgs, .turn = 1, .partial = on_partial,
				     .partial_arg = &seen };
	struct model_reply r;
	assert_int_equal(model_complete(m, &req, &r, &err), 0);
	model_reply_free(&r);
	model_free(m);
	http_stop(&s);
	json_t *b0 = request_body(s.requests[0]);
	assert_null(json_object_get(b0, "stream"));
	assert_int_equal(seen.calls, 0);
	json_decref(b0);
	http_free(&s);
	json_decref(msgs);
}

int main(void)
{
	char *err = NULL;
	if (model_global_init(&err) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_exit_codes),
		cmocka_unit_test(test_proc_captures_stdout_and_stderr),
		cmocka_unit_test(test_proc_output_cap_sets_truncated_and_child_finishes),
		cmocka_unit_test(test_proc_timeout_kills_sleep),
		cmocka_unit_test(test_proc_timeout_kills_grandchild),
		cmocka_unit_test(test_proc_group_killed_after_leader_exits),
		cmocka_unit_test(test_proc_big_stdin_through_cat),
		cmocka_unit_test(test_proc_cwd),
		cmocka_unit_test(test_proc_envp_replaces_environment),
		cmocka_unit_test(test_proc_missing_program_fails_to_start),
		cmocka_unit_test(test_proc_rlimits_applied_when_asked),
		cmocka_unit_test(test_proc_child_inherits_no_other_fds),
		cmocka_unit_test(test_proc_cancel_hook_stops_program),
		cmocka_unit_test(test_proc_started_program_waits_for_its_input),
		cmocka_unit_test(test_proc_discard_kills_the_started_group),
		cmocka_unit_test(test_proc_concurrent_calls),
		cmocka_unit_test(test_echo_states_prompt_and_offered_tools),
		cmocka_unit_test(test_R3_echo_without_tools_says_none),
		cmocka_unit_test(test_normalise_arguments_object_becomes_string_and_ids_generated),
		cmocka_unit_test(test_normalise_rejects_bad_messages),
		cmocka_unit_test(test_custom_provider_error_is_passed_on),
		cmocka_unit_test(test_R3_command_request_carries_tools_only_when_given),
		cmocka_unit_test(test_command_request_shape_has_model_messages_metadata),
		cmocka_unit_test(test_command_chat_completion_and_bare_replies),
		cmocka_unit_test(test_command_script_by_chat_prefix),
		cmocka_unit_test(test_command_nonzero_exit_reports_stderr),
		cmocka_unit_test(test_command_timeout),
		cmocka_unit_test(test_command_invalid_json),
		cmocka_unit_test(test_command_oversized_output),
		cmocka_unit_test(test_command_reply_of_neither_shape),
		cmocka_unit_test(test_command_prepare_starts_the_program_ahead_of_the_call),
		cmocka_unit_test(test_command_missing_program),
		cmocka_unit_test(test_model_new_rejects_bad_config),
		cmocka_unit_test(test_command_concurrent_calls),
		cmocka_unit_test(test_R3_openai_success_without_tools_has_no_tools_field),
		cmocka_unit_test(test_openai_no_authorization_when_key_variable_unset),
		cmocka_unit_test(test_openai_retries_503_honouring_retry_after),
		cmocka_unit_test(test_openai_400_reports_server_message_without_retry),
		cmocka_unit_test(test_openai_retries_exhausted_on_repeated_500),
		cmocka_unit_test(test_openai_bad_success_bodies),
		cmocka_unit_test(test_stream_assembles_text_across_any_split),
		cmocka_unit_test(test_stream_assembles_tool_calls),
		cmocka_unit_test(test_stream_error_event_and_empty_stream_fail),
		cmocka_unit_test(test_openai_streams_when_asked_and_falls_back_to_json),
		cmocka_unit_test(test_openai_stream_off_by_config),
		cmocka_unit_test(test_openai_connection_refused_is_retried_then_reported),
		cmocka_unit_test(test_excerpt_sanitises_and_cuts),
	};
	int r = cmocka_run_group_tests(tests, group_setup, group_teardown);
	model_global_cleanup();
	return r;
}
