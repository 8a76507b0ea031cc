/*
 * hash_test.h - the hash's test seams. Only tests include this header; the
 * product never sets them. They are internal (hash__), kept out of hash.h so
 * that the public contract shows only what callers may use.
 */
#ifndef RA_HASH_TEST_H
#define RA_HASH_TEST_H

/* Test seam: when set, called after each walk, before the files are read,
 * with the attempt number (0 for the first). Tests use it to swap a volume
 * mid-computation. Never set outside tests. */
extern void (*hash__test_after_walk)(unsigned attempt);

/* Test seam: when set, directory-entry types are ignored (as on a file
 * system that reports DT_UNKNOWN), so every entry is stat'ed. */
extern int hash__test_no_dtype;

#endif
