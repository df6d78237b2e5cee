/* claudetools: Claude Code's tool names, in one table (DESIGN.md D3; the
 * `.claude` directory of configs/<cfg>/claude/). Each row is a name Claude
 * Code uses in allowed-tools, in permission rules and in its tool list,
 * with the skillfs tool doing the same job, if any, and how the name is
 * used in each direction:
 * - reading a skill: an allowed-tools item naming it grants that skillfs
 *   tool (tool_from_claude);
 * - writing Claude Code settings (claude.h): a skillfs grant of the tool
 *   allows the name; a name of no granted tool is denied under a declared
 *   list; the names that only load text or keep notes are always allowed.
 * skillfs tools that no row names (python, terminal, learn_skill) have no
 * equivalent in Claude Code. */
#ifndef SKILLFS_CLAUDETOOLS_H
#define SKILLFS_CLAUDETOOLS_H

#include <stdbool.h>
#include <stddef.h>

enum claude_tool_flags {
	/* An allowed-tools item of this name grants .tool (D3). */
	CLAUDE_READS = 1u << 0,
	/* A grant of .tool allows this name in Claude Code's settings. */
	CLAUDE_GRANTED = 1u << 1,
	/* Only loads text or keeps notes: allowed under every policy. */
	CLAUDE_NOTES = 1u << 2,
	/* A name only older Claude Code versions have: read in skills,
	 * never written into settings (Claude Code 2.1 warns at every start
	 * about a rule naming a tool it does not know). */
	CLAUDE_LEGACY = 1u << 3,
};

struct claude_tool {
	const char *name; /* as Claude Code spells it: "Read", "WebFetch" */
	const char *tool; /* the skillfs tool doing the same job, or NULL */
	unsigned flags;   /* enum claude_tool_flags */
};

/* The table, sorted by name (strcmp), and its length in *n. Static data:
 * never freed, never changed. */
const struct claude_tool *claude_tools(size_t *n);

/* The row of a Claude Code tool name (case-insensitive), or NULL. */
const struct claude_tool *claude_tool_find(const char *name);

/* The skillfs tool doing the same job as the Claude Code tool name
 * (case-insensitive): "Read" -> "read", "MultiEdit" -> "edit",
 * "AskUserQuestion" -> "ask_user", "Glob" -> "glob", ... NULL when name is
 * no Claude Code tool name, or names one that grants no skillfs tool
 * ("WebSearch", "TodoWrite", "Task", "Agent", "Skill", "NotebookEdit", ...):
 * *missing (may be NULL) is set then. tool_grant_parse (skill.h) applies
 * it, so every allowed-tools and tools: item is mapped. */
const char *tool_from_claude(const char *name, bool *missing);

#endif
