/* model: one interface to chat-completions style models (DESIGN.md
 * section 7). Messages and tools are jansson values in the OpenAI
 * chat-completions shape. Providers: echo (built in, offline), command (a
 * program run per turn), openai (HTTP via libcurl), or a custom in-process
 * one (tests). */
#ifndef SKILLFS_MODEL_H
#define SKILLFS_MODEL_H

#include <stdbool.h>

#include <jansson.h>

#include "buf.h"
#include "config.h"

/* Output cap of the command provider's stdout (and stderr). */
#define MODEL_COMMAND_OUTPUT_MAX (4 * 1024 * 1024)
/* How much of a command's stderr goes into an error message (its tail). */
#define MODEL_STDERR_EXCERPT 4096
/* Largest HTTP response body the openai provider accepts. */
#define MODEL_HTTP_BODY_MAX (16 * 1024 * 1024)
/* openai retries: at most this many retries after the first attempt, with
 * backoff base * 2^n (base 500 ms, or $SKILLFS_MODEL_BACKOFF_MS read when
 * the model is created), each wait at most MODEL_BACKOFF_MAX_MS; a
 * Retry-After header (seconds or HTTP date) replaces the backoff, capped at
 * MODEL_RETRY_AFTER_MAX_S. */
#define MODEL_HTTP_MAX_RETRIES 4
#define MODEL_BACKOFF_BASE_MS 500
#define MODEL_BACKOFF_MAX_MS 8000
#define MODEL_RETRY_AFTER_MAX_S 30

struct model_request {
	/* Array of {role, content, tool_calls?, tool_call_id?, name?}.
	 * Borrowed; never modified. */
	json_t *messages;
	/* Array of {"type":"function","function":{name, description,
	 * parameters}}, or NULL when the run has no tools: the request then
	 * carries no tools field at all (R3). An empty array counts as NULL. */
	json_t *tools;
	/* Optional: tools as compact JSON text, encoded once by the caller;
	 * providers that send JSON use it instead of encoding tools again. */
	const char *tools_text;
	const char *run_id;  /* may be NULL */
	const char *chat_id; /* may be NULL */
	int turn;            /* the caller's model-call counter for this chat,
			      * from 1; distinct per call within a chat */
	/* Optional: polled while waiting on the model (command and openai);
	 * when it returns true the call is abandoned with an error. */
	bool (*cancelled)(void *arg);
	void *cancel_arg;
	/* Optional: the reply's text so far as it arrives, for providers that
	 * stream (openai, unless model.stream is false): each call hands all
	 * of it (len bytes, not NUL-terminated); text NULL means what came so
	 * far is void (the attempt failed and is tried again). Called on the
	 * calling thread. model_complete still returns the whole reply. */
	void (*partial)(void *arg, const char *text, size_t len);
	void *partial_arg;
};

struct model_reply {
	/* The assistant message, normalised: {"role":"assistant", "content":
	 * string or null, "tool_calls"?: [{"id", "type":"function",
	 * "function":{"name", "arguments": JSON text as a string}}]}. Every
	 * call has a non-empty id ("call_<turn>_<i>" when the model gave none);
	 * tool_calls is absent when there are none, and content is then a
	 * string (never null). Other fields the model sent are dropped. */
	json_t *message;
	json_t *usage; /* the provider's usage object, or NULL */
};

/* A custom provider. complete fills out->message (any assistant-shaped
 * object; model_complete normalises it) and optionally out->usage, and
 * returns 0; or returns -1 with a malloc'd *err. It must be thread-safe. */
struct model_ops {
	const char *name;
	int (*complete)(void *ctx, const struct model_request *req,
			struct model_reply *out, char **err);
	void (*free)(void *ctx); /* may be NULL */
	/* May be NULL: gets ready for the next complete call (the command
	 * provider starts its program, which then waits for its request);
	 * true when something is ready. Silent: a failure shows when
	 * complete runs. */
	bool (*prepare)(void *ctx);
};

struct model;

/* Process-wide set-up (libcurl). Call once from main before any thread is
 * started and before model_new; returns 0, or -1 with a malloc'd *err. */
