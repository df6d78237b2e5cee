/* The command provider: runs the configured program once per turn. stdin
 * is one JSON object {"model"?, "messages", "tools"?, "metadata": {"run",
 * "chat_id", "turn"}}; stdout is one JSON object, a chat completion or the
 * bare assistant message. */
#include "model.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

struct command {
	char **argv; /* NULL-terminated */
	char *model;
	int timeout_s;
	struct proc *ready; /* started by prepare, fed by the next call */
};

static void command_free(void *ctx)
{
	struct command *c = ctx;
	if (!c)
		return;
	proc_discard(c->ready);
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		free(c->argv[i]);
	free(c->argv);
	free(c->model);
	free(c);
}

/* Appends ": <stderr tail>" when the program wrote anything there. */
static int append_stderr(struct buf *b, const struct proc_result *res, const char *sep)
{
	if (!res->err.len)
		return 0;
	struct buf ex = { 0 };
	int r = model_append_excerpt(&ex, res->err.data, res->err.len,
				     MODEL_STDERR_EXCERPT, true);
	if (r == 0 && ex.len)
		r = buf_printf(b, "%s%s", sep, ex.data);
	buf_free(&ex);
	return r;
}

/* Takes the reply out of the parsed stdout; NULL reason on success. */
static const char *take_reply(json_t *root, struct model_reply *out, struct buf *why)
{
	if (!json_is_object(root))
		return "model command printed JSON that is not an object";
	json_t *choices = json_object_get(root, "choices");
	if (choices) {
		json_t *msg = json_object_get(json_array_get(choices, 0), "message");
		if (!json_is_object(msg))
			return "model command printed a chat completion without choices[0].message";
		out->message = json_incref(msg);
		json_t *usage = json_object_get(root, "usage");
		if (json_is_object(usage))
			out->usage = json_incref(usage);
		return NULL;
	}
	json_t *error = json_object_get(root, "error");
	if (error && !json_object_get(root, "role")) {
		const char *m = json_string_value(json_object_get(error, "message"));
		if (!m)
			m = json_string_value(error);
		buf_puts(why, "model command reported an error: ");
		if (m)
			model_append_excerpt(why, m, strlen(m), MODEL_STDERR_EXCERPT, false);
		return why->data ? why->data : "model command reported an error";
	}
	if (json_object_get(root, "role") || json_object_get(root, "content") ||
	    json_object_get(root, "tool_calls")) {
		out->message = json_incref(root);
		return NULL;
	}
	return "model command printed neither a chat completion nor an assistant message";
}

int model_command_reply(const char *text, size_t len, struct model_reply *out,
			struct buf *why)
{
	if (!len) {
		buf_puts(why, "model command printed nothing");
		return -1;
	}
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root) {
		buf_printf(why, "model command printed invalid JSON: %s (line %d, column %d)",
			   je.text, je.line, je.column);
		buf_puts(why, "; output starts: ");
		model_append_excerpt(why, text, len, 200, false);
		return -1;
	}
	struct buf wb = { 0 };
	const char *reason = take_reply(root, out, &wb);
	if (reason)
		buf_puts(why, reason);
	buf_free(&wb);
	json_decref(root);
	return reason ? -1 : 0;
}

static bool cancel_cb(void *arg)
{
	const struct model_request *req = arg;
	return req->cancelled(req->cancel_arg);
}

/* How the program runs for every call: its argv, timeout and output cap. */
static struct proc_spec command_spec(const struct command *c)
{
	return (struct proc_spec){
		.argv = (const char *const *)c->argv,
		.timeout_ms = c->timeout_s * 1000,
		.output_max = MODEL_COMMAND_OUTPUT_MAX,
	};
}

static int command_complete(void *ctx, const struct model_request *req,
			    struct model_reply *out, char **err)
{
	struct command *c = ctx;
	char *text = NULL;
	json_t *extra = json_pack("{s:{s:s?, s:s?, s:i}}", "metadata", "run", req->run_id,
				  "chat_id", req->chat_id, "turn", req->turn);
	size_t tlen = 0;
	if (extra)
		text = model_request_text(req, c->model, extra, &tlen);
	json_decref(extra);
	if (!text) {
		*err = model_strdupf("model command: cannot encode the request "
				     "(out of memory or invalid UTF-8 in the messages)");
		return -1;
	}
	text[tlen] = '\n'; /* replaces the NUL; the length says where it ends */

