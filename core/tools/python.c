/* python: a snippet (code, on stdin) or a workspace file (path) run with
 * the system python3, in the sandbox like bash; args become sys.argv[1:]. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"

/* At most this many items in args. */
#define PYTHON_ARGS_MAX 256

/* The file at the model's path, as python3 inside is to be given it:
 * where the sandbox shows it ("/workspace/x.py", "/workdir/dir/x.py",
 * "/skills/<name>/scripts/x.py"); NULL with the error in c. */
static char *script_path(struct call *c, const char *path)
{
	struct workspace ws;
	if (!tool_open_path(c, path, TOOL_READ, &ws))
		return NULL;
	struct buf err = {0};
	char *out = NULL;
	const char *p = path;
	int fd = workspace_open_path(&ws, p, O_PATH, &err);
	struct stat st;
	if (fd < 0) {
		tool_fail(c, "%s", err.data ? err.data : "cannot open the file");
	} else if (fstat(fd, &st) < 0) {
		tool_fail(c, "cannot inspect %s: %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		tool_fail(c, "not a regular file: %s", path);
	} else {
		char *rel = workspace_relative(&ws, p, &err);
		if (!rel)
			tool_fail(c, "%s", err.data ? err.data : "bad path");
		else if (asprintf(&out, "%s/%s", ws.alias ? ws.alias : ".", rel) < 0) {
			out = NULL;
			c->oom = true;
		}
		free(rel);
	}
	if (fd >= 0)
		close(fd);
	buf_free(&err);
	workspace_close(&ws);
	return out;
}

void tool_python(struct call *c, json_t *args)
{
	const char *code = NULL, *path = NULL;
	size_t code_len = 0;
	struct strlist extra = {0};
	bool has_code = tool_arg_string(c, args, "code", false, true, &code, &code_len);
	if (c->is_error)
		return;
	bool has_path = tool_arg_string(c, args, "path", false, false, &path, NULL);
	if (c->is_error || !tool_arg_strings(c, args, "args", PYTHON_ARGS_MAX, &extra))
		return;
	if (has_code == has_path) {
		tool_fail(c, "give exactly one of 'code' (a program to run) and 'path' (a "
			  "Python file in the workspace)");
		goto out;
	}
	const struct sandbox *sb = c->ctx->sandbox;
	if (sandbox_usable(sb) && !sb->python) {
		tool_fail(c, "not available: python3 is not installed in the sandbox's PATH "
			  "(" SANDBOX_PATH ")");
		goto out;
	}
	char *script = NULL;
	if (has_path && !(script = script_path(c, path)))
		goto out;
	struct strlist argv = {0};
	/* A snippet comes on stdin ("-"): no limit on an argument's size,
	 * and a NUL in it reaches Python, which refuses it. */
	if (strlist_add(&argv, sb && sb->python ? sb->python : "python3") < 0 ||
	    strlist_add(&argv, has_code ? "-" : script) < 0 ||
	    strlist_extend(&argv, &extra) < 0) {
		c->oom = true;
	} else {
		const char **av = strlist_to_argv(&argv);
		struct tool_run opt = {.stdin_data = has_code ? code : NULL,
				       .stdin_len = code_len};
		if (!av)
			c->oom = true;
		else
			tool_run_sandboxed_with(c, av, &opt);
		free(av);
	}
	strlist_free(&argv);
	free(script);
out:
	strlist_free(&extra);
}
