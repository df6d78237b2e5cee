/* budget: the whole-run budgets. See budget.h. */
#include "budget.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Records that budget key (limit value, in units: the singular when value
 * is 1) was reached; returns false, the checks' answer. */
static bool reached(struct budget *b, const char *key, long long value,
		    const char *one, const char *many)
{
	if (!b->exceeded[0])
		snprintf(b->exceeded, sizeof b->exceeded,
			 "budget exceeded: runs.budget.%s (%lld %s)", key, value,
			 value == 1 ? one : many);
	return false;
}

int budget_start(struct budget *b, const struct run_budget *lim,
		 struct store *st, const char *run_id, int64_t started_at,
		 char **err)
{
	struct run_totals t;
	*b = (struct budget){ .lim = *lim, .started_ns = started_at ? started_at : now_ns() };
	int rc = store_run_totals(st, run_id, &t, err);
	if (rc < 0)
		return rc;
	b->model_calls = t.assistant_messages;
	b->subagents = t.subagent_chats;
	b->stored_bytes = t.message_bytes;
	return 0;
}

bool budget_check_model_call(struct budget *b)
{
	if (b->exceeded[0])
		return false;
	if (b->model_calls >= b->lim.model_calls)
		return reached(b, "model_calls", b->lim.model_calls, "model call",
			       "model calls");
	return true;
}

void budget_count_model_call(struct budget *b)
{
	b->model_calls++;
}

bool budget_check_tool_calls(struct budget *b, size_t ncalls)
{
	if (b->exceeded[0])
		return false;
	if (ncalls > (unsigned long)b->lim.tool_calls_per_turn)
		return reached(b, "tool_calls_per_turn", b->lim.tool_calls_per_turn,
			       "tool call per turn", "tool calls per turn");
	return true;
}

bool budget_check_subagent(struct budget *b, long depth)
{
	if (b->exceeded[0])
		return false;
	if (depth > b->lim.depth)
		return reached(b, "depth", b->lim.depth, "level of sub-agents",
			       "levels of sub-agents");
	if (b->subagents >= b->lim.subagents)
		return reached(b, "subagents", b->lim.subagents, "sub-agent",
			       "sub-agents");
	return true;
}

void budget_count_subagent(struct budget *b)
{
	b->subagents++;
}

bool budget_check_time(struct budget *b)
{
	if (b->exceeded[0])
		return false;
	/* elapsed >= seconds, compared without multiplying (no overflow) */
	int64_t elapsed = now_ns() - b->started_ns;
	if (elapsed >= 0 && elapsed / 1000000000 >= b->lim.seconds)
		return reached(b, "seconds", b->lim.seconds, "second", "seconds");
	return true;
}

bool budget_check_stored(struct budget *b, size_t bytes)
{
	if (b->exceeded[0])
		return false;
	if (b->stored_bytes > b->lim.stored_bytes ||
	    bytes > (uint64_t)(b->lim.stored_bytes - b->stored_bytes))
		return reached(b, "stored_bytes", (long long)b->lim.stored_bytes, "byte",
			       "bytes");
	return true;
}

void budget_count_stored(struct budget *b, size_t bytes)
{
	b->stored_bytes += (int64_t)bytes;
}

const char *budget_exceeded(const struct budget *b)
{
	return b->exceeded[0] ? b->exceeded : NULL;
}