	struct proc_spec spec = command_spec(c);
	spec.stdin_data = text;
	spec.stdin_len = tlen + 1;
	spec.cancel = req->cancelled ? cancel_cb : NULL;
	spec.cancel_arg = (void *)req;
	struct proc_result res;
	struct proc *ready = __atomic_exchange_n(&c->ready, NULL, __ATOMIC_ACQ_REL);
	int pr = ready ? proc_finish(ready, &spec, &res) : proc_run(&spec, &res);
	free(text);

	struct buf msg = { 0 };
	if (pr < 0) {
		buf_printf(&msg, "cannot run model command: %s",
			   res.err.data ? res.err.data : "unknown error");
	} else if (res.cancelled) {
		buf_puts(&msg, "model call cancelled");
	} else if (res.timed_out) {
		buf_printf(&msg, "model command timed out after %d s", c->timeout_s);
		append_stderr(&msg, &res, "; stderr: ");
	} else if (res.signal) {
		buf_printf(&msg, "model command was killed by signal %d (%s)", res.signal,
			   sigabbrev_np(res.signal) ? sigabbrev_np(res.signal) : "?");
		append_stderr(&msg, &res, ": ");
	} else if (res.exit_code != 0) {
		buf_printf(&msg, "model command exited with status %d", res.exit_code);
		if (res.err.len)
			append_stderr(&msg, &res, ": ");
		else
			buf_puts(&msg, " (no stderr)");
	} else if (res.out_truncated) {
		buf_printf(&msg, "model command printed more than %d bytes",
			   MODEL_COMMAND_OUTPUT_MAX);
		append_stderr(&msg, &res, "; stderr: ");
	} else {
		if (model_command_reply(res.out.data, res.out.len, out, &msg) < 0)
			append_stderr(&msg, &res, "; stderr: ");
	}
	proc_result_free(&res);
	if (!out->message) {
		*err = msg.data ? buf_steal(&msg, NULL) : model_strdupf("model command failed");
		buf_free(&msg);
		return -1;
	}
	buf_free(&msg);
	return 0;
}

/* Starts the program for the next call; it blocks reading its stdin
 * until the call feeds it. */
static bool command_prepare(void *ctx)
{
	struct command *c = ctx;
	if (__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE))
		return true;
	struct proc_spec spec = command_spec(c);
	struct proc_result res;
	struct proc *p = proc_start(&spec, &res);
	proc_result_free(&res); /* a failure is reported by the call itself */
	struct proc *none = NULL;
	if (p && !__atomic_compare_exchange_n(&c->ready, &none, p, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE))
		proc_discard(p);
	return p != NULL;
}

static const struct model_ops command_ops = {
	.name = "command",
	.complete = command_complete,
	.free = command_free,
	.prepare = command_prepare,
};

int model_command_open(const struct model_config *mc, const struct model_ops **ops,
		       void **ctx, char **err)
{
	if (!mc || mc->command.n == 0 || !mc->command.items[0] || !*mc->command.items[0]) {
		*err = model_strdupf("model.command is empty: the command provider needs "
				     "a program to run");
		return -1;
	}
	struct command *c = calloc(1, sizeof *c);
	if (!c)
		goto oom;
	c->timeout_s = mc->timeout > 0 ? mc->timeout : CONFIG_DEFAULT_MODEL_TIMEOUT;
	if (c->timeout_s > 24 * 3600)
		c->timeout_s = 24 * 3600;
	c->argv = calloc(mc->command.n + 1, sizeof *c->argv);
	if (!c->argv)
		goto oom;
	for (size_t i = 0; i < mc->command.n; i++)
		if (!(c->argv[i] = strdup(mc->command.items[i])))
			goto oom;
	if (mc->model && *mc->model && !(c->model = strdup(mc->model)))
		goto oom;
	*ops = &command_ops;
	*ctx = c;
	return 0;
oom:
	command_free(c);
	*err = model_strdupf("out of memory creating the command model");
	return -1;
}
