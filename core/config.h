/* config: the instance configuration file (DESIGN.md section 9). */
#ifndef SKILLFS_CONFIG_H
#define SKILLFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strlist.h"
#include "trust.h"

#define CONFIG_DEFAULT_MAX_BYTES 24000
#define CONFIG_DEFAULT_LISTING_MAX_BYTES 4096
#define CONFIG_DEFAULT_WORKERS 4
#define CONFIG_DEFAULT_MAX_TURNS 32
#define CONFIG_DEFAULT_MODEL_TIMEOUT 120
#define CONFIG_DEFAULT_PROMPT_MAX (1024 * 1024)
#define CONFIG_DEFAULT_TOOL_TIMEOUT 60          /* seconds, process tools */
#define CONFIG_DEFAULT_TOOL_OUTPUT (64L * 1024) /* bytes, process tools */
#define CONFIG_DEFAULT_TOOLS_USER "nobody"
#define CONFIG_DEFAULT_WEBFETCH_TEXT ((uint64_t)1 << 20)      /* bytes */
#define CONFIG_DEFAULT_WEBFETCH_DOWNLOAD ((uint64_t)10 << 20) /* bytes */
/* tools.terminal.commands when the file gives none (space-separated). */
#define CONFIG_DEFAULT_TERMINAL_COMMANDS "ls cat head tail wc grep find sort diff git"
/* At most this many programs in tools.terminal.commands. */
#define CONFIG_TERMINAL_COMMANDS_MAX 64
/* runs.budget (see struct run_budget) */
#define CONFIG_DEFAULT_BUDGET_MODEL_CALLS 200
#define CONFIG_DEFAULT_BUDGET_TOOL_CALLS_PER_TURN 32
#define CONFIG_DEFAULT_BUDGET_SUBAGENTS 16
#define CONFIG_DEFAULT_BUDGET_DEPTH 2
#define CONFIG_DEFAULT_BUDGET_SECONDS 3600
#define CONFIG_DEFAULT_BUDGET_STORED_BYTES ((int64_t)64 << 20)
/* audit.keep: the audit trail's entries kept (the oldest go first). */
#define CONFIG_DEFAULT_AUDIT_KEEP 10000
#define CONFIG_AUDIT_KEEP_MAX 10000000
/* watch.rescan_seconds: how often the directories the inotify watch limit
 * keeps from being watched are looked at again (0: never). */
#define CONFIG_DEFAULT_WATCH_RESCAN 5
#define CONFIG_WATCH_RESCAN_MAX 86400

/* The name under configs/ that holds the config file's reload error, so no
 * configuration may take it. */
#define CONFIG_ERROR_NAME "ERROR"

enum exec_mode { EXEC_INLINE = 0, EXEC_SUBAGENT = 1 };

struct source {
	char *path; /* absolute */
	enum trust trust;
	bool writable; /* sources[].writable: learn_skill may write here */
	bool recursive; /* sources[].recursive, -r DIR: skills at any depth
	                   (core/discover.h), not only one level down */
	char *fingerprint; /* sources[].fingerprint: the pin, "sha256:" and 64
	                      lower-case hex digits (fingerprint.h), or NULL */
};

struct attachment {
	char *name;
	bool enabled;
};

struct configuration {
	char *name;
	struct attachment *att;
	size_t n;
	/* The no-config default: attach every catalogue skill in name order
	 * (att is empty then). */
	bool attach_all;
	/* configurations.<name>.tools: the tool ceiling, items as written
	 * ("read", "Bash(git diff:*)"); a run's list is the skills'
	 * resolution intersected with it (grants_cap). has_ceiling false:
	 * none (an empty ceiling allows no tool). */
	bool has_ceiling;
	struct strlist ceiling;
};

struct trust_override {
	char *skill;
	enum trust trust;
};

struct model_config {
	char *provider;        /* "echo" (default), "command", "openai" */
	struct strlist command; /* argv for the command provider, resolved */
	char *base_url;
	char *model;
	char *api_key_env;
	int timeout;           /* seconds */
	bool stream_off;       /* model.stream: false (openai: no streaming) */
};

