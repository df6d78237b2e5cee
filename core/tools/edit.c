/* edit: replaces a string in a file of the run's workdir or workspace. */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tool_edit(struct call *c, json_t *args)
{
	const char *path, *olds, *news;
	size_t olen, nlen;
	bool all = false;
	if (!tool_arg_string(c, args, "path", true, false, &path, NULL) ||
	    !tool_arg_string(c, args, "old_string", true, true, &olds, &olen) ||
	    !tool_arg_string(c, args, "new_string", true, true, &news, &nlen) ||
	    !tool_arg_bool(c, args, "replace_all", &all))
		return;
	if (olen == 0) {
		tool_fail(c, "old_string is empty (use write to create a file)");
		return;
	}
	if (olen == nlen && memcmp(olds, news, olen) == 0) {
		tool_fail(c, "old_string and new_string are identical; nothing to "
			"change");
		return;
	}
	struct workspace ws;
	if (!tool_open_path(c, path, TOOL_WRITE, &ws))
		return;
	struct buf data = {0}, err = {0}, res = {0};
	if (workspace_read(&ws, path, 0, &data, &err) < 0) {
		tool_fail(c, "%s", err.data ? err.data : "read failed");
		goto out;
	}
	if (!tool_is_text(data.data, data.len)) {
		tool_fail(c, "not a UTF-8 text file: %s", path);
		goto out;
	}
	size_t count = 0;
	const char *p = data.data, *end = data.data + data.len, *hit;
	while ((hit = memmem(p, (size_t)(end - p), olds, olen))) {
		count++;
		p = hit + olen;
	}
	if (count == 0) {
		tool_fail(c, "old_string not found in %s", path);
		goto out;
	}
	if (count > 1 && !all) {
		tool_fail(c, "old_string occurs %zu times in %s; include more "
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
		tool_fail(c, "%s", err.data ? err.data : "write failed");
		goto out;
	}
	tool_put(c, "edited %s: replaced %zu occurrence%s", path, count,
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

