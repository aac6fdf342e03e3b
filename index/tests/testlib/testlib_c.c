/* Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
 * A C library whose glibc needs differ from the C++ one: pthread_create (in libc
 * with GLIBC_2.34 since glibc 2.34) and getrandom (GLIBC_2.25), so the
 * auditwheel comparison covers a second, newer policy. */
#include <pthread.h>
#include <sys/random.h>

static void* ffpa_worker(void* arg) { return arg; }

int ffpa_testlib_c_run(void) {
  unsigned char buf[4];
  pthread_t t;
  if (getrandom(buf, sizeof buf, 0) < 0) return -1;
  if (pthread_create(&t, 0, ffpa_worker, 0) != 0) return -1;
  return pthread_join(t, 0);
}
