/* json_text: JSON values as the text of a file in the mount. */
#ifndef SKILLFS_JSON_TEXT_H
#define SKILLFS_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

/* Appends j, dumped with jansson flags (e.g. JSON_INDENT(2)), and a
 * newline to out. Returns 0, or -1 when j is NULL or memory runs out
 * (out is then unchanged). */
int json_text_append(struct buf *out, const json_t *j, size_t flags);

#endif
