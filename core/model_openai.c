/* The openai provider: POST {base_url}/chat/completions to any
 * OpenAI-compatible server with libcurl, one easy handle per attempt. */
#include "model.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "model_stream.h"

#ifndef SKILLFS_VERSION
#define SKILLFS_VERSION "0"
#endif

#define CANCEL_SLICE_MS 100

struct openai {
	char *url; /* .../chat/completions */
	char *model;
	char *key_env;
	long timeout_s;
	long backoff_ms;
	bool stream; /* model.stream: ask for server-sent events when the
			caller takes the text as it comes */
};

/* One HTTP exchange. */
struct attempt {
	struct buf body;
	bool too_big;
	long status;
	long retry_after_ms; /* -1 when the answer had none */
	bool event_stream;   /* the body is server-sent events */
	struct model_stream *stream; /* where events go; NULL: not asked */
	CURLcode code;
	char errbuf[CURL_ERROR_SIZE];
};

int model_global_init(char **err)
{
	CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (c != CURLE_OK) {
		*err = model_strdupf("cannot initialise libcurl: %s", curl_easy_strerror(c));
		return -1;
	}
	return 0;
}

void model_global_cleanup(void)
{
	curl_global_cleanup();
}

static void openai_free(void *ctx)
{
	struct openai *o = ctx;
	if (!o)
		return;
	free(o->url);
	free(o->model);
	free(o->key_env);
	free(o);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct attempt *a = arg;
	size_t len = size * n;
	if (a->event_stream && a->stream) {
		if (a->stream->seen + len > MODEL_HTTP_BODY_MAX) {
			a->too_big = true;
			return 0;
		}
		return model_stream_feed(a->stream, p, len) < 0 ? 0 : len;
	}
	if (a->body.len + len > MODEL_HTTP_BODY_MAX) {
		a->too_big = true;
		return 0;
	}
	return buf_append(&a->body, p, len) < 0 ? 0 : len;
}

/* Retry-After: delay-seconds or an HTTP date, capped. */
static long parse_retry_after(const char *v, size_t len)
{
	char tmp[128];
	while (len && isspace((unsigned char)*v))
		v++, len--;
	while (len && isspace((unsigned char)v[len - 1]))
		len--;
	if (!len || len >= sizeof tmp)
		return -1;
	memcpy(tmp, v, len);
	tmp[len] = '\0';
	long secs;
	if (strspn(tmp, "0123456789") == len) {
		secs = len > 6 ? MODEL_RETRY_AFTER_MAX_S : strtol(tmp, NULL, 10);
	} else {
		time_t t = curl_getdate(tmp, NULL);
		if (t < 0)
			return -1;
		time_t now = time(NULL);
		secs = t > now ? (long)(t - now) : 0;
	}
	if (secs > MODEL_RETRY_AFTER_MAX_S)
		secs = MODEL_RETRY_AFTER_MAX_S;
	return secs * 1000;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct attempt *a = arg;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	static const char ctype[] = "content-type:";
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		a->retry_after_ms = -1; /* a new response (after 100 Continue etc.) */
		a->event_stream = false;
	} else if (len > sizeof ctype - 1 && strncasecmp(p, ctype, sizeof ctype - 1) == 0) {
		const char *v = p + sizeof ctype - 1;
		size_t vl = len - (sizeof ctype - 1);
		while (vl && isspace((unsigned char)*v))
			v++, vl--;
		a->event_stream = vl >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
	} else if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0)
		a->retry_after_ms = parse_retry_after(p + sizeof name - 1, len - (sizeof name - 1));
	return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	const struct model_request *req = arg;
	return req->cancelled(req->cancel_arg) ? 1 : 0;
}

static void do_attempt(const struct openai *o, const char *body, size_t blen,
		       const struct model_request *req, struct attempt *a)
{
	a->retry_after_ms = -1;
	a->code = CURLE_OUT_OF_MEMORY;
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = NULL, *t;
	if (!h)
		return;
	if (!(t = curl_slist_append(hdr, "Content-Type: application/json")))
		goto out;
	hdr = t;
	if (!(t = curl_slist_append(hdr, a->stream ? "Accept: text/event-stream, application/json"
						   : "Accept: application/json")))
		goto out;
	hdr = t;
	if (!(t = curl_slist_append(hdr, "Expect:")))
		goto out;
	hdr = t;

	curl_easy_setopt(h, CURLOPT_URL, o->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "skillfs/" SKILLFS_VERSION);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_s * 1000L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 o->timeout_s < 30 ? o->timeout_s * 1000L : 30000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->errbuf);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if (req->cancelled) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)req);
	}
	/* The key is read from the environment at each call and handed only
	 * to libcurl, which sends it as "Authorization: Bearer" to this host
	 * (redirects are not followed). */
	const char *key = o->key_env ? getenv(o->key_env) : NULL;
	if (key && *key) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, key);
	}
	a->code = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
