/* read: a text file of the run's directories (workdir, workspace, its
 * skills' files), whole or some of its lines. */
#include "tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tool_read(struct call *c, json_t *args)
{
	const char *path;
	json_int_t offset = 1, limit = 0;
	if (!tool_arg_string(c, args, "path", true, false, &path, NULL) ||
	    !tool_arg_positive(c, args, "offset", &offset) ||
	    !tool_arg_positive(c, args, "limit", &limit))
		return;
	struct workspace ws;
	if (!tool_open_path(c, path, TOOL_READ, &ws))
		return;
	struct buf data = {0}, err = {0};
	if (workspace_read(&ws, path, 0, &data, &err) < 0) {
		tool_fail(c, "%s", err.data ? err.data : "read failed");
		goto out;
	}
	if (!tool_is_text(data.data, data.len)) {
		tool_fail(c, "not a UTF-8 text file: %s (use bash to inspect binary "
			"files)", path);
		goto out;
	}
	if (offset == 1 && limit == 0) {
		tool_put_bytes(c, data.data, data.len);
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
		tool_put(c, "[offset %lld is past the end: %s has %zu lines]",
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
	tool_put_bytes(c, data.data + start, end - start);
	if ((size_t)offset > 1 || last < nlines) {
		if (end > start && data.data[end - 1] != '\n')
			tool_put(c, "\n");
		tool_put(c, "[lines %lld-%zu of %zu]", (long long)offset, last,
		    nlines);
	}
out:
	buf_free(&data);
	buf_free(&err);
	workspace_close(&ws);
}

