/* tool: what every built-in tool's implementation shares (see tool.h). */
#include "tool.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"

/* ---- result text ---- */

void tool_put(struct call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (buf_vprintf(&c->text, fmt, ap) < 0)
		c->oom = true;
	va_end(ap);
}

void tool_put_bytes(struct call *c, const char *p, size_t n)
{
	if (buf_append(&c->text, p, n) < 0)
		c->oom = true;
}

static void tool_vfail(struct call *c, bool prefix, const char *fmt, va_list ap)
{
	buf_free(&c->text);
	c->is_error = true;
	if (prefix)
		tool_put(c, "%s: ", c->tool);
	if (buf_vprintf(&c->text, fmt, ap) < 0)
		c->oom = true;
}

/* Replaces the result with the error "<tool>: <message>". */
void tool_fail(struct call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tool_vfail(c, true, fmt, ap);
	va_end(ap);
}

/* Replaces the result with an error message that names the tool itself. */
void tool_fail_plain(struct call *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tool_vfail(c, false, fmt, ap);
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

bool tool_is_text(const char *p, size_t n)
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
char *tool_utf8_clean(const char *p, size_t n)
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
bool tool_arg_string(struct call *c, json_t *args, const char *key,
		       bool required, bool allow_nul, const char **val,
		       size_t *len)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v)) {
		if (required)
			tool_fail(c, "missing required argument '%s'", key);
		return false;
	}
	if (!json_is_string(v)) {
		tool_fail(c, "argument '%s' must be a string", key);
		return false;
	}
	*val = json_string_value(v);
	size_t l = json_string_length(v);
	if (!allow_nul && strlen(*val) != l) {
		tool_fail(c, "argument '%s' contains a NUL character", key);
		return false;
	}
	if (len)
		*len = l;
	return true;
}

/* An optional positive integer argument; *val is left alone when absent.
 * Returns false on a wrong type or value (error set). */
bool tool_arg_positive(struct call *c, json_t *args, const char *key,
			 json_int_t *val)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < 1) {
		tool_fail(c, "argument '%s' must be an integer of at least 1", key);
		return false;
	}
	*val = json_integer_value(v);
	return true;
}

/* An optional boolean argument. Returns false on a wrong type. */
bool tool_arg_bool(struct call *c, json_t *args, const char *key,
		     bool *val)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v))
		return true;
	if (!json_is_boolean(v)) {
		tool_fail(c, "argument '%s' must be true or false", key);
		return false;
	}
	*val = json_is_true(v);
	return true;
}

bool tool_arg_strings(struct call *c, json_t *args, const char *key, size_t max,
		      struct strlist *out)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v))
		return true;
	if (!json_is_array(v)) {
		tool_fail(c, "argument '%s' must be an array of strings", key);
		return false;
	}
	if (json_array_size(v) > max) {
		tool_fail(c, "argument '%s' has %zu items; at most %zu are allowed", key,
			  json_array_size(v), max);
		return false;
	}
	size_t i;
	json_t *item;
	json_array_foreach(v, i, item) {
		if (!json_is_string(item)) {
			tool_fail(c, "argument '%s': item %zu is not a string", key, i + 1);
			goto fail;
		}
		const char *s = json_string_value(item);
		if (strlen(s) != json_string_length(item)) {
			tool_fail(c, "argument '%s': item %zu contains a NUL character", key,
				  i + 1);
			goto fail;
		}
		if (strlist_add(out, s) < 0) {
			c->oom = true;
			goto fail;
		}
	}
	return true;
fail:
	strlist_free(out);
	return false;
}

const char *tool_path(const char *path)
{
	size_t n = strlen(SANDBOX_WORKSPACE);
	if (!path || strncmp(path, SANDBOX_WORKSPACE, n) != 0 ||
	    (path[n] != '\0' && path[n] != '/'))
		return path;
	path += n;
	path += strspn(path, "/");
	return *path ? path : ".";
}

bool tool_is_vcs_dir(const char *name)
{
	return !strcmp(name, ".git") || !strcmp(name, ".hg") || !strcmp(name, ".svn");
}

size_t tool_output_cap(const struct call *c)
{
	return c->ctx->output_max ? c->ctx->output_max : TOOLS_DEFAULT_OUTPUT_MAX;
}

