/*
 * up/precheck: what kcsi up checks before it starts anything, so that a mistake on the command
 * line is named at once rather than met as a component that crashes until it is given up.
 */
#ifndef KCSI_UP_PRECHECK_H
#define KCSI_UP_PRECHECK_H

/*
 * Root for the loop driver (driver_cmd NULL), dir a directory when it exists, listen an address
 * this process may bind now (NULL: no kube-emulator), driver_cmd's first word an executable
 * (when it is a plain word). Returns 0, or -1 with the reason on stderr.
 */
int up_precheck(const char *dir, const char *listen, const char *driver_cmd);
/* Warns on stderr about files an earlier run left in dir/pool (volume images). */
void up_warn_leftovers(const char *dir);

#endif