out:
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
}

static bool retryable(const struct attempt *a)
{
	switch (a->code) {
	case CURLE_OK:
		return a->status == 408 || a->status == 409 || a->status == 429 ||
		       (a->status >= 500 && a->status <= 599);
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		return true;
	default:
		return false;
	}
}

/* Sleeps ms, in slices so that a cancel is seen. Returns false when
 * cancelled. */
static bool pause_ms(long ms, const struct model_request *req)
{
	while (ms > 0) {
		if (req->cancelled && req->cancelled(req->cancel_arg))
			return false;
		long slice = ms < CANCEL_SLICE_MS ? ms : CANCEL_SLICE_MS;
		struct timespec ts = { slice / 1000, (slice % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ms -= slice;
	}
	return !(req->cancelled && req->cancelled(req->cancel_arg));
}

/* The server's own words: error.message of an OpenAI-shaped body, else
 * the first bytes of the body. */
static void append_server_message(struct buf *b, const struct buf *body)
{
	if (!body->len)
		return;
	json_t *root = json_loadb(body->data, body->len, 0, NULL);
	json_t *error = json_object_get(root, "error");
	const char *m = json_string_value(json_object_get(error, "message"));
	if (!m)
		m = json_string_value(error);
	if (!m)
		m = json_string_value(json_object_get(root, "message"));
	buf_puts(b, ": ");
	if (m)
		model_append_excerpt(b, m, strlen(m), MODEL_STDERR_EXCERPT, false);
	else
		model_append_excerpt(b, body->data, body->len, 300, false);
	json_decref(root);
}

static int openai_complete(void *ctx, const struct model_request *req,
			   struct model_reply *out, char **err)
{
	struct openai *o = ctx;
	size_t tlen = 0;
	/* Streamed when the caller shows the text as it comes; a server that
	 * answers with one JSON body anyway is read as before. */
	bool streamed = o->stream && req->partial;
	json_t *extra = streamed ? json_pack("{s:b, s:{s:b}}", "stream", 1, "stream_options",
					     "include_usage", 1)
				 : NULL;
	char *text = (!streamed || extra) ? model_request_text(req, o->model, extra, &tlen) : NULL;
	json_decref(extra);
	if (!text) {
		*err = model_strdupf("openai model: cannot encode the request "
				     "(out of memory or invalid UTF-8 in the messages)");
		return -1;
	}

	struct attempt a;
	struct model_stream stream;
	model_stream_init(&stream, NULL, NULL);
	int tries = 0;
	bool cancelled = false;
	for (;;) {
		memset(&a, 0, sizeof a);
		tries++;
		if (streamed) {
			model_stream_free(&stream);
			model_stream_init(&stream, req->partial, req->partial_arg);
			a.stream = &stream;
		}
		do_attempt(o, text, tlen, req, &a);
		if (a.code == CURLE_ABORTED_BY_CALLBACK) {
			cancelled = true;
			break;
		}
		if (!retryable(&a) || tries > MODEL_HTTP_MAX_RETRIES)
			break;
		/* What this attempt showed is not the reply. */
		if (streamed && stream.content.len)
			req->partial(req->partial_arg, NULL, 0);
		long wait = a.retry_after_ms;
		if (wait < 0) {
			wait = o->backoff_ms << (tries - 1);
			if (wait > MODEL_BACKOFF_MAX_MS)
				wait = MODEL_BACKOFF_MAX_MS;
		}
		buf_free(&a.body);
		if (!pause_ms(wait, req)) {
			cancelled = true;
			break;
		}
	}
	free(text);

	struct buf msg = { 0 };
	json_t *root = NULL;
	if (cancelled) {
		buf_puts(&msg, "model call cancelled");
	} else if (a.too_big) {
		buf_printf(&msg, "model server response is larger than %d bytes",
			   MODEL_HTTP_BODY_MAX);
	} else if (stream.oom) {
		buf_puts(&msg, "out of memory reading the model's streamed reply");
	} else if (a.code == CURLE_OPERATION_TIMEDOUT) {
		buf_printf(&msg, "model server at %s did not answer within %ld s", o->url,
			   o->timeout_s);
	} else if (a.code != CURLE_OK) {
		buf_printf(&msg, "cannot reach model server at %s: %s", o->url,
			   a.errbuf[0] ? a.errbuf : curl_easy_strerror(a.code));
		if (tries > 1)
			buf_printf(&msg, " (after %d attempts)", tries);
	} else if (a.status < 200 || a.status > 299) {
		buf_printf(&msg, "model server answered HTTP %ld", a.status);
		if (tries > 1)
			buf_printf(&msg, " (after %d attempts)", tries);
		append_server_message(&msg, &a.body);
	} else if (a.event_stream && a.stream) {
		char *why = NULL;
		out->message = model_stream_message(&stream, &why);
		if (out->message && stream.usage)
			out->usage = json_incref(stream.usage);
		if (why)
			buf_puts(&msg, why);
		free(why);
	} else {
		json_error_t je;
		root = json_loadb(a.body.data ? a.body.data : "", a.body.len, 0, &je);
		json_t *msgobj = json_object_get(json_array_get(json_object_get(root, "choices"), 0),
						 "message");
		if (!root) {
			buf_printf(&msg, "model server sent invalid JSON: %s; body starts: ", je.text);
			model_append_excerpt(&msg, a.body.data ? a.body.data : "", a.body.len, 200,
					     false);
		} else if (!json_is_object(msgobj)) {
			buf_puts(&msg, "model server answer has no choices[0].message");
			if (json_object_get(root, "error"))
				append_server_message(&msg, &a.body);
		} else {
			out->message = json_incref(msgobj);
			json_t *usage = json_object_get(root, "usage");
			if (json_is_object(usage))
				out->usage = json_incref(usage);
		}
	}
	json_decref(root);
	buf_free(&a.body);
	model_stream_free(&stream);
	if (!out->message) {
		*err = msg.data ? buf_steal(&msg, NULL) : model_strdupf("openai model call failed");
		buf_free(&msg);
		return -1;
	}
	buf_free(&msg);
	return 0;
}

static const struct model_ops openai_ops = {
	.name = "openai",
	.complete = openai_complete,
	.free = openai_free,
};

int model_openai_open(const struct model_config *mc, const struct model_ops **ops,
		      void **ctx, char **err)
{
	const char *base = mc ? mc->base_url : NULL;
	if (!base || !*base) {
		*err = model_strdupf("model.base_url is required for provider openai "
				     "(e.g. http://127.0.0.1:8080/v1)");
		return -1;
	}
	if (strncasecmp(base, "http://", 7) != 0 && strncasecmp(base, "https://", 8) != 0) {
		*err = model_strdupf("model.base_url must start with http:// or https://, "
				     "not '%s'", base);
		return -1;
	}
	struct openai *o = calloc(1, sizeof *o);
	if (!o)
		goto oom;
	size_t blen = strlen(base);
	while (blen && base[blen - 1] == '/')
		blen--;
	o->url = model_strdupf("%.*s/chat/completions", (int)blen, base);
	if (!o->url)
		goto oom;
	if (mc->model && *mc->model && !(o->model = strdup(mc->model)))
		goto oom;
	if (mc->api_key_env && *mc->api_key_env && !(o->key_env = strdup(mc->api_key_env)))
		goto oom;
	o->timeout_s = mc->timeout > 0 ? mc->timeout : CONFIG_DEFAULT_MODEL_TIMEOUT;
	o->backoff_ms = MODEL_BACKOFF_BASE_MS;
	o->stream = !mc->stream_off;
	const char *bo = getenv("SKILLFS_MODEL_BACKOFF_MS");
	if (bo && *bo) {
		char *end;
		errno = 0;
		long v = strtol(bo, &end, 10);
		if (!errno && !*end && v >= 0 && v <= 60000)
			o->backoff_ms = v;
	}
	*ops = &openai_ops;
	*ctx = o;
	return 0;
oom:
	openai_free(o);
	*err = model_strdupf("out of memory creating the openai model");
	return -1;
}
