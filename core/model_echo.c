/* The echo provider: offline and deterministic. It restates the last user
 * message and the names of the tools it was offered, and never calls one. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

static int echo_complete(void *ctx, const struct model_request *req,
			 struct model_reply *out, char **err)
{
	(void)ctx;
	char *prompt = NULL;
	for (size_t i = json_array_size(req->messages); i-- > 0;) {
		json_t *m = json_array_get(req->messages, i);
		const char *role = json_string_value(json_object_get(m, "role"));
		if (role && strcmp(role, "user") == 0) {
			prompt = model_content_text(json_object_get(m, "content"));
			break;
		}
	}

	struct buf b = { 0 };
	int r = buf_printf(&b, "echo: %s\ntools offered: ", prompt ? prompt : "");
	free(prompt);
	size_t n = 0, i;
	json_t *tool;
	json_array_foreach(req->tools, i, tool) {
		const char *name =
			json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
		if (!name)
			continue;
		r |= buf_printf(&b, "%s%s", n++ ? ", " : "", name);
	}
	if (!n)
		r |= buf_puts(&b, "none");
	if (r == 0)
		out->message = json_pack("{s:s, s:s%}", "role", "assistant", "content",
					 b.data, b.len);
	buf_free(&b);
	if (!out->message) {
		*err = model_strdupf("echo model: out of memory");
		return -1;
	}
	return 0;
}

static const struct model_ops echo_ops = {
	.name = "echo",
	.complete = echo_complete,
	.free = NULL,
};

int model_echo_open(const struct model_config *mc, const struct model_ops **ops,
		    void **ctx, char **err)
{
	(void)mc;
	(void)err;
	*ops = &echo_ops;
	*ctx = NULL;
	return 0;
}
