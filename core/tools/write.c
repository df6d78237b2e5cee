/* write: creates or replaces a file of the run's workdir or workspace. */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tool_write(struct call *c, json_t *args)
{
	const char *path, *content;
	size_t len;
	if (!tool_arg_string(c, args, "path", true, false, &path, NULL) ||
	    !tool_arg_string(c, args, "content", true, true, &content, &len))
		return;
	struct workspace ws;
	if (!tool_open_path(c, path, TOOL_WRITE, &ws))
		return;
	struct buf err = {0};
	if (workspace_write(&ws, path, content, len, &err) < 0)
		tool_fail(c, "%s", err.data ? err.data : "write failed");
	else
		tool_put(c, "wrote %zu bytes to %s", len, path);
	buf_free(&err);
	workspace_close(&ws);
}