int model_global_init(char **err);
/* Undoes model_global_init, after every model is freed and threads joined. */
void model_global_cleanup(void);

/* A model from the configuration (provider echo, command or openai; NULL
 * or "" means echo). Returns NULL with a malloc'd *err naming what is wrong
 * ("model.command is empty", "unknown model provider 'x'"). The model keeps
 * its own copies of what it needs from mc. The API key is never copied:
 * the variable named by api_key_env is read at each call. */
struct model *model_new(const struct model_config *mc, char **err);

/* A model served by ops/ctx (ctx is passed to ops->free by model_free).
 * Returns NULL on ENOMEM (ops->free is not called then). */
struct model *model_new_custom(const struct model_ops *ops, void *ctx);

/* The provider name: "echo", "command", "openai" or ops->name. */
const char *model_provider(const struct model *m);

/* One completion. On success returns 0 and *out holds the normalised reply
 * (release with model_reply_free). On failure returns -1, *out is empty and
 * *err is a malloc'd message saying what went wrong, with the program's
 * stderr or the server's error message when there is one (*err is NULL
 * only when memory ran out). Thread-safe: calls on one model may run
 * concurrently. */
int model_complete(struct model *m, const struct model_request *req,
		   struct model_reply *out, char **err);

/* Tells the model that a call is coming, so that its start-up (a command
 * provider's program loading) overlaps what the caller does first, such
 * as committing the step before the call. No request is sent: the next
 * model_complete sends it. True when something is ready (a program
 * waits); false for providers with nothing to prepare, or when it could
 * not be done (the call then says why). What was prepared and not used
 * is undone by model_free. */
bool model_prepare(struct model *m);

/* Normalises an assistant message as described for model_reply.message.
 * Returns a new reference, or NULL with a malloc'd *err when msg is not an
 * assistant message (wrong role, bad content or tool_calls). */
json_t *model_normalise_message(json_t *msg, int turn, char **err);

/* Releases the reply's values; it is then empty. */
void model_reply_free(struct model_reply *r);

void model_free(struct model *m);

/* Provider constructors used by model_new; each returns 0 and fills *ops
 * and *ctx, or -1 with a malloc'd *err. */
int model_echo_open(const struct model_config *mc, const struct model_ops **ops,
		    void **ctx, char **err);
int model_command_open(const struct model_config *mc, const struct model_ops **ops,
		       void **ctx, char **err);
int model_openai_open(const struct model_config *mc, const struct model_ops **ops,
		      void **ctx, char **err);

/* The command provider's stdout (a chat completion or the bare assistant
 * message, not yet normalised: model_complete does that) taken into out:
 * 0, or -1 with why it is no reply appended to why (out left empty). */
int model_command_reply(const char *text, size_t len, struct model_reply *out,
			struct buf *why);

/* Helpers shared by the providers. */

/* The request body common to command and openai as compact JSON text:
 * {"model"?, "messages", the members of extra (may be NULL), "tools"?}
 * (model left out when name is NULL or empty, tools when req->tools is
 * NULL or empty; req->tools_text used when set). Malloc'd, its length in
 * *len; NULL when out of memory or a message is not valid UTF-8. */
char *model_request_text(const struct model_request *req, const char *name, json_t *extra,
			 size_t *len);

/* Text of a message's content: a string, or the "text" parts of an array
 * joined together; NULL for anything else. Malloc'd (NULL on ENOMEM). */
char *model_content_text(json_t *content);

/* Appends up to max bytes of s (its tail when tail is set, else its head,
 * with "..." where cut) to b, trimmed of surrounding white space, with
 * invalid UTF-8 and control characters other than newline and tab replaced
 * by '?', so the text is safe in a JSON string or a one-line log. Returns 0
 * or -1 on ENOMEM. */
int model_append_excerpt(struct buf *b, const char *s, size_t len, size_t max,
			 bool tail);

/* A malloc'd printf-formatted string; NULL on ENOMEM (callers then report
 * a fixed message). */
char *model_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
