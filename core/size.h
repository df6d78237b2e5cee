/* size: byte counts as people write them in the config file ("64MiB"). */
#ifndef SKILLFS_SIZE_H
#define SKILLFS_SIZE_H

#include <stdint.h>

/* Parses text as a positive byte count: decimal digits, then optionally a
 * unit B, KiB, MiB, GiB or TiB (powers of 1024; case does not matter),
 * with blanks allowed around the number and the unit. Returns 0 with *out
 * set, or -1 (*out untouched) when text is not such a size (a sign, a
 * fraction, another unit such as "MB"), is 0, or is over max. */
int size_parse(const char *text, uint64_t max, uint64_t *out);

#endif
