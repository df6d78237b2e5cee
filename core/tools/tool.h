/* tool: what the built-in tools' implementations share: the call being
 * answered (its result text), argument readers, the workspace, and the
 * sandboxed run of a program. One file per tool (bash.c, read.c, ...)
 * implements tool_<name>; registry.c lists them in one table. Not for use
 * outside core/tools/. */
#ifndef SKILLFS_TOOL_H
#define SKILLFS_TOOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "proc.h"
#include "strlist.h"
#include "tools.h"
#include "workspace.h"

/* One call being executed: the result text under construction. */
struct call {
	const char *tool;
	const struct tool_ctx *ctx;
	struct buf text;
	bool is_error;
	bool oom;  /* out of memory: the call fails with ENOMEM */
};

/* A tool's implementation: fills c from the model's arguments (an object). */
typedef void (*tool_fn)(struct call *c, json_t *args);

void tool_bash(struct call *c, json_t *args);
void tool_read(struct call *c, json_t *args);
void tool_write(struct call *c, json_t *args);
void tool_edit(struct call *c, json_t *args);
void tool_learn_skill(struct call *c, json_t *args);
void tool_webfetch(struct call *c, json_t *args);
void tool_python(struct call *c, json_t *args);
void tool_terminal(struct call *c, json_t *args);
void tool_glob(struct call *c, json_t *args);
void tool_grep(struct call *c, json_t *args);

/* Appends to the result (out of memory sets c->oom). */
void tool_put(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tool_put_bytes(struct call *c, const char *p, size_t n);

/* Replaces the result with the error "<tool>: <message>". */
void tool_fail(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Replaces the result with an error message that names the tool itself. */
void tool_fail_plain(struct call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether p[0..n) is valid UTF-8 without NUL bytes. */
bool tool_is_text(const char *p, size_t n);
/* A copy with each invalid byte (and NUL) replaced by U+FFFD; NULL on ENOMEM. */
char *tool_utf8_clean(const char *p, size_t n);

/* A string argument: true when present and valid; false when absent (an
 * error when required) or invalid (an error). NUL refused unless allow_nul. */
bool tool_arg_string(struct call *c, json_t *args, const char *key, bool required,
		     bool allow_nul, const char **val, size_t *len);
/* An optional integer >= 1 / boolean; *val left alone when absent; false
 * (with an error) on a wrong type or value. */
bool tool_arg_positive(struct call *c, json_t *args, const char *key, json_int_t *val);
bool tool_arg_bool(struct call *c, json_t *args, const char *key, bool *val);

/* An optional array of strings (no NUL in any), at most max items: *out
 * gets copies (left empty when absent). False with the error in c on a
 * wrong type or size; out of memory sets c->oom. */
bool tool_arg_strings(struct call *c, json_t *args, const char *key, size_t max,
		      struct strlist *out);

/* Opens the run's workspace (tools_workspace_open); false with the error
 * in c. */
bool tool_open_ws(struct call *c, struct workspace *ws);

/* Whether a directory of this name is a version-control store (.git, .hg,
 * .svn), which glob and grep do not enter unless asked to start in it. */
bool tool_is_vcs_dir(const char *name);

/* The output cap of the call (its output_max, else the default). */
size_t tool_output_cap(const struct call *c);

/* What a file tool does at a path. */
enum tool_access { TOOL_READ, TOOL_WRITE };

/* Opens the directory a model's path leads into as ws, so that the
 * workspace_* calls take the path as the model gave it (and name it so in
 * their messages). The one place the file tools (read, write, edit, glob,
 * grep) decide where a path is:
 *   /skills/<name>[/...]  the files of the run's skill <name>, read-only:
 *                         TOOL_WRITE is refused ("skill files are
 *                         read-only: /skills/x/y")
 *   /workspace[/...]      the run's workspace (scratch)
 *   /workdir[/...]        the run's project directory (refused when the
 *                         run has none)
 *   anything else         the run's working directory: its workdir when it
 *                         has one, else its workspace; relative paths
 *                         resolve there, and an absolute one must lie
 *                         inside it
 * path NULL means the working directory itself. Returns false with the
 * error in c. */
bool tool_open_path(struct call *c, const char *path, enum tool_access how,
		    struct workspace *ws);

/* Runs argv in the sandbox with the workspace as its working directory,
 * under the call's time and output caps; the result is its output and how
 * it ended ("[exit 0]", "[timed out after 5 s; ...]"). Refused when the
 * sandbox is not usable. */
void tool_run_sandboxed(struct call *c, const char *const *argv);

/* What a process tool may add to a sandboxed run. */
struct tool_run {
	const char *stdin_data; /* the program's stdin; NULL: /dev/null */
	size_t stdin_len;
	/* The call's own PATH (sandbox_call.bin_names); NULL: SANDBOX_PATH. */
	const char *const *bin_names;
	const char *const *bin_paths;
};

/* tool_run_sandboxed with the additions of opt (NULL: none). */
void tool_run_sandboxed_with(struct call *c, const char *const *argv,
			     const struct tool_run *opt);

#endif
