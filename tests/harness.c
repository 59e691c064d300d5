// SPDX-License-Identifier: GPL-2.0
/*
 * Shared parts of the kgate guest programs: see harness.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

uint8_t stream_byte(uint32_t off)
{
	return (uint8_t)(off * 131u + 7u + (off >> 8));
}

void now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

void deadline_in(struct timespec *ts, int ms)
{
	now(ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int ms_left(const struct timespec *deadline)
{
	struct timespec t;
	long long ms;

	now(&t);
	ms = (long long)(deadline->tv_sec - t.tv_sec) * 1000 +
	     (deadline->tv_nsec - t.tv_nsec) / 1000000;
	return ms < 0 ? 0 : (int)ms;
}

double elapsed_us(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e6 +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

int read_counters(struct counters *c)
{
	char names[8192], values[8192];
	char *n, *v, *sn, *sv;
	FILE *f;
	int found = 0;

	f = fopen("/proc/net/netstat", "re");
	if (!f)
		return -1;
	while (fgets(names, sizeof(names), f)) {
		if (!fgets(values, sizeof(values), f))
			break;
		if (strncmp(names, "TcpExt:", 7))
			continue;
		n = strtok_r(names + 7, "\n ", &sn);
		v = strtok_r(values + 7, "\n ", &sv);
		while (n && v) {
			if (!strcmp(n, "TCPBacklogCoalesce")) {
				c->coalesce = atoll(v);
				found |= 1;
			} else if (!strcmp(n, "TCPBacklogDrop")) {
				c->drop = atoll(v);
				found |= 2;
			} else if (!strcmp(n, "TCPHPHits")) {
				c->hphits = atoll(v);
				found |= 4;
			}
			n = strtok_r(NULL, "\n ", &sn);
			v = strtok_r(NULL, "\n ", &sv);
		}
	}
	fclose(f);
	return found == 7 ? 0 : -1;
}

#define SYSCTL_PATH "/proc/sys/net/ipv4/tcp_backlog_coalesce"

bool has_sysctl(void)
{
	char buf[16] = "";
	int fd = open(SYSCTL_PATH, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0) {
		diag("net.ipv4.tcp_backlog_coalesce: absent (a kernel without the kgate patch)");
		return false;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	diag("net.ipv4.tcp_backlog_coalesce: %s", buf);
	return true;
}

int set_coalesce(int on)
{
	return write_file(SYSCTL_PATH, on ? "1" : "0");
}

int uffd_open(struct uffd_hold *h)
{
	struct uffdio_api api = { .api = UFFD_API };
	int dev;

	h->page = NULL;
	h->pagesz = sysconf(_SC_PAGESIZE);
	h->fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (h->fd < 0) {
		/* Without CAP_SYS_PTRACE: the 6.1+ device node. */
		dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev < 0)
			return -1;
		h->fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (h->fd < 0)
			return -1;
	}
	return ioctl(h->fd, UFFDIO_API, &api);
}

/*
 * A new mapping rather than MADV_DONTNEED on the old one: tiny kernels
 * are often built without madvise().
 */
int uffd_arm(struct uffd_hold *h)
{
	struct uffdio_register reg;

	if (h->page && munmap(h->page, h->pagesz))
		return -1;
	h->page = mmap(NULL, h->pagesz, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->page == MAP_FAILED) {
		h->page = NULL;
		return -1;
	}
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)h->page;
	reg.range.len = h->pagesz;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	return ioctl(h->fd, UFFDIO_REGISTER, &reg);
}

int uffd_wait(struct uffd_hold *h, int ms)
{
	struct pollfd pfd = { .fd = h->fd, .events = POLLIN };
	struct uffd_msg msg;
	struct timespec dl;
	ssize_t n;

	deadline_in(&dl, ms);
	for (;;) {
		n = read(h->fd, &msg, sizeof(msg));
		if (n == sizeof(msg) && msg.event == UFFD_EVENT_PAGEFAULT)
			return 1;
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (!ms_left(&dl))
			return 0;
		if (poll(&pfd, 1, ms_left(&dl)) < 0 && errno != EINTR)
			return -1;
	}
}

void uffd_resolve(struct uffd_hold *h)
{
	static uint8_t zero[65536];
	struct uffdio_copy cp = {
		.dst = (unsigned long)h->page,
		.src = (unsigned long)zero,
		.len = (unsigned long)h->pagesz,
	};

	if (ioctl(h->fd, UFFDIO_COPY, &cp) && errno != EEXIST)
		diag("UFFDIO_COPY: %s", strerror(errno));
}
