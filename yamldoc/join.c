/*
 * join.c - the block scalar at the end of a YAML text that lacks a
 * final line break, rewritten to strip chomping (see join.h).
 */
#include "yamldoc/join.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "yamldoc/tree.h"

/* The last node of a document's content: the last item or value of the
 * block collections it ends in. */
static const struct yamltree_node *last_node(const struct yamltree_node *n)
{
    while (n && (n->kind == YAMLTREE_MAP || n->kind == YAMLTREE_SEQ) && !n->flow && n->n > 0)
        n = n->kids[n->n - 1];
    return n;
}

/* The offset of the '|' or '>' of the block scalar n (after its anchor or
 * tag), or len. */
static size_t indicator_at(const char *text, size_t len, const struct yamltree_node *n)
{
    size_t i = n->start;
    while (i < len && text[i] != '|' && text[i] != '>') {
        if (text[i] == '&' || text[i] == '!')
            while (i < len && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') i++;
        else if (text[i] == ' ' || text[i] == '\t')
            i++;
        else
            return len;
    }
    return i;
}

/* The chomping indicator of the block scalar whose '|' or '>' is at at:
 * '+', '-' or 0 (clip), and its offset in *h (where a '-' would go). */
static char chomping(const char *text, size_t len, size_t at, size_t *h)
{
    size_t i = at + 1; /* an indentation digit and the chomping, in either order */
    while (i < len && ((text[i] >= '1' && text[i] <= '9') || text[i] == '+' || text[i] == '-')) {
        if (text[i] == '+' || text[i] == '-') {
            *h = i;
            return text[i];
        }
        i++;
    }
    *h = at + 1;
    return 0;
}

int yamljoin_safe_end(const char *text, size_t len, char **out, size_t *outlen)
{
    struct yamltree t;
    struct yamltree_error e;
    *out = NULL;
    *outlen = 0;
    if (len == 0 || text[len - 1] == '\n' || text[len - 1] == '\r') return 0;
    int rc = yamltree_parse(text, len, &t, &e);
    if (rc < 0) return rc == -ENOMEM ? rc : 0;
    const struct yamltree_node *n = t.ndocs ? last_node(t.docs[t.ndocs - 1].root) : NULL;
    size_t at = len, c = n ? yamltree_content_end(n, text) : len;
    if (n && n->kind == YAMLTREE_SCALAR &&
        (n->style == YAML_LITERAL_SCALAR_STYLE || n->style == YAML_FOLDED_SCALAR_STYLE) &&
        !memchr(text + c, '#', len - c))
        at = indicator_at(text, len, n);
    yamltree_free(&t);
    if (at >= len) return 0;
    size_t h, last = len; /* the start of the text's last line */
    while (last > 0 && text[last - 1] != '\n') last--;
    char chomp = chomping(text, len, at, &h);
    int blank_end = last > c; /* the last line is blank: the scalar's trailing breaks before it */
    if (chomp == '-' || (blank_end && chomp == 0)) return 0; /* a break changes nothing */
    char *o = malloc(len + 2);
    if (!o) return -ENOMEM;
    if (blank_end) { /* keep: the blank partial line goes, the text then ends in its break */
        memcpy(o, text, last);
        *outlen = last;
    } else if (chomp == '+') { /* keep, content last: its '+' becomes '-' */
        memcpy(o, text, len);
        o[h] = '-';
        *outlen = len;
    } else { /* clip, content last: a '-' after the indicator */
        memcpy(o, text, h);
        o[h] = '-';
        memcpy(o + h + 1, text + h, len - h);
        *outlen = len + 1;
    }
    o[*outlen] = '\0';
    *out = o;
    return 1;
}
