/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What backlog_faults.c wraps (ld --wrap=SYMBOL): the test's calls of
 * SYMBOL reach __wrap_SYMBOL, and __real_SYMBOL is the function itself.
 */
#ifndef BACKLOG_FAULTS_H
#define BACKLOG_FAULTS_H

#include <sys/types.h>

#include "backlog_peer.h"

ssize_t __real_write(int fd, const void *buf, size_t n);
int __real_nstat_read(struct nstat *n);
int __real_uffd_wait(struct uffd_hold *h, int ms);
int __real_uffd_resolve(struct uffd_hold *h);

ssize_t __wrap_write(int fd, const void *buf, size_t n);
int __wrap_nstat_read(struct nstat *n);
int __wrap_uffd_wait(struct uffd_hold *h, int ms);
int __wrap_uffd_resolve(struct uffd_hold *h);

#endif /* BACKLOG_FAULTS_H */
