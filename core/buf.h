/* buf: a growable byte buffer, always NUL-terminated after len. */
#ifndef SKILLFS_BUF_H
#define SKILLFS_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data;  /* NULL until the first append; data[len] == '\0' after it */
	size_t len;
	size_t cap;
};

/* Appends n bytes. Returns 0, or -1 (errno ENOMEM) leaving b unchanged. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Appends a NUL-terminated string. Same contract as buf_append. */
int buf_puts(struct buf *b, const char *s);
/* Appends printf-formatted text. Returns 0 or -1 on allocation failure. */
int buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
/* Hands the bytes to the caller (never NULL on success: an empty buffer
 * yields ""), leaving b empty. Returns NULL only on allocation failure. */
char *buf_steal(struct buf *b, size_t *len);
/* Frees the bytes and leaves b empty and reusable. */
void buf_free(struct buf *b);

#endif
