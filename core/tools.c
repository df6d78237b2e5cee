#include "tools.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cmdline.h"
#include "config.h"
#include "proc.h"
#include "sandbox.h"
#include "workspace.h"

/* How a built-in tool is executed. */
enum tool_impl {
	IMPL_HERE,        /* tools_exec runs it */
	IMPL_ENGINE,      /* the agent loop handles it (run_skill, ask_user) */
	IMPL_UNAVAILABLE, /* not in this version */
};

/* One call being executed: the result text under construction. */
struct call {
	const char *tool;
	const struct tool_ctx *ctx;
	struct buf text;
	bool is_error;
	bool oom;
};

typedef void (*tool_fn)(struct call *c, json_t *args);

struct tool_def {
	const char *name;
	const char *description;
	const char *parameters; /* JSON Schema of the arguments object */
	enum tool_impl impl;
	tool_fn fn;
	bool process; /* starts programs: only with a usable sandbox */
};

static void exec_bash(struct call *c, json_t *args);
static void exec_read(struct call *c, json_t *args);
static void exec_write(struct call *c, json_t *args);
static void exec_edit(struct call *c, json_t *args);

#define STR(d) "{\"type\": \"string\", \"description\": \"" d "\"}"
#define OBJ(props, req)                                                     \
	"{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" \
	req "], \"additionalProperties\": false}"

static const struct tool_def defs[] = {
	{"bash",
	 "Run a shell command with /bin/bash -c in a sandbox whose working "
	 "directory is the run's workspace (" SANDBOX_WORKSPACE "), the only "
	 "place it may write. stdout and stderr are combined. The output is "
	 "capped and the command is killed after a timeout; the result ends "
	 "with the exit status, e.g. [exit 0]. When this run grants only "
	 "some commands, the command runs without a shell: no pipes, "
	 "redirection, variables or globbing.",
	 OBJ("\"command\": " STR("The command line to run."), "\"command\""),
	 IMPL_HERE, exec_bash, true},
	{"read",
	 "Read a UTF-8 text file in the run's workspace. Paths are relative "
	 "to the workspace. offset and limit select lines.",
	 OBJ("\"path\": " STR("File path, relative to the workspace.") ", "
	     "\"offset\": {\"type\": \"integer\", \"minimum\": 1, "
	     "\"description\": \"First line to return (1-based).\"}, "
	     "\"limit\": {\"type\": \"integer\", \"minimum\": 1, "
	     "\"description\": \"Number of lines to return.\"}",
	     "\"path\""),
	 IMPL_HERE, exec_read, false},
	{"edit",
	 "Replace old_string with new_string in a file in the workspace. "
	 "old_string must occur exactly once unless replace_all is true.",
	 OBJ("\"path\": " STR("File path, relative to the workspace.") ", "
	     "\"old_string\": " STR("The exact text to replace.") ", "
	     "\"new_string\": " STR("The replacement text.") ", "
	     "\"replace_all\": {\"type\": \"boolean\", \"description\": "
	     "\"Replace every occurrence (default false).\"}",
	     "\"path\", \"old_string\", \"new_string\""),
	 IMPL_HERE, exec_edit, false},
	{"write",
	 "Create or replace a file in the workspace with the given content. "
	 "Missing parent directories are created.",
	 OBJ("\"path\": " STR("File path, relative to the workspace.") ", "
	     "\"content\": " STR("The complete new content of the file."),
	     "\"path\", \"content\""),
	 IMPL_HERE, exec_write, false},
	{"webfetch",
	 "Fetch an http or https URL and return its content as text.",
	 OBJ("\"url\": " STR("The URL to fetch."), "\"url\""),
	 IMPL_UNAVAILABLE, NULL, false},
	{"python",
	 "Run Python code in the run's workspace and return its output.",
	 OBJ("\"code\": " STR("The Python program to run."), "\"code\""),
	 IMPL_UNAVAILABLE, NULL, true},
	{"terminal",
	 "Run a command with a restricted PATH in the run's workspace.",
	 OBJ("\"command\": " STR("The command line to run."), "\"command\""),
	 IMPL_UNAVAILABLE, NULL, true},
	{"run_skill",
	 "Run one of the available skills by name, with optional arguments.",
	 OBJ("\"name\": " STR("The skill's name.") ", "
	     "\"arguments\": " STR("Arguments or task for the skill."),
	     "\"name\""),
	 IMPL_ENGINE, NULL, false},
	{"learn_skill",
	 "Save a new skill so that later runs can use it.",
	 OBJ("\"name\": {\"type\": \"string\", \"pattern\": "
	     "\"^[a-z0-9]+(-[a-z0-9]+)*$\", \"maxLength\": 64, "
	     "\"description\": \"Skill name: lower-case letters, digits and "
	     "single hyphens.\"}, "
	     "\"description\": " STR("One line saying what the skill does and "
				     "when to use it.") ", "
	     "\"body\": " STR("The skill's instructions, in markdown."),
	     "\"name\", \"description\", \"body\""),
	 IMPL_UNAVAILABLE, NULL, false},
	{"ask_user",
	 "Ask the person who started the run a question and wait for the "
	 "answer.",
	 OBJ("\"question\": " STR("The question to ask."), "\"question\""),
	 IMPL_ENGINE, NULL, false},
};