/* How process tools are confined (DESIGN.md section 7). */
enum sandbox_mode {
	SANDBOX_BWRAP = 0, /* bubblewrap; without a working one, no process tools */
	SANDBOX_NONE = 1,  /* tools.sandbox: none, an explicit opt-out (warned) */
};

/* tools.limits.<tool>: caps of one process tool's calls. */
struct tool_limit {
	char *tool;         /* lower-case */
	int timeout;        /* seconds; 0: CONFIG_DEFAULT_TOOL_TIMEOUT */
	long output_bytes;  /* 0: CONFIG_DEFAULT_TOOL_OUTPUT */
};

/* tools.webfetch: what the webfetch tool may reach and return. */
struct webfetch_config {
	bool allow_private;    /* private, loopback, link-local... addresses too */
	uint64_t max_text;     /* bytes of text returned; 0: the default */
	uint64_t max_download; /* bytes of a response read; 0: the default */
};

struct tools_config {
	enum sandbox_mode sandbox;
	char *sandbox_program; /* tools.sandbox_program (absolute when it has a
	                          '/'), or NULL: "bwrap" looked up on PATH */
	bool network;          /* tools.network: the sandbox keeps the network */
	char *user;            /* tools.user: whom tools run as when the daemon
	                          is root; NULL: CONFIG_DEFAULT_TOOLS_USER */
	struct strlist env;    /* tools.env as "NAME=value", for tool processes */
	struct tool_limit *limits;
	size_t nlimits;
	struct webfetch_config webfetch; /* tools.webfetch */
	/* tools.terminal.commands: the programs the terminal tool may start,
	 * bare names in the order given (CONFIG_DEFAULT_TERMINAL_COMMANDS
	 * unless the file says otherwise; may be empty). */
	struct strlist terminal_commands;
	/* Filled by whoever probes the machine (the engine, skillfs check):
	 * registered tools that cannot work here, moved out of
	 * registered_tools, each with the reason at the same index. */
	struct strlist unavailable;
	struct strlist unavailable_why;
};

/* runs.budget: what one whole run may use, all its chats together
 * (core/budget.h says how each is counted). Every value is positive. */
struct run_budget {
	long model_calls;         /* model calls of the run */
	long tool_calls_per_turn; /* tool calls one assistant reply may ask for */
	long subagents;           /* sub-agent chats of the run */
	long depth;               /* nesting: a sub-agent started from the main
	                             chat has depth 1, one started from a
	                             depth-d sub-agent depth d + 1 */
	long seconds;             /* wall clock since the run first started */
	int64_t stored_bytes;     /* bytes of the run's stored messages */
};

/* runs.keep: retention of finished runs (completed, failed, cancelled);
 * 0 in a field: no limit of that kind. */
struct run_keep {
	double days; /* removed once finished longer ago than this */
	long count;  /* only the newest this many finished runs are kept */
};

struct config {
	char *path;     /* the config file, absolute; NULL for the no-config default */
	char *base_dir; /* directory relative paths resolve against */

	struct source *sources;
	size_t nsources;

	long max_bytes;         /* skills.maxBytes after fallback rules (>0) */
	long listing_max_bytes; /* skills.listingMaxBytes (>0) */
	enum exec_mode execution_mode;
	enum trust min_trust;
	struct strlist disabled; /* globally disabled skill names */
	struct trust_override *trust_overrides;
	size_t ntrust_overrides;
	/* skills.acknowledged: skills whose high-level injection findings
	 * are accepted (findings.h): they stay valid, the findings shown. */
	struct strlist acknowledged;

	struct strlist registered_tools; /* lower-case, in config order */
	struct strlist approval_tools;
	struct tools_config tools;

	struct model_config model;
	int workers;
	int max_turns;
	long prompt_max_bytes;
	struct run_budget budget; /* runs.budget */
	struct run_keep keep;     /* runs.keep; default: every run is kept */
	/* runs.workdir_roots: absolute, normalised by their text (symbolic
	 * links are resolved when a workdir is checked); empty: runs/<id>/
	 * workdir is off. */
	struct strlist workdir_roots;
	char *state_path; /* absolute, or NULL = default location */
	long audit_keep;  /* audit.keep: entries of the audit trail kept */
	long watch_rescan_seconds; /* watch.rescan_seconds (0: never) */

