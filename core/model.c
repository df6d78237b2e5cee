#include "model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct model {
	const struct model_ops *ops;
	void *ctx;
};

char *model_strdupf(const char *fmt, ...)
{
	struct buf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (r < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

static int set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_err(char **err, const char *fmt, ...)
{
	if (!err)
		return -1;
	struct buf b = { 0 };
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	*err = r < 0 ? NULL : buf_steal(&b, NULL);
	if (r < 0)
		buf_free(&b);
	return -1;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	unsigned cp = c & (0xff >> (len + 1));
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

int model_append_excerpt(struct buf *b, const char *s, size_t len, size_t max,
			 bool tail)
{
	static const char ws[] = " \t\r\n\v\f";
	while (len && strchr(ws, s[0]) && s[0])
		s++, len--;
	while (len && strchr(ws, s[len - 1]) && s[len - 1])
		len--;
	bool cut = len > max;
	if (cut) {
		if (tail) {
			s += len - max;
			len = max;
			while (len && ((unsigned char)s[0] & 0xc0) == 0x80)
				s++, len--;
			if (buf_puts(b, "...") < 0)
				return -1;
		} else {
			len = max;
			while (len && ((unsigned char)s[len] & 0xc0) == 0x80)
				len--;
		}
	}
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		size_t run = 0;
		/* copy the longest clean stretch at once */
		while (i + run < len) {
			unsigned char c = p[i + run];
			size_t l;
			if (c < 0x20 && c != '\n' && c != '\t')
				break;
			if (c == 0x7f)
				break;
			l = utf8_len(p + i + run, len - i - run);
			if (!l)
				break;
			run += l;
		}
		if (run && buf_append(b, p + i, run) < 0)
			return -1;
		i += run;
		if (i < len) {
			if (p[i] != '\r' && buf_append(b, "?", 1) < 0)
				return -1;
			i++;
		}
	}
	if (cut && !tail && buf_puts(b, "...") < 0)
		return -1;
	return 0;
}

char *model_content_text(json_t *content)
{
	if (json_is_string(content))
		return strndup(json_string_value(content), json_string_length(content));
	if (!json_is_array(content))
		return NULL;
	struct buf b = { 0 };
	size_t i;
	json_t *part;
	json_array_foreach(content, i, part) {
		json_t *text = json_object_get(part, "text");
		const char *type = json_string_value(json_object_get(part, "type"));
		if (json_is_string(part))
			text = part;
		else if (type && strcmp(type, "text") != 0)
			continue;
		if (!json_is_string(text))
			continue;
		if (buf_append(&b, json_string_value(text), json_string_length(text)) < 0) {
			buf_free(&b);
			return NULL;
		}
	}
	return buf_steal(&b, NULL);
}

char *model_request_text(const struct model_request *req, const char *name, json_t *extra,
			 size_t *len)
{
	json_t *body = json_object();
	char *text = NULL, *tools = NULL;
	struct buf b = { 0 };
	if (!body || (name && *name && json_object_set_new(body, "model", json_string(name)) < 0) ||
	    json_object_set(body, "messages", req->messages) < 0 ||
	    (extra && json_object_update(body, extra) < 0) ||
	    !(text = json_dumps(body, JSON_COMPACT)))
		goto out;
	if (json_array_size(req->tools) == 0) {
		*len = strlen(text);
		json_decref(body);
		return text;
	}
	/* The tools are the bulk of a request and the same every call:
	 * spliced in as encoded once, before the body's closing brace. */
	const char *t = req->tools_text ? req->tools_text
					: (tools = json_dumps(req->tools, JSON_COMPACT));
	size_t n = strlen(text);
	if (t && buf_append(&b, text, n - 1) == 0 && buf_puts(&b, ",\"tools\":") == 0 &&
	    buf_puts(&b, t) == 0 && buf_puts(&b, "}") == 0) {
		free(text);
		text = buf_steal(&b, len);
	} else {
		free(text);
		text = NULL;
	}
out:
	buf_free(&b);
	free(tools);
	json_decref(body);
	return text;
}

/* One tool call, normalised; NULL with *err. */
static json_t *normalise_call(json_t *call, size_t i, int turn, json_t *seen, char **err)
{
	if (!json_is_object(call)) {
		set_err(err, "model reply: tool call %zu is not an object", i);
		return NULL;
	}
	json_t *type = json_object_get(call, "type");
	if (type && !json_is_null(type) &&
	    !(json_is_string(type) && strcmp(json_string_value(type), "function") == 0)) {
		set_err(err, "model reply: tool call %zu has type %s, expected function", i,
			json_is_string(type) ? json_string_value(type) : "(not a string)");
		return NULL;
	}
	json_t *fn = json_object_get(call, "function");
	const char *name = json_string_value(json_object_get(fn, "name"));
	if (!json_is_object(fn) || !name || !*name) {
		set_err(err, "model reply: tool call %zu has no function name", i);
		return NULL;
	}

	json_t *args = json_object_get(fn, "arguments");
	json_t *argstr;
	if (!args || json_is_null(args)) {
		argstr = json_string("{}");
	} else if (json_is_string(args)) {
		argstr = json_incref(args);
	} else {
		char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
		argstr = text ? json_string(text) : NULL;
		free(text);
	}

	json_t *id = json_object_get(call, "id");
	json_t *idstr;
	if (json_is_string(id) && json_string_length(id) > 0 &&
	    !json_object_get(seen, json_string_value(id))) {
		idstr = json_incref(id);
	} else {
		char gen[48];
		snprintf(gen, sizeof gen, "call_%d_%zu", turn, i);
		idstr = json_string(gen);
	}

	json_t *out = NULL;
	if (argstr && idstr && json_object_set_new(seen, json_string_value(idstr), json_true()) == 0)
		out = json_pack("{s:O, s:s, s:{s:s, s:O}}", "id", idstr, "type", "function",
				"function", "name", name, "arguments", argstr);
	json_decref(argstr);
	json_decref(idstr);
	if (!out)
		set_err(err, "out of memory normalising the model reply");
	return out;
}

json_t *model_normalise_message(json_t *msg, int turn, char **err)
{
	if (!json_is_object(msg)) {
		set_err(err, "model reply: the message is not a JSON object");
		return NULL;
	}
	json_t *role = json_object_get(msg, "role");
	if (role && !json_is_null(role) &&
	    !(json_is_string(role) && strcmp(json_string_value(role), "assistant") == 0)) {
		set_err(err, "model reply: role is %s, expected assistant",
			json_is_string(role) ? json_string_value(role) : "not a string");
		return NULL;
	}

	json_t *content = json_object_get(msg, "content");
	json_t *text = NULL;
	if (content && !json_is_null(content)) {
		char *s = model_content_text(content);
		if (!s) {
			set_err(err, "model reply: content is neither a string, text parts nor null");
			return NULL;
		}
		text = json_string(s);
		free(s);
		if (!text) {
			set_err(err, "model reply: content is not valid UTF-8 text");
			return NULL;
		}
	}

	json_t *calls = json_object_get(msg, "tool_calls");
	if (calls && !json_is_null(calls) && !json_is_array(calls)) {
		json_decref(text);
		set_err(err, "model reply: tool_calls is not an array");
		return NULL;
	}

	json_t *out = json_object();
	json_t *ncalls = json_array();
	json_t *seen = json_object();
	if (!out || !ncalls || !seen)
		goto oom;
	size_t i;
	json_t *call;
	json_array_foreach(calls, i, call) {
		json_t *n = normalise_call(call, i, turn, seen, err);
		if (!n)
			goto fail;
		if (json_array_append_new(ncalls, n) < 0)
			goto oom;
	}
	if (!text && json_array_size(ncalls) == 0)
		text = json_string("");
	if (json_object_set_new(out, "role", json_string("assistant")) < 0)
		goto oom;
	json_t *c = text ? text : json_null();
	text = NULL; /* set_new takes the reference, even when it fails */
	if (json_object_set_new(out, "content", c) < 0)
		goto oom;
	if (json_array_size(ncalls) > 0 && json_object_set(out, "tool_calls", ncalls) < 0)
		goto oom;
	json_decref(ncalls);
	json_decref(seen);
	return out;
oom:
	set_err(err, "out of memory normalising the model reply");
fail:
	json_decref(text);
	json_decref(out);
	json_decref(ncalls);
	json_decref(seen);
	return NULL;
}

struct model *model_new_custom(const struct model_ops *ops, void *ctx)
{
	if (!ops || !ops->complete) {
		errno = EINVAL;
		return NULL;
	}
	struct model *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->ops = ops;
	m->ctx = ctx;
	return m;
}

struct model *model_new(const struct model_config *mc, char **err)
{
	const char *p = mc && mc->provider && *mc->provider ? mc->provider : "echo";
	const struct model_ops *ops = NULL;
	void *ctx = NULL;
	int r;
	if (err)
		*err = NULL;
	if (strcmp(p, "echo") == 0)
		r = model_echo_open(mc, &ops, &ctx, err);
	else if (strcmp(p, "command") == 0)
		r = model_command_open(mc, &ops, &ctx, err);
	else if (strcmp(p, "openai") == 0)
		r = model_openai_open(mc, &ops, &ctx, err);
	else {
		set_err(err, "unknown model provider '%s' (expected echo, command or openai)", p);
		return NULL;
	}
	if (r < 0)
		return NULL;
	struct model *m = model_new_custom(ops, ctx);
	if (!m) {
		if (ops->free)
			ops->free(ctx);
		set_err(err, "out of memory creating the model");
	}
	return m;
}

const char *model_provider(const struct model *m)
{
	return m && m->ops->name ? m->ops->name : "custom";
}

int model_complete(struct model *m, const struct model_request *req,
		   struct model_reply *out, char **err)
{
	memset(out, 0, sizeof *out);
	if (err)
		*err = NULL;
	if (!m || !req || !json_is_array(req->messages))
		return set_err(err, "model call without a messages array");
	if (req->tools && !json_is_array(req->tools))
		return set_err(err, "model call with tools that are not an array");

	struct model_reply raw = { 0 };
	char *perr = NULL;
	if (m->ops->complete(m->ctx, req, &raw, &perr) < 0) {
		model_reply_free(&raw);
		if (err)
			*err = perr ? perr : model_strdupf("%s model call failed", model_provider(m));
		else
			free(perr);
		return -1;
	}
	free(perr);
	json_t *msg = model_normalise_message(raw.message, req->turn, err);
	if (!msg) {
		model_reply_free(&raw);
		return -1;
	}
	out->message = msg;
	if (json_is_object(raw.usage))
		out->usage = json_incref(raw.usage);
	model_reply_free(&raw);
	return 0;
}

bool model_prepare(struct model *m)
{
	return m && m->ops->prepare && m->ops->prepare(m->ctx);
}

void model_reply_free(struct model_reply *r)
{
	if (!r)
		return;
	json_decref(r->message);
	json_decref(r->usage);
	r->message = r->usage = NULL;
}

void model_free(struct model *m)
{
	if (!m)
		return;
	if (m->ops->free)
		m->ops->free(m->ctx);
	free(m);
}
