/* model_stream: a streamed chat-completions reply (see model_stream.h). */
#include "model_stream.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Most tool calls one reply may carry (an index past it is refused). */
#define STREAM_CALLS_MAX 256

void model_stream_init(struct model_stream *s, void (*on_text)(void *, const char *, size_t),
		       void *arg)
{
	memset(s, 0, sizeof *s);
	s->on_text = on_text;
	s->arg = arg;
}

void model_stream_free(struct model_stream *s)
{
	buf_free(&s->line);
	buf_free(&s->data);
	buf_free(&s->content);
	json_decref(s->calls);
	json_decref(s->usage);
	free(s->error);
	memset(s, 0, sizeof *s);
}

/* Appends the string member key of delta (if any) to member key of dst. */
static int append_member(json_t *dst, const char *key, json_t *delta)
{
	const char *more = json_string_value(json_object_get(delta, key));
	if (!more || !*more)
		return 0;
	const char *had = json_string_value(json_object_get(dst, key));
	char *both = model_strdupf("%s%s", had ? had : "", more);
	int rc = both ? json_object_set_new(dst, key, json_string(both)) : -1;
	free(both);
	return rc;
}

/* Merges one tool_calls delta into the calls so far, by its index. */
static int merge_call(struct model_stream *s, json_t *d, size_t pos)
{
	json_t *ji = json_object_get(d, "index");
	json_int_t idx = json_is_integer(ji) ? json_integer_value(ji) : (json_int_t)pos;
	if (idx < 0 || idx >= STREAM_CALLS_MAX)
		return 0; /* not a call this reply can hold: dropped */
	if (!s->calls && !(s->calls = json_array()))
		return -1;
	while (json_array_size(s->calls) <= (size_t)idx)
		if (json_array_append_new(s->calls, json_pack("{s:s, s:{s:s, s:s}}", "type",
							      "function", "function", "name",
							      "", "arguments", "")) < 0)
			return -1;
	json_t *call = json_array_get(s->calls, (size_t)idx);
	json_t *fn = json_object_get(call, "function");
	const char *id = json_string_value(json_object_get(d, "id"));
	if (id && *id && json_object_set_new(call, "id", json_string(id)) < 0)
		return -1;
	json_t *dfn = json_object_get(d, "function");
	/* The name comes whole (some servers repeat it in every chunk);
	 * the arguments come in pieces. */
	const char *name = json_string_value(json_object_get(dfn, "name"));
	if (name && *name && !*json_string_value(json_object_get(fn, "name")) &&
	    json_object_set_new(fn, "name", json_string(name)) < 0)
		return -1;
	return append_member(fn, "arguments", dfn);
}

/* One event's data: a chunk, "[DONE]", or an error. */
static int take_event(struct model_stream *s)
{
	if (!s->data.len)
		return 0;
	const char *text = s->data.data;
	size_t len = s->data.len;
	if (len && text[len - 1] == '\n')
		len--;
	if (len == 6 && memcmp(text, "[DONE]", 6) == 0) {
		s->done = true;
		return 0;
	}
	json_t *chunk = json_loadb(text, len, 0, NULL);
	int rc = 0;
	json_t *error = json_object_get(chunk, "error");
	if (!chunk) {
		/* Not JSON: a keep-alive or a proxy's note; nothing to add. */
	} else if (error) {
		const char *m = json_string_value(json_object_get(error, "message"));
		if (!m)
			m = json_string_value(error);
		free(s->error);
		s->error = model_strdupf("model server sent an error while streaming: %s",
					 m ? m : "(no message)");
		rc = s->error ? 0 : -1;
	} else {
		json_t *usage = json_object_get(chunk, "usage");
		if (json_is_object(usage)) {
			json_decref(s->usage);
			s->usage = json_incref(usage);
		}
		json_t *delta = json_object_get(json_array_get(json_object_get(chunk, "choices"), 0),
						"delta");
		const char *more = json_string_value(json_object_get(delta, "content"));
		if (more && *more) {
			rc = buf_puts(&s->content, more);
			if (rc == 0 && s->on_text)
				s->on_text(s->arg, s->content.data, s->content.len);
		}
		size_t i;
		json_t *d;
		json_array_foreach(json_object_get(delta, "tool_calls"), i, d) {
			if (rc == 0)
				rc = merge_call(s, d, i);
		}
	}
	json_decref(chunk);
	buf_free(&s->data);
	return rc < 0 ? -1 : 0;
}

/* One line of the event stream (without its line ending). */
static int take_line(struct model_stream *s, const char *p, size_t n)
{
	if (n && p[n - 1] == '\r')
		n--;
	if (n == 0)
		return take_event(s);
	if (n >= 5 && memcmp(p, "data:", 5) == 0) {
		p += 5, n -= 5;
		if (n && *p == ' ')
			p++, n--;
		if (buf_append(&s->data, p, n) < 0 || buf_puts(&s->data, "\n") < 0)
			return -1;
	}
	/* "event:", "id:", "retry:" and ": comments" carry nothing here. */
	return 0;
}

int model_stream_feed(struct model_stream *s, const char *p, size_t len)
{
	if (s->oom)
		return -1;
	s->seen += len;
	while (len) {
		const char *nl = memchr(p, '\n', len);
		size_t n = nl ? (size_t)(nl - p) : len;
		int rc = 0;
		if (!nl) {
			rc = buf_append(&s->line, p, n);
		} else if (s->line.len) {
			rc = buf_append(&s->line, p, n);
			if (rc == 0)
				rc = take_line(s, s->line.data, s->line.len);
			buf_free(&s->line);
		} else {
			rc = take_line(s, p, n);
		}
		if (rc < 0) {
			s->oom = true;
			return -1;
		}
		p += n + (nl ? 1 : 0);
		len -= n + (nl ? 1 : 0);
	}
	return 0;
}

json_t *model_stream_message(struct model_stream *s, char **err)
{
	*err = NULL;
	if (!s->oom && s->line.len) {
		if (take_line(s, s->line.data, s->line.len) < 0)
			s->oom = true;
		buf_free(&s->line);
	}
	if (!s->oom && take_event(s) < 0)
		s->oom = true;
	if (s->oom) {
		*err = model_strdupf("out of memory reading the model's streamed reply");
		return NULL;
	}
	if (s->error) {
		*err = strdup(s->error);
		return NULL;
	}
	if (!s->content.len && !json_array_size(s->calls)) {
		*err = model_strdupf("model server's streamed reply held no message%s",
				     s->done ? "" : " (it ended without [DONE])");
		return NULL;
	}
	json_t *msg = json_pack("{s:s, s:s%}", "role", "assistant", "content",
				s->content.data ? s->content.data : "", s->content.len);
	if (msg && json_array_size(s->calls) &&
	    json_object_set(msg, "tool_calls", s->calls) < 0) {
		json_decref(msg);
		msg = NULL;
	}
	if (!msg)
		*err = model_strdupf("out of memory reading the model's streamed reply");
	return msg;
}
