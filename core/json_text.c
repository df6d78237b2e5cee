#include "json_text.h"

#include <stdlib.h>

int json_text_append(struct buf *out, const json_t *j, size_t flags)
{
	char *t = j ? json_dumps(j, flags) : NULL;
	if (!t)
		return -1;
	size_t len = out->len;
	int rc = buf_puts(out, t) < 0 || buf_puts(out, "\n") < 0 ? -1 : 0;
	if (rc < 0 && out->data) {
		out->len = len; /* leave out as it was */
		out->data[len] = '\0';
	}
	free(t);
	return rc;
}
