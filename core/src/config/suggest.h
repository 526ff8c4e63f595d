/* "Did you mean ...?" for unknown config keys, option keys and enum values. */
#ifndef FSDPC_CONFIG_SUGGEST_H
#define FSDPC_CONFIG_SUGGEST_H

/* Optimal-string-alignment distance (Levenshtein plus adjacent swaps), case
 * sensitive. Strings longer than 127 bytes compare as very far apart. */
int fsdpc__edit_distance(const char *a, const char *b);

/* The candidate closest to word, or NULL when none is close enough to be a
 * plausible typo (distance at most 2, or a third of the word's length). */
const char *fsdpc__did_you_mean(const char *word, const char *const *candidates, int n);

#endif
