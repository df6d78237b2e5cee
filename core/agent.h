/* agent: the agent loop of one run (DESIGN.md sections 5-7, R5, R7, R11,
 * R12, R13, R15, R16). It is resumable: everything it knows is in the
 * store, and every step is committed before the next, so it can continue a
 * run after a wait (approval, input) or a crash from its last committed
 * message, with no message lost or duplicated. It never runs on a FUSE
 * request thread. */
#ifndef SKILLFS_AGENT_H
#define SKILLFS_AGENT_H

#include <stdbool.h>

#include "catalog.h"
#include "config.h"
#include "grants.h"
#include "model.h"
#include "resolution.h"
#include "store.h"
#include "tools.h"

struct agent_env {
	struct store *store;
	struct model *model;
	const struct config *config;      /* the config in force now */
	const struct catalog *catalog;    /* the catalogue in force now */
	const struct resolution *res;     /* the run's configuration + forced
	                                     skills resolved now: system prompt */
	const struct grants *allow;       /* the run's allow-list: stored ∩ now
	                                     (R7) or now (R8); computed by the
	                                     caller */
	const struct run_row *row;        /* the run as the caller just read
	                                     it from the store; NULL: read here */
	const char *workspace;            /* absolute; made by the first tool
	                                     that needs it */
	const char *workdir;              /* the project directory the tools
	                                     work in (absolute, resolved,
	                                     checked), or NULL: the workspace */
	bool have_python;                 /* R13 */
	const struct tool_schemas *tool_schemas; /* shared and never changed;
	                                     NULL: parsed and encoded per chat */
	const char *start_mode;           /* recorded when a queued run */
	const char *start_model;          /* starts ("inline", model name) */
	const struct sandbox *sandbox;    /* confines process tools; NULL:
	                                     they are refused */
	/* Polled between steps and during model/tool calls: true = cancel the
	 * run (it ends in state cancelled). */
	bool (*cancelled)(void *arg);
	void *cancel_arg;
	/* Polled like cancelled: true = the daemon is shutting down. The agent
	 * then abandons the current step WITHOUT any state change (the run
	 * stays running in the store and resumes at the next mount) and
	 * returns AGENT_STOPPED. May be NULL. */
	bool (*stopping)(void *arg);
	void *stopping_arg;
	/* Called after every committed step (message, event, state change),
	 * so the mount can show it; new_files is set when the run's set of
	 * files grew other than by a state change (a sub-agent's chat).
	 * May be NULL. */
	void (*progress)(void *arg, const char *run_id, bool new_files);
	void *progress_arg;
	/* Called when a commit failed with an error the store may get over
	 * (rc -EAGAIN: the database is locked elsewhere; -ENOSPC, -EDQUOT,
	 * -EROFS, -EIO; err says why), attempt 0, 1, ... for the same
	 * commit: it waits as it sees fit (backing off, parking the run) and
	 * returns true to try the commit again, false to give up (the run
	 * then stops as at shutdown when stopping() is true, else it fails).
	 * Called with rc 0 when a commit that failed before went through.
	 * May be NULL: a failed commit is not tried again. */
	bool (*store_wait)(void *arg, const char *run_id, int rc, const char *err,
			   unsigned attempt);
	void *store_wait_arg;
	/* Called as a model's reply streams in (providers that stream): the
	 * reply of chat chat_id that will follow its first `after` messages
	 * has text so far (len bytes, not NUL-terminated); text NULL when
	 * nothing streams for the run any more (the call failed). A reply
	 * that is committed simply follows; the caller shows the text with
	 * agent_transcript while the chat still has `after` messages. May be
	 * NULL: no streaming is asked for. */
	void (*partial)(void *arg, const char *run_id, const char *chat_id, size_t after,
			const char *text, size_t len);
	void *partial_arg;
};

/* A reply being streamed, for the transcript (see agent_env.partial). */
struct agent_partial {
	const char *chat_id;
	size_t after;     /* shown while the chat has exactly this many messages */
	const char *text; /* the text so far */
	size_t len;
};

enum agent_outcome {
	AGENT_COMPLETED,
	AGENT_FAILED,
	AGENT_WAITING_APPROVAL,
	AGENT_WAITING_INPUT,
	AGENT_CANCELLED,
	AGENT_STOPPED, /* shutdown: nothing changed, resume later */
};

/* The main chat's id when the run row names none yet. */
#define AGENT_MAIN_CHAT "main"