#define NDEFS (sizeof defs / sizeof defs[0])

const char *const tools_builtin[] = {
	"bash",     "read",      "edit",        "write",    "webfetch",
	"python",   "terminal",  "run_skill",   "learn_skill", "ask_user",
	NULL,
};

static const struct tool_def *find_def(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < NDEFS; i++)
		if (strcmp(defs[i].name, name) == 0)
			return &defs[i];
	return NULL;
}

bool tools_is_builtin(const char *name)
{
	return find_def(name) != NULL;
}

json_t *tools_schema(const char *name)
{
	const struct tool_def *d = find_def(name);
	if (!d)
		return NULL;
	json_t *params = json_loads(d->parameters, 0, NULL);
	if (!params)
		return NULL;
	return json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "function",
			 "function", "name", d->name, "description",
			 d->description, "parameters", params);
}

json_t *tools_schemas(const struct strlist *names)
{
	json_t *arr = json_array();
	if (!arr)
		return NULL;
	size_t n = 0;
	if (names)
		n = names->n;
	else
		while (tools_builtin[n])
			n++;
	for (size_t i = 0; i < n; i++) {
		const char *name = names ? names->items[i] : tools_builtin[i];
		if (!tools_is_builtin(name))
			continue;
		json_t *s = tools_schema(name);
		if (!s || json_array_append_new(arr, s) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

int tool_schemas_init(struct tool_schemas *ts)
{
	memset(ts, 0, sizeof *ts);
	ts->all = tools_schemas(NULL);
	size_t n = json_array_size(ts->all);
	ts->texts = ts->all ? calloc(n ? n : 1, sizeof *ts->texts) : NULL;
	if (!ts->texts) {
		tool_schemas_free(ts);
		return -1;
	}
	for (ts->n = 0; ts->n < n; ts->n++) {
		ts->texts[ts->n] = json_dumps(json_array_get(ts->all, ts->n), JSON_COMPACT);
		if (!ts->texts[ts->n]) {
			tool_schemas_free(ts);
			return -1;
		}
	}
	return 0;
}

void tool_schemas_free(struct tool_schemas *ts)
{
	for (size_t i = 0; ts->texts && i < ts->n; i++)
		free(ts->texts[i]);
	free(ts->texts);
	json_decref(ts->all);
	memset(ts, 0, sizeof *ts);
}

int tool_schemas_pick(const struct tool_schemas *ts, const struct strlist *names,
		      json_t **arr, char **text)
{
	struct buf b = { 0 };
	*arr = json_array();
	*text = NULL;
	int rc = *arr && buf_puts(&b, "[") == 0 ? 0 : -1;
	for (size_t i = 0; rc == 0 && names && i < names->n; i++) {
		for (size_t k = 0; k < ts->n; k++) {
			json_t *s = json_array_get(ts->all, k);
			const char *name = json_string_value(
				json_object_get(json_object_get(s, "function"), "name"));
			if (!name || strcmp(name, names->items[i]) != 0)
				continue;
			if (json_array_append(*arr, s) < 0 ||
			    (json_array_size(*arr) > 1 && buf_puts(&b, ",") < 0) ||
			    buf_puts(&b, ts->texts[k]) < 0)
				rc = -1;
			break;
		}
	}
	if (rc == 0 && buf_puts(&b, "]") == 0 && (*text = buf_steal(&b, NULL)))
		return 0;
	buf_free(&b);
	json_decref(*arr);
	*arr = NULL;
	return -1;
}

/* ---- result text ---- */

static void put(struct call *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(struct call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (buf_vprintf(&c->text, fmt, ap) < 0)
		c->oom = true;
	va_end(ap);
}

static void put_bytes(struct call *c, const char *p, size_t n)
{
	if (buf_append(&c->text, p, n) < 0)
		c->oom = true;
}

static void vfail(struct call *c, bool prefix, const char *fmt, va_list ap)
{
	buf_free(&c->text);
	c->is_error = true;
	if (prefix)
		put(c, "%s: ", c->tool);
	if (buf_vprintf(&c->text, fmt, ap) < 0)
		c->oom = true;
}

/* Replaces the result with the error "<tool>: <message>". */
static void fail(struct call *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail(struct call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(c, true, fmt, ap);
	va_end(ap);
}

/* Replaces the result with an error message that names the tool itself. */
static void fail_plain(struct call *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail_plain(struct call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(c, false, fmt, ap);
	va_end(ap);
}

/* The length of the valid UTF-8 sequence at s (n bytes available), or 0
 * when it is invalid. A NUL byte counts as invalid (binary). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xBF;
	if (c == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return len;
}

static bool is_text(const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(s + i, n - i);
		if (!l)
			return false;
		i += l;
	}
	return true;
}

/* A copy of p[0..n) with each invalid byte (and NUL) replaced by U+FFFD,
 * so that the text can always go into a JSON string. NULL on ENOMEM. */
static char *utf8_clean(const char *p, size_t n)
{
	struct buf b = {0};
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, run = 0;
	while (i < n) {
		size_t l = utf8_seq(s + i, n - i);
		if (l) {
			i += l;
			continue;
		}
		if (buf_append(&b, p + run, i - run) < 0 ||
		    buf_puts(&b, "\xEF\xBF\xBD") < 0)
			goto nomem;
		run = ++i;
	}
	if (buf_append(&b, p + run, n - run) < 0)
		goto nomem;
	return buf_steal(&b, NULL);
nomem:
	buf_free(&b);
	return NULL;
}

/* ---- arguments ---- */

/* A string argument. Returns true when present and valid; false when absent
 * (an error when required) or invalid (always an error; c->is_error set).
 * A NUL byte is refused unless allow_nul. */
static bool arg_string(struct call *c, json_t *args, const char *key,
		       bool required, bool allow_nul, const char **val,
		       size_t *len)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v)) {
		if (required)
			fail(c, "missing required argument '%s'", key);
		return false;
	}
	if (!json_is_string(v)) {
		fail(c, "argument '%s' must be a string", key);
		return false;
	}
	*val = json_string_value(v);
	size_t l = json_string_length(v);
	if (!allow_nul && strlen(*val) != l) {
		fail(c, "argument '%s' contains a NUL character", key);
		return false;
	}
	if (len)
		*len = l;
	return true;
}

/* An optional positive integer argument; *val is left alone when absent.
 * Returns false on a wrong type or value (error set). */
static bool arg_positive(struct call *c, json_t *args, const char *key,
			 json_int_t *val)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < 1) {
		fail(c, "argument '%s' must be an integer of at least 1", key);
		return false;
	}
	*val = json_integer_value(v);
	return true;
}

/* An optional boolean argument. Returns false on a wrong type. */
static bool arg_bool(struct call *c, json_t *args, const char *key,
		     bool *val)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v))
		return true;
	if (!json_is_boolean(v)) {
		fail(c, "argument '%s' must be true or false", key);
		return false;
	}
	*val = json_is_true(v);
	return true;
}

