/* agent: the agent loop of one run. See agent.h.
 *
 * One loop (chat_loop) drives any chat, the main agent's or a sub-agent's:
 * it looks at the chat's last committed message and takes the next step
 * (answer the first unanswered tool call, or call the model), committing
 * each step before the next. Every commit goes through a compare-and-set
 * move running -> running, so a run that someone else moved (cancelled,
 * failed) stops the loop at the next step.
 *
 * One file past 1,200 lines: the steps (tool calls, approvals, questions,
 * sub-agents, budgets) share `struct chat` and the commit protocol above,
 * and the transcript rendering at the end reads the same chats and events
 * in the same shapes. */
#include "agent.h"

#include "json_text.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "budget.h"
#include "mode.h"
#include "skilldirs.h"
#include "tools.h"

#define SKILL_RUN_PREFIX "/skill:run:"
#define ARGS_EXCERPT_MAX 500       /* arguments in events */
#define TX_SYSTEM_MAX 240          /* transcript: system prompts */
#define TX_ARGS_MAX 500            /* transcript: call arguments */
#define TX_RESULT_MAX 1000         /* transcript: tool results */
/* The result of a call with side effects that a crash or a stop
 * interrupted (%s: the tool): it is not run again. */
#define TOOL_INTERRUPTED_TEXT                                                     \
	"error: this %s call was interrupted (skillfs stopped or crashed while "  \
	"it ran) and is not run again: it may have partly run. Check what it "    \
	"did before you call it again."
/* The transcript's line where a model call was asked again. */
#define TX_MODEL_REPEATED                                                         \
	"[model call interrupted (skillfs stopped or crashed): asked again]\n"

/* What one step (or a whole chat) ended with. */
enum step {
	STEP_ERR = -1,     /* store or memory failure: agent.err says why */
	STEP_OK = 0,       /* committed; go on */
	STEP_DONE,         /* the chat has its final answer (chat.final) */
	STEP_FAIL,         /* the chat failed (chat.error) */
	STEP_WAIT_APPROVAL,/* the run moved to waiting_for_approval */
	STEP_WAIT_INPUT,   /* the run moved to waiting_for_input */
	STEP_CANCEL,       /* cancellation was requested */
	STEP_STOP,         /* the daemon is stopping: leave the run as it is */
	STEP_GONE,         /* the run left state running under us */
	STEP_BUDGET,       /* a runs.budget was reached: the run fails with
	                      budget_exceeded(&agent.budget) */
};

struct agent {
	const struct agent_env *env;
	const char *run_id;
	enum runstate from; /* QUEUED until the start is committed, then RUNNING */
	json_t *usage; /* the run's token usage so far, summed; or NULL */
	char *err;     /* why STEP_ERR */
	struct budget budget;
	struct skilldirs skills; /* whose files the tools may read (/skills) */
};

struct chat {
	struct agent *a;
	const char *id;
	bool is_main;
	int depth;            /* 0 for the main chat, a sub-agent's parent's + 1 */
	const char *skill;    /* a sub-agent's skill; NULL for the main chat */
	const struct catalog_entry *entry; /* the same skill's entry */
	struct strlist tools; /* the tools of this chat (lower-case) */
	json_t *schemas;      /* what the model is offered; NULL: nothing (R3) */
	char *schemas_text;   /* the same as JSON text, or NULL: encoded per call */
	json_t *msgs;         /* the chat's committed messages */
	char *final;          /* STEP_DONE */
	char *error;          /* STEP_FAIL */
	/* The main chat's final answer and usage are committed with the
	 * run's completion, in one step (NULL when already committed). */
	json_t *final_msg, *final_usage;
};

/* ---- small helpers ------------------------------------------------------- */

/* Records why the run cannot go on (msg, malloc'd, taken; NULL: from the
 * errno value rc) and returns STEP_ERR. */
static int fail_err(struct agent *a, int rc, char *msg)
{
	free(a->err);
	if (msg)
		a->err = msg;
	else if (rc == -ENOMEM)
		a->err = strdup("agent: out of memory");
	else
		a->err = model_strdupf("store error: %s", strerror(rc < 0 ? -rc : rc));
	return STEP_ERR;
}

static int oom(struct agent *a)
{
	return fail_err(a, -ENOMEM, NULL);
}

static bool is_cancelled(const struct agent *a)
{
	return a->env->cancelled && a->env->cancelled(a->env->cancel_arg);
}

/* STEP_CANCEL, STEP_STOP or STEP_BUDGET (runs.budget.seconds) when the run
 * is to be interrupted (a cancel wins, so it is recorded; a stop leaves
 * the run as it is, to resume and fail then), else STEP_OK. */
static int interruption(struct agent *a)
{
	if (is_cancelled(a))
		return STEP_CANCEL;
	if (a->env->stopping && a->env->stopping(a->env->stopping_arg))
		return STEP_STOP;
	if (!budget_check_time(&a->budget))
		return STEP_BUDGET;
	return STEP_OK;
}

/* The poll given to model and tool calls (a true answer ends the call and
 * kills its process): cancelled, stopping or out of time. */
static bool interrupted(void *arg)
{
	return interruption(arg) != STEP_OK;
}

static void progress_files(const struct agent *a, bool new_files)
{
	if (a->env->progress)
		a->env->progress(a->env->progress_arg, a->run_id, new_files);
}

static void progress(const struct agent *a)
{
	progress_files(a, false);
}

static const char *role_of(const json_t *msg)
{
	const char *r = json_string_value(json_object_get(msg, "role"));
	return r ? r : "";
}

static bool str_eq(const char *x, const char *y)
{
	return x && y && strcmp(x, y) == 0;
}

/* A malloc'd lower-case copy of s (NULL counts as ""). */
static char *lower_dup(const char *s)
{
	char *d = strdup(s ? s : "");
	for (char *p = d; p && *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return d;
}

/* Appends body with every $ARGUMENTS replaced by args (R11); when there is
 * no placeholder and append is set, "ARGUMENTS: <args>" is appended after a
 * blank line (nothing when args is empty). */
static int expand_arguments(struct buf *out, const char *body,
			    const char *args, bool append)
{
	static const char ph[] = "$ARGUMENTS";
	const char *p = body ? body : "", *q;
	bool found = false;
	int rc = 0;
	while (rc == 0 && (q = strstr(p, ph))) {
		rc = buf_append(out, p, (size_t)(q - p));
		if (rc == 0)
			rc = buf_puts(out, args ? args : "");
		p = q + sizeof ph - 1;
		found = true;
	}
	if (rc == 0)
		rc = buf_puts(out, p);
	if (rc == 0 && !found && append && args && *args)
		rc = buf_printf(out, "%sARGUMENTS: %s",
				!body || !*body ? ""
				: body[strlen(body) - 1] == '\n' ? "\n" : "\n\n",
				args);
	if (rc == 0 && !out->data)
		rc = buf_puts(out, "");
	return rc;
}

/* Appends the line saying where the tools find skill s's own files
 * ("Base directory of this skill: /skills/<name> ..."), what being "skill"
 * or "sub-skill"; nothing when they are not in reach. */
static int put_base_dir(const struct agent *a, const struct skill *s, const char *what,
			struct buf *out)
{
	char *base = skilldirs_base(&a->skills, s);
	if (!base)
		return errno == ENOMEM ? -1 : 0;
	int rc = buf_printf(out, "Base directory of this %s: %s (read-only; its scripts/ "
			    "and references/ are there)\n\n", what, base);
	free(base);
	return rc;
}

/* Text of a JSON value given as the arguments of a skill: a string as is,
 * null or absent as NULL, anything else as compact JSON. *ok false on
 * ENOMEM. */
static char *arguments_text(const json_t *v, bool *ok)
{
	*ok = true;
	if (!v || json_is_null(v))
		return NULL;
	char *s = json_is_string(v) ? strdup(json_string_value(v))
				    : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s)
		*ok = false;
	return s;
}

/* Sums usage u into a copy of sum: integers and reals add up, objects
 * recurse, anything else takes the newer value. New reference or NULL. */
