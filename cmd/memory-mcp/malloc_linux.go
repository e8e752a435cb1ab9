//go:build linux && cgo

package main

/*
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int arena_limited;

// one_malloc_arena runs when the program is loaded, before the Go runtime
// starts a thread: see oneMallocArena.
__attribute__((constructor)) static void one_malloc_arena(void) {
#if defined(__GLIBC__) && !defined(__UCLIBC__) && defined(M_ARENA_MAX)
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") != NULL || (tunables != NULL && strstr(tunables, "arena_max") != NULL)) return;
	arena_limited = mallopt(M_ARENA_MAX, 1) == 1;
#endif
}

static int malloc_arena_limited(void) { return arena_limited; }

// malloc_arenas counts glibc's arenas from malloc_info's report, -1 where
// there is none.
static int malloc_arenas(void) {
#if defined(__GLIBC__) && !defined(__UCLIBC__)
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) return -1;
	int ok = malloc_info(0, f) == 0;
	if (fclose(f) != 0 || buf == NULL) ok = 0;
	int n = 0;
	for (char *p = buf; ok && (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
	free(buf);
	return ok ? n : -1;
#else
	return -1;
#endif
}
*/
import "C"

// oneMallocArena reports whether the C allocator, which SQLite allocates
// through, keeps one arena for the whole process: it does unless the
// MALLOC_ARENA_MAX variable or the GLIBC_TUNABLES variable mentions a
// limit of its own (glibc on Linux only). glibc gives each thread that
// allocates or frees an arena of its own, up to eight per core, and the
// Go runtime runs C calls on whichever thread is free, so a stdio
// server's SQLite memory ended up spread over seven arenas, each keeping
// free pages of its own: 3.6 MiB resident where one arena holds 2.9. The
// limit is set when the program is loaded: a thread that has an arena
// keeps it, and every thread the runtime starts frees, first thing, the
// block its arguments came in, before main runs. The stdio server runs
// on one processor (see oneProcessor), so there is next to no lock to
// contend for; the team server's SQLite calls run on several, and with 8
// HTTP clients it answered 1-5 % fewer requests a second in two runs,
// within the spread of such runs.
func oneMallocArena() bool { return C.malloc_arena_limited() == 1 }

// mallocArenas is how many arenas the C allocator has, -1 if it cannot
// tell.
func mallocArenas() int { return int(C.malloc_arenas()) }