int tools_workspace_open(const struct sandbox *sb, const char *path, struct workspace *ws,
			 struct buf *err)
{
	if (sb && sb->switch_user && sb->mode == SANDBOX_BWRAP)
		return workspace_open_as(ws, path, sb->uid, sb->gid, err);
	return workspace_open(ws, path, err);
}

/* Opens the run's workspace; on failure the call carries the error. */
static bool open_ws(struct call *c, struct workspace *ws)
{
	struct buf err = {0};
	if (!c->ctx->workspace) {
		fail(c, "the run has no workspace");
		return false;
	}
	if (tools_workspace_open(c->ctx->sandbox, c->ctx->workspace, ws, &err) < 0) {
		fail(c, "%s", err.data ? err.data : "cannot open the workspace");
		buf_free(&err);
		return false;
	}
	return true;
}

/* ---- the tools ---- */

static void exec_read(struct call *c, json_t *args)
{
	const char *path;
	json_int_t offset = 1, limit = 0;
	if (!arg_string(c, args, "path", true, false, &path, NULL) ||
	    !arg_positive(c, args, "offset", &offset) ||
	    !arg_positive(c, args, "limit", &limit))
		return;
	struct workspace ws;
	if (!open_ws(c, &ws))
		return;
	struct buf data = {0}, err = {0};
	if (workspace_read(&ws, path, 0, &data, &err) < 0) {
		fail(c, "%s", err.data ? err.data : "read failed");
		goto out;
	}
	if (!is_text(data.data, data.len)) {
		fail(c, "not a UTF-8 text file: %s (use bash to inspect binary "
			"files)", path);
		goto out;
	}
	if (offset == 1 && limit == 0) {
		put_bytes(c, data.data, data.len);
		goto out;
	}
	/* Select lines [offset, offset + limit). */
	size_t nlines = 0;
	for (size_t i = 0; i < data.len; i++)
		if (data.data[i] == '\n')
			nlines++;
	if (data.len && data.data[data.len - 1] != '\n')
		nlines++;
	if ((size_t)offset > nlines) {
		put(c, "[offset %lld is past the end: %s has %zu lines]",
		    (long long)offset, path, nlines);
		goto out;
	}
	size_t line = 1, start = 0, end = data.len;
	size_t last = limit ? (size_t)offset + (size_t)limit - 1 : nlines;
	if (last > nlines)
		last = nlines;
	for (size_t i = 0; i < data.len; i++) {
		if (data.data[i] != '\n')
			continue;
		if (line + 1 == (size_t)offset)
			start = i + 1;
		if (line == last) {
			end = i + 1;
			break;
		}
		line++;
	}
	put_bytes(c, data.data + start, end - start);
	if ((size_t)offset > 1 || last < nlines) {
		if (end > start && data.data[end - 1] != '\n')
			put(c, "\n");
		put(c, "[lines %lld-%zu of %zu]", (long long)offset, last,
		    nlines);
	}
out:
	buf_free(&data);
	buf_free(&err);
	workspace_close(&ws);
}

