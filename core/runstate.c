#include "runstate.h"

#include <string.h>

static const char *const names[RUNSTATE_COUNT] = {
	[RUNSTATE_CREATED] = "created",
	[RUNSTATE_QUEUED] = "queued",
	[RUNSTATE_RUNNING] = "running",
	[RUNSTATE_WAITING_FOR_APPROVAL] = "waiting_for_approval",
	[RUNSTATE_WAITING_FOR_INPUT] = "waiting_for_input",
	[RUNSTATE_COMPLETED] = "completed",
	[RUNSTATE_FAILED] = "failed",
	[RUNSTATE_CANCELLED] = "cancelled",
};

#define BIT(s) (1u << (s))

/* moves[from] = the set of states `from` may move to. */
static const unsigned moves[RUNSTATE_COUNT] = {
	[RUNSTATE_CREATED] = BIT(RUNSTATE_QUEUED) | BIT(RUNSTATE_FAILED) |
			     BIT(RUNSTATE_CANCELLED),
	[RUNSTATE_QUEUED] = BIT(RUNSTATE_RUNNING) | BIT(RUNSTATE_FAILED) |
			    BIT(RUNSTATE_CANCELLED),
	[RUNSTATE_RUNNING] = BIT(RUNSTATE_WAITING_FOR_APPROVAL) |
			     BIT(RUNSTATE_WAITING_FOR_INPUT) |
			     BIT(RUNSTATE_COMPLETED) | BIT(RUNSTATE_FAILED) |
			     BIT(RUNSTATE_CANCELLED) |
			     BIT(RUNSTATE_QUEUED), /* crash-recovery re-queue */
	[RUNSTATE_WAITING_FOR_APPROVAL] = BIT(RUNSTATE_RUNNING) |
					  BIT(RUNSTATE_FAILED) |
					  BIT(RUNSTATE_CANCELLED),
	[RUNSTATE_WAITING_FOR_INPUT] = BIT(RUNSTATE_RUNNING) |
				       BIT(RUNSTATE_FAILED) |
				       BIT(RUNSTATE_CANCELLED),
	[RUNSTATE_COMPLETED] = 0,
	[RUNSTATE_FAILED] = 0,
	[RUNSTATE_CANCELLED] = 0,
};

static bool in_range(enum runstate s)
{
	return (int)s >= 0 && (int)s < RUNSTATE_COUNT;
}

const char *runstate_name(enum runstate s)
{
	return in_range(s) ? names[s] : "invalid";
}

bool runstate_parse(const char *s, enum runstate *out)
{
	if (!s)
		return false;
	for (int i = 0; i < RUNSTATE_COUNT; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = (enum runstate)i;
			return true;
		}
	}
	return false;
}

bool runstate_can_move(enum runstate from, enum runstate to)
{
	return in_range(from) && in_range(to) && (moves[from] & BIT(to));
}

bool runstate_is_terminal(enum runstate s)
{
	return s == RUNSTATE_COMPLETED || s == RUNSTATE_FAILED ||
	       s == RUNSTATE_CANCELLED;
}

bool runstate_is_waiting(enum runstate s)
{
	return s == RUNSTATE_WAITING_FOR_APPROVAL ||
	       s == RUNSTATE_WAITING_FOR_INPUT;
}

bool runstate_is_settled(enum runstate s)
{
	return runstate_is_terminal(s) || runstate_is_waiting(s);
}