static json_t *usage_add(const json_t *sum, json_t *u)
{
	json_t *out = json_is_object(sum) ? json_deep_copy(sum) : json_object();
	if (!out || !json_is_object(u))
		return out;
	const char *k;
	json_t *v;
	json_object_foreach(u, k, v) {
		json_t *old = json_object_get(out, k), *nv;
		if (json_is_integer(v) && json_is_integer(old))
			nv = json_integer(json_integer_value(old) +
					  json_integer_value(v));
		else if (json_is_number(v) && json_is_number(old))
			nv = json_real(json_number_value(old) + json_number_value(v));
		else if (json_is_object(v))
			nv = usage_add(old, v);
		else
			nv = json_deep_copy(v);
		if (!nv || json_object_set_new(out, k, nv) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

static bool is_stopping(const struct agent *a)
{
	return a->env->stopping && a->env->stopping(a->env->stopping_arg);
}

/* Whether a commit that failed with rc may go through when tried again:
 * a database locked elsewhere, a full or read-only disk, failing I/O. */
static bool store_may_recover(int rc)
{
	return rc == -EAGAIN || rc == -ENOSPC || rc == -EDQUOT || rc == -EROFS || rc == -EIO;
}

/* After try number `attempt` of a commit (rc its result, *err its
 * message): whether to try it again, as env->store_wait says. */
static bool retry_commit(struct agent *a, int rc, char **err, unsigned attempt)
{
	const struct agent_env *env = a->env;
	if (!env->store_wait)
		return false;
	if (rc == 0) {
		if (attempt)
			env->store_wait(env->store_wait_arg, a->run_id, 0, NULL, attempt);
		return false;
	}
	if (!store_may_recover(rc) || !env->store_wait(env->store_wait_arg, a->run_id, rc, *err,
						       attempt))
		return false;
	free(*err);
	*err = NULL;
	return true;
}

/* A commit that failed with rc after its tries: STEP_STOP when the daemon
 * is stopping meanwhile (the run resumes from its last commit), else
 * STEP_ERR with why. */
static int commit_failed(struct agent *a, int rc, char *err)
{
	if (store_may_recover(rc) && is_stopping(a)) {
		free(err);
		return STEP_STOP;
	}
	return fail_err(a, rc, err);
}

/* An event in the run's log; data is stolen (NULL from a failed json_pack
 * means ENOMEM). */
static int log_event(struct agent *a, const char *type, json_t *data)
{
	if (!data)
		return oom(a);
	char *err = NULL;
	int rc;
	for (unsigned attempt = 0;; attempt++) {
		rc = store_event_append(a->env->store, a->run_id, type, data, NULL, &err);
		if (!retry_commit(a, rc, &err, attempt))
			break;
	}
	json_decref(data);
	if (rc < 0)
		return commit_failed(a, rc, err);
	progress(a);
	return STEP_OK;
}

/* Moves the run from `from` to `to` with ch (compare and set): STEP_GONE
 * when it is no longer in state from, STEP_BUDGET when the messages of ch
 * do not fit in runs.budget.stored_bytes (nothing is committed then). */
static int transition(struct agent *a, enum runstate from, enum runstate to,
		      const struct run_change *ch)
{
	size_t bytes = 0;
	if (ch && (ch->msg || json_array_size(ch->msgs))) {
		bytes = store_message_bytes(ch->msg);
		for (size_t i = 0; i < json_array_size(ch->msgs); i++)
			bytes += store_message_bytes(json_array_get(ch->msgs, i));
		if (!budget_check_stored(&a->budget, bytes))
			return STEP_BUDGET;
	}
	char *err = NULL;
	int rc;
	for (unsigned attempt = 0;; attempt++) {
		rc = store_run_transition(a->env->store, a->run_id, from, to, ch, &err);
		if (!retry_commit(a, rc, &err, attempt))
			break;
	}
	if (rc == -EBUSY) {
		free(err);
		return STEP_GONE;
	}
	if (rc < 0)
		return commit_failed(a, rc, err);
	budget_count_stored(&a->budget, bytes);
	progress(a);
	return STEP_OK;
}

/* Moves the run from running to `to` with ch, as transition does. */
static int move(struct agent *a, enum runstate to, const struct run_change *ch)
{
	return transition(a, RUNSTATE_RUNNING, to, ch);
}

static int commit(struct agent *a, const struct run_change *ch)
{
	return move(a, RUNSTATE_RUNNING, ch);
}

/* The first commit of a run: queued -> running (or running -> running
 * when it resumes) with the start's changes, in one transaction. */
static int start(struct agent *a, struct run_change *ch)
{
	if (a->from == RUNSTATE_QUEUED) {
		ch->mode = a->env->start_mode;
		ch->model = a->env->start_model;
	}
	int rc = transition(a, a->from, RUNSTATE_RUNNING, ch);
	if (rc == STEP_OK)
		a->from = RUNSTATE_RUNNING;
	return rc;
}


/* Commits msg (stolen) to the chat, with extra changes to the run (may be
 * NULL), and keeps the in-memory copy in step. */
static int chat_append(struct chat *c, json_t *msg, const struct run_change *extra)
{
	if (!msg)
		return oom(c->a);
	struct run_change ch = extra ? *extra : (struct run_change){0};
	ch.msg_chat = c->id;
	ch.msg = msg;
	int rc = commit(c->a, &ch);
	if (rc == STEP_OK && json_array_append(c->msgs, msg) < 0)
		rc = oom(c->a);
	json_decref(msg);
	return rc;
}

static int append_text(struct chat *c, const char *role, const char *text)
{
	return chat_append(c, json_pack("{s:s, s:s}", "role", role,
					"content", text ? text : ""), NULL);
}

static void chat_free(struct chat *c)
{
	strlist_free(&c->tools);
	json_decref(c->schemas);
	json_decref(c->msgs);
	free(c->final);
	free(c->error);
	json_decref(c->final_msg);
	json_decref(c->final_usage);
	free(c->schemas_text);
	c->schemas = c->msgs = c->final_msg = c->final_usage = NULL;
	c->final = c->error = c->schemas_text = NULL;
}

/* Offers the tools of c (c->tools must be set): NULL when there are none. */
static int chat_set_schemas(struct chat *c)
{
	if (c->tools.n == 0)
		return STEP_OK;
	const struct tool_schemas *ts = c->a->env->tool_schemas;
	if (ts ? tool_schemas_pick(ts, &c->tools, &c->schemas, &c->schemas_text) < 0
	       : !(c->schemas = tools_schemas(&c->tools)))
		return oom(c->a);
	if (json_array_size(c->schemas) == 0) {
		json_decref(c->schemas);
		free(c->schemas_text);
		c->schemas = NULL;
		c->schemas_text = NULL;
	}
	return STEP_OK;
}

static int chat_load(struct chat *c)
{
	char *err = NULL;
	int rc = store_messages(c->a->env->store, c->a->run_id, c->id, &c->msgs, &err);
	if (rc < 0)
		return fail_err(c->a, rc, err);
	return STEP_OK;
}

/* ---- skills -------------------------------------------------------------- */

/* The sub-skill name of the skill whose entry is pe, or NULL: a directory
 * sub-skill (which has no catalogue entry: *scratch is made its entry, with
 * the parent's source and trust) or one its sub-skills: list names. */
static const struct catalog_entry *sub_skill(const struct agent *a,
					     const struct catalog_entry *pe,
					     const char *name,
					     struct catalog_entry *scratch)
{
	const struct catalog *cat = a->env->catalog;
	for (size_t i = 0; pe && pe->skill && i < pe->skill->nsubs; i++) {
		struct skill *sub = pe->skill->subs[i];
		if (sub && str_eq(sub->name, name)) {
			*scratch = (struct catalog_entry){
				.skill = sub, .source = pe->source, .trust = pe->trust,
				.disabled = config_skill_disabled(a->env->config, name) };
			return scratch;
		}
	}
	for (size_t i = 0; pe && i < pe->nref_subs; i++)
		if (pe->ref_subs[i] < cat->n && cat->entries[pe->ref_subs[i]].skill &&
		    str_eq(cat->entries[pe->ref_subs[i]].skill->name, name))
			return &cat->entries[pe->ref_subs[i]];
	return NULL;
}

/* The skill name as chat c may run it (run_skill, /skill:run:), or NULL
 * with *why set to a malloc'd reason (NULL on ENOMEM). It may run a skill
 * effective in the run's resolution (its configuration's attachments and
 * forced skills, R1) that is no skill's sub-skill, and, inside the
 * sub-agent of a skill, that skill's own sub-skills. Whatever else the
 * name is (unknown, not attached, attached disabled, below the trust
 * floor, invalid, another skill's sub-skill) gets the answer an unknown
 * name gets, so the model learns nothing of skills it may not see. A
 * directory sub-skill's entry is *scratch (see sub_skill). */
static const struct catalog_entry *reachable_skill(const struct chat *c,
						   const char *name,
						   struct catalog_entry *scratch,
						   char **why)
{
	const struct agent *a = c->a;
	const struct catalog *cat = a->env->catalog;
	const struct effective *eff = &a->env->res->eff;
	const struct catalog_entry *e = c->is_main ? NULL
				       : sub_skill(a, c->entry, name, scratch);
	for (size_t i = 0; !e && i < eff->neff; i++) {
		const struct catalog_entry *x = eff->eff[i] < cat->n ? &cat->entries[eff->eff[i]]
								    : NULL;
		if (x && x->skill && str_eq(x->skill->name, name) && !x->is_referenced_sub)
			e = x;
	}
	/* The catalogue's own rules again (R1), should the lists disagree. */
	if (e && e->skill && e->skill->valid && !e->disabled &&
	    e->trust >= a->env->config->min_trust) {
		*why = NULL;
		return e;
	}
	*why = model_strdupf("no skill named '%s'", name);
	return NULL;
}

/* The body of skill s, read from its file (skill_read_text), into *body.
 * Returns 0, -ENOMEM, or another negative errno with *why saying what
 * happened (malloc'd; NULL on ENOMEM): the run keeps the catalogue it
 * started with, so a SKILL.md changed since reads as stale (-ESTALE). */
static int skill_body(const struct skill *s, char **body, char **why)
{
	*why = NULL;
	int rc = skill_read_text(s, SKILL_TEXT_BODY, body, NULL);
	if (rc == -ESTALE)
		*why = model_strdupf("skill '%s' was changed on disk after this run loaded "
				     "it: its text is no longer the one the run resolved (a "
				     "new run uses the new version)", s->name);
	else if (rc < 0 && rc != -ENOMEM)
		*why = model_strdupf("the text of skill '%s' cannot be read: %s", s->name,
				     strerror(-rc));
	return rc;
}

/* The system prompt of a sub-agent (R12): the skill body (with $ARGUMENTS
 * replaced by the task) and the bodies of its sub-skills, each once.
 * Returns 0, -1 on ENOMEM, or -2 with *why set (skill_body) when a body
 * cannot be read. */
static int subagent_system(const struct agent *a, const struct catalog_entry *e,
			   const char *task, struct buf *out, char **why)
{
	const struct skill *s = e->skill;
	struct strlist seen = {0};
	char *body = NULL;
	*why = NULL;
	int rc = buf_printf(out,
		"You are a sub-agent running the skill '%s' on the task in the "
		"user's message. Your final reply is returned to the agent that "
		"called you.\n\n", s->name);
	if (rc == 0)
		rc = put_base_dir(a, s, "skill", out);
	if (rc == 0 && skill_body(s, &body, why) < 0)
		rc = *why ? -2 : -1;
	if (rc == 0)
		rc = expand_arguments(out, body, task, false);
	free(body);
	body = NULL;
	if (rc == 0)
		rc = strlist_add(&seen, s->name);
	size_t nsubs = s->nsubs + e->nref_subs;
	for (size_t i = 0; rc == 0 && i < nsubs; i++) {
		const struct skill *sub;
		if (i < s->nsubs)
			sub = s->subs[i];
		else if (e->ref_subs[i - s->nsubs] < a->env->catalog->n)
			sub = a->env->catalog->entries[e->ref_subs[i - s->nsubs]].skill;
		else
			continue;
		if (!sub || !sub->valid || strlist_has(&seen, sub->name))
			continue;
		rc = strlist_add(&seen, sub->name);
		if (rc == 0)
			rc = buf_printf(out, "\n\n## Sub-skill: %s\n\n", sub->name);
		if (rc == 0)
			rc = put_base_dir(a, sub, "sub-skill", out);
		if (rc == 0 && skill_body(sub, &body, why) < 0)
			rc = *why ? -2 : -1;
		if (rc == 0)
			rc = buf_puts(out, body);
		free(body);
		body = NULL;
	}
	strlist_free(&seen);
	return rc < 0 ? rc == -2 ? -2 : -1 : 0;
}

/* Sub-agent announcements (events "subagent_started"), one JSON object per
 * element: {chat_id, skill, parent_chat, parent_seq, call_id?}; and the
 * model calls asked again (events "model_call_repeated": {chat_id,
 * after_messages}), for the transcript. */
static int subagent_events(struct store *st, const char *run_id, json_t **out,
			   char **err)
{
	struct buf text = {0};
	int rc = store_events_text(st, run_id, &text, err);
	*out = json_array();
	if (!*out)
		rc = rc < 0 ? rc : -ENOMEM;
	for (char *p = text.data; rc == 0 && p && *p;) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		json_t *ev = json_loadb(p, len, 0, NULL);
		const char *type = ev ? json_string_value(json_object_get(ev, "type")) : NULL;
		if ((str_eq(type, "subagent_started") || str_eq(type, "model_call_repeated")) &&
		    json_string_value(json_object_get(ev, "chat_id")) &&
		    json_array_append(*out, ev) < 0)
			rc = -ENOMEM;
		json_decref(ev);
		p = nl ? nl + 1 : p + len;
	}
	buf_free(&text);
	if (rc < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* Whether event ev announces the sub-agent of (parent, seq, call_id). */
static bool subagent_matches(const json_t *ev, const char *parent,
			     json_int_t seq, const char *call_id)
{
	const char *cid = json_string_value(json_object_get(ev, "call_id"));
	return str_eq(json_string_value(json_object_get(ev, "type")), "subagent_started") &&
	       str_eq(json_string_value(json_object_get(ev, "parent_chat")), parent) &&
	       json_integer_value(json_object_get(ev, "parent_seq")) == seq &&
	       (call_id ? str_eq(cid, call_id) : cid == NULL);
}

static int chat_loop(struct chat *c);

/* Runs skill e as a sub-agent of chat pc for the call call_id of its
 * message parent_seq (0 and NULL: a /skill:run: prompt), or resumes the
 * one already started for it. On STEP_OK *result is the answer (or why it
 * failed, *failed set). A new one must fit in runs.budget.subagents and
 * depth; a budget reached inside it ends its chat failed. */
static int run_subagent(struct agent *a, const struct chat *pc, json_int_t parent_seq,
			const char *call_id, const struct catalog_entry *e,
			const char *task, char **result, bool *failed)
{
	struct store *st = a->env->store;
	const char *name = e->skill->name, *parent = pc->id;
	char *err = NULL, *chat_id = NULL;
	json_t *evs = NULL;
	struct chat_row *rows = NULL;
	size_t nrows = 0;
	int rc = subagent_events(st, a->run_id, &evs, &err);
	if (rc < 0)
		return fail_err(a, rc, err);
	size_t i;
	json_t *ev;
	json_array_foreach(evs, i, ev) {
		if (subagent_matches(ev, parent, parent_seq, call_id)) {
			chat_id = strdup(json_string_value(json_object_get(ev, "chat_id")));
			if (!chat_id)
				goto nomem;
			break;
		}
	}
	rc = store_chats(st, a->run_id, &rows, &nrows, &err);
	if (rc < 0) {
		rc = fail_err(a, rc, err);
		goto out;
	}
	if (!chat_id && !budget_check_subagent(&a->budget, pc->depth + 1)) {
		rc = STEP_BUDGET;
		goto out;
	}
	if (!chat_id) {
		/* A new sub-agent: announce it first, so a crash before its
		 * chat exists still finds it (R12, R16). */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		for (bool taken = true; taken; ns++) {
			free(chat_id);
			chat_id = model_strdupf("skill-%s-%lld", name, ns);
			if (!chat_id)
				goto nomem;
			taken = false;
			for (size_t k = 0; k < nrows; k++)
				taken = taken || str_eq(rows[k].chat_id, chat_id);
		}
		rc = log_event(a, "subagent_started",
			       json_pack("{s:s, s:s, s:s, s:I, s:s*}", "chat_id", chat_id,
					 "skill", name, "parent_chat", parent,
					 "parent_seq", parent_seq, "call_id", call_id));
		if (rc == STEP_OK) {
			char *note = model_strdupf("Running skill '%s' in sub-agent...", name);
			rc = note ? log_event(a, "note", json_pack("{s:s, s:s}", "text", note,
								    "chat_id", chat_id))
				  : oom(a);
			free(note);
		}
		if (rc != STEP_OK)
			goto out;
	}
	const struct chat_row *row = NULL;
	for (size_t k = 0; k < nrows; k++)
		if (str_eq(rows[k].chat_id, chat_id))
			row = &rows[k];
	if (row && runstate_is_terminal(row->state)) {
		/* Finished before a crash kept its result from the caller. */
		*failed = row->state != RUNSTATE_COMPLETED;
		*result = *failed ? model_strdupf("error: skill '%s' failed in its "
						  "sub-agent: %s", name,
						  row->result ? row->result : "(no reason kept)")
				  : strdup(row->result ? row->result : "");
		rc = *result ? STEP_OK : oom(a);
		goto out;
	}
	struct chat sc = {.a = a, .id = chat_id, .depth = pc->depth + 1, .skill = name,
			  .entry = e};
	rc = mode_subagent_tools(e->skill, &a->env->config->registered_tools,
				 a->env->have_python, a->env->allow, &sc.tools) < 0
		     ? oom(a) : STEP_OK;
	if (rc == STEP_OK && !row) {
		json_t *tools = strlist_to_json(&sc.tools);
		rc = -ENOMEM;
		for (unsigned attempt = 0; tools; attempt++) {
			rc = store_chat_create(st, a->run_id, chat_id, parent, name, tools, &err);
			if (!retry_commit(a, rc, &err, attempt))
				break;
		}
		json_decref(tools);
		if (rc < 0 && rc != -EEXIST) {
			rc = commit_failed(a, rc, err);
			chat_free(&sc);
			goto out;
		}
		if (rc == 0)
			budget_count_subagent(&a->budget);
		free(err);
		err = NULL;
		rc = STEP_OK;
		progress_files(a, true); /* subagents/<chat> */
	}
	if (rc == STEP_OK)
		rc = chat_set_schemas(&sc);
	if (rc == STEP_OK)
		rc = chat_load(&sc);
	if (rc == STEP_OK && json_array_size(sc.msgs) == 0) {
		struct buf sys = {0};
		/* A body that cannot be read fails the sub-agent (its caller
		 * gets the error as the result), as a failure of its own. */
		int src = subagent_system(a, e, task, &sys, &sc.error);
		rc = src == -2 ? STEP_FAIL : src < 0 ? oom(a) : STEP_OK;
		if (rc == STEP_OK)
			rc = append_text(&sc, "system", sys.data);
		buf_free(&sys);
	}
	if (rc == STEP_OK && json_array_size(sc.msgs) == 1)
		rc = append_text(&sc, "user", task && *task ? task : "Run the skill.");
	if (rc == STEP_OK)
		rc = chat_loop(&sc);

	enum runstate end = RUNSTATE_RUNNING;
	const char *end_text = NULL;
	if (rc == STEP_DONE) {
		end = RUNSTATE_COMPLETED;
		end_text = sc.final;
		*failed = false;
		*result = strdup(sc.final);
	} else if (rc == STEP_FAIL) {
		end = RUNSTATE_FAILED;
		end_text = sc.error;
		*failed = true;
		*result = model_strdupf("error: skill '%s' failed in its sub-agent: %s",
					name, sc.error);
	} else if (rc == STEP_CANCEL) {
		end = RUNSTATE_CANCELLED;
	} else if (rc == STEP_BUDGET) {
		end = RUNSTATE_FAILED; /* and so does the run */
		end_text = budget_exceeded(&a->budget);
	} else if (rc == STEP_GONE) {
		/* The run ended under us (cancelled, failed): so does the chat. */
		enum runstate rs;
		if (store_run_state(st, a->run_id, &rs, &err) == 0 &&
		    runstate_is_terminal(rs))
			end = rs == RUNSTATE_CANCELLED ? RUNSTATE_CANCELLED
						       : RUNSTATE_FAILED;
		free(err);
		err = NULL;
	}
	if (end != RUNSTATE_RUNNING) {
		int src;
		for (unsigned attempt = 0;; attempt++) {
			src = store_chat_transition(st, a->run_id, chat_id, end, end_text, &err);
			if (!retry_commit(a, src, &err, attempt))
				break;
		}
		if (src < 0) {
			rc = commit_failed(a, src, err);
		} else {
			progress_files(a, true); /* subagents/<chat>/result */
			int erc = log_event(a, "subagent_finished",
					    json_pack("{s:s, s:s, s:s}", "chat_id", chat_id,
						      "skill", name, "state", runstate_name(end)));
			if (erc != STEP_OK)
				rc = erc;
			else if (rc == STEP_DONE || rc == STEP_FAIL)
				rc = *result ? STEP_OK : oom(a);
		}
	}
	chat_free(&sc);
out:
	json_decref(evs);
	chat_rows_free(rows, nrows);
	free(chat_id);
	return rc;
nomem:
	rc = oom(a);
	goto out;
}

/* ---- tool calls ---------------------------------------------------------- */

/* The result of one call, as it will be committed. */
struct call_result {
	struct buf text;
	bool is_error;
	bool done;     /* set by result_set: the call has its result */
	bool consumed; /* the person's input was used: clear pending and input */
};

static int result_set(struct agent *a, struct call_result *r, bool is_error,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int result_set(struct agent *a, struct call_result *r, bool is_error,
		      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	buf_free(&r->text);
	int rc = buf_vprintf(&r->text, fmt, ap);
	va_end(ap);
	r->is_error = is_error;
	r->done = true;
	return rc < 0 ? oom(a) : STEP_OK;
}

/* The strings of a JSON array as a NULL-terminated array (borrowed from
 * it); when an item is not a string the array is empty, which a tool
 * restricted to patterns refuses. NULL on ENOMEM. */
static const char **json_words(json_t *arr)
{
	size_t n = json_array_size(arr);
	const char **w = calloc(n + 1, sizeof *w);
	if (!w)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		w[i] = json_string_value(json_array_get(arr, i));
		if (!w[i]) {
			w[0] = NULL;
			break;
		}
	}
	return w;
}

/* R5, second enforcement: the tool is one of the chat's tools and the
 * run's allow-list permits this very call (D3 patterns): its command, or
 * its words when given as an array (argv, the terminal tool). */
static bool chat_permits(const struct chat *c, const char *tool, const char *command,
			 const char *const *argv, const char **reason)
{
	const struct grants *g = c->a->env->allow;
	if (!strlist_has(&c->tools, tool) || !grants_has(g, tool)) {
		*reason = c->is_main || !grants_has(g, tool)
				  ? "it is not on this run's allow-list"
				  : "it is not one of this sub-agent's tools";
		return false;
	}
	if (argv ? !grants_permits_argv(g, tool, argv) : !grants_permits(g, tool, command)) {
		*reason = "the command is not admitted by the patterns this run "
			  "grants for it";
		return false;
	}
	return true;
}

/* Whether pending describes the call call_id of chat chat_id, of kind
 * (NULL: any kind). */
static bool pending_is(const json_t *pending, const char *kind,
		       const char *chat_id, const char *call_id)
{
	return json_is_object(pending) &&
	       (!kind || str_eq(json_string_value(json_object_get(pending, "kind")), kind)) &&
	       str_eq(json_string_value(json_object_get(pending, "chat_id")), chat_id) &&
	       str_eq(json_string_value(json_object_get(pending, "call_id")), call_id);
}

/* The person's input for the call, when the run row holds one for it:
 * *input malloc'd, or NULL when the run must wait. With kind NULL, *input
 * is "" (not NULL) when pending names the call at all. */
static int input_for(struct chat *c, const char *kind, const char *call_id,
		     char **input)
{
	struct run_row row;
	char *err = NULL;
	*input = NULL;
	int rc = store_run_get(c->a->env->store, c->a->run_id, &row, &err);
	if (rc < 0)
		return fail_err(c->a, rc, err);
	if (!kind && pending_is(row.pending, NULL, c->id, call_id)) {
		*input = strdup("");
		if (!*input)
			rc = -ENOMEM;
	} else if (kind && pending_is(row.pending, kind, c->id, call_id) &&
		   row.input && *row.input) {
		*input = strdup(row.input);
		if (!*input)
			rc = -ENOMEM;
	}
	run_row_free(&row);
	return rc < 0 ? oom(c->a) : STEP_OK;
}

/* Pauses the run for a person: pending (stolen) describes why. */
static int wait_for(struct chat *c, enum runstate to, json_t *pending)
{
	if (!pending)
		return oom(c->a);
	struct run_change ch = {.pending = pending, .input = ""};
	int rc = move(c->a, to, &ch);
	json_decref(pending);
	if (rc != STEP_OK)
		return rc;
	return to == RUNSTATE_WAITING_FOR_APPROVAL ? STEP_WAIT_APPROVAL : STEP_WAIT_INPUT;
}

/* Whether the run's log holds an event of type for the call call_id of
 * chat chat_id (*found). */
static int call_event_logged(struct agent *a, const char *type, const char *chat_id,
			     const char *call_id, bool *found)
{
	struct buf text = {0};
	char *err = NULL;
	*found = false;
	int rc = store_events_text(a->env->store, a->run_id, &text, &err);
	if (rc < 0) {
		buf_free(&text);
		return fail_err(a, rc, err);
	}
	for (char *p = text.data; p && *p && !*found;) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		/* Cheap test first: most events are of other types. */
		if (memmem(p, len, type, strlen(type))) {
			json_t *ev = json_loadb(p, len, 0, NULL); /* data merged in */
			*found = str_eq(json_string_value(json_object_get(ev, "type")), type) &&
				 str_eq(json_string_value(json_object_get(ev, "chat_id")), chat_id) &&
				 str_eq(json_string_value(json_object_get(ev, "call_id")), call_id);
			json_decref(ev);
		}
		p = nl ? nl + 1 : p + len;
	}
	buf_free(&text);
	return STEP_OK;
}

/* ask_user, in the main chat or a sub-agent's: the run waits for input
 * with pending naming the asking chat. */
static int call_ask_user(struct chat *c, const char *call_id, json_t *args,
			 struct call_result *r)
{
	const char *q = json_string_value(json_object_get(args, "question"));
	if (!q || !*q)
		return result_set(c->a, r, true,
				  "ask_user: missing required argument 'question'");
	char *answer;
	int rc = input_for(c, "question", call_id, &answer);
	if (rc != STEP_OK)
		return rc;
	if (!answer)
		return wait_for(c, RUNSTATE_WAITING_FOR_INPUT,
				json_pack("{s:s, s:s, s:s, s:s}", "kind", "question",
					  "chat_id", c->id, "call_id", call_id,
					  "question", q));
	size_t n = strlen(answer);
	if (n && answer[n - 1] == '\n')
		answer[--n] = '\0';
	r->consumed = true;
	rc = result_set(c->a, r, false, "%s", answer);
	free(answer);
	return rc;
}

/* Approval of a call of a tool in tools.approval (section 6), in the main
 * chat or a sub-agent's (pending names the chat): *approved on STEP_OK,
 * else the run waits. A call approved before (its approval_granted event
 * is logged) is not asked about again: a run_skill call needing approval
 * runs its sub-agent, whose own approval replaces pending, and the
 * sub-agent is reached again through that call when the run resumes. */
static int call_approval(struct chat *c, const char *call_id, const char *tool,
			 json_t *args, struct call_result *r, bool *approved)
{
	*approved = false;
	char *input;
	int rc = input_for(c, "approval", call_id, &input);
	if (rc != STEP_OK)
		return rc;
	if (!input) {
		bool granted;
		rc = call_event_logged(c->a, "approval_granted", c->id, call_id, &granted);
		if (rc != STEP_OK)
			return rc;
		if (granted) {
			*approved = true;
			return STEP_OK;
		}
	}
	if (!input)
		return wait_for(c, RUNSTATE_WAITING_FOR_APPROVAL,
				json_pack("{s:s, s:s, s:s, s:s, s:O}", "kind", "approval",
					  "chat_id", c->id, "call_id", call_id,
					  "tool", tool, "arguments", args));
	char *s = input, *e = input + strlen(input);
	while (isspace((unsigned char)*s))
		s++;
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	*approved = strcasecmp(s, "approve") == 0;
	free(input);
	r->consumed = true;
	rc = log_event(c->a, *approved ? "approval_granted" : "approval_denied",
		       json_pack("{s:s, s:s, s:s}", "chat_id", c->id,
				 "call_id", call_id, "tool", tool));
	if (rc == STEP_OK && !*approved)
		rc = result_set(c->a, r, true, "error: the call of tool '%s' was "
				"denied by the user", tool);
	return rc;
}

static int call_run_skill(struct chat *c, json_int_t msg_seq, const char *call_id,
			  json_t *args, struct call_result *r)
{
	struct agent *a = c->a;
	const char *name = json_string_value(json_object_get(args, "name"));
	if (!name || !*name)
		return result_set(a, r, true, "run_skill: missing required argument 'name'");
	bool ok;
	char *task = arguments_text(json_object_get(args, "arguments"), &ok);
	if (!ok)
		return oom(a);
	char *why;
	struct catalog_entry scratch;
	const struct catalog_entry *e = reachable_skill(c, name, &scratch, &why);
	int rc;
	if (!e) {
		rc = why ? result_set(a, r, true, "run_skill: %s", why) : oom(a);
	} else if (e->skill->disable_model_invocation) {
		rc = result_set(a, r, true, "run_skill: skill '%s' cannot be invoked "
				"by the model (disable-model-invocation: true)", name);
	} else if (mode_decide(e->skill, a->env->config->execution_mode).mode ==
		   EXEC_INLINE) {
		/* R11: the body is the result; the caller carries on. */
		char *body = NULL, *err = NULL;
		if (skill_body(e->skill, &body, &err) < 0) {
			rc = err ? result_set(a, r, true, "run_skill: %s", err) : oom(a);
		} else {
			buf_free(&r->text);
			r->is_error = false;
			rc = put_base_dir(a, e->skill, "skill", &r->text) < 0 ||
			     expand_arguments(&r->text, body, task, true) < 0
				     ? oom(a) : STEP_OK;
		}
		free(body);
		free(err);
	} else {
		char *result = NULL;
		bool failed = false;
		rc = run_subagent(a, c, msg_seq, call_id, e, task, &result, &failed);
		if (rc == STEP_OK)
			rc = result_set(a, r, failed, "%s", result);
		free(result);
	}
	free(why);
	free(task);
	return rc;
}

/* Whether step (msg_seq, call) of chat c was started before
 * (store_step_started), with the retries of a commit. */
static int step_was_started(struct chat *c, json_int_t msg_seq, int call, bool *started)
{
	struct agent *a = c->a;
	char *err = NULL;
	int rc;
	for (unsigned attempt = 0;; attempt++) {
		rc = store_step_started(a->env->store, a->run_id, c->id, msg_seq, call, started,
					&err);
		if (!retry_commit(a, rc, &err, attempt))
			break;
	}
	return rc < 0 ? commit_failed(a, rc, err) : STEP_OK;
}

/* Commits the start of step (msg_seq, call) of chat c (store_step_start),
 * with the retries of a commit. */
static int step_start(struct chat *c, json_int_t msg_seq, int call, const char *what)
{
	struct agent *a = c->a;
	char *err = NULL;
	int rc;
	for (unsigned attempt = 0;; attempt++) {
		rc = store_step_start(a->env->store, a->run_id, c->id, msg_seq, call, what, &err);
		if (!retry_commit(a, rc, &err, attempt))
			break;
	}
	return rc < 0 ? commit_failed(a, rc, err) : STEP_OK;
}

/* At most once (R7) for a call of a tool with side effects, the call
 * number call of chat c's message msg_seq: when a start of it was
 * recorded before (the daemon died or stopped while it ran, and its result
 * was never committed), r gets a result saying so and it is not run
 * again; else its start is committed now, before it runs. */
static int start_once(struct chat *c, json_int_t msg_seq, int call, const char *call_id,
		      const char *tool, struct call_result *r)
{
	struct agent *a = c->a;
	bool started = false;
	int rc = step_was_started(c, msg_seq, call, &started);
	if (rc != STEP_OK)
		return rc;
	if (started) {
		rc = log_event(a, "tool_interrupted",
			       json_pack("{s:s, s:s, s:s}", "chat_id", c->id, "call_id", call_id,
					 "tool", tool));
		if (rc == STEP_OK)
			rc = result_set(a, r, true, TOOL_INTERRUPTED_TEXT, tool);
		return rc;
	}
	return step_start(c, msg_seq, call, tool);
}

/* Answers call k of the assistant message at index ai of the chat: R5,
 * approval, then the tool; commits the result. */
static int handle_call(struct chat *c, size_t ai, size_t k)
{
	struct agent *a = c->a;
	json_t *call = json_array_get(json_object_get(json_array_get(c->msgs, ai),
						      "tool_calls"), k);
	const char *call_id = json_string_value(json_object_get(call, "id"));
	json_t *fn = json_object_get(call, "function");
	const char *argtext = json_string_value(json_object_get(fn, "arguments"));
	char *tool = lower_dup(json_string_value(json_object_get(fn, "name")));
	struct call_result r = {0};
	struct buf excerpt = {0};
	json_t *args = NULL;
	json_error_t jerr;
	int rc = STEP_OK;
	memset(&jerr, 0, sizeof jerr);
	if (!call_id)
		call_id = "";
	if (!tool || model_append_excerpt(&excerpt, argtext ? argtext : "",
					  argtext ? strlen(argtext) : 0,
					  ARGS_EXCERPT_MAX, false) < 0 ||
	    buf_puts(&excerpt, "") < 0) {
		rc = oom(a);
		goto out;
	}
	if (!argtext || !*argtext)
		args = json_object();
	else
		args = json_loads(argtext, JSON_DECODE_ANY, &jerr);
	if (!args && (!argtext || !*argtext)) {
		rc = oom(a);
		goto out;
	}
	/* What the tool's patterns check: bash's command, webfetch's url. */
	const char *command = NULL;
	const char **argv = NULL; /* the command given as words (borrowed) */
	if (json_is_object(args) && grants_tool_has_patterns(tool)) {
		json_t *cmd = json_object_get(args, grants_pattern_argument(tool));
		command = json_string_value(cmd);
		if (json_is_array(cmd) && !(argv = json_words(cmd))) {
			rc = oom(a);
			goto out;
		}
	}

	const char *reason;
	bool permitted = chat_permits(c, tool, command, argv, &reason);
	free(argv);
	argv = NULL;
	bool approved = true;
	/* The steps that may pause the run come before anything is logged, so
	 * a call that waits is logged once, when it is answered. */
	if (permitted && json_is_object(args) && strcmp(tool, "ask_user") == 0) {
		rc = call_ask_user(c, call_id, args, &r);
		if (rc != STEP_OK)
			goto out;
	} else if (permitted && json_is_object(args) &&
		   strlist_has(&a->env->config->approval_tools, tool)) {
		rc = call_approval(c, call_id, tool, args, &r, &approved);
		if (rc != STEP_OK)
			goto out;
	}
	rc = log_event(a, "tool_call", json_pack("{s:s, s:s, s:s, s:s}", "chat_id", c->id,
						 "call_id", call_id, "tool", tool,
						 "arguments", excerpt.data));
	if (rc != STEP_OK)
		goto out;
	if (!approved || r.done) {
		/* answered above (ask_user) or refused by the approval step */
	} else if (!permitted) {
		rc = log_event(a, "tool_denied",
			       json_pack("{s:s, s:s, s:s, s:s, s:s}", "chat_id", c->id,
					 "call_id", call_id, "tool", tool,
					 "arguments", excerpt.data, "reason", reason));
		if (rc == STEP_OK)
			rc = result_set(a, &r, true, "error: tool '%s' is not allowed: "
					"%s. Do not call it again; use the tools you "
					"were offered.", tool, reason);
	} else if (!json_is_object(args)) {
		rc = result_set(a, &r, true, "error: the arguments of %s are not a "
				"JSON object%s%s", tool, args ? "" : ": ",
				args ? "" : jerr.text);
	} else if (strcmp(tool, "run_skill") == 0) {
		rc = call_run_skill(c, (json_int_t)ai + 1, call_id, args, &r);
	} else if (tools_has_side_effects(tool) &&
		   (rc = start_once(c, (json_int_t)ai + 1, (int)k, call_id, tool, &r)) != STEP_OK) {
		/* the store failed */
	} else if (r.done) {
		/* interrupted by a crash or a stop before: not run again */
	} else {
		const struct grant_tool *gt = grants_find(a->env->allow, tool);
		struct tool_ctx tc = {
			.workspace = a->env->workspace,
			.workdir = a->env->workdir,
			.skills = a->skills.items,
			.nskills = a->skills.n,
			.sandbox = a->env->sandbox,
			.argv_only = gt && !gt->unrestricted,
			.timeout_ms = config_tool_timeout_ms(a->env->config, tool),
			.output_max = config_tool_output_max(a->env->config, tool),
			.webfetch = a->env->config ? &a->env->config->tools.webfetch : NULL,
			/* every redirect of webfetch is held to the grant too */
			.domains = gt && !gt->unrestricted && strcmp(tool, "webfetch") == 0
					   ? &gt->patterns : NULL,
			.cancel = interrupted,
			.cancel_arg = a,
			.allow = a->env->allow,
			.learn_dir = config_learn_dir(a->env->config),
			.catalog = a->env->catalog,
		};
		struct tool_result tr;
		if (tools_exec(&tc, tool, args, &tr) < 0) {
			rc = oom(a);
		} else {
			rc = result_set(a, &r, tr.is_error, "%s", tr.text);
			tool_result_free(&tr);
		}
	}
	if (rc == STEP_OK)
		rc = interruption(a); /* a killed tool's result is not kept */
	if (rc != STEP_OK)
		goto out;
	if (!r.consumed) {
		/* A call the person was asked about but that ends otherwise
		 * (e.g. the tool was taken away meanwhile, R7): the question
		 * is over too. */
		char *named;
		rc = input_for(c, NULL, call_id, &named);
		if (rc != STEP_OK)
			goto out;
		r.consumed = named != NULL;
		free(named);
	}
	json_t *msg = json_pack("{s:s, s:s, s:s, s:s}", "role", "tool",
				"tool_call_id", call_id, "name", tool,
				"content", r.text.data ? r.text.data : "");
	struct run_change ch = {0};
	if (r.consumed) {
		ch.pending = json_null();
		ch.input = "";
	}
	rc = chat_append(c, msg, &ch);
	if (rc == STEP_OK)
		rc = log_event(a, "tool_result",
			       json_pack("{s:s, s:s, s:s, s:b, s:I}", "chat_id", c->id,
					 "call_id", call_id, "tool", tool,
					 "is_error", r.is_error,
					 "bytes", (json_int_t)r.text.len));
out:
	json_decref(args);
	buf_free(&excerpt);
	buf_free(&r.text);
	free(tool);
	return rc;
}

/* ---- the loop ------------------------------------------------------------ */

/* The first tool call still unanswered: the last assistant message (before
 * the tool messages that follow it) and a call of it with no tool message
 * for its id after it. */
static bool unanswered_call(json_t *msgs, size_t *ai, size_t *k)
{
	size_t n = json_array_size(msgs), i = n;
	while (i > 0 && strcmp(role_of(json_array_get(msgs, i - 1)), "tool") == 0)
		i--;
	if (i == 0 || strcmp(role_of(json_array_get(msgs, i - 1)), "assistant") != 0)
		return false;
	json_t *calls = json_object_get(json_array_get(msgs, i - 1), "tool_calls");
	for (size_t c = 0; c < json_array_size(calls); c++) {
		const char *id = json_string_value(json_object_get(json_array_get(calls, c), "id"));
		bool answered = false;
		for (size_t j = i; j < n && !answered; j++)
			answered = str_eq(json_string_value(json_object_get(
						  json_array_get(msgs, j), "tool_call_id")),
					  id ? id : "");
		if (!answered) {
			*ai = i - 1;
			*k = c;
			return true;
		}
	}
	return false;
}

static int set_final(struct chat *c, json_t *msg)
{
	c->final = model_content_text(json_object_get(msg, "content"));
	if (!c->final)
		c->final = strdup("");
	return c->final ? STEP_DONE : oom(c->a);
}

/* Commits the start of the model call chat c makes now (after its
 * messages so far); one started before and never answered (a crash or a
 * stop interrupted it) is asked again, which has no side effect, and the
 * run's log says so (event "model_call_repeated", shown in the
 * transcript). */
static int model_call_start(struct chat *c)
{
	struct agent *a = c->a;
	json_int_t n = (json_int_t)json_array_size(c->msgs);
	bool started = false;
	int rc = step_was_started(c, n, STORE_STEP_MODEL, &started);
	if (rc != STEP_OK)
		return rc;
	if (started) {
		int lrc = log_event(a, "model_call_repeated",
				    json_pack("{s:s, s:I}", "chat_id", c->id, "after_messages", n));
		if (lrc != STEP_OK)
			return lrc;
	}
	return step_start(c, n, STORE_STEP_MODEL, "model");
}

/* model_request.partial: the reply of chat c streaming in, shown after
 * its messages so far (agent_env.partial). */
static void show_partial(void *arg, const char *text, size_t len)
{
	struct chat *c = arg;
	c->a->env->partial(c->a->env->partial_arg, c->a->run_id, c->id,
			   json_array_size(c->msgs), text, len);
}

static int call_model(struct chat *c)
{
	struct agent *a = c->a;
	int max = a->env->config->max_turns > 0 ? a->env->config->max_turns
						 : CONFIG_DEFAULT_MAX_TURNS;
	int turns = 0;
	size_t i;
	json_t *m;
	json_array_foreach(c->msgs, i, m)
		turns += strcmp(role_of(m), "assistant") == 0;
	if (turns >= max) {
		c->error = model_strdupf("turn limit (%d) reached", max);
		return c->error ? STEP_FAIL : oom(a);
	}
	if (!budget_check_model_call(&a->budget))
		return STEP_BUDGET;
	struct model_request req = {
		.messages = c->msgs,
		.tools = c->schemas,
		.tools_text = c->schemas_text,
		.run_id = a->run_id,
		.chat_id = c->id,
		.turn = turns + 1,
		.cancelled = interrupted,
		.cancel_arg = a,
	};
	if (a->env->partial) {
		req.partial = show_partial;
		req.partial_arg = c;
	}
	struct model_reply rep = {0};
	char *err = NULL;
	int src = model_call_start(c);
	if (src != STEP_OK)
		return src;
	int mrc = model_complete(a->env->model, &req, &rep, &err);
	budget_count_model_call(&a->budget);
	if (mrc < 0 && a->env->partial)
		a->env->partial(a->env->partial_arg, a->run_id, c->id, 0, NULL, 0);
	if (mrc < 0) {
		int irc = interruption(a);
		if (irc != STEP_OK) {
			free(err);
			return irc;
		}
		c->error = err ? err : strdup("model call failed: out of memory");
		return c->error ? STEP_FAIL : oom(a);
	}
	int irc = interruption(a);
	size_t ncalls = json_array_size(json_object_get(rep.message, "tool_calls"));
	if (irc == STEP_OK && !budget_check_tool_calls(&a->budget, ncalls))
		irc = STEP_BUDGET; /* none of its calls runs */
	if (irc != STEP_OK) {
		model_reply_free(&rep);
		return irc;
	}
	json_t *usage = NULL;
	int rc = STEP_OK;
	if (json_is_object(rep.usage) && !(usage = usage_add(a->usage, rep.usage)))
		rc = oom(a);
	bool final = ncalls == 0;
	/* The answers to these calls go back to the model, within the turn
	 * limit: its next start overlaps committing and running them. */
	if (!final && turns + 1 < max)
		model_prepare(a->env->model);
	if (rc == STEP_OK && final && c->is_main) {
		/* Committed by finish() together with the completion. */
		c->final_msg = json_incref(rep.message);
		c->final_usage = usage;
		rc = set_final(c, rep.message);
		model_reply_free(&rep);
		return rc;
	}
	if (rc == STEP_OK) {
		struct run_change ch = {.usage = usage};
		rc = chat_append(c, json_incref(rep.message), &ch);
	}
	if (rc == STEP_OK && usage) {
		json_decref(a->usage);
		a->usage = usage;
		usage = NULL;
	}
	json_decref(usage);
	if (rc == STEP_OK && json_array_size(json_object_get(rep.message, "tool_calls")) == 0)
		rc = set_final(c, rep.message);
	model_reply_free(&rep);
	return rc;
}

/* Drives chat c from its last committed message until it has a final
 * answer, fails, waits, is cancelled, or the store fails. */
static int chat_loop(struct chat *c)
{
	for (;;) {
		int irc = interruption(c->a);
		if (irc != STEP_OK)
			return irc;
		size_t ai, k, n = json_array_size(c->msgs);
		json_t *last = n ? json_array_get(c->msgs, n - 1) : NULL;
		int rc;
		if (unanswered_call(c->msgs, &ai, &k)) {
			/* tool_calls_per_turn again, for a reply committed
			 * under a larger budget: none of its calls runs */
			json_t *calls = json_object_get(json_array_get(c->msgs, ai), "tool_calls");
			rc = budget_check_tool_calls(&c->a->budget, json_array_size(calls))
				     ? handle_call(c, ai, k) : STEP_BUDGET;
		} else if (last && strcmp(role_of(last), "assistant") == 0 &&
			   json_array_size(json_object_get(last, "tool_calls")) == 0) {
			return set_final(c, last); /* committed before a crash */
		} else {
			rc = call_model(c);
		}
		if (rc != STEP_OK)
			return rc;
	}
}

/* ---- the main agent ------------------------------------------------------ */

/* Whether a prompt is a /skill:run:<name> directive (R15). */
static bool is_skill_run(const char *prompt)
{
	return strncmp(prompt, SKILL_RUN_PREFIX, strlen(SKILL_RUN_PREFIX)) == 0;
}

/* The first user message for the prompt (R15): the prompt itself, or for
 * /skill:run:<name> [args] the skill's body or its sub-agent's result. On
 * STEP_FAIL c->error says why the run cannot go on. */
static int first_user_message(struct chat *c, const char *prompt, char **user)
{
	struct agent *a = c->a;
	*user = NULL;
	if (!is_skill_run(prompt)) {
		*user = strdup(prompt);
		return *user ? STEP_OK : oom(a);
	}
	const char *p = prompt + strlen(SKILL_RUN_PREFIX), *q = p;
	while (*q && !isspace((unsigned char)*q))
		q++;
	char *name = strndup(p, (size_t)(q - p));
	while (isspace((unsigned char)*q))
		q++;
	size_t alen = strlen(q);
	while (alen && isspace((unsigned char)q[alen - 1]))
		alen--;
	char *args = strndup(q, alen);
	char *why = NULL, *result = NULL;
	struct buf b = {0};
	int rc = STEP_OK;
	if (!name || !args) {
		rc = oom(a);
		goto out;
	}
	const struct catalog_entry *e = NULL;
	struct catalog_entry scratch;
	if (!*name)
		c->error = strdup("/skill:run: names no skill");
	else if (!(e = reachable_skill(c, name, &scratch, &why)))
		c->error = why ? model_strdupf("/skill:run:%s: %s", name, why) : NULL;
	else if (!e->skill->user_invocable)
		c->error = model_strdupf("/skill:run:%s: skill '%s' cannot be run by "
					 "the user (user-invocable: false)", name, name);
	if (!e || !e->skill->user_invocable) {
		rc = c->error ? STEP_FAIL : oom(a);
		goto out;
	}
	if (mode_decide(e->skill, a->env->config->execution_mode).mode == EXEC_INLINE) {
		char *body = NULL, *err = NULL;
		if (skill_body(e->skill, &body, &err) < 0) {
			c->error = err ? model_strdupf("/skill:run:%s: %s", name, err) : NULL;
			rc = c->error ? STEP_FAIL : oom(a);
		} else {
			rc = put_base_dir(a, e->skill, "skill", &b) < 0 ||
			     expand_arguments(&b, body, args, true) < 0 ? oom(a) : STEP_OK;
		}
		free(body);
		free(err);
	} else {
		bool failed = false;
		rc = run_subagent(a, c, 0, NULL, e, args, &result, &failed);
		if (rc == STEP_OK && failed) {
			c->error = strdup(result);
			rc = c->error ? STEP_FAIL : oom(a);
		} else if (rc == STEP_OK &&
			   buf_printf(&b, "[Skill result: %s]\n\n%s", e->skill->name,
				      result) < 0) {
			rc = oom(a);
		}
	}
	if (rc == STEP_OK && !(*user = buf_steal(&b, NULL)))
		rc = oom(a);
out:
	buf_free(&b);
	free(result);
	free(why);
	free(args);
	free(name);
	return rc;
}

/* The outcome of the run's current state when someone else moved it. */
static int outcome_of(struct agent *a)
{
	enum runstate s;
	char *err = NULL;
	int rc = store_run_state(a->env->store, a->run_id, &s, &err);
	if (rc < 0) {
		fail_err(a, rc, err);
		return -1;
	}
	switch (s) {
	case RUNSTATE_COMPLETED: return AGENT_COMPLETED;
	case RUNSTATE_FAILED: return AGENT_FAILED;
	case RUNSTATE_CANCELLED: return AGENT_CANCELLED;
	case RUNSTATE_WAITING_FOR_APPROVAL: return AGENT_WAITING_APPROVAL;
	case RUNSTATE_WAITING_FOR_INPUT: return AGENT_WAITING_INPUT;
	default:
		free(a->err);
		a->err = model_strdupf("run '%s' is %s, not running", a->run_id,
				       runstate_name(s));
		return -1;
	}
}

/* Records how the main chat ended and returns the outcome. */
static int finish(struct agent *a, int step, struct chat *c)
{
	int rc = STEP_OK, out = -1;
	switch (step) {
	case STEP_DONE:
		rc = move(a, RUNSTATE_COMPLETED,
			  &(struct run_change){ .result = c->final,
						.msg_chat = c->final_msg ? c->id : NULL,
						.msg = c->final_msg,
						.usage = c->final_usage });
		out = AGENT_COMPLETED;
		break;
	case STEP_FAIL:
		rc = move(a, RUNSTATE_FAILED, &(struct run_change){.error = c->error});
		out = AGENT_FAILED;
		break;
	case STEP_BUDGET:
		rc = STEP_BUDGET;
		break;
	case STEP_WAIT_APPROVAL:
		return AGENT_WAITING_APPROVAL;
	case STEP_WAIT_INPUT:
		return AGENT_WAITING_INPUT;
	case STEP_CANCEL:
		rc = move(a, RUNSTATE_CANCELLED, NULL);
		out = AGENT_CANCELLED;
		break;
	case STEP_GONE:
		return outcome_of(a);
	case STEP_STOP:
		return AGENT_STOPPED;
	default:
		rc = STEP_ERR;
		break;
	}
	if (rc == STEP_BUDGET) {
		/* reached in the last step, or by the final answer itself */
		rc = move(a, RUNSTATE_FAILED,
			  &(struct run_change){.error = budget_exceeded(&a->budget)
							   ?: "budget exceeded"});
		out = AGENT_FAILED;
	}
	if (rc == STEP_GONE)
		return outcome_of(a);
	if (rc == STEP_OK)
		return out;
	if (rc == STEP_STOP)
		return AGENT_STOPPED; /* a commit waited for the store until shutdown */
	/* The store failed: try to say so in the run itself. */
	char *err = NULL;
	if (store_run_transition(a->env->store, a->run_id, RUNSTATE_RUNNING,
				 RUNSTATE_FAILED,
				 &(struct run_change){.error = a->err ? a->err
								      : "internal error"},
				 &err) == 0) {
		progress(a);
		return AGENT_FAILED;
	}
	free(err);
	return -1;
}

int agent_run(const struct agent_env *env, const char *run_id)
{
	if (!env || !env->store || !run_id)
		return -1;
	struct agent a = {.env = env, .run_id = run_id};
	struct chat mc = {.a = &a, .is_main = true};
	struct run_row own, row;
	char *err = NULL, *chat_id = NULL, *user = NULL;
	int rc = 0;
	if (env->row) {
		row = *env->row;
	} else if ((rc = store_run_get(env->store, run_id, &own, &err)) == 0) {
		row = own;
	} else {
		free(err);
		return -1;
	}
	if (row.state != RUNSTATE_RUNNING && row.state != RUNSTATE_QUEUED) {
		if (!env->row)
			run_row_free(&own);
		return outcome_of(&a);
	}
	a.from = row.state;
	if (!env->model || !env->config || !env->catalog || !env->res ||
	    !env->allow || !env->workspace) {
		mc.error = strdup("agent: the run's environment is incomplete");
		rc = mc.error ? STEP_FAIL : oom(&a);
		goto done;
	}
	if (json_is_object(row.usage) && !(a.usage = json_deep_copy(row.usage))) {
		rc = oom(&a);
		goto done;
	}
	chat_id = strdup(row.chat_id ? row.chat_id : AGENT_MAIN_CHAT);
	if (!chat_id) {
		rc = oom(&a);
		goto done;
	}
	if ((rc = budget_start(&a.budget, &env->config->budget, env->store, run_id,
			       row.started_at, &err)) < 0) {
		rc = fail_err(&a, rc, err);
		goto done;
	}
	if (skilldirs_build(env->catalog, &env->res->eff, env->config->min_trust,
			    &a.skills) < 0) {
		rc = oom(&a);
		goto done;
	}
	mc.id = chat_id;
	rc = STEP_OK;
	for (size_t i = 0; rc == STEP_OK && i < env->allow->n; i++)
		if (strlist_add(&mc.tools, env->allow->tools[i].name) < 0)
			rc = oom(&a);
	if (rc == STEP_OK)
		rc = chat_set_schemas(&mc);
	/* A run that never started has no messages yet. */
	if (rc == STEP_OK && row.state == RUNSTATE_QUEUED && row.started_at == 0)
		rc = (mc.msgs = json_array()) ? STEP_OK : oom(&a);
	else if (rc == STEP_OK)
		rc = chat_load(&mc);
	if (rc == STEP_OK) {
		/* The start, the chat id, the system message and a plain
		 * prompt are one step: one commit. */
		const char *prompt = row.prompt ? row.prompt : "";
		bool plain = !is_skill_run(prompt);
		json_t *first = json_array();
		size_t have = json_array_size(mc.msgs);
		bool ok = first != NULL;
		if (ok && have == 0)
			ok = json_array_append_new(
				     first, json_pack("{s:s, s:s}", "role", "system", "content",
						      env->res->text[RES_SYSTEM_PROMPT] ?: "")) == 0;
		if (ok && plain && have + json_array_size(first) == 1)
			ok = json_array_append_new(first, json_pack("{s:s, s:s}", "role", "user",
								    "content", prompt)) == 0;
		if (!ok) {
			rc = oom(&a);
		} else if (a.from == RUNSTATE_QUEUED || !row.chat_id || json_array_size(first)) {
			rc = start(&a, &(struct run_change){ .chat_id = row.chat_id ? NULL : chat_id,
							    .msg_chat = chat_id,
							    .msgs = first });
			if (rc == STEP_OK && json_array_extend(mc.msgs, first) < 0)
				rc = oom(&a);
		}
		json_decref(first);
	}
	if (rc == STEP_OK && a.skills.left_out && row.started_at == 0) {
		char *note = model_strdupf("only %d of the run's %zu skills have their files in "
					   "reach of the tools (%s/<name>): the first %d",
					   TOOLS_SKILLS_MAX, a.skills.n + a.skills.left_out,
					   TOOLS_SKILLS, TOOLS_SKILLS_MAX);
		rc = note ? log_event(&a, "note", json_pack("{s:s}", "text", note)) : oom(&a);
		free(note);
	}
	if (rc == STEP_OK && json_array_size(mc.msgs) == 1) {
		rc = first_user_message(&mc, row.prompt ? row.prompt : "", &user);
		if (rc == STEP_OK)
			rc = append_text(&mc, "user", user);
	}
	if (rc == STEP_OK)
		rc = chat_loop(&mc);
done:
	if (!env->row)
		run_row_free(&own);
	/* A run that could not start still moves to running first, so that
	 * it can end failed. */
	if (a.from == RUNSTATE_QUEUED && rc != STEP_GONE && rc != STEP_STOP &&
	    start(&a, &(struct run_change){ 0 }) != STEP_OK)
		rc = STEP_GONE;
	int out = finish(&a, rc, &mc);
	chat_free(&mc);
	free(user);
	free(chat_id);
	json_decref(a.usage);
	skilldirs_free(&a.skills);
	free(a.err);
	return out;
}

/* ---- rendering ----------------------------------------------------------- */

struct tx {
	struct store *st;
	const char *run_id;
	json_t *subs;          /* subagent_started and model_call_repeated
	                          events */
	struct chat_row *rows; /* the chats */
	size_t nrows;
	bool *shown;           /* rows already rendered */
	struct buf *out;
	const struct agent_partial *partial; /* a reply streaming, or NULL */
};

/* label + text, long texts cut at max (0: never), continuation lines
 * indented under the label. */
static int put_text_n(struct buf *out, const char *indent, const char *label,
		      const char *text, size_t len, size_t max, bool open_end)
{
	struct buf ex = {0};
	int rc = model_append_excerpt(&ex, text ? text : "", len, max ? max : len + 1,
				      false);
	if (rc == 0)
		rc = buf_printf(out, "%s%s", indent, label);
	for (const char *p = ex.data; rc == 0 && p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (p != ex.data && n)
			rc = buf_printf(out, "%s  ", indent);
		if (rc == 0)
			rc = buf_append(out, p, n);
		if (rc == 0 && (nl || !open_end))
			rc = buf_puts(out, "\n");
		p = nl ? nl + 1 : p + n;
	}
	if (rc == 0 && (!ex.data || !*ex.data) && !open_end)
		rc = buf_puts(out, "\n");
	buf_free(&ex);
	return rc;
}

static int put_text(struct buf *out, const char *indent, const char *label,
		    const char *text, size_t max)
{
	return put_text_n(out, indent, label, text, text ? strlen(text) : 0, max, false);
}

/* The label of a reply still streaming: as long as "assistant: ", which
 * takes its place once the reply is committed. */
#define TX_STREAMING_LABEL "streaming: "

/* A reply's text so far, as put_text will show it once committed, but with
 * its last line left open: what is shown now is always the beginning of
 * what is shown later (bar the label), so a reader that follows the file
 * (`tail -f`) sees the text run on. Cut at its last whole UTF-8 character
 * and its last non-blank one (put_text trims what ends a text). */
static int put_partial(struct buf *out, const char *indent, const struct agent_partial *p)
{
	size_t len = p->len, k = p->len;
	while (k > 0 && ((unsigned char)p->text[k - 1] & 0xC0) == 0x80)
		k--; /* continuation bytes: back to their lead byte */
	if (k > 0 && ((unsigned char)p->text[k - 1] & 0x80)) {
		unsigned char lead = (unsigned char)p->text[k - 1];
		size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
		if (len - (k - 1) < want)
			len = k - 1; /* the last character is not all here yet */
	}
	while (len > 0 && strchr(" \t\r\n", p->text[len - 1]))
		len--;
	if (len == 0)
		return 0;
	return put_text_n(out, indent, TX_STREAMING_LABEL, p->text, len, 0, true);
}

static int render_chat(struct tx *t, const char *chat_id, const char *indent);

/* Renders the sub-agents started from (chat_id, seq, call_id). */
static int render_subs(struct tx *t, const char *chat_id, json_int_t seq,
		       const char *call_id, const char *indent)
{
	size_t i;
	json_t *ev;
	int rc = 0;
	json_array_foreach(t->subs, i, ev) {
		if (rc < 0)
			break;
		if (!subagent_matches(ev, chat_id, seq, call_id))
			continue;
		const char *sub = json_string_value(json_object_get(ev, "chat_id"));
		const char *skill = json_string_value(json_object_get(ev, "skill"));
		struct chat_row *row = NULL;
		for (size_t k = 0; k < t->nrows; k++)
			if (str_eq(t->rows[k].chat_id, sub) && !t->shown[k])
				row = &t->rows[k];
		if (!row)
			continue;
		t->shown[row - t->rows] = true;
		char *inner = model_strdupf("%s    ", indent);
		if (!inner)
			return -ENOMEM;
		rc = buf_printf(t->out, "%sRunning skill '%s' in sub-agent... (%s)\n",
				indent, skill ? skill : "?", sub);
		rc = rc < 0 ? -ENOMEM : render_chat(t, sub, inner);
		if (rc == 0 && buf_printf(t->out, "%sSub-agent %s %s\n", indent,
					  sub, runstate_name(row->state)) < 0)
			rc = -ENOMEM;
		free(inner);
	}
	return rc;
}

/* The note of each model call of chat chat_id, after its first n
 * messages, that was asked again. */
static int render_repeats(struct tx *t, const char *chat_id, json_int_t n, const char *indent)
{
	size_t i;
	json_t *ev;
	json_array_foreach(t->subs, i, ev) {
		if (str_eq(json_string_value(json_object_get(ev, "type")), "model_call_repeated") &&
		    str_eq(json_string_value(json_object_get(ev, "chat_id")), chat_id) &&
		    json_integer_value(json_object_get(ev, "after_messages")) == n &&
		    buf_printf(t->out, "%s" TX_MODEL_REPEATED, indent) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int render_chat(struct tx *t, const char *chat_id, const char *indent)
{
	json_t *msgs = NULL;
	char *err = NULL;
	int rc = store_messages(t->st, t->run_id, chat_id, &msgs, &err);
	free(err);
	if (rc < 0)
		return rc;
	bool users = false;
	size_t i;
	json_t *m;
	json_array_foreach(msgs, i, m) {
		if (rc < 0)
			break;
		const char *role = role_of(m);
		char *content = model_content_text(json_object_get(m, "content"));
		if (strcmp(role, "user") == 0 && !users) {
			users = true;
			rc = render_subs(t, chat_id, 0, NULL, indent);
		}
		if (rc < 0) {
			free(content);
			break;
		}
		if (strcmp(role, "system") == 0) {
			rc = put_text(t->out, indent, "system: ", content, TX_SYSTEM_MAX);
		} else if (strcmp(role, "tool") == 0) {
			const char *name = json_string_value(json_object_get(m, "name"));
			char *label = model_strdupf("\u2190 %s: ", name ? name : "tool");
			rc = label ? put_text(t->out, indent, label, content, TX_RESULT_MAX)
				   : -ENOMEM;
			free(label);
		} else if (strcmp(role, "assistant") == 0) {
			rc = render_repeats(t, chat_id, (json_int_t)i, indent);
			json_t *calls = json_object_get(m, "tool_calls");
			if ((content && *content) || json_array_size(calls) == 0)
				rc = put_text(t->out, indent, "assistant: ", content, 0);
			size_t k;
			json_t *call;
			json_array_foreach(calls, k, call) {
				if (rc < 0)
					break;
				json_t *fn = json_object_get(call, "function");
				const char *name = json_string_value(json_object_get(fn, "name"));
				const char *args = json_string_value(json_object_get(fn, "arguments"));
				char *label = model_strdupf("\u2192 %s ", name ? name : "?");
				rc = label ? put_text(t->out, indent, label, args ? args : "",
						      TX_ARGS_MAX)
					   : -ENOMEM;
				free(label);
				const char *id = json_string_value(json_object_get(call, "id"));
				if (rc == 0 && id)
					rc = render_subs(t, chat_id, (json_int_t)i + 1, id, indent);
			}
		} else {
			char *label = model_strdupf("%s: ", *role ? role : "?");
			rc = label ? put_text(t->out, indent, label, content, 0) : -ENOMEM;
			free(label);
		}
		free(content);
	}
	if (rc == 0 && !users)
		rc = render_subs(t, chat_id, 0, NULL, indent);
	if (rc == 0) /* asked again, not answered yet */
		rc = render_repeats(t, chat_id, (json_int_t)json_array_size(msgs), indent);
	/* Its next reply, still streaming: shown until it is committed. */
	if (rc == 0 && t->partial && strcmp(t->partial->chat_id, chat_id) == 0 &&
	    json_array_size(msgs) == t->partial->after)
		rc = put_partial(t->out, indent, t->partial);
	json_decref(msgs);
	return rc < 0 ? (rc == -1 ? -ENOMEM : rc) : 0;
}

/* Loads what rendering needs besides messages; *row is the run. */
static int tx_open(struct tx *t, struct store *st, const char *run_id,
		   const struct agent_partial *partial, struct buf *out, struct run_row *row)
{
	char *err = NULL;
	*t = (struct tx){.st = st, .run_id = run_id, .out = out, .partial = partial};
	int rc = store_run_get(st, run_id, row, &err);
	free(err);
	err = NULL;
	if (rc < 0)
		return rc;
	rc = subagent_events(st, run_id, &t->subs, &err);
	free(err);
	err = NULL;
	if (rc == 0)
		rc = store_chats(st, run_id, &t->rows, &t->nrows, &err);
	free(err);
	if (rc == 0 && t->nrows && !(t->shown = calloc(t->nrows, sizeof *t->shown)))
		rc = -ENOMEM;
	return rc;
}

static void tx_close(struct tx *t, struct run_row *row)
{
	free(t->shown);
	chat_rows_free(t->rows, t->nrows);
	json_decref(t->subs);
	run_row_free(row);
}

int agent_transcript(struct store *st, const char *run_id,
		     const struct agent_partial *partial, struct buf *out)
{
	struct run_row row = {0};
	struct tx t;
	int rc = tx_open(&t, st, run_id, partial, out, &row);
	if (rc == 0)
		rc = render_chat(&t, row.chat_id ? row.chat_id : AGENT_MAIN_CHAT, "");
	/* Chats no announcement places (none in a run this agent wrote). */
	for (size_t k = 0; rc == 0 && k < t.nrows; k++) {
		if (t.shown[k])
			continue;
		rc = buf_printf(out, "Sub-agent %s (skill %s):\n", t.rows[k].chat_id,
				t.rows[k].skill ? t.rows[k].skill : "?") < 0 ? -ENOMEM : 0;
		if (rc == 0)
			rc = render_chat(&t, t.rows[k].chat_id, "    ");
	}
	if (rc == 0) {
		int prc = 0;
		if (row.state == RUNSTATE_FAILED)
			prc = put_text(out, "", "[run failed] ", row.error ? row.error : "", 0);
		else if (row.state == RUNSTATE_CANCELLED)
			prc = buf_puts(out, "[run cancelled]\n");
		else if (runstate_is_waiting(row.state)) {
			char *p = row.pending ? json_dumps(row.pending, JSON_COMPACT) : NULL;
			prc = buf_printf(out, "[%s] %s\n", runstate_name(row.state),
					 p ? p : "");
			free(p);
		}
		if (prc < 0)
			rc = -ENOMEM;
	}
	tx_close(&t, &row);
	return rc;
}

int agent_chat_transcript(struct store *st, const char *run_id, const char *chat_id,
			  const struct agent_partial *partial, struct buf *out)
{
	struct run_row row = {0};
	struct tx t;
	if (!chat_id)
		return -EINVAL;
	int rc = tx_open(&t, st, run_id, partial, out, &row);
	if (rc == 0)
		rc = render_chat(&t, chat_id, "");
	tx_close(&t, &row);
	return rc;
}

int agent_messages_json(struct store *st, const char *run_id,
			const char *chat_id, struct buf *out)
{
	struct run_row row;
	char *err = NULL;
	json_t *msgs = NULL;
	int rc = store_run_get(st, run_id, &row, &err);
	free(err);
	err = NULL;
	if (rc < 0)
		return rc;
	if (!chat_id)
		chat_id = row.chat_id ? row.chat_id : AGENT_MAIN_CHAT;
	rc = store_messages(st, run_id, chat_id, &msgs, &err);
	free(err);
	if (rc == 0 && json_text_append(out, msgs, STORE_MESSAGES_JSON_FLAGS) < 0)
		rc = -ENOMEM;
	json_decref(msgs);
	run_row_free(&row);
	return rc;
}

int agent_messages_json_size(struct store *st, const char *run_id,
			     const char *chat_id, uint64_t *size)
{
	*size = 0;
	char *main_chat = NULL;
	if (!chat_id) {
		struct run_row row;
		int rc = store_run_get(st, run_id, &row, NULL);
		if (rc < 0)
			return rc;
		main_chat = strdup(row.chat_id ? row.chat_id : AGENT_MAIN_CHAT);
		run_row_free(&row);
		if (!main_chat)
			return -ENOMEM;
		chat_id = main_chat;
	}
	int rc = store_messages_json_size(st, run_id, chat_id, size, NULL);
	free(main_chat);
	return rc;
}