static void exec_write(struct call *c, json_t *args)
{
	const char *path, *content;
	size_t len;
	if (!arg_string(c, args, "path", true, false, &path, NULL) ||
	    !arg_string(c, args, "content", true, true, &content, &len))
		return;
	struct workspace ws;
	if (!open_ws(c, &ws))
		return;
	struct buf err = {0};
	if (workspace_write(&ws, path, content, len, &err) < 0)
		fail(c, "%s", err.data ? err.data : "write failed");
	else
		put(c, "wrote %zu bytes to %s", len, path);
	buf_free(&err);
	workspace_close(&ws);
}

static void exec_edit(struct call *c, json_t *args)
{
	const char *path, *olds, *news;
	size_t olen, nlen;
	bool all = false;
	if (!arg_string(c, args, "path", true, false, &path, NULL) ||
	    !arg_string(c, args, "old_string", true, true, &olds, &olen) ||
	    !arg_string(c, args, "new_string", true, true, &news, &nlen) ||
	    !arg_bool(c, args, "replace_all", &all))
		return;
	if (olen == 0) {
		fail(c, "old_string is empty (use write to create a file)");
		return;
	}
	if (olen == nlen && memcmp(olds, news, olen) == 0) {
		fail(c, "old_string and new_string are identical; nothing to "
			"change");
		return;
	}
	struct workspace ws;
	if (!open_ws(c, &ws))
		return;
	struct buf data = {0}, err = {0}, res = {0};
	if (workspace_read(&ws, path, 0, &data, &err) < 0) {
		fail(c, "%s", err.data ? err.data : "read failed");
		goto out;
	}
	if (!is_text(data.data, data.len)) {
		fail(c, "not a UTF-8 text file: %s", path);
		goto out;
	}
	size_t count = 0;
	const char *p = data.data, *end = data.data + data.len, *hit;
	while ((hit = memmem(p, (size_t)(end - p), olds, olen))) {
		count++;
		p = hit + olen;
	}
	if (count == 0) {
		fail(c, "old_string not found in %s", path);
		goto out;
	}
	if (count > 1 && !all) {
		fail(c, "old_string occurs %zu times in %s; include more "
			"surrounding text to make it unique, or set "
			"replace_all to true", count, path);
		goto out;
	}
	p = data.data;
	while ((hit = memmem(p, (size_t)(end - p), olds, olen))) {
		if (buf_append(&res, p, (size_t)(hit - p)) < 0 ||
		    buf_append(&res, news, nlen) < 0)
			goto nomem;
		p = hit + olen;
	}
	if (buf_append(&res, p, (size_t)(end - p)) < 0)
		goto nomem;
	if (workspace_write(&ws, path, res.data, res.len, &err) < 0) {
		fail(c, "%s", err.data ? err.data : "write failed");
		goto out;
	}
	put(c, "edited %s: replaced %zu occurrence%s", path, count,
	    count == 1 ? "" : "s");
	goto out;
nomem:
	c->oom = true;
out:
	buf_free(&data);
	buf_free(&err);
	buf_free(&res);
	workspace_close(&ws);
}

