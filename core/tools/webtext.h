/* webtext: web content as text for the model (the webfetch tool): which
 * media types are text, their charsets converted to UTF-8, and HTML
 * reduced to readable text. Pure functions of their input. */
#ifndef SKILLFS_WEBTEXT_H
#define SKILLFS_WEBTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* Whether a media type (a Content-Type value; parameters and case are
 * ignored) is shown as text: text/\*, application/json, application/xml,
 * application/javascript (and x-javascript, ecmascript), and any
 * \*+xml or \*+json. */
bool webtext_type_is_text(const char *type);

/* Appends the readable text of an HTML document (UTF-8) to out: script,
 * style, head (and title, noscript, template) dropped, comments and tags
 * removed, block elements turned into line breaks (headings marked with
 * '#', list items with "- "), entities decoded (&amp; &lt; &gt; &quot;
 * &#39; &#NNN; &#xHH; &nbsp; and the common named ones), white space
 * collapsed except in <pre>. Returns 0, or -1 on ENOMEM. */
int webtext_html(const char *html, size_t n, struct buf *out);

/* Appends p[0..n), in charset (a label as in Content-Type; any case), to
 * out as UTF-8: UTF-8 and US-ASCII as they are, ISO-8859-1, latin1 and
 * windows-1252 as windows-1252 (as browsers read them), any other label
 * iconv knows through iconv, each byte it cannot convert becoming U+FFFD.
 * Returns 0; 1 when the label is unknown (the bytes are appended as they
 * are, for the caller to replace what is not UTF-8); -1 on ENOMEM. */
int webtext_to_utf8(const char *charset, const char *p, size_t n, struct buf *out);

/* The media type of a Content-Type value into out (size bytes): lower
 * case, without parameters; "" for NULL. */
void webtext_media_type(const char *content_type, char *out, size_t size);

/* Appends the text of a response body of the given Content-Type (may be
 * NULL) to out: its charset read from content_type, else from a byte
 * order mark (which wins over any label), else from a <meta> or <?xml?>
 * declaration near its start, else UTF-8 when the bytes are valid UTF-8,
 * else windows-1252; converted with webtext_to_utf8, and for text/html
 * and application/xhtml+xml reduced with webtext_html. Returns 0; 1 when
 * the charset is unknown (its label copied into unknown, size bytes; the
 * bytes kept as they are); -1 on ENOMEM. */
int webtext_decode(const char *content_type, const char *p, size_t n, struct buf *out,
		   char *unknown, size_t size);

#endif
