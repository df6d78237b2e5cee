/* model_stream: a chat-completions reply read as it streams (server-sent
 * events, `"stream": true`): the chunks' deltas put together into the one
 * assistant message a non-streamed reply would have held, with the text
 * so far handed on as it grows (DESIGN.md section 7, the openai provider). */
#ifndef SKILLFS_MODEL_STREAM_H
#define SKILLFS_MODEL_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "buf.h"

struct model_stream {
	struct buf line;    /* the line being received */
	struct buf data;    /* the data lines of the event being received */
	struct buf content; /* the reply's text so far */
	json_t *calls;      /* tool calls so far, by index: [{id, type, function}] */
	json_t *usage;      /* the last usage object sent, or NULL */
	char *error;        /* what the server said went wrong, or NULL */
	bool done;          /* "data: [DONE]" seen */
	bool oom;
	size_t seen;        /* bytes fed, for the size cap */
	/* Called each time the text grew, with all of it; may be NULL. */
	void (*on_text)(void *arg, const char *text, size_t len);
	void *arg;
};

/* Starts an empty stream; on_text may be NULL. */
void model_stream_init(struct model_stream *s, void (*on_text)(void *, const char *, size_t),
		       void *arg);

/* Feeds len bytes of the response body as they arrived (any split).
 * Returns 0, or -1 when memory ran out (the stream is then unusable). */
int model_stream_feed(struct model_stream *s, const char *p, size_t len);

/* The assistant message the events added up to ({"role", "content",
 * "tool_calls"?}), a new reference; NULL with a malloc'd *err when the
 * server sent an error event, nothing usable, or memory ran out. Call once
 * the body has ended; an event left without its blank line is taken. */
json_t *model_stream_message(struct model_stream *s, char **err);

/* Frees what the stream holds; it may be initialised again. */
void model_stream_free(struct model_stream *s);

#endif
