/* The few XML steps a listing page needs (list.c), shared by ListObjectsV2
 * and Azure's List Blobs (azure_list.c): both stores write their elements
 * without attributes or CDATA, so tags are found by text, and a page is
 * taken only when it is a whole document (see list.c's top). */
#ifndef PINIO_SRC_S3_XML_INTERNAL_H
#define PINIO_SRC_S3_XML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/s3/client.h"

/* The text of the first <tag>...</tag> in [s, e), or NULL. */
const char *pinio__s3_xml_element(const char *s, const char *e, const char *tag, size_t *len);

/* XML text to a malloc'ed string; NULL on a bad entity or out of memory. */
char *pinio__s3_xml_text(const char *s, size_t n);

/* Whether [s, e) is one complete XML document whose root element is <root>:
 * every tag closed in order, the root closed, nothing but white space,
 * comments and processing instructions around it. No DTD or CDATA (no
 * store writes them in a listing). */
bool pinio__s3_xml_complete(const char *s, const char *e, const char *root);

/* Appends the entry of XML-escaped key [xml_key, +len) and decimal size
 * [xml_size, +zl) to (*out, *n), of capacity *cap. PINIO_EFORMAT for a bad
 * size (empty, not digits, over 20 of them) or entity; -ENOMEM. */
int pinio__s3_entry_add(pinio__s3_entry **out, size_t *n, size_t *cap, const char *xml_key,
                        size_t len, const char *xml_size, size_t zl);

#endif