int tools_workspace_open(const struct sandbox *sb, const char *path, struct workspace *ws,
			 struct buf *err)
{
	if (sb && sb->switch_user && sb->mode == SANDBOX_BWRAP)
		return workspace_open_as(ws, path, sb->uid, sb->gid, err);
	return workspace_open(ws, path, err);
}

/* Opens the run's workspace; on failure the call carries the error. */
bool tool_open_ws(struct call *c, struct workspace *ws)
{
	struct buf err = {0};
	if (!c->ctx->workspace) {
		tool_fail(c, "the run has no workspace");
		return false;
	}
	if (tools_workspace_open(c->ctx->sandbox, c->ctx->workspace, ws, &err) < 0) {
		tool_fail(c, "%s", err.data ? err.data : "cannot open the workspace");
		buf_free(&err);
		return false;
	}
	return true;
}


/* The result of a process tool's run: its output, then how it ended. */
void tool_put_process_result(struct call *c, const struct proc_result *pr,
			       int timeout, size_t cap)
{
	if (pr->out.len) {
		tool_put_bytes(c, pr->out.data, pr->out.len);
		if (pr->out.data[pr->out.len - 1] != '\n')
			tool_put(c, "\n");
	}
	if (pr->out_truncated)
		tool_put(c, "[output truncated after %zu bytes]\n", cap);
	if (pr->timed_out) {
		c->is_error = true;
		if (timeout % 1000 == 0)
			tool_put(c, "[timed out after %d s; the command was killed]",
			    timeout / 1000);
		else
			tool_put(c, "[timed out after %d ms; the command was "
			       "killed]", timeout);
	} else if (pr->cancelled) {
		c->is_error = true;
		tool_put(c, "[cancelled; the command was killed]");
	} else if (pr->signal) {
		c->is_error = true;
		const char *abbrev = sigabbrev_np(pr->signal);
		if (abbrev)
			tool_put(c, "[killed by signal %d (SIG%s)]", pr->signal,
			    abbrev);
		else
			tool_put(c, "[killed by signal %d]", pr->signal);
	} else {
		c->is_error = pr->exit_code != 0;
		tool_put(c, "[exit %d]", pr->exit_code);
	}
}

/* Runs argv (a process tool's program) in the sandbox, in the workspace;
 * the result is the output and how it ended. */
void tool_run_sandboxed(struct call *c, const char *const *argv)
{
	tool_run_sandboxed_with(c, argv, NULL);
}

void tool_run_sandboxed_with(struct call *c, const char *const *argv,
			     const struct tool_run *opt)
{
	const struct sandbox *sb = c->ctx->sandbox;
	if (!sandbox_usable(sb)) {
		tool_fail(c, "not available: %s", sb && sb->why ? sb->why : "no sandbox");
		return;
	}
	struct workspace ws;
	if (!tool_open_ws(c, &ws))
		return;
	int timeout = c->ctx->timeout_ms > 0 ? c->ctx->timeout_ms
					     : TOOLS_DEFAULT_TIMEOUT_MS;
	size_t cap = c->ctx->output_max ? c->ctx->output_max
					: TOOLS_DEFAULT_OUTPUT_MAX;
	struct sandbox_call call = {.argv = argv, .workspace_fd = ws.dirfd,
				    .workspace = ws.root, .pristine_home = c->ctx->argv_only,
				    .bin_names = opt ? opt->bin_names : NULL,
				    .bin_paths = opt ? opt->bin_paths : NULL};
	struct sandbox_run run;
	struct proc_result pr = {0};
	char *why = NULL;
	if (sandbox_prepare(sb, &call, &run, &why) < 0) {
		if (why)
			tool_fail(c, "%s", why);
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
	if (opt && opt->stdin_data) {
		spec.stdin_data = opt->stdin_data;
		spec.stdin_len = opt->stdin_len;
	}
	if (proc_run(&spec, &pr) < 0) {
		if (pr.err.len)
			tool_fail(c, "%s", pr.err.data);
		else
			tool_fail(c, "cannot run %s: %s", spec.argv[0], strerror(errno));
		goto out;
	}
	tool_put_process_result(c, &pr, timeout, cap);
out:
	proc_result_free(&pr);
	sandbox_run_free(&run);
	workspace_close(&ws);
}