/* Runs run_id, which the caller has moved to state running, until it
 * completes, fails, is cancelled or must wait for a person; the agent makes
 * that final state transition itself (with result / error / pending), so
 * on return the store holds the outcome. When stopping() turns true it
 * returns AGENT_STOPPED instead, leaving the run running with everything
 * committed so far (an interrupted model reply or tool result is dropped,
 * and redone when the run resumes). A run that is not running when called
 * is left alone: its state's outcome is returned (-1 for created or
 * queued). Returns the outcome, or -1 only when the store itself failed
 * (the caller then fails the run); on a store failure the agent first
 * tries to fail the run itself with the store's message, and returns
 * AGENT_FAILED when that worked.
 *
 * Waiting, and the protocol for continuing (section 6):
 * - A call of a tool in config->approval_tools moves the run to
 *   waiting_for_approval with pending = {"kind": "approval", "chat_id",
 *   "call_id", "tool", "arguments"} and input cleared to "". The caller
 *   continues it by moving it back to running with input "approve" or
 *   "deny" (surrounding white space ignored; anything else denies),
 *   leaving pending as it is, and calling agent_run again.
 * - ask_user moves the run to waiting_for_input with pending =
 *   {"kind": "question", "chat_id", "call_id", "question"} and input "";
 *   the caller moves it back to running with the answer (non-empty; one
 *   trailing newline is dropped) in input.
 * Input is used only while pending names the very call being handled; the
 * agent then clears both (pending null, input "") in the transaction that
 * commits the tool's result. Both waits work the same inside a sub-agent
 * (for a tool of its own tool set): pending's chat_id is then the
 * sub-agent's chat, the run resumes inside that chat (through the call
 * that started it), runs the approved call once, and the sub-agent's
 * answer returns to its caller as before; deny is an error result to the
 * sub-agent. A call whose approval_granted event is logged is not asked
 * about again (a run_skill in tools.approval whose sub-agent then waits
 * for its own approval).
 *
 * Skills: run_skill and a /skill:run: prompt reach only the skills
 * effective in env->res (the run's configuration and forced skills, R1)
 * that are no skill's sub-skill, and, from inside the sub-agent of a
 * skill, that skill's own sub-skills (its skills/<sub> directories and its
 * sub-skills: list). Any other name (not attached, attached with enabled:
 * false, below the trust floor, invalid, another skill's sub-skill) gets
 * exactly what an unknown name gets: "run_skill: no skill named '<name>'"
 * as the call's error result, "/skill:run:<name>: no skill named
 * '<name>'" as the run's error.
 *
 * Budgets (config->budget, runs.budget; core/budget.h says what each
 * counts and when it is checked) bound the whole run, all its chats
 * together: the counts start from what the store holds for the run, the
 * clock from its first start. A budget reached fails the run with an error
 * naming it and its value ("budget exceeded: runs.budget.model_calls (200
 * model calls)"): a tool process running then is killed, a sub-agent
 * running ends failed with that text as its result, and the step that
 * would have gone over (a model call, the calls of a reply, a new
 * sub-agent, a message) does not happen. A run resumed after its time ran
 * out fails at its first step.
 *
 * Chats: the main chat (row.chat_id, AGENT_MAIN_CHAT when unset) has no
 * chat row; each sub-agent has one (parent = the calling chat, skill =
 * its skill) and is announced by an event "subagent_started" {"chat_id",
 * "skill", "parent_chat", "parent_seq", "call_id"?} (parent_seq: the
 * number of the calling assistant message in the parent chat, 0 for a
 * /skill:run: prompt) and an event "note" {"text": "Running skill '<name>'
 * in sub-agent..."} (R16).
 *
 * Other events: "tool_call" {chat_id, call_id, tool, arguments (an
 * excerpt)}, "tool_denied" {chat_id, call_id, tool, arguments, reason}
 * (R5), "approval_granted" / "approval_denied" {chat_id, call_id, tool},
 * "tool_result" {chat_id, call_id, tool, is_error, bytes},
 * "subagent_finished" {chat_id, skill, state}. */
int agent_run(const struct agent_env *env, const char *run_id);

/* Appends the run's transcript to out, for people: each message as
 * "user: ...", "assistant: ...", tool calls as "-> tool {arguments}" and
 * results as "<- tool: ..." (arrows are U+2192 / U+2190; long texts cut),
 * each sub-agent's chat indented right after the call that started it,
 * headed "Running skill '<name>' in sub-agent...", and a last line for a
 * failed, cancelled or waiting run. A reply still streaming (partial, may
 * be NULL) is shown where it will stand once committed, labelled
 * "streaming: " instead of "assistant: " (as long, so that what `tail -f`
 * printed runs on into the committed text), its last line unfinished.
 * Returns 0, -ENOENT when there is no such run, or another negative errno
 * (-ENOMEM, -EIO). */
int agent_transcript(struct store *st, const char *run_id,
		     const struct agent_partial *partial, struct buf *out);

/* One chat's transcript (e.g. a sub-agent's, for runs/<id>/subagents/
 * <chat-id>/transcript), in the same form, appended to out; nothing for a
 * chat with no messages. Returns 0 or a negative errno as
 * agent_transcript. */
int agent_chat_transcript(struct store *st, const char *run_id, const char *chat_id,
			  const struct agent_partial *partial, struct buf *out);

/* Appends the messages of chat chat_id of the run (NULL: the main chat) as
 * a pretty-printed JSON array and a newline ("[]\n" when it has none).
 * Returns 0 or a negative errno as agent_transcript. */
int agent_messages_json(struct store *st, const char *run_id,
			const char *chat_id, struct buf *out);

/* The size in bytes agent_messages_json renders for the same chat, from
 * the sizes kept with the messages (no message is read or rendered).
 * -EAGAIN when a message has none (stored before schema 8): render then.
 * -ENOENT for no such run. */
int agent_messages_json_size(struct store *st, const char *run_id,
			     const char *chat_id, uint64_t *size);

#endif
