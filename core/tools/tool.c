/* tool: what every built-in tool's implementation shares (see tool.h). */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The part of normalised path p under dir ("" for dir itself, else what
 * follows its slash), or NULL when p is not dir or inside it. */
static const char *under(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	if (strncmp(p, dir, n) != 0 || (p[n] != '\0' && p[n] != '/'))
		return NULL;
	return p[n] ? p + n + 1 : p + n;
}

/* The uid and gid files made for the tools belong to: the user they run
 * as when the sandbox switches to one, else the daemon's. */
static void tools_owner(const struct sandbox *sb, uid_t *uid, gid_t *gid)
{
	if (sb && sb->switch_user && sb->mode == SANDBOX_BWRAP) {
		*uid = sb->uid;
		*gid = sb->gid;
	} else {
		*uid = geteuid();
		*gid = getegid();
	}
}

/* Opens the run's workdir; false with the error in c. */
static bool open_workdir(struct call *c, struct workspace *ws)
{
	struct buf err = {0};
	uid_t uid;
	gid_t gid;
	tools_owner(c->ctx->sandbox, &uid, &gid);
	if (workspace_open_dir(ws, c->ctx->workdir, uid, gid, true, &err) < 0) {
		tool_fail(c, "the workdir: %s", err.data ? err.data : "cannot open it");
		buf_free(&err);
		return false;
	}
	if (workspace_set_alias(ws, TOOLS_WORKDIR) < 0) {
		workspace_close(ws);
		c->oom = true;
		return false;
	}
	return true;
}

/* The run's skill called name (n bytes), or NULL. */
static const struct tool_skill_dir *find_skill(const struct tool_ctx *ctx, const char *name,
					       size_t n)
{
	for (size_t i = 0; ctx->skills && i < ctx->nskills; i++)
		if (strlen(ctx->skills[i].name) == n && memcmp(ctx->skills[i].name, name, n) == 0)
			return &ctx->skills[i];
	return NULL;
}

/* Opens the files of the skill a /skills/... path names (rest: what
 * follows "/skills"). */
static bool open_skill(struct call *c, const char *path, const char *rest,
		       enum tool_access how, struct workspace *ws)
{
	if (!*rest) {
		tool_fail(c, "%s holds one directory per skill of the run: name a file in "
			  "one, e.g. %s/<name>/SKILL.md", TOOLS_SKILLS, TOOLS_SKILLS);
		return false;
	}
	size_t n = strcspn(rest, "/");
	const struct tool_skill_dir *sd = find_skill(c->ctx, rest, n);
	if (!sd) {
		tool_fail(c, "no skill named '%.*s' in %s (only the files of the run's skills "
			  "are there): %s", (int)(n > 64 ? 64 : n), rest, TOOLS_SKILLS, path);
		return false;
	}
	if (how == TOOL_WRITE) {
		tool_fail(c, "skill files are read-only: %s", path);
		return false;
	}
	struct buf err = {0};
	char alias[sizeof TOOLS_SKILLS + 80];
	snprintf(alias, sizeof alias, "%s/%s", TOOLS_SKILLS, sd->name);
	if (workspace_open_dir(ws, sd->dir, geteuid(), getegid(), false, &err) < 0) {
		tool_fail(c, "the files of skill '%s': %s", sd->name,
			  err.data ? err.data : "cannot open them");
		buf_free(&err);
		return false;
	}
	ws->readonly = true;
	if (workspace_set_alias(ws, alias) < 0) {
		workspace_close(ws);
		c->oom = true;
		return false;
	}
	return true;
}

bool tool_open_path(struct call *c, const char *path, enum tool_access how,
		    struct workspace *ws)
{
	char *norm = path ? workspace_norm_path(path) : NULL;
	if (path && !norm) {
		c->oom = true;
		return false;
	}
	const char *rest;
	bool ok;
	if (norm && (rest = under(norm, TOOLS_SKILLS))) {
		ok = open_skill(c, path, rest, how, ws);
	} else if (norm && under(norm, TOOLS_WORKDIR) && !c->ctx->workdir) {
		tool_fail(c, "the run has no workdir: %s", path);
		ok = false;
	} else if (c->ctx->workdir && !(norm && under(norm, SANDBOX_WORKSPACE))) {
		ok = open_workdir(c, ws);
	} else {
		ok = tool_open_ws(c, ws);
		if (ok && workspace_set_alias(ws, SANDBOX_WORKSPACE) < 0) {
			workspace_close(ws);
			c->oom = true;
			ok = false;
		}
	}
	free(norm);
	return ok;
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
	struct workspace ws, wd = {.dirfd = -1};
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
	struct sandbox_dir wdir, *skills = NULL;
	struct sandbox_run run = {0};
	struct proc_result pr = {0};
	char *why = NULL;
	if (c->ctx->workdir) {
		if (!open_workdir(c, &wd))
			goto out;
		wdir = (struct sandbox_dir){.fd = wd.dirfd, .path = wd.root};
		call.workdir = &wdir;
	}
	/* The skills' directories, each as it is now: one that went away
	 * since the run started is left out. */
	size_t nskills = c->ctx->skills ? c->ctx->nskills : 0;
	if (nskills > TOOLS_SKILLS_MAX)
		nskills = TOOLS_SKILLS_MAX;
	if (nskills && !(skills = calloc(nskills, sizeof *skills))) {
		c->oom = true;
		goto out;
	}
	for (size_t i = 0; i < nskills; i++) {
		const struct tool_skill_dir *sd = &c->ctx->skills[i];
		int fd = open(sd->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR) {
			tool_fail(c, "cannot open the files of skill '%s' (%s): %s", sd->name,
				  sd->dir, strerror(errno));
			goto out;
		}
		if (fd >= 0)
			skills[call.nskills++] = (struct sandbox_dir){.fd = fd, .path = sd->dir,
								      .name = sd->name};
	}
	call.skills = skills;
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
	for (size_t i = 0; skills && i < call.nskills; i++)
		close(skills[i].fd);
	free(skills);
	workspace_close(&wd);
	workspace_close(&ws);
}

