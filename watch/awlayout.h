/*
 * awlayout.h - what the kubelet's AtomicWriter layout says at its commit
 * point (docs/kubernetes-api.md#the-kubelets-atomicwriter).
 *
 * The writer fills a new timestamped directory, then renames "..data_tmp"
 * onto "..data" (step 9, the commit: the content is complete), then creates
 * the top-level link of each new key (step 10), unlinks the links of removed
 * keys (step 11) and removes the old directory (step 12). What a reader
 * sees through the top-level names is the committed content once every
 * first path element under "..data/" has its top-level name: a link of a
 * removed key only dangles until step 11, and a dangling link is no file.
 */
#ifndef RA_AWLAYOUT_H
#define RA_AWLAYOUT_H

/* Is the volume directory `root` an AtomicWriter layout whose committed
 * content is visible through its top-level names? 1: yes (every entry of
 * root/..data/ has a top-level name in root); 0: not yet (a new key's link
 * is missing: step 10 has not run); <0: not such a layout (-ENOENT: no
 * "..data", -ENOTDIR: "..data" is not a directory, or the error that kept
 * root or root/..data from being read). Reads two directories, never a file;
 * the root's entries are looked at with lstat semantics (a dangling link
 * counts as present: step 11 removes it). */
int aw_layout_complete(const char *root);

#endif