/* The result of a process tool's run: its output, then how it ended. */
static void put_process_result(struct call *c, const struct proc_result *pr,
			       int timeout, size_t cap)
{
	if (pr->out.len) {
		put_bytes(c, pr->out.data, pr->out.len);
		if (pr->out.data[pr->out.len - 1] != '\n')
			put(c, "\n");
	}
	if (pr->out_truncated)
		put(c, "[output truncated after %zu bytes]\n", cap);
	if (pr->timed_out) {
		c->is_error = true;
		if (timeout % 1000 == 0)
			put(c, "[timed out after %d s; the command was killed]",
			    timeout / 1000);
		else
			put(c, "[timed out after %d ms; the command was "
			       "killed]", timeout);
	} else if (pr->cancelled) {
		c->is_error = true;
		put(c, "[cancelled; the command was killed]");
	} else if (pr->signal) {
		c->is_error = true;
		const char *abbrev = sigabbrev_np(pr->signal);
		if (abbrev)
			put(c, "[killed by signal %d (SIG%s)]", pr->signal,
			    abbrev);
		else
			put(c, "[killed by signal %d]", pr->signal);
	} else {
		c->is_error = pr->exit_code != 0;
		put(c, "[exit %d]", pr->exit_code);
	}
}

/* Runs argv (a process tool's program) in the sandbox, in the workspace;
 * the result is the output and how it ended. */
static void run_sandboxed(struct call *c, const char *const *argv)
{
	const struct sandbox *sb = c->ctx->sandbox;
	if (!sandbox_usable(sb)) {
		fail(c, "not available: %s", sb && sb->why ? sb->why : "no sandbox");
		return;
	}
	struct workspace ws;
	if (!open_ws(c, &ws))
		return;
	int timeout = c->ctx->timeout_ms > 0 ? c->ctx->timeout_ms
					     : TOOLS_DEFAULT_TIMEOUT_MS;
	size_t cap = c->ctx->output_max ? c->ctx->output_max
					: TOOLS_DEFAULT_OUTPUT_MAX;
	struct sandbox_call call = {.argv = argv, .workspace_fd = ws.dirfd,
				    .workspace = ws.root};
	struct sandbox_run run;
	struct proc_result pr = {0};
	char *why = NULL;
	if (sandbox_prepare(sb, &call, &run, &why) < 0) {
		if (why)
			fail(c, "%s", why);
		else
			c->oom = true;
		free(why);
		goto out;
	}
	struct proc_spec spec = run.spec;
	spec.timeout_ms = timeout;
	spec.output_max = cap;
	spec.merge_stderr = true;
	spec.rlimits = true;
	spec.cancel = c->ctx->cancel;
	spec.cancel_arg = c->ctx->cancel_arg;
	if (proc_run(&spec, &pr) < 0) {
		if (pr.err.len)
			fail(c, "%s", pr.err.data);
		else
			fail(c, "cannot run %s: %s", spec.argv[0], strerror(errno));
		goto out;
	}
	put_process_result(c, &pr, timeout, cap);
out:
	proc_result_free(&pr);
	sandbox_run_free(&run);
	workspace_close(&ws);
}

