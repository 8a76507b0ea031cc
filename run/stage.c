/*
 * stage.c - the stage gate's stand-in (see stage.h) until the coordination
 * through the API lands: no struct stage is ever made, so the engine, which
 * treats NULL as an immediate STAGE_GO, never calls these.
 */
#include "run/stage.h"

#include <stddef.h>

void stage_acquire(struct stage *s, const char *hash, void (*cb)(void *ud, enum stage_verdict),
                   void *ud)
{
    (void)s;
    (void)hash;
    (void)cb;
    (void)ud;
}

void stage_release(struct stage *s, const char *hash, int ok, const char *reason)
{
    (void)s;
    (void)hash;
    (void)ok;
    (void)reason;
}
