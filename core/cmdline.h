/* cmdline: a command string split into argv with plain quoting rules. */
#ifndef SKILLFS_CMDLINE_H
#define SKILLFS_CMDLINE_H

#include "strlist.h"

int cmdline_split(const char *cmd, struct strlist *argv, char **err);

#endif
