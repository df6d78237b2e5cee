/* tools: the registry of built-in tools (their OpenAI function-tool schemas)
 * and the execution of the tools that act on a run's workspace.
 *
 * Tool names are the canonical lower-case ones ("bash", "read", ...).
 * The allow-list is enforced by the caller (R5); this module only executes. */
#ifndef SKILLFS_TOOLS_H
#define SKILLFS_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "strlist.h"

#define TOOLS_DEFAULT_TIMEOUT_MS 30000
#define TOOLS_DEFAULT_OUTPUT_MAX ((size_t)64 << 10)

/* The built-in tool names in canonical order, NULL-terminated. */
extern const char *const tools_builtin[];

/* True when name is a built-in tool (exact, lower-case match). */
bool tools_is_builtin(const char *name);

/* The OpenAI function-tool object of a built-in tool:
 * {"type": "function", "function": {"name", "description", "parameters"}}.
 * Returns a new reference, or NULL for an unknown name or out of memory. */
json_t *tools_schema(const char *name);

/* An array of the schemas of names, in the given order; names that are not
 * built-in are skipped. names == NULL means every built-in tool. Returns a
 * new reference, or NULL on allocation failure. */
json_t *tools_schemas(const struct strlist *names);
/* Every built-in tool's schema, parsed and encoded once, then never
 * changed: any number of threads may pick from it at once. */
struct tool_schemas {
	json_t *all;  /* tools_schemas(NULL) */
	char **texts; /* texts[i]: all[i] as compact JSON */
	size_t n;
};

/* Fills ts; returns 0, or -1 on allocation failure (ts is then empty). */
int tool_schemas_init(struct tool_schemas *ts);
void tool_schemas_free(struct tool_schemas *ts);

/* Like tools_schemas(names), without parsing or encoding: *arr gets the
 * schemas of names in the given order (objects shared with ts->all,
 * jansson reference counts being atomic, so never to be modified) and
 * *text the same array as compact JSON text, made from the texts encoded
 * once. Returns 0, or -1 on allocation failure. */
int tool_schemas_pick(const struct tool_schemas *ts, const struct strlist *names,
		      json_t **arr, char **text);

struct catalog;
struct config;
struct grants;
struct sandbox;
struct webfetch_config;

/* Where the tools see a run's project directory and its skills' files:
 * the sandboxed processes at these paths, and the file tools accept them
 * too (the run's workspace is at SANDBOX_WORKSPACE, "/workspace"). */
#define TOOLS_WORKDIR "/workdir"
#define TOOLS_SKILLS "/skills"      /* /skills/<name>: read-only */
/* At most this many skills' directories are in reach of one run. */
#define TOOLS_SKILLS_MAX 256

/* A skill whose files the tools may read at TOOLS_SKILLS/<name>. */
struct tool_skill_dir {
	const char *name; /* one usable path component (skill_name_unusable) */
	const char *dir;  /* its directory on the host, absolute */
};

struct tool_ctx {
	const char *workspace; /* absolute path; created when missing */
	/* The run's project directory (absolute, resolved, checked), or NULL:
	 * the working directory of the tools, relative paths resolve in it. */
	const char *workdir;
	/* The run's skills whose files the tools may read (never write), at
	 * most TOOLS_SKILLS_MAX; names are distinct. */
	const struct tool_skill_dir *skills;
	size_t nskills;
	/* How process tools are confined (NULL or unusable: they are refused);
	 * the workspace belongs to the sandbox's user when it switches. */
	const struct sandbox *sandbox;
	/* The call is admitted by a command pattern only (D3): bash runs its
	 * command split into argv, without a shell. */
	bool argv_only;
	int timeout_ms;        /* process tools and webfetch; <= 0:
	                          TOOLS_DEFAULT_TIMEOUT_MS */
	size_t output_max;     /* process tools; 0: TOOLS_DEFAULT_OUTPUT_MAX */
	/* webfetch: tools.webfetch (NULL: the defaults, private addresses
	 * refused) and, when its grant is restricted to domain patterns
	 * (WebFetch(domain:HOST)), those patterns: the host of the URL and of
	 * every redirect must match one (NULL: any host). */
	const struct webfetch_config *webfetch;
	const struct strlist *domains;
	/* Optional: polled while a process tool or webfetch runs; returning
	 * true stops it (e.g. the run was cancelled). */
	bool (*cancel)(void *arg);
	void *cancel_arg;
	/* learn_skill: the calling run's allow-list (the new skill's
	 * allowed-tools must lie within it; NULL: only an empty list), the
	 * source it writes into (config_learn_dir; NULL: refused, no source
	 * is writable) and the catalogue whose names it must not take (NULL:
	 * refused). */
	const struct grants *allow;
	const char *learn_dir;
	const struct catalog *catalog;
};

struct tool_result {
	char *text;    /* for the model; valid UTF-8, never NULL after success */
	bool is_error; /* the call failed (bad arguments, refused path,
	                * non-zero exit, timeout, unavailable tool...) */
};

struct workspace;
struct buf;
/* Opens (making it when absent) the run's workspace at path for the tools
 * of sandbox sb: owned by the user they run as (workspace_open_as).
 * Returns 0, or -1 with the reason appended to err. */
int tools_workspace_open(const struct sandbox *sb, const char *path, struct workspace *ws,
			 struct buf *err);

/* True when a call of tool name may change something besides its result
 * (bash, python, terminal, write, edit, learn_skill; and any name that is
 * not a built-in tool): such a call is recorded as started before it runs
 * and never run twice. False for the tools that only read (read, glob,
 * grep, webfetch, whose GET and HEAD are safe to repeat) and for the ones
 * the agent loop answers itself (run_skill, ask_user). */
bool tools_has_side_effects(const char *name);

/* True when the built-in tool starts programs (runs only sandboxed). */
bool tools_is_process(const char *name);

/* Why built-in tool name cannot work with sandbox sb (a process tool
 * without a usable sandbox, python without python3 in the sandbox's PATH,
 * terminal without any of its programs), or NULL when it can. */
const char *tools_unavailable_why(const char *name, const struct sandbox *sb);

/* Probes the sandbox for c's tools settings into *sb (sandbox_probe) and
 * moves each registered tool that cannot work here out of c's registered
 * tools into c->tools.unavailable with the reason (config_tool_unavailable),
 * so it is never offered nor counted by policy all; each such tool, and a
 * sandbox turned off by tools.sandbox: none, becomes a warning of c (shown
 * by skillfs check and logged by the daemon). Returns 0, or -1 on ENOMEM. */
int tools_probe(struct config *c, struct sandbox *sb);

/* The second half of tools_probe, for a sandbox already probed: moves the
 * registered tools that cannot work with sb out of c's registered tools
 * (config_tool_unavailable) and adds the warnings. Returns 0, or -1 on
 * ENOMEM. */
int tools_settle(struct config *c, const struct sandbox *sb);

/* Executes the built-in tool name with the model's arguments (a JSON
 * object, borrowed; NULL counts as {}). Every failure the model can cause or
 * should hear about becomes an error result naming the tool, e.g.
 * "read: no such file: a.txt" or "bash: missing required argument
 * 'command'"; run_skill and ask_user are refused as handled by the engine.
 * Returns 0 with *out filled, or -1 (out of memory) with out->text NULL.
 * Thread-safe. */
int tools_exec(const struct tool_ctx *ctx, const char *name, json_t *args,
	       struct tool_result *out);

/* Frees the text; leaves the result empty. */
void tool_result_free(struct tool_result *r);

#endif