	struct configuration *configs; /* in file order */
	size_t nconfigs;

	struct strlist warnings; /* unknown keys etc., "file:line: ..." */
};

/* The built-in tools, in their canonical order (registered by default). */
extern const char *const config_builtin_tools[];
extern const size_t config_builtin_tools_n;

/* Reads and validates a config file. On success returns 0 and *out.
 * On error returns -1 and *err holds a message naming the file, line and
 * key ("config.yaml:12: skills.execution_mode: expected 'inline' or
 * 'subagent', got 'fast'"); the caller frees it. Unknown keys are warnings,
 * not errors. A key with a null value reads as absent (its default). A file
 * with no settings (empty, only comments, a lone null) is an error ("{}"
 * takes every default), and so is one past 4 MiB or nested deeper than 64
 * levels, refused before the document is loaded. */
int config_load(const char *path, struct config **out, char **err);

/* Parses config text (for tests). path is used in messages and base_dir
 * resolves relative paths. Same contract as config_load. */
int config_parse(const char *text, size_t len, const char *path,
		 const char *base_dir, struct config **out, char **err);

/* The no-config default (section 9): every dir a first_party source, all
 * built-in tools registered, one configuration "default" attaching every
 * skill. Returns NULL on ENOMEM. */
struct config *config_default(const char *const *dirs, size_t ndirs);

/* Appends every key the parser reads, as a dotted path from the top of
 * the file ("skills.maxBytes", "sources[].path", "tools.limits.<tool>.timeout",
 * "configurations.<name>.skills[].enabled"; "[]" is any list item, "<...>"
 * any key of that mapping), taken from the tables the parser itself checks
 * keys against: a key outside it is warned about as unknown. For the
 * documentation's test. Returns 0, or -1 on ENOMEM. */
int config_known_keys(struct strlist *out);

/* p made absolute against the current directory and normalised by its
 * text alone (symbolic links are kept: a link retargeted later is
 * followed); a new string, or NULL on failure (errno set). */
char *config_path_absolute(const char *p);
/* p joined to base (p wins when absolute), normalised by its text alone; a
 * new string, or NULL when out of memory. */
char *config_path_join(const char *base, const char *p);

/* Appends extra -s directories as first_party sources after those of the
 * file. Returns 0 or -1 on ENOMEM. */
int config_add_sources(struct config *c, const char *const *dirs, size_t ndirs);

/* Where learn_skill writes: the path of the first source marked
 * writable: true, or NULL when none is. */
const char *config_learn_dir(const struct config *c);

/* Finds a configuration by name, or NULL. */
const struct configuration *config_find(const struct config *c, const char *name);

/* The trust of a skill from a source of trust src_trust, after the per-skill
 * override (D2). */
enum trust config_skill_trust(const struct config *c, const char *skill,
			      enum trust src_trust);

/* Whether a skill name is in skills.disabled. */
bool config_skill_disabled(const struct config *c, const char *skill);

/* Whether a skill name is in skills.acknowledged. */
bool config_skill_acknowledged(const struct config *c, const char *skill);

/* Whether a (lower-case) tool name is registered. */
bool config_tool_registered(const struct config *c, const char *tool);

/* The timeout (ms) and output cap (bytes) of a process tool's call: its
 * tools.limits entry, else the defaults. */
int config_tool_timeout_ms(const struct config *c, const char *tool);
size_t config_tool_output_max(const struct config *c, const char *tool);

/* Takes a registered tool out of registered_tools (and approval_tools)
 * into tools.unavailable with the reason: it is then never offered nor
 * counted by policy all. No-op when it is not registered. Returns 0, or -1
 * on ENOMEM. */
int config_tool_unavailable(struct config *c, const char *tool, const char *why);

/* Why a built-in tool is not available (it was registered but cannot work
 * here), or NULL. */
const char *config_tool_unavailable_why(const struct config *c, const char *tool);

void config_free(struct config *c);

#endif
