/* runstate: the states of a run and the moves between them (DESIGN.md
 * section 6).
 *
 *   created ──> queued ──> running ──> completed | failed | cancelled
 *      │           │        │   ^
 *      │           │        v   │
 *      │           │   waiting_for_approval | waiting_for_input
 *      └───────────┴──> failed | cancelled (from any non-terminal state)
 *
 * `created` is a run directory made with mkdir whose prompt is not written
 * yet; the design's list starts at `queued`. A run becomes queued only when
 * its prompt is written (store_run_enqueue).
 *
 * running -> queued is the crash-recovery re-queue: a run that was running
 * when the daemon stopped is put back in the queue at the next mount (it
 * keeps its place and its committed messages and resumes from the last one,
 * R7 applying). Waiting runs stay waiting across a remount: they were not
 * interrupted, they wait for a person. Terminal states have no way out. */
#ifndef SKILLFS_RUNSTATE_H
#define SKILLFS_RUNSTATE_H

#include <stdbool.h>

enum runstate {
	RUNSTATE_CREATED = 0,
	RUNSTATE_QUEUED,
	RUNSTATE_RUNNING,
	RUNSTATE_WAITING_FOR_APPROVAL,
	RUNSTATE_WAITING_FOR_INPUT,
	RUNSTATE_COMPLETED,
	RUNSTATE_FAILED,
	RUNSTATE_CANCELLED,
};

#define RUNSTATE_COUNT 8

/* The state's name as shown in runs/<id>/status ("queued", ...). An
 * out-of-range value yields "invalid" (never NULL). */
const char *runstate_name(enum runstate s);

/* Parses a state name. Returns true and sets *out on an exact known name;
 * false otherwise (*out untouched). s may be NULL. */
bool runstate_parse(const char *s, enum runstate *out);

/* Whether a run may move from `from` to `to` (the diagram above). A state
 * never moves to itself; out-of-range values never move. */
bool runstate_can_move(enum runstate from, enum runstate to);

/* completed, failed or cancelled: the run will never change again. */
bool runstate_is_terminal(enum runstate s);

/* waiting_for_approval or waiting_for_input: paused for a person. */
bool runstate_is_waiting(enum runstate s);

/* Terminal or waiting for a person: the states a `wait` read returns on. */
bool runstate_is_settled(enum runstate s);

#endif
