/*
 * jsonscan.h - a first look at an AdmissionReview's bytes before it is
 * parsed into a tree: how many JSON values it holds (a cJSON tree costs
 * about 100 bytes per value: a 3 MiB body of tiny values would take 120
 * MiB), and request.uid, so that a review too large to parse still gets an
 * answer the API server accepts. No allocation; one pass.
 */
#ifndef RA_WEBHOOK_JSONSCAN_H
#define RA_WEBHOOK_JSONSCAN_H

#include <stddef.h>

/* Scans the JSON text s[0..n) (an optional UTF-8 BOM first): returns the
 * number of values it holds (objects, arrays, strings, numbers and
 * literals; keys are not values), counted up to the end of the first
 * value, or up to where the text stops being JSON: never fewer than a JSON
 * parser builds before it gives up (the scan is at least as lenient as
 * cJSON), so a tree parsed after a count of N holds at most N values.
 * Copies the plain string request.uid of the top-level object into uid
 * (uidlen bytes, NUL-terminated; "" when absent, escaped, or too long).
 * Nesting deeper than 1000 levels ends the count (cJSON's own limit). */
long jsonscan_values(const char *s, size_t n, char *uid, size_t uidlen);

#endif
