/* budget: what one whole run may use (runs.budget, DESIGN.md section 7),
 * all its chats together, and what it has used so far.
 *
 * The budgets, and when the agent checks each:
 *   model_calls          before each model call: the calls made so far,
 *                        every chat's, counted from the assistant messages
 *                        committed (so calls made before a crash or a wait
 *                        count too) plus the calls made since the run was
 *                        loaded
 *   tool_calls_per_turn  when a reply arrives, before any of its calls is
 *                        executed: the calls the one reply asks for
 *   subagents            before a new sub-agent starts: the run's sub-agent
 *                        chats (every chat but the main one)
 *   depth                before a new sub-agent starts: its nesting depth.
 *                        The main chat has depth 0; a sub-agent started
 *                        from a chat of depth d has depth d + 1 (so one
 *                        started from the main chat has depth 1)
 *   seconds              at every interruption poll (between steps, and
 *                        while a model call or a tool process runs, which
 *                        is killed then): wall-clock time since the run
 *                        first moved to running, time spent waiting in the
 *                        queue again or for a person included
 *   stored_bytes         before a message is committed: the bytes of all
 *                        the run's stored messages (store_message_bytes)
 * A count budget of N admits N (calls, sub-agents, ...), and refuses the
 * next one. Reaching a budget fails the whole run; the check then records
 * the message budget_exceeded() returns ("budget exceeded:
 * runs.budget.model_calls (200 model calls)").
 *
 * One run's budget is used by the one thread running it. */
#ifndef SKILLFS_BUDGET_H
#define SKILLFS_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

struct budget {
	struct run_budget lim;
	int64_t started_ns;   /* CLOCK_REALTIME, unix nanoseconds */
	int64_t model_calls;
	int64_t subagents;
	int64_t stored_bytes;
	char exceeded[160];   /* "" until a budget is reached */
};

/* Starts the accounting of run run_id under the limits lim: its counters
 * read from the store (store_run_totals), its clock from started_at (the
 * run row's; 0: the run starts now). Returns 0, or a negative errno from
 * the store with *err set as store_run_totals does. */
int budget_start(struct budget *b, const struct run_budget *lim,
		 struct store *st, const char *run_id, int64_t started_at,
		 char **err);

/* Whether the run may make one more model call. */
bool budget_check_model_call(struct budget *b);
/* Counts a model call made (whatever its outcome). */
void budget_count_model_call(struct budget *b);

/* Whether one reply may ask for ncalls tool calls. */
bool budget_check_tool_calls(struct budget *b, size_t ncalls);

/* Whether a new sub-agent of nesting depth depth may start. */
bool budget_check_subagent(struct budget *b, long depth);
/* Counts a sub-agent chat recorded in the store. */
void budget_count_subagent(struct budget *b);

/* Whether the run is still within its wall-clock time. */
bool budget_check_time(struct budget *b);

/* Whether bytes more of messages may be stored for the run. */
bool budget_check_stored(struct budget *b, size_t bytes);
/* Counts bytes of messages committed. */
void budget_count_stored(struct budget *b, size_t bytes);

/* The message of the budget that was reached, or NULL while none was.
 * Once reached, a budget stays reached: checks never clear it. */
const char *budget_exceeded(const struct budget *b);

#endif