static void exec_bash(struct call *c, json_t *args)
{
	const char *command;
	if (!arg_string(c, args, "command", true, false, &command, NULL))
		return;
	if (!c->ctx->argv_only) {
		const char *argv[] = {"/bin/bash", "-c", command, NULL};
		run_sandboxed(c, argv);
		return;
	}
	/* D3: a patterned grant runs the words themselves, no shell. */
	struct strlist words = {0};
	char *why = NULL;
	if (cmdline_split(command, &words, &why) < 0) {
		if (why)
			fail(c, "%s", why);
		else
			c->oom = true;
		free(why);
		return;
	}
	const char **argv = strlist_to_argv(&words);
	if (!argv)
		c->oom = true;
	else
		run_sandboxed(c, argv);
	free(argv);
	strlist_free(&words);
}

bool tools_is_process(const char *name)
{
	const struct tool_def *d = find_def(name);
	return d && d->process;
}

const char *tools_unavailable_why(const char *name, const struct sandbox *sb)
{
	const struct tool_def *d = find_def(name);
	if (!d)
		return "not a built-in tool";
	if (d->impl == IMPL_UNAVAILABLE)
		return "not implemented in this version of skillfs";
	if (d->process && !sandbox_usable(sb))
		return sb && sb->why ? sb->why : "no sandbox";
	return NULL;
}

int tools_probe(struct config *c, struct sandbox *sb)
{
	if (sandbox_probe(&c->tools, sb) < 0)
		return -1;
	if (sb->mode == SANDBOX_NONE &&
	    strlist_add(&c->warnings, "tools.sandbox: none: process tools (bash) run "
			"WITHOUT a sandbox, as the daemon's user, with its rights") < 0)
		goto oom;
	for (size_t i = 0; i < NDEFS; i++) {
		const char *why = tools_unavailable_why(defs[i].name, sb);
		if (!why || !strlist_has(&c->registered_tools, defs[i].name))
			continue;
		/* A tool this version lacks is only listed as such in
		 * `tools`; one the machine cannot confine is a warning. */
		if (config_tool_unavailable(c, defs[i].name, why) < 0 ||
		    (defs[i].process && defs[i].impl != IMPL_UNAVAILABLE &&
		     strlist_addf(&c->warnings, "tool '%s' is not available: %s",
				  defs[i].name, why) < 0))
			goto oom;
	}
	return 0;
oom:
	sandbox_free(sb);
	errno = ENOMEM;
	return -1;
}

int tools_exec(const struct tool_ctx *ctx, const char *name, json_t *args,
	       struct tool_result *out)
{
	*out = (struct tool_result){0};
	struct call c = {.tool = name ? name : "(unnamed)", .ctx = ctx};
	const struct tool_def *d = find_def(name);
	json_t *empty = NULL;
	if (!d) {
		fail_plain(&c, "unknown tool '%s'", c.tool);
	} else if (d->impl == IMPL_ENGINE) {
		fail_plain(&c, "tool '%s' is handled by the engine, not "
			       "executed here", d->name);
	} else if (d->impl == IMPL_UNAVAILABLE) {
		fail_plain(&c, "tool '%s' is not available in this version",
			   d->name);
	} else if (args && !json_is_object(args)) {
		fail(&c, "arguments must be a JSON object");
	} else {
		if (!args)
			args = empty = json_object();
		if (!args)
			c.oom = true;
		else
			d->fn(&c, args);
	}
	json_decref(empty);
	if (!c.oom && !c.text.data && buf_puts(&c.text, "") < 0)
		c.oom = true;
	if (c.oom) {
		buf_free(&c.text);
		errno = ENOMEM;
		return -1;
	}
	out->text = utf8_clean(c.text.data, c.text.len);
	out->is_error = c.is_error;
	buf_free(&c.text);
	if (!out->text) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void tool_result_free(struct tool_result *r)
{
	free(r->text);
	r->text = NULL;
	r->is_error = false;
}
