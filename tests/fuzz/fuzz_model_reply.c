/* libFuzzer target: the command provider's reply (core/model_command.c,
 * core/model.c). Any bytes are what the model program printed: they are
 * read as model_complete reads them (model_command_reply, then
 * model_normalise_message), and the normalised message is encoded as the
 * store would keep it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "buf.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model_reply raw = { 0 };
	struct buf why = { 0 };
	if (model_command_reply((const char *)data, size, &raw, &why) == 0) {
		char *err = NULL;
		json_t *msg = model_normalise_message(raw.message, 7, &err);
		if (msg) {
			char *text = json_dumps(msg, JSON_COMPACT);
			free(text);
			char *content = model_content_text(json_object_get(msg, "content"));
			free(content);
		}
		json_decref(msg);
		free(err);
	}
	model_reply_free(&raw);
	buf_free(&why);
	return 0;
}
