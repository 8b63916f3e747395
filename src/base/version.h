/*
 * version: the version every binary prints (--version, logs) and sends (User-Agent, the Node's
 * kubeletVersion): `git describe` of the tree at configure time (CMakeLists.txt), e.g.
 * v0.1.0-12-gabc1234-dirty. Only version.c is compiled with it, so a new commit recompiles one
 * file and a compiler cache keeps every other.
 */
#ifndef KCSI_BASE_VERSION_H
#define KCSI_BASE_VERSION_H

extern const char kcsi_version[];
/* "kcsi/<version>": the User-Agent of kcsi's CSI client */
extern const char kcsi_csi_user_agent[];

#endif
