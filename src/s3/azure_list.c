/* Azure's List Blobs page (restype=container&comp=list): its <Blob>
 * elements' Name and Properties/Content-Length, and NextMarker. The loop
 * over pages, with its marker-given-twice refusal, is pinio__s3_list()'s.
 *
 * Why NextMarker must be there exactly once: Azure writes it on every page,
 * empty (<NextMarker />) on the last one. A page without it was cut short
 * (or is not a listing), and reading its absence as "last page" would drop
 * the blobs past the cut without a word. A name Azure had to encode
 * (<Name Encoded="true">, characters XML cannot carry) is not found as a
 * plain <Name> and the page is refused rather than half-read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/azure.h"
#include "src/s3/xml_internal.h"

/* How many NextMarker elements [s, e) holds ("<NextMarker>" or the empty
 * "<NextMarker/>"), and the first one's text (NULL when empty). */
static int next_markers(const char *s, const char *e, const char **text, size_t *tl)
{
    static const char tag[] = "<NextMarker";
    int count = 0;
    *text = NULL;
    *tl = 0;
    for (const char *p = s; (p = memmem(p, (size_t)(e - p), tag, sizeof(tag) - 1));) {
        p += sizeof(tag) - 1;
        if (p < e && *p == '>') {
            const char *end = memmem(p, (size_t)(e - p), "</NextMarker>", 13);
            if (!end)
                return -1;
            if (!count++ && end > p + 1) {
                *text = p + 1;
                *tl = (size_t)(end - p - 1);
            }
        } else if (p < e && (*p == '/' || *p == ' ')) {
            count++;
        }
    }
    return count;
}

int pinio__az_list_parse(const char *xml, size_t len, pinio__s3_entry **out, size_t *n,
                         char **next)
{
    *next = NULL;
    const char *s = xml, *e = xml + len;
    if (!pinio__s3_xml_complete(s, e, "EnumerationResults"))
        return PINIO_EFORMAT;
    const char *marker;
    size_t ml;
    if (next_markers(s, e, &marker, &ml) != 1)
        return PINIO_EFORMAT;
    size_t cap = *n, bl;
    for (const char *b; (b = pinio__s3_xml_element(s, e, "Blob", &bl)); s = b + bl) {
        const char *be = b + bl, *name, *props, *z;
        size_t nl, pl, zl;
        if (!(name = pinio__s3_xml_element(b, be, "Name", &nl)) ||
            !(props = pinio__s3_xml_element(b, be, "Properties", &pl)) ||
            !(z = pinio__s3_xml_element(props, props + pl, "Content-Length", &zl)))
            return PINIO_EFORMAT;
        int rc = pinio__s3_entry_add(out, n, &cap, name, nl, z, zl);
        if (rc < 0)
            return rc;
    }
    if (marker && !(*next = pinio__s3_xml_text(marker, ml)))
        return PINIO_EFORMAT;
    return 0;
}
